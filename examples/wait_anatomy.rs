//! Where the worst waits come from: the showdown's maximum-wait columns,
//! taken apart.
//!
//! ```text
//! cargo run --release --example wait_anatomy              # 3 rounds of 2 s per workload
//! cargo run --release --example wait_anatomy -- --secs 5 --rounds 5 --peers hybrid-sync,parking_lot
//! ```
//!
//! On a shared VM a thread can lose its CPU for milliseconds at any moment
//! (the showdown's "stall floor"). A waiter then waits that long, whatever
//! the lock, in two ways this example measures separately:
//!
//! * **longest hold**: the longest critical section of the run, from a clock
//!   read as it starts to one as it ends. The section is ~50 ns of work, so
//!   anything long is a holder whose CPU was taken away inside it, and
//!   everyone queued behind it waited at least that long.
//! * **less run-queue** (Linux; seed 002's slow thread, and every thread of
//!   the 32-thread run): each of its waits
//!   less the time the kernel says it spent runnable without a CPU meanwhile
//!   (`/proc/thread-self/schedstat`, read just before and just after each
//!   acquisition). What is left is time it spun or slept while others held
//!   the lock: the lock's doing, or a holder's stall (see above).
//!
//! The measurements cost time inside the loops (a clock read inside each
//! section, two ~0.75 us reads of schedstat around each measured
//! acquisition), enough to move the throughput ratios, which is
//! why they are here and not in the showdown: read the waits from this
//! example, the throughputs from the showdown.
//!
//! Workloads, as in the showdown: seed 002 with 1 and 4 tight threads and
//! one slow one (1 us of work outside the lock), and 32 threads on the
//! blocking API, each with a ~50 ns critical section.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "common/clock.rs"]
mod clock;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/work.rs"]
mod work;
use clock::{ns_per_tick, ticks};
use peers::Peer;
use work::{calibrate_work, work, work_ns};

/// The calling thread's time spent runnable without a CPU, in ns (the second
/// field of Linux's schedstat); `None` elsewhere.
struct RunQueue(std::fs::File);

impl RunQueue {
    fn open() -> Option<Self> {
        let rq = RunQueue(std::fs::File::open("/proc/thread-self/schedstat").ok()?);
        rq.read().map(|_| rq)
    }
    fn read(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n]).ok()?.split_whitespace().nth(1)?.parse().ok()
    }
}

/// One thread's figures, in ns.
#[derive(Clone, Copy, Default)]
struct Waits {
    ops: u64,
    max_wait: u64,
    /// The longest wait less the run-queue time inside it (`None`: not
    /// measured).
    max_own: Option<u64>,
    /// Waits over the table's bound, and how many of them are within it
    /// once the run-queue time is taken out.
    over: u64,
    over_runq: u64,
    longest_hold: u64,
}

impl Waits {
    fn merge(&mut self, o: &Waits) {
        self.ops += o.ops;
        self.max_wait = self.max_wait.max(o.max_wait);
        self.max_own = match (self.max_own, o.max_own) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.over += o.over;
        self.over_runq += o.over_runq;
        self.longest_hold = self.longest_hold.max(o.longest_hold);
    }
}

/// A thread that acquires the write lock until `stop`, with `outside_ns` of
/// work between acquisitions; with `runq`, it reads its run-queue time
/// around each acquisition. Waits over `bound_ns` are counted.
fn contender<P: Peer>(lock: &P, stop: &AtomicBool, outside_ns: u64, runq: bool, bound_ns: u64) -> Waits {
    let tick = ns_per_tick();
    let rq = if runq { RunQueue::open() } else { None };
    let mut w = Waits { max_own: rq.as_ref().map(|_| 0), ..Waits::default() };
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        if outside_ns > 0 {
            x = work_ns(x, outside_ns);
        }
        let q0 = rq.as_ref().and_then(RunQueue::read);
        let t0 = ticks();
        let mut end = 0;
        let start = lock.blocking_write(|v| {
            let t = ticks();
            *v = work(*v);
            end = ticks();
            t
        });
        let wait = (start.saturating_sub(t0) as f64 * tick) as u64;
        w.max_wait = w.max_wait.max(wait);
        w.longest_hold = w.longest_hold.max((end.saturating_sub(start) as f64 * tick) as u64);
        let own = match (q0, rq.as_ref().and_then(RunQueue::read)) {
            (Some(q0), Some(q1)) => Some(wait.saturating_sub(q1.saturating_sub(q0))),
            _ => None,
        };
        if let (Some(max), Some(own)) = (&mut w.max_own, own) {
            *max = (*max).max(own);
        }
        if wait > bound_ns {
            w.over += 1;
            w.over_runq += u64::from(own.is_some_and(|o| o <= bound_ns));
        }
        w.ops += 1;
    }
    std::hint::black_box(x);
    w
}

/// `tight` threads in a tight loop and, if `slow`, one more with 1 us of
/// work outside the lock (which alone reads its run-queue time; without a
/// slow thread, every thread does). Returns (tight threads, slow thread,
/// elapsed).
fn run<P: Peer>(tight: usize, slow: bool, bound_ns: u64, dur: Duration) -> (Waits, Waits, Duration) {
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let spawn = |outside_ns: u64| {
        let (lock, stop) = (lock.clone(), stop.clone());
        let runq = outside_ns > 0 || !slow;
        std::thread::spawn(move || contender(&*lock, &stop, outside_ns, runq, bound_ns))
    };
    let start = Instant::now();
    let tights: Vec<_> = (0..tight).map(|_| spawn(0)).collect();
    let slow = slow.then(|| spawn(1000));
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut t = Waits::default();
    for h in tights {
        t.merge(&h.join().unwrap());
    }
    let s = slow.map(|h| h.join().unwrap()).unwrap_or_default();
    (t, s, start.elapsed())
}

fn ms(ns: u64) -> String {
    if ns >= 1_000_000 { format!("{:.2} ms", ns as f64 / 1e6) } else { format!("{:.1} us", ns as f64 / 1e3) }
}

fn table<P: Peer>(tight: usize, slow: bool, bound_ns: u64, dur: Duration, rounds: usize) {
    let (mut t, mut s, mut elapsed) = (Waits::default(), Waits::default(), Duration::ZERO);
    for _ in 0..rounds {
        let (rt, rs, e) = run::<P>(tight, slow, bound_ns, dur);
        t.merge(&rt);
        s.merge(&rs);
        elapsed += e;
    }
    let rate = (t.ops + s.ops) as f64 / elapsed.as_secs_f64() / 1e6;
    let hold = t.longest_hold.max(s.longest_hold);
    // With a slow thread, its waits are the measured ones and the tight
    // threads' worst wait gets a column of its own.
    let (measured, tight_max) = if slow { (&s, format!(" {:>13}", ms(t.max_wait))) } else { (&t, String::new()) };
    println!(
        "{:<13} {:>8.2} M {:>13} {:>13} {:>16}{tight_max} {:>13}",
        P::NAME,
        rate,
        ms(measured.max_wait),
        measured.max_own.map_or("-".into(), ms),
        format!("{} / {}", measured.over_runq, measured.over),
        ms(hold)
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut secs, mut rounds, mut peers) = (2u64, 3usize, vec![]);
    while let Some(a) = args.next() {
        let mut value = |what: &str| args.next().unwrap_or_else(|| panic!("{a} needs {what}"));
        match a.as_str() {
            "--secs" => secs = value("a number of seconds").parse().expect("--secs: not a number"),
            "--rounds" => rounds = value("a number of rounds").parse().expect("--rounds: not a number"),
            "--peers" => peers = value("a list of names").split(',').map(String::from).collect(),
            other => panic!("unknown argument {other:?} (--secs N, --rounds N, --peers a,b)"),
        }
    }
    const KNOWN: [&str; 3] = ["hybrid-sync", "parking_lot", "std"];
    if let Some(p) = peers.iter().find(|p| !KNOWN.contains(&p.as_str())) {
        panic!("--peers: unknown contender {p:?} (known: {})", KNOWN.join(", "));
    }
    let want = |name: &str| peers.is_empty() || peers.iter().any(|p| p == name);
    calibrate_work(50.0);
    let dur = Duration::from_secs(secs);
    println!("wait anatomy: {rounds} round(s) of {secs} s per workload; worst figures of all rounds");
    // Every wanted contender, in the table just printed.
    let contenders = |tight: usize, slow: bool, bound_ns: u64| {
        if want("hybrid-sync") {
            table::<peers::HybridMutex>(tight, slow, bound_ns, dur, rounds);
        }
        if want("parking_lot") {
            table::<peers::ParkingLotMutex>(tight, slow, bound_ns, dur, rounds);
        }
        if want("std") {
            table::<peers::StdMutex>(tight, slow, bound_ns, dur, rounds);
        }
    };
    for (tight, title) in [(1, "1 tight thread + 1 slow one"), (4, "4 tight threads + 1 slow one")] {
        println!("\n== seed 002: {title} (1 us outside the lock), Mutex");
        println!(
            "{:<13} {:>10} {:>13} {:>13} {:>16} {:>13} {:>13}",
            "contender", "total/s", "slow max wait", "less run-q", ">2ms: runq/all", "tight max", "longest hold"
        );
        contenders(tight, true, 2_000_000);
    }
    println!("\n== threads: 32 threads on 2 cores, blocking API, Mutex (every thread reads its run-queue time)");
    println!(
        "{:<13} {:>10} {:>13} {:>13} {:>16} {:>13}",
        "contender", "ops/s", "max wait", "less run-q", ">5ms: runq/all", "longest hold"
    );
    contenders(32, false, 5_000_000);
    println!(
        "\nless run-q: the longest wait of the measured threads (seed 002: the slow one) less the time \
         the waiter spent runnable without a CPU during it;\n>2ms, >5ms: runq/all: of their waits over \
         the bound, how many were within it once that time is taken out;\nlongest hold: the longest \
         ~50 ns critical section (a holder that lost its CPU inside it)"
    );
}
