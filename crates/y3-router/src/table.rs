//! The routing table: data tag → the sessions observing it. Pure and generic over what a
//! route delivers to (an outbox in the server, a test double in unit tests).
//!
//! Lookups are the hot path and changes are rare (a client connects or leaves), so each
//! tag's routes are an immutable `Arc<[Route]>` replaced on change: a lookup clones one
//! `Arc` under the read lock and iterates without holding it.

use std::collections::HashMap;
use std::sync::Arc;

/// A connection's id, unique for the router's lifetime.
pub type SessionId = u64;

/// One subscriber of a tag.
#[derive(Debug, Clone)]
pub struct Route<S> {
    /// The observing session.
    pub session: SessionId,
    /// Where its frames go.
    pub target: S,
}

/// Tag → routes.
#[derive(Debug)]
pub struct RoutingTable<S> {
    routes: HashMap<u32, Arc<[Route<S>]>>,
    observed: HashMap<SessionId, Vec<u32>>,
}

impl<S> Default for RoutingTable<S> {
    fn default() -> Self {
        RoutingTable {
            routes: HashMap::new(),
            observed: HashMap::new(),
        }
    }
}

impl<S: Clone> RoutingTable<S> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `session` as a subscriber of each tag in `tags` (duplicates ignored). A session
    /// that is already subscribed is replaced.
    pub fn subscribe(&mut self, session: SessionId, tags: &[u32], target: S) {
        self.unsubscribe(session);
        let mut unique = tags.to_vec();
        unique.sort_unstable();
        unique.dedup();
        for &tag in &unique {
            let mut list: Vec<Route<S>> = self
                .routes
                .get(&tag)
                .map(|r| r.to_vec())
                .unwrap_or_default();
            list.push(Route {
                session,
                target: target.clone(),
            });
            self.routes.insert(tag, list.into());
        }
        self.observed.insert(session, unique);
    }

    /// Removes `session` from every tag. Returns whether it was subscribed.
    pub fn unsubscribe(&mut self, session: SessionId) -> bool {
        let Some(tags) = self.observed.remove(&session) else {
            return false;
        };
        for tag in tags {
            let Some(old) = self.routes.get(&tag) else {
                continue;
            };
            let list: Vec<Route<S>> = old
                .iter()
                .filter(|r| r.session != session)
                .cloned()
                .collect();
            if list.is_empty() {
                self.routes.remove(&tag);
            } else {
                self.routes.insert(tag, list.into());
            }
        }
        true
    }

    /// The routes of `tag` (including the issuer's, if it observes the tag; skip it with
    /// [`RoutingTable::targets`] or by comparing [`Route::session`]).
    pub fn routes(&self, tag: u32) -> Option<Arc<[Route<S>]>> {
        self.routes.get(&tag).cloned()
    }

    /// The targets a frame on `tag` from `issuer` goes to: every observer except the
    /// issuer itself, so that a function never receives its own output.
    pub fn targets(&self, tag: u32, issuer: SessionId) -> impl Iterator<Item = &S> {
        self.routes
            .get(&tag)
            .into_iter()
            .flat_map(|r| r.iter())
            .filter(move |r| r.session != issuer)
            .map(|r| &r.target)
    }

    /// Tags with at least one subscriber.
    pub fn tags(&self) -> impl Iterator<Item = u32> + '_ {
        self.routes.keys().copied()
    }

    /// Subscribed sessions.
    pub fn sessions(&self) -> usize {
        self.observed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(t: &RoutingTable<&'static str>, tag: u32, issuer: SessionId) -> Vec<&'static str> {
        let mut v: Vec<_> = t.targets(tag, issuer).copied().collect();
        v.sort();
        v
    }

    #[test]
    fn subscribe_route_unsubscribe() {
        let mut t = RoutingTable::new();
        t.subscribe(1, &[0x10, 0x11, 0x10], "f");
        t.subscribe(2, &[0x11], "sink");
        assert_eq!(targets(&t, 0x10, 99), ["f"]);
        assert_eq!(targets(&t, 0x11, 99), ["f", "sink"]);
        assert_eq!(targets(&t, 0x12, 99), [] as [&str; 0]);
        assert!(t.unsubscribe(1));
        assert!(!t.unsubscribe(1));
        assert_eq!(targets(&t, 0x10, 99), [] as [&str; 0]);
        assert_eq!(targets(&t, 0x11, 99), ["sink"]);
        assert_eq!(t.tags().collect::<Vec<_>>(), [0x11]);
        assert_eq!(t.sessions(), 1);
    }

    #[test]
    fn never_back_to_the_issuer() {
        let mut t = RoutingTable::new();
        // A function observing the tag it emits.
        t.subscribe(7, &[0x10], "f");
        t.subscribe(8, &[0x10], "sink");
        assert_eq!(targets(&t, 0x10, 7), ["sink"]);
        assert_eq!(targets(&t, 0x10, 8), ["f"]);
    }

    #[test]
    fn resubscribe_replaces() {
        let mut t = RoutingTable::new();
        t.subscribe(1, &[0x10], "a");
        t.subscribe(1, &[0x11], "b");
        assert_eq!(targets(&t, 0x10, 0), [] as [&str; 0]);
        assert_eq!(targets(&t, 0x11, 0), ["b"]);
    }
}
