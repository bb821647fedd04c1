//! The showdown: hybrid-sync against tokio::sync, async-lock, parking_lot and
//! std, side by side in one run, on the workloads the crate exists for.
//!
//! ```text
//! cargo run --release --example showdown            # quick, under a minute
//! cargo run --release --example showdown -- --full  # longer runs, steadier numbers
//! ```
//!
//! Every contender runs the same code (`examples/common/peers.rs`). Each table
//! reports, per contender: operations per second, CPU time per operation
//! (user + system, from `getrusage`: a lock that wins by burning cores has
//! not won), acquire latency (p50, p99, max: the time from asking for the
//! lock to being inside it), and the throughput ratio to tokio.
//!
//! Workloads:
//!
//! * **uncontended**: one task acquires and releases in a loop; ns per
//!   acquire+release (the cost every call pays).
//! * **async write-heavy**: 64 tasks on 2 worker threads, every operation a
//!   write with a ~50 ns critical section; each task yields to the runtime
//!   every 16 operations, standing in for the rest of a handler's work.
//!   parking_lot and std lock inside the task without holding across `.await`.
//! * **async read-heavy**: the same with 90% reads.
//! * **threads, oversubscribed**: 32 threads on 2 cores, blocking API,
//!   ~50 ns critical section: where spinning goes wrong.
//! * **mixed**: 4 blocking threads and 32 tasks on the same lock, which only
//!   locks with both a blocking and an async API can do cleanly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[path = "common/peers.rs"]
mod peers;
use peers::Peer;

// ---------------------------------------------------------------------------
// Clocks
// ---------------------------------------------------------------------------

/// A cheap timestamp: the TSC on x86_64 (about 8 ns to read here, against
/// 25 ns for `Instant::now`), nanoseconds elsewhere.
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `rdtsc` has no preconditions on x86_64.
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick, measured once.
fn ns_per_tick() -> f64 {
    static V: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let (t0, i0) = (ticks(), Instant::now());
        std::thread::sleep(Duration::from_millis(30));
        let (t1, i1) = (ticks(), Instant::now());
        (i1 - i0).as_nanos() as f64 / (t1 - t0).max(1) as f64
    })
}

/// User + system CPU time of the whole process.
fn cpu_time() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer we pass.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

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

// ---------------------------------------------------------------------------
// The critical section: about 50 ns of dependent arithmetic on the data.
// ---------------------------------------------------------------------------

static WORK_ITERS: AtomicU64 = AtomicU64::new(16);

#[inline(never)]
fn work(v: u64) -> u64 {
    let mut x = v;
    for i in 0..WORK_ITERS.load(Ordering::Relaxed) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

fn calibrate_work(target_ns: f64) {
    let n = 200_000u64;
    let t = Instant::now();
    let mut x = 1;
    for _ in 0..n {
        x = work(x);
    }
    std::hint::black_box(x);
    let per = t.elapsed().as_nanos() as f64 / n as f64;
    let iters = (WORK_ITERS.load(Ordering::Relaxed) as f64 * target_ns / per).round().max(1.0) as u64;
    WORK_ITERS.store(iters, Ordering::Relaxed);
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
    hist: Hist,
}

impl Row {
    fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
    fn cpu_us_per_op(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.ops.max(1) as f64
    }
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

fn print_table(title: &str, rows: &[Row]) {
    let tokio = rows.iter().find(|r| r.name == "tokio").map(Row::ops_per_sec);
    let tick = ns_per_tick();
    println!("\n== {title}");
    println!(
        "{:<13} {:>10} {:>9} {:>12} {:>10} {:>10} {:>10}",
        "contender", "ops/s", "vs tokio", "CPU us/op", "p50 wait", "p99 wait", "max wait"
    );
    for r in rows {
        let ratio = tokio.map_or("-".into(), |t| format!("{:.2}x", r.ops_per_sec() / t));
        println!(
            "{:<13} {:>10} {:>9} {:>12.3} {:>10} {:>10} {:>10}",
            r.name,
            fmt_rate(r.ops_per_sec()),
            ratio,
            r.cpu_us_per_op(),
            fmt_ns(r.hist.quantile(0.5) as f64 * tick),
            fmt_ns(r.hist.quantile(0.99) as f64 * tick),
            fmt_ns(r.hist.max as f64 * tick),
        );
    }
}

// ---------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------

/// ns per acquire+release of one task on a current-thread runtime; the best
/// of three runs.
fn uncontended<P: Peer>(write: bool, n: u64) -> f64 {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let lock = P::new(0);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        rt.block_on(async {
            for _ in 0..n {
                if write {
                    lock.write(|v| {
                        *v += 1;
                        0
                    })
                    .await;
                } else {
                    lock.read(|v| std::hint::black_box(*v)).await;
                }
            }
        });
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

/// `tasks` tasks on a `workers`-thread runtime; `read_per_mille` of the
/// operations are reads.
fn async_contended<P: Peer>(tasks: usize, workers: usize, read_per_mille: u64, dur: Duration) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build().unwrap();
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_time();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let (lock, stop) = (lock.clone(), stop.clone());
            rt.spawn(async move {
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
                    if ops % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (ops, hist)
            })
        })
        .collect();
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
    let cpu = cpu_time() - cpu0;
    drop(rt);
    Row { name: P::NAME, ops, elapsed, cpu, hist }
}

/// `threads` OS threads using the blocking API, all writes.
fn threads<P: Peer>(threads: usize, dur: Duration) -> Row {
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_time();
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || {
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
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut total = (0, Hist::new());
    for h in handles {
        let (ops, hist) = h.join().unwrap();
        total.0 += ops;
        total.1.merge(&hist);
    }
    let elapsed = start.elapsed();
    Row { name: P::NAME, ops: total.0, elapsed, cpu: cpu_time() - cpu0, hist: total.1 }
}

/// `nthreads` blocking threads and `tasks` tasks (2 workers) writing one lock.
fn mixed<P: Peer>(nthreads: usize, tasks: usize, dur: Duration) -> Row {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let lock = Arc::new(P::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = cpu_time();
    let start = Instant::now();
    let task_handles: Vec<_> = (0..tasks)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            rt.spawn(async move {
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
                    if ops % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (ops, hist)
            })
        })
        .collect();
    let thread_handles: Vec<_> = (0..nthreads)
        .map(|_| {
            let (lock, stop) = (lock.clone(), stop.clone());
            std::thread::spawn(move || {
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
            })
        })
        .collect();
    std::thread::sleep(dur);
    stop.store(true, Ordering::Relaxed);
    let mut total = (0, Hist::new());
    for h in thread_handles {
        let (ops, hist) = h.join().unwrap();
        total.0 += ops;
        total.1.merge(&hist);
    }
    rt.block_on(async {
        for h in task_handles {
            let (ops, hist) = h.await.unwrap();
            total.0 += ops;
            total.1.merge(&hist);
        }
    });
    let elapsed = start.elapsed();
    Row { name: P::NAME, ops: total.0, elapsed, cpu: cpu_time() - cpu0, hist: total.1 }
}

fn progress(what: &str) {
    use std::io::Write;
    eprint!("\r\x1b[2K  running: {what}");
    let _ = std::io::stderr().flush();
}

fn main() {
    let full = std::env::args().any(|a| a == "--full");
    let dur = if full { Duration::from_secs(3) } else { Duration::from_millis(700) };
    let n_uncontended = if full { 5_000_000 } else { 1_000_000 };

    calibrate_work(50.0);
    let _ = ns_per_tick();
    println!("hybrid-sync showdown ({} mode)", if full { "full" } else { "quick" });
    println!(
        "machine: {} CPUs; critical section ~50 ns ({} multiply-adds); {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        WORK_ITERS.load(Ordering::Relaxed),
        hybrid_sync::tuning()
    );

    // Uncontended.
    println!("\n== uncontended: one task, acquire + release (ns per op, best of 3)");
    println!("{:<13} {:>12} {:>12} {:>12} {:>9}", "contender", "read", "write", "mutex lock", "vs tokio");
    let mut rows = Vec::new();
    for_each_rwlock!(P => {
        progress(&format!("uncontended {}", P::NAME));
        rows.push((P::NAME, uncontended::<P>(false, n_uncontended), uncontended::<P>(true, n_uncontended)));
    });
    let mut mutex = Vec::new();
    for_each_mutex!(P => {
        progress(&format!("uncontended mutex {}", P::NAME));
        mutex.push(uncontended::<P>(true, n_uncontended));
    });
    eprint!("\r\x1b[2K");
    let (tr, tw, tm) = (rows[1].1, rows[1].2, mutex[1]);
    for ((name, r, w), m) in rows.iter().zip(&mutex) {
        println!(
            "{:<13} {:>9.1} ns {:>9.1} ns {:>9.1} ns {:>4.2}/{:.2}/{:.2}",
            name,
            r,
            w,
            m,
            r / tr,
            w / tw,
            m / tm
        );
    }

    let mut table = |title: &str, run: &mut dyn FnMut() -> Vec<Row>| {
        let rows = run();
        eprint!("\r\x1b[2K");
        print_table(title, &rows);
    };

    table("async write-heavy: 64 tasks on 2 workers, 100% writes (RwLock)", &mut || {
        let mut rows = Vec::new();
        for_each_rwlock!(P => {
            progress(&format!("async write-heavy {}", P::NAME));
            rows.push(async_contended::<P>(64, 2, 0, dur));
        });
        rows
    });
    table("async read-heavy: 64 tasks on 2 workers, 90% reads (RwLock)", &mut || {
        let mut rows = Vec::new();
        for_each_rwlock!(P => {
            progress(&format!("async read-heavy {}", P::NAME));
            rows.push(async_contended::<P>(64, 2, 900, dur));
        });
        rows
    });
    table("threads: 32 threads on 2 cores, blocking API (Mutex)", &mut || {
        let mut rows = Vec::new();
        for_each_mutex!(P => {
            progress(&format!("32 threads {}", P::NAME));
            rows.push(threads::<P>(32, dur));
        });
        rows
    });
    table("mixed: 4 blocking threads + 32 tasks on 2 workers, one lock (Mutex)", &mut || {
        let mut rows = Vec::new();
        for_each_mutex!(P => {
            progress(&format!("mixed {}", P::NAME));
            rows.push(mixed::<P>(4, 32, dur));
        });
        rows
    });
    println!();
}
