//! tokio's cooperative-scheduling budget, charged once per acquisition.
//!
//! The charge comes after the lock word is taken, inside the critical
//! section, although it is a look-up of tokio's thread-local context that
//! costs about as much as the uncontended lock and release together (7-13 ns
//! on the development VMs). Charging first, as tokio did before tokio#8371,
//! and keeping only `made_progress` (a store to a local) after the CAS was
//! measured on 2026-12-01 in interleaved rounds against parking_lot: async
//! write-heavy fell from 0.78x to 0.68x (medians of 6 rounds; ranges
//! 0.68-0.80x and 0.64-0.71x) and seed 004's 100 tasks from 0.80x to 0.68x
//! (5 rounds); read-heavy (0.84x to 0.89x) and mixed moved within their
//! spread. The likely reason: a lock that 64 tasks on 2 workers contend is
//! always held, an owner's worker runs 16 sections back to back, and it
//! leaves the lock free between each release and its next CAS. A charge in
//! that window widens the gap in which a spinner on the other worker takes
//! the lock, and each such change of worker moves the lock's cache line and
//! the data's. (On the Intel VM of an earlier session the same change gave
//! write-heavy +4%.)

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, ready};

use crate::raw::RawRwLock;
use crate::state::Kind;

/// Resolves once the task may go on: inside a tokio task with its budget
/// spent it returns `Pending` once (and tokio wakes it), as tokio's own
/// locks do after acquiring. Outside tokio it is always ready.
pub(crate) struct Proceed;

impl Future for Proceed {
    type Output = ();

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let coop = ready!(tokio::task::coop::poll_proceed(cx));
        coop.made_progress();
        Poll::Ready(())
    }
}

/// Releases a lock taken on the fast path if the future is dropped while it
/// yields to the coop budget. It holds only the raw lock, so the lock future
/// keeps tokio's auto traits (a guard held across the `.await` would make the
/// future `!Sync` for a `T: !Sync`).
pub(crate) struct ReleaseOnDrop<'a> {
    lock: &'a RawRwLock,
    kind: Kind,
}

impl<'a> ReleaseOnDrop<'a> {
    /// # Safety
    /// The caller holds `lock` in mode `kind` and gives the release to this.
    #[inline]
    pub(crate) unsafe fn new(lock: &'a RawRwLock, kind: Kind) -> Self {
        ReleaseOnDrop { lock, kind }
    }

    /// Hands the lock back to the caller (to put in a guard).
    #[inline]
    pub(crate) fn disarm(self) {
        core::mem::forget(self);
    }
}

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        // SAFETY: the lock is held in this mode and was given to us (`new`).
        unsafe { self.lock.unlock(self.kind) }
    }
}
