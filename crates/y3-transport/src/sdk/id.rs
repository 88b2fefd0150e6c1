//! Client and transaction ids in YoMo's shape: 21 characters of `A-Za-z0-9_-`.
//!
//! YoMo v1.22 mints both with `gonanoid.New()` (`pkg/id`): 21 random characters of this
//! alphabet, per message for a transaction id. Nothing reads a tid's characters (routers
//! and functions carry it, log it and compare it), so a source mints its tids with
//! [`Tids`]: a random prefix drawn once per source and a counter, in the same 21
//! characters, unique per source and across sources, at the cost of an increment.
//!
//! ```text
//!  tid = prefix (11 chars: 66 random bits, per source) | counter (10 chars: 60 bits, big-endian)
//!        "Vq3x_k9LmZa"                                    "AAAAAAAAAB"   (counter 1)
//! ```

/// The alphabet of ids (URL-safe, as YoMo's nanoids).
const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";

/// Characters in an id.
pub const ID_LEN: usize = 21;

/// Characters of a tid's counter (6 bits each: 60 bits, never exhausted).
const COUNTER_LEN: usize = 10;

/// Fills `out` with random characters of [`ALPHABET`].
fn fill_random(out: &mut [u8]) {
    for chunk in out.chunks_mut(10) {
        let mut bits = fastrand::u64(..);
        for b in chunk {
            *b = ALPHABET[(bits & 63) as usize];
            bits >>= 6;
        }
    }
}

/// A fresh random id: 21 characters, 126 random bits.
pub fn new_id() -> String {
    let mut id = [0u8; ID_LEN];
    fill_random(&mut id);
    id.iter().map(|&b| b as char).collect()
}

/// Transaction ids of one source: a random prefix and a counter (see the module doc).
#[derive(Debug, Clone)]
pub struct Tids {
    /// The last id minted (the prefix, then the counter's characters).
    id: [u8; ID_LEN],
    counter: u64,
}

impl Tids {
    /// A fresh random prefix, counter 0.
    pub fn new() -> Tids {
        let mut id = [ALPHABET[0]; ID_LEN];
        fill_random(&mut id[..ID_LEN - COUNTER_LEN]);
        Tids { id, counter: 0 }
    }

    /// The next transaction id: no two calls on any `Tids` return the same one (short of
    /// two prefixes drawn alike, odds 2⁻⁶⁶ a pair).
    // Not an `Iterator`: the id it returns borrows the `Tids` (no allocation per id).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> &str {
        // Every byte is from the ASCII alphabet.
        std::str::from_utf8(self.next_bytes()).unwrap_or_default()
    }

    /// [`next`](Tids::next) as bytes (ASCII), without the UTF-8 check.
    pub fn next_bytes(&mut self) -> &[u8; ID_LEN] {
        self.counter += 1;
        let mut c = self.counter;
        for b in self.id[ID_LEN - COUNTER_LEN..].iter_mut().rev() {
            *b = ALPHABET[(c & 63) as usize];
            c >>= 6;
        }
        &self.id
    }
}

impl Default for Tids {
    fn default() -> Tids {
        Tids::new()
    }
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

    #[test]
    fn tids_have_yomos_shape_and_never_repeat() {
        let mut seen = std::collections::HashSet::new();
        let (mut a, mut b) = (Tids::new(), Tids::new());
        for _ in 0..5000 {
            for tids in [&mut a, &mut b] {
                let tid = tids.next().to_owned();
                assert_eq!(tid.len(), ID_LEN);
                assert!(tid.bytes().all(|c| ALPHABET.contains(&c)), "{tid}");
                assert!(seen.insert(tid), "a tid repeated");
            }
        }
        // The counter carries across characters: 64 is "BA" in its last two.
        let mut t = Tids::new();
        for _ in 0..63 {
            t.next();
        }
        assert!(t.next().ends_with("AAAAAAAABA"), "{}", t.next());
    }
}
