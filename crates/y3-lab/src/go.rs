//! The Go side: `bench/go`, run as a subprocess on the identical bytes.
//!
//! The lab writes every data set (Y3 hex, JSON text, key order, expected value) and the
//! timing settings to `<work dir>/codec-data.json`, then runs
//!
//! ```text
//! go run . -data <file> -benchtime <sample> -samples N -warmup <d> -threads T -modes serial,parallel
//! ```
//!
//! in `bench/go`. The Go program checks every implementation's value on every data set
//! (and that the ascending Y3 packets are byte-identical to what y3-codec-golang v1.7.3
//! encodes), times them with the same method as [`crate::measure`] (median of batches, wall
//! clock and process CPU time, one goroutine per core in parallel mode), and prints one
//! flat JSON row per line (read with [`Record::from_flat`]); a line `{"go_version": ...}` comes first and `{"note": ...}`
//! lines report anything skipped.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::codec::CodecOptions;
use crate::data::{Dataset, Scalar};
use crate::record::Record;

/// The Go rows.
pub const IMPLS: [&str; 6] = [
    "go-y3-report",
    "go-y3-decode",
    "go-y3-scan",
    "go-json-map",
    "go-gjson",
    "go-jsonparser",
];

/// What each Go row does, for the report.
pub const ABOUT: [(&str, &str); 6] = [
    (
        "go-y3-report",
        "the report's harness method on y3-codec-golang v1.7.3: byte-by-byte walk that \
         allocates per TLV, recursing past each other key, DecodePrimitivePacket on the match",
    ),
    (
        "go-y3-decode",
        "y3-codec-golang v1.7.3 DecodeNodePacket of the whole packet, then find the key",
    ),
    (
        "go-y3-scan",
        "a plain Go skip-scan over the Y3 headers (no allocation)",
    ),
    (
        "go-json-map",
        "the report's JSON method: encoding/json Unmarshal into map[string]interface{}, find",
    ),
    (
        "go-gjson",
        "github.com/tidwall/gjson GetBytes(json, \"kK\")",
    ),
    (
        "go-jsonparser",
        "github.com/buger/jsonparser Get(json, \"kK\")",
    ),
];

#[derive(Serialize)]
struct DataFile<'a> {
    datasets: Vec<GoDataset<'a>>,
}

#[derive(Serialize)]
struct GoDataset<'a> {
    case: String,
    order: &'a str,
    position: String,
    key_pos: usize,
    count: u32,
    key: u32,
    keys: &'a [u32],
    expected_type: &'static str,
    expected: String,
    y3_hex: String,
    json: &'a str,
}

fn expected_text(s: &Scalar) -> String {
    match s {
        Scalar::Str(v) => v.as_str().to_owned(),
        other => other.json(),
    }
}

/// Writes the data file the Go side reads.
///
/// # Errors
/// IO errors.
pub fn write_data(sets: &[Dataset], path: &Path) -> Result<()> {
    let datasets = sets
        .iter()
        .map(|d| GoDataset {
            case: d.case(),
            order: d.order.name(),
            position: d.position(),
            key_pos: d.key_pos,
            count: d.count,
            key: d.key,
            keys: &d.keys,
            expected_type: d.expected.type_name(),
            expected: expected_text(&d.expected),
            y3_hex: d.y3.iter().map(|b| format!("{b:02x}")).collect(),
            json: std::str::from_utf8(&d.json).unwrap_or_default(),
        })
        .collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string(&DataFile { datasets })?)?;
    Ok(())
}

/// Runs the Go side, appending its records and notes; returns `go version`.
///
/// # Errors
/// When `go` is missing, the module is missing, or the run fails.
pub fn run(
    sets: &[Dataset],
    opts: &CodecOptions,
    bar: &ProgressBar,
    records: &mut Vec<Record>,
    notes: &mut Vec<String>,
) -> Result<String> {
    let version = Command::new("go")
        .arg("version")
        .output()
        .context("`go` is not on the PATH")?;
    if !version.status.success() {
        bail!("`go version` failed");
    }
    if !opts.go_dir.join("go.mod").exists() {
        bail!("no Go module at {}", opts.go_dir.display());
    }
    let data = opts.work_dir.join("codec-data.json");
    write_data(sets, &data)?;
    let data = std::fs::canonicalize(&data)?;
    let s = &opts.settings;
    let modes: Vec<&str> = opts.modes.iter().map(|m| m.name()).collect();
    bar.set_message("Go: building bench/go");
    let mut child = Command::new("go")
        .current_dir(&opts.go_dir)
        .args(["run", "."])
        .arg("-data")
        .arg(&data)
        .arg("-benchtime")
        .arg(format!("{}us", s.sample.as_micros()))
        .arg("-warmup")
        .arg(format!("{}us", s.warmup.as_micros()))
        .arg("-samples")
        .arg(s.samples.to_string())
        .arg("-threads")
        .arg(s.threads.to_string())
        .arg("-modes")
        .arg(modes.join(","))
        .arg("-only")
        .arg(opts.only.join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting `go run`")?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut go_version = String::from_utf8_lossy(&version.stdout).trim().to_string();
    let stdout = child.stdout.take().context("stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        let value: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if let Some(v) = value.get("go_version").and_then(|v| v.as_str()) {
            go_version = v.to_string();
        } else if let Some(n) = value.get("note").and_then(|v| v.as_str()) {
            notes.push(format!("go: {n}"));
        } else if value.get("impl").is_some() {
            let record = Record::from_flat(value)?;
            bar.set_message(format!(
                "{} {} {}",
                record.case,
                record.text(crate::record::Dim::Order),
                record.implementation
            ));
            bar.inc(1);
            records.push(record);
        }
    }
    let status = child.wait()?;
    let errors = errors.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = errors.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "`go run` in {} failed: {}",
            opts.go_dir.display(),
            tail.join("\n")
        );
    }
    Ok(go_version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_file_carries_the_bytes_and_expected_values() {
        let sets = vec![Dataset::ascending(3, 2).unwrap()];
        let dir = std::env::temp_dir().join(format!("y3-bench-go-{}", std::process::id()));
        let path = dir.join("codec-data.json");
        write_data(&sets, &path).unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let d = &v["datasets"][0];
        assert_eq!(d["y3_hex"], "800b0101610202ff3f03028100");
        assert_eq!(d["json"], r#"{"k1":"a","k2":-65,"k3":128}"#);
        assert_eq!(
            (d["expected_type"].as_str(), d["expected"].as_str()),
            (Some("int32"), Some("-65"))
        );
        std::fs::remove_dir_all(dir).unwrap();
        assert_eq!(expected_text(&Scalar::str("a")), "a");
        assert_eq!(
            expected_text(&Scalar::U64(u64::MAX)),
            "18446744073709551615"
        );
    }
}
