//! The configuration reference, generated from the config structs' doc comments (their one
//! home; `build.rs` reads them from the files of `config/`): the commented
//! TOML of `y3 serve --print-config` ([`commented_toml`]) and `docs/configuration.md`
//! ([`markdown`]). A test (`tests/config_reference.rs`) checks that the committed page is
//! in step, that every key has a doc, and that the commented TOML reads back as the same
//! configuration.

use std::fmt::Write as _;

use crate::config::RouterConfig;

/// A config struct's doc comments.
#[derive(Debug, Clone, Copy)]
pub struct StructDoc {
    /// Its Rust name.
    pub name: &'static str,
    /// Its doc comment.
    pub doc: &'static str,
    /// Its public fields, in declaration order.
    pub fields: &'static [FieldDoc],
}

/// A config field's doc comment.
#[derive(Debug, Clone, Copy)]
pub struct FieldDoc {
    /// The TOML key.
    pub name: &'static str,
    /// Its doc comment.
    pub doc: &'static str,
    /// The type it holds (`Option` and `Vec` unwrapped, last path segment).
    pub ty: &'static str,
    /// Whether it is a list.
    pub array: bool,
}

/// Every config struct, from `build.rs`.
pub static STRUCTS: &[StructDoc] = include!(concat!(env!("OUT_DIR"), "/config_docs.rs"));

/// An enum a config value may be: its values (snake_case, as in TOML) and their docs.
#[derive(Debug, Clone, Copy)]
pub struct EnumDoc {
    /// Its Rust name.
    pub name: &'static str,
    /// `(value, doc)` for each variant.
    pub variants: &'static [(&'static str, &'static str)],
}

/// Every enum of the config files (and `queue.rs`'s `Policy`), from `build.rs`.
pub static ENUMS: &[EnumDoc] = include!(concat!(env!("OUT_DIR"), "/config_enums.rs"));

/// A field's doc, followed by the values it takes when its type is one of [`ENUMS`].
pub fn field_text(field: &FieldDoc) -> String {
    let mut text = field.doc.to_owned();
    if let Some(e) = ENUMS.iter().find(|e| e.name == field.ty) {
        text.push_str("\nOne of:");
        for (value, doc) in e.variants {
            let _ = write!(text, "\n  \"{value}\": {}", one_line(doc));
        }
    }
    text
}

/// The environment variables the router reads (their one home), with what each does.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "RUST_LOG",
        "Log filter (tracing's EnvFilter syntax): a level (`error`, `warn`, `info`, `debug`, \
         `trace`) or per-module directives, e.g. `RUST_LOG=info,y3_router=debug`. Unset: \
         `info`. Logs go to standard error.",
    ),
    (
        "Y3_TOKEN",
        "`y3 serve`: the main token (`auth.token`), kept off the command line; never shown \
         by `--print-config`.",
    ),
    (
        "YOMO_TLS_CERT_FILE, YOMO_TLS_KEY_FILE",
        "YoMo's variables for the server certificate: fill `tls.cert` and `tls.key` when \
         they are empty.",
    ),
    (
        "YOMO_TLS_VERIFY_PEER, YOMO_TLS_CACERT_FILE",
        "YoMo's variables for mutual TLS: `true` with a CA file fills `tls.client_ca`.",
    ),
    (
        "STATE_DIRECTORY, XDG_STATE_HOME, HOME",
        "Where `[state]` lives when `state.dir` is empty: `$STATE_DIRECTORY` (systemd), else \
         `$XDG_STATE_HOME/y3`, else `~/.local/state/y3`.",
    ),
];

/// The doc of struct `name`.
pub fn struct_doc(name: &str) -> Option<&'static StructDoc> {
    STRUCTS.iter().find(|s| s.name == name)
}

fn comment(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        if line.is_empty() {
            let _ = writeln!(out, "{indent}#");
        } else {
            let _ = writeln!(out, "{indent}# {line}");
        }
    }
}

/// `config` as TOML, each key under its doc comment: what `y3 serve --print-config` prints.
/// It reads back as `config`. Keys that are unset (`Option` fields) are shown commented
/// out; an empty list of tables is shown as `key = []` followed by a commented template of
/// one entry, its fields under their docs.
pub fn commented_toml(config: &RouterConfig) -> String {
    let value = toml::Value::try_from(config).unwrap_or(toml::Value::Table(Default::default()));
    let mut out = String::from(
        "# y3 router configuration (y3 serve -c FILE). Every key is optional; the values\n\
         # shown are the ones in force. Reference: docs/configuration.md.\n",
    );
    if let toml::Value::Table(table) = &value {
        render_table(&mut out, "", "RouterConfig", table);
    }
    out.push_str("\n# Environment variables the router reads:\n");
    for (name, doc) in ENVIRONMENT {
        comment(&mut out, "", &format!("{name}: {doc}"));
    }
    out
}

fn is_table(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Table(_))
}

fn is_table_array(v: &toml::Value) -> bool {
    matches!(v, toml::Value::Array(a) if !a.is_empty() && a.iter().all(is_table))
}

/// Renders one table's keys: scalars first (TOML requires it), then sub-tables, then arrays
/// of tables.
fn render_table(out: &mut String, path: &str, ty: &str, table: &toml::Table) {
    let Some(doc) = struct_doc(ty) else {
        // Not one of ours (cannot happen for a derived config): plain TOML.
        let _ = write!(out, "{}", toml::Value::Table(table.clone()));
        return;
    };
    let child = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    for f in doc.fields {
        match table.get(f.name) {
            Some(v) if is_table(v) || is_table_array(v) => {}
            Some(v) => {
                comment(out, "", &field_text(f));
                let _ = writeln!(out, "{} = {}", f.name, v);
            }
            None => {
                comment(out, "", f.doc);
                let _ = writeln!(out, "# {} =   (unset)", f.name);
            }
        }
    }
    for f in doc.fields {
        match table.get(f.name) {
            Some(toml::Value::Table(t)) => {
                let _ = writeln!(out);
                comment(out, "", f.doc);
                if let Some(inner) = struct_doc(f.ty).filter(|d| struct_text(d.doc).is_some()) {
                    comment(out, "", inner.doc);
                }
                let _ = writeln!(out, "[{}]", child(f.name));
                render_table(out, &child(f.name), f.ty, t);
            }
            Some(v @ toml::Value::Array(a)) if is_table_array(v) => {
                for item in a {
                    let _ = writeln!(out);
                    comment(out, "", f.doc);
                    let _ = writeln!(out, "[[{}]]", child(f.name));
                    if let toml::Value::Table(t) = item {
                        render_table(out, &child(f.name), f.ty, t);
                    }
                }
            }
            Some(toml::Value::Array(a)) if a.is_empty() => {
                if let Some(item) = struct_doc(f.ty) {
                    let _ = writeln!(out);
                    comment(out, "", f.doc);
                    let _ = writeln!(
                        out,
                        "# [[{}]]   (none: to add one, drop `{} = []` above and write)",
                        child(f.name),
                        f.name
                    );
                    for field in item.fields {
                        comment(out, "", &field_text(field));
                        let _ = writeln!(out, "# {} = ...", field.name);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `docs/configuration.md`: every section and key of `RouterConfig`, with its default and
/// its doc, then the environment variables.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration reference\n\n\
         <!-- Generated from the doc comments in crates/y3-router/src/config/;\n\
         do not edit. Regenerate with\n\
         Y3_REGEN_DOCS=1 cargo test -p y3-router --test config_reference -->\n\n\
         `y3 serve -c router.toml` reads this TOML; every key is optional and an empty file (or\n\
         none) is a working router on loopback. `y3 serve --print-config` prints the\n\
         configuration in force in the same form, each key under its doc.\n",
    );
    let default = toml::Value::try_from(RouterConfig::default())
        .unwrap_or(toml::Value::Table(Default::default()));
    if let (Some(root), toml::Value::Table(table)) = (struct_doc("RouterConfig"), &default) {
        for f in root.fields {
            let section = match table.get(f.name) {
                Some(toml::Value::Table(t)) => Some(t),
                _ => None,
            };
            section_md(&mut out, f.name, f, section, 2);
        }
    }
    out.push_str("\n## Environment\n\n");
    for (name, doc) in ENVIRONMENT {
        let _ = writeln!(out, "- **`{name}`**: {doc}");
    }
    out
}

/// A doc on one line, rustdoc's link brackets (``[`x`]``) dropped.
fn one_line(doc: &str) -> String {
    doc.lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
        .replace("[`", "`")
        .replace("`]", "`")
}

/// A struct's doc, unless it only names its section (``[limits]`.``).
fn struct_text(doc: &str) -> Option<String> {
    let text = one_line(doc);
    let bare = text.starts_with("`[") && text.trim_end_matches('.').ends_with("]`");
    (!text.is_empty() && !bare).then_some(text)
}

fn section_md(
    out: &mut String,
    path: &str,
    field: &FieldDoc,
    table: Option<&toml::Table>,
    depth: usize,
) {
    let Some(doc) = struct_doc(field.ty) else {
        return;
    };
    let header = if field.array {
        format!("[[{path}]]")
    } else {
        format!("[{path}]")
    };
    let _ = writeln!(out, "\n{} `{header}`\n", "#".repeat(depth.min(4)));
    let _ = writeln!(out, "{}\n", one_line(field.doc));
    if let Some(text) = struct_text(doc.doc).filter(|_| doc.doc != field.doc) {
        let _ = writeln!(out, "{text}\n");
    }
    let mut nested = Vec::new();
    for f in doc.fields {
        if struct_doc(f.ty).is_some() {
            nested.push(f);
            continue;
        }
        let default = match table.and_then(|t| t.get(f.name)) {
            Some(v) => format!(" (default `{v}`)"),
            None if field.array => String::new(),
            None => " (default: unset)".to_owned(),
        };
        let mut text = one_line(f.doc);
        if let Some(e) = ENUMS.iter().find(|e| e.name == f.ty) {
            let values: Vec<String> = e
                .variants
                .iter()
                .map(|(v, d)| format!("`\"{v}\"` ({})", one_line(d).trim_end_matches('.')))
                .collect();
            let _ = write!(text, " One of: {}.", values.join("; "));
        }
        let _ = writeln!(out, "- **`{}`**{default}: {text}", f.name);
    }
    for f in nested {
        let sub = match table.and_then(|t| t.get(f.name)) {
            Some(toml::Value::Table(t)) => Some(t),
            _ => None,
        };
        section_md(out, &format!("{path}.{}", f.name), f, sub, depth + 1);
    }
}
