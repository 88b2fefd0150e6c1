//! Content filters at the router (issue 18): one source → `y3 serve` → N functions, each
//! wanting 1/N of the frames (10% with the default 10), two ways in the same run:
//!
//! - `router-filter`: each function declares `0x00/0x01 == i and 0x00/0x20 == -1` in its
//!   handshake; the router evaluates it per frame and sends only the matches;
//! - `function-filter`: the router delivers every frame to every function, which evaluates
//!   the same filter with `y3::Filter` and throws the rest away.
//!
//! Payload: the codec suite's C63 data set (node 0x00, keys 0x01..=0x3f) with key 0x01 the
//! selector `i % N` and key 0x02 the send time (8 bytes), about 220 bytes. The router runs
//! as a child process (`y3-lab net server router-y3`), clients in the lab's process. Per
//! variant: msg/s at the source (first send until every function has its share), router
//! CPU per frame (the child's user + system time), bytes delivered to the functions, the
//! lab's CPU per frame (source and functions), one-way p50/p99 of the matching deliveries.
//!
//! Not yet here: the NATS row (deliver everything, filter in the subscriber), and records
//! in the lab's JSON/report format; the table is printed as Markdown.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use tokio_util::bytes::Bytes;
use y3::{Dialect, Filter, Item, Value};
use y3_transport::sdk::{ClientOptions, Sink, Source};
use y3_transport::Data;

use crate::net::Programs;

/// The data tag.
const TAG: u32 = 0x10;

/// Options of the filter suite.
#[derive(Debug, Clone)]
pub struct Options {
    /// Functions, each wanting 1/`functions` of the frames.
    pub functions: usize,
    /// Messages the source sends.
    pub messages: u64,
    /// The lab's programs.
    pub programs: Programs,
}

/// One variant's numbers.
#[derive(Debug, Clone)]
pub struct Row {
    /// `router-filter` or `function-filter`.
    pub variant: &'static str,
    /// Messages per second at the source, until every function has its share.
    pub msg_per_s: f64,
    /// Router CPU (user + system) per message sent, in ns.
    pub router_ns_per_msg: f64,
    /// Payload bytes delivered to all functions together.
    pub bytes_to_functions: u64,
    /// The lab process's CPU (source and functions) per message sent, in ns.
    pub clients_ns_per_msg: f64,
    /// One-way latency of the matching deliveries, p50 and p99, in µs.
    pub p50_us: f64,
    /// See `p50_us`.
    pub p99_us: f64,
}

/// The filter of function `i`: two comparisons, the first selecting 1/N of the frames.
pub fn filter_of(i: usize) -> String {
    format!("0x00/0x01 == {i} and 0x00/0x20 == -1")
}

/// Payload templates, one per selector, and the offset of the 8 send-time bytes.
fn templates(n: usize) -> Vec<(Vec<u8>, usize)> {
    let value = |k: u32| match (k - 1) % 7 {
        0 => Value::Str("a".into()),
        1 => Value::I32(-65),
        2 => Value::U32(128),
        3 => Value::I64(-1),
        4 => Value::U64(u64::MAX),
        5 => Value::F32(0.25),
        _ => Value::F64(23.0),
    };
    const MARK: [u8; 8] = *b"\xa5TIME\xa5\x5a\x5a";
    (0..n)
        .map(|i| {
            let children = (1..=63)
                .map(|k| match k {
                    1 => Item::new(1, Value::I64(i as i64)),
                    2 => Item::new(2, Value::Bytes(MARK.to_vec())),
                    k => Item::new(k, value(k)),
                })
                .collect();
            // Keys below 64, short values: the encoder cannot fail here.
            let bytes = Item::node(0, children)
                .to_vec(Dialect::Golang)
                .unwrap_or_default();
            let at = bytes.windows(8).position(|w| w == MARK).unwrap_or(0);
            (bytes, at)
        })
        .collect()
}

fn now_ns(epoch: Instant) -> u64 {
    epoch.elapsed().as_nanos() as u64
}

/// Runs both variants.
///
/// # Errors
/// Router start, connection and timeout errors.
pub fn run(opts: &Options) -> Result<Vec<Row>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    for variant in ["router-filter", "function-filter"] {
        rows.push(rt.block_on(run_variant(opts, variant))?);
    }
    Ok(rows)
}

async fn run_variant(opts: &Options, variant: &'static str) -> Result<Row> {
    let n = opts.functions.max(1);
    let args = vec![
        "router-y3".to_string(),
        "--threads".into(),
        crate::measure::cores().to_string(),
    ];
    let mut child = opts
        .programs
        .spawn_lab("y3 router", "server", &args, None)?;
    let _quic = child.expect("quic ", Duration::from_secs(30))?;
    let addr = child
        .expect("listening ", Duration::from_secs(30))?
        .parse()?;
    let options = |name: String| ClientOptions::new(addr).name(name);
    let epoch = Instant::now();
    let wanted: Vec<u64> = (0..n)
        .map(|i| (opts.messages + (n - 1 - i) as u64) / n as u64)
        .collect();
    let bytes = Arc::new(AtomicU64::new(0));
    let latency = Arc::new(Mutex::new(Histogram::<u64>::new(3)?));
    let mut done = Vec::new();
    for (i, &want) in wanted.iter().enumerate() {
        let text = filter_of(i);
        let mut o = options(format!("fn-{i}"));
        if variant == "router-filter" {
            o = o.filter(TAG, text.clone());
        }
        let mut sink = Sink::connect(o, &[TAG]).await?;
        let mut filter = Filter::parse(&text)?;
        let (bytes, latency) = (bytes.clone(), latency.clone());
        done.push(tokio::spawn(async move {
            let mut got = 0u64;
            let mut local = Histogram::<u64>::new(3)?;
            while got < want {
                let Some(data) = sink.recv().await else {
                    bail!("function {i}: connection ended after {got} of {want}");
                };
                let data = data?;
                bytes.fetch_add(data.payload.len() as u64, Ordering::Relaxed);
                // The function's own check: what the router-side filter spares it.
                if !filter.evaluate(&data.payload).matches() {
                    continue;
                }
                got += 1;
                if let Some(&sent) = data
                    .payload
                    .get(TIME_AT..TIME_AT + 8)
                    .and_then(|b| <&[u8; 8]>::try_from(b).ok())
                {
                    let _ = local.record(now_ns(epoch).saturating_sub(u64::from_le_bytes(sent)));
                }
            }
            if let Ok(mut all) = latency.lock() {
                let _ = all.add(&local);
            }
            sink.close().await;
            anyhow::Ok(())
        }));
    }
    let templates = templates(n);
    let at = templates.first().map_or(0, |t| t.1);
    anyhow::ensure!(at == TIME_AT, "time bytes at {at}, expected {TIME_AT}");
    let mut source = Source::connect(options("source".into())).await?;
    let router_cpu = child.cpu_seconds().unwrap_or(0.0);
    let lab_cpu = crate::net::proc::cpu_seconds(std::process::id()).unwrap_or(0.0);
    let start = Instant::now();
    for m in 0..opts.messages {
        let (template, at) = &templates[(m % n as u64) as usize];
        let mut payload = template.clone();
        payload[*at..*at + 8].copy_from_slice(&now_ns(epoch).to_le_bytes());
        source
            .send_data(Data::new(TAG, Bytes::from(payload)))
            .await?;
    }
    source.flush().await?;
    for task in done {
        tokio::time::timeout(Duration::from_secs(120), task)
            .await
            .context("functions did not get their share in 120 s")???;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let router_cpu = child.cpu_seconds().unwrap_or(0.0) - router_cpu;
    let lab_cpu = crate::net::proc::cpu_seconds(std::process::id()).unwrap_or(0.0) - lab_cpu;
    source.close().await?;
    child.kill();
    let per_msg = |s: f64| s * 1e9 / opts.messages.max(1) as f64;
    let latency = latency
        .lock()
        .map(|h| h.clone())
        .unwrap_or(Histogram::new(3)?);
    Ok(Row {
        variant,
        msg_per_s: opts.messages as f64 / elapsed,
        router_ns_per_msg: per_msg(router_cpu),
        bytes_to_functions: bytes.load(Ordering::Relaxed),
        clients_ns_per_msg: per_msg(lab_cpu),
        p50_us: latency.value_at_quantile(0.5) as f64 / 1e3,
        p99_us: latency.value_at_quantile(0.99) as f64 / 1e3,
    })
}

/// Where the send time sits in every payload (after the node header `80 81 xx`, key 0x01
/// `01 01 ii` and key 0x02's header `02 08`).
const TIME_AT: usize = 3 + 3 + 2;

/// The rows as a Markdown table, with the ratios the issue sets targets for.
pub fn write_table(rows: &[Row], opts: &Options, out: &mut dyn Write) -> Result<()> {
    writeln!(
        out,
        "{} messages, {} functions each wanting 1/{} (filter `{}`), TCP, {}\n",
        opts.messages,
        opts.functions,
        opts.functions,
        filter_of(0),
        crate::system::machine()
    )?;
    writeln!(
        out,
        "| variant | msg/s | router CPU ns/msg | bytes to functions | source+functions CPU ns/msg | p50 µs | p99 µs |"
    )?;
    writeln!(out, "| --- | --: | --: | --: | --: | --: | --: |")?;
    for r in rows {
        writeln!(
            out,
            "| {} | {:.0} | {:.0} | {} | {:.0} | {:.0} | {:.0} |",
            r.variant,
            r.msg_per_s,
            r.router_ns_per_msg,
            r.bytes_to_functions,
            r.clients_ns_per_msg,
            r.p50_us,
            r.p99_us
        )?;
    }
    if let [router, function] = rows {
        writeln!(
            out,
            "\nbytes to functions: {:.1}× fewer with the router-side filter (target ≥ 9×); msg/s {:.2}× (target ≥ 2×); router CPU {:+.0} ns/msg",
            function.bytes_to_functions as f64 / router.bytes_to_functions.max(1) as f64,
            router.msg_per_s / function.msg_per_s.max(1e-9),
            router.router_ns_per_msg - function.router_ns_per_msg,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_select_and_carry_the_time() {
        let t = templates(10);
        for (i, (bytes, at)) in t.iter().enumerate() {
            assert_eq!(*at, TIME_AT);
            assert!((200..260).contains(&bytes.len()), "{}", bytes.len());
            for j in 0..10 {
                let v = Filter::parse(&filter_of(j)).unwrap().evaluate(bytes);
                assert_eq!(v.matches(), i == j, "template {i}, filter {j}");
            }
        }
    }
}
