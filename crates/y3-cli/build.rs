//! Build script: the git commit the `y3` binary is built from, for `y3_build_info` and
//! `/varz` (`y3_router::status::set_git_commit`). It lives here, in the binary, so that a
//! new commit rebuilds only the binary.

use std::process::Command;

fn main() {
    println!("cargo:rustc-env=Y3_GIT_COMMIT={}", git_commit());
}

/// `git rev-parse --short=12 HEAD` (the commit; local changes on top are not marked), or
/// `unknown` without git. Rebuilt when HEAD or the branch it names moves.
fn git_commit() -> String {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    // Only files that exist: cargo reruns a script whose watched file is missing at every
    // build (a branch whose ref is packed is covered by packed-refs). Without any, it
    // reruns when a file of this package changes.
    let watch = |path: &str| {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            if std::path::Path::new(&p).exists() {
                println!("cargo:rerun-if-changed={p}");
            }
        }
    };
    watch("HEAD");
    watch("packed-refs");
    if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&head);
    }
    let Some(commit) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".to_owned();
    };
    commit
}
