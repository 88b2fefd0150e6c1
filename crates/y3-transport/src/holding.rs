//! [`copy_holding`]: bytes copied into one allocation that also holds a value, dropped with
//! the last [`Bytes`] pointing into it. A router copies each small frame out of its read
//! buffer (so that a queued frame does not keep the whole buffer alive) and charges it to
//! its memory budget until the last queue lets go of it; with the charge inside the copy's
//! own allocation that is one allocation per frame, where a plain copy, `Bytes`' shared
//! header (made on the copy's first slice) and the charge's `Arc` were three.
//!
//! ```text
//!   one allocation:  | Bytes' owner header | len | bytes: [u8; class] | keep |
//!                                                  ├ metadata ┤├ payload ┤   (slices)
//! ```
//!
//! Copies come in size classes, powers of two from [`MIN_CLASS`] to [`INLINE_MAX`] bytes, so
//! that a copy never holds more than twice its bytes (and at most `MIN_CLASS`); a longer one
//! takes a boxed slice of its own beside the holder (two allocations: an inline class is
//! zeroed and moved into place whole, which past 512 bytes costs more than the allocation
//! it saves). [`held_for`] says what a copy holds, for a budget that counts the bytes
//! actually held.
//!
//! The class is moved whole twice (`Bytes::from_owner` takes it by value, then boxes it):
//! two `memcpy` calls of ~65 instructions each for a 145-byte frame in the 256 class.
//! Half steps between the powers of two (a 192 class) were measured and not kept: the
//! moves cost 77 instructions less per routed frame, but in that run mimalloc's aligned
//! allocation of the 224-byte holder took its generic path, 100 more
//! (`scripts/icount-router`: 5,797 → 5,814).

use bytes::Bytes;

/// The smallest size class.
pub const MIN_CLASS: usize = 128;

/// Longest copy held inline, in the same allocation as its value.
pub const INLINE_MAX: usize = 512;

/// Bytes a copy of `len` bytes holds: its size class, or exactly `len` past [`INLINE_MAX`].
///
/// ```
/// use y3_transport::holding::held_for;
/// assert_eq!((held_for(0), held_for(129), held_for(512), held_for(5000)), (128, 256, 512, 5000));
/// ```
pub fn held_for(len: usize) -> usize {
    if len > INLINE_MAX {
        len
    } else {
        len.next_power_of_two().max(MIN_CLASS)
    }
}

/// A copy of `src` whose allocation also holds `keep`, dropped with the last `Bytes` of it
/// (slices included).
///
/// ```
/// use std::sync::{atomic::{AtomicUsize, Ordering}, Arc};
/// use y3_transport::holding::copy_holding;
///
/// struct Count(Arc<AtomicUsize>);
/// impl Drop for Count {
///     fn drop(&mut self) { self.0.fetch_add(1, Ordering::Relaxed); }
/// }
/// let dropped = Arc::new(AtomicUsize::new(0));
/// let copy = copy_holding(b"frame bytes", Count(dropped.clone()));
/// let slice = copy.slice(6..);
/// drop(copy);
/// assert_eq!((&slice[..], dropped.load(Ordering::Relaxed)), (&b"bytes"[..], 0));
/// drop(slice);
/// assert_eq!(dropped.load(Ordering::Relaxed), 1);
/// ```
pub fn copy_holding<K: Send + 'static>(src: &[u8], keep: K) -> Bytes {
    match held_for(src.len()) {
        128 => inline::<128, K>(src, keep),
        256 => inline::<256, K>(src, keep),
        512 => inline::<512, K>(src, keep),
        _ => Bytes::from_owner(Boxed {
            bytes: src.into(),
            _keep: keep,
        }),
    }
}

/// A copy of at most `N` bytes and the value it holds.
struct Inline<const N: usize, K> {
    len: usize,
    bytes: [u8; N],
    _keep: K,
}

impl<const N: usize, K> AsRef<[u8]> for Inline<N, K> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A copy longer than [`INLINE_MAX`] and the value it holds.
struct Boxed<K> {
    bytes: Box<[u8]>,
    _keep: K,
}

impl<K> AsRef<[u8]> for Boxed<K> {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

fn inline<const N: usize, K: Send + 'static>(src: &[u8], keep: K) -> Bytes {
    let mut owner = Inline {
        len: src.len(),
        bytes: [0u8; N],
        _keep: keep,
    };
    owner.bytes[..src.len()].copy_from_slice(src);
    Bytes::from_owner(owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_keeps_its_bytes() {
        for len in [0, 1, 127, 128, 129, 256, 511, 512, 513, 700, 9000] {
            let src: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let copy = copy_holding(&src, ());
            assert_eq!(&copy[..], &src[..], "{len}");
            assert!(held_for(len) >= len.max(MIN_CLASS));
            assert!(held_for(len) <= (2 * len).max(MIN_CLASS));
        }
    }
}
