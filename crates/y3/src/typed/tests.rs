//! Unit tests of the typed API.

use super::*;
use crate::{Config, DecodeError, Dialect, EncodeError};
use hex_literal::hex;

#[test]
fn scalars_top_level() {
    assert_eq!(marshal(0x10, &-1i64).unwrap(), hex!("810310017f"));
    assert_eq!(marshal(0x10, &u64::MAX).unwrap(), hex!("810310017f"));
    assert_eq!(marshal(0x10, &128u32).unwrap(), hex!("810410028100"));
    assert_eq!(
        marshal(0x10, &"Y3".to_string()).unwrap(),
        hex!("810410025933")
    );
    assert_eq!(marshal(0x10, &1.5f32).unwrap(), hex!("810410023fc0"));
    assert_eq!(
        marshal_with(0x10, &-1i32, Dialect::NVarInt).unwrap(),
        hex!("81031001ff")
    );
}

#[test]
fn omitted_at_top_level() {
    let bytes = marshal(0x10, &String::new()).unwrap();
    assert_eq!(bytes, hex!("8100"));
    assert_eq!(unmarshal::<String>(&bytes, 0x10), Ok(None));
    assert_eq!(marshal(0x10, &None::<i32>).unwrap(), hex!("8100"));
    let bytes = marshal(0x10, &Some(String::new())).unwrap();
    assert_eq!(bytes, hex!("81021000"));
    assert_eq!(
        unmarshal::<Option<String>>(&bytes, 0x10),
        Ok(Some(Some(String::new())))
    );
}

#[test]
fn keys() {
    for key in [0x00, 0x01, 0x0f] {
        assert_eq!(
            marshal(key, &1i32),
            Err(EncodeError::ReservedTag { tag: key })
        );
    }
    assert_eq!(
        marshal(0x40, &1i32),
        Err(EncodeError::InvalidTag {
            tag: 0x40,
            max: 0x3f
        })
    );
    // draft02 carries wide keys.
    let bytes = marshal_with(300, &1i32, Dialect::Draft02).unwrap();
    assert_eq!(bytes, hex!("0104822c0101"));
    let config = Config::new(Dialect::Draft02);
    assert_eq!(unmarshal_with::<i32>(&bytes, 300, &config), Ok(Some(1)));
}

#[test]
fn arrays() {
    let v = vec![vec![1i32], vec![]];
    let bytes = marshal(0x10, &v).unwrap();
    assert_eq!(bytes, hex!("8109d007c003000101c000"));
    assert_eq!(unmarshal::<Vec<Vec<i32>>>(&bytes, 0x10), Ok(Some(v)));
    let arr = [1u64, 2];
    let bytes = marshal(0x10, &arr).unwrap();
    assert_eq!(unmarshal::<[u64; 2]>(&bytes, 0x10), Ok(Some(arr)));
    assert_eq!(
        unmarshal::<[u64; 3]>(&bytes, 0x10),
        Err(DecodeError::WrongCount {
            expected: 3,
            found: 2
        })
    );
    assert_eq!(
        unmarshal::<[u64; 1]>(&bytes, 0x10),
        Err(DecodeError::WrongCount {
            expected: 1,
            found: 2
        })
    );
    assert_eq!(
        unmarshal::<Vec<u64>>(&hex!("810310017f"), 0x10),
        Err(DecodeError::WrongType {
            expected: "array",
            tag: 0x10
        })
    );
}

#[test]
fn into_caller_buffers() {
    let mut small = [0u8; 4];
    assert_eq!(
        marshal_into(0x10, &5i32, Dialect::Golang, &mut &mut small[..]),
        Err(EncodeError::BufferTooSmall {
            required: 5,
            remaining: 4
        })
    );
    assert_eq!(small, [0; 4]);
    let mut out = Vec::new();
    marshal_into(0x10, &5i32, Dialect::Golang, &mut out).unwrap();
    assert_eq!(out, hex!("8103100105"));
    assert_eq!(marshaled_len(0x10, &5i32, Dialect::Golang), 5);
}

#[test]
fn decode_errors() {
    assert_eq!(
        unmarshal::<i32>(&hex!("8103100105 00"), 0x10),
        Err(DecodeError::TrailingBytes { count: 1 })
    );
    assert_eq!(
        unmarshal::<i32>(&hex!("0103100105"), 0x10)
            .unwrap_err()
            .kind(),
        "wrong_type"
    );
    assert_eq!(
        unmarshal::<bool>(&hex!("8103100102"), 0x10),
        Err(DecodeError::InvalidBool { value: 2 })
    );
}
