//! Re-rendering the recorded results committed under `docs/bench/` gives the committed
//! reports, charts and benchmark sections (docs/benchmarks.md) byte for byte: the lab's data model and report
//! writers may change, what they publish from the same figures may not.
//!
//! The ping-pong, echo and e2e pages have no recorded results in `docs/bench/`; for them,
//! `tests/fixtures/net-SUITE.old.json` are synthetic results in the lab's first file format
//! (flat `NetRecord`s, every cell and the peak sweep, three runs each) and
//! `net-SUITE.md` what the lab of that format rendered from them.

use std::path::{Path, PathBuf};

use y3_lab::record::Results;
use y3_lab::report::{replace_section, write_report};

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

    // The README's benchmark sections live in docs/benchmarks.md (links relative to docs/).
    let readme = std::fs::read_to_string(repo().join("docs/benchmarks.md")).unwrap();
    let rewritten = replace_section(&readme, name, &results.summary("bench")).unwrap();
    assert!(
        rewritten == readme,
        "docs/benchmarks.md section {name} differs"
    );
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
