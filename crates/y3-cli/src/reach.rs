//! Why a router could not be reached or refused us, in words that name the address, give
//! the cause once and say what to try (`y3 send`, `y3 observe`).
//!
//! ```text
//! error: unreachable: cannot reach the router at 127.0.0.1:9000 over tcp (3 attempts): io: Connection refused (os error 111)
//!   try: is `y3 serve` running there? Check --addr and --transport (tcp, tls or quic)
//! ```

use y3_transport::frame::GoawayCode;
use y3_transport::tls::{client_cert_refused, TrustFailure};
use y3_transport::TransportError;

use crate::error::{transport_code, CliError, EXIT_REFUSED, EXIT_UNREACHABLE};
use crate::send::{ClientArgs, TransportArg};

/// The first byte of a TLS record (an alert): what a plaintext client reads from a TLS
/// port (y3 frames start with their own type byte, never this one).
const TLS_ALERT_RECORD: u32 = 0x15;

/// A failed connect (or handshake) to the router `client` names, as a CLI error with its
/// exit status (3 unreachable, 4 refused, 2 a setting that cannot work) and a hint.
pub fn connect_error(err: TransportError, client: &ClientArgs) -> anyhow::Error {
    let addr = &client.addr;
    let transport = transport_name(client.transport);
    let last = match &err {
        TransportError::GaveUp { last, .. } => last.as_ref(),
        other => other,
    };
    let attempts = match &err {
        TransportError::GaveUp { attempts, .. } => format!(" ({attempts} attempts)"),
        _ => String::new(),
    };
    if let Some(refusal) = client_cert_refused(&err) {
        let message = format!("the router at {addr} refused the TLS handshake: {refusal}");
        let hint = "present a client certificate its client CA issued: --cert FILE --key FILE (or YOMO_TLS_CERT_FILE/YOMO_TLS_KEY_FILE)";
        return CliError::new(refusal.kind(), EXIT_REFUSED, message)
            .hint(hint)
            .into();
    }
    if let Some(failure) = TrustFailure::of(&err) {
        let hint = match failure {
            TrustFailure::WrongPin => {
                "pin the fingerprint `y3 serve` printed at its start (`tls: ... sha256 HEX`)"
                    .to_owned()
            }
            TrustFailure::Untrusted => {
                "pass the router's certificate or its CA with --ca FILE, or its fingerprint with --pin HEX".to_owned()
            }
            TrustFailure::Expired => "renew the router's certificate (or check this machine's clock)".to_owned(),
            TrustFailure::WrongName => "connect by a name the certificate carries".to_owned(),
            TrustFailure::NotTls => format!(
                "the router listens in plaintext on {addr}: use --transport tcp, or start it with --tcp-tls"
            ),
        };
        let message = format!("TLS with the router at {addr} over {transport} failed: {failure}");
        return CliError::new(failure.kind(), EXIT_UNREACHABLE, message)
            .hint(hint)
            .into();
    }
    if let TransportError::Frame(y3_transport::FrameError::UnknownFrame { tag }) = last {
        if *tag == TLS_ALERT_RECORD && client.transport == TransportArg::Tcp {
            let message = format!(
                "the router at {addr} answered plain TCP with TLS: its TCP port speaks TLS"
            );
            return CliError::new("tls_port", EXIT_UNREACHABLE, message)
                .hint("use --transport tls (with --pin HEX or --ca FILE)")
                .into();
        }
    }
    if let TransportError::Goaway { code, message } = last {
        let hint = match code {
            GoawayCode::Unauthorized => {
                "check the token (--token-file FILE or Y3_TOKEN) against the router's auth.token"
            }
            GoawayCode::Forbidden => {
                "this token may not use that tag: see the router's [[auth.tokens]] permissions"
            }
            GoawayCode::BadFilter => "fix the --where filter (spec/filters.md)",
            _ => "",
        };
        let text = format!("the router at {addr} refused the connection: {message}");
        return CliError::new(code.kind(), transport_code(last), text)
            .hint(hint)
            .into();
    }
    let code = transport_code(last);
    if code != EXIT_UNREACHABLE {
        let text = format!("cannot connect to {addr} over {transport}: {last}");
        return CliError::new(last.kind(), code, text).into();
    }
    let message = format!("cannot reach the router at {addr} over {transport}{attempts}: {last}");
    let hint = match client.transport {
        TransportArg::Quic => "is `y3 serve` running there with QUIC on (UDP)? Check --addr and --transport (tcp, tls or quic)",
        _ => "is `y3 serve` running there? Check --addr and --transport (tcp, tls or quic)",
    };
    CliError::new("unreachable", EXIT_UNREACHABLE, message)
        .hint(hint)
        .into()
}

/// A connection that failed after the handshake (a refused frame, a lost router), as a CLI
/// error naming the router, with the exit status of [`transport_code`].
pub fn session_error(err: TransportError, client: &ClientArgs) -> anyhow::Error {
    let addr = &client.addr;
    let code = transport_code(&err);
    if let TransportError::Goaway {
        code: goaway,
        message,
    } = &err
    {
        let hint = match goaway {
            GoawayCode::Forbidden => {
                "this token may not use that tag: see the router's [[auth.tokens]] permissions"
            }
            _ => "",
        };
        let text = format!("the router at {addr} closed the connection: {message}");
        return CliError::new(goaway.kind(), code, text).hint(hint).into();
    }
    let text = format!("the connection to the router at {addr} failed: {err}");
    CliError::new(err.kind(), code, text).into()
}

/// The transport as `--transport` spells it.
fn transport_name(transport: TransportArg) -> &'static str {
    match transport {
        TransportArg::Tcp => "tcp",
        TransportArg::Tls => "tls",
        TransportArg::Quic => "quic",
    }
}
