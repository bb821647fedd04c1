//! Oversubscribed stress: blocking threads and async tasks (on a 2-worker
//! runtime) hammer one lock at once, with random hold times, random
//! cancellation (timeouts, `select!`, dropped half-polled futures), `try_*`,
//! owned guards moved across tasks and downgrades. Shadow counters check
//! mutual exclusion on every acquisition; a watchdog turns a hang into a
//! failure. `HYBRID_SYNC_STRESS_SECS` sets the length (default 2 s).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use hybrid_sync::{Mutex, RwLock};

fn secs() -> f64 {
    std::env::var("HYBRID_SYNC_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0)
}

/// xorshift64*: reproducible randomness without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Shadow {
    writers: AtomicUsize,
    readers: AtomicUsize,
    violations: AtomicUsize,
    acquisitions: AtomicU64,
}

impl Shadow {
    fn enter_write(&self) {
        if self.writers.fetch_add(1, SeqCst) != 0 || self.readers.load(SeqCst) != 0 {
            self.violations.fetch_add(1, SeqCst);
        }
        self.acquisitions.fetch_add(1, SeqCst);
    }
    fn leave_write(&self) {
        self.writers.fetch_sub(1, SeqCst);
    }
    fn enter_read(&self) {
        self.readers.fetch_add(1, SeqCst);
        if self.writers.load(SeqCst) != 0 {
            self.violations.fetch_add(1, SeqCst);
        }
        self.acquisitions.fetch_add(1, SeqCst);
    }
    fn leave_read(&self) {
        self.readers.fetch_sub(1, SeqCst);
    }
}

fn hold(rng: &mut Rng) {
    // Mostly tiny critical sections, sometimes a few microseconds, rarely a
    // long hold (locktorture's long_hold) to force queueing and handoff.
    match rng.below(1000) {
        0 => std::thread::sleep(Duration::from_millis(2)),
        1..=50 => {
            let t = Instant::now();
            while t.elapsed() < Duration::from_micros(5) {
                std::hint::spin_loop();
            }
        }
        _ => std::hint::black_box(()),
    }
}

/// Fails the test with the lock's state if the acquisition count stops moving.
fn watchdog(shadow: Arc<Shadow>, done: Arc<AtomicBool>, describe: impl Fn() -> String + Send + 'static) {
    std::thread::spawn(move || {
        let mut last = u64::MAX;
        let mut still = 0;
        while !done.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(500));
            let now = shadow.acquisitions.load(SeqCst);
            still = if now == last { still + 1 } else { 0 };
            last = now;
            if still >= 20 {
                eprintln!("no acquisition for 10 s: {}", describe());
                std::process::abort();
            }
        }
    });
}

#[test]
fn rwlock_threads_and_tasks_oversubscribed() {
    let lock = Arc::new(RwLock::new(0u64));
    let shadow = Arc::new(Shadow::default());
    let done = Arc::new(AtomicBool::new(false));
    let writes = Arc::new(AtomicU64::new(0));
    {
        let lock = lock.clone();
        watchdog(shadow.clone(), done.clone(), move || lock.__describe());
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs());

    let threads: Vec<_> = (0..6u64)
        .map(|id| {
            let (lock, shadow, writes) = (lock.clone(), shadow.clone(), writes.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x9E37_79B9 + id);
                while Instant::now() < deadline {
                    match rng.below(10) {
                        0..=2 => {
                            let mut g = lock.blocking_write();
                            shadow.enter_write();
                            *g += 1;
                            writes.fetch_add(1, SeqCst);
                            hold(&mut rng);
                            shadow.leave_write();
                        }
                        3 => {
                            if let Ok(mut g) = lock.try_write() {
                                shadow.enter_write();
                                *g += 1;
                                writes.fetch_add(1, SeqCst);
                                shadow.leave_write();
                            }
                        }
                        4 => {
                            let mut g = lock.blocking_write();
                            shadow.enter_write();
                            *g += 1;
                            writes.fetch_add(1, SeqCst);
                            shadow.leave_write();
                            let r = g.downgrade();
                            shadow.enter_read();
                            hold(&mut rng);
                            shadow.leave_read();
                            drop(r);
                        }
                        _ => {
                            let _g = lock.blocking_read();
                            shadow.enter_read();
                            hold(&mut rng);
                            shadow.leave_read();
                        }
                    }
                }
            })
        })
        .collect();

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..48u64)
            .map(|id| {
                let (lock, shadow, writes) = (lock.clone(), shadow.clone(), writes.clone());
                tokio::spawn(async move {
                    let mut rng = Rng(0xC0FF_EE00 + id);
                    while Instant::now() < deadline {
                        match rng.below(12) {
                            0..=2 => {
                                let mut g = lock.write().await;
                                shadow.enter_write();
                                *g += 1;
                                writes.fetch_add(1, SeqCst);
                                hold(&mut rng);
                                if rng.below(4) == 0 {
                                    // Held across an await.
                                    tokio::task::yield_now().await;
                                }
                                shadow.leave_write();
                            }
                            3 => {
                                // Random cancellation by timeout.
                                let t = Duration::from_micros(rng.below(200));
                                if let Ok(mut g) = tokio::time::timeout(t, lock.write()).await {
                                    shadow.enter_write();
                                    *g += 1;
                                    writes.fetch_add(1, SeqCst);
                                    shadow.leave_write();
                                }
                            }
                            4 => {
                                // Cancellation by select! against a yield.
                                tokio::select! {
                                    g = lock.read() => {
                                        shadow.enter_read();
                                        hold(&mut rng);
                                        shadow.leave_read();
                                        drop(g);
                                    }
                                    _ = tokio::task::yield_now() => {}
                                }
                            }
                            5 => {
                                // A half-polled future, dropped.
                                let mut fut = Box::pin(lock.write());
                                if let Some(mut g) = futures::FutureExt::now_or_never(&mut fut) {
                                    shadow.enter_write();
                                    *g += 1;
                                    writes.fetch_add(1, SeqCst);
                                    shadow.leave_write();
                                }
                            }
                            6 => {
                                // An owned guard moved into another task.
                                let mut g = lock.clone().write_owned().await;
                                shadow.enter_write();
                                *g += 1;
                                writes.fetch_add(1, SeqCst);
                                let shadow = shadow.clone();
                                tokio::spawn(async move {
                                    shadow.leave_write();
                                    drop(g);
                                })
                                .await
                                .unwrap();
                            }
                            7 => {
                                let g = lock.write().await;
                                shadow.enter_write();
                                shadow.leave_write();
                                let r = g.downgrade();
                                shadow.enter_read();
                                tokio::task::yield_now().await;
                                shadow.leave_read();
                                drop(r);
                            }
                            _ => {
                                let _g = lock.read().await;
                                shadow.enter_read();
                                hold(&mut rng);
                                shadow.leave_read();
                            }
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    done.store(true, SeqCst);

    assert_eq!(shadow.violations.load(SeqCst), 0, "mutual exclusion violated");
    assert_eq!(*lock.try_read().unwrap(), writes.load(SeqCst), "lost update");
    assert!(lock.try_write().is_ok(), "lock left held: {lock:?}");
    eprintln!("rwlock stress: {} acquisitions, {} writes", shadow.acquisitions.load(SeqCst), writes.load(SeqCst));
}

#[test]
fn mutex_count_is_exact_under_oversubscription() {
    let m = Arc::new(Mutex::new(0u64));
    let shadow = Arc::new(Shadow::default());
    let done = Arc::new(AtomicBool::new(false));
    {
        let m = m.clone();
        watchdog(shadow.clone(), done.clone(), move || m.__describe());
    }
    let per = 20_000u64;
    let threads: Vec<_> = (0..16)
        .map(|_| {
            let (m, shadow) = (m.clone(), shadow.clone());
            std::thread::spawn(move || {
                for _ in 0..per {
                    let mut g = m.blocking_lock();
                    shadow.enter_write();
                    *g += 1;
                    shadow.leave_write();
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (m, shadow) = (m.clone(), shadow.clone());
                tokio::spawn(async move {
                    for _ in 0..per / 4 {
                        let mut g = m.lock().await;
                        shadow.enter_write();
                        *g += 1;
                        shadow.leave_write();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    done.store(true, SeqCst);
    assert_eq!(shadow.violations.load(SeqCst), 0);
    assert_eq!(*m.try_lock().unwrap(), 16 * per + 64 * (per / 4));
}
