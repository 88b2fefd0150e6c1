//! The y3 benchmark lab: the published Y3-vs-JSON codec report, an Erlang serialization
//! report and the network reports, reproduced against fair peers in one run, with JSON
//! results, Markdown reports and SVG charts.
//!
//! This is the library half of the binary crate `y3-lab` (`publish = false`), driven by
//! `y3-lab codec`, `y3-lab serde` and `y3-lab net ...`; it is not a timing library for
//! other crates, and nothing in the product binary `y3` depends on it.
//!
//! - [`data`]: the report's data sets (`C03-K02` .. `C63-K32`), built once per run in every
//!   format and checked equal before anything is timed.
//! - [`measure`]: the harness: batches timed with [`std::time::Instant`] and the process CPU
//!   clock, medians over samples, serial and one-thread-per-core parallel runs.
//! - [`codec`]: "take the value of one observed key": y3 rows, the peers (feature `peers`)
//!   and the Go side (`bench/go`, run as a subprocess).
//! - [`serde_suite`]: encode/decode msg/s of a ~130-byte message and an MQTT PUBLISH frame.
//! - [`net`]: the network suite (ping-pong, echo, router end to end, YoMo), its child
//!   processes and its reports.
//! - [`record`], [`report`], [`charts`]: the one data model every suite records (`--json`,
//!   read back by `--from`), Markdown, plotters SVG charts.
//!
//! Peers are behind the `peers` feature so that `cargo test --workspace` stays lean; without
//! it the lab runs the y3 rows (and the Go side) and says that peers are disabled.
//!
//! # Layout
//!
//! ```text
//! src/main.rs, src/cli/    the y3-lab command: shared OutputArgs + publish(), one module per suite's options
//! measure.rs               the harness: runners, medians (measure::median), serial/parallel
//! record.rs               Record (suite, dims, impl, metrics), Results, Meta: every suite's
//! report.rs               SuiteReport registry, codec/serde reports, targets table, Bound, RowTarget, fill()
//! table.rs                 Table: every report table, to Markdown and to chart series
//! charts.rs                BarChart → SVG (plotters)
//! codec/, data.rs, go.rs   codec suite: y3 rows, peer rows (Prepared::looping), Go side
//! serde_suite.rs           serde suite
//! net/SUITE.rs             network suites: pingpong, echo, e2e (and the pipeline topology),
//!                          yomo, filter, federation (measurement, child roles)
//! net/suites.rs            the network suites' registry: options, measure, report
//! net/report/SUITE.rs      their reports (markdown, charts, targets), prose in net/report/templates/
//! net/mod.rs, net/proc.rs  Programs (this binary, y3, peers), child processes, pace(), rounds()
//! ```
//!
//! # Adding a network suite
//!
//! 1. `net/NAME.rs`: `Options`, `run(&Options, &ProgressBar) -> Result<Results>` (use
//!    [`net::rounds`] for interleaved runs, [`measure::median`], [`net::pace`] for paced
//!    sends, [`net::Programs::spawn_lab`] for child processes), plus `serve`/`client`
//!    roles if it starts its own servers or clients (dispatched in [`net::serve`] and
//!    `cli/net.rs`'s `client`); `pub mod NAME;` in `net/mod.rs`.
//! 2. `net/report/NAME.rs` with its `REPORT: SuiteReport` and `templates/NAME.md` (the
//!    prose, with `{{placeholders}}`); `pub(crate) mod NAME;` in `net/report/mod.rs`.
//! 3. Its line in the registry [`net::suites::SUITES`], with its options (a clap `Args`
//!    struct implementing [`net::suites::SuiteArgs`]) next to it: the `y3-lab net NAME`
//!    command, its shared output options (`--json`, `--from`, `--docs`, ...) and the
//!    rendering of its recorded results all come from that line.
//!
//! A new peer of an existing suite is a row: a name in the suite's row list and its
//! prepare/op (codec: an `Impl` entry whose `prepare` returns `Prepared::looping`;
//! network: a branch of the suite's server/client start).
#![warn(missing_docs)]

pub mod alloc_count;
pub mod charts;
pub mod codec;
pub mod data;
pub mod go;
pub mod measure;
pub mod net;
pub mod record;
pub mod report;
pub mod serde_suite;
pub mod system;
pub mod table;

/// Whether the peers were compiled in (cargo feature `peers`).
pub const PEERS_ENABLED: bool = cfg!(feature = "peers");

/// A progress bar on stderr for `len` steps (hidden when stderr is not a terminal).
pub fn progress_bar(len: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    let style = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:32}] {pos}/{len} (eta {eta}) {wide_msg}",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar
}
