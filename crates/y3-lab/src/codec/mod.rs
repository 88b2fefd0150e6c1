//! The codec suite: "take the value of one observed key" from each data set, with y3, the
//! peers (feature `peers`) and the Go side, serial and parallel, in one run.
//!
//! Every implementation is an [`Impl`]: a name, its wire format, what one op does, and a
//! constructor that prepares its input from a [`Dataset`] (encoding it in its own format
//! from the same pairs and checking the encoding decodes to those pairs) and returns a
//! [`Factory`] of runners. The harness checks each runner's value before timing it.

mod y3rows;

#[cfg(feature = "peers")]
pub mod peers;
#[cfg(feature = "peers")]
mod records;

use std::path::PathBuf;

use anyhow::{Context, Result};
use indicatif::ProgressBar;

use crate::data::Scalar;
use crate::data::{self, Dataset, Order};
use crate::measure::{self, looped, Factory, Mode, Settings};
use crate::record::{Dim, Harness, Meta, Record, Results};

/// An implementation's input, ready to time.
pub struct Prepared {
    /// Makes one runner per thread.
    pub factory: Factory,
    /// Bytes of its input.
    pub bytes: usize,
}

impl Prepared {
    /// A row that runs `op` on `input` in a loop and must get `expected`: the one runner of
    /// every implementation. `make_op` is called once per thread, so per-thread state
    /// (an observer, scratch buffers) lives in the op it returns.
    pub fn looping<I, M, F>(input: I, expected: Scalar, make_op: M) -> Prepared
    where
        I: AsRef<[u8]> + Clone + Send + Sync + 'static,
        M: Fn() -> F + Send + Sync + 'static,
        F: FnMut(&[u8]) -> Scalar + Send + 'static,
    {
        Prepared {
            bytes: input.as_ref().len(),
            factory: Box::new(move || looped(input.clone(), expected, make_op())),
        }
    }
}

/// One implementation of "take the value of key K".
pub struct Impl {
    /// Row name: `y3-observe`, `sonic-rs-get`, ...
    pub name: &'static str,
    /// Wire format: `y3`, `json`, `protobuf`, `msgpack`, `postcard`, `rkyv`.
    pub format: &'static str,
    /// What one op does: `observe`, `get`, `decode+field`, `scan`, ...
    pub op: &'static str,
    /// One line for the report: the method.
    pub about: &'static str,
    /// Prepares the input for a data set.
    pub prepare: fn(&Dataset) -> Result<Prepared>,
    /// Whether the format has keys on the wire (so key order applies); keyless formats
    /// (postcard, rkyv) run on the ascending data sets only.
    pub keyed: bool,
}

/// Every Rust implementation compiled in: the y3 rows, then the peers.
pub fn impls() -> Vec<Impl> {
    #[allow(unused_mut)]
    let mut out = y3rows::impls();
    #[cfg(feature = "peers")]
    out.extend(peers::impls());
    out
}

/// What `y3-lab codec` runs.
#[derive(Debug, Clone)]
pub struct CodecOptions {
    /// Timing settings.
    pub settings: Settings,
    /// Seed of the published order.
    pub seed: u64,
    /// Modes to run.
    pub modes: Vec<Mode>,
    /// Only implementations whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// Run the Go side (when `go` is on the PATH).
    pub go: bool,
    /// The Go module (`bench/go`).
    pub go_dir: PathBuf,
    /// Where to write the data file for Go.
    pub work_dir: PathBuf,
    /// `--quick`.
    pub quick: bool,
    /// The command line, for the report.
    pub command: String,
}

impl CodecOptions {
    fn wants(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| name.contains(o.as_str()))
    }
}

/// Fills a record's descriptive fields for a data set.
pub fn describe(record: &mut Record, ds: &Dataset) {
    record.suite = "codec".into();
    record.case = ds.case();
    record.set_dim(Dim::Order, ds.order.name());
    record.set_dim(Dim::Position, ds.position());
    record.set_dim(Dim::KeyPos, ds.key_pos);
}

/// Runs the codec suite.
///
/// # Errors
/// When a data set fails to verify. A row whose check or encoding fails is skipped and
/// noted (it never yields a number).
pub fn run(opts: &CodecOptions, bar: &ProgressBar) -> Result<Results> {
    let sets = data::datasets(opts.seed)?;
    let impls: Vec<Impl> = impls().into_iter().filter(|i| opts.wants(i.name)).collect();
    let go_impls = if opts.go {
        crate::go::IMPLS.iter().filter(|n| opts.wants(n)).count()
    } else {
        0
    };
    let rows: usize = sets
        .iter()
        .map(|d| {
            let rust = impls
                .iter()
                .filter(|i| i.keyed || d.order == Order::Ascending)
                .count();
            (rust + go_impls) * opts.modes.len()
        })
        .sum();
    bar.set_length(rows as u64);

    let mut results = Results {
        meta: Meta {
            harness: Some(Harness {
                seed: opts.seed,
                samples: opts.settings.samples,
                sample_ms: opts.settings.sample.as_millis() as u64,
                threads: opts.settings.threads,
                peers: crate::PEERS_ENABLED,
            }),
            ..Meta::now("codec", &opts.command, opts.quick)
        },
        orders: sets
            .iter()
            .filter(|d| d.order == Order::Published)
            .map(|d| (d.case(), d.keys.clone()))
            .collect(),
        records: Vec::new(),
        notes: Vec::new(),
    };
    if !crate::PEERS_ENABLED {
        results.notes.push(
            "peers disabled: built without the `peers` feature; run \
             `cargo run --release -p y3-lab --features peers -- codec` \
             (or scripts/bench-codec) for the full comparison"
                .into(),
        );
    }

    for ds in &sets {
        let mut prepared = Vec::new();
        for imp in impls
            .iter()
            .filter(|i| i.keyed || ds.order == Order::Ascending)
        {
            bar.set_message(format!("{} {}", ds.label(), imp.name));
            match (imp.prepare)(ds).with_context(|| format!("{} {}", imp.name, ds.label())) {
                Ok(p) => prepared.push((imp, p)),
                Err(e) => {
                    results
                        .notes
                        .push(format!("skipped {} on {}: {e:#}", imp.name, ds.label()));
                    bar.inc(opts.modes.len() as u64);
                }
            }
        }
        let record = |imp: &Impl, p: &Prepared, m: &measure::Measurement| {
            let mut r = Record::from_measurement("codec", m)
                .dim(Dim::Format, imp.format)
                .dim(Dim::Op, imp.op)
                .dim(Dim::Bytes, p.bytes);
            describe(&mut r, ds);
            r.implementation = imp.name.into();
            r
        };
        let rows: Vec<(String, &Factory)> = prepared
            .iter()
            .map(|(imp, p)| (format!("{} {}", ds.label(), imp.name), &p.factory))
            .collect();
        for (mode, outcomes) in measure::measure_rows(&rows, &opts.modes, &opts.settings, bar) {
            for ((imp, p), outcome) in prepared.iter().zip(outcomes) {
                match outcome {
                    Ok(m) => results.records.push(record(imp, p, &m)),
                    Err(e) => results.notes.push(format!(
                        "refused {} {} on {}: {e:#}",
                        imp.name,
                        mode.name(),
                        ds.label()
                    )),
                }
            }
        }
    }

    if opts.go {
        let go = crate::go::run(&sets, opts, bar, &mut results.records, &mut results.notes);
        match go {
            Ok(version) => results.meta.versions.push(("go".into(), version)),
            Err(e) => results.notes.push(format!("Go side skipped: {e:#}")),
        }
    } else {
        results.notes.push("Go side skipped (--no-go)".into());
    }
    Ok(results)
}

/// Runs `f` over every implementation's first runner on every data set and returns the
/// failures: the no-timing correctness check used by the tests and `--check`.
///
/// # Errors
/// When a data set fails to verify.
pub fn check_all(seed: u64) -> Result<Vec<String>> {
    let mut failures = Vec::new();
    for ds in data::datasets(seed)? {
        for imp in impls()
            .into_iter()
            .filter(|i| i.keyed || ds.order == Order::Ascending)
        {
            let outcome = (imp.prepare)(&ds).and_then(|p| measure::check(&p.factory));
            if let Err(e) = outcome {
                failures.push(format!("{} on {}: {e:#}", imp.name, ds.label()));
            }
        }
    }
    Ok(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_implementation_extracts_the_right_value() {
        let failures = check_all(42).unwrap();
        assert!(failures.is_empty(), "{failures:#?}");
    }

    #[test]
    fn impl_names_are_unique() {
        let mut names: Vec<_> = impls().iter().map(|i| i.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        assert!(names.contains(&"y3-observe"));
        assert_eq!(names.contains(&"protobuf-scan"), crate::PEERS_ENABLED);
    }
}
