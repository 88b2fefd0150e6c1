//! Where packet bytes come from: `--hex`, `--file`, or stdin.
//!
//! ```text
//! --hex "90 06 11 01 01"   hex text; whitespace ignored, optional 0x prefix
//! --hex -                  hex text read from stdin
//! --file packet.bin        raw bytes
//! --file -                 raw bytes read from stdin
//! (neither)                hex text read from stdin, so `y3 encode | y3 get ...` works
//! ```

use std::fs::File;
use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;

use clap::Args;

use crate::error::CliError;

/// The input options of `get` and `inspect`.
#[derive(Debug, Clone, Args)]
pub struct InputArgs {
    /// Packet bytes as hex (whitespace ignored); `-` reads hex text from stdin.
    #[arg(long, value_name = "HEX", conflicts_with = "file")]
    pub hex: Option<String>,
    /// Raw binary file holding the packet bytes; `-` reads raw bytes from stdin.
    #[arg(long, value_name = "FILE")]
    pub file: Option<PathBuf>,
}

/// Opened input: bytes already in memory, or a reader to pull chunks from.
pub enum Source {
    /// Decoded hex.
    Bytes(Vec<u8>),
    /// A raw byte stream (file or stdin).
    Stream(Box<dyn Read>),
}

impl InputArgs {
    /// Opens the input the options name.
    ///
    /// # Errors
    /// `invalid_hex` for bad hex text, `io` when a file cannot be read, `no_input` when
    /// nothing was given and stdin is a terminal.
    pub fn open(&self) -> anyhow::Result<Source> {
        match (&self.hex, &self.file) {
            (Some(text), _) if text == "-" => Ok(Source::Bytes(read_stdin_hex()?)),
            (Some(text), _) => Ok(Source::Bytes(decode_hex(text)?)),
            (None, Some(path)) if path.as_os_str() == "-" => {
                Ok(Source::Stream(Box::new(io::stdin())))
            }
            (None, Some(path)) => {
                let file = File::open(path).map_err(|e| {
                    CliError::bad_input("io", format!("cannot open {}: {e}", path.display()))
                })?;
                Ok(Source::Stream(Box::new(file)))
            }
            (None, None) => {
                if io::stdin().is_terminal() {
                    return Err(CliError::bad_input(
                        "no_input",
                        "no input: pass --hex HEX, --file FILE, or pipe hex text on stdin",
                    )
                    .into());
                }
                Ok(Source::Bytes(read_stdin_hex()?))
            }
        }
    }

    /// Opens the input and reads all of it.
    ///
    /// # Errors
    /// As [`InputArgs::open`], and `io` for read errors.
    pub fn read_all(&self) -> anyhow::Result<Vec<u8>> {
        match self.open()? {
            Source::Bytes(bytes) => Ok(bytes),
            Source::Stream(mut reader) => {
                let mut bytes = Vec::new();
                reader.read_to_end(&mut bytes)?;
                Ok(bytes)
            }
        }
    }
}

/// Hex text from stdin, decoded; raw bytes there are told apart and pointed at `--file -`.
fn read_stdin_hex() -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::stdin().read_to_end(&mut bytes).map_err(|e| {
        CliError::bad_input("invalid_hex", format!("cannot read hex from stdin: {e}"))
    })?;
    Ok(stdin_hex(&bytes)?)
}

/// [`decode_hex`] of stdin's bytes, with what to do when they are raw bytes, not hex text.
fn stdin_hex(bytes: &[u8]) -> Result<Vec<u8>, CliError> {
    let raw_hint =
        "stdin holds raw bytes? Read them with --file - (e.g. `y3 inspect --file - < packet.bin`)";
    let text = std::str::from_utf8(bytes).map_err(|e| {
        CliError::bad_input(
            "invalid_hex",
            format!(
                "stdin is not hex text: byte {} is not UTF-8",
                e.valid_up_to()
            ),
        )
        .hint(raw_hint)
    })?;
    decode_hex(text).map_err(|e| {
        let message = format!("stdin is not hex text: {}", e.message);
        CliError::bad_input(e.kind, message).hint(raw_hint)
    })
}

/// Decodes hex text, ignoring ASCII whitespace and one leading `0x`.
///
/// Errors point at the character's position in `text` as given, not after whitespace removal.
pub fn decode_hex(text: &str) -> Result<Vec<u8>, CliError> {
    let trimmed = text.trim_start();
    let skip = text.len() - trimmed.len()
        + if trimmed.starts_with("0x") || trimmed.starts_with("0X") {
            2
        } else {
            0
        };
    let mut out = Vec::with_capacity(text.len() / 2);
    let mut high: Option<(u8, usize)> = None;
    for (at, c) in text.char_indices().skip_while(|&(at, _)| at < skip) {
        if c.is_ascii_whitespace() {
            continue;
        }
        let Some(nibble) = c.to_digit(16) else {
            return Err(CliError::bad_input(
                "invalid_hex",
                format!("invalid hex character {c:?} at position {at}"),
            ));
        };
        // `to_digit(16)` is below 16.
        let nibble = nibble as u8;
        match high.take() {
            None => high = Some((nibble, at)),
            Some((h, _)) => out.push(h << 4 | nibble),
        }
    }
    if let Some((_, at)) = high {
        return Err(CliError::bad_input(
            "invalid_hex",
            format!("odd number of hex digits: the digit at position {at} has no partner"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_with_spaces_and_prefix() {
        assert_eq!(decode_hex("11 7f").unwrap(), [0x11, 0x7f]);
        assert_eq!(decode_hex(" 0x9006\n110101 120161\n").unwrap().len(), 8);
        assert_eq!(decode_hex("").unwrap(), [] as [u8; 0]);
        assert_eq!(decode_hex("AbCd").unwrap(), [0xab, 0xcd]);
    }

    #[test]
    fn raw_bytes_on_stdin_point_at_file_dash() {
        let err = stdin_hex(&[0x90, 0x03, 0x11, 0x01, 0x42]).unwrap_err();
        assert!(
            err.message.starts_with("stdin is not hex text"),
            "{}",
            err.message
        );
        assert!(err.hint.contains("--file -"), "{}", err.hint);
        let err = stdin_hex(b"\x11\x01\x05").unwrap_err();
        assert!(err.hint.contains("--file -"), "{}", err.hint);
        assert_eq!(
            stdin_hex(b"9003110142\n").unwrap(),
            [0x90, 3, 0x11, 1, 0x42]
        );
    }

    #[test]
    fn hex_errors_point_at_the_input() {
        let err = decode_hex("11 7g").unwrap_err();
        assert_eq!(err.kind, "invalid_hex");
        assert!(err.message.contains("'g' at position 4"), "{}", err.message);
        let err = decode_hex("11 7").unwrap_err();
        assert!(err.message.contains("position 3"), "{}", err.message);
        assert!(decode_hex("0x0x11").is_err());
    }
}
