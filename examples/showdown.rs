//! The showdown: hybrid-sync against tokio::sync, async-lock, parking_lot and
//! std, side by side in one run, on the workloads the crate exists for.
//!
//! ```text
//! cargo run --release --example showdown            # quick, under a minute
//! cargo run --release --example showdown -- --full  # longer runs, steadier numbers (~10 min)
//!     [--only WORKLOAD,..] [--peers NAME,..] [--json FILE] [--svg DIR] [--stats]
//! ```
//!
//! `parking_lot` is the release a new project gets today, 0.13 (it needs Rust
//! 1.95; it dropped 0.12's eventual fairness, and its unlock releases the
//! lock before it looks for a waiter to wake). `--full` runs 0.12, which most of the
//! ecosystem still builds with, beside it as `parking_lot 0.12` (a quick run
//! too with `--peers`), and the header names the versions of every peer.
//!
//! Every contender runs the same code (`examples/common/peers.rs`). Each table
//! reports, per contender: operations per second, CPU time per operation
//! (user + system, from `getrusage`: a lock that wins by burning cores has
//! not won), acquire latency (p50, p99, max: the time from asking for the
//! lock to being inside it), and the throughput ratio to tokio. Contended
//! tables run every contender once per round and report each one's median
//! round; beneath them a line gives hybrid-sync's ratio to each peer round
//! by round (the median of the rounds' ratios, each round's contenders
//! having run back to back), which a change of the host's pace between the
//! median rounds of two contenders does not move. `--json` keeps every
//! round's figure (`rounds`).
//!
//! Before the tables, the header reports the machine's **stall floor**: one
//! thread per CPU spins alone on the clock (2 s in `--full`), and the longest
//! gap between two readings is time its CPU was taken away. On the shared
//! 2-vCPU VM this crate is developed on that is 0.1 to 7 ms from one run to
//! the next: a wait that spans such a stall (the holder paused inside its
//! critical section, or the waiter itself) includes it whatever the lock, so
//! read each "max wait" column against it. The stall floor's 2 s rarely
//! catch the longest stalls, 100 ms slices of a vCPU taken by the host every
//! few seconds while both vCPUs are busy, so each table's last column,
//! **host stole**, gives the CPU time the hypervisor took from the vCPUs
//! during that contender's rounds (the steal column of `/proc/stat`, at its
//! 10 ms resolution, every round and vCPU summed; "-" where there is no such
//! clock), and the run's last line the total: a max wait of that order may
//! be the host's, and one far above what was stolen is not. The header
//! also names the CPU and how long a cache line takes to cross from one CPU
//! to another (a two-thread ping-pong): every contended operation of every
//! lock waits for the lock word's line, and the same VM image has run on an
//! AMD EPYC host and, since 2026-12-02, on an Intel Xeon one where a
//! crossing takes 80-100 ns, which moves every contended table. The crossing
//! can move within a run too (with where the host places the vCPUs), so the
//! run's last lines measure it again.
//!
//! Workloads:
//!
//! * **uncontended**: one task acquires and releases in a loop; ns per
//!   acquire+release (the cost every call pays), the best of 5 rounds that
//!   each run every contender once. Beside it, tokio's coop charge alone
//!   (`poll_proceed` + `made_progress`, which every acquisition in a tokio
//!   task pays, tokio's own locks included) and with a parking_lot read: the
//!   floor under an async lock that honours tokio's budget.
//! * **uncontended blocking**: `blocking_lock` + release in a loop, on a
//!   plain thread and from 2 `spawn_blocking` threads at once (each on a lock
//!   of its own): on threads with a runtime context, tokio's blocking methods
//!   check that the thread may block, and hybrid-sync runs the same check.
//! * **async write-heavy**: 64 tasks on 2 worker threads, every operation a
//!   write with a ~50 ns critical section; each task yields to the runtime
//!   every 16 operations, standing in for the rest of a handler's work.
//!   parking_lot and std lock inside the task without holding across `.await`.
//! * **async read-heavy**: the same with 90% reads.
//! * **async tight loop**: 16 tasks, 90% reads, and no yield between
//!   operations: a task that works through a batch, locking per item. The
//!   coop budget of tokio's locks (and hybrid-sync's) still makes each task
//!   yield every 128 acquisitions; async-lock's, parking_lot's and std's
//!   tasks never yield, and run to the end of the round one per worker.
//! * **threads, oversubscribed**: 32 threads on 2 cores, blocking API,
//!   ~50 ns critical section: where spinning goes wrong.
//! * **mixed**: 4 blocking threads and 32 tasks on the same lock, which only
//!   locks with both a blocking and an async API can do cleanly. Below the
//!   table, each contender's operations and waits split by side (the
//!   threads', the tasks'): a lock can reach its total by serving one side
//!   and starving the other.
//! * **threads 2 and 8**: the same as the 32-thread table, less oversubscribed.
//! * **async hold across .await**: 64 tasks each holding the write guard over
//!   a `yield_now().await`: spinning cannot pay here, and must not hurt.
//!   Then the same with 90% reads (a handler that reads shared state around
//!   an awaited call): a run of readers woken to compete finds the lock
//!   taken by the next writer before it runs, so the lock has to learn to
//!   grant the runs instead.
//! * **one worker**: async write-heavy and read-heavy again with their 64
//!   tasks on one worker thread, where the lock's cache line never leaves
//!   one CPU: what each lock does with no line to move. Two workers could
//!   beat it only by overlapping the little work outside the lock, and
//!   they pay for every move of the line between them. A line under each
//!   table puts the issues' target, 3x (3.5x) tokio's two-worker rate,
//!   beside the best rate on one worker.
//! * **seed 000** (per-address backoff): 4 threads on two locks at once, 8
//!   operations with a ~20 ns section on one per ~2 us one on the other; the
//!   same run with hybrid-sync's backoff table reduced to one delay per
//!   thread (a test-only switch) shows what the table buys. In this first
//!   configuration the long lock is the bottleneck (its sections alone
//!   fill the run), so the short lock's rate follows the long one's and
//!   its waits stay at its uncontended cost (p99 ~20 ns):
//!   it shows two locks of different hold times side by side, not what the
//!   table buys. The second configuration, **seed 000 (b)**, is the one
//!   that does: 32 short operations per long one and ~100 ns of work
//!   outside the locks after each, so the long lock is no longer the
//!   bottleneck (parking_lot keeps it busy about two thirds of the time)
//!   and the short lock is contended. The work between
//!   operations matters too: under a lock that lets newcomers barge, a
//!   waiter that oversleeps a release costs nothing while the owner takes
//!   the lock straight back, and idles the lock when the owner goes off to
//!   do something else (the kernel's netperf run, where the per-address
//!   table bought 45%, had ticket locks and packet work between them).
//! * **seed 002** (fairness): 1 or 4 threads in a tight acquire/release loop
//!   and one slow thread with ~1 us of work outside the lock: total
//!   throughput, the slow thread's rate and its maximum wait.
//! * **seed 003** (spinners under handoff): 32 threads with the handoff
//!   timeout forced to 50 us: the default, where with that crowd of threads
//!   queued newcomers do not spin at all; with that rule switched off
//!   (`no crowd rule`), where spinners leave at once when the handoff bit is
//!   set; and, as a test-only broken variant, spinning on through it: CPU
//!   time per operation, and the time spinners spent polling while a handoff
//!   was pending (measured inside the lock by a test-only switch), per
//!   acquisition.
//! * **seed 004** (optimistic spinning at scale): 10, 100 and 1000 threads
//!   against a lock that never spins (a plain futex-style parking lock), and
//!   10, 100 and 1000 tasks.
//! * **refcount** (seed 001, the kernel's lockref experiment): 2 threads
//!   (then 64 tasks on 2 workers) each taking and dropping a reference to
//!   one shared count, as `LockRef` get+put, a bare `AtomicU64` (the
//!   floor), `Arc` clone+drop, and a count under a spinlock (what the kernel
//!   had before lockref) or a parking_lot, std or tokio mutex; then the seed's mixed case, where 1 in 1000 operations takes the
//!   lock for a ~50 ns section instead.
//!
//! The counts above are for the 2-vCPU machine the crate is developed on.
//! `--scale N` multiplies the runtime's workers and every workload's tasks
//! and threads by `N` (seed 004's 10/100/1000 and the uncontended tables
//! stay as they are), and `--scale auto` picks half the CPU count: on 16
//! cores, 16 workers, 512 tasks, and 16, 64 and 256 threads where 2 cores
//! have 2, 8 and 32. The titles and the header say what ran.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "common/clock.rs"]
mod clock;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/report.rs"]
mod report;
#[path = "common/work.rs"]
mod work;
use peers::{Peer, RefCount};

// ---------------------------------------------------------------------------
// Clocks
// ---------------------------------------------------------------------------

use clock::{Usage, has_steal_clock, ns_per_tick, ticks};
use work::{WORK_ITERS, calibrate_work, work, work_ns};

// ---------------------------------------------------------------------------
// Latency histogram: log2 buckets with 4 linear sub-buckets (~19% resolution).
// ---------------------------------------------------------------------------

#[derive(Clone)]
struct Hist {
    buckets: Vec<u64>,
    max: u64,
    count: u64,
}

impl Hist {
    fn new() -> Self {
        Hist { buckets: vec![0; 64 * 4], max: 0, count: 0 }
    }
    #[inline]
    fn record(&mut self, ticks: u64) {
        let v = ticks.max(1);
        let log = 63 - v.leading_zeros() as usize;
        let sub = if log >= 2 { ((v >> (log - 2)) & 3) as usize } else { 0 };
        self.buckets[log * 4 + sub] += 1;
        self.max = self.max.max(v);
        self.count += 1;
    }
    fn merge(&mut self, o: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.max = self.max.max(o.max);
        self.count += o.count;
    }
    /// The `q` quantile, in ticks (upper edge of its bucket).
    fn quantile(&self, q: f64) -> u64 {
        let target = (self.count as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target.max(1) {
                let (log, sub) = (i / 4, (i % 4) as u64);
                return if log >= 2 { (4 + sub + 1) << (log - 2) } else { 1 << log };
            }
        }
        self.max
    }
}

struct Xorshift(u64);
impl Xorshift {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

// ---------------------------------------------------------------------------
// Results and tables
// ---------------------------------------------------------------------------

struct Row {
    name: &'static str,
    ops: u64,
    elapsed: Duration,
    cpu: Duration,
    /// CPU time the host took from the machine's vCPUs meanwhile (see
    /// `clock::stolen_time`).
    stolen: Duration,
    hist: Hist,
    /// Where threads and tasks shared the lock (the mixed workload): the
    /// threads' operations and waits, then the tasks'; `None` elsewhere.
    by_side: Option<[Side; 2]>,
    /// Every round's operations per second, in the order the rounds ran
    /// (set by `median_row`; empty for a single measurement).
    rounds: Vec<f64>,
}

/// One side's operations and waits (see `Row::by_side`).
type Side = (u64, Hist);

impl Row {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_op(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.ops.max(1) as f64
    }
}

/// The round with the median throughput, with the latency histograms of all
/// rounds merged (so "max wait" is the worst of every round), each side's
/// as well, and the time stolen from the vCPUs summed over every round.
fn median_row(mut runs: Vec<Row>) -> Row {
    let rounds = runs.iter().map(Row::ops_per_sec).collect();
    runs.sort_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
    let stolen = runs.iter().map(|r| r.stolen).sum();
    let mut hist = Hist::new();
    let mut sides = [Hist::new(), Hist::new()];
    for r in &runs {
        hist.merge(&r.hist);
        for (all, (_, side)) in sides.iter_mut().zip(r.by_side.iter().flatten()) {
            all.merge(side);
        }
    }
    let mid = runs.len() / 2;
    let mut row = runs.swap_remove(mid);
    (row.hist, row.stolen, row.rounds) = (hist, stolen, rounds);
    for ((_, side), all) in row.by_side.iter_mut().flatten().zip(sides) {
        *side = all;
    }
    row
}

/// Runs `run` (every contender once) `rounds` times and keeps each
/// contender's median round.
fn median_rounds(rounds: usize, run: &mut dyn FnMut() -> Vec<Row>) -> Vec<Row> {
    let mut all: Vec<Vec<Row>> = Vec::new();
    for _ in 0..rounds {
        for row in run() {
            match all.iter_mut().find(|v| v[0].name == row.name) {
                Some(v) => v.push(row),
                None => all.push(vec![row]),
            }
        }
    }
    all.into_iter().map(median_row).collect()
}

fn fmt_rate(r: f64) -> String {
    if r >= 1e6 { format!("{:.2} M", r / 1e6) } else { format!("{:.0} k", r / 1e3) }
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Time stolen from the vCPUs, at the 10 ms resolution `/proc/stat` has;
/// "-" where there is no such clock.
fn fmt_stolen(d: Duration) -> String {
    if has_steal_clock() { format!("{:.0} ms", d.as_secs_f64() * 1e3) } else { "-".into() }
}

fn print_tail(r: &Row) {
    if std::env::var("SHOWDOWN_TAIL").is_err() {
        return;
    }
    let tick = ns_per_tick();
    let mut line = String::new();
    for (i, n) in r.hist.buckets.iter().enumerate() {
        let (log, sub) = (i / 4, (i % 4) as u64);
        let lo = if log >= 2 { ((4 + sub) << (log - 2)) as f64 * tick } else { (1u64 << log) as f64 * tick };
        if *n > 0 && lo >= 100_000.0 {
            line += &format!(" >{}:{}", fmt_ns(lo), n);
        }
    }
    println!("    {} tail:{line}", r.name);
}

/// Every table printed so far, for `--json` and `--svg`.
static REPORT: std::sync::Mutex<Vec<report::Table>> = std::sync::Mutex::new(Vec::new());

/// `--json`'s file and the machine line, set once the header is printed:
/// every table rewrites the file, so that a run stopped part way (a device
/// machine's time limit) keeps the figures of the tables it finished.
static JSON_SO_FAR: std::sync::OnceLock<(std::path::PathBuf, String)> = std::sync::OnceLock::new();

fn record(title: &str, unit: &'static str, higher_is_better: bool, rows: Vec<report::Record>) {
    let mut tables = REPORT.lock().unwrap();
    tables.push(report::Table { title: title.to_string(), unit, higher_is_better, rows });
    if let Some((path, machine)) = JSON_SO_FAR.get() {
        // Written aside and renamed, so that a run killed mid-write keeps
        // the last whole file. Errors surface in `write_reports` at the end.
        let aside = path.with_extension("json.part");
        if std::fs::write(&aside, report::json(machine, &tables)).is_ok() {
            let _ = std::fs::rename(&aside, path);
        }
    }
}

/// One cell of a table that has a value and nothing else, no CPU time or
/// latency (the uncontended tables' ns per operation, the mixed workload's
/// split between threads and tasks).
fn value_cell(name: &str, v: f64) -> report::Record {
    report::Record {
        name: name.to_string(),
        value: v,
        cpu_ns_per_op: None,
        p50_ns: None,
        p99_ns: None,
        max_ns: None,
        stolen_ns: None,
        rounds: Vec::new(),
    }
}

fn records(rows: &[Row], latency: bool) -> Vec<report::Record> {
    let tick = ns_per_tick();
    rows.iter()
        .map(|r| report::Record {
            name: r.name.to_string(),
            value: r.ops_per_sec(),
            cpu_ns_per_op: Some(r.cpu_us_per_op() * 1000.0),
            p50_ns: latency.then(|| r.hist.quantile(0.5) as f64 * tick),
            p99_ns: latency.then(|| r.hist.quantile(0.99) as f64 * tick),
            max_ns: latency.then_some(r.hist.max as f64 * tick),
            stolen_ns: Some(r.stolen.as_nanos() as f64),
            rounds: r.rounds.clone(),
        })
        .collect()
}

fn print_table(title: &str, rows: &[Row]) {
    record(title, "ops/s", true, records(rows, true));
    let tokio = rows.iter().find(|r| r.name == "tokio").map(Row::ops_per_sec);
    let tick = ns_per_tick();
    println!("\n== {title}");
    println!(
        "{:<16} {:>10} {:>9} {:>12} {:>10} {:>10} {:>10} {:>11}",
        "contender", "ops/s", "vs tokio", "CPU us/op", "p50 wait", "p99 wait", "max wait", "host stole"
    );
    for r in rows {
        let ratio = tokio.map_or("-".into(), |t| format!("{:.2}x", r.ops_per_sec() / t));
        println!(
            "{:<16} {:>10} {:>9} {:>12.3} {:>10} {:>10} {:>10} {:>11}",
            r.name,
            fmt_rate(r.ops_per_sec()),
            ratio,
            r.cpu_us_per_op(),
            fmt_ns(r.hist.quantile(0.5) as f64 * tick),
            fmt_ns(r.hist.quantile(0.99) as f64 * tick),
            fmt_ns(r.hist.max as f64 * tick),
            fmt_stolen(r.stolen),
        );
    }
    rows.iter().for_each(print_tail);
    print_paired(rows);
    print_split(title, rows);
}

/// hybrid-sync against each peer round by round: the median of the rounds'
/// ratios. A round runs every contender back to back, so a round's two
/// figures share the host's state of the moment, where the columns above
/// compare each contender's median round, which may come from different
/// moments. On this VM the host switches, every few seconds, between
/// phases that run the same code at rates up to 1.7x apart, and a table
/// whose median rounds fell in different phases moves its ratio by as much
/// (docs/performance.md, "The host's two paces, and ratios round by round").
fn print_paired(rows: &[Row]) {
    let Some(ours) = rows.iter().find(|r| r.name == "hybrid-sync") else { return };
    if ours.rounds.len() < 3 {
        return;
    }
    let cells: Vec<String> = rows
        .iter()
        .filter(|r| r.name != ours.name && r.rounds.len() == ours.rounds.len())
        .map(|r| format!("{} {:.2}x", r.name, paired_ratio(&ours.rounds, &r.rounds)))
        .collect();
    if !cells.is_empty() {
        println!(
            "   hybrid-sync / each, round by round (median of {} rounds' ratios): {}",
            ours.rounds.len(),
            cells.join(", ")
        );
    }
}

/// The median of `a[i] / b[i]` over the rounds.
fn paired_ratio(a: &[f64], b: &[f64]) -> f64 {
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    if n % 2 == 1 { ratios[n / 2] } else { (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0 }
}

/// Where threads and tasks shared the lock: how its operations and waits
/// were split between the two, per contender (a lock can reach its total
/// by serving one side and starving the other).
fn print_split(title: &str, rows: &[Row]) {
    let split: Vec<(&str, &[Side; 2], f64)> =
        rows.iter().filter_map(|r| Some((r.name, r.by_side.as_ref()?, r.elapsed.as_secs_f64()))).collect();
    if split.is_empty() {
        return;
    }
    // Tables of their own (the charts are named after the first 60
    // characters of a title).
    let workload = title.split(':').next().unwrap_or(title);
    for (side, name) in ["the threads' operations", "the tasks' operations"].into_iter().enumerate() {
        let rows = split.iter().map(|(n, sides, secs)| value_cell(n, sides[side].0 as f64 / secs)).collect();
        record(&format!("{workload}, by side: {name}"), "ops/s", true, rows);
    }
    let tick = ns_per_tick();
    println!(
        "   {:<16} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "by side", "threads", "p99 wait", "max wait", "tasks", "p99 wait", "max wait", "threads"
    );
    for (name, sides, secs) in &split {
        let share = 100.0 * sides[0].0 as f64 / (sides[0].0 + sides[1].0).max(1) as f64;
        let cells = sides.iter().map(|(ops, hist)| {
            format!(
                "{:>10} {:>10} {:>10}",
                fmt_rate(*ops as f64 / secs),
                fmt_ns(hist.quantile(0.99) as f64 * tick),
                fmt_ns(hist.max as f64 * tick)
            )
        });
        println!("   {name:<16} {} {share:>7.0}%", cells.collect::<Vec<_>>().join(" "));
    }
}

/// Seed 003's figure beside its table: CPU time spinners spent polling a
/// lock whose handoff bit was set, per acquisition.
fn print_handoff_spin(rows: &[(&str, f64)]) {
    record(
        "seed 003: spin time under a pending handoff, per acquisition",
        "ns/op",
        false,
        rows.iter()
            .map(|(name, ns)| report::Record {
                name: name.to_string(),
                value: *ns,
                cpu_ns_per_op: None,
                p50_ns: None,
                p99_ns: None,
                max_ns: None,
                stolen_ns: None,
                rounds: Vec::new(),
            })
            .collect(),
    );
    println!("   spin time while a handoff was pending (summed over spinners), per acquisition:");
    for (name, ns) in rows {
        println!("   {name:<16} {ns:>9.1} ns/op");
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// Rounds of the uncontended table; each contender's best one counts.
const UNCONTENDED_ROUNDS: u32 = 5;

/// One uncontended measurement: ns per operation over `n` operations of one
/// task on the given current-thread runtime.
type Measure = Box<dyn Fn(&tokio::runtime::Runtime, u64) -> f64>;

/// ns per acquire+release of one task, on a lock of its own that lives
/// across the rounds.
fn uncontended<P: Peer + 'static>(write: bool) -> Measure {
    let lock = P::new(0);
    Box::new(move |rt, n| {
        let t = Instant::now();
        if write {
            lock.uncontended_write(rt, n);
        } else {
            lock.uncontended_read(rt, n);
        }
        t.elapsed().as_nanos() as f64 / n as f64
    })
}

/// ns per unit of tokio's coop budget charged the way every lock that
/// honours the budget charges it (`poll_proceed`, then `made_progress`),
/// measured as `uncontended` measures a lock: the floor under any async
/// acquisition in a tokio task. With `lock` also a parking_lot read around
/// each charge: what parking_lot would cost if it charged the budget.
fn coop_charge(lock: bool) -> Measure {
    let pl = parking_lot::RwLock::new(0u64);
    Box::new(move |rt, n| {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                if lock {
                    std::hint::black_box(*pl.read());
                }
                tokio::task::coop::consume_budget().await;
            }
        });
        t.elapsed().as_nanos() as f64 / n as f64
    })
}

/// ns per blocking acquire+release on a lock of its own, from a plain thread
/// (`in_tasks` false), or from 2 `spawn_blocking` threads of `rt` at once,
/// each on a lock of its own (the mean of the two): what a blocking user
/// pays for the "may this thread block here?" check that tokio's blocking
/// methods make, and that hybrid-sync makes through them.
fn uncontended_blocking<P: Peer + 'static>(in_tasks: bool) -> Measure {
    fn run<P: Peer>(n: u64) -> f64 {
        let lock = P::new(0);
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(lock.blocking_write(|v| {
                *v += 1;
                *v
            }));
        }
        t.elapsed().as_nanos() as f64 / n as f64
    }
    Box::new(move |rt, n| {
        if !in_tasks {
            return run::<P>(n);
        }
        let n = n / 4;
        let per_thread: Vec<f64> = rt.block_on(async {
            let threads: Vec<_> = (0..2).map(|_| tokio::task::spawn_blocking(move || run::<P>(n))).collect();
            let mut out = Vec::new();
            for t in threads {
                out.push(t.await.unwrap());
            }
            out
        });
        per_thread.iter().sum::<f64>() / per_thread.len() as f64
    })
}

/// How many times the 2-core workloads are scaled up (`--scale`): worker
/// threads, tasks and threads alike; 1 on the 2-vCPU development VM.
static SCALE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

/// The runtime's worker threads in the async workloads: 2, times the scale.
fn workers() -> usize {
    2 * SCALE.load(Ordering::Relaxed)
}

/// `tasks` tasks on `workers` workers, each reading (`read_per_mille` in
/// 1000) or writing one lock in a loop, with a `yield_now` every
/// `yield_every` operations (0: never; the coop budget of tokio's and
/// hybrid-sync's locks still makes a task yield every 128 acquisitions).
fn async_contended<P: Peer>(tasks: usize, workers: usize, read_per_mille: u64, yield_every: u64, dur: Duration) -> Row {
    let lock = Arc::new(P::new(0));
    run_tasks(P::NAME, tasks, workers, dur, |i, stop| {
        let lock = lock.clone();
        async move {
            let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
            let mut hist = Hist::new();
            let mut ops = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let t0 = ticks();
                let t1 = if rng.next() % 1000 < read_per_mille {
                    lock.read(|v| {
                        let t = ticks();
                        std::hint::black_box(work(*v));
                        t
                    })
                    .await
                } else {
                    lock.write(|v| {
                        let t = ticks();
                        *v = work(*v);
                        t
                    })
                    .await
                };
                hist.record(t1.saturating_sub(t0));
                ops += 1;
                if yield_every > 0 && ops.is_multiple_of(yield_every) {
                    tokio::task::yield_now().await;
                }
            }
            (ops, hist)
        }
    })
}

/// Spawns `tasks` tasks from `task(index, stop)` on a `workers`-thread
/// runtime, lets them run for `dur`, and sums their (operations, latency).
fn run_tasks<F: std::future::Future<Output = (u64, Hist)> + Send + 'static>(
    name: &'static str,
    tasks: usize,
    workers: usize,
    dur: Duration,
    task: impl Fn(usize, Arc<AtomicBool>) -> F,
) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let usage = Usage::now();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks).map(|i| rt.spawn(task(i, stop.clone()))).collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let (ops, hist) = rt.block_on(async {
        let mut total = (0, Hist::new());
        for h in handles {
            let (ops, hist) = h.await.unwrap();
            total.0 += ops;
            total.1.merge(&hist);
        }
        total
    });
    let elapsed = start.elapsed();
    let (cpu, stolen) = usage.since();
    drop(rt);
    Row { name, ops, elapsed, cpu, stolen, hist, by_side: None, rounds: Vec::new() }
}

/// One OS thread's loop: blocking writes until `stop`.
fn blocking_writer<P: Peer>(lock: Arc<P>, stop: Arc<AtomicBool>) -> (u64, Hist) {
    let mut hist = Hist::new();
    let mut ops = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t0 = ticks();
        let t1 = lock.blocking_write(|v| {
            let t = ticks();
            *v = work(*v);
            t
        });
        hist.record(t1.saturating_sub(t0));
        ops += 1;
    }
    (ops, hist)
}

/// One task's loop: writes until `stop`, yielding every 16 operations.
async fn async_writer<P: Peer>(lock: Arc<P>, stop: Arc<AtomicBool>) -> (u64, Hist) {
    let mut hist = Hist::new();
    let mut ops = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let t0 = ticks();
        let t1 = lock
            .write(|v| {
                let t = ticks();
                *v = work(*v);
                t
            })
            .await;
        hist.record(t1.saturating_sub(t0));
        ops += 1;
        if ops.is_multiple_of(16) {
            tokio::task::yield_now().await;
        }
    }
    (ops, hist)
}

/// `threads` OS threads using the blocking API, all writes.
fn threads<P: Peer>(threads: usize, dur: Duration) -> Row {
    mixed::<P>(threads, 0, dur)
}

/// `nthreads` blocking threads and `tasks` tasks (on [`workers()`] workers) writing one lock.
fn mixed<P: Peer>(nthreads: usize, tasks: usize, dur: Duration) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers()).build().unwrap();
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let usage = Usage::now();
    let start = Instant::now();
    let task_handles: Vec<_> = (0..tasks).map(|_| rt.spawn(async_writer(lock.clone(), stop.clone()))).collect();
    let thread_handles: Vec<_> = (0..nthreads)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || blocking_writer(lock, stop))
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut sides = [(0, Hist::new()), (0, Hist::new())];
    for h in thread_handles {
        let (ops, hist) = h.join().unwrap();
        sides[0].0 += ops;
        sides[0].1.merge(&hist);
    }
    rt.block_on(async {
        for h in task_handles {
            let (ops, hist) = h.await.unwrap();
            sides[1].0 += ops;
            sides[1].1.merge(&hist);
        }
    });
    let elapsed = start.elapsed();
    // Idle runtime workers park: they add no CPU time to a threads-only run.
    drop(rt);
    let ops = sides[0].0 + sides[1].0;
    let mut hist = sides[0].1.clone();
    hist.merge(&sides[1].1);
    let by_side = (nthreads > 0 && tasks > 0).then_some(sides);
    let (cpu, stolen) = usage.since();
    Row { name: P::NAME, ops, elapsed, cpu, stolen, hist, by_side, rounds: Vec::new() }
}

/// `threads` OS threads and `tasks` tasks (on [`workers()`] workers) each taking and
/// dropping references to one count until `dur` is up; 1 in `lock_every`
/// operations (0: none) is a ~50 ns section under the count's lock instead.
/// `None` for a contender without a lock in the mixed case. Checks that the
/// count is back where it started.
fn refcount<P: RefCount>(threads: usize, tasks: usize, lock_every: u64, dur: Duration) -> Option<Row> {
    let count = Arc::new(P::new());
    if (lock_every > 0 && count.locked(&|| {}).is_none()) || (tasks > 0 && !P::IN_TASKS) {
        return None;
    }
    let before = count.count();
    let stop = Arc::new(AtomicBool::new(false));
    let body = move |count: &P, stop: &AtomicBool, yield_every: u64, ops: &mut u64| {
        let seed = *ops;
        let section = || {
            std::hint::black_box(work(seed));
        };
        for _ in 0..yield_every {
            *ops += 1;
            if lock_every > 0 && (*ops).is_multiple_of(lock_every) {
                count.locked(&section);
            } else {
                count.get_put();
            }
        }
        !stop.load(Ordering::Relaxed)
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers()).build().unwrap();
    let usage = Usage::now();
    let start = Instant::now();
    let task_handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (count, stop) = (count.clone(), stop.clone());
            rt.spawn(async move {
                let mut ops = 0;
                while body(&count, &stop, 64, &mut ops) {
                    tokio::task::yield_now().await;
                }
                ops
            })
        })
        .collect();
    let thread_handles: Vec<_> = (0..threads)
        .map(|_| {
            let (count, stop) = (count.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut ops = 0;
                while body(&count, &stop, 256, &mut ops) {}
                ops
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut ops: u64 = thread_handles.into_iter().map(|h| h.join().unwrap()).sum();
    ops += rt.block_on(async {
        let mut n = 0;
        for h in task_handles {
            n += h.await.unwrap();
        }
        n
    });
    let elapsed = start.elapsed();
    drop(rt);
    let (cpu, stolen) = usage.since();
    assert_eq!(count.count(), before, "{}: the count did not come back", P::NAME);
    Some(Row { name: P::NAME, ops, elapsed, cpu, stolen, hist: Hist::new(), by_side: None, rounds: Vec::new() })
}

fn print_refcount_table(title: &str, rows: &[Row]) {
    record(title, "get+put pairs/s", true, records(rows, false));
    let rate = |name: &str| rows.iter().find(|r| r.name == name).map(Row::ops_per_sec);
    let bases = [rate("AtomicU64"), rate("spinlock"), rate("parking_lot")];
    let ratio = |base: Option<f64>, r: &Row| base.map_or("-".into(), |b| format!("{:.2}x", r.ops_per_sec() / b));
    println!("\n== {title}");
    println!(
        "{:<16} {:>12} {:>10} {:>13} {:>12} {:>15}",
        "contender", "get+put/s", "CPU ns/op", "vs AtomicU64", "vs spinlock", "vs parking_lot"
    );
    for r in rows {
        println!(
            "{:<16} {:>12} {:>10.1} {:>13} {:>12} {:>15}",
            r.name,
            fmt_rate(r.ops_per_sec()),
            r.cpu_us_per_op() * 1000.0,
            ratio(bases[0], r),
            ratio(bases[1], r),
            ratio(bases[2], r)
        );
    }
}

// ---------------------------------------------------------------------------
// The seeds' experiments and the other issue-4 workloads
// ---------------------------------------------------------------------------

/// `tasks` tasks (on [`workers()`] workers), each holding its guard across
/// one `yield_now().await` per operation, `read_per_mille` of them reads:
/// the guard is held while the task is not running, so spinning for it
/// cannot pay. Only async peers.
fn hold_across_await<P: Peer>(tasks: usize, read_per_mille: u64, dur: Duration) -> Option<Row> {
    if !P::ASYNC {
        return None;
    }
    let lock = Arc::new(P::new(0));
    Some(run_tasks(P::NAME, tasks, workers(), dur, |i, stop| {
        let lock = lock.clone();
        async move {
            let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
            let (mut ops, mut hist) = (0u64, Hist::new());
            while !stop.load(Ordering::Relaxed) {
                let t0 = ticks();
                let t1 = if read_per_mille > 0 && rng.next() % 1000 < read_per_mille {
                    lock.read_across_yield(|v| {
                        std::hint::black_box(work(*v));
                        ticks()
                    })
                    .await
                } else {
                    lock.write_across_yield(|v| {
                        *v = work(*v);
                        ticks()
                    })
                    .await
                };
                hist.record(t1.saturating_sub(t0));
                ops += 1;
            }
            (ops, hist)
        }
    }))
}

/// Seed 000: `threads` threads hammer two locks at once, `shorts`
/// operations with a ~20 ns section on the short lock for each ~2 us one on
/// the long lock, with `between_ns` of work outside the locks after each
/// operation. Returns the (short, long) rows, named `name`.
fn two_locks<P: Peer>(name: &'static str, threads: usize, shorts: usize, between_ns: u64, dur: Duration) -> [Row; 2] {
    let (short, long) = (Arc::new(P::new(0)), Arc::new(P::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let usage = Usage::now();
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (short, long, stop) = (short.clone(), long.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut out = [(0u64, Hist::new()), (0u64, Hist::new())];
                while !stop.load(Ordering::Relaxed) {
                    for i in 0..=shorts {
                        let (lock, ns, k) = if i < shorts { (&short, 20, 0) } else { (&long, 2000, 1) };
                        let t0 = ticks();
                        let t1 = lock.blocking_write(|v| {
                            let t = ticks();
                            *v = work_ns(*v, ns);
                            t
                        });
                        out[k].1.record(t1.saturating_sub(t0));
                        out[k].0 += 1;
                        if between_ns > 0 {
                            std::hint::black_box(work_ns(t1, between_ns));
                        }
                    }
                }
                out
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut total = [(0u64, Hist::new()), (0u64, Hist::new())];
    for h in handles {
        for (t, o) in total.iter_mut().zip(h.join().unwrap()) {
            t.0 += o.0;
            t.1.merge(&o.1);
        }
    }
    let elapsed = start.elapsed();
    let (cpu, stolen) = usage.since();
    let [(s_ops, s_hist), (l_ops, l_hist)] = total;
    [
        Row { name, ops: s_ops, elapsed, cpu, stolen, hist: s_hist, by_side: None, rounds: Vec::new() },
        Row { name, ops: l_ops, elapsed, cpu, stolen, hist: l_hist, by_side: None, rounds: Vec::new() },
    ]
}

/// Seed 002's figures for one contender.
struct Fairness {
    name: &'static str,
    tight_ops: u64,
    slow_ops: u64,
    elapsed: Duration,
    cpu: Duration,
    /// As [`Row::stolen`].
    stolen: Duration,
    tight: Hist,
    slow: Hist,
}

/// Seed 002: `tight` threads in a tight acquire/release loop and one slow
/// thread that does ~1 us of work outside the lock between acquisitions.
fn fairness<P: Peer>(tight: usize, dur: Duration) -> Fairness {
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let usage = Usage::now();
    let start = Instant::now();
    let spawn = |outside_ns: u64| {
        let (lock, stop) = (lock.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut ops, mut hist, mut x) = (0u64, Hist::new(), 1u64);
            while !stop.load(Ordering::Relaxed) {
                if outside_ns > 0 {
                    x = work_ns(x, outside_ns);
                }
                let t0 = ticks();
                let t1 = lock.blocking_write(|v| {
                    let t = ticks();
                    *v = work(*v);
                    t
                });
                hist.record(t1.saturating_sub(t0));
                ops += 1;
            }
            std::hint::black_box(x);
            (ops, hist)
        })
    };
    let tights: Vec<_> = (0..tight).map(|_| spawn(0)).collect();
    let slow = spawn(1000);
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut f = Fairness {
        name: P::NAME,
        tight_ops: 0,
        slow_ops: 0,
        elapsed: Duration::ZERO,
        cpu: Duration::ZERO,
        stolen: Duration::ZERO,
        tight: Hist::new(),
        slow: Hist::new(),
    };
    for h in tights {
        let (ops, hist) = h.join().unwrap();
        f.tight_ops += ops;
        f.tight.merge(&hist);
    }
    (f.slow_ops, f.slow) = slow.join().unwrap();
    f.elapsed = start.elapsed();
    (f.cpu, f.stolen) = usage.since();
    f
}

/// Rows of several rounds, grouped by contender: each one's median round.
fn group_median(rows: Vec<Row>) -> Vec<Row> {
    let mut rows = Some(rows);
    median_rounds(1, &mut || rows.take().unwrap_or_default())
}

/// Several rounds of seed 002, grouped by contender: the round with the
/// median total throughput, with the worst waits of all rounds.
fn fairness_worst(rows: Vec<Fairness>) -> Vec<Fairness> {
    let mut groups: Vec<Vec<Fairness>> = Vec::new();
    for f in rows {
        match groups.iter_mut().find(|g| g[0].name == f.name) {
            Some(g) => g.push(f),
            None => groups.push(vec![f]),
        }
    }
    groups
        .into_iter()
        .map(|mut g| {
            let rate = |f: &Fairness| (f.tight_ops + f.slow_ops) as f64 / f.elapsed.as_secs_f64();
            g.sort_by(|a, b| rate(a).total_cmp(&rate(b)));
            let stolen = g.iter().map(|f| f.stolen).sum();
            let (mut tight, mut slow) = (Hist::new(), Hist::new());
            for f in &g {
                tight.merge(&f.tight);
                slow.merge(&f.slow);
            }
            let mid = g.len() / 2;
            let mut f = g.swap_remove(mid);
            (f.tight, f.slow, f.stolen) = (tight, slow, stolen);
            f
        })
        .collect()
}

fn print_fairness(title: &str, rows: &[Fairness]) {
    let tick = ns_per_tick();
    let total = |f: &Fairness| (f.tight_ops + f.slow_ops) as f64 / f.elapsed.as_secs_f64();
    let pl = rows.iter().find(|f| f.name == "parking_lot").map(total);
    println!("\n== {title}");
    println!(
        "{:<16} {:>10} {:>8} {:>12} {:>11} {:>13} {:>13} {:>11}",
        "contender", "total/s", "vs pl", "CPU us/op", "slow ops/s", "slow max wait", "tight max wait", "host stole"
    );
    for f in rows {
        println!(
            "{:<16} {:>10} {:>8} {:>12.3} {:>11} {:>13} {:>13} {:>11}",
            f.name,
            fmt_rate(total(f)),
            pl.map_or("-".into(), |p| format!("{:.2}x", total(f) / p)),
            f.cpu.as_secs_f64() * 1e6 / (f.tight_ops + f.slow_ops).max(1) as f64,
            fmt_rate(f.slow_ops as f64 / f.elapsed.as_secs_f64()),
            fmt_ns(f.slow.max as f64 * tick),
            fmt_ns(f.tight.max as f64 * tick),
            fmt_stolen(f.stolen),
        );
    }
    record(
        title,
        "ops/s (all threads)",
        true,
        rows.iter()
            .map(|f| report::Record {
                name: f.name.to_string(),
                value: total(f),
                cpu_ns_per_op: Some(f.cpu.as_secs_f64() * 1e9 / (f.tight_ops + f.slow_ops).max(1) as f64),
                p50_ns: None,
                p99_ns: Some(f.slow.quantile(0.99) as f64 * tick),
                max_ns: Some(f.slow.max as f64 * tick),
                stolen_ns: Some(f.stolen.as_nanos() as f64),
                rounds: Vec::new(),
            })
            .collect(),
    );
}

/// Command-line options.
struct Opts {
    full: bool,
    /// Run only workloads whose title contains one of these.
    only: Vec<String>,
    /// Run only contenders with these names.
    peers: Vec<String>,
    /// Print hybrid-sync's lock-event counters after each of its runs
    /// (needs `--features stats`).
    stats: bool,
    /// Write every table's figures here as JSON.
    json: Option<std::path::PathBuf>,
    /// Write one SVG bar chart per table into this directory.
    svg: Option<std::path::PathBuf>,
    /// Scale the 2-core workloads by this factor (`--scale`).
    scale: usize,
}

impl Opts {
    fn parse() -> Self {
        let mut o = Opts { full: false, only: vec![], peers: vec![], stats: false, json: None, svg: None, scale: 1 };
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--full" => o.full = true,
                "--stats" => o.stats = true,
                "--json" => o.json = Some(args.next().unwrap_or_else(|| usage_error("--json needs a file")).into()),
                "--svg" => o.svg = Some(args.next().unwrap_or_else(|| usage_error("--svg needs a directory")).into()),
                "--only" => o.only.extend(args.next().unwrap_or_default().split(',').map(String::from)),
                "--peers" => o.peers.extend(args.next().unwrap_or_default().split(',').map(String::from)),
                "--scale" => {
                    o.scale = match args.next().as_deref() {
                        // One step per two CPUs, as the 2-vCPU VM is step 1.
                        Some("auto") => (std::thread::available_parallelism().map_or(2, |n| n.get()) / 2).max(1),
                        Some(n) => n.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| {
                            usage_error(&format!("--scale needs a whole number of at least 1, or auto; got {n:?}"))
                        }),
                        None => usage_error("--scale needs a whole number of at least 1, or auto"),
                    }
                }
                "-h" | "--help" => {
                    println!(
                        "usage: showdown [--full] [--only WORKLOAD,..] [--peers NAME,..] [--stats] [--json FILE] [--svg DIR] \
                         [--scale N|auto]"
                    );
                    std::process::exit(0);
                }
                other => {
                    eprintln!("unknown argument {other:?} (try --help)");
                    std::process::exit(2);
                }
            }
        }
        o
    }
    fn workload(&self, title: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|w| title.contains(w.as_str()))
    }
    /// Whether to run the contender `name`: every one `--peers` names, or
    /// by default all but, in quick mode, parking_lot 0.12 (there beside
    /// the current parking_lot in `--full` runs, and whenever named).
    fn peer(&self, name: &str) -> bool {
        if self.peers.is_empty() {
            self.full || name != peers::ParkingLot012Mutex::NAME
        } else {
            self.peers.iter().any(|p| p == name)
        }
    }
}

/// The peers' versions, as the Cargo.lock this example was built with has
/// them: tables name a lock, and the lock changes with its releases
/// (parking_lot 0.13 dropped 0.12's eventual fairness).
fn peer_versions() -> String {
    const LOCK: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock"));
    let versions = |crate_name: &str| -> Vec<&str> {
        let name_line = format!("name = \"{crate_name}\"");
        let mut found: Vec<&str> = LOCK
            .split("[[package]]")
            .filter(|p| p.lines().any(|l| l.trim() == name_line))
            .filter_map(|p| p.lines().find_map(|l| l.trim().strip_prefix("version = \"")?.strip_suffix('"')))
            .collect();
        // Newest first, by number ("0.13.0" before "0.9.12").
        let key = |v: &str| v.split('.').map(|n| n.parse::<u64>().unwrap_or(0)).collect::<Vec<_>>();
        found.sort_unstable_by_key(|v| std::cmp::Reverse(key(v)));
        found
    };
    let named = |crate_name: &str| match versions(crate_name).as_slice() {
        [] => format!("{crate_name} (version unknown)"),
        [v] => format!("{crate_name} {v}"),
        [v, older @ ..] => {
            // An older release runs under its name and version ("parking_lot 0.12").
            let older: Vec<String> = older
                .iter()
                .map(|o| format!("{o} as \"{crate_name} {}\"", o.rsplit_once('.').map_or(*o, |(short, _)| short)))
                .collect();
            format!("{crate_name} {v} (and {})", older.join(", "))
        }
    };
    format!("{}, {}, {}; std of the Rust that built this", named("tokio"), named("async-lock"), named("parking_lot"))
}

fn usage_error(msg: &str) -> ! {
    eprintln!("{msg} (try --help)");
    std::process::exit(2);
}

/// Writes `--json` and `--svg` output, if asked for.
fn write_reports(opts: &Opts, machine: &str) {
    let tables = REPORT.lock().unwrap();
    if let Some(path) = &opts.json {
        match std::fs::write(path, report::json(machine, &tables)) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
    if let Some(dir) = &opts.svg {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("cannot create {}: {e}", dir.display());
            return;
        }
        for t in tables.iter() {
            let path = dir.join(format!("{}.svg", report::slug(&t.title)));
            if let Err(e) = report::svg(t, &path) {
                eprintln!("cannot draw {}: {e}", path.display());
            }
        }
        println!("{} charts written to {}", tables.len(), dir.display());
    }
}

fn print_stats(opts: &Opts, name: &str) {
    if !opts.stats || name != "hybrid-sync" {
        return;
    }
    let snap = hybrid_sync::stats::snapshot(true);
    let line: Vec<String> =
        hybrid_sync::stats::ALL.iter().zip(snap).filter(|(_, n)| *n > 0).map(|(e, n)| format!("{e:?}={n}")).collect();
    eprintln!("\r\x1b[2K    events: {}", line.join(" "));
    if let Some(lock) = peers::LAST_HYBRID_STATS.lock().unwrap().take() {
        eprintln!("    the lock: {lock}");
    }
}

/// The machine's own scheduling stalls: one thread per CPU spins on the
/// clock for `dur`, nothing else running, and the longest gap between two
/// of its readings is time its (virtual) CPU was taken away from it. On a
/// shared VM this reaches several milliseconds, and any wait that spans such
/// a gap (the holder's CPU paused inside its critical section, or the
/// waiter's own) includes it, whatever the lock: it is a floor under every
/// "max wait" figure of the run.
fn cpu_stall_floor(dur: Duration) -> Duration {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinners: Vec<_> = (0..cpus)
        .map(|_| {
            std::thread::spawn(move || {
                let start = Instant::now();
                let (mut last, mut max) = (start, Duration::ZERO);
                while last - start < dur {
                    let now = Instant::now();
                    max = max.max(now - last);
                    last = now;
                }
                max
            })
        })
        .collect();
    spinners.into_iter().map(|h| h.join().unwrap()).max().unwrap_or_default()
}

/// The CPU's model name, from `/proc/cpuinfo` (Linux); `None` elsewhere.
/// The same VM image has run on AMD and Intel hosts, and a lock's figures
/// depend on which (see `line_transfer`).
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// How long a cache line written on one CPU takes to reach a thread that
/// waits for it on another: half a ping-pong round trip between two
/// threads, the fastest of up to 50 batches of 1,000 within about 200 ms.
/// Every contended lock operation waits for the lock word's line, so this
/// sets the price of contention (about 80-100 ns on the Intel host of
/// 2026-12-02). `None` on one CPU.
fn line_transfer() -> Option<Duration> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    const TRIPS: u64 = 1_000;
    const STOP: u64 = u64::MAX;
    let ball = Arc::new(AtomicU64::new(0));
    let other = {
        let ball = ball.clone();
        // Answers each odd value with the next even one, until STOP.
        std::thread::spawn(move || {
            loop {
                let v = ball.load(Ordering::Acquire);
                if v == STOP {
                    break;
                }
                if v % 2 == 1 {
                    ball.store(v + 1, Ordering::Release);
                } else {
                    std::hint::spin_loop();
                }
            }
        })
    };
    let deadline = Instant::now() + Duration::from_millis(200);
    let (mut best, mut v) = (None::<Duration>, 0);
    for _ in 0..50 {
        let start = Instant::now();
        for _ in 0..TRIPS {
            v += 2;
            ball.store(v - 1, Ordering::Release);
            while ball.load(Ordering::Acquire) != v {
                std::hint::spin_loop();
            }
        }
        let trip = start.elapsed() / (2 * TRIPS as u32);
        best = Some(best.map_or(trip, |b| b.min(trip)));
        if Instant::now() > deadline {
            break;
        }
    }
    ball.store(STOP, Ordering::Release);
    other.join().unwrap();
    best
}

fn progress(what: &str) {
    use std::io::Write;
    eprint!("\r\x1b[2K  running: {what}");
    let _ = std::io::stderr().flush();
}

fn main() {
    let opts = Opts::parse();
    SCALE.store(opts.scale, Ordering::Relaxed);
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    if opts.scale > 1 && cpus < 2 * opts.scale {
        eprintln!(
            "note: --scale {} sizes the workloads for {} CPUs; this machine has {cpus}, so the titles' \
             core counts are not this machine's",
            opts.scale,
            2 * opts.scale
        );
    }
    let full = opts.full;
    // Quick mode's rounds are short enough for the whole run to stay under a
    // minute with the async tight loop table in it (300 ms rounds took
    // 58.5-60.3 s on the development VM).
    let dur = if full { Duration::from_secs(1) } else { Duration::from_millis(250) };
    // Operations per contender and round: 30 M in all (6 M quick).
    let n_uncontended = if full { 6_000_000 } else { 1_200_000 };

    let handoff_override =
        std::env::var("SHOWDOWN_HANDOFF_US").ok().and_then(|v| v.parse().ok()).map(Duration::from_micros);
    hybrid_sync::__testing::set_handoff_timeout(handoff_override);
    calibrate_work(50.0);
    let _ = ns_per_tick();
    println!("hybrid-sync showdown ({} mode)", if full { "full" } else { "quick" });
    progress("measuring the machine's scheduling stalls");
    let stall = cpu_stall_floor(if full { Duration::from_secs(2) } else { Duration::from_millis(300) });
    let transfer_at_start = line_transfer();
    let transfer = transfer_at_start
        .map_or(String::new(), |t| format!(", a cache line crosses between two in {} ns", t.as_nanos()));
    eprint!("\r\x1b[2K");
    let scaled = match opts.scale {
        1 => String::new(),
        k => format!("; workloads scaled x{k} (--scale)"),
    };
    let machine = format!(
        "{cpus} CPUs ({}{transfer}); critical section ~50 ns ({} multiply-adds); stall floor {:.2} ms; {}{scaled}",
        cpu_model().unwrap_or_else(|| "model unknown".into()),
        WORK_ITERS.load(Ordering::Relaxed),
        stall.as_secs_f64() * 1e3,
        hybrid_sync::tuning()
    );
    println!("machine: {machine}");
    let peers = peer_versions();
    println!("peers: {peers}");
    let machine = format!("{machine}; peers: {peers}");
    if let Some(path) = &opts.json {
        let _ = JSON_SO_FAR.set((path.clone(), machine.clone()));
    }
    println!(
        "stall floor: the longest a thread spinning alone on each CPU went unscheduled in {} ms, before any \
         workload ran; a max wait below that spans such a stall includes it, whatever the lock",
        if full { 2000 } else { 300 }
    );
    if has_steal_clock() {
        println!(
            "host stole: CPU time the hypervisor took from the vCPUs during a contender's rounds (/proc/stat's \
             steal, in 10 ms ticks, every round and vCPU summed); a max wait of that order may be the host's, \
             whatever the lock"
        );
    }
    let (run_start, run_usage) = (Instant::now(), Usage::now());

    if opts.workload("uncontended") {
        println!(
            "\n== uncontended: one task, acquire + release (ns per op, best of {UNCONTENDED_ROUNDS} interleaved rounds)"
        );
        println!("{:<16} {:>12} {:>12} {:>12} {:>16}", "contender", "read", "write", "mutex lock", "vs tokio r/w/m");
        // Every contender once per round, so that each meets the VM's fast
        // and slow phases alike (they last seconds here, and a best-of-3
        // per contender run back to back compared one phase with another).
        let cell = |measure: Measure| (measure, f64::MAX);
        let mut rw = Vec::new();
        for_each_rwlock!(P => if opts.peer(P::NAME) {
            rw.push((P::NAME, cell(uncontended::<P>(false)), cell(uncontended::<P>(true))))
        });
        let mut mutex = Vec::new();
        for_each_mutex!(P => if opts.peer(P::NAME) { mutex.push(cell(uncontended::<P>(true))) });
        let mut charge = [cell(coop_charge(false)), cell(coop_charge(true))];
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for round in 1..=UNCONTENDED_ROUNDS {
            progress(&format!("uncontended, round {round} of {UNCONTENDED_ROUNDS}"));
            let cells = rw.iter_mut().flat_map(|(_, r, w)| [r, w]).chain(&mut mutex).chain(&mut charge);
            for (measure, best) in cells {
                *best = best.min(measure(&rt, n_uncontended));
            }
        }
        let rows: Vec<_> = rw.iter().map(|(name, r, w)| (*name, r.1, w.1)).collect();
        let mutex: Vec<f64> = mutex.iter().map(|m| m.1).collect();
        let (charge, pl_charged) = (charge[0].1, charge[1].1);
        eprint!("\r\x1b[2K");
        record(
            "uncontended read: RwLock read + release, one task",
            "ns per acquire+release",
            false,
            rows.iter().map(|(n, r, _)| value_cell(n, *r)).collect(),
        );
        record(
            "uncontended write: RwLock write + release, one task",
            "ns per acquire+release",
            false,
            rows.iter().map(|(n, _, w)| value_cell(n, *w)).collect(),
        );
        record(
            "uncontended lock: Mutex lock + release, one task",
            "ns per acquire+release",
            false,
            rows.iter().zip(&mutex).map(|((n, _, _), m)| value_cell(n, *m)).collect(),
        );
        let tokio = rows.iter().position(|(name, _, _)| *name == "tokio");
        for ((name, r, w), m) in rows.iter().zip(&mutex) {
            let ratios =
                tokio.map_or("-".into(), |t| format!("{:.2}/{:.2}/{:.2}", r / rows[t].1, w / rows[t].2, m / mutex[t]));
            println!("{name:<16} {r:>9.1} ns {w:>9.1} ns {m:>9.1} ns {ratios:>16}");
        }
        println!(
            "tokio's coop charge, which every acquisition in a tokio task pays (tokio's locks and hybrid-sync's \
             alike): {charge:.1} ns alone, {pl_charged:.1} ns with a parking_lot read beside it"
        );
        record(
            "uncontended: tokio's coop charge per acquisition",
            "ns per charge",
            false,
            vec![value_cell("coop charge", charge), value_cell("parking_lot read + charge", pl_charged)],
        );
    }

    if opts.workload("uncontended blocking") {
        println!(
            "\n== uncontended blocking: Mutex lock + release, on a plain thread and from 2 spawn_blocking \
             threads at once, each on a lock of its own (ns per op, best of {UNCONTENDED_ROUNDS} interleaved rounds)"
        );
        println!("{:<16} {:>14} {:>16}", "contender", "plain thread", "spawn_blocking");
        let mut cells = Vec::new();
        for_each_mutex!(P => if opts.peer(P::NAME) {
            cells.push((P::NAME, [(uncontended_blocking::<P>(false), f64::MAX), (uncontended_blocking::<P>(true), f64::MAX)]));
        });
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        for round in 1..=UNCONTENDED_ROUNDS {
            progress(&format!("uncontended blocking, round {round} of {UNCONTENDED_ROUNDS}"));
            for (measure, best) in cells.iter_mut().flat_map(|(_, c)| c.iter_mut()) {
                *best = best.min(measure(&rt, n_uncontended));
            }
        }
        eprint!("\r\x1b[2K");
        for (name, [(_, plain), (_, pool)]) in &cells {
            println!("{name:<16} {plain:>11.1} ns {pool:>13.1} ns");
        }
        record(
            "uncontended blocking: Mutex lock + release on a plain thread",
            "ns per acquire+release",
            false,
            cells.iter().map(|(n, [(_, plain), _])| value_cell(n, *plain)).collect(),
        );
        record(
            "uncontended blocking: Mutex lock + release from 2 spawn_blocking threads",
            "ns per acquire+release",
            false,
            cells.iter().map(|(n, [_, (_, pool)])| value_cell(n, *pool)).collect(),
        );
    }

    // Contended workloads run every contender once per round, round-robin,
    // and report each contender's median round: the machine is shared and
    // noisy, and interleaving spreads slow spells over everyone.
    let rounds = if full { 5 } else { 3 };
    let table_with = |title: &str, print: fn(&str, &[Row]), run: &mut dyn FnMut() -> Vec<Row>| {
        if !opts.workload(title) {
            return;
        }
        let rows = median_rounds(rounds, run);
        eprint!("\r\x1b[2K");
        print(title, &rows);
    };
    let table = |title: &str, run: &mut dyn FnMut() -> Vec<Row>| table_with(title, print_table, run);
    let table_seed = |title: &str, run: &mut dyn FnMut() -> Vec<Row>| {
        if !opts.workload(title) {
            return;
        }
        let rows = median_rounds(if full { 3 } else { 1 }, run);
        eprint!("\r\x1b[2K");
        print_table(title, &rows);
    };
    macro_rules! rows {
        ($each:ident, $label:expr, |$p:ident| $run:expr) => {{
            let mut rows = Vec::new();
            $each!($p => {
                if opts.peer($p::NAME) {
                    progress(&format!("{} {}", $label, $p::NAME));
                    let _ = hybrid_sync::stats::snapshot(true);
                    rows.push($run);
                    print_stats(&opts, $p::NAME);
                }
            });
            rows
        }};
    }

    // The 2-core workloads' counts, times the scale (`--scale`): at 1 these
    // are the figures in the titles below as they read on the 2-vCPU VM.
    let k = SCALE.load(Ordering::Relaxed);
    let (w, tasks) = (workers(), 64 * k);
    let write_heavy = format!("async write-heavy: {tasks} tasks on {w} workers, 100% writes (RwLock)");
    let read_heavy = format!("async read-heavy: {tasks} tasks on {w} workers, 90% reads (RwLock)");
    table(&write_heavy, &mut || {
        rows!(for_each_rwlock, "async write-heavy", |P| async_contended::<P>(tasks, w, 0, 16, dur))
    });
    table(&read_heavy, &mut || {
        rows!(for_each_rwlock, "async read-heavy", |P| async_contended::<P>(tasks, w, 900, 16, dur))
    });
    let tight = 16 * k;
    table(
        &format!("async tight loop: {tight} tasks on {w} workers, 90% reads, no yield between operations (RwLock)"),
        &mut || rows!(for_each_rwlock, "async tight loop", |P| async_contended::<P>(tight, w, 900, 0, dur)),
    );
    let oversubscribed = 32 * k;
    table(&format!("threads: {oversubscribed} threads on {w} cores, blocking API (Mutex)"), &mut || {
        rows!(for_each_mutex, &format!("{oversubscribed} threads"), |P| threads::<P>(oversubscribed, dur))
    });
    table(
        &format!("mixed: {} blocking threads + {} tasks on {w} workers, one lock (Mutex)", 4 * k, 32 * k),
        &mut || rows!(for_each_mutex, "mixed", |P| mixed::<P>(4 * k, 32 * k, dur)),
    );

    table(&format!("threads: {w} threads on {w} cores, blocking API (Mutex)"), &mut || {
        rows!(for_each_mutex, &format!("{w} threads"), |P| threads::<P>(w, dur))
    });
    table(&format!("threads: {} threads on {w} cores, blocking API (Mutex)", 8 * k), &mut || {
        rows!(for_each_mutex, &format!("{} threads", 8 * k), |P| threads::<P>(8 * k, dur))
    });
    for (title, label, read_per_mille) in [
        (
            format!("async hold across .await: {tasks} tasks on {w} workers, write guard held over a yield (RwLock)"),
            "hold across .await",
            0,
        ),
        (
            format!(
                "async hold across .await (90% reads): {tasks} tasks on {w} workers, guard held over a yield (RwLock)"
            ),
            "hold across .await, 90% reads",
            900,
        ),
    ] {
        table(&title, &mut || {
            let mut rows = Vec::new();
            for_each_rwlock!(P => {
                if opts.peer(P::NAME) && P::ASYNC {
                    progress(&format!("{label} {}", P::NAME));
                    let _ = hybrid_sync::stats::snapshot(true);
                    rows.extend(hold_across_await::<P>(tasks, read_per_mille, dur));
                    print_stats(&opts, P::NAME);
                }
            });
            rows
        });
    }

    // The seeds' experiments: fewer rounds in quick mode, to stay under a minute.
    let seed_rounds = if full { 3 } else { 1 };
    let seed_dur = if full { Duration::from_secs(1) } else { Duration::from_millis(150) };

    // The two async tables again, on one worker: every lock with its cache
    // line kept on one CPU. The issues' 3x and 3.5x tokio are read against
    // tokio on two workers; the line under each table puts that figure
    // beside the best rate here.
    let one_worker = [
        (
            format!("one worker, write-heavy: the same {tasks} tasks on 1 worker, 100% writes (RwLock)"),
            &write_heavy,
            0,
            3.0,
        ),
        (
            format!("one worker, read-heavy: the same {tasks} tasks on 1 worker, 90% reads (RwLock)"),
            &read_heavy,
            900,
            3.5,
        ),
    ];
    for (title, two_workers, read_per_mille, times_tokio) in one_worker {
        if !opts.workload(&title) {
            continue;
        }
        let rows = median_rounds(seed_rounds, &mut || {
            rows!(for_each_rwlock, "one worker", |P| async_contended::<P>(tasks, 1, read_per_mille, 16, seed_dur))
        });
        eprint!("\r\x1b[2K");
        print_table(&title, &rows);
        let tokio_on_two = REPORT
            .lock()
            .unwrap()
            .iter()
            .filter(|t| t.title == *two_workers)
            .flat_map(|t| &t.rows)
            .find(|r| r.name == "tokio")
            .map(|r| r.value);
        let best = rows.iter().max_by(|a, b| a.ops_per_sec().total_cmp(&b.ops_per_sec()));
        if let (Some(tokio), Some(best)) = (tokio_on_two, best) {
            println!(
                "{times_tokio}x tokio's {} on {w} workers is {}: {:.2}x the best rate on one worker ({}'s {})",
                fmt_rate(tokio),
                fmt_rate(times_tokio * tokio),
                times_tokio * tokio / best.ops_per_sec(),
                best.name,
                fmt_rate(best.ops_per_sec()),
            );
        }
    }

    // (title, name of its tables, short operations per long one, work between operations)
    let hammers = 4 * k;
    let seed000 = [
        (
            format!("seed 000: two locks, {hammers} threads, 8 ops on a ~20 ns lock per op on a ~2 us lock (Mutex)"),
            "seed 000",
            8,
            0,
        ),
        (
            format!(
                "seed 000 (b): two locks, {hammers} threads, 32 ops on a ~20 ns lock per op on a ~2 us lock, ~100 ns of \
                 work after each (Mutex)"
            ),
            "seed 000 (b)",
            32,
            100,
        ),
    ];
    for (title, tag, shorts, between) in seed000 {
        if !opts.workload(&title) {
            continue;
        }
        let (mut short, mut long) = (Vec::new(), Vec::new());
        let mut run = |name: &'static str, f: &dyn Fn() -> [Row; 2]| {
            progress(&format!("{tag} {name}"));
            let [s, l] = f();
            short.push(s);
            long.push(l);
        };
        for _ in 0..seed_rounds {
            run("hybrid-sync", &|| two_locks::<peers::HybridMutex>("hybrid-sync", hammers, shorts, between, seed_dur));
            run("one delay", &|| {
                hybrid_sync::__testing::set_per_address_backoff(false);
                let rows = two_locks::<peers::HybridMutex>("hybrid 1-delay", hammers, shorts, between, seed_dur);
                hybrid_sync::__testing::set_per_address_backoff(true);
                rows
            });
            run("parking_lot", &|| {
                two_locks::<peers::ParkingLotMutex>("parking_lot", hammers, shorts, between, seed_dur)
            });
            if opts.peer(peers::ParkingLot012Mutex::NAME) {
                run("parking_lot 0.12", &|| {
                    two_locks::<peers::ParkingLot012Mutex>("parking_lot 0.12", hammers, shorts, between, seed_dur)
                });
            }
            run("std", &|| two_locks::<peers::StdMutex>("std", hammers, shorts, between, seed_dur));
        }
        eprint!("\r\x1b[2K");
        print_table(&format!("{tag}, the short lock (~20 ns section)"), &group_median(short));
        print_table(&format!("{tag}, the long lock (~2 us section)"), &group_median(long));
    }

    for tight in [1, 4 * k] {
        let title = format!("seed 002: fairness, {tight} tight thread(s) + 1 slow one (1 us outside the lock) (Mutex)");
        if !opts.workload(&title) {
            continue;
        }
        let mut all: Vec<Fairness> = Vec::new();
        for _ in 0..seed_rounds {
            for_each_mutex!(P => {
                if opts.peer(P::NAME) {
                    progress(&format!("seed 002 {}", P::NAME));
                    all.push(fairness::<P>(tight, seed_dur));
                }
            });
        }
        eprint!("\r\x1b[2K");
        print_fairness(&title, &fairness_worst(all));
    }

    let title003 = format!(
        "seed 003: {oversubscribed} threads, handoff timeout 50 us: CPU per op with spinners leaving on handoff or not \
         (Mutex)"
    );
    if opts.workload(&title003) {
        // Spin time under a pending handoff, per run, keyed by the run's
        // contender and op count (the median round keeps both).
        let mut burnt: Vec<(&'static str, u64, Duration)> = Vec::new();
        let rows = median_rounds(seed_rounds, &mut || {
            use hybrid_sync::__testing as t;
            t::set_handoff_timeout(Some(Duration::from_micros(50)));
            t::measure_handoff_spin(true);
            progress("seed 003 hybrid-sync");
            let _ = t::take_handoff_spin();
            let default = threads::<peers::HybridMutex>(oversubscribed, seed_dur);
            burnt.push((default.name, default.ops, t::take_handoff_spin()));
            // With the crowd rule newcomers do not spin at all here; without
            // it they do, and leave when the handoff bit is set...
            progress("seed 003 without the crowd rule");
            t::set_crowd_rule(false);
            let mut fixed = threads::<peers::HybridMutex>(oversubscribed, seed_dur);
            fixed.name = "no crowd rule";
            burnt.push((fixed.name, fixed.ops, t::take_handoff_spin()));
            // ...or, broken, spin on through it.
            progress("seed 003 spinning through handoff");
            t::set_spin_through_handoff(true);
            let mut broken = threads::<peers::HybridMutex>(oversubscribed, seed_dur);
            t::set_spin_through_handoff(false);
            t::set_crowd_rule(true);
            broken.name = "spins on (bug)";
            burnt.push((broken.name, broken.ops, t::take_handoff_spin()));
            t::measure_handoff_spin(false);
            t::set_handoff_timeout(handoff_override);
            progress("seed 003 parking_lot");
            let mut rows = vec![default, fixed, broken, threads::<peers::ParkingLotMutex>(oversubscribed, seed_dur)];
            if opts.peer(peers::ParkingLot012Mutex::NAME) {
                progress("seed 003 parking_lot 0.12");
                rows.push(threads::<peers::ParkingLot012Mutex>(oversubscribed, seed_dur));
            }
            rows
        });
        eprint!("\r\x1b[2K");
        print_table(&title003, &rows);
        let spin_rows: Vec<(&str, f64)> = rows
            .iter()
            .filter_map(|r| {
                let (_, _, d) = burnt.iter().find(|(name, ops, _)| *name == r.name && *ops == r.ops)?;
                Some((r.name, d.as_nanos() as f64 / r.ops.max(1) as f64))
            })
            .collect();
        print_handoff_spin(&spin_rows);
    }

    for n in [10, 100, 1000] {
        let title = format!("seed 004: {n} threads, blocking API, against a lock that never spins (Mutex)");
        table_seed(&title, &mut || {
            let mut rows = Vec::new();
            macro_rules! one {
                ($p:ty) => {
                    if opts.peer(<$p>::NAME) {
                        progress(&format!("seed 004 {n} threads {}", <$p>::NAME));
                        let _ = hybrid_sync::stats::snapshot(true);
                        rows.push(threads::<$p>(n, seed_dur));
                        print_stats(&opts, <$p>::NAME);
                    }
                };
            }
            one!(peers::HybridMutex);
            one!(peers::PlainParking);
            one!(peers::ParkingLotMutex);
            one!(peers::ParkingLot012Mutex);
            one!(peers::StdMutex);
            rows
        });
        let title = format!("seed 004: {n} tasks on {w} workers (Mutex)");
        table_seed(&title, &mut || {
            let mut rows = Vec::new();
            for_each_mutex!(P => {
                if opts.peer(P::NAME) && P::NAME != "std" {
                    progress(&format!("seed 004 {n} tasks {}", P::NAME));
                    let _ = hybrid_sync::stats::snapshot(true);
                    rows.push(mixed::<P>(0, n, seed_dur));
                    print_stats(&opts, P::NAME);
                }
            });
            rows
        });
    }

    // Seed 001: reference counts. Same rounds and medians as above.
    // Counting is fast and steady: shorter runs do in quick mode.
    let refcount_dur = if full { dur } else { Duration::from_millis(100) };
    let refcounts = |title: &str, threads: usize, tasks: usize, lock_every: u64| {
        table_with(title, print_refcount_table, &mut || {
            let mut rows = Vec::new();
            for_each_refcount!(P => {
                if opts.peer(P::NAME) {
                    progress(&format!("{title} {}", P::NAME));
                    rows.extend(refcount::<P>(threads, tasks, lock_every, refcount_dur));
                }
            });
            rows
        })
    };
    refcounts(&format!("refcount: {w} threads, get+put of one shared count"), w, 0, 0);
    refcounts(&format!("refcount: {tasks} tasks on {w} workers, get+put of one shared count"), 0, tasks, 0);
    refcounts(&format!("refcount mixed: {w} threads, 1 in 1000 operations takes the lock (~50 ns)"), w, 0, 1000);
    println!();
    // The crossing is not fixed for a run: on the 2-vCPU VM it measured 145
    // ns at the start of one run and 30-34 ns in quick runs minutes before
    // and after (where the host places the two vCPUs). Measuring it again
    // here shows whether it moved while the tables ran.
    let mut machine = machine;
    if let (Some(start), Some(end)) = (transfer_at_start, line_transfer()) {
        println!(
            "a cache line crosses between two CPUs in {} ns at the end of the run ({} ns at the start){}",
            end.as_nanos(),
            start.as_nanos(),
            if end.as_nanos().abs_diff(start.as_nanos()) * 2 > start.as_nanos() {
                ": it moved while the tables ran, and every contended table with it"
            } else {
                ""
            }
        );
        machine += &format!("; a cache line crosses in {} ns at the end of the run", end.as_nanos());
    }
    if has_steal_clock() {
        let (wall, (_, stolen)) = (run_start.elapsed(), run_usage.since());
        println!(
            "the host stole {} of the vCPUs' time in this run: {:.2}% of {cpus} CPUs for {:.0} s",
            fmt_stolen(stolen),
            100.0 * stolen.as_secs_f64() / (wall.as_secs_f64() * cpus.max(1) as f64),
            wall.as_secs_f64()
        );
    }
    write_reports(&opts, &machine);
}
