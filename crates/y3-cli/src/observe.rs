//! `y3 observe`: subscribe to tags on a router and print every data frame as a JSON line.

use std::io::Write;
use std::time::Duration;

use clap::Args;
use y3::Config;

use y3_transport::sdk::{ClientOptions, Sink};
use y3_transport::TransportError;

use crate::args::DialectArg;
use crate::error::CliError;
use crate::get::{self, ValueType};
use crate::send::{parse_tag, ClientArgs};

/// Options of `y3 observe`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Print the data frames a router routes to you, as JSON lines",
    long_about = "Connect to a router as a sink observing --tag (repeatable) and print one JSON line
per data frame: {\"frame_tag\":16,\"tag\":16,\"hops\":0,\"payload_hex\":\"...\",\"metadata\":{...}}
(\"frame_tag\" is the frame's tag, the name `y3 send` takes; \"tag\" repeats it and is
deprecated). With --text, print each payload as text on a line of its own instead
(invalid UTF-8 shown as U+FFFD), as `mosquitto_sub` does.

With --path, the payload is read as a Y3 packet with the streaming observer and the value
at that key path is added as \"value\" (typed with --as; null when absent).

When the router goes away (a restart), observe says so on stderr, waits, and reconnects
(frames routed meanwhile are not delivered to it); --no-reconnect exits instead.

With --where, the router delivers only frames whose payload matches the content filter
(spec/filters.md), on every observed tag: comparisons on key paths (== != < <= > >=),
exists, and/or/not, parentheses. A path's bytes are read as its :type (i32 i64 u32 u64
f32 f64 str bool), by default as the literal says (integer: i64, \"text\": str).",
    after_help = "Examples:
  y3 observe --tag 0x10
  y3 observe --tag 0x33 --text
  y3 observe --tag 0x10 --path 0x10/0x11 --as float32 --count 5
  y3 observe --tag 0x10 --where '0x10/0x11:f32 > 60 and 0x10/0x13 != \"lab\"'
  Y3_TOKEN=secret y3 observe --tag 0x11 --transport quic
  y3 observe --tag 0x11 --transport quic --pin SHA256HEX --token-file token.txt"
)]
pub struct ObserveArgs {
    /// Data tag to observe (repeatable).
    #[arg(long = "tag", value_parser = parse_tag, required = true)]
    pub tags: Vec<u32>,
    /// Key path into the payload, e.g. 0x10/0x11.
    #[arg(long, value_name = "PATH")]
    pub path: Option<String>,
    /// Type of the value at --path.
    #[arg(
        long = "as",
        value_enum,
        value_name = "TYPE",
        default_value_t,
        requires = "path"
    )]
    pub value_type: ValueType,
    /// Payload dialect for --path.
    #[arg(long, value_enum, default_value_t)]
    pub dialect: DialectArg,
    /// Content filter evaluated by the router, e.g. '0x10/0x11:f32 > 60'.
    #[arg(long = "where", value_name = "FILTER")]
    pub filter: Option<String>,
    /// Print each payload as a line of text instead of a JSON line.
    #[arg(long, conflicts_with = "path")]
    pub text: bool,
    /// Exit when the connection to the router is lost, instead of reconnecting.
    #[arg(long)]
    pub no_reconnect: bool,
    /// Exit after this many frames.
    #[arg(long)]
    pub count: Option<u64>,
    /// Exit when no frame arrives for this many milliseconds.
    #[arg(long, value_name = "MS")]
    pub idle_exit_ms: Option<u64>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// One frame as a JSON line: tag, hops, payload in hex, the metadata map (or its bytes
/// in hex when they are not a string map) and the observed value, if any.
pub fn frame_json(data: &y3_transport::Data, value: Option<&str>) -> String {
    let mut line = format!(
        "{{\"{}\":{},\"tag\":{},\"hops\":{},\"payload_hex\":\"{}\"",
        crate::send::FRAME_TAG_KEY,
        data.tag,
        data.tag,
        data.hops,
        hex::encode(&data.payload)
    );
    match data.metadata.to_map() {
        Ok(map) if map.is_empty() => {}
        Ok(map) => {
            let map = serde_json::to_string(&map).unwrap_or_default();
            line.push_str(&format!(",\"metadata\":{map}"));
        }
        Err(_) => line.push_str(&format!(
            ",\"metadata_hex\":\"{}\"",
            hex::encode(data.metadata.as_bytes())
        )),
    }
    if let Some(value) = value {
        line.push_str(&format!(",\"value\":{value}"));
    }
    line.push('}');
    line
}

/// Runs `y3 observe` until `--count` frames, `--idle-exit-ms` of silence, Ctrl-C, or a
/// refusal. A lost router is waited for and reconnected to (a warning on stderr each way),
/// unless `--no-reconnect`.
///
/// # Errors
/// Path syntax errors, connection errors.
pub fn run(args: &ObserveArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path =
        match &args.path {
            Some(text) => Some(y3::parse_path(text).map_err(|e| {
                CliError::bad_input(e.kind(), format!("{e} (in key path {text:?})"))
            })?),
            None => None,
        };
    let config = Config::new(args.dialect.into());
    let mut options = args.client.options("y3-observe")?;
    if let Some(text) = &args.filter {
        // Checked here for a quick, typed error; the router checks it again (its limits).
        y3::Filter::parse(text)
            .map_err(|e| CliError::bad_input(e.kind(), format!("{e} (in filter {text:?})")))?;
        for &tag in &args.tags {
            options = options.filter(tag, text.clone());
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut sink = y3_transport::sdk::Sink::connect(options.clone(), &args.tags)
            .await
            .map_err(|e| crate::reach::connect_error(e, &args.client))?;
        let mut seen = 0u64;
        let idle = args.idle_exit_ms.map(Duration::from_millis);
        // Ctrl-C or SIGTERM ends the loop and the sink closes its connection.
        let stop = crate::serve::StopSignal::register().wait();
        tokio::pin!(stop);
        while args.count.is_none_or(|count| seen < count) {
            let next = async {
                match idle {
                    Some(idle) => tokio::time::timeout(idle, sink.recv()).await.ok().flatten(),
                    None => sink.recv().await,
                }
            };
            let data = tokio::select! {
                data = next => data,
                _ = &mut stop => None,
            };
            let Some(data) = data else { break };
            let data = match data {
                Ok(data) => data,
                Err(e) if !args.no_reconnect && lost(&e) => {
                    crate::send::warn(&format!(
                        "lost the router at {} ({e}); reconnecting until it is back (Ctrl-C to stop)",
                        args.client.addr
                    ));
                    let back = tokio::select! {
                        back = reconnect(&options, &args.tags) => back,
                        _ = &mut stop => break,
                    };
                    sink = back.map_err(|e| crate::reach::connect_error(e, &args.client))?;
                    crate::send::warn(&format!("reconnected to {}", args.client.addr));
                    continue;
                }
                Err(e) => return Err(crate::reach::session_error(e, &args.client)),
            };
            // A payload that is not what --path expects is reported on its line, not fatal.
            let value = path.as_ref().map(|path| {
                match get::observe(&mut &data.payload[..], path, config, args.value_type) {
                    Ok(Some(value)) => value,
                    Ok(None) => "null".to_owned(),
                    Err(e) => format!("null,\"error\":\"{}\"", crate::error::classify(&e).0),
                }
            });
            if args.text {
                out.write_all(&text_line(&data.payload))?;
            } else {
                writeln!(out, "{}", frame_json(&data, value.as_deref()))?;
            }
            out.flush()?;
            seen += 1;
        }
        sink.close().await;
        anyhow::Ok(())
    })
}

/// Whether a sink's error is a lost router (worth waiting for), not a refusal.
fn lost(e: &TransportError) -> bool {
    match e {
        TransportError::GaveUp { last, .. } => lost(last),
        e => e.is_retryable(),
    }
}

/// Connects a sink again, retrying (each try with the options' backoff) every
/// [`RECONNECT_PAUSE`] while the router is away; a refusal ends it.
async fn reconnect(options: &ClientOptions, tags: &[u32]) -> Result<Sink, TransportError> {
    loop {
        match Sink::connect(options.clone(), tags).await {
            Err(e) if lost(&e) => tokio::time::sleep(RECONNECT_PAUSE).await,
            other => return other,
        }
    }
}

/// The pause between reconnection rounds of `y3 observe`.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// A payload as a line of text: invalid UTF-8 as U+FFFD, a newline added.
pub fn text_line(payload: &[u8]) -> Vec<u8> {
    let mut line = String::from_utf8_lossy(payload).into_owned().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_line() {
        let data = y3_transport::Data::new(16, vec![0x11, 0x01, 0x2a]);
        assert_eq!(
            frame_json(&data, Some("42")),
            r#"{"frame_tag":16,"tag":16,"hops":0,"payload_hex":"11012a","value":42}"#
        );
        let md = y3_transport::Metadata::from_pairs([("yomo-tid", "t1")]);
        assert_eq!(
            frame_json(&data.with_metadata(md), None),
            r#"{"frame_tag":16,"tag":16,"hops":0,"payload_hex":"11012a","metadata":{"yomo-tid":"t1"}}"#
        );
        assert_eq!(text_line(b"hi\xff"), "hi\u{fffd}\n".as_bytes());
    }
}
