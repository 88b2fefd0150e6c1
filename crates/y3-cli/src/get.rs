//! `y3 get`: pull one value out of packet bytes by key path, with the streaming observer.
//!
//! The input is fed to a [`y3::Observer`] in chunks (64 KiB from a file or stdin, or the
//! whole hex buffer); the first value at the path is printed and nothing after it is read.
//! If the input ends first, [`y3::Observer::finish`] tells a clean end ("not found", exit
//! 1) from a truncated packet (`unexpected_end`, exit 2).

use std::io::{Read, Write};

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};
use y3::items::ValueKey;
use y3::{Config, DecodeError, Observer, Packet};

use crate::args::{path_text, DialectArg};
use crate::error::CliError;
use crate::input::{InputArgs, Source};

/// `--as`: what to read the observed value as — one of the codec's value keys
/// ([`ValueKey`], the one home of their names), those a single value reads as
/// ([`ValueType::KEYS`]); `bytes` (the default) reads any packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueType(pub ValueKey);

impl ValueType {
    /// The keys `--as` takes, in `--help` order.
    pub const KEYS: [ValueType; 9] = [
        ValueType(ValueKey::Int32),
        ValueType(ValueKey::Int64),
        ValueType(ValueKey::Uint32),
        ValueType(ValueKey::Uint64),
        ValueType(ValueKey::Float32),
        ValueType(ValueKey::Float64),
        ValueType(ValueKey::Bool),
        ValueType(ValueKey::String),
        ValueType(ValueKey::Bytes),
    ];
}

impl Default for ValueType {
    fn default() -> Self {
        ValueType(ValueKey::Bytes)
    }
}

impl ValueEnum for ValueType {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::KEYS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self.0 {
            ValueKey::Int32 => "Signed 32-bit integer",
            ValueKey::Int64 => "Signed 64-bit integer",
            ValueKey::Uint32 => "Unsigned 32-bit integer (the int32 with the same bits)",
            ValueKey::Uint64 => "Unsigned 64-bit integer (the int64 with the same bits)",
            ValueKey::Float32 => "VarFloat float32",
            ValueKey::Float64 => "VarFloat float64",
            ValueKey::Bool => "Integer 0 or 1",
            ValueKey::String => "UTF-8 string",
            ValueKey::Bytes => "Raw value bytes, printed as a hex string (works for nodes too)",
            _ => return None,
        };
        Some(PossibleValue::new(self.0.name()).help(help))
    }
}

/// Options of `y3 get`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Print the value at a key path as JSON",
    long_about = "Print the first value at a key path as JSON, read with the streaming observer.

The path names a top-level key, then a child key, and so on: 0x10/0x11 is child 0x11 of
top-level packet 0x10 (hex with 0x, else decimal). The input may hold several top-level
packets; the first match wins and nothing after it is read.

Output: integers exactly, floats as JSON numbers (non-finite ones as the strings \"inf\",
\"-inf\", \"nan\"), bools as true/false, strings as JSON strings, bytes as a hex string.
--as defaults to bytes, which reads any packet (a node's bytes are its children).

Exit status: 0 found, 1 key path not found, 2 malformed input or wrong type.",
    after_help = "Examples:
  y3 get --hex 9017110242201206aec8bbba800013093132372e302e302e31 --path 0x10/0x11 --as float32
  y3 get --file packet.bin --path 0x10/0x13 --as string
  echo '{\"tag\":17,\"int64\":-1}' | y3 encode | y3 get --path 0x11 --as uint64"
)]
pub struct GetArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Key path, e.g. 0x10/0x11 or 16/17.
    #[arg(long, value_name = "PATH")]
    pub path: String,
    /// Type to read the value as.
    #[arg(long = "as", value_enum, value_name = "TYPE", default_value_t)]
    pub value_type: ValueType,
    /// Wire dialect.
    #[arg(long, value_enum, default_value_t)]
    pub dialect: DialectArg,
}

/// Bytes read from a stream per feed.
const CHUNK: usize = 64 * 1024;

/// Runs `y3 get`, writing the value to `out`.
///
/// # Errors
/// Path syntax errors, input errors, the codec's decode errors, and a [`CliError`] of kind
/// `not_found` (exit 1) when the path matches nothing.
pub fn run(args: &GetArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = y3::parse_path(&args.path)
        .map_err(|e| CliError::bad_input(e.kind(), format!("{e} (in key path {:?})", args.path)))?;
    let config = Config::new(args.dialect.into());
    let found = match args.input.open()? {
        Source::Bytes(bytes) => observe(&mut &bytes[..], &path, config, args.value_type)?,
        Source::Stream(mut reader) => observe(&mut reader, &path, config, args.value_type)?,
    };
    match found {
        Some(json) => {
            writeln!(out, "{json}")?;
            out.flush()?;
            Ok(())
        }
        None => Err(CliError::not_found(format!("key path {} not found", path_text(&path))).into()),
    }
}

/// Feeds `input` to an observer of `path` until the first match, rendered as JSON text.
///
/// # Errors
/// Decode errors of the walk, of [`Observer::finish`] and of the typed read; IO errors.
pub fn observe(
    input: &mut dyn Read,
    path: &[u32],
    config: Config,
    value_type: ValueType,
) -> anyhow::Result<Option<String>> {
    let mut observer = Observer::new(config, &[path]).map_err(|e| {
        CliError::bad_input(e.kind(), format!("{e} (key path {})", path_text(path)))
    })?;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match input.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            observer.finish()?;
            return Ok(None);
        }
        // Without a match, `feed` consumes its whole input ("feed me more").
        let fed = observer.feed(&buf[..n])?;
        if let Some(found) = fed.observed {
            return match render(&found.packet, value_type) {
                Ok(json) => Ok(Some(json)),
                Err(e) => Err(wrong_type_hint(e, &found.packet, value_type, path).into()),
            };
        }
    }
}

/// The packet's value read as `value_type`, as JSON text.
///
/// # Errors
/// The typed accessor's [`DecodeError`] (`wrong_type` for a node, `invalid_length`, ...).
pub fn render(packet: &Packet<'_>, value_type: ValueType) -> Result<String, DecodeError> {
    Ok(match value_type.0 {
        ValueKey::Int32 => packet.i32()?.to_string(),
        ValueKey::Int64 => packet.i64()?.to_string(),
        ValueKey::Uint32 => packet.u32()?.to_string(),
        ValueKey::Uint64 => packet.u64()?.to_string(),
        ValueKey::Float32 => json_f32(packet.f32()?),
        ValueKey::Float64 => json_f64(packet.f64()?),
        ValueKey::Bool => packet.bool()?.to_string(),
        ValueKey::String => json_string(packet.str()?),
        // Raw bytes of any packet, node or not; the keys `--as` does not take (the bits
        // keys, node, array) read as their bytes too.
        ValueKey::Bytes
        | ValueKey::Float32Bits
        | ValueKey::Float64Bits
        | ValueKey::Node
        | ValueKey::Array => json_string(&hex::encode(packet.value())),
    })
}

/// A value that does not read as `asked`, with what it does read as: an integer asked of
/// a float says so and names `--as float64` (the codec alone says `trailing_bytes`).
fn wrong_type_hint(
    err: DecodeError,
    packet: &Packet<'_>,
    asked: ValueType,
    path: &[u32],
) -> CliError {
    let at = path_text(path);
    let message = format!(
        "the value at {at} does not read as {}: {err}",
        type_name(asked)
    );
    let mut error = CliError::bad_input(err.kind(), message);
    let integer = matches!(
        asked.0,
        ValueKey::Int32 | ValueKey::Int64 | ValueKey::Uint32 | ValueKey::Uint64 | ValueKey::Bool
    );
    if packet.is_node() {
        error = error.hint("it is a node: give the path of one of its children, or --as bytes");
    } else if integer {
        let float = match (packet.f64(), packet.f32()) {
            (Ok(v), _) => Some(("float64", json_f64(v))),
            (_, Ok(v)) => Some(("float32", json_f32(v))),
            _ => None,
        };
        if let Some((name, value)) = float {
            error = error.hint(format!(
                "it reads as the {name} {value}: use --as {name} (or --as bytes to see its bytes)"
            ));
        }
    }
    error
}

/// A type as `--as` spells it.
fn type_name(value_type: ValueType) -> String {
    value_type.0.name().to_owned()
}

fn json_string(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// Non-finite floats have no JSON number; they are printed as strings.
fn non_finite(v: f64) -> Option<String> {
    if v.is_nan() {
        Some("\"nan\"".into())
    } else if v.is_infinite() {
        Some(if v > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into())
    } else {
        None
    }
}

/// A float32 in its shortest round-trip form (`0.1`, not `0.10000000149011612`).
pub fn json_f32(v: f32) -> String {
    non_finite(v.into()).unwrap_or_else(|| format!("{v:?}"))
}

/// A float64 in its shortest round-trip form.
pub fn json_f64(v: f64) -> String {
    non_finite(v).unwrap_or_else(|| format!("{v:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(hex: &str, path: &[u32], ty: ValueType) -> anyhow::Result<Option<String>> {
        let bytes = hex::decode(hex).unwrap();
        observe(&mut &bytes[..], path, Config::DEFAULT, ty)
    }

    #[test]
    fn floats_are_json() {
        assert_eq!(json_f32(0.1), "0.1");
        assert_eq!(json_f32(-0.0), "-0.0");
        assert_eq!(json_f32(f32::MAX), "3.4028235e38");
        assert_eq!(json_f64(5e-324), "5e-324");
        assert_eq!(json_f32(f32::NEG_INFINITY), "\"-inf\"");
        assert_eq!(json_f64(f64::NAN), "\"nan\"");
        for text in [json_f32(1e-7), json_f64(1.5), json_f64(-2.25)] {
            assert!(serde_json::from_str::<f64>(&text).is_ok(), "{text}");
        }
    }

    #[test]
    fn reads_through_nodes() {
        let noise = "9017110242201206aec8bbba800013093132372e302e302e31";
        assert_eq!(
            get(noise, &[0x10, 0x11], ValueType(ValueKey::Float32))
                .unwrap()
                .unwrap(),
            "40.0"
        );
        assert_eq!(
            get(noise, &[0x10, 0x13], ValueType(ValueKey::String))
                .unwrap()
                .unwrap(),
            "\"127.0.0.1\""
        );
        assert_eq!(
            get(noise, &[0x10, 0x14], ValueType(ValueKey::Bytes)).unwrap(),
            None
        );
        let err = get(noise, &[0x10], ValueType(ValueKey::Int32)).unwrap_err();
        assert_eq!(crate::error::classify(&err), ("wrong_type", 2));
        let err = get("9017110242", &[0x10, 0x12], ValueType(ValueKey::Int32)).unwrap_err();
        assert_eq!(crate::error::classify(&err).0, "unexpected_end");
    }

    #[test]
    fn chunked_stream_matches_one_shot() {
        // A 16 KiB string straddles the 64 KiB chunks only when read from a stream; a
        // reader that returns 3 bytes at a time forces assembly.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(3).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let bytes = hex::decode("010105820b030543454c4c4104025933").unwrap();
        let got = observe(
            &mut Trickle(&bytes),
            &[0x02, 0x03],
            Config::DEFAULT,
            ValueType(ValueKey::String),
        )
        .unwrap();
        assert_eq!(got.as_deref(), Some("\"CELLA\""));
    }
}
