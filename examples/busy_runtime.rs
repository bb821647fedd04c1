//! A busy runtime: an async lock's longest waits, split between the lock and
//! the runtime that has to poll the woken task.
//!
//! ```text
//! cargo run --release --example busy_runtime           # 512 tasks, 3 rounds of 1 s
//! cargo run --release --example busy_runtime -- --tasks 128 --outside-ns 4000 --rounds 5
//! ```
//!
//! The tasks of a loaded server on shared state: 512 tasks on 2 workers,
//! each looping over ~1 us of work outside the lock, a read (90%) or a
//! write of ~50 ns, and a `yield_now().await`. That is more runnable tasks
//! than tokio's per-worker run queues hold (256 each); the rest wait in the
//! runtime's shared queue, from which each worker takes one task about every
//! 200 us of polling (tokio tunes the interval), so a task can wait there
//! for milliseconds before it runs again, lock or no lock. The **slow y/s**
//! column counts those: `yield_now().await`s a second that took over 5 ms
//! to return.
//!
//! A task whose acquisition queued waits twice: for the lock to wake it
//! (its turn, or a chance to compete for it), then for the runtime to poll
//! it. Each acquisition's waker is wrapped in one that stamps the time of
//! every wakeup, and each wait over 5 ms is split at the last one into the
//! **lock part** and the **runtime** part; the table gives the longest of
//! each among those waits (not necessarily of the same wait). A blocking
//! peer (parking_lot, std) holds its worker while it waits and is never
//! woken: its whole wait is the lock's.
//!
//! On the development VM (2026-12-05, one run of 4 rounds) hybrid-sync,
//! parking_lot and std ran at 1.6 M ops/s, async-lock at 1.5 M and tokio at
//! 1.1 M. The tasks of all but tokio had 10,000-12,000 slow yields a second
//! (std 330 and 1,464 in two of its rounds). hybrid-sync's waits over 5 ms
//! (0-9 a second, the longest 14.8 ms) were woken by the lock within 11 us
//! and polled by the runtime milliseconds later; async-lock's were the
//! lock's (up to 31 ms before the wakeup). tokio's lock queues nearly every
//! acquisition (a median wait of 440 us, against 0.2 us for the others),
//! which keeps most tasks out of the run queues: few slow yields, and a
//! longest wait of 1.0-3.2 ms. With 128 tasks slow yields were rare (64 a
//! second in one round of parking_lot's) and no wait passed 1.2 ms. More in
//! docs/performance.md, "A busy runtime".

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

#[path = "common/clock.rs"]
mod clock;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/work.rs"]
mod work;
use clock::{Usage, ns_per_tick, ticks};
use peers::Peer;

/// Waits (and yields) over this long are counted and taken apart.
const LONG_NS: f64 = 5e6;

/// The waker handed to the lock: stamps each wakeup, then wakes the task.
struct WakeStamp {
    task: Mutex<Option<Waker>>,
    at: AtomicU64,
}

impl Wake for WakeStamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: read back by the same task after it is polled again,
        // which the runtime's own synchronization orders after this.
        self.at.store(ticks(), Ordering::Relaxed);
        if let Some(waker) = &*self.task.lock().unwrap() {
            waker.wake_by_ref();
        }
    }
}

/// Polls `fut` with the stamping waker in place of the task's own.
async fn stamped<F: Future>(fut: F, stamp: &Arc<WakeStamp>, waker: &Waker) -> F::Output {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| {
        {
            let mut task = stamp.task.lock().unwrap();
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        fut.as_mut().poll(&mut Context::from_waker(waker))
    })
    .await
}

/// One task's figures, in ticks.
#[derive(Default)]
struct Figures {
    ops: u64,
    waits: Vec<u64>,
    long: u64,
    max_lock_part: u64,
    max_runtime_part: u64,
    slow_yields: u64,
}

struct Opts {
    tasks: usize,
    workers: usize,
    reads_per_mille: u64,
    outside_ns: u64,
    secs: f64,
    rounds: usize,
    peers: Vec<String>,
}

fn run<P: Peer>(o: &Opts) -> (f64, f64, Figures) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(o.workers).build().unwrap();
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let long = (LONG_NS / ns_per_tick()) as u64;
    let (rpm, outside) = (o.reads_per_mille, o.outside_ns);
    let usage = Usage::now();
    let start = Instant::now();
    let handles: Vec<_> = (0..o.tasks)
        .map(|i| {
            let (lock, stop) = (lock.clone(), stop.clone());
            rt.spawn(async move {
                let stamp = Arc::new(WakeStamp { task: Mutex::new(None), at: AtomicU64::new(0) });
                let waker = Waker::from(stamp.clone());
                let mut f = Figures::default();
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (i as u64 + 1);
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    std::hint::black_box(work::work_ns(x, outside));
                    stamp.at.store(0, Ordering::Relaxed);
                    let t0 = ticks();
                    if x % 1000 < rpm {
                        stamped(lock.read(|v| std::hint::black_box(work::work(*v))), &stamp, &waker).await;
                    } else {
                        let write = lock.write(|v| {
                            *v = work::work(*v);
                            *v
                        });
                        stamped(write, &stamp, &waker).await;
                    }
                    let t1 = ticks();
                    let wait = t1 - t0;
                    f.waits.push(wait);
                    if wait > long {
                        f.long += 1;
                        let woken = stamp.at.load(Ordering::Relaxed);
                        let (lock_part, runtime_part) = if woken > t0 { (woken - t0, t1 - woken) } else { (wait, 0) };
                        f.max_lock_part = f.max_lock_part.max(lock_part);
                        f.max_runtime_part = f.max_runtime_part.max(runtime_part);
                    }
                    f.ops += 1;
                    let y0 = ticks();
                    tokio::task::yield_now().await;
                    if ticks() - y0 > long {
                        f.slow_yields += 1;
                    }
                }
                f
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(o.secs));
    stop.store(true, Ordering::Relaxed);
    let mut all = Figures::default();
    for h in handles {
        let f = rt.block_on(h).unwrap();
        all.ops += f.ops;
        all.waits.extend(f.waits);
        all.long += f.long;
        all.max_lock_part = all.max_lock_part.max(f.max_lock_part);
        all.max_runtime_part = all.max_runtime_part.max(f.max_runtime_part);
        all.slow_yields += f.slow_yields;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (cpu, _) = usage.since();
    (elapsed, cpu.as_secs_f64(), all)
}

fn ms(ticks: u64) -> String {
    let ns = ticks as f64 * ns_per_tick();
    if ns >= 1e6 { format!("{:.2} ms", ns / 1e6) } else { format!("{:.1} us", ns / 1e3) }
}

fn row<P: Peer>(o: &Opts) {
    if !o.peers.is_empty() && !o.peers.iter().any(|p| p == P::NAME) {
        return;
    }
    let (elapsed, cpu, mut f) = run::<P>(o);
    f.waits.sort_unstable();
    let q = |p: f64| f.waits.get(((f.waits.len() as f64 * p) as usize).min(f.waits.len().saturating_sub(1))).copied();
    let per_s = |n: u64| n as f64 / elapsed;
    println!(
        "{:<12} {:>7.2} M {:>8.3} {:>10} {:>10} {:>10} {:>10} {:>9.0} {:>11} {:>11} {:>9.0}",
        P::NAME,
        f.ops as f64 / elapsed / 1e6,
        cpu * 1e6 / f.ops.max(1) as f64,
        ms(q(0.5).unwrap_or(0)),
        ms(q(0.999).unwrap_or(0)),
        ms(q(0.9999).unwrap_or(0)),
        ms(f.waits.last().copied().unwrap_or(0)),
        per_s(f.long),
        if f.long > 0 { ms(f.max_lock_part) } else { "-".into() },
        if f.long > 0 { ms(f.max_runtime_part) } else { "-".into() },
        per_s(f.slow_yields),
    );
}

fn main() {
    let mut o =
        Opts { tasks: 512, workers: 2, reads_per_mille: 900, outside_ns: 1000, secs: 1.0, rounds: 3, peers: vec![] };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("{name} needs a value (try --help)");
                std::process::exit(2)
            })
        };
        let number = |name: &str, v: String| -> f64 {
            v.parse().ok().filter(|n: &f64| *n > 0.0).unwrap_or_else(|| {
                eprintln!("{name} needs a positive number, got {v:?}");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--tasks" => o.tasks = number("--tasks", value("--tasks")) as usize,
            "--workers" => o.workers = number("--workers", value("--workers")) as usize,
            "--reads-per-mille" => {
                let v = value("--reads-per-mille");
                o.reads_per_mille = v.parse().ok().filter(|n| *n <= 1000).unwrap_or_else(|| {
                    eprintln!("--reads-per-mille needs a whole number from 0 to 1000, got {v:?}");
                    std::process::exit(2)
                })
            }
            "--outside-ns" => o.outside_ns = number("--outside-ns", value("--outside-ns")) as u64,
            "--secs" => o.secs = number("--secs", value("--secs")),
            "--rounds" => o.rounds = number("--rounds", value("--rounds")) as usize,
            "--peers" => o.peers = value("--peers").split(',').map(String::from).collect(),
            "-h" | "--help" => {
                println!(
                    "usage: busy_runtime [--tasks N] [--workers N] [--reads-per-mille N] [--outside-ns NS] [--secs S] \
                     [--rounds N] [--peers hybrid-sync,tokio,async-lock,parking_lot,std]"
                );
                return;
            }
            other => {
                eprintln!("unknown argument {other:?} (try --help)");
                std::process::exit(2);
            }
        }
    }
    work::calibrate_work(50.0);
    println!(
        "busy runtime: {} tasks on {} workers, {}% reads, ~{} ns of work outside the lock and a yield per \
         operation; {}",
        o.tasks,
        o.workers,
        o.reads_per_mille / 10,
        o.outside_ns,
        hybrid_sync::tuning()
    );
    println!(
        "waits and yields over 5 ms are counted per second; a wait over 5 ms is split at the last wakeup the \
         lock sent into the lock's part and the runtime's part (the longest of each)"
    );
    for round in 1..=o.rounds {
        println!("\nround {round}");
        println!(
            "{:<12} {:>9} {:>8} {:>10} {:>10} {:>10} {:>10} {:>9} {:>11} {:>11} {:>9}",
            "contender",
            "ops/s",
            "CPU us",
            "p50 wait",
            "p99.9",
            "p99.99",
            "max wait",
            ">5 ms/s",
            "lock part",
            "runtime",
            "slow y/s"
        );
        row::<peers::HybridRw>(&o);
        row::<peers::TokioRw>(&o);
        row::<peers::AsyncLockRw>(&o);
        row::<peers::ParkingLotRw>(&o);
        row::<peers::StdRw>(&o);
    }
}
