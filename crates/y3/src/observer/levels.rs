//! The levels of the walk: what a header's key decides (skip, enter, take), the stop set of
//! a level, entering a node within the depth limit and closing the nodes a value ends.

use super::{Level, Observer};
use crate::tag::{Header, StopSet};
use crate::{Config, DecodeError, Tag};

impl Observer {
    /// A level ending at `end` whose headers sit at path index `depth`.
    #[inline(always)]
    pub(super) fn level(&self, end: u64, active: u64, depth: usize) -> Level {
        // Ids of 64 and above never occur in the one-byte dialects the skip run serves.
        let bit = |id: u32| if id < 64 { 1u64 << id } else { 0 };
        let mut interest = 0u64;
        if let (Some(path), 1) = (&self.paths.first, active) {
            // Only the first path (every `get`, most observers): no walk over the set.
            interest = bit(path.ids[depth]);
        } else {
            let mut bits = active;
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                interest |= bit(self.paths.get(i).ids[depth]);
            }
        }
        let nodes = if self.validate { u64::MAX } else { interest };
        Level {
            end,
            active,
            stop: StopSet::new(interest, nodes),
        }
    }

    #[inline(always)]
    pub(super) fn decide(&self, h: &Header) -> Action {
        let depth = self.parents.len();
        let id = h.tag.id();
        let mut take = 0u64;
        let mut enter = 0u64;
        let mut active = self.cur.active;
        if let (Some(path), 1) = (&self.paths.first, active) {
            // Only the first path active (every `get`, most observers): no walk over the set.
            active = 0;
            if path.ids[depth] == id {
                if path.len == depth + 1 {
                    return Action::Take(0);
                }
                enter = 1;
            }
        }
        while active != 0 {
            let i = active.trailing_zeros() as usize;
            active &= active - 1;
            let path = self.paths.get(i);
            // `active` only holds paths longer than `depth`.
            if path.ids[depth] == id {
                if path.len == depth + 1 {
                    take |= 1 << i;
                } else {
                    enter |= 1 << i;
                }
            }
        }
        if take != 0 {
            // Paths never overlap, so at most one path ends here.
            return Action::Take(take.trailing_zeros() as usize);
        }
        let can_enter = !self.config.dialect.has_node_flag() || h.tag.is_node();
        if can_enter && (enter != 0 || (self.validate && h.tag.is_node())) {
            return Action::Enter(enter);
        }
        Action::Skip
    }

    /// Validates the value of one top-level packet whose header was read already (tag
    /// `tag`): a node's children are walked once, from the state a validator reaches on
    /// reading that header (the node entered, its depth checked), so that
    /// [`decode_with`](crate::decode_with) reads each header once. A primitive, and every
    /// `draft02` value (its wire marks no nodes), has nothing below its header to check.
    ///
    /// # Errors
    /// As [`Observer::feed`]; [`DecodeError::TooDeep`] for a node under a depth limit of 1.
    pub(crate) fn validate_value(
        config: Config,
        tag: Tag,
        value: &[u8],
    ) -> Result<(), DecodeError> {
        if !tag.is_node() || !config.dialect.has_node_flag() {
            return Ok(());
        }
        let mut validator = Observer::validator(config);
        validator.started = 1;
        validator.enter(value.len() as u64, 0)?;
        if value.is_empty() {
            return Ok(());
        }
        validator.feed(value)?;
        validator.finish()
    }

    pub(super) fn enter(&mut self, end: u64, active: u64) -> Result<(), DecodeError> {
        // The entered packet sits at depth `parents.len() + 1`; its children one deeper.
        if self.parents.len() as u64 + 1 >= self.config.limits.max_depth as u64 {
            return Err(DecodeError::TooDeep {
                limit: self.config.limits.max_depth,
            });
        }
        let level = self.level(end, active, self.parents.len() + 1);
        self.parents.push(self.cur);
        self.cur = level;
        Ok(())
    }

    /// Closes every node that ends at stream offset `at`.
    #[inline(always)]
    pub(super) fn after_value(&mut self, at: u64) {
        while self.cur.end == at {
            match self.parents.pop() {
                Some(parent) => self.cur = parent,
                None => break,
            }
        }
    }
}

/// What a header's key decides.
pub(super) enum Action {
    Skip,
    Enter(u64),
    Take(usize),
}
