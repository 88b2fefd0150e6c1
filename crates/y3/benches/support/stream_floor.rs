//! The floor of streaming key extraction: the trusting walk (the root header, then `tag len
//! value` children with one-byte lengths, checking nothing but slice bounds) fed a packet in
//! chunks. It keeps, between chunks, the next header's stream offset, a tag byte that ended a
//! chunk, and the bytes so far of a value that straddles chunks.
//!
//! One copy for both measurements of it: the codec's instruction counts
//! (`crates/y3/benches/icount.rs`, `stream7floor`) and the lab's `y3-stream7-floor` row
//! (`crates/y3-lab/src/codec/y3rows.rs`), each including this file as a module.

/// The walk's state across chunks.
pub struct StreamFloor {
    key: u32,
    /// Stream offset of the next header (`usize::MAX`: the root header is next), or of the
    /// value's end while taking.
    next: usize,
    /// Stream offset of the next chunk.
    base: usize,
    /// A tag byte that ended the previous chunk.
    tag: Option<u8>,
    /// Taking a value that straddles chunks: `buf[..have]` arrived.
    taking: bool,
    buf: [u8; 64],
    have: usize,
}

impl StreamFloor {
    /// A walk for `key`, before the root header.
    pub fn new(key: u32) -> StreamFloor {
        StreamFloor {
            key,
            next: usize::MAX,
            base: 0,
            tag: None,
            taking: false,
            buf: [0; 64],
            have: 0,
        }
    }

    /// Back to before the root header, for the next packet.
    pub fn reset(&mut self) {
        *self = StreamFloor::new(self.key);
    }

    /// Takes the next chunk: the key's value, once its last byte is in `chunk`.
    #[inline(always)]
    pub fn feed<'a>(&'a mut self, chunk: &'a [u8]) -> Option<&'a [u8]> {
        let base = self.base;
        self.base += chunk.len();
        let mut i = if self.next == usize::MAX {
            // The root header lies in the first chunk.
            if chunk.get(1)? & 0x80 != 0 {
                3
            } else {
                2
            }
        } else if self.taking {
            let left = self.next - base;
            if left > chunk.len() {
                self.buf
                    .get_mut(self.have..self.have + chunk.len())?
                    .copy_from_slice(chunk);
                self.have += chunk.len();
                return None;
            }
            if self.have == 0 {
                return Some(&chunk[..left]);
            }
            self.buf
                .get_mut(self.have..self.have + left)?
                .copy_from_slice(&chunk[..left]);
            self.have += left;
            return Some(&self.buf[..self.have]);
        } else if let Some(tag) = self.tag.take() {
            let len = *chunk.first()? as usize;
            if (tag & 0x3f) as u32 == self.key {
                return self.take(chunk, base, 1, len);
            }
            1 + len
        } else {
            self.next - base
        };
        while let Some(&[tag, len]) = chunk.get(i..i + 2) {
            if (tag & 0x3f) as u32 == self.key {
                return self.take(chunk, base, i + 2, len as usize);
            }
            i += 2 + len as usize;
        }
        if i + 1 == chunk.len() {
            self.tag = Some(chunk[i]);
            i += 1;
        }
        self.next = base + i;
        None
    }

    /// The value at `chunk[start..start + len]`, or its first bytes kept.
    #[inline(always)]
    fn take<'a>(
        &'a mut self,
        chunk: &'a [u8],
        base: usize,
        start: usize,
        len: usize,
    ) -> Option<&'a [u8]> {
        if let Some(v) = chunk.get(start..start + len) {
            return Some(v);
        }
        let have = chunk.len() - start;
        self.buf.get_mut(..have)?.copy_from_slice(&chunk[start..]);
        self.have = have;
        self.taking = true;
        self.next = base + start + len;
        None
    }
}
