//! A pool of plain threads and a crowd of async tasks sharing one lock.
//!
//! The threads stand for CPU-bound workers (or a C library's callbacks):
//! they use `blocking_lock()`, which spins briefly and then parks the thread.
//! The tasks run on a tokio runtime and use `lock().await`, which spins
//! briefly and then yields the worker to other tasks. Both queue in the same
//! FIFO wait queue, so neither side starves the other. tokio's `Mutex` has
//! the same two calls but never spins; a parking_lot mutex cannot be waited
//! for by a task without blocking its worker thread.
//!
//! ```text
//! cargo run --release --example threads_and_tasks [-- THREADS TASKS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use hybrid_sync::Mutex;

/// What the lock protects: a ledger both sides write to.
#[derive(Default)]
struct Ledger {
    by_threads: u64,
    by_tasks: u64,
    /// The last writer, to count how often the lock changed sides.
    last_was_thread: bool,
    switches: u64,
    checksum: u64,
}

impl Ledger {
    fn record(&mut self, from_thread: bool, value: u64) {
        if from_thread {
            self.by_threads += 1;
        } else {
            self.by_tasks += 1;
        }
        if from_thread != self.last_was_thread {
            self.switches += 1;
            self.last_was_thread = from_thread;
        }
        // A few dependent operations: a short but real critical section.
        self.checksum = self.checksum.rotate_left(5) ^ value.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap_or_else(|_| panic!("THREADS and TASKS are counts, got {a:?}")));
    let threads = args.next().unwrap_or(4);
    let tasks = args.next().unwrap_or(64);
    let run_for = Duration::from_secs(2);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let start = Instant::now();

    // The thread pool: blocking acquisitions from plain threads.
    let pool: Vec<_> = (0..threads)
        .map(|i| {
            let ledger = Arc::clone(&ledger);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while start.elapsed() < run_for {
                    ledger.blocking_lock().record(true, (i as u64) << 32 | n);
                    n += 1;
                    // Work outside the lock.
                    std::hint::black_box((0..200).fold(n, |a, b| a ^ (a << 1) ^ b));
                }
                n
            })
        })
        .collect();

    // The tasks: async acquisitions on a two-worker runtime, with awaits
    // between them as a request handler would have.
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a tokio runtime");
    let task_ops: u64 = rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|i| {
                let ledger = Arc::clone(&ledger);
                tokio::spawn(async move {
                    let mut n = 0u64;
                    while start.elapsed() < run_for {
                        ledger.lock().await.record(false, (i as u64) << 32 | n);
                        n += 1;
                        if n.is_multiple_of(16) {
                            tokio::task::yield_now().await;
                        }
                    }
                    n
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.await.expect("a task panicked");
        }
        total
    });
    let thread_ops: u64 = pool.into_iter().map(|t| t.join().expect("a thread panicked")).sum();
    let elapsed = start.elapsed().as_secs_f64();

    let ledger = ledger.blocking_lock();
    assert_eq!(ledger.by_threads, thread_ops, "every thread acquisition was recorded once");
    assert_eq!(ledger.by_tasks, task_ops, "every task acquisition was recorded once");
    println!("{threads} threads and {tasks} tasks shared one hybrid_sync::Mutex for {elapsed:.1} s:");
    println!("  threads: {:>10} acquisitions ({:.2} M/s)", thread_ops, thread_ops as f64 / elapsed / 1e6);
    println!("  tasks:   {:>10} acquisitions ({:.2} M/s)", task_ops, task_ops as f64 / elapsed / 1e6);
    println!("  the lock changed sides {} times; checksum {:016x}", ledger.switches, ledger.checksum);
}
