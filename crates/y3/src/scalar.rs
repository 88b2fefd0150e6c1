//! Primitive value codecs: integers, floats, bools, strings and bytes, per dialect.
//!
//! ```text
//! int32/int64     golang, draft02: PVarInt        nvarint: minimal two's complement
//! uint32/uint64   the signed integer with the same bits (uint32 128 -> int32 128 -> 81 00,
//!                 uint32::MAX -> int32 -1 -> 7f, uint64::MAX -> int64 -1 -> 7f)
//! float32/64      VarFloat: big-endian IEEE-754 bits, trailing zero bytes dropped, at least
//!                 one byte kept (1.5f32 -> 3f c0, 0.0 -> 00, -0.0 -> 80)
//! bool            the integer 0 or 1
//! string          UTF-8 bytes;  bytes: raw
//! ```
//!
//! See `spec/wire-format.md` section "Values".

use crate::{varint, DecodeError, Dialect};

/// Longest encoding of a scalar (a 10-byte PVarInt64).
pub const MAX_SCALAR_LEN: usize = 10;

/// Bytes the integer `v` takes in `dialect`.
#[inline]
pub const fn int_len(dialect: Dialect, v: i64) -> usize {
    match dialect {
        Dialect::NVarInt => varint::nvarint_len(v),
        Dialect::Golang | Dialect::Draft02 => varint::pvarint_len(v),
    }
}

/// Writes the integer `v` in `dialect` into `out`, returning the bytes used.
#[inline]
pub fn int_write(dialect: Dialect, v: i64, out: &mut [u8; MAX_SCALAR_LEN]) -> usize {
    match dialect {
        Dialect::NVarInt => varint::nvarint_write(v, out),
        Dialect::Golang | Dialect::Draft02 => varint::pvarint_write(v, out),
    }
}

#[inline]
fn int_read(dialect: Dialect, value: &[u8], bits: u32) -> Result<i64, DecodeError> {
    match dialect {
        Dialect::NVarInt => varint::nvarint_read(value, bits),
        Dialect::Golang | Dialect::Draft02 => varint::pvarint_read(value, bits),
    }
}

/// Reads an `int32` value.
///
/// # Errors
/// See [`varint::pvarint_read`] and [`varint::nvarint_read`].
#[inline]
pub fn read_i32(dialect: Dialect, value: &[u8]) -> Result<i32, DecodeError> {
    // The range was checked for 32 bits.
    int_read(dialect, value, 32).map(|v| v as i32)
}

/// Reads an `int64` value.
///
/// # Errors
/// As [`read_i32`].
#[inline]
pub fn read_i64(dialect: Dialect, value: &[u8]) -> Result<i64, DecodeError> {
    int_read(dialect, value, 64)
}

/// Reads a `uint32` value: the int32 with the same bits, or a non-negative integer that fits
/// in 32 bits (some writers send 4294967295 as `00 ff ff ff ff`).
///
/// # Errors
/// As [`read_i32`].
#[inline]
pub fn read_u32(dialect: Dialect, value: &[u8]) -> Result<u32, DecodeError> {
    let v = int_read(dialect, value, 64)?;
    if let Ok(signed) = i32::try_from(v) {
        Ok(signed as u32)
    } else {
        u32::try_from(v).map_err(|_| DecodeError::VarintOverflow {
            len: value.len() as u32,
            bits: 32,
        })
    }
}

/// Reads a `uint64` value: the int64 with the same bits.
///
/// # Errors
/// As [`read_i32`].
#[inline]
pub fn read_u64(dialect: Dialect, value: &[u8]) -> Result<u64, DecodeError> {
    int_read(dialect, value, 64).map(|v| v as u64)
}

/// Reads a `bool`: the integer 0 or 1.
///
/// # Errors
/// [`DecodeError::InvalidBool`] for any other integer (the reference reads them as false).
#[inline]
pub fn read_bool(dialect: Dialect, value: &[u8]) -> Result<bool, DecodeError> {
    match int_read(dialect, value, 64)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(DecodeError::InvalidBool { value: other }),
    }
}

/// Bytes VarFloat uses for the IEEE-754 bits `bits` of a `width`-byte float.
#[inline]
const fn varfloat_len(bits: u64, width: usize) -> usize {
    // Trailing zero bytes are dropped, but one byte is always kept.
    let zero_bytes = (bits.trailing_zeros() / 8) as usize;
    let n = 8 - if zero_bytes > 7 { 7 } else { zero_bytes };
    // `bits` holds the float left-aligned in 64 bits, so widths below 8 only lose zeros.
    if n > width {
        width
    } else {
        n
    }
}

/// Bytes the float32 `v` takes.
#[inline]
pub const fn f32_len(v: f32) -> usize {
    varfloat_len((v.to_bits() as u64) << 32, 4)
}

/// Bytes the float64 `v` takes.
#[inline]
pub const fn f64_len(v: f64) -> usize {
    varfloat_len(v.to_bits(), 8)
}

/// Writes the float32 `v` as VarFloat, returning the bytes used.
#[inline]
pub fn f32_write(v: f32, out: &mut [u8; MAX_SCALAR_LEN]) -> usize {
    let n = f32_len(v);
    out[..n].copy_from_slice(&v.to_bits().to_be_bytes()[..n]);
    n
}

/// Writes the float64 `v` as VarFloat, returning the bytes used.
#[inline]
pub fn f64_write(v: f64, out: &mut [u8; MAX_SCALAR_LEN]) -> usize {
    let n = f64_len(v);
    out[..n].copy_from_slice(&v.to_bits().to_be_bytes()[..n]);
    n
}

/// Reads a float32 VarFloat (1 to 4 bytes).
///
/// # Errors
/// [`DecodeError::InvalidLength`] outside 1..=4 bytes.
#[inline]
pub fn read_f32(value: &[u8]) -> Result<f32, DecodeError> {
    if value.is_empty() || value.len() > 4 {
        return Err(DecodeError::InvalidLength {
            len: value.len() as u64,
            min: 1,
            max: 4,
        });
    }
    let mut be = [0u8; 4];
    be[..value.len()].copy_from_slice(value);
    Ok(f32::from_bits(u32::from_be_bytes(be)))
}

/// Reads a float64 VarFloat (1 to 8 bytes).
///
/// # Errors
/// [`DecodeError::InvalidLength`] outside 1..=8 bytes.
#[inline]
pub fn read_f64(value: &[u8]) -> Result<f64, DecodeError> {
    if value.is_empty() || value.len() > 8 {
        return Err(DecodeError::InvalidLength {
            len: value.len() as u64,
            min: 1,
            max: 8,
        });
    }
    let mut be = [0u8; 8];
    be[..value.len()].copy_from_slice(value);
    Ok(f64::from_bits(u64::from_be_bytes(be)))
}

/// Reads a UTF-8 string without copying.
///
/// # Errors
/// [`DecodeError::InvalidUtf8`] with the length of the valid prefix.
#[inline]
pub fn read_str(value: &[u8]) -> Result<&str, DecodeError> {
    core::str::from_utf8(value).map_err(|e| DecodeError::InvalidUtf8 {
        valid_up_to: e.valid_up_to() as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hex_literal::hex;

    fn f32_bytes(v: f32) -> Vec<u8> {
        let mut out = [0; MAX_SCALAR_LEN];
        let n = f32_write(v, &mut out);
        out[..n].to_vec()
    }

    #[test]
    fn varfloat() {
        assert_eq!(f32_bytes(1.5), hex!("3fc0"));
        assert_eq!(f32_bytes(0.0), hex!("00"));
        assert_eq!(f32_bytes(-0.0), hex!("80"));
        assert_eq!(f32_bytes(0.1), hex!("3dcccccd"));
        assert_eq!(f64_len(23.0), 2);
        assert_eq!(f64_len(0.0), 1);
        assert_eq!(f64_len(5e-324), 8);
        assert_eq!(read_f32(&hex!("3fc0")), Ok(1.5));
        assert_eq!(read_f64(&hex!("4037")), Ok(23.0));
        assert_eq!(
            read_f32(&hex!("3fc0000001")).unwrap_err().kind(),
            "invalid_length"
        );
        assert_eq!(read_f64(&[]).unwrap_err().kind(), "invalid_length");
    }

    #[test]
    fn unsigned_reinterpretation() {
        assert_eq!(read_u32(Dialect::Golang, &hex!("7f")), Ok(u32::MAX));
        assert_eq!(read_u64(Dialect::Golang, &hex!("7f")), Ok(u64::MAX));
        assert_eq!(read_u32(Dialect::Golang, &hex!("8100")), Ok(128));
        assert_eq!(
            read_u32(Dialect::NVarInt, &hex!("00ffffffff")),
            Ok(u32::MAX)
        );
        assert_eq!(
            read_u32(Dialect::NVarInt, &hex!("0100000000"))
                .unwrap_err()
                .kind(),
            "varint_overflow"
        );
    }

    #[test]
    fn bools_are_strict() {
        assert_eq!(read_bool(Dialect::Golang, &hex!("01")), Ok(true));
        assert_eq!(
            read_bool(Dialect::Golang, &hex!("02")),
            Err(DecodeError::InvalidBool { value: 2 })
        );
    }
}
