//! tokio's cooperative-scheduling budget, charged once per acquisition.

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
