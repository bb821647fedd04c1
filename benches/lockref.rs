//! Seed 001's experiment under criterion: two threads each take and drop a
#![allow(missing_docs)] // criterion_group! generates an undocumented function
//! reference to one shared count, as `LockRef` get+put against a bare
//! `AtomicU64` (the floor), `Arc` clone+drop and a count under a spinlock,
//! a parking_lot or a std mutex; then the mixed case, where 1 in 1000
//! operations takes the lock for a short section.
//!
//! ```text
//! cargo bench --bench lockref
//! ```
//!
//! Each iteration is one get+put pair per thread; criterion reports the
//! time per pair of each thread (both run at once), so lower is better and
//! the ratios between rows are the numbers to compare. The showdown example
//! prints the same experiment as a table with CPU time per pair.

use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

#[path = "../examples/common/peers.rs"]
mod peers;
use peers::RefCount;

const THREADS: usize = 2;

/// Runs `iters` operations on each of `THREADS` threads at once and returns
/// the wall time of the slowest.
fn run<P: RefCount>(count: &P, iters: u64, lock_every: u64) -> Duration {
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for i in 1..=iters {
                        if lock_every > 0 && i % lock_every == 0 {
                            count.locked(&|| {
                                std::hint::black_box(i.wrapping_mul(0x9E37_79B9));
                            });
                        } else {
                            count.get_put();
                        }
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).max().unwrap()
    })
}

fn bench_group(c: &mut Criterion, name: &str, lock_every: u64) {
    let mut group = c.benchmark_group(name);
    group.sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    macro_rules! contender {
        ($p:ty) => {{
            let count = <$p as RefCount>::new();
            if (lock_every == 0 || count.locked(&|| {}).is_some()) && <$p as RefCount>::NAME != "tokio" {
                group.bench_function(<$p as RefCount>::NAME, |b| b.iter_custom(|iters| run(&count, iters, lock_every)));
            }
        }};
    }
    contender!(peers::LockRefCount);
    contender!(peers::AtomicCount);
    contender!(peers::ArcCount);
    contender!(peers::SpinCount);
    contender!(peers::PlMutexCount);
    contender!(peers::Pl012MutexCount);
    contender!(peers::StdMutexCount);
    group.finish();
}

fn refcount(c: &mut Criterion) {
    bench_group(c, "refcount get+put, 2 threads", 0);
    bench_group(c, "refcount mixed (1 in 1000 locks), 2 threads", 1000);
}

criterion_group!(benches, refcount);
criterion_main!(benches);
