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
    if !lock.try_acquire(kind) {
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
/// do have a runtime handle we run one on a tokio mutex that is free (one of
/// a small table, picked per thread; a collision only makes a thread wait a
/// few nanoseconds for another). It is a probe, not our wait: it locks and
/// unlocks an uncontended tokio mutex and parks nothing. Plain threads, the
/// common case, pay one thread-local read.
#[track_caller]
#[inline]
fn assert_blocking_allowed() {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    if tokio::runtime::Handle::try_current().is_ok() {
        probe();
    }
}

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
#[track_caller]
#[cold]
fn probe() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const PROBES: usize = 16;
    static PROBE: [tokio::sync::Mutex<()>; PROBES] = [const { tokio::sync::Mutex::const_new(()) }; PROBES];
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    std::thread_local! {
        static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed) % PROBES;
    }
    let index = INDEX.try_with(|i| *i).unwrap_or(0);
    // Dropped at once: this only runs tokio's "may this thread block?" check.
    drop(PROBE[index].blocking_lock());
}
