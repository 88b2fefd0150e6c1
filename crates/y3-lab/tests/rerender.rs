//! Re-rendering the recorded results committed under `docs/bench/` gives the committed
//! reports, charts and README sections byte for byte: the lab's data model and report
//! writers may change, what they publish from the same figures may not.

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

    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let rewritten = replace_section(&readme, name, &results.summary("docs/bench")).unwrap();
    assert!(rewritten == readme, "README section {name} differs");
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
