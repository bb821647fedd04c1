//! Lock-event counters in the spirit of the kernel's `lockevent_inc`: with
//! the `stats` feature each event is one relaxed increment on a slow path;
//! without it every hook is an empty inline function.
//!
//! The counters are process-wide (summed over all locks). They exist to see
//! what the slow paths do under a workload: how often spinning wins, how
//! often a waiter is woken only to lose the race, how often the lock is
//! handed off.
//!
//! ```
//! use hybrid_sync::stats::{self, ALL};
//!
//! let m = hybrid_sync::Mutex::new(());
//! drop(m.try_lock());
//! for (event, n) in ALL.iter().zip(stats::snapshot(false)) {
//!     // All zeros unless built with `--features stats`.
//!     println!("{event:?}: {n}");
//! }
//! ```

/// The events counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// Entered the contended path (the fast path failed).
    Contended,
    /// A spin took the lock.
    SpinWin,
    /// A spin gave up (owner made no progress, or the limit was reached).
    SpinGiveUp,
    /// A spin left because a handoff was pending.
    SpinHandoff,
    /// Took the lock under the queue lock without queueing (barging).
    Barge,
    /// Linked a node into the wait queue.
    Queued,
    /// A release found waiters and ran dispatch.
    Dispatch,
    /// Dispatch woke the head to compete.
    WakeHead,
    /// Dispatch handed the lock to queued waiters (one event per grant).
    Grant,
    /// Dispatch or a waiter set the handoff bit.
    HandoffSet,
    /// A woken or polled queued waiter took the lock.
    RetryWon,
    /// A woken or polled queued waiter lost the race and waits again.
    RetryLost,
    /// A queued waiter gave up (its future was dropped).
    Cancel,
    /// A blocked thread woke from a timed park to look at the lock again.
    TimedRecheck,
}

/// Number of [`Event`] kinds.
pub const EVENTS: usize = Event::TimedRecheck as usize + 1;

#[cfg(feature = "stats")]
mod imp {
    use super::{EVENTS, Event};
    use std::sync::atomic::{AtomicU64, Ordering};

    static COUNTS: [AtomicU64; EVENTS] = [const { AtomicU64::new(0) }; EVENTS];

    #[inline]
    pub(crate) fn inc(e: Event) {
        COUNTS[e as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot of every counter, and resets them if `reset`.
    pub fn snapshot(reset: bool) -> [u64; EVENTS] {
        let mut out = [0; EVENTS];
        for (o, c) in out.iter_mut().zip(&COUNTS) {
            *o = if reset { c.swap(0, Ordering::Relaxed) } else { c.load(Ordering::Relaxed) };
        }
        out
    }
}

#[cfg(not(feature = "stats"))]
mod imp {
    use super::{EVENTS, Event};

    #[inline(always)]
    pub(crate) fn inc(_: Event) {}

    /// Always zeros without the `stats` feature.
    pub fn snapshot(_reset: bool) -> [u64; EVENTS] {
        [0; EVENTS]
    }
}

pub(crate) use imp::inc;
pub use imp::snapshot;

/// All events with their names, in counter order.
pub const ALL: [Event; EVENTS] = [
    Event::Contended,
    Event::SpinWin,
    Event::SpinGiveUp,
    Event::SpinHandoff,
    Event::Barge,
    Event::Queued,
    Event::Dispatch,
    Event::WakeHead,
    Event::Grant,
    Event::HandoffSet,
    Event::RetryWon,
    Event::RetryLost,
    Event::Cancel,
    Event::TimedRecheck,
];
