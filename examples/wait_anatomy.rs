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
//!   (`/proc/thread-self/schedstat`, read just before each acquisition and,
//!   for the waits reported, again inside the critical section: time
//!   runnable after the acquisition is no part of the wait). What is left
//!   is time it spun or slept while others held the lock: the lock's doing,
//!   or a holder's stall (see above).
//!
//! The measurements cost time inside the loops (a clock read inside each
//! section, a ~0.75 us read of schedstat before each measured acquisition),
//! enough to move the throughput ratios, which is
//! why they are here and not in the showdown: read the waits from this
//! example, the throughputs from the showdown.
//!
//! Workloads, as in the showdown: seed 002 with 1 and 4 tight threads and
//! one slow one (1 us of work outside the lock), and 32 threads on the
//! blocking API, each with a ~50 ns critical section.
//!
//! `--trace` (with `--features stats`) takes seed 002's waits over 2 ms
//! apart one by one instead, for hybrid-sync with 4 tight threads: the
//! lock's flight recorder ([`hybrid_sync::stats::record`]) logs every
//! slow-path event of every thread, and each long wait of the slow thread
//! is classified by what the lock's users did meanwhile:
//!
//! ```text
//! cargo run --release --features stats --example wait_anatomy -- --trace --rounds 20
//! ```
//!
//! * **own run queue**: the slow thread's own run-queue time explains it
//!   (the wait less that time is within 2 ms);
//! * **silence**: for 1 ms or more no thread ran any lock code, not even a
//!   barging thread's audit of the queue head (one in 64 barges, every few
//!   microseconds while anyone is queued). The lock was free or owed to one
//!   waiter, and the silence ended when a parked thread resumed (its wakeup
//!   or its timer came late, or it sat runnable without a CPU) or when a
//!   thread that was running lock code went on (it had been descheduled);
//! * **lock steps**: neither; the wait is made of the lock's own steps, and
//!   its events are printed.

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
        // The run-queue time up to the acquisition is read inside the
        // section (time runnable after it, in the section or after the
        // release, is no part of the wait), and only for the waits that
        // can change what is reported: over the bound, or longer than the
        // longest wait-less-run-queue so far. One read costs ~0.75 us.
        let watch = bound_ns.min(w.max_own.unwrap_or(0));
        let (mut q1, mut start, mut end) = (None, 0, 0);
        let acquired = lock.blocking_write(|v| {
            let t = ticks();
            if q0.is_some() && (t.saturating_sub(t0) as f64 * tick) as u64 > watch {
                q1 = rq.as_ref().and_then(RunQueue::read);
            }
            start = ticks();
            *v = work(*v);
            end = ticks();
            t
        });
        let wait = (acquired.saturating_sub(t0) as f64 * tick) as u64;
        w.max_wait = w.max_wait.max(wait);
        w.longest_hold = w.longest_hold.max((end.saturating_sub(start) as f64 * tick) as u64);
        let own = match (q0, q1) {
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

/// A wait of the slow thread over the bound, for `--trace`.
struct LongWait {
    from: Instant,
    to: Instant,
    /// Its own run-queue time during the wait, in ns.
    runq: Option<u64>,
}

/// Seed 002's slow thread for `--trace`: as [`contender`], keeping each wait
/// over `bound_ns`.
fn traced_slow<P: Peer>(lock: &P, stop: &AtomicBool, bound_ns: u64) -> (u64, Vec<LongWait>) {
    let rq = RunQueue::open();
    let (mut ops, mut long, mut x) = (0u64, Vec::new(), 1u64);
    while !stop.load(Ordering::Relaxed) {
        x = work_ns(x, 1000);
        let q0 = rq.as_ref().and_then(RunQueue::read);
        let from = Instant::now();
        let (mut to, mut q1) = (from, None);
        lock.blocking_write(|v| {
            to = Instant::now();
            if (to - from).as_nanos() > u128::from(bound_ns) {
                q1 = rq.as_ref().and_then(RunQueue::read);
            }
            *v = work(*v);
            0
        });
        if (to - from).as_nanos() > u128::from(bound_ns) {
            let runq = q0.zip(q1).map(|(a, b)| b.saturating_sub(a));
            long.push(LongWait { from, to, runq });
        }
        ops += 1;
    }
    std::hint::black_box(x);
    (ops, long)
}

/// `--trace`: seed 002's waits over 2 ms with 4 tight threads, one by one,
/// against the flight recorder's log of every lock user's slow path.
fn trace(dur: Duration, rounds: usize) {
    const BOUND_NS: u64 = 2_000_000;
    const SILENCE: Duration = Duration::from_millis(1);
    if !hybrid_sync::Mutex::new(()).stats().enabled() {
        println!("--trace reads the lock's flight recorder, which needs the `stats` feature:");
        println!("cargo run --release --features stats --example wait_anatomy -- --trace");
        return;
    }
    println!("\n== --trace: seed 002, 4 tight threads + 1 slow one, hybrid-sync: the slow thread's waits over 2 ms");
    let (mut own, mut resumed, mut running, mut steps, mut lost, mut ops) = (0, 0, 0, 0, 0, 0u64);
    for round in 0..rounds {
        let lock = Arc::new(peers::HybridMutex::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        hybrid_sync::stats::record(true);
        let tights: Vec<_> = (0..4)
            .map(|_| {
                let (lock, stop) = (lock.clone(), stop.clone());
                std::thread::spawn(move || contender(&*lock, &stop, 0, false, BOUND_NS))
            })
            .collect();
        let slow = {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || traced_slow(&*lock, &stop, BOUND_NS))
        };
        std::thread::sleep(dur);
        stop.store(true, Ordering::Relaxed);
        for h in tights {
            h.join().unwrap();
        }
        let (slow_ops, long) = slow.join().unwrap();
        hybrid_sync::stats::record(false);
        ops += slow_ops;
        let events = hybrid_sync::stats::recorded();
        let oldest = events.first().map(|e| e.at);
        for w in &long {
            let wait = w.to - w.from;
            let line = format!("round {round:>2}: {:>9} wait", ms(wait.as_nanos() as u64));
            if oldest.is_none_or(|t| t > w.from) {
                lost += 1;
                println!("{line}: its events were overwritten (the recorder keeps the latest 262,144; shorter --secs)");
                continue;
            }
            if let Some(runq) = w.runq
                && wait.as_nanos() as u64 - runq.min(wait.as_nanos() as u64) <= BOUND_NS
            {
                own += 1;
                println!("{line}: own run queue {}", ms(runq));
                continue;
            }
            let inside: Vec<_> = events.iter().filter(|e| e.at >= w.from && e.at <= w.to).collect();
            // The longest stretch without any event, and what ended it.
            let (mut last, mut gap, mut ender) = (w.from, Duration::ZERO, None);
            for e in &inside {
                if e.at - last > gap {
                    (gap, ender) = (e.at - last, Some(*e));
                }
                last = e.at;
            }
            if w.to - last > gap {
                (gap, ender) = (w.to - last, None);
            }
            if gap >= SILENCE {
                let how = match ender.map(|e| e.event) {
                    Some(hybrid_sync::stats::Event::Unparked | hybrid_sync::stats::Event::TimedRecheck) => {
                        resumed += 1;
                        "a parked thread resumed"
                    }
                    _ => {
                        running += 1;
                        "a running thread went on"
                    }
                };
                let by = ender
                    .map_or("the slow thread's acquisition".into(), |e| format!("thread {} {:?}", e.thread, e.event));
                println!("{line}: silence {}, ended by {by} ({how})", ms(gap.as_nanos() as u64));
            } else {
                steps += 1;
                println!("{line}: lock steps (longest silence {}):", ms(gap.as_nanos() as u64));
                // The queue's events; spins and audits only counted.
                use hybrid_sync::stats::Event::{Audit, Contended, SpinWin};
                let mut quiet = 0;
                for e in inside {
                    if matches!(e.event, Audit | Contended | SpinWin) {
                        quiet += 1;
                        continue;
                    }
                    println!("      {:>9} thread {:>3} {:?}", ms((e.at - w.from).as_nanos() as u64), e.thread, e.event);
                }
                println!("      (and {quiet} audits, contended acquisitions and spin wins)");
            }
        }
    }
    let total = own + resumed + running + steps + lost;
    println!(
        "{total} waits over 2 ms in {ops} acquisitions of the slow thread: {own} own run queue; \
         {} silences of 1 ms or more ({resumed} ended by a parked thread resuming, {running} by a running \
         one going on); {steps} lock steps; {lost} not classified",
        resumed + running
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut secs, mut rounds, mut peers, mut traced) = (None, 3usize, vec![], false);
    while let Some(a) = args.next() {
        let mut value = |what: &str| args.next().unwrap_or_else(|| panic!("{a} needs {what}"));
        match a.as_str() {
            "--secs" => secs = Some(value("a number of seconds").parse::<f64>().expect("--secs: not a number")),
            "--rounds" => rounds = value("a number of rounds").parse().expect("--rounds: not a number"),
            "--peers" => peers = value("a list of names").split(',').map(String::from).collect(),
            "--trace" => traced = true,
            other => panic!("unknown argument {other:?} (--secs N, --rounds N, --peers a,b, --trace)"),
        }
    }
    if secs.is_some_and(|s| !(s > 0.0 && s < 1e6)) {
        panic!("--secs: {} is not a duration in seconds", secs.unwrap_or_default());
    }
    if traced {
        calibrate_work(50.0);
        // Half a second per round: about what the recorder's ring holds here.
        trace(Duration::from_secs_f64(secs.unwrap_or(0.5)), rounds);
        return;
    }
    let secs = secs.unwrap_or(2.0);
    const KNOWN: [&str; 3] = ["hybrid-sync", "parking_lot", "std"];
    if let Some(p) = peers.iter().find(|p| !KNOWN.contains(&p.as_str())) {
        panic!("--peers: unknown contender {p:?} (known: {})", KNOWN.join(", "));
    }
    let want = |name: &str| peers.is_empty() || peers.iter().any(|p| p == name);
    calibrate_work(50.0);
    let dur = Duration::from_secs_f64(secs);
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
