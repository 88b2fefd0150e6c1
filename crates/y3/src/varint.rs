//! The three integer encodings: PVarInt (signed, sign-padded 7-bit groups), NVarInt (minimal
//! two's complement bytes) and the unsigned 7-bit-group varint of draft-02 tags.
//!
//! ```text
//! PVarInt, big-endian 7-bit groups, continuation bit C on every byte but the last; the
//! first group is sign-padded, so bit S of the first byte is the sign:
//!
//!   C S x x x x x x   C x x x x x x x   ...   0 x x x x x x x
//!
//!     63 -> 3f          64 -> 80 40       -1 -> 7f        -65 -> ff 3f
//!    128 -> 81 00     8192 -> 80 c0 00   i32::MAX -> 87 ff ff ff 7f
//!
//! NVarInt, minimal big-endian two's complement, no continuation bits:
//!
//!     -1 -> ff         128 -> 00 80       8191 -> 1f ff
//! ```
//!
//! See `spec/wire-format.md` section "Integers".

use crate::DecodeError;

/// Significant bits of `v` in two's complement, sign bit included (1..=64).
#[inline]
const fn signed_bits(v: i64) -> u32 {
    // Without a branch: a negative `v` has as many leading ones as `!v` has leading zeros.
    65 - ((v ^ (v >> 63)) as u64).leading_zeros()
}

/// Bytes PVarInt uses for `v`.
#[inline]
// Not `div_ceil`: its remainder test is a few instructions more per call (27 of 724 per
// typed encode of the serde envelope, callgrind) and `signed_bits` is never zero.
#[allow(clippy::manual_div_ceil)]
pub const fn pvarint_len(v: i64) -> usize {
    ((signed_bits(v) + 6) / 7) as usize
}

/// Writes `v` as PVarInt at the start of `out`, returning the bytes used (at most 10,
/// [`pvarint_len`]).
///
/// # Panics
/// When `out` is shorter than that (every caller passes room for the longest).
#[inline]
pub fn pvarint_write(v: i64, out: &mut [u8]) -> usize {
    let n = pvarint_len(v);
    for (i, slot) in out[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i) as u32;
        let group = ((v >> shift) & 0x7f) as u8;
        *slot = if i + 1 < n { group | 0x80 } else { group };
    }
    n
}

/// Reads a value that consists of exactly one PVarInt and must fit in `bits` (32 or 64).
///
/// Non-minimal encodings (redundant sign groups) are accepted as long as the value fits.
///
/// # Errors
/// [`DecodeError::InvalidLength`] for an empty value, [`DecodeError::VarintUnterminated`] when
/// the last byte carries a continuation bit, [`DecodeError::TrailingBytes`] when bytes follow
/// the terminating group, [`DecodeError::VarintOverflow`] when the value does not fit.
#[inline]
pub fn pvarint_read(value: &[u8], bits: u32) -> Result<i64, DecodeError> {
    // The usual small values, one or two groups (-64..=63, -8192..=8191): straight-line,
    // and in range for every width.
    match *value {
        [a] if a & 0x80 == 0 => return Ok(((a as i64) << 57) >> 57),
        [a, b] if a & 0x80 != 0 && b & 0x80 == 0 => {
            return Ok(((((a & 0x7f) as i64) << 57) >> 50) | b as i64)
        }
        _ => {}
    }
    pvarint_read_groups(value, bits)
}

/// [`pvarint_read`] of any length, one group at a time.
fn pvarint_read_groups(value: &[u8], bits: u32) -> Result<i64, DecodeError> {
    let (&first, rest) = value.split_first().ok_or(DecodeError::InvalidLength {
        len: 0,
        min: 1,
        max: u32::MAX,
    })?;
    // Sign-extend the first 7-bit group.
    let mut v = (((first & 0x7f) as i64) << 57) >> 57;
    let mut more = first & 0x80 != 0;
    for (i, &b) in rest.iter().enumerate() {
        if !more {
            return Err(DecodeError::TrailingBytes {
                count: (rest.len() - i) as u64,
            });
        }
        if (v << 7) >> 7 != v {
            return Err(DecodeError::VarintOverflow {
                len: value.len() as u32,
                bits,
            });
        }
        v = (v << 7) | (b & 0x7f) as i64;
        more = b & 0x80 != 0;
    }
    if more {
        return Err(DecodeError::VarintUnterminated {
            len: value.len() as u32,
        });
    }
    if bits == 32 && i32::try_from(v).is_err() {
        return Err(DecodeError::VarintOverflow {
            len: value.len() as u32,
            bits,
        });
    }
    Ok(v)
}

/// Bytes NVarInt uses for `v`.
#[inline]
#[allow(clippy::manual_div_ceil)]
pub const fn nvarint_len(v: i64) -> usize {
    // As in `pvarint_len`.
    ((signed_bits(v) + 7) / 8) as usize
}

/// Writes `v` as NVarInt into `out`, returning the bytes used (at most 8).
#[inline]
pub fn nvarint_write(v: i64, out: &mut [u8; 10]) -> usize {
    let n = nvarint_len(v);
    out[..n].copy_from_slice(&v.to_be_bytes()[8 - n..]);
    n
}

/// Reads a value that consists of exactly one NVarInt and must fit in `bits` (32 or 64).
///
/// # Errors
/// [`DecodeError::InvalidLength`] for an empty value, [`DecodeError::VarintOverflow`] when the
/// value does not fit (redundant sign bytes are accepted).
#[inline]
pub fn nvarint_read(value: &[u8], bits: u32) -> Result<i64, DecodeError> {
    let (&first, rest) = value.split_first().ok_or(DecodeError::InvalidLength {
        len: 0,
        min: 1,
        max: u32::MAX,
    })?;
    let mut v = first as i8 as i64;
    for &b in rest {
        if (v << 8) >> 8 != v {
            return Err(DecodeError::VarintOverflow {
                len: value.len() as u32,
                bits,
            });
        }
        v = (v << 8) | b as i64;
    }
    if bits == 32 && i32::try_from(v).is_err() {
        return Err(DecodeError::VarintOverflow {
            len: value.len() as u32,
            bits,
        });
    }
    Ok(v)
}

/// Bytes the unsigned 7-bit-group varint uses for `v`.
#[inline]
pub const fn uvarint_len(v: u32) -> usize {
    let bits = 32 - v.leading_zeros();
    if bits == 0 {
        1
    } else {
        bits.div_ceil(7) as usize
    }
}

/// Writes `v` as an unsigned big-endian 7-bit-group varint (draft-02 tags) at the start of
/// `out`, returning the bytes used ([`uvarint_len`]).
///
/// # Panics
/// When `out` is shorter than that (every caller passes room for the longest).
#[inline]
pub fn uvarint_write(v: u32, out: &mut [u8]) -> usize {
    let n = uvarint_len(v);
    for (i, slot) in out[..n].iter_mut().enumerate() {
        let shift = 7 * (n - 1 - i) as u32;
        let group = ((v >> shift) & 0x7f) as u8;
        *slot = if i + 1 < n { group | 0x80 } else { group };
    }
    n
}

/// Reads an unsigned 7-bit-group varint of at most `max_bytes` bytes from the start of `buf`.
///
/// Returns `Ok(None)` when `buf` ends first.
///
/// # Errors
/// [`DecodeError::VarintOverflow`] past `max_bytes`.
#[inline]
pub fn uvarint_read(buf: &[u8], max_bytes: usize) -> Result<Option<(u32, usize)>, DecodeError> {
    let mut v: u32 = 0;
    for i in 0..max_bytes {
        let Some(&b) = buf.get(i) else {
            return Ok(None);
        };
        v = (v << 7) | (b & 0x7f) as u32;
        if b & 0x80 == 0 {
            return Ok(Some((v, i + 1)));
        }
    }
    Err(DecodeError::VarintOverflow {
        len: max_bytes as u32 + 1,
        bits: 7 * max_bytes as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn pv(v: i64) -> Vec<u8> {
        let mut out = [0; 10];
        let n = pvarint_write(v, &mut out);
        out[..n].to_vec()
    }

    #[test]
    fn pvarint_examples_from_the_issue() {
        assert_eq!(pv(63), hex!("3f"));
        assert_eq!(pv(64), hex!("8040"));
        assert_eq!(pv(127), hex!("807f"));
        assert_eq!(pv(128), hex!("8100"));
        assert_eq!(pv(8191), hex!("bf7f"));
        assert_eq!(pv(8192), hex!("80c000"));
        assert_eq!(pv(16384), hex!("818000"));
        assert_eq!(pv(-1), hex!("7f"));
        assert_eq!(pv(-65), hex!("ff3f"));
        assert_eq!(pv(i64::MAX), hex!("80ffffffffffffffff7f"));
        assert_eq!(pv(i64::MIN), hex!("ff808080808080808000"));
    }

    #[test]
    fn pvarint_roundtrip_edges() {
        for v in [
            0,
            1,
            -1,
            63,
            64,
            -64,
            -65,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(pvarint_read(&pv(v), 64), Ok(v));
        }
    }

    #[test]
    fn pvarint_rejects_what_does_not_fit() {
        assert_eq!(
            pvarint_read(&hex!("8005"), 32),
            Ok(5),
            "non-minimal but fits"
        );
        assert_eq!(
            pvarint_read(&hex!("818181818101"), 32).unwrap_err().kind(),
            "varint_overflow"
        );
        assert_eq!(
            pvarint_read(&hex!("80"), 32).unwrap_err().kind(),
            "varint_unterminated"
        );
        assert_eq!(
            pvarint_read(&hex!("0505"), 32).unwrap_err().kind(),
            "trailing_bytes"
        );
        assert_eq!(pvarint_read(&[], 32).unwrap_err().kind(), "invalid_length");
        assert_eq!(
            pvarint_read(&hex!("81808080808080808000"), 64)
                .unwrap_err()
                .kind(),
            "varint_overflow"
        );
    }

    #[test]
    fn pvarint_small_value_paths_agree_with_the_group_reader() {
        // Every one- and two-byte value, at both widths.
        let ones = (0..=255u8).map(|a| vec![a]);
        let twos = (0..=255u8).flat_map(|a| (0..=255u8).map(move |b| vec![a, b]));
        for v in ones.chain(twos) {
            for bits in [32, 64] {
                assert_eq!(
                    pvarint_read(&v, bits),
                    pvarint_read_groups(&v, bits),
                    "{v:02x?} at {bits} bits"
                );
            }
        }
    }

    #[test]
    fn nvarint() {
        let nv = |v: i64| {
            let mut out = [0; 10];
            let n = nvarint_write(v, &mut out);
            out[..n].to_vec()
        };
        assert_eq!(nv(-1), hex!("ff"));
        assert_eq!(nv(128), hex!("0080"));
        assert_eq!(nv(8191), hex!("1fff"));
        assert_eq!(nv(0), hex!("00"));
        assert_eq!(nv(i64::MIN), hex!("8000000000000000"));
        assert_eq!(
            nvarint_read(&hex!("ffff"), 32),
            Ok(-1),
            "redundant sign byte"
        );
        assert_eq!(
            nvarint_read(&hex!("00ffffffff"), 32).unwrap_err().kind(),
            "varint_overflow"
        );
        assert_eq!(nvarint_read(&hex!("00ffffffff"), 64), Ok(0xffff_ffff));
    }

    #[test]
    fn uvarint() {
        let mut out = [0; 10];
        let n = uvarint_write(300, &mut out);
        assert_eq!(&out[..n], hex!("822c"));
        assert_eq!(uvarint_read(&out[..n], 4), Ok(Some((300, 2))));
        assert_eq!(uvarint_read(&hex!("82"), 4), Ok(None));
        assert_eq!(
            uvarint_read(&hex!("8080808001"), 4).unwrap_err().kind(),
            "varint_overflow"
        );
    }
}
