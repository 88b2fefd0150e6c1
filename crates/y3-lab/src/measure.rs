//! The timing harness: batches, medians, CPU time, serial and parallel runs.
//!
//! One measurement of one implementation on one data set:
//!
//! 1. check: a fresh runner extracts once; the value must equal the expected one, or the row
//!    is refused (every later op is also compared, and a mismatch fails the row);
//! 2. calibrate: double the batch until it takes a twentieth of a sample, then size the batch
//!    to one sample;
//! 3. warm up for [`Settings::warmup`];
//! 4. time [`Settings::samples`] batches with [`Instant`] and the process CPU clock
//!    (`CLOCK_PROCESS_CPUTIME_ID`) around each; report the medians per op. In serial mode
//!    the implementations of one data set take their samples in turns
//!    ([`serial_interleaved`]), so that a noisy spell hits them alike;
//! 5. count allocations over a short extra pass (serial only).
//!
//! Parallel mode runs one thread per core (`available_parallelism`), each with its own
//! runner, released together by a barrier for every sample. Its `ns_per_op` is the time one
//! thread spends per op (equal to the serial figure under perfect scaling), `ops_per_s` the
//! aggregate throughput, `cpu_ns_per_op` the process CPU time per op over all threads.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use cpu_time::ProcessTime;

use crate::data::Scalar;

/// How long to measure.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Warm-up before the samples.
    pub warmup: Duration,
    /// Target duration of one sample (one timed batch).
    pub sample: Duration,
    /// Samples per measurement; the median is reported.
    pub samples: usize,
    /// Threads in parallel mode.
    pub threads: usize,
}

impl Settings {
    /// The default run: 11 samples of 40 ms after 100 ms of warm-up.
    pub fn normal() -> Settings {
        Settings {
            warmup: Duration::from_millis(100),
            sample: Duration::from_millis(40),
            samples: 11,
            threads: cores(),
        }
    }

    /// `--quick`: 5 samples of 10 ms after 20 ms of warm-up (CI-sized).
    pub fn quick() -> Settings {
        Settings {
            warmup: Duration::from_millis(20),
            sample: Duration::from_millis(10),
            samples: 5,
            threads: cores(),
        }
    }
}

/// Cores available to this process.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Serial or parallel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// One thread.
    Serial,
    /// One thread per core.
    Parallel,
}

impl Mode {
    /// `serial` or `parallel`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Serial => "serial",
            Mode::Parallel => "parallel",
        }
    }
}

/// One implementation bound to one input: what the harness times.
pub trait Runner: Send {
    /// Extracts once and returns the value (used by the check).
    fn once(&mut self) -> Scalar;
    /// The value every op must produce.
    fn expected(&self) -> Scalar;
    /// Runs `iters` ops and returns how many produced the expected value.
    fn run(&mut self, iters: u64) -> u64;
}

/// A [`Runner`] from an input and an op closure; the loop is monomorphized per op so that
/// only the batch, not each op, goes through `dyn`.
struct Looped<I, F> {
    input: I,
    expected: Scalar,
    op: F,
}

impl<I, F> Runner for Looped<I, F>
where
    I: AsRef<[u8]> + Send,
    F: FnMut(&[u8]) -> Scalar + Send,
{
    fn once(&mut self) -> Scalar {
        (self.op)(self.input.as_ref())
    }

    fn expected(&self) -> Scalar {
        self.expected
    }

    #[inline(never)]
    fn run(&mut self, iters: u64) -> u64 {
        let mut ok = 0;
        let input = self.input.as_ref();
        for _ in 0..iters {
            let got = (self.op)(black_box(input));
            // The comparison is what is kept opaque, not the value: `black_box(got)` spills
            // the returned enum and reloads it wider than it was written, a store-forwarding
            // stall (~10 ns) charged to whichever row's op was not inlined here.
            ok += u64::from(black_box(got == self.expected));
        }
        ok
    }
}

/// A boxed runner over `input` that must produce `expected`.
pub fn looped<I, F>(input: I, expected: Scalar, op: F) -> Box<dyn Runner>
where
    I: AsRef<[u8]> + Send + 'static,
    F: FnMut(&[u8]) -> Scalar + Send + 'static,
{
    Box::new(Looped {
        input,
        expected,
        op,
    })
}

/// Makes a fresh runner (one per thread).
pub type Factory = Box<dyn Fn() -> Box<dyn Runner> + Send + Sync>;

/// The medians of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Serial or parallel.
    pub mode: Mode,
    /// Threads that ran ops.
    pub threads: usize,
    /// Median wall time per op per thread, ns.
    pub ns_per_op: f64,
    /// Fastest and slowest sample, ns per op per thread.
    pub ns_range: (f64, f64),
    /// Median process CPU time per op (all threads), ns.
    pub cpu_ns_per_op: f64,
    /// Aggregate ops per second at the median.
    pub ops_per_s: f64,
    /// Samples taken.
    pub samples: usize,
    /// Ops per thread per sample.
    pub batch: u64,
    /// Allocations per op (serial mode).
    pub allocs_per_op: Option<f64>,
}

/// Checks one fresh runner: its value must equal the expected one.
///
/// # Errors
/// The value it produced instead.
pub fn check(factory: &Factory) -> Result<()> {
    let mut runner = factory();
    let (got, want) = (runner.once(), runner.expected());
    if got != want {
        bail!("extracted {got}, expected {want}");
    }
    Ok(())
}

/// The median of `values` and their range (lowest, highest): the lab's one summary of
/// repeated samples or runs, codec and network alike. NaN for no values.
pub fn median(values: &[f64]) -> (f64, (f64, f64)) {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let range = (
        v.first().copied().unwrap_or(f64::NAN),
        v.last().copied().unwrap_or(f64::NAN),
    );
    (mid, range)
}

/// Sizes a batch so that it takes about `sample`.
fn calibrate(runner: &mut dyn Runner, sample: Duration) -> Result<u64> {
    let target = sample.as_secs_f64() / 20.0;
    let mut iters = 1u64;
    loop {
        let t = Instant::now();
        let ok = runner.run(iters);
        let elapsed = t.elapsed().as_secs_f64();
        if ok != iters {
            bail!("{} of {iters} ops produced a wrong value", iters - ok);
        }
        if elapsed >= target || iters >= 1 << 40 {
            let per_op = elapsed / iters as f64;
            return Ok(((sample.as_secs_f64() / per_op) as u64).max(1));
        }
        iters *= 2;
    }
}

/// The one runner of the codec and serde suites: every row (a label and its prepared
/// factory) in every mode, serial samples taken in turns across the rows, parallel one row
/// at a time; `bar` advances by one per row and mode. Each mode's outcomes, in row order.
pub fn measure_rows(
    rows: &[(String, &Factory)],
    modes: &[Mode],
    settings: &Settings,
    bar: &indicatif::ProgressBar,
) -> Vec<(Mode, Vec<Result<Measurement>>)> {
    modes
        .iter()
        .map(|&mode| {
            bar.set_message(format!("{} rows, {}", rows.len(), mode.name()));
            let outcomes = match mode {
                Mode::Serial => {
                    let factories: Vec<&Factory> = rows.iter().map(|(_, f)| *f).collect();
                    let out = serial_interleaved(&factories, settings);
                    bar.inc(rows.len() as u64);
                    out
                }
                Mode::Parallel => rows
                    .iter()
                    .map(|(label, factory)| {
                        bar.set_message(format!("{label} parallel"));
                        let m = measure(factory, mode, settings);
                        bar.inc(1);
                        m
                    })
                    .collect(),
            };
            (mode, outcomes)
        })
        .collect()
}

/// Measures one runner factory in `mode`.
///
/// # Errors
/// When the check fails or any op produces a wrong value.
pub fn measure(factory: &Factory, mode: Mode, settings: &Settings) -> Result<Measurement> {
    check(factory)?;
    match mode {
        Mode::Serial => serial(factory, settings),
        Mode::Parallel => parallel(factory, settings),
    }
}

fn serial(factory: &Factory, settings: &Settings) -> Result<Measurement> {
    serial_interleaved(&[factory], settings)
        .pop()
        .expect("one result per factory")
}

/// One implementation's state during an interleaved serial measurement.
struct Slot {
    runner: Box<dyn Runner>,
    batch: u64,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    failed: Option<anyhow::Error>,
}

/// Serial measurements of several implementations whose samples are interleaved: sample
/// `s` of every implementation is taken before sample `s + 1` of any (in an order rotated
/// per round), so that a slow spell of a noisy machine hits all of them alike and their
/// ratios stay stable. Each result is what [`measure`] would give in serial mode.
pub fn serial_interleaved(factories: &[&Factory], settings: &Settings) -> Vec<Result<Measurement>> {
    let mut slots: Vec<Slot> = factories
        .iter()
        .map(|factory| {
            let mut runner = factory();
            let (got, want) = (runner.once(), runner.expected());
            let checked = if got == want {
                calibrate(runner.as_mut(), settings.sample)
            } else {
                Err(anyhow::anyhow!("extracted {got}, expected {want}"))
            };
            let (batch, failed) = match checked {
                Ok(b) => (b, None),
                Err(e) => (0, Some(e)),
            };
            Slot {
                runner,
                batch,
                wall: Vec::with_capacity(settings.samples),
                cpu: Vec::with_capacity(settings.samples),
                failed,
            }
        })
        .collect();
    for slot in slots.iter_mut().filter(|s| s.failed.is_none()) {
        let warm = Instant::now();
        while warm.elapsed() < settings.warmup {
            slot.runner.run((slot.batch / 4).max(1));
        }
    }
    let n = slots.len();
    for round in 0..settings.samples.max(1) {
        for i in 0..n {
            let slot = &mut slots[(i + round) % n];
            if slot.failed.is_some() {
                continue;
            }
            let batch = slot.batch;
            let c0 = ProcessTime::now();
            let t0 = Instant::now();
            let ok = slot.runner.run(batch);
            let elapsed = t0.elapsed();
            let cpu_elapsed = c0.elapsed();
            if ok != batch {
                slot.failed = Some(anyhow::anyhow!(
                    "{} of {batch} ops produced a wrong value",
                    batch - ok
                ));
                continue;
            }
            slot.wall.push(elapsed.as_nanos() as f64 / batch as f64);
            slot.cpu.push(cpu_elapsed.as_nanos() as f64 / batch as f64);
        }
    }
    slots
        .into_iter()
        .map(|mut slot| {
            if let Some(e) = slot.failed {
                return Err(e);
            }
            let count_iters = slot.batch.clamp(1, 1000);
            let (_, allocs) = crate::alloc_count::count(|| slot.runner.run(count_iters));
            let (ns_per_op, ns_range) = median(&slot.wall);
            Ok(Measurement {
                mode: Mode::Serial,
                threads: 1,
                ns_per_op,
                ns_range,
                cpu_ns_per_op: median(&slot.cpu).0,
                ops_per_s: 1e9 / ns_per_op,
                samples: slot.wall.len(),
                batch: slot.batch,
                allocs_per_op: Some(allocs as f64 / count_iters as f64),
            })
        })
        .collect()
}

fn parallel(factory: &Factory, settings: &Settings) -> Result<Measurement> {
    let threads = settings.threads.max(1);
    let batch = {
        let mut runner = factory();
        calibrate(runner.as_mut(), settings.sample)?
    };
    let barrier = Barrier::new(threads + 1);
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let wrong = AtomicU64::new(0);
    let mut wall = Vec::with_capacity(settings.samples);
    let mut cpu = Vec::with_capacity(settings.samples);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut runner = factory();
                loop {
                    barrier.wait();
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let n = next.load(Ordering::SeqCst);
                    let ok = runner.run(n);
                    wrong.fetch_add(n - ok, Ordering::SeqCst);
                    barrier.wait();
                }
            });
        }
        // Warm-up rounds, then the samples; each round is one start and one end barrier.
        let rounds = (settings.warmup.as_secs_f64() / settings.sample.as_secs_f64()).ceil();
        next.store((batch / 2).max(1), Ordering::SeqCst);
        for _ in 0..(rounds as usize * 2).max(1) {
            barrier.wait();
            barrier.wait();
        }
        next.store(batch, Ordering::SeqCst);
        for _ in 0..settings.samples.max(1) {
            let c0 = ProcessTime::now();
            let t0 = Instant::now();
            barrier.wait();
            barrier.wait();
            let elapsed = t0.elapsed();
            let cpu_elapsed = c0.elapsed();
            wall.push(elapsed.as_nanos() as f64 / batch as f64);
            cpu.push(cpu_elapsed.as_nanos() as f64 / (batch as f64 * threads as f64));
        }
        stop.store(true, Ordering::SeqCst);
        barrier.wait();
    });
    let wrong = wrong.load(Ordering::SeqCst);
    if wrong != 0 {
        bail!("{wrong} ops produced a wrong value in parallel");
    }
    let (ns_per_op, ns_range) = median(&wall);
    Ok(Measurement {
        mode: Mode::Parallel,
        threads,
        ns_per_op,
        ns_range,
        cpu_ns_per_op: median(&cpu).0,
        ops_per_s: threads as f64 * 1e9 / ns_per_op,
        samples: wall.len(),
        batch,
        allocs_per_op: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Settings {
        Settings {
            warmup: Duration::from_millis(1),
            sample: Duration::from_millis(1),
            samples: 3,
            threads: 2,
        }
    }

    fn factory(answer: i32) -> Factory {
        Box::new(move || {
            looped(vec![1u8, 2, 3], Scalar::I32(6), move |b: &[u8]| {
                Scalar::I32(b.iter().map(|&x| i32::from(x)).sum::<i32>() + answer - 6)
            })
        })
    }

    #[test]
    fn measures_serial_and_parallel() {
        let f = factory(6);
        let s = measure(&f, Mode::Serial, &tiny()).unwrap();
        assert!(s.ns_per_op > 0.0 && s.cpu_ns_per_op >= 0.0);
        assert!(s.allocs_per_op.is_some());
        let p = measure(&f, Mode::Parallel, &tiny()).unwrap();
        assert_eq!(p.threads, 2);
        assert!(p.ops_per_s > 0.0);
    }

    #[test]
    fn a_wrong_value_refuses_the_row() {
        let err = measure(&factory(7), Mode::Serial, &tiny()).unwrap_err();
        assert!(err.to_string().contains("expected int32 6"), "{err}");
    }

    #[test]
    fn interleaved_keeps_going_past_a_refused_row() {
        let (good, bad) = (factory(6), factory(7));
        let out = serial_interleaved(&[&good, &bad, &good], &tiny());
        assert_eq!(out.len(), 3);
        assert!(out[0].is_ok() && out[1].is_err() && out[2].is_ok());
        assert_eq!(out[0].as_ref().unwrap().samples, 3);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]).0, 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]).0, 2.5);
    }

    #[test]
    fn median_and_range() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), (2.0, (1.0, 3.0)));
        assert_eq!(median(&[4.0, 1.0]), (2.5, (1.0, 4.0)));
        assert!(median(&[]).0.is_nan());
    }
}
