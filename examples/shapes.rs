//! Shapes of use that the showdown's tables do not run: cancelled
//! acquisitions, timeouts around a slow writer, a current-thread runtime, an
//! executor that is not tokio, and sharded locks.
//!
//! ```text
//! cargo run --release --example shapes                 # 3 rounds of 0.6 s per contender
//! cargo run --release --example shapes -- --rounds 5 --secs 1 --only timeouts,sharded
//! cargo run --release --example shapes --features stats -- --stats   # hybrid-sync's lock events too
//! ```
//!
//! Each table gives the median over the rounds (contenders interleaved
//! within a round) of the operations that completed per second, the ratio
//! to the table's baseline (tokio, or parking_lot where only threads run),
//! the process's CPU time per completed operation, and for the first two
//! shapes the share of acquisitions that were abandoned. The critical
//! section is the examples' usual ~50 ns; tasks yield every 16 operations,
//! as in the showdown.
//!
//! * **cancelled**: 64 tasks on 2 workers, 10% writes, each acquisition
//!   raced in a biased `select!` against one `yield_now()`: the task gives
//!   up unless the lock is its by the task's second poll. A dropped waiting
//!   future must unlink itself cheaply and pass on anything granted to it.
//! * **timeouts**: 64 tasks on 2 workers, 10% writes, one write in a
//!   thousand holding its guard across a 500 us sleep (a handler that calls
//!   out while holding shared state); reads give up after 1 ms and writes
//!   after 3 ms (`tokio::time::timeout`).
//! * **current-thread**: 64 tasks on a current-thread runtime (tokio's
//!   `#[tokio::test]` default and `flavor = "current_thread"`), 10% writes,
//!   with guards dropped at once, and with write guards held across a
//!   yield (`YieldNow`, which wakes its task at once where tokio's
//!   `yield_now` waits for the runtime's driver; the tasks' own yields every
//!   16 operations are these too). Nothing can release the lock while a
//!   task waits, so no task should spin.
//! * **LocalPool**: the same two on `futures::executor::LocalPool`: no tokio
//!   context, no coop budget, one thread (a lock cannot tell that spinning
//!   there is futile; its backoff has to learn it).
//! * **sharded**: 32 threads on the machine's CPUs, each operation on one of
//!   4 or of 64 `RwLock`s picked at random, 10% writes, blocking API (a
//!   sharded map); hybrid-sync against parking_lot and std.
//!
//! Figures from the development VM are in docs/performance.md, "Shapes the
//! showdown does not run".

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "common/clock.rs"]
mod clock;
#[path = "common/peers.rs"]
mod peers;
#[path = "common/work.rs"]
mod work;
#[path = "common/yield_now.rs"]
mod yield_now;
use clock::Usage;
use peers::Peer;
use work::work;
use yield_now::YieldNow;

/// An async `RwLock<u64>` whose guards the shapes can hold across `.await`.
trait AsyncRw: Send + Sync + 'static {
    const NAME: &'static str;
    fn new() -> Self;
    fn read(&self) -> impl Future<Output = impl Deref<Target = u64> + Send> + Send;
    fn write(&self) -> impl Future<Output = impl DerefMut<Target = u64> + Send> + Send;
}

macro_rules! async_rw {
    ($lock:ty, $name:expr) => {
        impl AsyncRw for $lock {
            const NAME: &'static str = $name;
            fn new() -> Self {
                <$lock>::new(0)
            }
            fn read(&self) -> impl Future<Output = impl Deref<Target = u64> + Send> + Send {
                <$lock>::read(self)
            }
            fn write(&self) -> impl Future<Output = impl DerefMut<Target = u64> + Send> + Send {
                <$lock>::write(self)
            }
        }
    };
}
async_rw!(hybrid_sync::RwLock<u64>, "hybrid-sync");
async_rw!(tokio::sync::RwLock<u64>, "tokio");
async_rw!(async_lock::RwLock<u64>, "async-lock");

/// A task's pseudo-random stream (64-bit LCG, high bits).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// What a run counts: completed and abandoned acquisitions.
#[derive(Default)]
struct Counts {
    done: AtomicU64,
    abandoned: AtomicU64,
}

/// One contender's figures in one round.
#[derive(Clone, Copy)]
struct Figures {
    ops_per_s: f64,
    cpu_us_per_op: f64,
    abandoned: f64,
}

/// Where a shape's tasks run.
#[derive(Clone, Copy, PartialEq)]
enum Exec {
    /// tokio, 2 workers.
    MultiThread,
    /// tokio, one thread.
    CurrentThread,
    /// `futures::executor::LocalPool`.
    LocalPool,
}

/// Runs `tasks` futures made by `body` (task index, stop flag, counts) on
/// `exec` until `secs` have passed, and measures them.
fn run_tasks<F, Fut>(exec: Exec, tasks: u64, secs: f64, body: F) -> Figures
where
    F: Fn(u64, Arc<AtomicBool>, Arc<Counts>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let futures: Vec<Fut> = (0..tasks).map(|i| body(i, stop.clone(), counts.clone())).collect();
    let timer = {
        let stop = stop.clone();
        move || {
            std::thread::sleep(Duration::from_secs_f64(secs));
            stop.store(true, Ordering::Relaxed);
        }
    };
    let usage = Usage::now();
    let start = Instant::now();
    let timer = std::thread::spawn(timer);
    match exec {
        Exec::MultiThread | Exec::CurrentThread => {
            let mut builder = if exec == Exec::MultiThread {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(2);
                b
            } else {
                tokio::runtime::Builder::new_current_thread()
            };
            let rt = builder.enable_all().build().unwrap();
            rt.block_on(async {
                let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
                for h in handles {
                    h.await.unwrap();
                }
            });
        }
        Exec::LocalPool => {
            use futures::task::LocalSpawnExt;
            let mut pool = futures::executor::LocalPool::new();
            for f in futures {
                pool.spawner().spawn_local(f).unwrap();
            }
            pool.run();
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    timer.join().unwrap();
    let (user, sys) = usage.since();
    let done = counts.done.load(Ordering::Relaxed).max(1);
    let abandoned = counts.abandoned.load(Ordering::Relaxed);
    Figures {
        ops_per_s: done as f64 / elapsed,
        cpu_us_per_op: (user + sys).as_secs_f64() * 1e6 / done as f64,
        abandoned: abandoned as f64 / (done + abandoned) as f64,
    }
}

/// A task of a shape: until `stop`, draws from its own stream, runs `$op`
/// (whether the acquisition completed, or was abandoned), counts it, and
/// yields with `$yield` every 16 operations, as the showdown's tasks do.
macro_rules! task_loop {
    ($i:expr, $stop:expr, $counts:expr, $yield:expr, |$rng:ident| $op:expr) => {{
        let mut $rng = Rng($i);
        let mut n = 0u64;
        while !$stop.load(Ordering::Relaxed) {
            let completed: bool = $op;
            let count = if completed { &$counts.done } else { &$counts.abandoned };
            count.fetch_add(1, Ordering::Relaxed);
            n += 1;
            if n.is_multiple_of(16) {
                $yield.await;
            }
        }
    }};
}

/// Each acquisition raced against one yield; 10% writes.
fn cancelled<L: AsyncRw>(secs: f64) -> Figures {
    let lock = Arc::new(L::new());
    run_tasks(Exec::MultiThread, 64, secs, |i, stop, counts| {
        let lock = lock.clone();
        async move {
            task_loop!(i, stop, counts, tokio::task::yield_now(), |rng| if rng.below(10) == 0 {
                tokio::select! {
                    biased;
                    mut g = lock.write() => { *g = work(*g); true }
                    _ = tokio::task::yield_now() => false,
                }
            } else {
                tokio::select! {
                    biased;
                    g = lock.read() => { std::hint::black_box(work(*g)); true }
                    _ = tokio::task::yield_now() => false,
                }
            })
        }
    })
}

/// Timed-out acquisitions around a writer that sometimes sleeps holding
/// the lock; 10% writes.
fn timeouts<L: AsyncRw>(secs: f64) -> Figures {
    let lock = Arc::new(L::new());
    run_tasks(Exec::MultiThread, 64, secs, |i, stop, counts| {
        let lock = lock.clone();
        async move {
            task_loop!(i, stop, counts, tokio::task::yield_now(), |rng| if rng.below(10) == 0 {
                match tokio::time::timeout(Duration::from_millis(3), lock.write()).await {
                    Ok(mut g) => {
                        *g = work(*g);
                        if rng.below(1000) == 0 {
                            tokio::time::sleep(Duration::from_micros(500)).await;
                        }
                        true
                    }
                    Err(_) => false,
                }
            } else {
                match tokio::time::timeout(Duration::from_millis(1), lock.read()).await {
                    Ok(g) => {
                        std::hint::black_box(work(*g));
                        true
                    }
                    Err(_) => false,
                }
            })
        }
    })
}

/// 64 tasks on one thread, 10% writes; with `hold`, write guards are held
/// across a yield.
fn one_thread<L: AsyncRw>(exec: Exec, hold: bool, secs: f64) -> Figures {
    let lock = Arc::new(L::new());
    run_tasks(exec, 64, secs, |i, stop, counts| {
        let lock = lock.clone();
        async move {
            task_loop!(i, stop, counts, YieldNow(false), |rng| {
                if rng.below(10) == 0 {
                    let mut g = lock.write().await;
                    *g = work(*g);
                    if hold {
                        YieldNow(false).await;
                    }
                } else {
                    std::hint::black_box(work(*lock.read().await));
                }
                true
            })
        }
    })
}

/// 32 threads, each operation on one of `shards` locks; 10% writes.
fn sharded<P: Peer>(shards: u64, secs: f64) -> Figures {
    let locks: Arc<Vec<P>> = Arc::new((0..shards).map(|_| P::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let usage = Usage::now();
    let start = Instant::now();
    let threads: Vec<_> = (0..32)
        .map(|i| {
            let (locks, stop, done) = (locks.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(i);
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let lock = &locks[rng.below(shards) as usize];
                    if rng.below(10) == 0 {
                        lock.blocking_write(|v| {
                            *v = work(*v);
                            0
                        });
                    } else {
                        lock.blocking_read(|v| work(*v));
                    }
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let (user, sys) = usage.since();
    let done = done.load(Ordering::Relaxed).max(1);
    Figures {
        ops_per_s: done as f64 / elapsed,
        cpu_us_per_op: (user + sys).as_secs_f64() * 1e6 / done as f64,
        abandoned: 0.0,
    }
}

/// One round of a contender in a table, given its length in seconds.
type Run = Box<dyn Fn(f64) -> Figures>;
/// A contender in a table: its name and a round of it.
type Row = (&'static str, Run);

/// The async contenders of a table, each running `$shape::<Lock>(args.., secs)`.
macro_rules! async_rows {
    ($shape:ident $(, $arg:expr)*) => {
        vec![
            async_row!(hybrid_sync::RwLock<u64>, $shape $(, $arg)*),
            async_row!(tokio::sync::RwLock<u64>, $shape $(, $arg)*),
            async_row!(async_lock::RwLock<u64>, $shape $(, $arg)*),
        ]
    };
}

macro_rules! async_row {
    ($lock:ty, $shape:ident $(, $arg:expr)*) => {
        (<$lock as AsyncRw>::NAME, Box::new(move |secs| $shape::<$lock>($($arg,)* secs)) as Run)
    };
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut rounds = 3;
    let mut secs = 0.6;
    let mut only: Vec<String> = vec![];
    let mut stats = false;
    let mut peers: Vec<String> = vec![];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("{what} needs a value (try --help)");
                std::process::exit(2)
            })
        };
        match a.as_str() {
            "--rounds" => {
                rounds = value("--rounds").parse().ok().filter(|&n| n > 0).unwrap_or_else(|| {
                    eprintln!("--rounds needs a whole number of at least 1");
                    std::process::exit(2)
                })
            }
            "--secs" => {
                secs = value("--secs").parse().ok().filter(|&s: &f64| s > 0.0 && s.is_finite()).unwrap_or_else(|| {
                    eprintln!("--secs needs a positive number of seconds");
                    std::process::exit(2)
                })
            }
            "--only" => only = value("--only").split(',').map(String::from).collect(),
            "--stats" => stats = true,
            "--peers" => peers = value("--peers").split(',').map(String::from).collect(),
            "-h" | "--help" => {
                println!(
                    "usage: shapes [--rounds N] [--secs S] [--only SHAPE,..] [--peers NAME,..] [--stats]  (cancelled, timeouts, current-thread, LocalPool, sharded)"
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
        "shapes the showdown does not run: medians of {rounds} round(s) of {secs} s per contender; {}",
        hybrid_sync::tuning()
    );
    // (shape, title, baseline, contenders)
    let mut tables: Vec<(&str, String, &str, Vec<Row>)> = vec![
        (
            "cancelled",
            "cancelled: 64 tasks on 2 workers, 10% writes, every acquisition raced against one yield_now()".into(),
            "tokio",
            async_rows!(cancelled),
        ),
        (
            "timeouts",
            "timeouts: 64 tasks on 2 workers, 10% writes (one in 1000 held across a 500 us sleep), reads time out \
             after 1 ms, writes after 3 ms"
                .into(),
            "tokio",
            async_rows!(timeouts),
        ),
    ];
    for (exec, shape, on) in [
        (Exec::CurrentThread, "current-thread", "a current-thread runtime"),
        (Exec::LocalPool, "LocalPool", "futures' LocalPool"),
    ] {
        for hold in [false, true] {
            let held = if hold { ", write guards held across a yield" } else { "" };
            let title = format!("{shape}: 64 tasks on {on}, 10% writes{held}");
            tables.push((shape, title, "tokio", async_rows!(one_thread, exec, hold)));
        }
    }
    for shards in [4, 64] {
        let title = format!("sharded: 32 threads, each operation on one of {shards} RwLocks, 10% writes, blocking API");
        let rows: Vec<Row> = vec![
            ("hybrid-sync", Box::new(move |s| sharded::<peers::HybridRw>(shards, s))),
            ("parking_lot", Box::new(move |s| sharded::<peers::ParkingLotRw>(shards, s))),
            ("std", Box::new(move |s| sharded::<peers::StdRw>(shards, s))),
        ];
        tables.push(("sharded", title, "parking_lot", rows));
    }
    for (shape, title, baseline, rows) in &tables {
        if !only.is_empty() && !only.iter().any(|o| o == shape) {
            continue;
        }
        let rows: Vec<&Row> =
            rows.iter().filter(|(name, _)| peers.is_empty() || peers.iter().any(|p| p == name)).collect();
        let mut figures: Vec<Vec<Figures>> = vec![vec![]; rows.len()];
        for round in 1..=rounds {
            for (i, (name, run)) in rows.iter().enumerate() {
                eprint!("\r\x1b[2K  running: {shape} {name}, round {round} of {rounds}");
                let _ = hybrid_sync::stats::snapshot(true);
                figures[i].push(run(secs));
                if stats && *name == "hybrid-sync" {
                    let events = hybrid_sync::stats::snapshot(true);
                    let events: Vec<String> = hybrid_sync::stats::ALL
                        .iter()
                        .zip(events)
                        .filter(|(_, n)| *n > 0)
                        .map(|(e, n)| format!("{e:?}={n}"))
                        .collect();
                    eprintln!("\r\x1b[2K    {shape} round {round}, hybrid-sync's events: {}", events.join(" "));
                }
            }
        }
        eprint!("\r\x1b[2K");
        let med = |i: usize, f: fn(&Figures) -> f64| median(figures[i].iter().map(f).collect());
        // Without its baseline (`--peers`), a table has no ratios.
        let base = rows.iter().position(|(n, _)| n == baseline).map_or(f64::NAN, |i| med(i, |f| f.ops_per_s));
        let abandons = figures.iter().flatten().any(|f| f.abandoned > 0.0);
        println!("\n== {title}");
        println!(
            "{:<12} {:>10} {:>8} {:>11}{}",
            "contender",
            "ops/s",
            format!("vs {}", if *baseline == "tokio" { "tokio" } else { "pl" }),
            "CPU us/op",
            if abandons { "  abandoned" } else { "" }
        );
        for (i, (name, _)) in rows.iter().enumerate() {
            let ops = med(i, |f| f.ops_per_s);
            let ratio = if base.is_nan() { "-".to_string() } else { format!("{:.2}x", ops / base) };
            let abandoned =
                if abandons { format!("  {:>8.2}%", med(i, |f| f.abandoned) * 100.0) } else { String::new() };
            println!("{:<12} {:>8.2} M {:>8} {:>11.3}{abandoned}", name, ops / 1e6, ratio, med(i, |f| f.cpu_us_per_op));
        }
    }
}
