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
/// do have a runtime context we run the cheapest one there is: `blocking_recv`
/// on a channel that is closed and empty, which runs the check and returns
/// `None` at once (see [`probe`]). Plain threads, the common case, pay two
/// thread-local reads.
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
/// 60-70 ns), and plain threads 7.6-8.1 ns as before (2026-12-02); with
/// the closed channel as the probe, 29.6-29.9 ns against tokio's
/// 49.3-49.9 ns (the faster Intel host of 2026-12-03).
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

/// Runs tokio's "may this thread block?" check: panics with tokio's message,
/// at the caller's location, on a thread that drives async tasks.
///
/// The check is the first thing any of tokio's `blocking_*` methods does; the
/// rest is what sets the cost. This one receives from an unbounded channel
/// whose sender is gone and which holds nothing, so its future is ready at
/// the first poll with `None`: a few loads, and no atomic operation on
/// anything shared. From `spawn_blocking` a `blocking_lock` + release costs
/// 30 ns with it against 63 ns with the probe before it, `blocking_lock` on
/// a free `tokio::sync::Mutex` (17 ns for this probe alone against 47 ns in
/// a scratch loop), and tokio's own `blocking_lock` 49 ns (2026-12-03; see
/// `docs/performance.md`, "The blocking check, and three more looks").
///
/// Each thread that probes keeps one such receiver (`blocking_recv` takes it
/// by `&mut`): allocated at its first probe, as tokio allocates its own
/// per-thread parker at the first blocking call on a thread, and moved out
/// of the thread-local for the call, so that the panic is raised here, where
/// `#[track_caller]` reaches, and not inside a closure. A thread whose
/// thread-locals are already torn down (a lock taken in another
/// thread-local's destructor, on a thread with a runtime context) probes
/// with a channel of its own each time.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
#[track_caller]
#[cold]
fn probe() {
    use std::cell::Cell;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
    std::thread_local! {
        /// This thread's closed, empty channel; `None` before its first probe,
        /// and while a probe has it out.
        static CLOSED: Cell<Option<UnboundedReceiver<()>>> = const { Cell::new(None) };
    }
    let mut rx = CLOSED.try_with(Cell::take).ok().flatten().unwrap_or_else(|| unbounded_channel().1);
    // The sender was dropped with the tuple above: closed, so `None` at once
    // (or tokio's panic, which drops the receiver; the next probe makes one).
    let received = rx.blocking_recv();
    debug_assert!(received.is_none(), "the probe channel has no sender");
    // Err: the thread-locals went away meanwhile; the receiver drops here.
    let _ = CLOSED.try_with(|c| c.set(Some(rx)));
}
