//! `y3 send`: JSON lines in, data frames out to a router. Also the client options that
//! `send` and `observe` share.

use std::io::{self, BufRead, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use serde_json::Value as Json;
use y3::Dialect;
use y3_transport::sdk::{Backoff, ClientOptions, Source, Transport};
use y3_transport::tls::{
    default_dev_cert_path, default_dev_cert_path_for, Identity, Trust, YomoTlsEnv,
};

use crate::args::DialectArg;
use crate::error::CliError;
use crate::input::decode_hex;
use crate::typed_json;

/// The transport, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum TransportArg {
    /// Plain TCP.
    #[default]
    Tcp,
    /// TLS 1.3 over TCP.
    Tls,
    /// QUIC (TLS 1.3).
    Quic,
}

impl From<TransportArg> for Transport {
    fn from(arg: TransportArg) -> Transport {
        match arg {
            TransportArg::Tcp => Transport::Tcp,
            TransportArg::Tls => Transport::TcpTls,
            TransportArg::Quic => Transport::Quic,
        }
    }
}

/// The environment variable holding the token, for `serve`, `send` and `observe` alike.
pub const TOKEN_ENV: &str = "Y3_TOKEN";

/// Prints a warning on stderr. A stderr that cannot be written loses it: a warning is not
/// worth a panic (`eprintln!` would).
pub fn warn(message: &str) {
    let _ = writeln!(io::stderr(), "warning: {message}");
}

/// How to reach the router: shared by `send` and `observe`.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Router address: an IP or a host name, and a port (`localhost:9000`).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:9000")]
    pub addr: String,
    /// Transport.
    #[arg(long, value_enum, default_value_t)]
    pub transport: TransportArg,
    /// PEM certificate to trust for tls/quic (default: the dev certificate `y3 serve`
    /// writes to $XDG_RUNTIME_DIR/y3 or ~/.cache/y3 for this --addr, dev-cert-ADDRESS.pem,
    /// else dev-cert.pem, if present).
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Trust only the certificate with this SHA-256 fingerprint (64 hex digits, as
    /// `y3 serve` prints it) for tls/quic.
    #[arg(long, value_name = "SHA256HEX", conflicts_with = "ca")]
    pub pin: Option<String>,
    /// Accept any server certificate (development only).
    #[arg(long, conflicts_with_all = ["ca", "pin"])]
    pub insecure: bool,
    /// Client certificate (PEM chain) to present over tls/quic, for a router that requires
    /// one (default: YOMO_TLS_CERT_FILE, as YoMo's clients).
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// Private key of --cert (default: YOMO_TLS_KEY_FILE).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// The router's token (sent as the credential `token:TOKEN`). Other users can read it
    /// in the process list: prefer --token-file or the environment variable Y3_TOKEN.
    #[arg(long)]
    pub token: Option<String>,
    /// File holding the router's token.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// The wanted target (`y3 observe`): receive frames sent with this `yomo-target`.
    #[arg(long, value_name = "TARGET", default_value = "")]
    pub wanted_target: String,
    /// Client name shown in the router's logs.
    #[arg(long)]
    pub name: Option<String>,
}

impl ClientArgs {
    /// The router's address, a host name resolved (the first address it has).
    ///
    /// # Errors
    /// `bad_address` (exit 2) for text that is not `HOST:PORT`, or a name that does not
    /// resolve.
    pub fn socket_addr(&self) -> anyhow::Result<SocketAddr> {
        let bad = |why: String| {
            CliError::bad_input("bad_address", format!("--addr {:?}: {why}", self.addr))
                .hint("give HOST:PORT, e.g. --addr 127.0.0.1:9000 or --addr localhost:9000")
        };
        let mut addrs = self
            .addr
            .to_socket_addrs()
            .map_err(|e| bad(e.to_string()))?;
        Ok(addrs
            .next()
            .ok_or_else(|| bad("the name has no address".to_owned()))?)
    }

    /// The TLS server name to ask for: the host of `--addr` when it is a name, else the
    /// name dev certificates carry (`localhost`), which also covers their IP addresses.
    fn server_name(&self) -> Option<&str> {
        let (host, _) = self.addr.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        (host.parse::<std::net::IpAddr>().is_err() && !host.is_empty()).then_some(host)
    }

    /// The token: `--token`, else the contents of `--token-file`, else `Y3_TOKEN`, else
    /// none.
    ///
    /// # Errors
    /// `token_file` when the file cannot be read or is empty.
    pub fn token(&self) -> anyhow::Result<String> {
        if let Some(token) = &self.token {
            return Ok(token.clone());
        }
        if let Some(file) = &self.token_file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                CliError::bad_input("token_file", format!("cannot read {}: {e}", file.display()))
            })?;
            let token = text.trim();
            if token.is_empty() {
                let message = format!("{} is empty", file.display());
                return Err(CliError::bad_input("token_file", message).into());
            }
            return Ok(token.to_owned());
        }
        Ok(std::env::var(TOKEN_ENV)
            .unwrap_or_default()
            .trim()
            .to_owned())
    }

    /// SDK options for these arguments. Warns (on stderr) when the token would cross the
    /// network in clear: plain TCP to an address beyond loopback.
    ///
    /// # Errors
    /// `certificate` when the CA file cannot be read, `config` for a malformed `--pin`,
    /// `token_file` as [`ClientArgs::token`].
    pub fn options(&self, default_name: &str) -> anyhow::Result<ClientOptions> {
        self.options_with(default_name, &YomoTlsEnv::from_env())
    }

    /// [`ClientArgs::options`] with YoMo's TLS variables as given: as YoMo's clients do,
    /// `YOMO_TLS_CERT_FILE`/`YOMO_TLS_KEY_FILE` are the client certificate, and with
    /// `YOMO_TLS_VERIFY_PEER=true`, `YOMO_TLS_CACERT_FILE` is the CA to verify the router
    /// against. Flags win over them.
    ///
    /// # Errors
    /// As [`ClientArgs::options`].
    pub fn options_with(
        &self,
        default_name: &str,
        yomo: &YomoTlsEnv,
    ) -> anyhow::Result<ClientOptions> {
        let trust = if self.insecure {
            Trust::Insecure
        } else if let Some(pin) = &self.pin {
            Trust::from_fingerprint(pin).map_err(net_error)?
        } else if let Some(ca) = &self.ca {
            Trust::from_pem_file(ca).with_context(|| format!("reading {}", ca.display()))?
        } else {
            Trust::Unset
        };
        let mut options = ClientOptions::new(self.socket_addr()?).trust(trust);
        if let Some(name) = self.server_name() {
            options.server_name = name.to_owned();
        }
        if let (Some(cert), Some(key)) = (&self.cert, &self.key) {
            let identity = Identity::client_from_pem_files(cert, key)
                .with_context(|| format!("reading {} and {}", cert.display(), key.display()))?;
            options = options.client_identity(identity);
        }
        // YoMo's variables fill in what the flags left unset, then the dev certificate.
        options = options
            .yomo_tls_env(yomo)
            .context("reading the files YOMO_TLS_* name")?;
        // The router's own file (`y3 serve` names it after its address), else the shared one.
        let default_cert = [
            default_dev_cert_path_for(options.addr),
            default_dev_cert_path(),
        ]
        .into_iter()
        .find(|path| path.exists());
        if let (Trust::Unset, true, Some(cert)) = (
            &options.trust,
            self.transport != TransportArg::Tcp,
            default_cert,
        ) {
            options.trust = Trust::from_pem_file(&cert)?;
        }
        let options = options
            .transport(self.transport.into())
            .token(&self.token()?)
            .wanted_target(self.wanted_target.clone())
            .name(self.name.clone().unwrap_or_else(|| default_name.to_owned()))
            .backoff(Backoff {
                attempts: 3,
                ..Backoff::default()
            });
        if options.exposes_credential() {
            warn(&format!(
                "the token crosses plain TCP to {} in clear; use --transport tls or quic",
                self.addr
            ));
        }
        Ok(options)
    }
}

/// A transport error once connected, as a CLI error: its stable kind (`forbidden`,
/// `closed`, ...) is what `error: KIND: ...` prints, with the exit status of
/// [`crate::error::transport_code`] (3 lost, 4 refused, 2 a bad setting).
pub fn net_error(err: y3_transport::TransportError) -> anyhow::Error {
    CliError::new(
        err.kind(),
        crate::error::transport_code(&err),
        err.to_string(),
    )
    .into()
}

/// Parses a data tag: `0x10` or `16`.
pub fn parse_tag(text: &str) -> Result<u32, String> {
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("invalid tag {text:?} (expected 0x10 or 16)"))
}

/// The JSON key of a frame's tag, in `y3 send`'s input and `y3 observe`'s output (one
/// name for one thing: in typed JSON, `"tag"` is a packet's key).
pub const FRAME_TAG_KEY: &str = "frame_tag";

/// How `y3 send` reads its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum PayloadMode {
    /// One JSON line per frame: typed JSON, or {"frame_tag":16,"payload_hex":"..."}.
    #[default]
    Json,
    /// One frame per line, the line's text (without its newline) as the payload.
    Text,
    /// The whole input, bytes as they are, as one frame.
    Raw,
}

/// Options of `y3 send`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Send JSON lines, text lines or raw bytes to a router as data frames",
    long_about = "Read lines and send each as one data frame to a router (see `y3 serve`).

By default each line is JSON: either a typed JSON packet, as `y3 encode` takes it, whose Y3
encoding becomes the payload under --tag, or a raw frame {\"frame_tag\": 16,
\"payload_hex\": \"...\"} whose tag (optional, default --tag) and payload are given directly
(\"tag\" beside \"payload_hex\" still works, deprecated: in typed JSON \"tag\" is the packet's
key). Blank lines are skipped. --text sends each non-empty line's text as a payload (as
`mosquitto_pub -l`); --raw sends the whole input, bytes as they are, as one payload (as
`mosquitto_pub -s`).

At the end it prints {\"sent\":N,\"payload_bytes\":B}, and only once every frame has been
written to the connection and the router closed it without refusing any (a frame its token
may not publish is refused as `forbidden`, exit status 4). \"sent\" does not mean routed: a
frame for a tag nobody observes is dropped by the router (and counted there). A bad line
stops the run: the frames before it are sent, and the error names its line number and how
many were sent.

The token comes from --token-file, or Y3_TOKEN (--token works too, but shows in the process
list); over plain TCP beyond loopback it would cross the network in clear (a warning).",
    after_help = "Examples:
  echo '{\"tag\":16,\"node\":[{\"tag\":17,\"float32\":40}]}' | y3 send --tag 0x10
  echo hello | y3 send --text --tag 0x33
  y3 send --raw --tag 0x34 < image.png
  echo '{\"frame_tag\":51,\"payload_hex\":\"0102\"}' | y3 send --transport quic
  echo '{\"payload_hex\":\"0102\"}' | y3 send --transport quic --pin SHA256HEX --token-file t
  y3 observe --tag 0x10 --path 0x10/0x11 --as float32   # in another terminal"
)]
pub struct SendArgs {
    /// Data tag of the frames.
    #[arg(long, value_parser = parse_tag, default_value = "0x10")]
    pub tag: u32,
    /// Input file (default: stdin; `-` is stdin).
    #[arg(value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Each line's text is a payload (no JSON).
    #[arg(long, conflicts_with = "raw")]
    pub text: bool,
    /// The whole input, bytes as they are, is one payload.
    #[arg(long)]
    pub raw: bool,
    /// Dialect of typed JSON payloads.
    #[arg(long, value_enum, default_value_t)]
    pub dialect: DialectArg,
    /// Send every frame to the stream functions wanting this target (`yomo-target`).
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    #[command(flatten)]
    pub client: ClientArgs,
}

impl SendArgs {
    /// The payload mode the flags choose.
    pub fn mode(&self) -> PayloadMode {
        if self.raw {
            PayloadMode::Raw
        } else if self.text {
            PayloadMode::Text
        } else {
            PayloadMode::Json
        }
    }
}

/// Whether a line used the deprecated `"tag"` beside `"payload_hex"` (warned once).
static DEPRECATED_TAG_WARNED: std::sync::Once = std::sync::Once::new();

/// One JSON line turned into a frame: its tag and payload.
pub fn line_to_frame(
    line: &str,
    default_tag: u32,
    dialect: Dialect,
) -> anyhow::Result<(u32, Vec<u8>)> {
    let json: Json = serde_json::from_str(line).map_err(|e| {
        CliError::bad_input("invalid_json", format!("not JSON: {e}"))
            .hint("send text lines with --text, raw bytes with --raw")
    })?;
    if let Some(hex) = json.get("payload_hex") {
        let Some(hex) = hex.as_str() else {
            return Err(CliError::bad_input("invalid_json", "payload_hex must be a string").into());
        };
        let tag = match (json.get(FRAME_TAG_KEY), json.get("tag")) {
            (Some(_), Some(_)) => {
                let message =
                    format!("both \"{FRAME_TAG_KEY}\" and \"tag\": give \"{FRAME_TAG_KEY}\" only");
                return Err(CliError::bad_input("invalid_json", message).into());
            }
            (Some(tag), None) => Some(tag),
            (None, Some(tag)) => {
                DEPRECATED_TAG_WARNED.call_once(|| {
                    warn(&format!("\"tag\" beside \"payload_hex\" is deprecated: name the frame's tag \"{FRAME_TAG_KEY}\""));
                });
                Some(tag)
            }
            (None, None) => None,
        };
        let tag = match tag {
            None => default_tag,
            Some(Json::Number(n)) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| CliError::bad_input("invalid_json", "frame tag out of range"))?,
            Some(Json::String(s)) => {
                parse_tag(s).map_err(|e| CliError::bad_input("invalid_json", e))?
            }
            Some(_) => return Err(CliError::bad_input("invalid_json", "invalid frame tag").into()),
        };
        return Ok((tag, decode_hex(hex)?));
    }
    let items = typed_json::items(&json, dialect)?;
    let mut payload = Vec::new();
    for item in &items {
        item.encode(dialect, &mut payload)?;
    }
    Ok((default_tag, payload))
}

/// What the input thread hands over: a line (its number and bytes, newline removed), or
/// the whole input in raw mode.
type Chunk = io::Result<(usize, Vec<u8>)>;

/// Reads `reader` on a thread of its own, as `mode` splits it.
fn read_input(
    mut reader: Box<dyn BufRead + Send>,
    mode: PayloadMode,
) -> tokio::sync::mpsc::Receiver<Chunk> {
    // A blocking read on the runtime's thread would hold back the writer (frames sent only
    // when the input ends) and the connection's keep-alives.
    let (tx, rx) = tokio::sync::mpsc::channel::<Chunk>(1024);
    std::thread::spawn(move || {
        if mode == PayloadMode::Raw {
            let mut all = Vec::new();
            let read = reader.read_to_end(&mut all).map(|_| (1, all));
            let _ = tx.blocking_send(read);
            return;
        }
        let mut n = 0;
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => return,
                Ok(_) => {
                    n += 1;
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    if tx.blocking_send(Ok((n, line))).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    rx
}

/// A bad line, with where it was and what had been sent before it.
fn bad_line(err: anyhow::Error, line: usize, sent: u64) -> anyhow::Error {
    let frames = if sent == 1 { "frame" } else { "frames" };
    err.context(format!(
        "line {line} (the {sent} {frames} before it were sent; nothing after it)"
    ))
}

/// Runs `y3 send`.
///
/// # Errors
/// Bad lines (with their line number and the count sent before them), connection errors.
pub fn run(args: &SendArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let reader: Box<dyn BufRead + Send> = match &args.input {
        Some(path) if path.as_os_str() != "-" => {
            Box::new(io::BufReader::new(std::fs::File::open(path).map_err(
                |e| CliError::bad_input("io", format!("cannot open {}: {e}", path.display())),
            )?))
        }
        _ => Box::new(io::BufReader::new(io::stdin())),
    };
    let mode = args.mode();
    let mut lines = read_input(reader, mode);
    let options = args.client.options("y3-send")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (sent, bytes) = runtime.block_on(async {
        let mut source = Source::connect(options)
            .await
            .map_err(|e| crate::reach::connect_error(e, &args.client))?;
        let (mut sent, mut bytes) = (0u64, 0usize);
        let mut failed = None;
        while let Some(chunk) = lines.recv().await {
            let (n, line) = chunk?;
            let frame = match mode {
                PayloadMode::Raw => Ok((args.tag, line)),
                PayloadMode::Text if line.is_empty() => continue,
                PayloadMode::Text => Ok((args.tag, line)),
                PayloadMode::Json => match std::str::from_utf8(&line) {
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => line_to_frame(text, args.tag, args.dialect.into()),
                    Err(e) => Err(
                        CliError::bad_input("invalid_json", format!("not UTF-8: {e}"))
                            .hint("send raw bytes with --raw")
                            .into(),
                    ),
                },
            };
            let (tag, payload) = match frame {
                Ok(frame) => frame,
                Err(e) => {
                    failed = Some(bad_line(e, n, sent));
                    break;
                }
            };
            bytes += payload.len();
            match &args.target {
                Some(target) => source.send_with_target(tag, payload, target).await,
                None => source.send(tag, payload).await,
            }
            .map_err(|e| crate::reach::session_error(e, &args.client))?;
            sent += 1;
        }
        // What came before a bad line is sent all the same, as the error says.
        source
            .close()
            .await
            .map_err(|e| crate::reach::session_error(e, &args.client))?;
        if let Some(failed) = failed {
            return Err(failed);
        }
        anyhow::Ok((sent, bytes))
    })?;
    writeln!(out, "{{\"sent\":{sent},\"payload_bytes\":{bytes}}}")?;
    out.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_from_flag_file_or_environment() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            client: ClientArgs,
        }
        let parse = |args: &[&str]| {
            Cli::try_parse_from(std::iter::once("y3").chain(args.iter().copied())).map(|c| c.client)
        };
        let file = std::env::temp_dir().join(format!("y3-token-test-{}", std::process::id()));
        std::fs::write(&file, "from-file\n").unwrap();
        let path = file.to_str().unwrap();
        assert_eq!(parse(&["--token", "t"]).unwrap().token().unwrap(), "t");
        let from_file = parse(&["--token-file", path]).unwrap();
        assert_eq!(from_file.token().unwrap(), "from-file");
        assert!(parse(&["--token", "t", "--token-file", path]).is_err());
        std::fs::write(&file, "\n").unwrap();
        let err = from_file.token().unwrap_err();
        assert_eq!(crate::error::classify(&err).0, "token_file");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            crate::error::classify(&from_file.token().unwrap_err()).0,
            "token_file"
        );
        // --pin: 64 hex digits, not with --ca or --insecure.
        let pin = "ab".repeat(32);
        let pinned = parse(&["--transport", "quic", "--pin", &pin]).unwrap();
        assert!(matches!(
            pinned.options("t").unwrap().trust,
            Trust::Fingerprint(f) if f == [0xab; 32]
        ));
        let short = parse(&["--pin", "abcd"]).unwrap().options("t").unwrap_err();
        assert_eq!(crate::error::classify(&short).0, "config");
        assert!(parse(&["--pin", &pin, "--insecure"]).is_err());
        assert!(parse(&["--pin", &pin, "--ca", "x.pem"]).is_err());
    }

    #[test]
    fn lines() {
        let d = Dialect::Golang;
        assert_eq!(
            line_to_frame(r#"{"tag":17,"int32":42}"#, 0x10, d).unwrap(),
            (0x10, vec![0x11, 0x01, 0x2a])
        );
        assert_eq!(
            line_to_frame(r#"{"frame_tag":"0x33","payload_hex":"0102"}"#, 0x10, d).unwrap(),
            (0x33, vec![1, 2])
        );
        // The old spelling still works (with a warning); both at once is refused.
        assert_eq!(
            line_to_frame(r#"{"tag":51,"payload_hex":"0102"}"#, 0x10, d).unwrap(),
            (0x33, vec![1, 2])
        );
        let both = r#"{"tag":51,"frame_tag":51,"payload_hex":""}"#;
        assert!(line_to_frame(both, 0x10, d).is_err());
        assert_eq!(
            line_to_frame(r#"{"payload_hex":""}"#, 0x10, d).unwrap(),
            (0x10, vec![])
        );
        assert!(line_to_frame("nope", 0x10, d).is_err());
        assert_eq!(parse_tag("0x10"), Ok(16));
        assert!(parse_tag("0xzz").is_err());
    }
}
