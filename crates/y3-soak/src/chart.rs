//! The RSS-over-time chart (SVG, plotters), router restarts marked.

use std::path::Path;

use plotters::prelude::*;

/// One RSS sample: seconds since the start, MiB, router lifetime.
pub type Sample = (f64, f64, usize);

/// Draws `samples` to `path`.
///
/// # Errors
/// When the file cannot be written.
pub fn rss(samples: &[Sample], path: &Path) -> anyhow::Result<()> {
    let end = samples.last().map_or(1.0, |s| s.0).max(1.0);
    let top = samples.iter().map(|s| s.1).fold(1.0, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "y3 serve under the soak: resident memory",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..end, 0.0..top)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("RSS (MiB)")
        .draw()
        .map_err(draw_error)?;
    let lifetimes = samples.iter().map(|s| s.2).max().unwrap_or(0);
    for lifetime in 0..=lifetimes {
        let points: Vec<(f64, f64)> = samples
            .iter()
            .filter(|s| s.2 == lifetime)
            .map(|s| (s.0, s.1))
            .collect();
        let series = chart
            .draw_series(LineSeries::new(points, BLUE.stroke_width(2)))
            .map_err(draw_error)?;
        if lifetime == 0 {
            series
                .label("router RSS (a new line per restart)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLUE));
        }
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(draw_error)?;
    root.present().map_err(draw_error)?;
    Ok(())
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e:?}")
}
