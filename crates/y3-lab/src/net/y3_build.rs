//! What the measured `y3` binary is built from, as it says itself: `y3 --version`, whose
//! commit the binary's build script embeds (`crates/y3-cli/build.rs`), not the working
//! tree's HEAD at measuring time (a release `y3` built from an older commit would be
//! labelled with the newer one).
//!
//! ```text
//! y3 0.1.0 (git 4a1e7d3c0f2b-dirty)     a checkout with changes under crates/ at build time
//! y3 0.1.0 (git 4a1e7d3c0f2b)           a clean checkout
//! y3 0.1.0                              no git at build time (crates.io, a tarball)
//! ```

use std::path::Path;

/// The suffix the build script appends to a commit whose sources differed from it.
const DIRTY: &str = "-dirty";

/// `y3 --version`'s line, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    /// The crate version, `0.1.0`.
    pub version: String,
    /// The short commit the binary was built from, when it was built in a git checkout.
    pub commit: Option<String>,
    /// Whether the workspace's sources differed from [`Build::commit`] at build time.
    pub dirty: bool,
}

impl Build {
    /// Parses `y3 VERSION` or `y3 VERSION (git COMMIT[-dirty])`; `None` for any other line.
    pub fn parse(line: &str) -> Option<Build> {
        let rest = line.trim().strip_prefix("y3 ")?;
        let (version, commit) = match rest.split_once(' ') {
            None => (rest, None),
            Some((version, tail)) => {
                let commit = tail.strip_prefix("(git ")?.strip_suffix(')')?;
                (version, Some(commit))
            }
        };
        if version.is_empty() || !version.starts_with(|c: char| c.is_ascii_digit()) {
            return None;
        }
        let (commit, dirty) = match commit {
            None => (None, false),
            Some(c) => {
                let (c, dirty) = c.strip_suffix(DIRTY).map_or((c, false), |c| (c, true));
                if c.is_empty() || !c.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                (Some(c.to_owned()), dirty)
            }
        };
        Some(Build {
            version: version.to_owned(),
            commit,
            dirty,
        })
    }

    /// The report's label: `y3 0.1.0, git 4a1e7d3c0f2b + uncommitted changes`, or
    /// `y3 0.1.0, commit unknown` for a binary built without git.
    pub fn label(&self) -> String {
        match &self.commit {
            Some(c) => format!(
                "y3 {}, git {c}{}",
                self.version,
                if self.dirty {
                    " + uncommitted changes"
                } else {
                    ""
                }
            ),
            None => format!("y3 {}, commit unknown", self.version),
        }
    }
}

/// The label of the `y3` binary at `y3` (see [`Build::label`]), then its path:
/// `y3 0.1.0, git 4a1e7d3c0f2b (target/release/y3)`. A binary that cannot run, or answers
/// with a line this lab does not know, is shown by what it printed.
pub fn label_of(y3: &Path) -> String {
    let line = super::proc::version_of(y3, &["--version"]);
    let what = match line.as_deref().map(|l| (l, Build::parse(l))) {
        Some((_, Some(build))) => build.label(),
        Some((line, None)) => format!("{line} (an unknown --version line)"),
        None => "? (y3 --version failed)".to_owned(),
    };
    format!("{what} ({})", y3.display())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(version: &str, commit: Option<&str>, dirty: bool) -> Build {
        Build {
            version: version.into(),
            commit: commit.map(Into::into),
            dirty,
        }
    }

    #[test]
    fn parses_the_three_shapes() {
        assert_eq!(
            Build::parse("y3 0.1.0 (git 4a1e7d3c0f2b)"),
            Some(build("0.1.0", Some("4a1e7d3c0f2b"), false))
        );
        assert_eq!(
            Build::parse("y3 0.1.0 (git b8ad227a9c1d-dirty)\n"),
            Some(build("0.1.0", Some("b8ad227a9c1d"), true))
        );
        assert_eq!(Build::parse("y3 0.2.0"), Some(build("0.2.0", None, false)));
    }

    #[test]
    fn rejects_other_lines() {
        for line in [
            "",
            "y3",
            "y3 ",
            "nats-server: v2.15.2",
            "y3 0.1.0 (git )",
            "y3 0.1.0 (git -dirty)",
            "y3 0.1.0 (git xyz)",
            "y3 0.1.0 (git 4a1e7d3",
            "y3 0.1.0 (commit 4a1e7d3)",
            "y3 v0.1.0",
        ] {
            assert_eq!(Build::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn labels() {
        assert_eq!(
            build("0.1.0", Some("4a1e7d3c0f2b"), false).label(),
            "y3 0.1.0, git 4a1e7d3c0f2b"
        );
        assert_eq!(
            build("0.1.0", Some("4a1e7d3c0f2b"), true).label(),
            "y3 0.1.0, git 4a1e7d3c0f2b + uncommitted changes"
        );
        assert_eq!(
            build("0.1.0", None, false).label(),
            "y3 0.1.0, commit unknown"
        );
    }

    #[test]
    fn label_of_a_program_that_is_not_y3() {
        let sh = super::super::proc::which("sh").expect("sh on PATH");
        let label = label_of(&sh);
        assert!(label.ends_with(&format!("({})", sh.display())), "{label}");
        let missing = Path::new("/nonexistent/y3");
        assert_eq!(
            label_of(missing),
            "? (y3 --version failed) (/nonexistent/y3)"
        );
    }
}
