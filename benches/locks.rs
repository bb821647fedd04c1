//! The locks side by side under criterion: hybrid-sync, tokio::sync,
//! async-lock, parking_lot and std behind the showdown's `Peer` trait
//! (`examples/common/peers.rs`), so both run exactly the same code.
//!
//! ```text
//! cargo bench --bench locks                 # all groups; HTML in target/criterion/report/index.html
//! cargo bench --bench locks -- uncontended  # one group
//! ```
//!
//! Groups (one line per contender in each, so criterion's reports plot them
//! together):
//! - `uncontended/{read,write}`: one task, acquire + release; time per pair.
//! - `async-write-heavy`, `async-read-heavy`: 16 tasks on a two-worker tokio
//!   runtime share one RwLock (100% and 10% writes); time per operation.
//!   Nothing is awaited between operations but the lock, so the coop budget
//!   of tokio's locks and hybrid-sync's makes each task yield every 128
//!   acquisitions (the showdown's `async tight loop`); async-lock's,
//!   parking_lot's and std's tasks never yield.
//!   Blocking peers (parking_lot, std) block their worker while they wait,
//!   as they would in a real server.
//! - `threads-8`: 8 threads on the blocking API of one Mutex (tokio's and
//!   async-lock's blocking calls included); time per operation.
//!
//! The showdown example (`cargo run --release --example showdown`) runs the
//! same workloads with CPU time per operation and wait-time percentiles.

#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "../examples/common/peers.rs"]
mod peers;
use peers::Peer;

fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().expect("a runtime")
}

/// `tasks` tasks share `ops` operations on one lock, one in `write_every`
/// a write; returns the wall time of the whole run.
fn async_run<P: Peer>(rt: &tokio::runtime::Runtime, tasks: u64, ops: u64, write_every: u64) -> Duration {
    let lock = Arc::new(P::new(0));
    let per_task = ops.div_ceil(tasks);
    let start = Instant::now();
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let lock = Arc::clone(&lock);
                tokio::spawn(async move {
                    for i in 0..per_task {
                        if i % write_every == 0 {
                            lock.write(|v| {
                                *v += 1;
                                *v
                            })
                            .await;
                        } else {
                            lock.read(|v| *v).await;
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.expect("a bench task panicked");
        }
    });
    start.elapsed()
}

/// `threads` threads share `ops` blocking writes on one lock.
fn thread_run<P: Peer>(threads: u64, ops: u64) -> Duration {
    let lock = P::new(0);
    let per_thread = ops.div_ceil(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..per_thread {
                    lock.blocking_write(|v| {
                        *v += 1;
                        *v
                    });
                }
            });
        }
    });
    start.elapsed()
}

fn uncontended(c: &mut Criterion) {
    let rt = runtime(1);
    let mut group = c.benchmark_group("uncontended");
    group.throughput(Throughput::Elements(1));
    macro_rules! each {
        ($p:ident) => {{
            let runs: [(&str, fn(&$p, &tokio::runtime::Runtime, u64)); 2] =
                [("read", $p::uncontended_read), ("write", $p::uncontended_write)];
            for (what, run) in runs {
                group.bench_function(BenchmarkId::new(what, $p::NAME), |b| {
                    let lock = $p::new(0);
                    b.iter_custom(|iters| {
                        let start = Instant::now();
                        run(&lock, &rt, iters);
                        start.elapsed()
                    })
                });
            }
        }};
    }
    for_each_rwlock!(P => each!(P));
    group.finish();
}

fn async_contended(c: &mut Criterion) {
    let rt = runtime(2);
    for (name, write_every) in [("async-write-heavy", 1), ("async-read-heavy", 10)] {
        let mut group = c.benchmark_group(name);
        group.throughput(Throughput::Elements(1));
        for_each_rwlock!(P => {
            group.bench_function(P::NAME, |b| b.iter_custom(|iters| async_run::<P>(&rt, 16, iters, write_every)));
        });
        group.finish();
    }
}

fn threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("threads-8");
    group.throughput(Throughput::Elements(1));
    for_each_mutex!(P => {
        group.bench_function(P::NAME, |b| b.iter_custom(|iters| thread_run::<P>(8, iters)));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = uncontended, async_contended, threads
}
criterion_main!(benches);
