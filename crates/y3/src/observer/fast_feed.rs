//! The complete-buffer fast path committed to the observer: [`crate::fast::walk`]'s answer
//! turned into the state the general walk would have reached, and the nodes it entered
//! opened only if more input arrives.

use super::{CatchUp, Fed, Observed, Observer};
use crate::fast::{self, Fast};
use crate::Packet;

impl Observer {
    /// Opens the levels of the pending nodes (the fast path's or the stream loop's), as
    /// [`enter`](Observer::enter) would have, and closes those that ended with its value.
    #[cold]
    #[inline(never)]
    pub(super) fn open_pending(&mut self) {
        let (depth, base) = (self.pending, self.pending_base);
        self.pending = 0;
        // One path: each node is active for subscription 0 only.
        for d in 0..depth {
            let level = self.level(base + self.ends[d] as u64, 1, d + 1);
            self.parents.push(self.cur);
            self.cur = level;
        }
        self.after_value(self.pos);
    }

    /// [`crate::fast::walk`] (its straight-line first step only where `pair` is set) from a
    /// top-level boundary, committing its answer to the state the general walk would have
    /// reached; `None` (nothing changed) when it bails.
    #[inline(always)]
    pub(super) fn feed_fast<'a>(&mut self, input: &'a [u8]) -> Option<Fed<'a>> {
        let limits = &self.config.limits;
        let first = match self.pair {
            Some((outer, inner)) => fast::first_child(
                outer,
                inner,
                limits.max_packet_len,
                limits.max_depth as usize,
                input,
                &mut self.ends[0],
            ),
            None => None,
        };
        let walked = match first {
            Some(found) => found,
            None => {
                let path = self.paths.first.as_ref()?;
                fast::walk_loop(&path.ids[..path.len], &self.config, input, &mut self.ends)
            }
        };
        match walked {
            Fast::Bail => None,
            Fast::Done { packets } => {
                self.started += packets;
                self.pos += input.len() as u64;
                Some(Fed {
                    consumed: input.len(),
                    observed: None,
                })
            }
            Fast::Found {
                tag,
                start,
                len,
                head_len,
                depth,
                packets,
            } => {
                self.started += packets;
                let end = start + len;
                // The nodes the walk entered (`ends[..depth - 1]`) are opened only if more
                // input arrives (`open_pending`). They nest, and the walk stopped right
                // after the value: all of them closed with it exactly when the outermost
                // did (as `after_value` would find on opening them).
                if depth > 1 && self.ends[0] != end {
                    self.pending = depth - 1;
                    self.pending_base = self.pos;
                    self.catch_up = CatchUp::Open;
                }
                self.pos += end as u64;
                let packet = Packet::from_parts(
                    tag,
                    &input[start..end],
                    head_len,
                    depth as u32,
                    self.config,
                );
                Some(Fed {
                    consumed: end,
                    observed: Some(Observed {
                        sub: 0,
                        packet,
                        assembled: false,
                    }),
                })
            }
        }
    }
}
