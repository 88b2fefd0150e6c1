//! How the CLI fails: a stable snake_case kind, an exit code, and one line on stderr.
//!
//! ```text
//! error: negative_length: negative length -1
//!        ^ kind            ^ message
//! ```
//!
//! Codec errors keep the kind the `y3` crate gives them ([`DecodeError::kind`],
//! [`EncodeError::kind`], [`PathError::kind`]); errors that only the CLI knows about
//! (bad hex, bad typed JSON, a missing key) carry their own kind in a [`CliError`].

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

use y3::{DecodeError, EncodeError, PathError};

/// Exit status of a lookup that found nothing (like `grep`).
pub const EXIT_NOT_FOUND: u8 = 1;
/// Exit status of bad input, a decode error or a usage error (as clap uses for usage).
pub const EXIT_BAD_INPUT: u8 = 2;

/// An error raised by the CLI itself, with its kind and exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// Stable snake_case name, printed after `error:`.
    pub kind: &'static str,
    /// Process exit status.
    pub code: u8,
    /// Human-readable detail.
    pub message: String,
}

impl CliError {
    /// Bad input of kind `kind` (exit 2).
    pub fn bad_input(kind: &'static str, message: impl Into<String>) -> CliError {
        CliError {
            kind,
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }

    /// A lookup that found nothing (exit 1).
    pub fn not_found(message: impl Into<String>) -> CliError {
        CliError {
            kind: "not_found",
            code: EXIT_NOT_FOUND,
            message: message.into(),
        }
    }

    /// A codec error found at byte `offset` of the input (exit 2, the codec's kind).
    pub fn decode_at(err: DecodeError, offset: usize) -> CliError {
        CliError::bad_input(err.kind(), format!("{err} (at byte {offset})"))
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CliError {}

/// The kind and exit code of an error: the first cause in the chain that has a kind.
pub fn classify(err: &anyhow::Error) -> (&'static str, u8) {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<CliError>() {
            return (e.kind, e.code);
        }
        if let Some(e) = cause.downcast_ref::<DecodeError>() {
            return (e.kind(), EXIT_BAD_INPUT);
        }
        if let Some(e) = cause.downcast_ref::<EncodeError>() {
            return (e.kind(), EXIT_BAD_INPUT);
        }
        if let Some(e) = cause.downcast_ref::<PathError>() {
            return (e.kind(), EXIT_BAD_INPUT);
        }
        if let Some(e) = cause.downcast_ref::<y3_router::RouterError>() {
            return (e.kind(), EXIT_BAD_INPUT);
        }
        if let Some(e) = cause.downcast_ref::<y3_transport::TransportError>() {
            return (e.kind(), EXIT_BAD_INPUT);
        }
        if cause.downcast_ref::<serde_json::Error>().is_some() {
            return ("invalid_json", EXIT_BAD_INPUT);
        }
        if cause.downcast_ref::<io::Error>().is_some() {
            return ("io", EXIT_BAD_INPUT);
        }
    }
    ("error", EXIT_BAD_INPUT)
}

/// Prints `error: KIND: MESSAGE` on stderr and returns the exit code.
///
/// A closed stdout (`y3 inspect ... | head`) is not an error worth a message: exit quietly.
/// A stderr that cannot be written loses the message, not the exit code (`eprintln!` would
/// panic, exit 101).
pub fn report(err: &anyhow::Error) -> ExitCode {
    let broken_pipe = err
        .chain()
        .filter_map(|c| c.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe);
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    let (kind, code) = classify(err);
    let message = format!("{err:#}");
    // Errors whose text already leads with their kind are not told twice.
    let message = message
        .strip_prefix(kind)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(&message);
    let _ = writeln!(io::stderr(), "error: {kind}: {message}");
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_codec() {
        let err = anyhow::Error::from(DecodeError::NegativeLength { declared: -1 });
        assert_eq!(classify(&err), ("negative_length", 2));
        assert_eq!(format!("{err:#}"), "negative length -1");
        let err = anyhow::Error::from(CliError::not_found("key path 0x10 not found"));
        assert_eq!(classify(&err), ("not_found", 1));
        let err = anyhow::Error::from(EncodeError::InvalidTag { tag: 64, max: 63 })
            .context("while encoding");
        assert_eq!(classify(&err).0, "invalid_tag");
        let err = anyhow::Error::from(y3_router::RouterError::Config {
            field: "auth.token",
            problem: "needed",
        });
        assert_eq!(classify(&err).0, "config");
    }
}
