//! How the CLI fails: a stable snake_case kind, an exit code, one line on stderr, and a
//! second line saying what to try when there is something to try.
//!
//! ```text
//! error: negative_length: negative length -1
//!        ^ kind            ^ message (each cause once)
//! error: unreachable: cannot reach the router at 127.0.0.1:9000 over tcp: ... refused
//!   try: is `y3 serve` running there? Check --addr and --transport
//!   ^ hint
//! ```
//!
//! Exit statuses ([`EXIT_RUNTIME`] ... [`EXIT_REFUSED`]), as `y3 --help` lists them:
//!
//! ```text
//!  0  success
//!  1  runtime failure (a port in use, a write that failed), or `get`: not found
//!  2  bad input or usage (a malformed packet or line, a config file error)
//!  3  cannot connect (router unreachable, TLS trust failure)
//!  4  refused by the router (wrong token, forbidden tag, client certificate refused)
//! ```
//!
//! Codec errors keep the kind the `y3` crate gives them ([`DecodeError::kind`],
//! [`EncodeError::kind`], [`PathError::kind`]); errors that only the CLI knows about
//! (bad hex, bad typed JSON, a missing key) carry their own kind in a [`CliError`].

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

use y3::{DecodeError, EncodeError, PathError};

/// Exit status of a runtime failure: a port in use, a write that failed.
pub const EXIT_RUNTIME: u8 = 1;
/// Exit status of a lookup that found nothing (like `grep`).
pub const EXIT_NOT_FOUND: u8 = 1;
/// Exit status of bad input, a decode error or a usage error (as clap uses for usage).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status of a router that cannot be reached or trusted.
pub const EXIT_UNREACHABLE: u8 = 3;
/// Exit status of a router that refused us: a wrong token, a forbidden tag, a client
/// certificate it does not accept.
pub const EXIT_REFUSED: u8 = 4;

/// The exit statuses as `y3 --help` prints them (one home: [`EXIT_RUNTIME`] and the rest).
pub const EXIT_HELP: &str =
    "Exit status: 0 ok; 1 runtime failure (e.g. a port in use), or not found (get);
2 bad input or usage (a malformed packet or line, a config file error); 3 cannot connect
(router unreachable, TLS trust failure); 4 refused by the router (token, permission,
client certificate).";

/// An error raised by the CLI itself, with its kind and exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// Stable snake_case name, printed after `error:`.
    pub kind: &'static str,
    /// Process exit status.
    pub code: u8,
    /// Human-readable detail.
    pub message: String,
    /// What to try, printed on a line of its own (empty: nothing to suggest).
    pub hint: String,
}

impl CliError {
    /// An error of kind `kind` with exit status `code`.
    pub fn new(kind: &'static str, code: u8, message: impl Into<String>) -> CliError {
        CliError {
            kind,
            code,
            message: message.into(),
            hint: String::new(),
        }
    }

    /// Bad input of kind `kind` (exit 2).
    pub fn bad_input(kind: &'static str, message: impl Into<String>) -> CliError {
        CliError::new(kind, EXIT_BAD_INPUT, message)
    }

    /// A lookup that found nothing (exit 1).
    pub fn not_found(message: impl Into<String>) -> CliError {
        CliError::new("not_found", EXIT_NOT_FOUND, message)
    }

    /// This error with `hint`: what to try.
    #[must_use]
    pub fn hint(mut self, hint: impl Into<String>) -> CliError {
        self.hint = hint.into();
        self
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
            return (e.kind(), router_code(e));
        }
        if let Some(e) = cause.downcast_ref::<y3_transport::TransportError>() {
            return (e.kind(), transport_code(e));
        }
        if cause.downcast_ref::<serde_json::Error>().is_some() {
            return ("invalid_json", EXIT_BAD_INPUT);
        }
        if cause.downcast_ref::<io::Error>().is_some() {
            return ("io", EXIT_RUNTIME);
        }
    }
    ("error", EXIT_RUNTIME)
}

/// A router that could not start: its configuration is bad input, anything else (a port
/// in use, a file it could not write) a runtime failure.
fn router_code(e: &y3_router::RouterError) -> u8 {
    use y3_router::RouterError as R;
    match e {
        R::Bind { .. } | R::Write { .. } | R::FederationNameTaken { .. } => EXIT_RUNTIME,
        R::Transport(t) => match transport_code(t) {
            EXIT_UNREACHABLE => EXIT_RUNTIME,
            code => code,
        },
        _ => EXIT_BAD_INPUT,
    }
}

/// A client's transport error: refused by the router (4), a setting that cannot work (2),
/// or not connected (3).
pub fn transport_code(e: &y3_transport::TransportError) -> u8 {
    use y3_transport::frame::GoawayCode as G;
    use y3_transport::TransportError as T;
    match e {
        T::Goaway { code, .. } => match code {
            G::Unauthorized | G::Forbidden | G::BadHandshake | G::ReservedTag => EXIT_REFUSED,
            G::BadFilter => EXIT_BAD_INPUT,
            _ => EXIT_UNREACHABLE,
        },
        T::Certificate(_) | T::Config(_) => EXIT_BAD_INPUT,
        _ => EXIT_UNREACHABLE,
    }
}

/// The error's text with each cause once: a cause whose text its parent already quotes
/// (`cannot listen on tcp: {source}` with `source` as the cause too) is not repeated.
pub fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

/// The first hint in the chain (a [`CliError`]'s), if any.
fn hint(err: &anyhow::Error) -> Option<&str> {
    err.chain()
        .filter_map(|c| c.downcast_ref::<CliError>())
        .map(|e| e.hint.as_str())
        .find(|h| !h.is_empty())
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
    let message = message(err);
    // Errors whose text already leads with their kind are not told twice.
    let message = message
        .strip_prefix(kind)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(&message);
    let mut stderr = io::stderr().lock();
    let _ = writeln!(stderr, "error: {kind}: {message}");
    if let Some(hint) = hint(err) {
        let _ = writeln!(stderr, "  try: {hint}");
    }
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
