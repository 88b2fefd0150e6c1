//! One router per `federation.name`: the claim, made through NATS itself.
//!
//! ```text
//!  router starting as N                          router holding N
//!  SUB <prefix>.name.N    (then flush)           SUB <prefix>.name.N (since its start)
//!  REQ <prefix>.name.N  "who am I" ───────────▶  answers "who it is", logs the attempt,
//!      ◀──────────── reply: N is taken           counts name_claims_refused
//!      ◀──────────── 503 no responders: free     (nobody subscribed)
//!      ... nothing within PROBE_WAIT,
//!          PROBE_TRIES times running:   free    (a holder whose host vanished)
//! ```
//!
//! Every router subscribes to its own name's subject before it asks, and answers every
//! request there for as long as it runs. A router whose request is answered refuses to
//! start ([`RouterError::FederationNameTaken`], naming the holder). The client does not
//! receive its own messages (`no_echo`), so a router never answers itself.
//!
//! A crashed holder does not lock its successor out: a killed process's NATS connection
//! closes with it and the server drops its subscription at once, so the restarted router
//! gets "no responders" at once; a holder whose host vanished (no FIN) stays subscribed until
//! the server's pings fail (minutes), but cannot answer, so the request times out
//! [`PROBE_TRIES`] times running ([`PROBE_WAIT`] each) and the name is free. The price: a
//! holder too busy to answer any of those requests is taken for gone; one busy for a moment
//! (a loaded host) answers a later one. Two routers that start with one name within the
//! cluster's interest propagation time (milliseconds) may both refuse, or both start.
//! Whatever gets through is caught while running: another router's frames under this
//! router's name are dropped and counted (`lost{reason="same_name"}`), and both are logged.
//!
//! When NATS is not reachable within [`CONNECT_WAIT`] of the start, the router starts (it
//! routes locally without NATS) and claims the name once connected; a name found taken then
//! is logged as an error and raises `y3_router_federation_name_conflict`.

use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::{Client, Request, RequestErrorKind};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::Federation;
use crate::error::RouterError;

/// How long a claim waits for an answer from a holder, each time it asks.
pub(crate) const PROBE_WAIT: Duration = Duration::from_secs(1);

/// How many times running a claim asks before a silent subscriber is taken for gone.
pub(crate) const PROBE_TRIES: u32 = 3;

/// How long the start waits for NATS before it claims the name in the background.
const CONNECT_WAIT: Duration = Duration::from_secs(3);

/// Longest holder description shown from an answer.
const MAX_DESCRIPTION: usize = 256;

/// The subject of `name`'s claim.
pub(crate) fn subject(prefix: &str, name: &str) -> String {
    format!("{prefix}.name.{name}")
}

/// Claims this router's name: `Ok` with the task answering later claims, or
/// [`RouterError::FederationNameTaken`] when another router answers for it. Without NATS
/// within [`CONNECT_WAIT`], the claim goes on in the background.
pub(crate) async fn claim(
    fed: &Arc<Federation>,
    client: &Client,
) -> Result<JoinHandle<()>, RouterError> {
    let connected = tokio::time::timeout(CONNECT_WAIT, async {
        while client.connection_state() != State::Connected {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .is_ok();
    if connected {
        let sub = probe(fed, client).await?;
        return Ok(tokio::spawn(answer(fed.clone(), client.clone(), sub)));
    }
    tracing::warn!(
        router = %fed.name,
        "federation: NATS not reachable yet; the name is claimed once it is"
    );
    let (fed, client) = (fed.clone(), client.clone());
    Ok(tokio::spawn(async move {
        while client.connection_state() != State::Connected {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        match probe(&fed, &client).await {
            Ok(sub) => answer(fed, client, sub).await,
            Err(e) => {
                fed.metrics.name_conflict.set(1);
                tracing::error!(
                    router = %fed.name,
                    error = %e,
                    "federation: started while NATS was unreachable, and the name is taken; \
                     frames between the two routers are dropped and counted (same_name): \
                     give one of them another federation.name"
                );
            }
        }
    }))
}

/// Subscribes to the name's subject, then asks whether anyone else holds it.
async fn probe(fed: &Federation, client: &Client) -> Result<async_nats::Subscriber, RouterError> {
    let subject = subject(&fed.config.subject_prefix, &fed.name);
    let unreachable = |_| RouterError::Config {
        field: "federation.urls",
        problem: "the NATS client closed while claiming federation.name",
    };
    let sub = client
        .subscribe(subject.clone())
        .await
        .map_err(unreachable)?;
    // Subscribed at the server before asking: a router asking at the same moment finds us.
    client.flush().await.map_err(|_| RouterError::Config {
        field: "federation.urls",
        problem: "the NATS client closed while claiming federation.name",
    })?;
    for attempt in 1..=PROBE_TRIES {
        let request = Request::new()
            .payload(describe(fed, client))
            .timeout(Some(PROBE_WAIT));
        match client.send_request(subject.clone(), request).await {
            Ok(reply) => {
                return Err(RouterError::FederationNameTaken {
                    name: fed.name.to_string(),
                    holder: shown(&reply.payload),
                });
            }
            Err(e) if matches!(e.kind(), RequestErrorKind::NoResponders) => return Ok(sub),
            Err(e) if matches!(e.kind(), RequestErrorKind::TimedOut) => {
                tracing::info!(
                    router = %fed.name,
                    attempt,
                    "federation: a subscriber of this name did not answer in {PROBE_WAIT:?}"
                );
            }
            Err(e) => {
                tracing::warn!(
                    router = %fed.name,
                    error = %e,
                    "federation: could not check that federation.name is unique; going on"
                );
                return Ok(sub);
            }
        }
    }
    tracing::info!(
        router = %fed.name,
        "federation: the name's subscriber did not answer {PROBE_TRIES} times running (a \
         holder that is gone); taking the name"
    );
    Ok(sub)
}

/// Answers every later claim of the name with this router's description, and logs it.
async fn answer(fed: Arc<Federation>, client: Client, mut sub: async_nats::Subscriber) {
    while let Some(msg) = sub.next().await {
        let Some(reply) = msg.reply else { continue };
        fed.metrics.name_claims_refused.inc();
        tracing::error!(
            router = %fed.name,
            claimant = %shown(&msg.payload),
            "federation: another router tried to start with this federation.name; it was \
             refused"
        );
        let _ = client.publish(reply, describe(&fed, &client)).await;
    }
}

/// Who this router is, as a claim or an answer tells it.
fn describe(fed: &Federation, client: &Client) -> Bytes {
    let info = client.server_info();
    Bytes::from(format!(
        "process {} at {} (NATS client {} on {}), federating since {} ms after the Unix epoch",
        std::process::id(),
        info.client_ip,
        info.client_id,
        info.server_name,
        fed.epoch
    ))
}

/// A description from the wire, bounded and printable.
fn shown(payload: &[u8]) -> String {
    let text = String::from_utf8_lossy(&payload[..payload.len().min(MAX_DESCRIPTION)]);
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_bounded_and_printable() {
        assert_eq!(shown(b"a\nb"), "a?b");
        assert_eq!(shown(&[b'x'; 1000]).len(), MAX_DESCRIPTION);
        assert_eq!(subject("y3", "a-1"), "y3.name.a-1");
    }
}
