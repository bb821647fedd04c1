//! The async front end: a future that owns a queue node.
//!
//! Cancel safety is structural: whatever state the future is in when it is
//! dropped, its `Drop` puts things right. A queued node is unlinked (and if
//! it was the head, the new head is let in or woken); a node that was
//! granted the lock, or a lock taken while the coop budget said "yield",
//! is released on the future's behalf, which passes it on.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, ready};

use crate::config::{SPIN, SPIN_LIMIT_ASYNC_NS};
use crate::layout::{Inline, Layout};
use crate::raw::RawRwLock;
use crate::state::Kind;
use crate::stats::Stamp;
use crate::wait_queue::{Task, Waiter};

#[derive(PartialEq, Eq)]
enum Phase {
    /// Not polled yet, or polled and not queued.
    Start,
    /// Not polled yet, and the caller's fast path has just failed: the
    /// first poll goes straight to the contended path.
    Contend,
    /// The node is in the queue.
    Queued,
    /// The lock is ours, but the coop budget made us yield before returning.
    Held,
    /// Returned `Ready`: the caller owns the lock now.
    Done,
}

/// Acquires `lock` in mode `kind`; resolves once the lock is held.
pub(crate) struct Acquire<'a, L: Layout = Inline> {
    lock: &'a RawRwLock<L>,
    node: Waiter,
    phase: Phase,
    /// When the contended path started (`stats` feature; zero-sized without).
    since: Stamp,
}

// SAFETY: the future holds a shared reference to a `RawRwLock` (Sync) and a
// `Waiter`, whose shared parts are only touched under the queue lock or by
// the future itself; moving the future between threads or polling it from
// one while another holds a `&` to it is therefore sound, as for tokio's
// `Acquire`.
unsafe impl<L: Layout> Send for Acquire<'_, L> {}
// SAFETY: `&Acquire` exposes nothing: every method takes `Pin<&mut Self>`.
unsafe impl<L: Layout> Sync for Acquire<'_, L> {}

impl<'a, L: Layout> Acquire<'a, L> {
    #[inline]
    pub(crate) fn new(lock: &'a RawRwLock<L>, kind: Kind) -> Self {
        Acquire { lock, node: Waiter::new(kind, lock.key()), phase: Phase::Start, since: Stamp::unset() }
    }

    /// For a caller whose own [`try_acquire`](RawRwLock::try_acquire) has
    /// just failed: the first poll does not try the word again. A second
    /// compare-and-swap on a held lock only takes its cache line from the
    /// owner, who is inside its critical section.
    #[inline]
    pub(crate) fn after_failed_try(lock: &'a RawRwLock<L>, kind: Kind) -> Self {
        Acquire { lock, node: Waiter::new(kind, lock.key()), phase: Phase::Contend, since: Stamp::unset() }
    }
}

impl<L: Layout> Future for Acquire<'_, L> {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: nothing is moved out of `this`; the node stays where it is
        // for as long as it can be linked (until our Drop unlinks it).
        let this = unsafe { self.get_unchecked_mut() };
        match this.phase {
            Phase::Start | Phase::Contend => {
                let kind = this.node.kind;
                if this.phase == Phase::Contend || !this.lock.try_acquire(kind) {
                    this.since = Stamp::now();
                    if !this.lock.lock_contended(&this.node, spin_limit(), || Task::Waker(cx.waker().clone())) {
                        this.phase = Phase::Queued;
                        return Poll::Pending;
                    }
                    this.lock.acquired_after(kind, this.since);
                }
            }
            Phase::Queued => {
                ready!(this.lock.poll_queued(&this.node, cx.waker(), spin_limit()));
                this.lock.acquired_after(this.node.kind, this.since);
            }
            Phase::Held => {}
            Phase::Done => panic!("lock future polled after completion"),
        }
        // The lock is ours. As tokio's locks do, charge the task's coop budget
        // only now, so a spent budget keeps our place: we yield holding the
        // lock, and a drop from here releases it (tokio#8371).
        this.phase = Phase::Held;
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        coop.made_progress();
        this.phase = Phase::Done;
        Poll::Ready(())
    }
}

impl<L: Layout> Drop for Acquire<'_, L> {
    fn drop(&mut self) {
        match self.phase {
            Phase::Queued => self.lock.cancel(&self.node),
            // SAFETY: the lock was taken for this future and never handed
            // to a guard.
            Phase::Held => unsafe { self.lock.unlock(self.node.kind) },
            Phase::Start | Phase::Contend | Phase::Done => {}
        }
    }
}

/// How long an async acquirer may spin here.
///
/// On a current-thread runtime the owner can only run after this task
/// returns `Pending`, so spinning can never succeed: don't. The runtime
/// flavour is looked up once per thread every 256 contended acquisitions,
/// because `Handle::try_current` clones the runtime handle.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
fn spin_limit() -> u32 {
    use std::cell::Cell;
    std::thread_local! {
        /// (acquisitions left before the next look-up, on a current-thread runtime)
        static FLAVOR: Cell<(u8, bool)> = const { Cell::new((0, false)) };
    }
    if !SPIN {
        return 0;
    }
    let current_thread = FLAVOR.with(|cell| {
        let (left, current_thread) = cell.get();
        if left > 0 {
            cell.set((left - 1, current_thread));
            return current_thread;
        }
        let current_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread);
        cell.set((u8::MAX, current_thread));
        current_thread
    });
    if current_thread { 0 } else { SPIN_LIMIT_ASYNC_NS }
}

#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
fn spin_limit() -> u32 {
    if SPIN { SPIN_LIMIT_ASYNC_NS } else { 0 }
}
