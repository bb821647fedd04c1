//! The loops that `benches/instructions.sh` counts instructions of under
//! callgrind: each runs one case `n` times on one thread, so its count is
//! the same in every run, whatever the host is doing. Run alone it prints
//! the case's time per operation.
//!
//! ```text
//! cargo bench --bench instructions -- <case> <peer> <n>   # e.g. uncontended-read hybrid-sync 1000000
//! benches/instructions.sh                                   # the table, default and `fair` builds
//! ```
//!
//! Cases:
//!
//! * `uncontended-read`, `uncontended-write`, `uncontended-lock`: acquire
//!   and release a free lock, inside a task of a current-thread tokio
//!   runtime for the async locks (so tokio's coop charge is counted, as the
//!   showdown's uncontended table pays it), on the thread for parking_lot,
//!   std and hybrid-sync's `blocking-*` peer.
//! * `hand-over`: 64 tasks on `futures::executor::LocalPool`, each taking
//!   the write lock of one `RwLock` and holding it over a yield (the
//!   showdown's hold-across-`.await` workload on one thread, without
//!   tokio's scheduler): every acquisition queues, every release passes
//!   the lock on. The executor's own instructions are counted too, the
//!   same for every lock.
//!
//! Peers: `hybrid-sync`, `tokio`, `async-lock`, `parking_lot` (0.13),
//! `parking_lot-0.12`, `std`, and `hybrid-blocking` (hybrid-sync's
//! `blocking_*` methods on the thread).

use std::cell::Cell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::Instant;

use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;

#[path = "../examples/common/yield_now.rs"]
mod yield_now;
use yield_now::YieldNow;

/// The uncontended loop of an async lock, inside one current-thread task.
macro_rules! uncontended_async {
    ($n:expr, $lock:expr, $acquire:ident) => {{
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let lock = $lock;
            for _ in 0..$n {
                black_box(&*lock.$acquire().await);
            }
        })
    }};
}

/// The uncontended loop of a lock used from the thread.
macro_rules! uncontended_blocking {
    ($n:expr, $lock:expr, $acquire:ident) => {{
        let lock = $lock;
        for _ in 0..$n {
            black_box(&*lock.$acquire());
        }
    }};
}

/// 64 tasks handing one write lock around, each holding it over a yield.
macro_rules! hand_over {
    ($n:expr, $lock:expr) => {{
        let lock = Rc::new($lock);
        let left = Rc::new(Cell::new($n));
        let mut pool = LocalPool::new();
        for _ in 0..64 {
            let (lock, left) = (lock.clone(), left.clone());
            pool.spawner()
                .spawn_local(async move {
                    while left.get() > 0 {
                        let mut guard = lock.write().await;
                        *guard += 1;
                        left.set(left.get().saturating_sub(1));
                        YieldNow(false).await;
                        drop(guard);
                    }
                })
                .unwrap();
        }
        pool.run();
    }};
}

fn main() {
    // `cargo bench` passes `--bench`; the case and count are the others.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let [case, peer, n] = &args[..] else {
        // A plain `cargo bench` runs every bench target with no arguments:
        // nothing to count then.
        eprintln!(
            "instructions: usage: <case> <peer> <n> (benches/instructions.rs); benches/instructions.sh runs them"
        );
        return;
    };
    let n: u64 = n.parse().expect("n: a number of operations");
    let start = Instant::now();
    match (case.as_str(), peer.as_str()) {
        ("uncontended-read", "hybrid-sync") => uncontended_async!(n, hybrid_sync::RwLock::new(0u64), read),
        ("uncontended-write", "hybrid-sync") => uncontended_async!(n, hybrid_sync::RwLock::new(0u64), write),
        ("uncontended-lock", "hybrid-sync") => uncontended_async!(n, hybrid_sync::Mutex::new(0u64), lock),
        ("uncontended-read", "tokio") => uncontended_async!(n, tokio::sync::RwLock::new(0u64), read),
        ("uncontended-write", "tokio") => uncontended_async!(n, tokio::sync::RwLock::new(0u64), write),
        ("uncontended-lock", "tokio") => uncontended_async!(n, tokio::sync::Mutex::new(0u64), lock),
        ("uncontended-read", "async-lock") => uncontended_async!(n, async_lock::RwLock::new(0u64), read),
        ("uncontended-write", "async-lock") => uncontended_async!(n, async_lock::RwLock::new(0u64), write),
        ("uncontended-lock", "async-lock") => uncontended_async!(n, async_lock::Mutex::new(0u64), lock),
        ("uncontended-read", "hybrid-blocking") => {
            uncontended_blocking!(n, hybrid_sync::RwLock::new(0u64), blocking_read)
        }
        ("uncontended-write", "hybrid-blocking") => {
            uncontended_blocking!(n, hybrid_sync::RwLock::new(0u64), blocking_write)
        }
        ("uncontended-lock", "hybrid-blocking") => {
            uncontended_blocking!(n, hybrid_sync::Mutex::new(0u64), blocking_lock)
        }
        ("uncontended-read", "parking_lot") => uncontended_blocking!(n, parking_lot::RwLock::new(0u64), read),
        ("uncontended-write", "parking_lot") => uncontended_blocking!(n, parking_lot::RwLock::new(0u64), write),
        ("uncontended-lock", "parking_lot") => uncontended_blocking!(n, parking_lot::Mutex::new(0u64), lock),
        ("uncontended-read", "parking_lot-0.12") => uncontended_blocking!(n, parking_lot_012::RwLock::new(0u64), read),
        ("uncontended-write", "parking_lot-0.12") => {
            uncontended_blocking!(n, parking_lot_012::RwLock::new(0u64), write)
        }
        ("uncontended-lock", "parking_lot-0.12") => uncontended_blocking!(n, parking_lot_012::Mutex::new(0u64), lock),
        ("uncontended-read", "std") => {
            let lock = std::sync::RwLock::new(0u64);
            for _ in 0..n {
                black_box(&*lock.read().unwrap());
            }
        }
        ("uncontended-write", "std") => {
            let lock = std::sync::RwLock::new(0u64);
            for _ in 0..n {
                black_box(&*lock.write().unwrap());
            }
        }
        ("uncontended-lock", "std") => {
            let lock = std::sync::Mutex::new(0u64);
            for _ in 0..n {
                black_box(&*lock.lock().unwrap());
            }
        }
        ("hand-over", "hybrid-sync") => hand_over!(n, hybrid_sync::RwLock::new(0u64)),
        ("hand-over", "tokio") => hand_over!(n, tokio::sync::RwLock::new(0u64)),
        ("hand-over", "async-lock") => hand_over!(n, async_lock::RwLock::new(0u64)),
        _ => {
            eprintln!("no case {case:?} for peer {peer:?} (see the source's docs)");
            std::process::exit(2);
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    println!("{case} {peer}: {ns:.1} ns/op");
}
