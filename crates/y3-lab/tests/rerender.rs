//! Re-rendering the recorded results committed under `docs/bench/` gives the committed
//! reports and charts byte for byte: every page there is rendered from the JSON beside it
//! (`NAME.json` next to `NAME.md`), and the lab's data model and report writers may change,
//! what they publish from the same figures may not. (README.md carries no generated
//! section: the benchmark tables live in docs/bench, and the scripts no longer pass
//! `--readme`.)
//!
//! `tests/fixtures/net-SUITE.old.json` are synthetic results in the lab's first file format
//! (flat `NetRecord`s) and `net-SUITE.md` what the lab of that format rendered from them:
//! they check that an old recording is still read and upgraded, not any published page.

use std::path::{Path, PathBuf};

use y3_lab::record::Results;
use y3_lab::report::write_report;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rerender(json: &str) {
    let docs = repo().join("docs/bench");
    let results = Results::read_json(&docs.join(json)).unwrap();
    let name = results.name();
    let (markdown, charts, _) = results.render();
    let committed = std::fs::read_to_string(docs.join(format!("{name}.md"))).unwrap();
    assert!(
        markdown == committed,
        "{name}.md differs from the committed report"
    );

    let dir = std::env::temp_dir().join(format!("y3-lab-rerender-{name}-{}", std::process::id()));
    let files = write_report(&dir, name, &markdown, &charts).unwrap();
    assert!(files.len() > 1, "{name}: no chart drawn");
    for file in files {
        let committed = std::fs::read(docs.join(file.file_name().unwrap())).unwrap();
        assert!(
            std::fs::read(&file).unwrap() == committed,
            "{} differs from the committed file",
            file.display()
        );
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// Every report in docs/bench has its recording beside it, and every recording its report.
#[test]
fn every_page_in_docs_bench_has_its_recording() {
    let docs = repo().join("docs/bench");
    let mut pages = 0;
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if stem == "README" {
            continue;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("md") => {
                pages += 1;
                assert!(
                    docs.join(format!("{stem}.json")).is_file(),
                    "docs/bench/{stem}.md has no recorded {stem}.json beside it"
                );
            }
            Some("json") => assert!(
                docs.join(format!("{stem}.md")).is_file(),
                "docs/bench/{stem}.json has no page"
            ),
            _ => {}
        }
    }
    assert!(pages >= 7, "{pages} pages");
}

#[test]
fn codec_report_rerenders_byte_identical() {
    rerender("codec.json");
}

#[test]
fn serde_report_rerenders_byte_identical() {
    rerender("serde.json");
}

#[test]
fn yomo_report_rerenders_byte_identical() {
    rerender("net-yomo.json");
}

#[test]
fn federation_report_rerenders_byte_identical() {
    rerender("net-federation.json");
}

#[test]
fn quic_report_rerenders_byte_identical() {
    rerender("net-quic.json");
}

#[test]
fn pingpong_report_rerenders_byte_identical() {
    rerender("net-pingpong.json");
}

#[test]
fn echo_report_rerenders_byte_identical() {
    rerender("net-echo.json");
}

#[test]
fn e2e_report_rerenders_byte_identical() {
    rerender("net-e2e.json");
}

/// A results file of the lab's first format, upgraded when read, renders as that lab did.
fn rerender_fixture(suite: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let results = Results::read_json(&dir.join(format!("net-{suite}.old.json"))).unwrap();
    let (markdown, _, _) = results.render();
    let expected = std::fs::read_to_string(dir.join(format!("net-{suite}.md"))).unwrap();
    assert!(markdown == expected, "net-{suite}.md differs:\n{markdown}");
}

#[test]
fn pingpong_fixture_rerenders_as_before() {
    rerender_fixture("pingpong");
}

#[test]
fn echo_fixture_rerenders_as_before() {
    rerender_fixture("echo");
}

#[test]
fn e2e_fixture_rerenders_as_before() {
    rerender_fixture("e2e");
}

/// A federation recording made before the NATS-hop row (`net-federation.pre-hop.json`, the
/// page docs/bench had from it: `.pre-hop.md`) renders its rows and figures as it did: every
/// line of the old throughput table is in the new page, no hop row appears, and issue 28's
/// p50 target, which needs the hop, is not measured (where issue 15's "≤ 2×" stood).
#[test]
fn federation_recording_without_the_hop_row_renders_as_before() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let results = Results::read_json(&dir.join("net-federation.pre-hop.json")).unwrap();
    let (markdown, charts, targets) = results.render();
    let old = std::fs::read_to_string(dir.join("net-federation.pre-hop.md")).unwrap();
    let table = old
        .split("## Throughput and latency")
        .nth(1)
        .and_then(|rest| rest.split("## ").next())
        .unwrap();
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with('|')).collect();
    assert!(rows.len() > 5, "{table}");
    for row in rows {
        assert!(markdown.contains(row), "{row} is gone:\n{markdown}");
    }
    assert!(!markdown.contains("| `nats-hop` |"), "{markdown}");
    assert!(!markdown.contains("`nats-hop` p50"), "{markdown}");
    assert_eq!(targets[0].measured, "not measured", "{:?}", targets[0]);
    assert_eq!(targets[0].met, None);
    assert_eq!(charts.len(), 2);
}
