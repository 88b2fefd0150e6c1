//! What may import what, checked (`CONTRIBUTING.md`, "What may import what"): every
//! `crate::…` path in the non-test code of `y3-router`'s and `y3-transport`'s sources
//! (`use` lines, grouped `use crate::{a, b::c}` and paths written inline) names a module
//! its file's rule allows. A path to a name at the crate root (`crate::Name`) counts as `lib::Name`.
//!
//! A module is a file's first path component under `src/` (`config/auth.rs` is `config`,
//! `frame/error.rs` is `frame`); a file's test module (`#[cfg(test)] mod …`, to the end of
//! the file) is not checked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The modules in `who` may import, from their own crate, only the modules in `may` (and
/// themselves).
struct Rule {
    who: &'static [&'static str],
    may: &'static [&'static str],
    why: &'static str,
}

/// The router's pure parts: no IO, no clock, nothing of the server.
const PURE: &[&str] = &[
    "queue",
    "table",
    "session",
    "throttle",
    "filters",
    "histogram",
    "penalty",
    "cycles",
    "journeys",
];

const ROUTER: &[Rule] = &[
    Rule {
        who: &["error"],
        may: &[],
        why: "the error types are leaves",
    },
    Rule {
        who: &["config"],
        may: &["error"],
        why: "the configuration is plain data: structs, defaults, validation",
    },
    Rule {
        who: PURE,
        may: &[
            "config",
            "error",
            "queue",
            "table",
            "session",
            "throttle",
            "filters",
            "histogram",
            "penalty",
            "cycles",
            "journeys",
        ],
        why: "the pure parts take what they need from config and nothing from the server",
    },
    Rule {
        who: &["federation"],
        may: &["config", "error", "session", "table"],
        why: "the federation reaches the router only through federation/local.rs's traits",
    },
];

const TRANSPORT: &[Rule] = &[
    Rule {
        who: &["metadata", "holding"],
        may: &[],
        why: "the metadata map and a held copy's memory are pure",
    },
    Rule {
        who: &["frame"],
        may: &["metadata", "holding"],
        why: "the frame module is pure: FrameError lives in it and names no adapter",
    },
    Rule {
        who: &["codec"],
        may: &["frame", "metadata", "lib::READ_BUFFER"],
        why: "the codec is sans-IO over the frame module",
    },
    Rule {
        who: &["error"],
        may: &["frame"],
        why: "TransportError lists errors; what the adapters know of them is retry.rs's",
    },
];

/// The crate modules a piece of Rust code names through `crate::`.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `y3_crate::`, not `crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c, d::{e, f}}`: the first component of each top-level item.
            let mut depth = 0;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(first(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    item.push(c);
                }
            }
            if !item.trim().is_empty() {
                out.insert(first(&item));
            }
        } else {
            out.insert(first(rest));
        }
    }
    out.remove("");
    out
}

/// The module a path starts with; a name at the crate root is `lib::Name`
/// (`crate::READ_BUFFER` is `lib::READ_BUFFER`).
fn first(path: &str) -> String {
    let name: String = path
        .trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    match name.chars().next() {
        Some(c) if c.is_uppercase() => format!("lib::{name}"),
        Some(_) if name == "self" => "lib".into(),
        Some(_) => name,
        None => String::new(),
    }
}

/// A file's code without its test module (`#[cfg(test)] mod …` to the end) and without
/// comment lines.
fn code(text: &str) -> String {
    let mut end = text.len();
    for (at, _) in text.match_indices("#[cfg(test)]") {
        if text[at + "#[cfg(test)]".len()..]
            .trim_start()
            .starts_with("mod ")
        {
            end = at;
            break;
        }
    }
    text[..end]
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The broken rules of the crate whose sources are `src`, one line each.
fn violations(src: &Path, rules: &[Rule]) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let first = relative.components().next().expect("a component");
        let module = first.as_os_str().to_string_lossy();
        let module = module.strip_suffix(".rs").unwrap_or(&module);
        let text = std::fs::read_to_string(&file).expect("read a source file");
        let used = crate_paths(&code(&text));
        for rule in rules.iter().filter(|r| r.who.contains(&module)) {
            for name in &used {
                if name != module && !rule.may.contains(&name.as_str()) {
                    out.push(format!(
                        "{}: imports crate::{name}, but {module} may import only {:?} ({})",
                        relative.display(),
                        rule.may,
                        rule.why
                    ));
                }
            }
        }
    }
    out
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn the_router_keeps_its_import_rules() {
    let broken = violations(&crate_src("y3-router"), ROUTER);
    assert!(
        broken.is_empty(),
        "import rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_transport_keeps_its_import_rules() {
    let broken = violations(&crate_src("y3-transport"), TRANSPORT);
    assert!(
        broken.is_empty(),
        "import rules broken:\n{}",
        broken.join("\n")
    );
}

#[test]
fn every_rule_names_modules_that_exist() {
    for (name, rules) in [("y3-router", ROUTER), ("y3-transport", TRANSPORT)] {
        let src = crate_src(name);
        let modules = rules.iter().flat_map(|r| r.who.iter().chain(r.may));
        for module in modules.filter(|m| !m.starts_with("lib::")) {
            let exists = src.join(format!("{module}.rs")).exists() || src.join(module).is_dir();
            assert!(
                exists,
                "{name}: a rule names {module}, which is not a module"
            );
        }
    }
}

#[test]
fn the_scanner_sees_grouped_inline_and_root_paths() {
    let found = crate_paths(
        "use crate::a::B;\nuse crate::{c, d::{e, f}, G};\nlet x = crate::h::i();\nuse y3_crate::z;",
    );
    let want: BTreeSet<String> = ["a", "c", "d", "lib::G", "h"].map(String::from).into();
    assert_eq!(found, want);
    // A violation is reported with its file and rule.
    let dir = std::env::temp_dir().join(format!("y3-imports-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(
        dir.join("config/x.rs"),
        "use crate::error::E;\nuse crate::shared::Shared;\n#[cfg(test)]\nmod tests {\n    use crate::server::S;\n}\n",
    )
    .unwrap();
    let broken = violations(&dir, ROUTER);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(broken.len(), 1, "{broken:?}");
    assert!(
        broken[0].starts_with("config/x.rs: imports crate::shared"),
        "{broken:?}"
    );
}
