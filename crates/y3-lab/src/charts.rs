//! SVG charts drawn with plotters (SVG backend: text is written as `<text>` elements, so no
//! system fonts are needed).
//!
//! One shape serves every chart: grouped bars, one group per case (or position, or op),
//! one bar per implementation, on a linear or logarithmic value axis. It mirrors the
//! report's figures: ns/op bars per case (its figure 3.1/3.3) and speed-up ratios (3.2/3.4).

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// A grouped bar chart.
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// Title above the plot.
    pub title: String,
    /// Value-axis label.
    pub y_label: String,
    /// Group labels along the x axis.
    pub groups: Vec<String>,
    /// `(name, one value per group)`; missing values leave a gap.
    pub series: Vec<(String, Vec<Option<f64>>)>,
    /// Logarithmic value axis.
    pub log: bool,
}

impl BarChart {
    /// Whether there is anything to draw.
    pub fn is_empty(&self) -> bool {
        self.values().next().is_none()
    }

    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.series
            .iter()
            .flat_map(|(_, v)| v.iter().flatten().copied())
            .filter(|v| v.is_finite() && *v > 0.0)
    }
}

/// Distinct colors, indexed like [`crate::report::ORDER`]: y3 in reds and oranges,
/// protobuf/rkyv/postcard in blues, JSON in greens, Go in greys and pinks.
const PALETTE: [(u8, u8, u8); 23] = [
    (214, 39, 40),   // y3-derive
    (31, 119, 180),  // prost
    (214, 39, 40),   // y3-observe
    (255, 127, 14),  // y3-stream7
    (227, 119, 194), // y3-get
    (140, 86, 75),   // y3-decode
    (31, 119, 180),  // protobuf-scan
    (174, 199, 232), // prost-decode
    (23, 190, 207),  // rkyv-checked
    (57, 59, 121),   // postcard
    (44, 160, 44),   // sonic-rs-get
    (152, 223, 138), // simd-json-tape
    (188, 189, 34),  // serde_json-typed
    (219, 219, 141), // serde_json-value
    (148, 103, 189), // rmp-serde
    (127, 127, 127), // go-y3-scan
    (30, 30, 30),    // go-y3-report
    (199, 199, 199), // go-y3-decode
    (197, 176, 213), // go-gjson
    (247, 182, 210), // go-jsonparser
    (255, 152, 150), // go-json-map
    (188, 189, 34),  // serde_json
    (23, 190, 207),  // mqtt-rumqttc
];

fn color(index: usize) -> RGBAColor {
    match PALETTE.get(index) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => Palette99::pick(index).to_rgba(),
    }
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("chart: {e:?}")
}

/// Draws `chart` into an SVG file.
///
/// # Errors
/// IO errors, or an empty chart.
pub fn draw(chart: &BarChart, path: &Path) -> Result<()> {
    if chart.is_empty() {
        return Err(anyhow!("chart {:?} has no values", chart.title));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let max = chart.values().fold(0.0, f64::max);
    let min = chart.values().fold(f64::INFINITY, f64::min);
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let n = chart.groups.len();
    let k = chart.series.len().max(1);
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(80);
    let bar_w = 0.8 / k as f64;
    let x_of = |group: usize, series: usize| group as f64 + 0.1 + series as f64 * bar_w;
    let mut rects = Vec::new();
    if chart.log {
        let lo = 10f64.powf(min.log10().floor());
        let hi = 10f64.powf(max.log10().ceil() + 0.3);
        let mut c = builder
            .build_cartesian_2d(0f64..n as f64, (lo..hi).log_scale())
            .map_err(err)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(&chart.y_label)
            .y_label_formatter(&|v| format_value(*v))
            .draw()
            .map_err(err)?;
        for (si, (name, values)) in chart.series.iter().enumerate() {
            let color = color(crate::report::color_of(name));
            let bars: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(gi, v)| v.filter(|v| *v > 0.0).map(|v| (gi, v)))
                .map(|(gi, v)| {
                    Rectangle::new(
                        [(x_of(gi, si), lo), (x_of(gi, si) + bar_w * 0.9, v)],
                        color.filled(),
                    )
                })
                .collect();
            c.draw_series(bars)
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        for gi in 0..n {
            rects.push(c.backend_coord(&(gi as f64 + 0.5, lo)));
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
    } else {
        let hi = max * 1.15;
        let mut c = builder
            .build_cartesian_2d(0f64..n as f64, 0f64..hi)
            .map_err(err)?;
        c.configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc(&chart.y_label)
            .y_label_formatter(&|v| format_value(*v))
            .draw()
            .map_err(err)?;
        for (si, (name, values)) in chart.series.iter().enumerate() {
            let color = color(crate::report::color_of(name));
            let bars: Vec<_> = values
                .iter()
                .enumerate()
                .filter_map(|(gi, v)| v.map(|v| (gi, v)))
                .map(|(gi, v)| {
                    Rectangle::new(
                        [(x_of(gi, si), 0.0), (x_of(gi, si) + bar_w * 0.9, v)],
                        color.filled(),
                    )
                })
                .collect();
            c.draw_series(bars)
                .map_err(err)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        for gi in 0..n {
            rects.push(c.backend_coord(&(gi as f64 + 0.5, 0.0)));
        }
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
    }
    let style =
        TextStyle::from(("sans-serif", 15).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (label, (x, y)) in chart.groups.iter().zip(rects) {
        root.draw(&Text::new(label.as_str(), (x, y + 8), style.clone()))
            .map_err(err)?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// `12`, `1.5k`, `2.3M`, `0.25` for axis labels.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        let s = format!("{:.2}", v / 1e6);
        format!("{}M", s.trim_end_matches('0').trim_end_matches('.'))
    } else if a >= 1e3 {
        let s = format!("{:.2}", v / 1e3);
        format!("{}k", s.trim_end_matches('0').trim_end_matches('.'))
    } else if a >= 1.0 || a == 0.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_log_and_linear_svgs_with_text() {
        let dir = std::env::temp_dir().join(format!("y3-bench-charts-{}", std::process::id()));
        for log in [true, false] {
            let chart = BarChart {
                title: "ns/op".into(),
                y_label: "ns".into(),
                groups: vec!["C03-K02".into(), "C63-K32".into()],
                series: vec![
                    ("y3-observe".into(), vec![Some(5.0), Some(20.0)]),
                    ("go-json-map".into(), vec![None, Some(20000.0)]),
                ],
                log,
            };
            let path = dir.join(format!("c{log}.svg"));
            draw(&chart, &path).unwrap();
            let svg = std::fs::read_to_string(&path).unwrap();
            assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
            assert!(
                svg.contains("C63-K32") && svg.contains("go-json-map") && svg.contains("<rect")
            );
        }
        let empty = BarChart {
            title: "x".into(),
            y_label: String::new(),
            groups: vec![],
            series: vec![],
            log: false,
        };
        assert!(draw(&empty, &dir.join("e.svg")).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn formats_axis_values() {
        assert_eq!(format_value(12.0), "12");
        assert_eq!(format_value(1500.0), "1.5k");
        assert_eq!(format_value(0.25), "0.250");
        assert_eq!(format_value(2_300_000.0), "2.3M");
    }
}
