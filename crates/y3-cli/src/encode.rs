//! `y3 encode`: typed JSON in, packet bytes out.

use std::fs;
use std::io::{self, Read, Write};
use std::path::PathBuf;

use clap::Args;
use y3::Dialect;

use crate::args::DialectArg;
use crate::error::CliError;
use crate::typed_json;

/// Options of `y3 encode`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Encode typed JSON into a Y3 packet (printed as hex)",
    long_about = "Encode typed JSON into Y3 packet bytes, printed as one line of lowercase hex.

A packet is a JSON object with \"tag\" (the key: an integer, or a string like \"0x10\") and
exactly one value key:

  int32 int64 uint32 uint64   JSON integers, range-checked exactly
  float32 float64             JSON numbers, or \"inf\", \"-inf\", \"nan\"
  float32_bits float64_bits   IEEE-754 bits as 8 / 16 hex digits (NaN payloads, -0)
  bool                        true or false
  string                      a JSON string (UTF-8)
  bytes                       a hex string
  node                        a JSON array of packets
  array                       a JSON array of packets (element \"tag\" may be left out: 0)

A JSON array of packets at the top level is a stream: the packets are written one after
the other. Unknown keys, two value keys, out-of-range integers and tags the dialect cannot
carry are errors (exit 2).",
    after_help = "Examples:
  echo '{\"tag\":17,\"int32\":42}' | y3 encode                        # 11012a
  echo '{\"tag\":16,\"node\":[{\"tag\":17,\"float32\":40}]}' | y3 encode # 900411024220
  echo '[{\"tag\":1,\"int32\":5},{\"tag\":2,\"string\":\"Y3\"}]' | y3 encode --dialect nvarint"
)]
pub struct EncodeArgs {
    /// Typed JSON file to read instead of stdin (`-` is stdin).
    #[arg(value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Wire dialect.
    #[arg(long, value_enum, default_value_t)]
    pub dialect: DialectArg,
    /// Write the raw packet bytes instead of hex.
    #[arg(long)]
    pub raw: bool,
}

/// Runs `y3 encode`, writing to `out`.
///
/// # Errors
/// Typed JSON errors (see [`typed_json::parse`]) and IO errors.
pub fn run(args: &EncodeArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let text = match &args.input {
        Some(path) if path.as_os_str() != "-" => fs::read(path).map_err(|e| {
            CliError::bad_input("io", format!("cannot read {}: {e}", path.display()))
        })?,
        _ => {
            let mut text = Vec::new();
            io::stdin().read_to_end(&mut text)?;
            text
        }
    };
    let bytes = encode(&text, args.dialect.into())?;
    if args.raw {
        out.write_all(&bytes)?;
    } else {
        writeln!(out, "{}", hex::encode(&bytes))?;
    }
    out.flush()?;
    Ok(())
}

/// Encodes typed JSON text into the bytes of its packets, one after the other.
///
/// # Errors
/// As [`typed_json::parse`], plus the codec's [`y3::EncodeError`]s.
pub fn encode(text: &[u8], dialect: Dialect) -> anyhow::Result<Vec<u8>> {
    let items = typed_json::parse(text, dialect)?;
    let mut bytes = Vec::with_capacity(items.iter().map(|i| i.encoded_len(dialect)).sum());
    for item in &items {
        item.encode(dialect, &mut bytes)?;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_concatenate() {
        let text = br#"[{"tag":1,"int32":5},{"tag":2,"node":[{"tag":3,"string":"CELLA"},{"tag":4,"string":"Y3"}]}]"#;
        let bytes = encode(text, Dialect::Golang).unwrap();
        assert_eq!(hex::encode(bytes), "010105820b030543454c4c4104025933");
    }

    #[test]
    fn dialects_differ_in_integers() {
        let text = br#"{"tag":1,"node":[{"tag":2,"int32":-1}]}"#;
        assert_eq!(
            hex::encode(encode(text, Dialect::Golang).unwrap()),
            "810302017f"
        );
        assert_eq!(
            hex::encode(encode(text, Dialect::NVarInt).unwrap()),
            "810302 01ff".replace(' ', "")
        );
        assert_eq!(
            hex::encode(encode(text, Dialect::Draft02).unwrap()),
            "0103 02017f".replace(' ', "")
        );
    }
}
