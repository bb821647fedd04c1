//! Torture, in the manner of the kernel's locktorture: writers and readers,
//! as threads AND tasks on one multi-thread runtime, on one lock, with random
//! critical sections (rare long holds among them), random cancellation
//! (timeouts, `select!`, half-polled futures dropped), `try_*`, owned guards
//! moved across tasks, downgrades, and panics inside critical sections.
//! Shadow counters check mutual exclusion on every acquisition, a watchdog
//! turns a hang into a failure that prints the lock's state, and the end
//! reports, per kind of user,
//!
//! ```text
//! Writes: Total: N Max/Min: a/b Fail: f Gave up: g   (STARVATION if max/2 > min)
//! ```
//!
//! where `Fail` counts exclusion violations (a writer that found anyone
//! inside, a reader that found a writer), which must be 0, and `Gave up`
//! the attempts that ended without the lock by design (`try_*` refused, a
//! timeout or `select!` won, a half-polled future dropped).
//!
//! then SUCCESS or FAILURE. `HYBRID_SYNC_TORTURE_SECS` sets the length of
//! each (default 20 s for the RwLock and 20 s for LockRef, run side by side;
//! `.ci/run` gives them 5 s in its feature builds after the default and
//! `fair` ones; minutes for a soak), and
//! `HYBRID_SYNC_TORTURE_SCALE` multiplies their threads, tasks and workers
//! (at 1, 4 threads and 2 workers each) for a machine with more cores.
//!
//! Built with `--cfg hybrid_sync_broken`, the library's writer fast path
//! ignores readers, and the one test here checks that the torture catches
//! it (`.ci/run` does this): a torture that cannot fail proves nothing.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
#[cfg(target_has_atomic = "64")]
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// A counter where the target has no 64-bit atomics (32-bit PowerPC, in
/// `.ci/cross`): a `u64` behind a mutex, with the two methods used here.
#[cfg(not(target_has_atomic = "64"))]
#[derive(Default)]
struct AtomicU64(std::sync::Mutex<u64>);

#[cfg(not(target_has_atomic = "64"))]
impl AtomicU64 {
    fn new(v: u64) -> Self {
        AtomicU64(std::sync::Mutex::new(v))
    }

    fn fetch_add(&self, v: u64, _: std::sync::atomic::Ordering) -> u64 {
        let mut n = self.0.lock().unwrap();
        *n += v;
        *n - v
    }

    fn load(&self, _: std::sync::atomic::Ordering) -> u64 {
        *self.0.lock().unwrap()
    }
}

// The broken build runs only the RwLock torture.
#[cfg_attr(hybrid_sync_broken, allow(unused_imports))]
use hybrid_sync::{LockRef, RwLock};

#[cfg_attr(hybrid_sync_broken, allow(dead_code))]
fn secs(default: f64) -> f64 {
    std::env::var("HYBRID_SYNC_TORTURE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// `HYBRID_SYNC_TORTURE_SCALE=k` multiplies every torture's threads, tasks
/// and runtime workers by k (default 1: sized for 2 CPUs), for a machine
/// with more cores.
fn scale() -> usize {
    match std::env::var("HYBRID_SYNC_TORTURE_SCALE") {
        Err(_) => 1,
        Ok(s) => s
            .parse()
            .ok()
            .filter(|&k| k > 0)
            .unwrap_or_else(|| panic!("HYBRID_SYNC_TORTURE_SCALE must be a whole number of at least 1, got {s:?}")),
    }
}

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// Who is inside, checked on every entry.
#[derive(Default)]
struct Shadow {
    writers: AtomicUsize,
    readers: AtomicUsize,
    /// Exclusion violations, by [user kind][write, read].
    violations: [[AtomicUsize; 2]; 2],
    acquisitions: AtomicU64,
}

impl Shadow {
    fn violations(&self) -> usize {
        self.violations.iter().flatten().map(|v| v.load(SeqCst)).sum()
    }
}

/// Which kind of user runs on this thread: the torture's own threads mark
/// themselves, everything else (the runtime's workers) runs tasks.
const TASK_USER: usize = 0;
const THREAD_USER: usize = 1;
std::thread_local! {
    static USER: std::cell::Cell<usize> = const { std::cell::Cell::new(TASK_USER) };
}

/// Marks a section as a writer's or a reader's, checking who else is in;
/// leaves it on drop (also while unwinding, before the guard declared ahead
/// of it releases the lock).
struct Inside<'a> {
    shadow: &'a Shadow,
    write: bool,
}

impl<'a> Inside<'a> {
    fn enter(shadow: &'a Shadow, write: bool) -> Self {
        let (mine, others) =
            if write { (&shadow.writers, &shadow.readers) } else { (&shadow.readers, &shadow.writers) };
        let before = mine.fetch_add(1, SeqCst);
        // A writer needs the place to itself; a reader only no writer.
        if (write && before != 0) || others.load(SeqCst) != 0 {
            shadow.violations[USER.with(|u| u.get())][usize::from(!write)].fetch_add(1, SeqCst);
        }
        shadow.acquisitions.fetch_add(1, SeqCst);
        Inside { shadow, write }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let mine = if self.write { &self.shadow.writers } else { &self.shadow.readers };
        mine.fetch_sub(1, SeqCst);
    }
}

fn writing(shadow: &Shadow) -> Inside<'_> {
    Inside::enter(shadow, true)
}

fn reading(shadow: &Shadow) -> Inside<'_> {
    Inside::enter(shadow, false)
}

/// Waits for every task (on `rt`) and thread, re-raising their panics.
fn join_all(
    rt: &tokio::runtime::Runtime,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
) {
    rt.block_on(async {
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
}

/// One user's tally.
#[derive(Default)]
struct Tally {
    writes: AtomicU64,
    reads: AtomicU64,
    gave_up: AtomicU64,
}

/// The bookkeeping of one write: the shadow check (left when the returned
/// marker drops), the increment, the counts.
fn write<'a>(value: &mut u64, shadow: &'a Shadow, writes: &AtomicU64, tally: &Tally) -> Inside<'a> {
    let w = writing(shadow);
    *value += 1;
    writes.fetch_add(1, SeqCst);
    tally.writes.fetch_add(1, SeqCst);
    w
}

/// A critical section: mostly tiny, sometimes microseconds, rarely a long
/// hold (locktorture's `long_hold`) that forces queueing and handoffs.
fn hold(rng: &mut Rng) {
    match rng.below(2000) {
        0 => std::thread::sleep(Duration::from_millis(3)),
        1..=60 => {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(4) {
                std::hint::spin_loop();
            }
        }
        _ => std::hint::black_box(()),
    }
}

const PANIC_MSG: &str = "torture: a deliberate panic inside a critical section";

fn quiet_deliberate_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<&str>().copied().unwrap_or("");
        if msg != PANIC_MSG {
            default(info);
        }
    }));
}

/// Aborts with the lock's state if acquisitions stop for 10 s.
fn watchdog(shadow: Arc<Shadow>, done: Arc<AtomicBool>, describe: impl Fn() -> String + Send + 'static) {
    std::thread::spawn(move || {
        let (mut last, mut still) = (u64::MAX, 0);
        while !done.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(250));
            let now = shadow.acquisitions.load(SeqCst);
            still = if now == last { still + 1 } else { 0 };
            last = now;
            if still >= 40 {
                // Straight to stderr: the test harness's capture would lose
                // an eprintln! when we abort.
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "FAILURE: no acquisition for 10 s: {}", describe());
                std::process::abort();
            }
        }
    });
}

/// Prints a locktorture report line per kind of user (`user`: `TASK_USER`
/// or `THREAD_USER`) and access; returns whether any was starved
/// (max/2 > min).
fn report(user: usize, tallies: &[Arc<Tally>], shadow: &Shadow) -> bool {
    if tallies.is_empty() {
        return false;
    }
    let kind = if user == THREAD_USER { "threads" } else { "tasks" };
    let gave_up: u64 = tallies.iter().map(|t| t.gave_up.load(SeqCst)).sum();
    let mut starved = false;
    for (what, access) in [("Writes", 0), ("Reads", 1)] {
        let v: Vec<u64> =
            tallies.iter().map(|t| if access == 0 { t.writes.load(SeqCst) } else { t.reads.load(SeqCst) }).collect();
        let (total, max, min) = (v.iter().sum::<u64>(), *v.iter().max().unwrap(), *v.iter().min().unwrap());
        let fails = shadow.violations[user][access].load(SeqCst);
        let starving = max / 2 > min;
        starved |= starving;
        eprintln!(
            "{kind:>7} {what}: Total: {total} Max/Min: {max}/{min} Fail: {fails} Gave up: {gave_up}{}",
            if starving { " STARVATION" } else { "" }
        );
    }
    starved
}

/// The RwLock torture. Returns the number of mutual-exclusion violations and
/// whether the final value matched the writes.
fn torture_rwlock(secs: f64) -> (usize, bool) {
    quiet_deliberate_panics();
    let lock = Arc::new(RwLock::new(0u64));
    let shadow = Arc::new(Shadow::default());
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    {
        let lock = lock.clone();
        watchdog(shadow.clone(), done.clone(), move || lock.__describe());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let thread_tallies: Vec<Arc<Tally>> = (0..4 * scale()).map(|_| Arc::default()).collect();
    let task_tallies: Vec<Arc<Tally>> = (0..24 * scale()).map(|_| Arc::default()).collect();

    let threads: Vec<_> = thread_tallies
        .iter()
        .enumerate()
        .map(|(id, tally)| {
            let (lock, shadow, writes, tally) = (lock.clone(), shadow.clone(), writes.clone(), tally.clone());
            std::thread::spawn(move || {
                USER.with(|u| u.set(THREAD_USER));
                let mut rng = Rng(0x9E37_79B9 + id as u64);
                while Instant::now() < deadline {
                    match rng.below(12) {
                        0..=2 => {
                            let mut g = lock.blocking_write();
                            let _w = write(&mut g, &shadow, &writes, &tally);
                            hold(&mut rng);
                        }
                        3 => match lock.try_write() {
                            Ok(mut g) => drop(write(&mut g, &shadow, &writes, &tally)),
                            Err(_) => {
                                tally.gave_up.fetch_add(1, SeqCst);
                            }
                        },
                        4 => {
                            // A panic inside the write section: the guard is
                            // dropped while unwinding and must release.
                            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                let mut g = lock.blocking_write();
                                let _w = write(&mut g, &shadow, &writes, &tally);
                                std::panic::panic_any(PANIC_MSG);
                            }));
                            assert!(r.is_err());
                        }
                        5 => {
                            let mut g = lock.blocking_write();
                            {
                                let _w = writing(&shadow);
                                *g += 1;
                            }
                            writes.fetch_add(1, SeqCst);
                            tally.writes.fetch_add(1, SeqCst);
                            let r = g.downgrade();
                            let _r = reading(&shadow);
                            hold(&mut rng);
                            drop(_r);
                            drop(r);
                        }
                        _ => {
                            let g = lock.blocking_read();
                            let _r = reading(&shadow);
                            // A real read of the data, which ThreadSanitizer
                            // checks against the writers' plain writes.
                            std::hint::black_box(*g);
                            tally.reads.fetch_add(1, SeqCst);
                            hold(&mut rng);
                        }
                    }
                }
            })
        })
        .collect();

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2 * scale()).enable_all().build().unwrap();
    let tasks: Vec<_> = task_tallies
        .iter()
        .enumerate()
        .map(|(id, tally)| {
            let (lock, shadow, writes, tally) = (lock.clone(), shadow.clone(), writes.clone(), tally.clone());
            rt.spawn(async move {
                let mut rng = Rng(0xC0FF_EE00 + id as u64);
                while Instant::now() < deadline {
                    match rng.below(14) {
                        0..=2 => {
                            let mut g = lock.write().await;
                            let w = write(&mut g, &shadow, &writes, &tally);
                            hold(&mut rng);
                            if rng.below(4) == 0 {
                                tokio::task::yield_now().await; // held across .await
                            }
                            drop(w);
                        }
                        3 => {
                            let t = Duration::from_micros(rng.below(300));
                            match tokio::time::timeout(t, lock.write()).await {
                                Ok(mut g) => drop(write(&mut g, &shadow, &writes, &tally)),
                                Err(_) => {
                                    tally.gave_up.fetch_add(1, SeqCst);
                                }
                            }
                        }
                        4 => {
                            tokio::select! {
                                g = lock.read() => {
                                    let r = reading(&shadow);
                                    tally.reads.fetch_add(1, SeqCst);
                                    hold(&mut rng);
                                    drop(r);
                                    drop(g);
                                }
                                _ = tokio::task::yield_now() => {
                                    tally.gave_up.fetch_add(1, SeqCst);
                                }
                            }
                        }
                        5 => {
                            // A half-polled future, dropped (or, if it
                            // got the lock at once, used).
                            let mut fut = Box::pin(lock.write());
                            match futures::FutureExt::now_or_never(&mut fut) {
                                Some(mut g) => drop(write(&mut g, &shadow, &writes, &tally)),
                                None => {
                                    tally.gave_up.fetch_add(1, SeqCst);
                                }
                            }
                        }
                        6 => {
                            // An owned guard moved into another task.
                            let mut g = lock.clone().write_owned().await;
                            let shadow2 = shadow.clone();
                            *g += 1;
                            writes.fetch_add(1, SeqCst);
                            tally.writes.fetch_add(1, SeqCst);
                            tokio::spawn(async move {
                                let _w = writing(&shadow2);
                                drop(_w);
                                drop(g);
                            })
                            .await
                            .unwrap();
                        }
                        7 => {
                            let g = lock.write().await;
                            drop(writing(&shadow));
                            let _read_guard = g.downgrade();
                            let _r = reading(&shadow);
                            tally.reads.fetch_add(1, SeqCst);
                            tokio::task::yield_now().await;
                        }
                        8 => {
                            // A panic inside a read section of a task.
                            let lock = lock.clone();
                            let shadow = shadow.clone();
                            let r = tokio::spawn(async move {
                                let _g = lock.read().await;
                                let _r = reading(&shadow);
                                std::panic::panic_any(PANIC_MSG);
                            })
                            .await;
                            assert!(r.is_err());
                            tally.reads.fetch_add(1, SeqCst);
                        }
                        _ => {
                            let g = lock.read().await;
                            let _r = reading(&shadow);
                            std::hint::black_box(*g);
                            tally.reads.fetch_add(1, SeqCst);
                            hold(&mut rng);
                        }
                    }
                }
            })
        })
        .collect();
    join_all(&rt, tasks, threads);
    done.store(true, SeqCst);

    report(THREAD_USER, &thread_tallies, &shadow);
    report(TASK_USER, &task_tallies, &shadow);
    let violations = shadow.violations();
    let exact = lock.try_read().is_ok_and(|v| *v == writes.load(SeqCst));
    eprintln!(
        "rwlock torture ({secs:.0} s, scale {}, {} acquisitions): {}",
        scale(),
        shadow.acquisitions.load(SeqCst),
        if violations == 0 && exact { "SUCCESS" } else { "FAILURE" }
    );
    (violations, exact)
}

#[cfg(not(hybrid_sync_broken))]
#[test]
fn rwlock_torture() {
    let (violations, exact) = torture_rwlock(secs(20.0));
    assert_eq!(violations, 0, "mutual exclusion violated");
    assert!(exact, "lost update");
}

/// The deliberately broken build (writers ignore readers on the fast path)
/// must be caught within seconds.
#[cfg(hybrid_sync_broken)]
#[test]
fn the_torture_catches_a_broken_lock() {
    let (violations, _) = torture_rwlock(4.0);
    assert!(violations > 0, "the torture did not notice a lock that lets writers in beside readers");
}

/// LockRef: threads and tasks mixing every count operation with lock
/// sections (some panicking), counts checked exactly at the end.
#[cfg(not(hybrid_sync_broken))]
#[test]
fn lockref_torture() {
    quiet_deliberate_panics();
    let r = Arc::new(LockRef::with_count(1, 0u64));
    let shadow = Arc::new(Shadow::default());
    let done = Arc::new(AtomicBool::new(false));
    let locked = Arc::new(AtomicU64::new(0));
    watchdog(shadow.clone(), done.clone(), || "LockRef torture stalled".into());
    let deadline = Instant::now() + Duration::from_secs_f64(secs(20.0));

    fn step(r: &LockRef<u64>, shadow: &Shadow, locked: &AtomicU64, rng: &mut Rng) {
        shadow.acquisitions.fetch_add(1, SeqCst);
        match rng.below(40) {
            0 => {
                let mut g = r.lock();
                let _w = writing(shadow);
                let c = g.count();
                *g += 1;
                locked.fetch_add(1, SeqCst);
                hold(rng);
                assert_eq!(g.count(), c, "the count moved under the lock");
            }
            1 => {
                let res = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    let mut g = r.lock();
                    let _w = writing(shadow);
                    *g += 1;
                    locked.fetch_add(1, SeqCst);
                    std::panic::panic_any(PANIC_MSG);
                }));
                assert!(res.is_err());
            }
            2..=12 => {
                r.get();
                r.put();
            }
            13..=22 => {
                assert!(r.get_not_zero());
                assert!(r.put_not_zero());
            }
            23..=30 => {
                assert!(r.get_not_dead());
                if r.put_return().is_none() {
                    r.put();
                }
            }
            _ => {
                r.get();
                assert!(r.put_or_lock().is_none(), "the count was at least 2");
            }
        }
    }

    let threads: Vec<_> = (0..4 * scale() as u64)
        .map(|id| {
            let (r, shadow, locked) = (r.clone(), shadow.clone(), locked.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0xABCD + id);
                while Instant::now() < deadline {
                    step(&r, &shadow, &locked, &mut rng);
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2 * scale()).enable_all().build().unwrap();
    let tasks: Vec<_> = (0..16 * scale() as u64)
        .map(|id| {
            let (r, shadow, locked) = (r.clone(), shadow.clone(), locked.clone());
            rt.spawn(async move {
                let mut rng = Rng(0xFEED + id);
                while Instant::now() < deadline {
                    if rng.below(10) == 0 {
                        // The async lock, cancelled now and then.
                        let t = Duration::from_micros(rng.below(200));
                        if let Ok(mut g) = tokio::time::timeout(t, r.lock_async()).await {
                            let _w = writing(&shadow);
                            *g += 1;
                            locked.fetch_add(1, SeqCst);
                        }
                    } else {
                        step(&r, &shadow, &locked, &mut rng);
                    }
                    if rng.below(16) == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    join_all(&rt, tasks, threads);
    done.store(true, SeqCst);
    let violations = shadow.violations();
    let ok = violations == 0 && r.count() == 1 && *r.lock() == locked.load(SeqCst);
    eprintln!(
        "lockref torture: {} operations, {} locked sections, count {}: {}",
        shadow.acquisitions.load(SeqCst),
        locked.load(SeqCst),
        r.count(),
        if ok { "SUCCESS" } else { "FAILURE" }
    );
    assert_eq!(violations, 0, "two holders of the LockRef lock");
    assert_eq!(r.count(), 1, "the count did not come back");
    assert_eq!(*r.lock(), locked.load(SeqCst), "a locked update was lost");
}

/// Mutex: 16 blocking threads and 64 tasks on 2 workers (times the scale), a fixed number of
/// increments each: the final count is exact and nobody overlaps.
#[cfg(not(hybrid_sync_broken))]
#[test]
fn mutex_count_is_exact_under_oversubscription() {
    let m = Arc::new(hybrid_sync::Mutex::new(0u64));
    let shadow = Arc::new(Shadow::default());
    let done = Arc::new(AtomicBool::new(false));
    {
        let m = m.clone();
        watchdog(shadow.clone(), done.clone(), move || m.__describe());
    }
    let per = 20_000u64;
    let threads: Vec<_> = (0..16 * scale())
        .map(|_| {
            let (m, shadow) = (m.clone(), shadow.clone());
            std::thread::spawn(move || {
                for _ in 0..per {
                    let mut g = m.blocking_lock();
                    let _w = writing(&shadow);
                    *g += 1;
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2 * scale()).build().unwrap();
    let tasks: Vec<_> = (0..64 * scale())
        .map(|_| {
            let (m, shadow) = (m.clone(), shadow.clone());
            rt.spawn(async move {
                for _ in 0..per / 4 {
                    let mut g = m.lock().await;
                    let _w = writing(&shadow);
                    *g += 1;
                }
            })
        })
        .collect();
    join_all(&rt, tasks, threads);
    done.store(true, SeqCst);
    assert_eq!(shadow.violations(), 0);
    let k = scale() as u64;
    assert_eq!(*m.try_lock().unwrap(), k * (16 * per + 64 * (per / 4)));
}
