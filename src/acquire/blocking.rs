//! The blocking front end: spin, then park the calling thread.

use crate::layout::Layout;
use crate::raw::RawRwLock;
use crate::state::Kind;

/// Acquires `lock` in mode `kind`, parking the calling thread if it must.
///
/// # Panics
///
/// Inside an asynchronous execution context (a tokio task or `block_on`),
/// exactly where tokio's own `blocking_*` methods panic.
#[track_caller]
#[inline]
pub(crate) fn lock<L: Layout>(lock: &RawRwLock<L>, kind: Kind) {
    assert_blocking_allowed();
    if !lock.try_acquire_looking(kind) {
        lock.lock_blocking_contended(kind);
    }
}

/// Panics, with tokio's message and at the caller's location, if this thread
/// is driving async tasks.
///
/// tokio has no public query for "this thread is inside a runtime's async
/// context" (`Handle::try_current` also succeeds in `spawn_blocking` and
/// `block_in_place`, where blocking is fine). The check tokio's blocking
/// methods run is reachable only through one of them, so on threads that
/// do have a runtime context we run one on a tokio mutex that is free (one
/// of a small table, picked per thread; a collision only makes a thread wait
/// a few nanoseconds for another). It is a probe, not our wait: it locks and
/// unlocks an uncontended tokio mutex and parks nothing, about what one of
/// tokio's own blocking acquisitions costs. Plain threads, the common case,
/// pay two thread-local reads.
#[track_caller]
#[inline]
fn assert_blocking_allowed() {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    if in_runtime_context() {
        probe();
    }
}

/// Whether this thread has a tokio runtime context, asked so that threads
/// that run tokio tasks do not clone the runtime's handle each time.
///
/// `Handle::try_current` answers for every thread, but where there is a
/// handle it clones it: two atomic operations on a count that all of the
/// runtime's threads share. Asked on every acquisition, that cost a
/// `blocking_lock` + release from `spawn_blocking` 80 ns where a plain
/// thread pays 8 ns, and 230-570 ns with 2-4 such threads on 2 vCPUs, each
/// on a lock of its own. So a thread where a tokio task was running once
/// (a blocking-pool thread, or a worker whose task called `block_in_place`)
/// asks `task::try_id` first, a thread-local read: a task running here means
/// a context, and the probe decides. Plain threads, which never get the
/// mark, ask `try_current` alone as before (its "no" clones nothing), so
/// they pay one more thread-local read of a flag; the answer is the same
/// as `try_current`'s wherever a task runs with a runtime's handle. With
/// the probe mutexes a cache line apart as well, `spawn_blocking` threads
/// paid 70-80 ns with one or two of them (tokio's own `blocking_lock`:
/// 60-70 ns), and plain threads 7.6-8.1 ns as before (2026-12-02).
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
#[inline]
fn in_runtime_context() -> bool {
    use std::cell::Cell;
    std::thread_local! {
        /// A tokio task was seen running on this thread.
        static TASK_THREAD: Cell<bool> = const { Cell::new(false) };
    }
    if TASK_THREAD.get() && tokio::task::try_id().is_some() {
        return true;
    }
    if tokio::runtime::Handle::try_current().is_err() {
        return false;
    }
    if tokio::task::try_id().is_some() {
        TASK_THREAD.set(true);
    }
    true
}

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
#[track_caller]
#[cold]
fn probe() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const PROBES: usize = 16;
    /// One probe mutex per cache line (two, for the adjacent-line
    /// prefetcher), so that threads probing side by side do not share one.
    #[repr(align(128))]
    struct Probe(tokio::sync::Mutex<()>);
    static PROBE: [Probe; PROBES] = [const { Probe(tokio::sync::Mutex::const_new(())) }; PROBES];
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        // Relaxed: a spreading counter; only its uniqueness matters.
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % PROBES;
    }
    let index = INDEX.try_with(|i| *i).unwrap_or(0);
    // Dropped at once: this only runs tokio's "may this thread block?" check.
    drop(PROBE[index].0.blocking_lock());
}
