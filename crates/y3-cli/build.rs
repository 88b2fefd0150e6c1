//! Build script: what the `y3` binary is built from, for `y3 --version`, `y3_build_info` and
//! `/varz` (`y3_router::status::set_git_commit`). It lives here, in the binary, so that a
//! new commit rebuilds only the binary.
//!
//! It sets two variables for the compiler:
//!
//! - `Y3_GIT_COMMIT`: `git rev-parse --short=12 HEAD`, with `-dirty` appended when the
//!   workspace's `crates/`, `Cargo.toml` or `Cargo.lock` differed from that commit at build
//!   time (changed, staged or untracked files; ignored ones do not count), e.g.
//!   `4a1e7d3c0f2b-dirty`; `unknown` when this package is not a tracked part of a git
//!   checkout (crates.io, a tarball, `cargo package`'s copy under `target/`) or git is
//!   missing. A build never fails for want of git.
//! - `Y3_VERSION`: what `y3 --version` prints after `y3 `: `0.1.0 (git 4a1e7d3c0f2b-dirty)`,
//!   or the plain `0.1.0` without a commit. `y3-lab` parses this line (`net::y3_build`).
//!
//! Cargo reruns this script when HEAD, the index, the branch HEAD names, `packed-refs`, or
//! any file under `crates/` or the workspace manifests changes (mtime), and so rebuilds
//! only the `y3-cli` crate itself (seconds in debug). Staleness that remains: a file put
//! back with an older mtime, or a change outside `crates/` and the manifests (docs,
//! bindings, scripts, `.cargo/config.toml`, the toolchain, environment variables), is not
//! seen: the binary keeps the label of its last build. `cargo install` from crates.io and
//! the .deb built from a tarball say `unknown`.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths, relative to the repository's top, whose difference from HEAD makes a build
/// `-dirty`: the Rust sources and manifests the binary is built from.
const SOURCES: [&str; 3] = ["crates", "Cargo.toml", "Cargo.lock"];

/// The value of `Y3_GIT_COMMIT` without a commit (`y3_router::status::UNKNOWN_GIT`).
const UNKNOWN: &str = "unknown";

fn main() {
    let here = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = git_commit(&here);
    let pkg = std::env::var("CARGO_PKG_VERSION").expect("set by cargo");
    let version = match &commit {
        Some(c) => format!("{pkg} (git {c})"),
        None => pkg,
    };
    println!(
        "cargo:rustc-env=Y3_GIT_COMMIT={}",
        commit.as_deref().unwrap_or(UNKNOWN)
    );
    println!("cargo:rustc-env=Y3_VERSION={version}");
    // Without a checkout: rerun only when this script changes (not at every file change).
    println!("cargo:rerun-if-changed=build.rs");
}

/// `git`'s trimmed stdout in `dir`, or `None` when git is missing or fails. Optional locks
/// are off: `git status` would otherwise refresh the index it is watched through, and so
/// rerun this script at the next build.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The short commit, `-dirty` when [`SOURCES`] differ from it; `None` when `here` is not a
/// tracked part of a git checkout. Prints the `rerun-if-changed` lines of a checkout.
fn git_commit(here: &Path) -> Option<String> {
    // A copy of the package inside some other checkout (`target/package/`, an unpacked
    // tarball in a packaging repository) is untracked there: its commit is not ours.
    git(here, &["ls-files", "--error-unmatch", "build.rs"])?;
    let top = PathBuf::from(git(here, &["rev-parse", "--show-toplevel"])?);
    // `--git-path` finds a worktree's own HEAD and index (its `.git` is a file pointing
    // into the main checkout's `.git/worktrees/`) and the shared refs. Only files that
    // exist: cargo reruns a script whose watched file is missing at every build (a branch
    // whose ref is packed is covered by packed-refs).
    let watch = |path: &str| {
        if let Some(p) = git(here, &["rev-parse", "--git-path", path]) {
            let p = here.join(p);
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    };
    watch("HEAD");
    watch("index");
    watch("packed-refs");
    if let Some(branch) = git(here, &["symbolic-ref", "-q", "HEAD"]) {
        watch(&branch);
    }
    for source in SOURCES {
        let p = top.join(source);
        if p.exists() {
            // A directory is scanned whole: any file in it changed, added or removed.
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    let commit = git(here, &["rev-parse", "--short=12", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--"];
    status.extend(SOURCES);
    let dirty = git(&top, &status).is_none_or(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}
