//! Who takes a lock when its owner lets go: seed 000's long lock, with every
//! critical section timestamped.
//!
//! ```text
//! cargo run --release --example handover_gaps                  # seed 000: 8 short ops per long one
//! cargo run --release --example handover_gaps -- --shorts 32 --between 100   # seed 000 (b)
//! ```
//!
//! The showdown's seed 000 tables give each lock's throughput; this example
//! shows what sets it. Four threads take a ~20 ns lock `--shorts` times, then
//! a ~2 us one, with `--between` ns of work after each operation, and times
//! each acquisition as the showdown's `two_locks` does (a clock read before
//! it and one inside; the showdown also files each wait in a histogram).
//! Those reads are part of the workload: they set how long a thread is away
//! from the long lock between two of its sections, and without them the
//! releasing thread is back in ~0.35 us instead of ~1 us. Inside every long
//! section a thread reads the TSC as it starts and as it ends, so consecutive
//! sections give the **gap** during which the long lock was free, and whether
//! the next owner was the thread that had just released it (a **re-take**,
//! after its short operations) or another one (a **hand-over**).
//!
//! The long lock is the bottleneck: its throughput is one over hold plus
//! gap, and what the other threads do while it is held decides who fills
//! the gap. A hand-over needs a waiter that notices the release within the
//! releasing thread's short operations (about 1 us); parked waiters cannot
//! (a wakeup takes tens of microseconds here), so re-takes win whenever no
//! waiter spins at the right moment, and the other threads' work waits.
//!
//! Columns: long-lock operations per second; the share of the run the long
//! lock was held; the share of hand-overs among owner changes, with the
//! median gap before a hand-over and before a re-take; the process's CPU
//! time per second (getrusage, all four threads: two means both CPUs busy).
//!
//! hybrid-sync has been seen in two states. Every round of this loop on
//! 2026-12-03 (Intel host) handed over: 343-434 k/s with 64-86% hand-overs 0.43-0.57 us after the
//! release, 1.6-1.8 CPUs busy, against parking_lot's 353-406 k/s (68-90%,
//! 0.53-0.75 us, 2.0 CPUs) and std's 352-433 k/s (44-64%, 0.2 us, 1.4-1.6).
//! The rounds of a scratch version of this measurement (which also filed
//! each section's timestamps from inside it) re-took instead: 333-358 k/s
//! with 4-16% hand-overs, about 1.1 CPUs busy, one thread at a time running
//! the loop: its re-takes found no other thread waiting (the lock's
//! counters), and why is not pinned down.
//! See `docs/performance.md`, "Seed 000: who takes the long lock".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[path = "common/clock.rs"]
mod clock;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/work.rs"]
mod work;
use clock::{cpu_time, ns_per_tick, ticks};
use peers::Peer;
use work::{calibrate_work, work_ns};

struct Opts {
    shorts: usize,
    between_ns: u64,
    secs: f64,
    rounds: usize,
}

fn parse() -> Opts {
    let mut o = Opts { shorts: 8, between_ns: 0, secs: 0.5, rounds: 2 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> String {
            args.next().unwrap_or_else(|| panic!("{name} needs a value (see the example's docs)"))
        };
        let number =
            |name: &str, v: String| -> f64 { v.parse().unwrap_or_else(|_| panic!("{name} takes a number, got {v:?}")) };
        match a.as_str() {
            "--shorts" => o.shorts = number("--shorts", value("--shorts")) as usize,
            "--between" => o.between_ns = number("--between", value("--between")) as u64,
            "--secs" => o.secs = number("--secs", value("--secs")),
            "--rounds" => o.rounds = number("--rounds", value("--rounds")) as usize,
            other => panic!("unknown argument {other:?}; expected --shorts, --between, --secs or --rounds"),
        }
    }
    assert!(o.secs > 0.0 && o.rounds > 0, "--secs and --rounds must be positive");
    o
}

/// One long section: when it started and ended (ticks), and whose it was.
#[derive(Clone, Copy)]
struct Section {
    start: u64,
    end: u64,
    thread: usize,
}

/// One run of the two-lock loop on `P`; prints one line.
fn run<P: Peer>(o: &Opts) {
    let (short, long) = (Arc::new(P::new(0)), Arc::new(P::new(0)));
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..4)
        .map(|thread| {
            let (short, long, stop, measuring) = (short.clone(), long.clone(), stop.clone(), measuring.clone());
            let (shorts, between_ns) = (o.shorts, o.between_ns);
            std::thread::spawn(move || {
                let mut sections = Vec::with_capacity(1 << 20);
                // Each acquisition's wait, as the showdown times it (a clock
                // read before it and one inside): part of the workload, since
                // it sets how long a thread is away between two long sections.
                let mut waited = [0u64; 2];
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..shorts {
                        let t0 = ticks();
                        let t1 = short.blocking_write(|v| {
                            let t = ticks();
                            *v = work_ns(*v, 20);
                            t
                        });
                        waited[0] = waited[0].max(t1.saturating_sub(t0));
                        if between_ns > 0 {
                            std::hint::black_box(work_ns(0, between_ns));
                        }
                    }
                    let end = std::cell::Cell::new(0);
                    let t0 = ticks();
                    let start = long.blocking_write(|v| {
                        let t = ticks();
                        *v = work_ns(*v, 2000);
                        end.set(ticks());
                        t
                    });
                    waited[1] = waited[1].max(start.saturating_sub(t0));
                    if measuring.load(Ordering::Relaxed) {
                        sections.push(Section { start, end: end.get(), thread });
                    }
                    if between_ns > 0 {
                        std::hint::black_box(work_ns(0, between_ns));
                    }
                }
                std::hint::black_box(waited);
                sections
            })
        })
        .collect();
    // Measure the middle of the run, past the start-up.
    let dur = Duration::from_secs_f64(o.secs);
    std::thread::sleep(dur / 4);
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    measuring.store(true, Ordering::Relaxed);
    std::thread::sleep(dur / 2);
    measuring.store(false, Ordering::Relaxed);
    let cpus = (cpu_time() - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    std::thread::sleep(dur / 4);
    stop.store(true, Ordering::Relaxed);
    let mut sections: Vec<Section> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    sections.sort_by_key(|s| s.start);
    if sections.len() < 2 {
        println!("{:<12} too few long sections to measure", P::NAME);
        return;
    }
    let ns = ns_per_tick();
    let (mut handed, mut retaken) = (Vec::new(), Vec::new());
    let mut held = 0.0;
    for pair in sections.windows(2) {
        let gap = pair[1].start.saturating_sub(pair[0].end) as f64 * ns;
        if pair[1].thread == pair[0].thread {
            retaken.push(gap)
        } else {
            handed.push(gap)
        }
        held += pair[0].end.saturating_sub(pair[0].start) as f64 * ns;
    }
    let span = (sections[sections.len() - 1].start - sections[0].start) as f64 * ns;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        if v.is_empty() { f64::NAN } else { v[v.len() / 2] }
    };
    let changes = (handed.len() + retaken.len()) as f64;
    println!(
        "{:<12} {:>9.0} k/s {:>6.0}% {:>10.0}% {:>11.2} us {:>11.2} us {:>6.2}",
        P::NAME,
        (sections.len() - 1) as f64 / span * 1e6,
        held / span * 100.0,
        handed.len() as f64 / changes * 100.0,
        median(&mut handed) / 1e3,
        median(&mut retaken) / 1e3,
        cpus,
    );
}

fn main() {
    let o = parse();
    calibrate_work(50.0);
    println!(
        "seed 000's long lock: 4 threads, {} ops on a ~20 ns lock per op on a ~2 us lock, {} ns of work after each",
        o.shorts, o.between_ns
    );
    println!(
        "{:<12} {:>13} {:>7} {:>11} {:>14} {:>14} {:>6}",
        "contender", "long ops", "held", "hand-overs", "gap hand-over", "gap re-take", "CPUs"
    );
    for _ in 0..o.rounds {
        run::<peers::HybridMutex>(&o);
        run::<peers::ParkingLotMutex>(&o);
        run::<peers::StdMutex>(&o);
    }
}
