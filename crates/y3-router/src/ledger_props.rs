//! Property test of the delivery ledger (issue 26): over random sequences of routing
//! events — subscribers coming and going, sources and functions writing (loops by
//! `yomo-tid` included), frames past the hop limit or with metadata over its limits,
//! writers taking batches, writes failing, subscribers aborted — no ledger term is ever
//! negative, `unaccounted` is never below zero, and it is zero once every queue drained.
//!
//! Frames go through the real [`Session`] (its hop-limit and metadata decisions) and the
//! real [`routing::route`] into real [`Outbox`]es; what a connection does with a
//! session's drop, and what a writer does with a batch, is done here as `connection.rs`
//! does it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::FutureExt;
use proptest::prelude::*;
use y3::FilterLimits;
use y3_transport::frame::{ClientType, Data, Frame, Handshake};
use y3_transport::metadata::{self, Metadata, MetadataLimits};

use crate::config::QueueConfig;
use crate::journeys::Journeys;
use crate::metrics::{Drop, Metrics};
use crate::outbox::{Outbox, Queued};
use crate::queue::Policy;
use crate::routing::{self, Origin, Routes};
use crate::session::{Admission, DropReason, Event, Session};

const CLIENTS: usize = 4;
const TAGS: u32 = 3;

#[derive(Debug, Clone)]
enum Step {
    /// Client `c` subscribes to `tag` (a fresh outbox).
    Subscribe { c: usize, tag: u32 },
    /// Client `c` leaves: unsubscribed, its outbox aborted.
    Leave { c: usize },
    /// Client `c` writes a frame: on `tag`, message `tid`, `hops` hops, as a function or
    /// a source, with metadata over its limits when `big`.
    Write {
        c: usize,
        tag: u32,
        tid: u8,
        hops: u32,
        function: bool,
        big: bool,
    },
    /// Client `c`'s writer takes up to `max` frames and writes them (or fails).
    Take { c: usize, max: usize, fail: bool },
}

fn step() -> impl Strategy<Value = Step> {
    let c = 0..CLIENTS;
    prop_oneof![
        (c.clone(), 0..TAGS).prop_map(|(c, tag)| Step::Subscribe { c, tag }),
        c.clone().prop_map(|c| Step::Leave { c }),
        (
            c.clone(),
            0..TAGS,
            0u8..4,
            0u32..4,
            any::<bool>(),
            prop::bool::weighted(0.1)
        )
            .prop_map(|(c, tag, tid, hops, function, big)| Step::Write {
                c,
                tag,
                tid,
                hops,
                function,
                big
            }),
        (c, 1usize..6, prop::bool::weighted(0.2)).prop_map(|(c, max, fail)| Step::Take {
            c,
            max,
            fail
        }),
    ]
}

struct Client {
    session: Session,
    outbox: Option<Arc<Outbox>>,
    tags: Vec<u32>,
}

fn admission() -> Arc<Admission> {
    Arc::new(Admission {
        token: String::new(),
        grants: Vec::new(),
        max_observed_tags: 8,
        max_name_len: 64,
        max_hops: 2,
        metadata_limits: MetadataLimits {
            max_bytes: 256,
            max_entries: 4,
        },
        filter_limits: FilterLimits::DEFAULT,
        attached: Vec::new(),
    })
}

fn check(metrics: &Metrics, at: &str) -> Result<(), TestCaseError> {
    let ledger = metrics.stats().ledger();
    prop_assert!(
        ledger.queued >= 0 && ledger.writing >= 0,
        "{at}: {ledger:?}"
    );
    prop_assert!(ledger.unaccounted() >= 0, "{at}: {ledger:?}");
    Ok(())
}

/// What `connection.rs`'s writer does with one batch.
fn write_batch(metrics: &Metrics, batch: &mut Vec<Queued>, fail: bool) {
    let n = batch
        .drain(..)
        .filter(|q| matches!(*q.frame, Frame::Data(_)))
        .count();
    metrics.writing(n as i64);
    metrics.writing(-(n as i64));
    if fail {
        metrics.dropped(Drop::Disconnected, n as u64);
    } else {
        metrics.frames_out(n as u64);
    }
}

async fn run(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let metrics = Arc::new(Metrics::new());
    // A small budget: some frames are dropped as memory_budget.
    metrics.budget.set_limit(64 << 10);
    let queue = QueueConfig {
        capacity: 4,
        policy: Policy::DropOldest,
        ..QueueConfig::default()
    };
    let routes = Routes::new(
        Vec::new(),
        Journeys::new(1, crate::journeys::WINDOW),
        crate::cycles::Cycles::new(1),
    );
    let now = Instant::now();
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|c| {
            let mut session = Session::new(c as u64, now + Duration::from_secs(60), admission());
            let hello = Handshake::new(ClientType::StreamFunction, format!("c{c}"), "id");
            let admitted = session.handle_frame(now, Frame::from(hello));
            assert!(matches!(admitted, Event::Admitted(_)));
            Client {
                session,
                outbox: None,
                tags: Vec::new(),
            }
        })
        .collect();
    let mut caches: Vec<_> = (0..CLIENTS)
        .map(|c| routes.cache_for(c as u64, &format!("c{c}")))
        .collect();
    let mut batch = Vec::new();
    for (i, step) in steps.into_iter().enumerate() {
        match step {
            Step::Subscribe { c, tag } => {
                let client = &mut clients[c];
                if !client.tags.contains(&tag) {
                    client.tags.push(tag);
                }
                let outbox = client
                    .outbox
                    .get_or_insert_with(|| Arc::new(Outbox::new(&queue, metrics.clone())))
                    .clone();
                routes.subscribe(c as u64, &client.tags, "", outbox, &[]);
            }
            Step::Leave { c } => {
                routes.unsubscribe(c as u64);
                clients[c].tags.clear();
                if let Some(outbox) = clients[c].outbox.take() {
                    outbox.abort(None, Drop::Disconnected);
                }
            }
            Step::Write {
                c,
                tag,
                tid,
                hops,
                function,
                big,
            } => {
                let tid = format!("t{tid}");
                let mut pairs = vec![(metadata::TID, tid.as_str())];
                let keys: Vec<String> = (0..8).map(|k| format!("k{k}")).collect();
                if big {
                    pairs.extend(keys.iter().map(|k| (k.as_str(), "v")));
                }
                let mut data = Data::new(tag, Bytes::from_static(b"payload"))
                    .with_metadata(Metadata::from_pairs(pairs));
                data.hops = hops;
                let origin = if function {
                    Origin::Function
                } else {
                    Origin::Source
                };
                match clients[c].session.handle_frame(now, Frame::Data(data)) {
                    Event::Route(routed) => {
                        metrics.frames_in(1);
                        let cache = &mut caches[c];
                        routing::route(&routes, cache, &metrics, routed, origin, now, None).await;
                    }
                    // As connection.rs: the hop limit owes its delivery, a refusal for
                    // metadata is a skip (no delivery owed).
                    Event::Drop(_, DropReason::Loop) => metrics.unrouted(Drop::Loop, 0x10, 1),
                    Event::Drop(_, DropReason::MetadataTooLarge(why)) => {
                        metrics.skip(why.kind(), 1)
                    }
                    other => prop_assert!(false, "unexpected {other:?}"),
                }
            }
            Step::Take { c, max, fail } => {
                if let Some(outbox) = &clients[c].outbox {
                    // Only what is there: never wait.
                    if let Some(true) = outbox.pop_batch(&mut batch, max).now_or_never() {
                        write_batch(&metrics, &mut batch, fail);
                    }
                }
            }
        }
        check(&metrics, &format!("step {i}"))?;
    }
    // Every writer drains its queue: nothing is left unaccounted.
    for client in &clients {
        if let Some(outbox) = &client.outbox {
            outbox.finish(None);
            while outbox.pop_batch(&mut batch, 64).await {
                write_batch(&metrics, &mut batch, false);
            }
        }
    }
    check(&metrics, "drained")?;
    let stats = metrics.stats();
    prop_assert_eq!(stats.ledger().check(), Ok(()), "{:?}", stats);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn the_ledger_never_goes_negative_and_balances_once_drained(
        steps in prop::collection::vec(step(), 1..80)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(steps))?;
    }
}

/// The offset, replayed: 1,000 frames past the hop limit used to leave the
/// ledger at -1,000 (drops counted against no delivery owed).
#[test]
fn frames_past_the_hop_limit_leave_the_ledger_balanced() {
    let steps = (0..1000)
        .map(|i| Step::Write {
            c: i % CLIENTS,
            tag: 0,
            tid: 0,
            hops: 3,
            function: true,
            big: false,
        })
        .collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(steps)).unwrap();
}
