//! Client and transaction ids in YoMo's shape: 21 characters of `A-Za-z0-9_-`.

/// The alphabet of ids (URL-safe, as YoMo's nanoids).
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// Characters in an id.
pub const ID_LEN: usize = 21;

/// A fresh random id: 21 characters, 126 random bits.
pub fn new_id() -> String {
    let mut id = String::with_capacity(ID_LEN);
    let mut bits = fastrand::u64(..);
    for i in 0..ID_LEN {
        if i == 10 {
            bits = fastrand::u64(..);
        }
        id.push(ALPHABET[(bits & 63) as usize] as char);
        bits >>= 6;
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_yomos_shape_and_differ() {
        let a = new_id();
        assert_eq!(a.len(), ID_LEN);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)));
        assert_ne!(a, new_id());
    }
}
