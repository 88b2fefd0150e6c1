//! Arguments shared by several subcommands.

use clap::ValueEnum;
use y3::Dialect;

/// The wire dialect, as the command line spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum DialectArg {
    /// y3-codec-golang v1.7.3: one tag byte with node/array flags, PVarInt integers.
    #[default]
    Golang,
    /// yomorun/y3 v1.0.5: one tag byte, minimal two's-complement integers.
    Nvarint,
    /// Draft-02 varint tags (ids up to 2^28-1), no node flag on the wire.
    Draft02,
}

impl From<DialectArg> for Dialect {
    fn from(arg: DialectArg) -> Dialect {
        match arg {
            DialectArg::Golang => Dialect::Golang,
            DialectArg::Nvarint => Dialect::NVarInt,
            DialectArg::Draft02 => Dialect::Draft02,
        }
    }
}

/// `0x10/0x11`: a key path in the canonical spelling used in messages.
pub fn path_text(keys: &[u32]) -> String {
    keys.iter()
        .map(|k| format!("0x{k:02x}"))
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for (arg, dialect) in [
            (DialectArg::Golang, Dialect::Golang),
            (DialectArg::Nvarint, Dialect::NVarInt),
            (DialectArg::Draft02, Dialect::Draft02),
        ] {
            // The CLI spelling is the codec's own name for the dialect.
            let name = arg.to_possible_value().map(|v| v.get_name().to_owned());
            assert_eq!(name.as_deref(), Some(dialect.name()));
            assert_eq!(Dialect::from(arg), dialect);
        }
        assert_eq!(path_text(&[0x10, 0x1, 0x100]), "0x10/0x01/0x100");
    }
}
