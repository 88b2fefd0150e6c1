//! `y3 inspect`: a readable tree of any packet bytes, like `protoc --decode_raw`.
//!
//! ```text
//! 0x10 (node, 23 bytes) {
//!   0x11: 42 20  (2 bytes)  float32=40.0 float64=34359738368.0
//!   0x12: ae c8 bb ba 80 00  (6 bytes)  int=1600000000000
//!   0x13: 31 32 37 2e 30 2e 30 2e 31  (9 bytes)  string="127.0.0.1"
//! }
//! ```
//!
//! The wire carries no types, so a primitive is shown with every reading that is
//! plausible: `int` when the bytes are one well-formed integer in the dialect, `float32` /
//! `float64` when the length fits and the number is zero, non-finite, or between 1e-6 and
//! 1e12 in magnitude, `string` when the bytes are printable UTF-8.
//!
//! The tree is walked with [`y3::Packet::parse_with`] and [`y3::Packet::children`], the
//! codec's own header parser; a malformed packet is shown up to the error, which is then
//! marked in place (`!! kind: message`) and reported on stderr (exit 2).

use std::fmt::Write as _;
use std::io::Write;

use clap::Args;
use y3::{Config, DecodeError, Dialect, Packet, Tag};

use crate::args::DialectArg;
use crate::error::CliError;
use crate::input::InputArgs;

/// Options of `y3 inspect`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Show packet bytes as a readable tree (like protoc --decode_raw)",
    long_about = "Show packet bytes as a readable tree, like protoc --decode_raw.

Each primitive is shown with its hex, its length and every plausible reading: int
(PVarInt in golang/draft02, NVarInt in nvarint), float32/float64 when the length fits,
string when the bytes are printable UTF-8. Several top-level packets are shown one after
the other. Malformed input is shown up to the error, which is marked with !! and reported
on stderr (exit 2).

draft02 has no node flag on the wire. By default a draft02 value whose bytes parse
completely as child packets is shown as a node marked \"guessed\"; --nodes names the keys
that are nodes instead (a bare key such as 0x12 at any depth, a path such as 0x10/0x12
from the top), and --no-guess shows every value as a primitive.

--json prints the tree as a JSON array of top-level packets: {\"tag\", \"node\", \"array\",
\"offset\", \"len\"} plus \"children\" for nodes, \"hex\" for primitives and \"guessed\": true
for guessed draft02 nodes. On malformed input --json prints nothing (exit 2).",
    after_help = "Examples:
  y3 inspect --hex 9017110242201206aec8bbba800013093132372e302e302e31
  y3 inspect --file capture.bin --json
  y3 inspect --dialect draft02 --nodes 0x02 --hex 010105020b030543454c4c4104025933"
)]
pub struct InspectArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// Wire dialect.
    #[arg(long, value_enum, default_value_t)]
    pub dialect: DialectArg,
    /// Print the tree as JSON.
    #[arg(long)]
    pub json: bool,
    /// draft02: keys (0x12, any depth) or key paths (0x10/0x12) that are nodes.
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// draft02: never guess nodes; show every value not named by --nodes as a primitive.
    #[arg(long)]
    pub no_guess: bool,
    /// Show long values in full instead of their first 32 bytes.
    #[arg(long)]
    pub full: bool,
}

/// One packet of the tree, borrowed from the input.
#[derive(Debug)]
pub struct Entry<'a> {
    /// Offset of the packet's first header byte in the input.
    pub offset: usize,
    /// The tag.
    pub tag: Tag,
    /// The value bytes.
    pub value: &'a [u8],
    /// Primitive or node.
    pub body: Body<'a>,
}

/// What an entry holds.
#[derive(Debug)]
pub enum Body<'a> {
    /// A primitive value (or a draft02 value not taken for a node).
    Primitive,
    /// A node: its children, and the error that stopped the walk, if any.
    Node {
        /// The children parsed before any error.
        children: Vec<Entry<'a>>,
        /// draft02 only: taken for a node because its bytes parse as packets.
        guessed: bool,
        /// The error that ended the children, with its input offset.
        error: Option<(DecodeError, usize)>,
    },
}

/// The packets of a whole input and the error that ended it, if any.
#[derive(Debug)]
pub struct Tree<'a> {
    /// The top-level packets.
    pub packets: Vec<Entry<'a>>,
    /// The error after the last top-level packet, with its offset.
    pub error: Option<(DecodeError, usize)>,
}

impl Tree<'_> {
    /// The first error anywhere in the tree, in input order.
    pub fn first_error(&self) -> Option<(DecodeError, usize)> {
        fn walk(entries: &[Entry<'_>]) -> Option<(DecodeError, usize)> {
            entries.iter().find_map(|e| match &e.body {
                Body::Node {
                    children, error, ..
                } => walk(children).or(*error),
                Body::Primitive => None,
            })
        }
        walk(&self.packets).or(self.error)
    }
}

/// How draft02 values are taken for nodes (other dialects read the node flag).
#[derive(Debug, Clone, Default)]
pub struct NodeRule {
    /// Keys that are nodes at any depth.
    pub keys: Vec<u32>,
    /// Full key paths that are nodes.
    pub paths: Vec<Vec<u32>>,
    /// Whether to try other values as nodes.
    pub guess: bool,
}

impl NodeRule {
    fn names(&self, path: &[u32]) -> bool {
        path.last().is_some_and(|k| self.keys.contains(k)) || self.paths.iter().any(|p| p == path)
    }
}

/// Walks `buf` as a stream of top-level packets.
pub fn parse<'a>(buf: &'a [u8], config: &Config, rule: &NodeRule) -> Tree<'a> {
    let walker = Walker { config, rule };
    let mut packets = Vec::new();
    let mut rest = buf;
    let mut path = Vec::new();
    while !rest.is_empty() {
        let offset = buf.len() - rest.len();
        match Packet::parse_with(rest, config) {
            Ok((packet, after)) => {
                packets.push(walker.entry(packet, offset, &mut path));
                rest = after;
            }
            Err(e) => {
                return Tree {
                    packets,
                    error: Some((e, offset)),
                }
            }
        }
    }
    Tree {
        packets,
        error: None,
    }
}

struct Walker<'c> {
    config: &'c Config,
    rule: &'c NodeRule,
}

impl Walker<'_> {
    fn entry<'a>(&self, packet: Packet<'a>, offset: usize, path: &mut Vec<u32>) -> Entry<'a> {
        path.push(packet.id());
        let value_offset = offset + packet.encoded_len() - packet.value().len();
        let body = if self.config.dialect.has_node_flag() {
            if packet.is_node() {
                let (children, error) = self.children(&packet, value_offset, path);
                Body::Node {
                    children,
                    guessed: false,
                    error,
                }
            } else {
                Body::Primitive
            }
        } else if self.rule.names(path) {
            let (children, error) = self.children(&packet, value_offset, path);
            Body::Node {
                children,
                guessed: false,
                error,
            }
        } else if self.rule.guess && !packet.value().is_empty() {
            match self.children(&packet, value_offset, path) {
                (children, None) => Body::Node {
                    children,
                    guessed: true,
                    error: None,
                },
                (_, Some(_)) => Body::Primitive,
            }
        } else {
            Body::Primitive
        };
        path.pop();
        Entry {
            offset,
            tag: packet.tag(),
            value: packet.value(),
            body,
        }
    }

    fn children<'a>(
        &self,
        packet: &Packet<'a>,
        value_offset: usize,
        path: &mut Vec<u32>,
    ) -> (Vec<Entry<'a>>, Option<(DecodeError, usize)>) {
        let iter = match packet.children() {
            Ok(iter) => iter,
            Err(e) => return (Vec::new(), Some((e, value_offset))),
        };
        let mut out = Vec::new();
        let mut at = value_offset;
        for child in iter {
            match child {
                Ok(child) => {
                    let len = child.encoded_len();
                    out.push(self.entry(child, at, path));
                    at += len;
                }
                Err(e) => return (out, Some((e, at))),
            }
        }
        (out, None)
    }
}

/// Runs `y3 inspect`, writing the tree to `out`.
///
/// # Errors
/// Input errors, `--nodes` syntax errors, and the first decode error in the input (after
/// the readable tree has been printed, in text mode).
pub fn run(args: &InspectArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let dialect: Dialect = args.dialect.into();
    let rule = node_rule(args, dialect)?;
    let buf = args.input.read_all()?;
    let config = Config::new(dialect);
    let tree = parse(&buf, &config, &rule);
    let first_error = tree.first_error();
    if args.json {
        if first_error.is_none() {
            out.write_all(json(&tree).as_bytes())?;
        }
    } else {
        let style = Style {
            dialect,
            max_bytes: if args.full { usize::MAX } else { 32 },
        };
        out.write_all(text(&tree, &style).as_bytes())?;
    }
    out.flush()?;
    match first_error {
        Some((e, offset)) => Err(CliError::decode_at(e, offset).into()),
        None => Ok(()),
    }
}

fn node_rule(args: &InspectArgs, dialect: Dialect) -> Result<NodeRule, CliError> {
    if dialect.has_node_flag() && (!args.nodes.is_empty() || args.no_guess) {
        return Err(CliError::bad_input(
            "usage",
            format!(
                "--nodes and --no-guess apply to draft02 only; {} marks nodes on the wire",
                dialect.name()
            ),
        ));
    }
    let mut rule = NodeRule {
        guess: args.nodes.is_empty() && !args.no_guess,
        ..NodeRule::default()
    };
    for text in &args.nodes {
        let keys = y3::parse_path(text).map_err(|e| {
            CliError::bad_input(e.kind(), format!("{e} (in --nodes entry {text:?})"))
        })?;
        match keys[..] {
            [key] => rule.keys.push(key),
            _ => rule.paths.push(keys),
        }
    }
    Ok(rule)
}

/// How primitives are shown.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Dialect of integer readings.
    pub dialect: Dialect,
    /// Value bytes shown before eliding the rest.
    pub max_bytes: usize,
}

/// The tree as indented text.
pub fn text(tree: &Tree<'_>, style: &Style) -> String {
    let mut out = String::new();
    for entry in &tree.packets {
        write_entry(&mut out, entry, 0, style);
    }
    if let Some(error) = tree.error {
        write_error(&mut out, error, 0);
    }
    out
}

fn tag_text(tag: Tag) -> String {
    format!("0x{:02x}", tag.id())
}

fn bytes_text(n: usize) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{n} bytes")
    }
}

fn write_error(out: &mut String, (e, offset): (DecodeError, usize), depth: usize) {
    let pad = "  ".repeat(depth);
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{pad}!! {}: {e} (at byte {offset})", e.kind());
}

fn write_entry(out: &mut String, entry: &Entry<'_>, depth: usize, style: &Style) {
    let pad = "  ".repeat(depth);
    let tag = tag_text(entry.tag);
    let len = bytes_text(entry.value.len());
    // Writing to a String cannot fail (the `let _` below).
    match &entry.body {
        Body::Primitive => {
            let shown = &entry.value[..entry.value.len().min(style.max_bytes)];
            let mut hex = shown
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            if shown.len() < entry.value.len() {
                hex.push_str(" ...");
            }
            if entry.value.is_empty() {
                hex.push_str("(empty)");
            }
            let readings = readings(entry.value, style);
            let sep = if readings.is_empty() { "" } else { "  " };
            let _ = writeln!(out, "{pad}{tag}: {hex}  ({len}){sep}{readings}");
        }
        Body::Node {
            children,
            guessed,
            error,
        } => {
            let (kind, open, close) = match (entry.tag.is_array(), guessed) {
                (true, _) => ("array", "[", "]"),
                (false, false) => ("node", "{", "}"),
                (false, true) => ("node?", "{", "}"),
            };
            let guessed = if *guessed { ", guessed" } else { "" };
            if children.is_empty() && error.is_none() {
                let _ = writeln!(out, "{pad}{tag} ({kind}, {len}{guessed}) {open}{close}");
                return;
            }
            let _ = writeln!(out, "{pad}{tag} ({kind}, {len}{guessed}) {open}");
            for child in children {
                write_entry(out, child, depth + 1, style);
            }
            if let Some(error) = error {
                write_error(out, *error, depth + 1);
            }
            let _ = writeln!(out, "{pad}{close}");
        }
    }
}

/// Plausible readings of primitive bytes: `int=.. float32=.. float64=.. string=".."`.
pub fn readings(value: &[u8], style: &Style) -> String {
    let mut parts = Vec::new();
    if let Ok(v) = y3::scalar::read_i64(style.dialect, value) {
        parts.push(format!("int={v}"));
    }
    if !value.is_empty() && value.len() <= 4 {
        if let Ok(v) = y3::scalar::read_f32(value) {
            if plausible(v.into()) {
                parts.push(format!(
                    "float32={}",
                    float_text(v.into(), format!("{v:?}"))
                ));
            }
        }
    }
    if !value.is_empty() && value.len() <= 8 {
        if let Ok(v) = y3::scalar::read_f64(value) {
            if plausible(v) {
                parts.push(format!("float64={}", float_text(v, format!("{v:?}"))));
            }
        }
    }
    if let Ok(s) = std::str::from_utf8(value) {
        let printable = s
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\t' | '\n' | '\r'));
        // One or two bytes are more often a number than text; only show them as a string
        // when they look like a word ("a", "Y3"), not like "B " (the float32 40.0).
        let word = s.len() > 2 || s.bytes().all(|b| b.is_ascii_graphic());
        if !s.is_empty() && printable && word {
            let max_chars = style.max_bytes.saturating_mul(2);
            let mut shown: String = s.chars().take(max_chars).collect();
            let elided = shown.len() < s.len();
            shown = serde_json::Value::from(shown).to_string();
            if elided {
                shown.push_str("...");
            }
            parts.push(format!("string={shown}"));
        }
    }
    parts.join(" ")
}

fn plausible(v: f64) -> bool {
    !v.is_finite() || v == 0.0 || (1e-6..1e12).contains(&v.abs())
}

fn float_text(v: f64, finite: String) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        finite
    }
}

/// The tree as JSON: an array of top-level packets, one line per primitive.
pub fn json(tree: &Tree<'_>) -> String {
    let mut out = String::from("[");
    write_json_list(&mut out, &tree.packets, 1);
    out.push_str("]\n");
    out
}

fn write_json_list(out: &mut String, entries: &[Entry<'_>], depth: usize) {
    for (i, entry) in entries.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        write_json_entry(out, entry, depth);
    }
    if !entries.is_empty() {
        out.push('\n');
        out.push_str(&"  ".repeat(depth - 1));
    }
}

fn write_json_entry(out: &mut String, entry: &Entry<'_>, depth: usize) {
    let pad = "  ".repeat(depth);
    let node = !matches!(entry.body, Body::Primitive);
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "{pad}{{\"tag\": {}, \"node\": {node}, \"array\": {}, \"offset\": {}, \"len\": {}",
        entry.tag.id(),
        entry.tag.is_array(),
        entry.offset,
        entry.value.len(),
    );
    match &entry.body {
        Body::Primitive => {
            let _ = write!(out, ", \"hex\": \"{}\"}}", hex::encode(entry.value));
        }
        Body::Node {
            children, guessed, ..
        } => {
            if *guessed {
                out.push_str(", \"guessed\": true");
            }
            out.push_str(", \"children\": [");
            write_json_list(out, children, depth + 1);
            out.push_str("]}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(hex: &str, dialect: Dialect, rule: &NodeRule) -> String {
        let buf = crate::input::decode_hex(hex).unwrap();
        let tree = parse(&buf, &Config::new(dialect), rule);
        text(
            &tree,
            &Style {
                dialect,
                max_bytes: 32,
            },
        )
    }

    #[test]
    fn noise_data() {
        let got = show(
            "9017110242201206aec8bbba800013093132372e302e302e31",
            Dialect::Golang,
            &NodeRule::default(),
        );
        let want = "0x10 (node, 23 bytes) {
  0x11: 42 20  (2 bytes)  float32=40.0 float64=34359738368.0
  0x12: ae c8 bb ba 80 00  (6 bytes)  int=1600000000000
  0x13: 31 32 37 2e 30 2e 30 2e 31  (9 bytes)  string=\"127.0.0.1\"
}
";
        assert_eq!(got, want);
    }

    #[test]
    fn errors_are_marked_in_place() {
        let got = show("9004110101 12", Dialect::Golang, &NodeRule::default());
        assert!(got.contains("  0x11: 01  (1 byte)  int=1"), "{got}");
        assert!(got.contains("  !! truncated_header:"), "{got}");
        let got = show("117f", Dialect::Golang, &NodeRule::default());
        assert_eq!(got, "!! negative_length: negative length -1 (at byte 0)\n");
    }

    #[test]
    fn draft02_guesses_and_names_nodes() {
        // prim 0x01 = 5, then 0x02 { 0x03 "CELLA", 0x04 "Y3" } with no node flag.
        let stream = "010105020b030543454c4c4104025933";
        let guess = NodeRule {
            guess: true,
            ..NodeRule::default()
        };
        let got = show(stream, Dialect::Draft02, &guess);
        assert!(got.contains("0x02 (node?, 11 bytes, guessed) {"), "{got}");
        let named = NodeRule {
            keys: vec![2],
            ..NodeRule::default()
        };
        let got = show(stream, Dialect::Draft02, &named);
        assert!(got.contains("0x02 (node, 11 bytes) {"), "{got}");
        let got = show(stream, Dialect::Draft02, &NodeRule::default());
        assert!(got.contains("0x02: 03 05 43"), "{got}");
    }

    #[test]
    fn json_shape() {
        let buf = hex::decode("d009000101000102000103").unwrap();
        let tree = parse(&buf, &Config::DEFAULT, &NodeRule::default());
        let parsed: serde_json::Value = serde_json::from_str(&json(&tree)).unwrap();
        assert_eq!(parsed[0]["array"], true);
        assert_eq!(parsed[0]["children"][2]["hex"], "03");
        assert_eq!(parsed[0]["children"][2]["offset"], 8);
        let empty = parse(&[], &Config::DEFAULT, &NodeRule::default());
        assert_eq!(json(&empty), "[]\n");
    }
}
