//! The routing table: data tag → the stream functions observing it, with their wanted
//! targets. Pure and generic over what a route delivers to (an outbox in the server, a
//! test double in unit tests).
//!
//! YoMo's rule: every function observing the tag receives the frame — the sender too, if
//! it observes the tag. A frame with a `yomo-target` goes only to the functions whose
//! wanted target equals it. Changes are rare (a client connects or leaves) and a table is
//! cheap to clone (each tag's routes are an `Arc<[Route]>`), so the server publishes an
//! immutable snapshot per change (see `routing.rs`).

use std::collections::HashMap;
use std::sync::Arc;

use crate::filters::RouteFilter;

/// A connection's id, unique for the router's lifetime.
pub type SessionId = u64;

/// One subscriber of a tag.
#[derive(Debug, Clone)]
pub struct Route<S> {
    /// The `yomo-target` this subscriber accepts, if any.
    pub wanted_target: Option<Arc<str>>,
    /// The observing session.
    pub session: SessionId,
    /// Where its frames go.
    pub target: S,
    /// Its content filter on this tag, if any (`spec/filters.md`).
    pub filter: Option<Arc<RouteFilter>>,
}

/// Tag → routes.
///
/// The tag map is looked up for every routed frame: it hashes with foldhash (a few
/// multiplications; std's SipHash took 114 instructions of each routed 64 B frame),
/// seeded per process ([`foldhash::fast::RandomState`]), so a client cannot choose tags
/// that collide without knowing the seed (and the tags a table holds are those its
/// subscribers observe, not what a publisher sends).
#[derive(Debug, Clone)]
pub struct RoutingTable<S> {
    routes: HashMap<u32, Arc<[Route<S>]>, foldhash::fast::RandomState>,
    observed: HashMap<SessionId, Vec<u32>>,
}

impl<S> Default for RoutingTable<S> {
    fn default() -> Self {
        RoutingTable {
            routes: HashMap::default(),
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
    pub fn subscribe(&mut self, session: SessionId, tags: &[u32], wanted_target: &str, target: S) {
        self.subscribe_filtered(session, tags, wanted_target, target, &[]);
    }

    /// [`RoutingTable::subscribe`] with a content filter on some of the tags.
    pub fn subscribe_filtered(
        &mut self,
        session: SessionId,
        tags: &[u32],
        wanted_target: &str,
        target: S,
        filters: &[(u32, Arc<RouteFilter>)],
    ) {
        self.unsubscribe(session);
        let wanted_target: Option<Arc<str>> =
            (!wanted_target.is_empty()).then(|| wanted_target.into());
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
                wanted_target: wanted_target.clone(),
                session,
                target: target.clone(),
                filter: filters
                    .iter()
                    .find(|(t, _)| *t == tag)
                    .map(|(_, f)| f.clone()),
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

    /// The routes of `tag`, the sender's own included when it observes the tag.
    pub fn routes(&self, tag: u32) -> Option<Arc<[Route<S>]>> {
        self.routes.get(&tag).cloned()
    }

    /// As [`routes`](RoutingTable::routes), borrowed: no reference count taken and given
    /// back per frame (every publisher of a tag would touch its one shared count).
    pub fn routes_of(&self, tag: u32) -> &[Route<S>] {
        self.routes.get(&tag).map_or(&[], |r| &r[..])
    }

    /// The targets a frame on `tag` with `yomo-target` `target` goes to (see [`accepts`]).
    pub fn targets<'a>(
        &'a self,
        tag: u32,
        target: Option<&'a [u8]>,
    ) -> impl Iterator<Item = &'a S> {
        self.routes
            .get(&tag)
            .into_iter()
            .flat_map(|r| r.iter())
            .filter(move |r| accepts(r, target))
            .map(|r| &r.target)
    }

    /// The tags with at least one subscriber.
    pub fn tags(&self) -> impl Iterator<Item = u32> + '_ {
        self.routes.keys().copied()
    }

    /// Subscribed sessions.
    pub fn sessions(&self) -> usize {
        self.observed.len()
    }
}

/// Whether `route` receives a frame whose `yomo-target` is `target`: every subscriber for
/// an untargeted frame, only those wanting exactly that target otherwise.
pub fn accepts<S>(route: &Route<S>, target: Option<&[u8]>) -> bool {
    match target {
        None => true,
        Some(t) => route.wanted_target.as_deref().map(str::as_bytes) == Some(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn targets(
        t: &RoutingTable<&'static str>,
        tag: u32,
        target: Option<&str>,
    ) -> Vec<&'static str> {
        let mut v: Vec<_> = t.targets(tag, target.map(str::as_bytes)).copied().collect();
        v.sort();
        v
    }

    #[test]
    fn subscribe_route_unsubscribe() {
        let mut t = RoutingTable::new();
        t.subscribe(1, &[0x10, 0x11, 0x10], "", "f");
        t.subscribe(2, &[0x11], "", "sink");
        assert_eq!(targets(&t, 0x10, None), ["f"]);
        assert_eq!(targets(&t, 0x11, None), ["f", "sink"]);
        assert_eq!(targets(&t, 0x12, None), [] as [&str; 0]);
        assert!(t.unsubscribe(1));
        assert!(!t.unsubscribe(1));
        assert_eq!(targets(&t, 0x10, None), [] as [&str; 0]);
        assert_eq!(targets(&t, 0x11, None), ["sink"]);
        assert_eq!(t.tags().collect::<Vec<_>>(), [0x11]);
        assert_eq!(t.sessions(), 1);
    }

    #[test]
    fn wanted_targets() {
        let mut t = RoutingTable::new();
        t.subscribe(1, &[0x33], "a", "fa");
        t.subscribe(2, &[0x33], "b", "fb");
        t.subscribe(3, &[0x33], "", "plain");
        // Untargeted: everyone, whatever they want. Targeted: exactly the matching ones.
        assert_eq!(targets(&t, 0x33, None), ["fa", "fb", "plain"]);
        assert_eq!(targets(&t, 0x33, Some("a")), ["fa"]);
        assert_eq!(targets(&t, 0x33, Some("c")), [] as [&str; 0]);
        // Targets are bytes (YoMo's are Go strings): one that is not UTF-8 is compared
        // as it is, and matches nobody wanting a near one.
        assert!(t.targets(0x33, Some(b"a\xff")).next().is_none());
    }

    #[test]
    fn resubscribe_replaces() {
        let mut t = RoutingTable::new();
        t.subscribe(1, &[0x10], "", "a");
        t.subscribe(1, &[0x11], "", "b");
        assert_eq!(targets(&t, 0x10, None), [] as [&str; 0]);
        assert_eq!(targets(&t, 0x11, None), ["b"]);
    }
}
