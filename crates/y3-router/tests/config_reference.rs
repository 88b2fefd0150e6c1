//! The configuration reference is generated from the config structs' doc comments
//! (`config_reference.rs`): every key has a doc, the commented TOML reads back as the same
//! configuration, and `docs/configuration.md` is in step with the code.
//!
//! After adding or changing a config field (with its doc comment), regenerate the page:
//! `Y3_REGEN_DOCS=1 cargo test -p y3-router --test config_reference`.

use y3_router::config_reference::{commented_toml, markdown, struct_doc, STRUCTS};
use y3_router::RouterConfig;

const PAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");

/// Every key of `value` (a table of struct `ty`) has a documented field; returns the
/// undocumented ones as `path.key`.
fn undocumented(path: &str, ty: &str, value: &toml::Table, out: &mut Vec<String>) {
    let Some(doc) = struct_doc(ty) else {
        out.push(format!("{path} (struct {ty} not found)"));
        return;
    };
    for (key, v) in value {
        let here = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let Some(field) = doc.fields.iter().find(|f| f.name == key) else {
            out.push(here);
            continue;
        };
        if field.doc.trim().is_empty() {
            out.push(here.clone());
        }
        match v {
            toml::Value::Table(t) => undocumented(&here, field.ty, t, out),
            toml::Value::Array(a) => {
                for item in a {
                    if let toml::Value::Table(t) = item {
                        undocumented(&here, field.ty, t, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A configuration with every list of tables filled, so that their fields are checked too.
fn full() -> RouterConfig {
    RouterConfig::from_toml(
        r#"
        [[auth.tokens]]
        name = "sensors"
        token = "t0ken-sensors"
        publish = [0x10]
        observe = [0x11]

        [[mesh.downstream]]
        name = "b"
        addr = "10.0.0.2:9000"

        [[filters.attach]]
        function = "f"
        tag = 0x10
        filter = "0x10/0x11:f32 > 60"
        "#,
    )
    .expect("the sample parses")
}

#[test]
fn every_key_has_a_doc() {
    let mut missing = Vec::new();
    for config in [RouterConfig::default(), full()] {
        let value = toml::Value::try_from(&config).unwrap();
        undocumented("", "RouterConfig", value.as_table().unwrap(), &mut missing);
    }
    // Fields that serialize nothing by default (`Option`s) are checked through the tables.
    for s in STRUCTS {
        for f in s.fields {
            if f.doc.trim().is_empty() {
                missing.push(format!("{}::{}", s.name, f.name));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "config keys without a doc comment (add one on the field in config/): {missing:?}"
    );
}

#[test]
fn commented_toml_reads_back_as_the_same_configuration() {
    for config in [RouterConfig::default(), full()] {
        let text = commented_toml(&config);
        let back = RouterConfig::from_toml(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back, config, "{text}");
        // Each key sits under its doc: the line above `max_hops = ...` is its doc's last line.
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("max_hops = "))
            .unwrap();
        assert!(lines[at - 1].starts_with("# "), "{text}");
    }
}

#[test]
fn the_reference_page_is_in_step_with_the_code() {
    let page = markdown();
    if std::env::var_os("Y3_REGEN_DOCS").is_some() {
        std::fs::write(PAGE, &page).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(PAGE).unwrap_or_default();
    assert!(
        committed == page,
        "docs/configuration.md is out of step with the config doc comments: regenerate it with \
         `Y3_REGEN_DOCS=1 cargo test -p y3-router --test config_reference` and commit it"
    );
}
