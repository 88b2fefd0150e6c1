//! The `y3` binary checked from outside: exit codes, stdout and stderr.
//!
//! The reference vectors in `testdata/vectors/` drive `encode` and `get`: every primitive,
//! node and stream vector is rebuilt as typed JSON, encoded, compared with the reference
//! bytes, and read back with `get`. `inspect --json` is checked by rebuilding every vector
//! from its tree. Vectors are looped inside a few tests to keep the process count low.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Map, Value};

fn vectors(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vectors")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str::<Value>(&text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

/// Runs `y3 ARGS` with `stdin` (or an empty stdin).
fn y3(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_y3"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn y3");
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(pipe);
    child.wait_with_output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// Runs and requires exit 0, returning stdout.
fn ok(args: &[&str], stdin: Option<&str>) -> String {
    let out = y3(args, stdin);
    assert!(
        out.status.success(),
        "y3 {args:?} failed ({:?}): {}",
        out.status.code(),
        stderr(&out)
    );
    stdout(&out)
}

/// Runs and requires exit `code` with stderr containing `needle`.
fn fails(args: &[&str], stdin: Option<&str>, code: i32, needle: &str) -> String {
    let out = y3(args, stdin);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(code), "y3 {args:?}: {err}");
    assert!(
        err.contains(needle),
        "y3 {args:?}: {err:?} lacks {needle:?}"
    );
    err
}

const PRIMS: [&str; 9] = [
    "int32", "int64", "uint32", "uint64", "float32", "float64", "bool", "string", "bytes",
];

/// The typed JSON value of a primitive vector: `(key, value)`, floats by their bits.
fn leaf(ty: &str, v: &Value) -> (String, Value) {
    if let Some(recipe) = v["value_recipe"].as_str() {
        let n: usize = recipe
            .strip_prefix("repeat 'a' ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("recipe {recipe}"));
        return (ty.into(), json!("a".repeat(n)));
    }
    match (ty, v.get("bits")) {
        ("float32" | "float64", Some(bits)) => (format!("{ty}_bits"), bits.clone()),
        _ => (ty.into(), v["value"].clone()),
    }
}

/// Children of a node vector's value: `{"0x11": {"int32": 1}, "0x03": {"0x04": ...}}`.
fn children(map: &Map<String, Value>) -> Vec<Value> {
    map.iter()
        .map(|(key, v)| {
            let id = u32::from_str_radix(key.trim_start_matches("0x"), 16).unwrap();
            let obj = v.as_object().unwrap();
            match obj.iter().next() {
                Some((ty, value)) if obj.len() == 1 && PRIMS.contains(&ty.as_str()) => {
                    json!({"tag": id, ty.as_str(): value})
                }
                _ => json!({"tag": id, "node": children(obj)}),
            }
        })
        .collect()
}

/// The C63 data set: keys 1..63 under node 0x00, types cycling by `(k-1) % 7`.
fn stress_c63() -> Value {
    let kids: Vec<Value> = (1..=63u32)
        .map(|k| match (k - 1) % 7 {
            0 => json!({"tag": k, "string": "a"}),
            1 => json!({"tag": k, "int32": -65}),
            2 => json!({"tag": k, "uint32": 128}),
            3 => json!({"tag": k, "int64": -1}),
            4 => json!({"tag": k, "uint64": u64::MAX}),
            5 => json!({"tag": k, "float32": 0.25}),
            _ => json!({"tag": k, "float64": 23}),
        })
        .collect();
    json!({"tag": 0, "node": kids})
}

fn spec_stream() -> Value {
    json!([
        {"tag": 1, "int32": 5},
        {"tag": 2, "node": [{"tag": 3, "string": "CELLA"}, {"tag": 4, "string": "Y3"}]}
    ])
}

/// Checks `get` output against the vector's value.
fn check_value(name: &str, ty: &str, v: &Value, got: &str) {
    let got = got.trim_end();
    let want = &v["value"];
    match ty {
        "float32" | "float64" => {
            if let Some(special) = want.as_str() {
                let expect = match special {
                    "+Inf" => "\"inf\"",
                    "-Inf" => "\"-inf\"",
                    "NaN" => "\"nan\"",
                    other => panic!("{name}: float value {other}"),
                };
                assert_eq!(got, expect, "{name}");
                return;
            }
            let bits = u64::from_str_radix(v["bits"].as_str().unwrap(), 16).unwrap();
            let wide: f64 = got.parse().unwrap_or_else(|_| panic!("{name}: {got}"));
            let got_bits = if ty == "float32" {
                (wide as f32).to_bits() as u64
            } else {
                wide.to_bits()
            };
            assert_eq!(got_bits, bits, "{name}: {got}");
        }
        "string" if v["value_recipe"].is_string() => {
            let (_, s) = leaf(ty, v);
            assert_eq!(serde_json::from_str::<Value>(got).unwrap(), s, "{name}");
        }
        _ => {
            let parsed: Value =
                serde_json::from_str(got).unwrap_or_else(|e| panic!("{name}: {got}: {e}"));
            assert_eq!(&parsed, want, "{name}");
        }
    }
}

/// Every primitive vector: encode from typed JSON, compare bytes, read back with `get`.
fn primitives(file: &str, dialect: &str) -> usize {
    let mut checked = 0;
    for v in vectors(file) {
        let name = v["name"].as_str().unwrap();
        let ty = v["type"].as_str().unwrap();
        let api = v["api"].as_str().unwrap();
        let tag = v["tag"].as_u64().unwrap();
        let hex = v["hex"].as_str().unwrap();
        if !PRIMS.contains(&ty) {
            continue;
        }
        let (key, value) = leaf(ty, &v);
        let (packet, path) = if api.starts_with("NewPrimitivePacketEncoder(") {
            (
                json!({"tag": tag, key.as_str(): value}),
                format!("0x{tag:02x}"),
            )
        } else if api.starts_with("NewCodec(") && !hex.is_empty() {
            // Marshal wraps the packet in root node 0x01.
            let inner = json!({"tag": tag, key.as_str(): value});
            (
                json!({"tag": 1, "node": [inner]}),
                format!("0x01/0x{tag:02x}"),
            )
        } else {
            continue;
        };
        let text = packet.to_string();
        if tag > 0x3f {
            // The reference accepted ids 0x40..0x7f as flag bits; we refuse them.
            fails(
                &["encode", "--dialect", dialect],
                Some(&text),
                2,
                "error: invalid_tag:",
            );
            continue;
        }
        let got = ok(&["encode", "--dialect", dialect], Some(&text));
        assert_eq!(got.trim_end(), hex, "{name}: encode {text:.200}");
        let got = ok(
            &[
                "get",
                "--dialect",
                dialect,
                "--hex",
                hex,
                "--path",
                &path,
                "--as",
                ty,
            ],
            None,
        );
        check_value(name, ty, &v, &got);
        // Finite floats also encode from their JSON number (not -0: Go wrote it as 0).
        if key.ends_with("_bits")
            && v["value"].is_number()
            && !v["bits"].as_str().unwrap().starts_with('8')
        {
            let text = json!({"tag": tag, ty: v["value"]}).to_string();
            assert_eq!(
                ok(&["encode", "--dialect", dialect], Some(&text)).trim_end(),
                hex,
                "{name}"
            );
        }
        checked += 1;
    }
    checked
}

#[test]
fn golang_primitive_vectors() {
    let n = primitives("y3-codec-golang-v1.7.3.json", "golang");
    assert!(n >= 80, "only {n} vectors checked");
}

#[test]
fn nvarint_primitive_vectors() {
    let n = primitives("yomorun-y3-v1.0.5.json", "nvarint");
    assert!(n >= 100, "only {n} vectors checked");
}

/// Node, array and stream vectors: typed JSON built from the vector's value.
fn trees(file: &str, dialect: &str) -> usize {
    let mut checked = 0;
    for v in vectors(file) {
        let name = v["name"].as_str().unwrap();
        let hex = v["hex"].as_str().unwrap();
        let tag = v["tag"].as_u64().unwrap();
        let (packet, probe) = match (v["type"].as_str().unwrap(), name) {
            (_, "stress_C63_ascending") => (
                stress_c63(),
                Some(("0x00/0x28", "uint64", "18446744073709551615")),
            ),
            (_, "spec_tlv_example") => (spec_stream(), Some(("0x02/0x04", "string", "\"Y3\""))),
            (_, "node_slice_lowlevel_int32") => (
                json!({"tag": tag, "array": [{"int32": 1}, {"int32": 2}, {"tag": 0, "int32": 3}]}),
                Some(("0x10/0x00", "int32", "1")),
            ),
            (_, "node_duplicate_child_keys") => (
                json!({"tag": tag, "node": [{"tag": 0, "int32": 1}, {"tag": 0, "int32": 2}, {"tag": 0, "int32": 3}]}),
                // The first match wins (the reference's map kept the last).
                Some(("0x10/0x00", "int32", "1")),
            ),
            ("node", _) => {
                let kids = children(v["value"].as_object().unwrap());
                (json!({"tag": tag, "node": kids}), None)
            }
            _ => continue,
        };
        let text = packet.to_string();
        if tag > 0x3f {
            fails(
                &["encode", "--dialect", dialect],
                Some(&text),
                2,
                "error: invalid_tag:",
            );
            continue;
        }
        let got = ok(&["encode", "--dialect", dialect], Some(&text));
        assert_eq!(got.trim_end(), hex, "{name}");
        if let Some((path, ty, want)) = probe {
            let got = ok(
                &[
                    "get",
                    "--dialect",
                    dialect,
                    "--hex",
                    hex,
                    "--path",
                    path,
                    "--as",
                    ty,
                ],
                None,
            );
            assert_eq!(got.trim_end(), want, "{name}");
        }
        checked += 1;
    }
    checked
}

#[test]
fn node_and_stream_vectors() {
    assert_eq!(trees("y3-codec-golang-v1.7.3.json", "golang"), 8);
    assert_eq!(trees("yomorun-y3-v1.0.5.json", "nvarint"), 7);
    // Nested values by path in both integer encodings.
    for (dialect, hex) in [
        ("golang", "810a82058303040105050178"),
        ("nvarint", "81080201ff8303040143"),
    ] {
        let path = if dialect == "golang" {
            "0x01/0x02/0x03/0x04"
        } else {
            "0x01/0x02"
        };
        assert_eq!(
            ok(
                &[
                    "get",
                    "--dialect",
                    dialect,
                    "--hex",
                    hex,
                    "--path",
                    path,
                    "--as",
                    "int32"
                ],
                None
            )
            .trim(),
            if dialect == "golang" { "5" } else { "-1" }
        );
    }
}

/// Rebuilds typed JSON from an `inspect --json` tree (values as bytes).
fn retype(node: &Value) -> Value {
    let tag = node["tag"].clone();
    if node["node"] == json!(true) {
        let kids: Vec<Value> = node["children"]
            .as_array()
            .unwrap()
            .iter()
            .map(retype)
            .collect();
        let key = if node["array"] == json!(true) {
            "array"
        } else {
            "node"
        };
        json!({"tag": tag, key: kids})
    } else {
        json!({"tag": tag, "bytes": node["hex"]})
    }
}

/// `inspect --json` of every vector rebuilds the same bytes.
fn inspect_round_trip(file: &str, dialect: &str) -> usize {
    let mut checked = 0;
    for v in vectors(file) {
        let name = v["name"].as_str().unwrap();
        let hex = v["hex"].as_str().unwrap();
        if hex.is_empty() {
            continue;
        }
        let out = y3(
            &["inspect", "--json", "--dialect", dialect, "--hex", hex],
            None,
        );
        if !out.status.success() {
            // Only the reference's lossy tags 0x40..0x7f on primitives are refused.
            assert!(
                name.starts_with("tag_primitive_sid_0x4"),
                "{name}: {}",
                stderr(&out)
            );
            assert!(stderr(&out).starts_with("error: invalid_tag:"), "{name}");
            assert!(out.stdout.is_empty(), "{name}: --json printed on error");
            continue;
        }
        let tree: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: {e}"));
        let typed = Value::Array(tree.as_array().unwrap().iter().map(retype).collect());
        let got = ok(&["encode", "--dialect", dialect], Some(&typed.to_string()));
        assert_eq!(got.trim_end(), hex, "{name}");
        checked += 1;
    }
    checked
}

#[test]
fn inspect_json_rebuilds_every_vector() {
    assert!(inspect_round_trip("y3-codec-golang-v1.7.3.json", "golang") > 100);
    assert!(inspect_round_trip("yomorun-y3-v1.0.5.json", "nvarint") > 100);
}

#[test]
fn inspect_trees() {
    let c63 = vectors("y3-codec-golang-v1.7.3.json")
        .into_iter()
        .find(|v| v["name"] == "stress_C63_ascending")
        .unwrap();
    let hex = c63["hex"].as_str().unwrap();
    let text = ok(&["inspect", "--hex", hex], None);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 65, "{text}");
    assert_eq!(lines[0], "0x00 (node, 225 bytes) {");
    assert_eq!(lines[1], "  0x01: 61  (1 byte)  int=-31 string=\"a\"");
    assert!(
        lines[2].starts_with("  0x02: ff 3f  (2 bytes)  int=-65"),
        "{}",
        lines[2]
    );
    assert!(lines[6].contains("float32=0.25"), "{}", lines[6]);
    assert!(lines[7].contains("float64=23.0"), "{}", lines[7]);
    assert_eq!(lines[64], "}");

    let json: Value =
        serde_json::from_str(&ok(&["inspect", "--json", "--hex", hex], None)).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1);
    let root = &json[0];
    assert_eq!(
        (
            root["tag"].clone(),
            root["node"].clone(),
            root["array"].clone()
        ),
        (json!(0), json!(true), json!(false))
    );
    assert_eq!(root["len"], 225);
    let kids = root["children"].as_array().unwrap();
    assert_eq!(kids.len(), 63);
    assert_eq!(
        kids[0],
        json!({"tag": 1, "node": false, "array": false, "offset": 3, "len": 1, "hex": "61"})
    );
    assert_eq!(kids[62]["tag"], 63);

    // Nested nodes, a stream of two top-level packets, in nvarint.
    let text = ok(
        &[
            "inspect",
            "--dialect",
            "nvarint",
            "--hex",
            "81080201ff8303040143 110100",
        ],
        None,
    );
    assert_eq!(
        text,
        "0x01 (node, 8 bytes) {\n  0x02: ff  (1 byte)  int=-1\n  0x03 (node, 3 bytes) {\n    0x04: 43  (1 byte)  int=67 float32=128.0 string=\"C\"\n  }\n}\n0x11: 00  (1 byte)  int=0 float32=0.0 float64=0.0\n"
    );
    let json: Value = serde_json::from_str(&ok(
        &[
            "inspect",
            "--json",
            "--dialect",
            "nvarint",
            "--hex",
            "81080201ff8303040143",
        ],
        None,
    ))
    .unwrap();
    assert_eq!(json[0]["children"][1]["children"][0]["hex"], "43");
    assert_eq!(json[0]["children"][1]["node"], true);
    assert_eq!(json[0]["children"][1]["offset"], 5);
}

#[test]
fn inspect_draft02_nodes() {
    let stream = spec_stream().to_string();
    let hex = ok(&["encode", "--dialect", "draft02"], Some(&stream));
    assert_eq!(hex.trim(), "010105020b030543454c4c4104025933");
    let guessed = ok(
        &["inspect", "--dialect", "draft02", "--hex", hex.trim()],
        None,
    );
    assert!(
        guessed.contains("0x02 (node?, 11 bytes, guessed) {"),
        "{guessed}"
    );
    let named = ok(
        &[
            "inspect",
            "--dialect",
            "draft02",
            "--nodes",
            "0x02",
            "--hex",
            hex.trim(),
        ],
        None,
    );
    assert!(
        named.contains("0x02 (node, 11 bytes) {\n  0x03: "),
        "{named}"
    );
    let flat = ok(
        &[
            "inspect",
            "--dialect",
            "draft02",
            "--no-guess",
            "--hex",
            hex.trim(),
        ],
        None,
    );
    assert!(flat.contains("0x02: 03 05 43 45"), "{flat}");
    let json: Value = serde_json::from_str(&ok(
        &[
            "inspect",
            "--json",
            "--dialect",
            "draft02",
            "--hex",
            hex.trim(),
        ],
        None,
    ))
    .unwrap();
    assert_eq!(json[1]["guessed"], true);
    // Wide draft02 tags.
    let hex = ok(
        &["encode", "--dialect", "draft02"],
        Some(r#"{"tag":300,"string":"x"}"#),
    );
    assert_eq!(hex.trim(), "822c0178");
    assert_eq!(
        ok(
            &[
                "get",
                "--dialect",
                "draft02",
                "--hex",
                "822c0178",
                "--path",
                "300",
                "--as",
                "string"
            ],
            None
        )
        .trim(),
        "\"x\""
    );
    fails(
        &["inspect", "--nodes", "0x02", "--hex", "00"],
        None,
        2,
        "draft02 only",
    );
}

#[test]
fn malformed_input() {
    // Key missing: exit 1.
    let err = fails(
        &["get", "--hex", "9006110101120161", "--path", "0x10/0x13"],
        None,
        1,
        "key path 0x10/0x13 not found",
    );
    assert_eq!(err, "error: not_found: key path 0x10/0x13 not found\n");
    // Truncated: the node declares 6 bytes, 3 arrive.
    fails(
        &["get", "--hex", "9006110101", "--path", "0x10/0x12"],
        None,
        2,
        "error: unexpected_end:",
    );
    // Length 0x7f is PVarInt -1.
    let err = fails(
        &["get", "--hex", "11 7f", "--path", "0x11", "--as", "int32"],
        None,
        2,
        "negative_length",
    );
    assert_eq!(err, "error: negative_length: negative length -1\n");
    // A node read as an int32.
    fails(
        &[
            "get",
            "--hex",
            "9006110101120161",
            "--path",
            "0x10",
            "--as",
            "int32",
        ],
        None,
        2,
        "error: wrong_type:",
    );
    // Not hex.
    fails(
        &["get", "--hex", "11zz", "--path", "0x11"],
        None,
        2,
        "error: invalid_hex:",
    );
    fails(
        &["get", "--hex", "110", "--path", "0x11"],
        None,
        2,
        "error: invalid_hex:",
    );
    // Bad path.
    fails(
        &["get", "--hex", "110100", "--path", "0x11//2"],
        None,
        2,
        "error: path_syntax:",
    );
    // Wrong lengths for a type.
    fails(
        &[
            "get",
            "--hex",
            "11053fc0000001",
            "--path",
            "0x11",
            "--as",
            "float32",
        ],
        None,
        2,
        "error: invalid_length:",
    );
    fails(
        &["get", "--hex", "110102", "--path", "0x11", "--as", "bool"],
        None,
        2,
        "error: invalid_bool:",
    );
    // inspect shows what parsed, marks the error, and fails.
    let out = y3(&["inspect", "--hex", "9004110101 12"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stdout(&out).contains("  0x11: 01  (1 byte)  int=1\n  !! truncated_header:"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).starts_with("error: truncated_header: "),
        "{}",
        stderr(&out)
    );
    let out = y3(&["inspect", "--json", "--hex", "117f"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert_eq!(
        stderr(&out),
        "error: negative_length: negative length -1 (at byte 0)\n"
    );
}

#[test]
fn encode_errors() {
    let cases = [
        (
            r#"{"tag":17,"int32":2147483648}"#,
            "error: invalid_packet: $.int32: 2147483648 out of range for int32",
        ),
        (
            r#"{"tag":17,"int64":9223372036854775808}"#,
            "out of range for int64",
        ),
        (r#"{"tag":17,"uint64":-1}"#, "out of range for uint64"),
        (
            r#"{"tag":17,"uint32":4294967296}"#,
            "out of range for uint32",
        ),
        (r#"{"tag":17,"int32":1.5}"#, "expected a JSON integer"),
        (
            r#"{"tag":17,"int32":1,"colour":"red"}"#,
            "unknown key \"colour\"",
        ),
        (r#"{"tag":17,"int32":1,"int64":1}"#, "two value keys"),
        (r#"{"tag":17}"#, "no value key"),
        (
            r#"[{"tag":1,"node":[{"tag":64,"int32":1}]}]"#,
            "error: invalid_tag: $[0].node[0].tag:",
        ),
        (r#"{"tag":17,"bytes":"abc"}"#, "invalid hex"),
        (
            r#"{"tag":17,"float32_bits":"3fc0"}"#,
            "expected 8 hex digits",
        ),
        (r#"{"tag":17,"int32":1"#, "error: invalid_json:"),
    ];
    for (input, needle) in cases {
        fails(&["encode"], Some(input), 2, needle);
    }
    fails(
        &["encode", "--dialect", "draft02"],
        Some(r#"{"tag":268435456,"int32":1}"#),
        2,
        "error: invalid_tag:",
    );
}

#[test]
fn exact_integers_and_floats_round_trip() {
    let cases = [
        ("uint64", "18446744073709551615"),
        ("int64", "-9223372036854775808"),
        ("int64", "9223372036854775807"),
        ("uint32", "4294967295"),
        ("int32", "-2147483648"),
        ("float32", "0.1"),
        ("float64", "1e-7"),
        ("float32", "\"-inf\""),
        ("float64", "\"nan\""),
        ("bool", "true"),
        ("string", "\"h\\u00e9 \\\"q\\\"\""),
        ("bytes", "\"00ff\""),
    ];
    for dialect in ["golang", "nvarint", "draft02"] {
        for (ty, value) in cases {
            let hex = ok(
                &["encode", "--dialect", dialect],
                Some(&format!("{{\"tag\":17,\"{ty}\":{value}}}")),
            );
            let got = ok(
                &["get", "--dialect", dialect, "--path", "0x11", "--as", ty],
                Some(&hex),
            );
            let (got, want): (Value, Value) = (
                serde_json::from_str(&got).unwrap(),
                serde_json::from_str(value).unwrap(),
            );
            assert_eq!(got, want, "{dialect} {ty}");
        }
    }
    // -0 survives through the bits form.
    let hex = ok(
        &["encode"],
        Some(r#"{"tag":17,"float64_bits":"8000000000000000"}"#),
    );
    assert_eq!(hex.trim(), "110180");
    assert_eq!(
        ok(
            &["get", "--hex", "110180", "--path", "17", "--as", "float64"],
            None
        )
        .trim(),
        "-0.0"
    );
}

#[test]
fn inputs_and_help() {
    // --file reads raw bytes; stdin without flags reads hex; --file - reads raw stdin.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("y3-cli-noise.bin");
    let bytes = hex::decode("9017110242201206aec8bbba800013093132372e302e302e31").unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let file = file.to_str().unwrap();
    assert_eq!(
        ok(
            &[
                "get",
                "--file",
                file,
                "--path",
                "0x10/0x12",
                "--as",
                "int64"
            ],
            None
        )
        .trim(),
        "1600000000000"
    );
    assert_eq!(
        ok(
            &["get", "--path", "0x10/0x11", "--as", "float32"],
            Some("90171102 4220\n")
        )
        .trim_end(),
        "40.0"
    );
    assert!(ok(&["inspect", "--file", file], None).starts_with("0x10 (node, 23 bytes) {\n"));
    fails(
        &["get", "--file", "/nonexistent/y3", "--path", "1"],
        None,
        2,
        "error: io:",
    );
    fails(
        &["get", "--hex", "00", "--file", file, "--path", "1"],
        None,
        2,
        "cannot be used with",
    );
    // --as defaults to bytes; a node's bytes are its children.
    assert_eq!(
        ok(
            &["get", "--hex", "9006110101120161", "--path", "0x10"],
            None
        )
        .trim(),
        "\"110101120161\""
    );
    // --raw writes bytes.
    let out = y3(&["encode", "--raw"], Some(r#"{"tag":17,"int32":1}"#));
    assert_eq!(out.stdout, [0x11, 0x01, 0x01]);

    // No subcommand: help listing the subcommands, exit 2. --help: exit 0.
    let out = y3(&[], None);
    assert_eq!(out.status.code(), Some(2));
    let help = stderr(&out);
    for sub in ["encode", "get", "inspect"] {
        assert!(help.contains(&format!("  {sub} ")), "{help}");
    }
    let help = ok(&["--help"], None);
    assert!(help.contains("Exit status"), "{help}");
    for sub in ["encode", "get", "inspect"] {
        assert!(ok(&[sub, "--help"], None).contains("--dialect"), "{sub}");
    }
    fails(
        &["get", "--hex", "00", "--path", "1", "--as", "int128"],
        None,
        2,
        "invalid value",
    );
}

/// `git`'s trimmed stdout in this package's directory (inside the repository).
fn git(args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git (the tests run inside the repository)");
    assert!(out.status.success(), "git {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// Built inside the repository, `y3 --version` names the commit it was built from, and
/// `-dirty` exactly when the workspace's sources differ from it (cargo rebuilt the binary
/// for this test run, so the working tree now is the one it was built from).
#[test]
fn version_names_the_commit_it_was_built_from() {
    let head = git(&["rev-parse", "--short=12", "HEAD"]);
    let top = git(&["rev-parse", "--show-toplevel"]);
    let out = Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--",
            "crates",
            "Cargo.toml",
            "Cargo.lock",
        ])
        .current_dir(&top)
        .output()
        .unwrap();
    let dirty = if out.stdout.is_empty() { "" } else { "-dirty" };
    let want = format!("y3 {} (git {head}{dirty})\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(ok(&["--version"], None), want);
}
