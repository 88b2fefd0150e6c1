//! The federation suite's NATS hop alone (`y3-lab net client nats-source|nats-sink`): a
//! publisher and a subscriber of one `nats-server`, each a process of its own, with the
//! payloads, stamps, pacing and sink summary of y3's clients in the `yomo` and
//! `federation` suites, so that the hop row reads like the router rows.
//!
//! ```text
//! nats-source ──PUB y3-lab.hop [stamp][zeros]──▶ nats-server ──MSG──▶ nats-sink
//! ```
//!
//! Both speak through async-nats, the client y3's federation links use, over plain TCP to
//! core NATS. The sink subscribes and flushes (the server has the subscription) before it
//! prints `{"connected": ADDR}`; its summary is a [`SinkReport`], the source's a
//! [`SourceReport`].

use std::io::Write;

use anyhow::{anyhow, bail, Result};
use futures_util::StreamExt;
use tokio_util::bytes::Bytes;

use crate::net::yomo::{
    emit, emit_connected, send_stamped, ClientRun, Role, SinkReport, SourceReport, StampedSource,
    Tally,
};

/// The subject the hop's messages travel on.
pub const SUBJECT: &str = "y3-lab.hop";

/// Messages a subscriber may hold before async-nats drops (as the `e2e` suite's NATS rows):
/// more than any run sends, so that the hop measures the server, not a client queue.
const SUBSCRIPTION_CAPACITY: usize = 1 << 20;

/// `nats-source`, `nats-sink` → the role.
pub fn role_of(kind: &str) -> Option<Role> {
    match kind {
        "nats-source" => Some(Role::Source),
        "nats-sink" => Some(Role::Sink),
        _ => None,
    }
}

/// The client kind of `role` (`y3-lab net client KIND`).
pub(crate) fn client_kind(role: Role) -> Result<&'static str> {
    match role {
        Role::Source => Ok("nats-source"),
        Role::Sink => Ok("nats-sink"),
        Role::Relay => bail!("the NATS hop has no relay"),
    }
}

async fn connect(run: &ClientRun) -> Result<async_nats::Client> {
    async_nats::ConnectOptions::new()
        .subscription_capacity(SUBSCRIPTION_CAPACITY)
        .connect(format!("nats://{}", run.addr))
        .await
        .map_err(|e| anyhow!("nats connect {}: {e}", run.addr))
}

/// Runs one NATS client of the hop (`run.role`: source or sink; `run.addr`: nats-server),
/// printing JSON lines as y3's clients do.
///
/// # Errors
/// Connect failures; a failed run is also a summary with `"error"`.
pub fn client(run: &ClientRun, out: &mut dyn Write) -> Result<()> {
    crate::net::exit_when_stdin_closes();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let error = rt.block_on(async {
        match run.role {
            Role::Source => {
                let report = source(run).await;
                emit(out, &report)?;
                Ok::<_, anyhow::Error>(report.error)
            }
            Role::Sink => {
                let report = sink(run, out).await?;
                emit(out, &report)?;
                Ok(report.error)
            }
            Role::Relay => bail!("the NATS hop has no relay"),
        }
    })?;
    match error {
        Some(e) => bail!("{e}"),
        None => Ok(()),
    }
}

/// The hop's publisher on [`SUBJECT`], for [`send_stamped`].
impl StampedSource for async_nats::Client {
    async fn send(&mut self, payload: Bytes) -> std::result::Result<(), String> {
        self.publish(SUBJECT, payload)
            .await
            .map_err(|e| e.to_string())
    }

    async fn flush(&mut self) -> std::result::Result<(), String> {
        async_nats::Client::flush(self)
            .await
            .map_err(|e| e.to_string())
    }
}

async fn source(run: &ClientRun) -> SourceReport {
    match connect(run).await {
        Ok(mut client) => send_stamped(run, &mut client).await,
        Err(e) => SourceReport {
            error: Some(format!("{e:#}")),
            ..SourceReport::default()
        },
    }
}

async fn sink<W: Write + ?Sized>(run: &ClientRun, out: &mut W) -> Result<SinkReport> {
    let client = connect(run).await?;
    let mut sub = client.subscribe(SUBJECT).await?;
    // The server has the subscription once the flush's PING is answered.
    client.flush().await?;
    emit_connected(out, run.addr)?;
    let report = Tally::new(run.count)
        .drain(run, (&mut sub).map(|msg| Ok(msg.payload)))
        .await;
    let _ = sub.unsubscribe().await;
    Ok(report)
}
