//! [`lock_api`] support (feature `lock_api`): the hybrid lock as a raw lock,
//! so that `lock_api::RwLock<hybrid_sync::RawRwLock, T>` and
//! `lock_api::Mutex<hybrid_sync::RawMutex, T>` are blocking locks with the
//! same state machine as [`RwLock`](crate::RwLock) and
//! [`Mutex`](crate::Mutex): spin with per-address backoff, park in the one
//! FIFO queue, bounded barging with the handoff bit.
//!
//! They block the calling thread like `parking_lot`'s locks (and, unlike
//! [`Mutex::blocking_lock`](crate::Mutex::blocking_lock), do not check for
//! an async context: `lock_api` users hold these guards like a
//! `std::sync::Mutex` guard, never across `.await`).
//!
//! The same two types implement the traits of both `lock_api` releases:
//! 0.4's with the feature `lock_api`, and 0.5's (parking_lot 0.13's, whose
//! raw locks hand out a guard value per acquisition) with the feature
//! `lock_api-0_5`, which needs Rust 1.95 as `lock_api` 0.5 does. The
//! guard values carry nothing (`GuardSend`): the lock word is the whole
//! state, and a guard may be released on another thread. The example
//! below is 0.4's; with 0.5 the types are `lock_api::RwLock` and
//! `lock_api::Mutex` of that release, the same code.
//!
//! ```
//! let lock: lock_api::RwLock<hybrid_sync::RawRwLock, Vec<u32>> = lock_api::RwLock::new(vec![]);
//! lock.write().push(1);
//! assert_eq!(*lock.read(), [1]);
//!
//! let counter: lock_api::Mutex<hybrid_sync::RawMutex, u64> = lock_api::Mutex::new(0);
//! *counter.lock() += 1;
//! assert_eq!(*counter.lock(), 1);
//! ```

use std::time::{Duration, Instant};

use crate::config::MAX_READERS;
use crate::raw;
use crate::state::Kind;

/// The hybrid reader-writer lock with no data, for
/// `lock_api::RwLock<RawRwLock, T>`. Implements `lock_api`'s `RawRwLock`,
/// `RawRwLockDowngrade`, `RawRwLockTimed` and `RawRwLockFair`.
///
/// ```
/// use std::time::Duration;
///
/// type RwLock<T> = lock_api::RwLock<hybrid_sync::RawRwLock, T>;
///
/// let lock = RwLock::new(String::from("a"));
/// let mut writer = lock.write();
/// writer.push('b');
/// // Held for writing: a timed read gives up at its deadline.
/// assert!(lock.try_read_for(Duration::from_millis(1)).is_none());
/// // Downgrading keeps the lock, for reading, with no gap in between.
/// let reader = lock_api::RwLockWriteGuard::downgrade(writer);
/// assert_eq!(*reader, "ab");
/// assert!(lock.try_read().is_some());
/// ```
///
/// # Freeing a lock after its unlock
///
/// One difference from `parking_lot`'s raw locks: an unlock that finds
/// waiters may still touch the lock's memory (its wait queue and word)
/// after another thread has taken the lock, as `tokio::sync`'s locks and
/// the kernel's mutexes do. `parking_lot` releases a contended lock under
/// its global table's lock, and std's (on Linux) only hands the futex's
/// address to the kernel afterwards, so either may be freed by a thread
/// that takes it as soon as an unlock has let it in. Safe code cannot tell the difference, since a
/// `lock_api` guard borrows its lock until its unlock has returned. Unsafe
/// code that keeps an object's reference count under the object's own lock
/// and frees the object when the count reaches zero (the kernel's dentries,
/// C's `pthread_mutex` idiom) should use [`LockRef`](crate::LockRef) for
/// it, whose releases touch nothing of the lock once another thread could
/// free it, or keep the count out of the lock, as `Arc` does.
pub struct RawRwLock(raw::RawRwLock);

/// The hybrid mutex with no data, for `lock_api::Mutex<RawMutex, T>`.
/// Implements `lock_api`'s `RawMutex`, `RawMutexTimed` and `RawMutexFair`.
///
/// ```
/// use std::time::Duration;
///
/// type Mutex<T> = lock_api::Mutex<hybrid_sync::RawMutex, T>;
///
/// let m = Mutex::new(0u32);
/// let guard = m.lock();
/// assert!(m.try_lock_for(Duration::from_millis(1)).is_none());
/// // A fair unlock hands the lock to the next queued thread, if any.
/// lock_api::MutexGuard::unlock_fair(guard);
/// *m.lock() += 1;
/// assert_eq!(m.into_inner(), 1);
/// ```
///
/// # Freeing a lock after its unlock
///
/// As for [`RawRwLock`](RawRwLock#freeing-a-lock-after-its-unlock): an
/// unlock may touch the lock after another thread has taken it, where
/// `parking_lot`'s does not.
pub struct RawMutex(raw::RawRwLock);

impl RawRwLock {
    #[inline]
    fn lock(&self, kind: Kind) {
        if !self.0.try_acquire_looking(kind) {
            self.0.lock_blocking_contended(kind);
        }
    }

    #[inline]
    fn lock_until(&self, kind: Kind, deadline: Instant) -> bool {
        self.0.try_acquire_looking(kind) || self.0.lock_blocking_until(kind, deadline)
    }
}

impl RawMutex {
    #[inline]
    fn lock_exclusive(&self) {
        if !self.0.try_acquire_looking(Kind::Write) {
            self.0.lock_blocking_contended(Kind::Write);
        }
    }

    #[inline]
    fn lock_exclusive_until(&self, deadline: Instant) -> bool {
        self.0.try_acquire_looking(Kind::Write) || self.0.lock_blocking_until(Kind::Write, deadline)
    }
}

/// `now + timeout`, or "never" for a timeout too long to represent.
fn deadline(timeout: Duration) -> Instant {
    Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365 * 30))
}

// SAFETY: the raw lock is a reader-writer lock: a write lock excludes every
// other lock and a read lock excludes writers (the state machine in
// `crate::raw`, checked by its loom models); unlocks are only reachable
// through lock_api's guards, which hold the lock they release.
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern
    const INIT: Self = RawRwLock(raw::RawRwLock::new(MAX_READERS));
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) {
        self.lock(Kind::Read);
    }

    #[inline]
    fn try_lock_shared(&self) -> bool {
        self.0.try_acquire(Kind::Read)
    }

    #[inline]
    unsafe fn unlock_shared(&self) {
        // SAFETY: lock_api calls this only for a read lock we hold.
        unsafe { self.0.read_unlock() }
    }

    #[inline]
    fn lock_exclusive(&self) {
        self.lock(Kind::Write);
    }

    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.0.try_acquire(Kind::Write)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self) {
        // SAFETY: lock_api calls this only for the write lock we hold.
        unsafe { self.0.write_unlock() }
    }

    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }

    fn is_locked_exclusive(&self) -> bool {
        self.0.is_locked_exclusive()
    }
}

// SAFETY: `downgrade` turns the held write lock into a read lock atomically.
unsafe impl lock_api::RawRwLockDowngrade for RawRwLock {
    unsafe fn downgrade(&self) {
        // SAFETY: lock_api calls this only while we hold the write lock.
        unsafe { self.0.downgrade() }
    }
}

// SAFETY: the fair unlocks release the lock like the plain ones.
unsafe impl lock_api::RawRwLockFair for RawRwLock {
    unsafe fn unlock_shared_fair(&self) {
        // Readers release without a handoff: the last one dispatches anyway.
        // SAFETY: as `unlock_shared`.
        unsafe { self.0.read_unlock() }
    }

    unsafe fn unlock_exclusive_fair(&self) {
        // SAFETY: as `unlock_exclusive`.
        unsafe { self.0.write_unlock_fair() }
    }
}

// SAFETY: the timed locks acquire exactly as the untimed ones, or return
// `false` holding nothing.
unsafe impl lock_api::RawRwLockTimed for RawRwLock {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_shared_for(&self, timeout: Duration) -> bool {
        self.lock_until(Kind::Read, deadline(timeout))
    }

    fn try_lock_shared_until(&self, timeout: Instant) -> bool {
        self.lock_until(Kind::Read, timeout)
    }

    fn try_lock_exclusive_for(&self, timeout: Duration) -> bool {
        self.lock_until(Kind::Write, deadline(timeout))
    }

    fn try_lock_exclusive_until(&self, timeout: Instant) -> bool {
        self.lock_until(Kind::Write, timeout)
    }
}

// SAFETY: as for `RawRwLock`, in exclusive mode only.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern
    const INIT: Self = RawMutex(raw::RawRwLock::new(MAX_READERS));
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.lock_exclusive();
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.0.try_acquire(Kind::Write)
    }

    #[inline]
    unsafe fn unlock(&self) {
        // SAFETY: lock_api calls this only for the lock we hold.
        unsafe { self.0.write_unlock() }
    }

    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }
}

// SAFETY: the fair unlock releases the lock like the plain one.
unsafe impl lock_api::RawMutexFair for RawMutex {
    unsafe fn unlock_fair(&self) {
        // SAFETY: as `unlock`.
        unsafe { self.0.write_unlock_fair() }
    }
}

// SAFETY: the timed locks acquire exactly as `lock`, or return `false`
// holding nothing.
unsafe impl lock_api::RawMutexTimed for RawMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        self.try_lock_until(deadline(timeout))
    }

    fn try_lock_until(&self, timeout: Instant) -> bool {
        self.lock_exclusive_until(timeout)
    }
}

/// `lock_api` 0.5's traits (feature `lock_api-0_5`): the same operations as
/// 0.4's above, each acquisition returning a `GuardSend` and each release
/// taking it back.
#[cfg(feature = "lock_api-0_5")]
mod lock_api_0_5 {
    use std::time::{Duration, Instant};

    use lock_api_05 as api;
    use lock_api_05::GuardSend;

    use super::{RawMutex, RawRwLock, deadline};
    use crate::config::MAX_READERS;
    use crate::raw;
    use crate::state::Kind;

    /// The guard of an acquisition that `acquired` says was made.
    #[inline]
    fn guard(acquired: bool) -> Option<GuardSend> {
        acquired.then(GuardSend::new)
    }

    // SAFETY: as for lock_api 0.4's `RawRwLock` above: a write lock excludes
    // every other lock, a read lock excludes writers (`crate::raw`, checked
    // by its loom models). Only lock_api's guards release, each with the
    // `GuardSend` of an acquisition it holds; nothing is released on an
    // unwind, since no acquisition panics holding the lock (a panicking
    // wait leaves the queue first) and no release panics before the word
    // lets the lock go.
    unsafe impl api::RawRwLock for RawRwLock {
        #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern
        const INIT: Self = RawRwLock(raw::RawRwLock::new(MAX_READERS));
        type SharedGuard = GuardSend;
        type ExclusiveGuard = GuardSend;

        #[inline]
        fn lock_shared(&self) -> GuardSend {
            self.lock(Kind::Read);
            GuardSend::new()
        }

        #[inline]
        fn try_lock_shared(&self) -> Option<GuardSend> {
            guard(self.0.try_acquire(Kind::Read))
        }

        #[inline]
        unsafe fn unlock_shared(&self, _: GuardSend) {
            // SAFETY: lock_api passes the guard of a read lock we hold.
            unsafe { self.0.read_unlock() }
        }

        #[inline]
        fn lock_exclusive(&self) -> GuardSend {
            self.lock(Kind::Write);
            GuardSend::new()
        }

        #[inline]
        fn try_lock_exclusive(&self) -> Option<GuardSend> {
            guard(self.0.try_acquire(Kind::Write))
        }

        #[inline]
        unsafe fn unlock_exclusive(&self, _: GuardSend) {
            // SAFETY: lock_api passes the guard of the write lock we hold.
            unsafe { self.0.write_unlock() }
        }

        fn is_locked(&self) -> bool {
            self.0.is_locked()
        }

        fn is_locked_exclusive(&self) -> bool {
            self.0.is_locked_exclusive()
        }
    }

    // SAFETY: `downgrade` turns the held write lock into a read lock
    // atomically; the read guard it returns is released as any other.
    unsafe impl api::RawRwLockDowngrade for RawRwLock {
        unsafe fn downgrade(&self, _: GuardSend) -> GuardSend {
            // SAFETY: lock_api passes the guard of the write lock we hold.
            unsafe { self.0.downgrade() };
            GuardSend::new()
        }
    }

    // SAFETY: the fair unlocks release the lock like the plain ones; the
    // default `bump`s are unlock-fair-then-lock.
    unsafe impl api::RawRwLockFair for RawRwLock {
        unsafe fn unlock_shared_fair(&self, _: GuardSend) {
            // Readers release without a handoff: the last one dispatches anyway.
            // SAFETY: as `unlock_shared`.
            unsafe { self.0.read_unlock() }
        }

        unsafe fn unlock_exclusive_fair(&self, _: GuardSend) {
            // SAFETY: as `unlock_exclusive`.
            unsafe { self.0.write_unlock_fair() }
        }
    }

    // SAFETY: the timed locks acquire exactly as the untimed ones, or return
    // `None` holding nothing.
    unsafe impl api::RawRwLockTimed for RawRwLock {
        type Duration = Duration;
        type Instant = Instant;

        fn try_lock_shared_for(&self, timeout: Duration) -> Option<GuardSend> {
            guard(self.lock_until(Kind::Read, deadline(timeout)))
        }

        fn try_lock_shared_until(&self, timeout: Instant) -> Option<GuardSend> {
            guard(self.lock_until(Kind::Read, timeout))
        }

        fn try_lock_exclusive_for(&self, timeout: Duration) -> Option<GuardSend> {
            guard(self.lock_until(Kind::Write, deadline(timeout)))
        }

        fn try_lock_exclusive_until(&self, timeout: Instant) -> Option<GuardSend> {
            guard(self.lock_until(Kind::Write, timeout))
        }
    }

    // SAFETY: as for `RawRwLock`, in exclusive mode only.
    unsafe impl api::RawMutex for RawMutex {
        #[allow(clippy::declare_interior_mutable_const)] // lock_api's INIT pattern
        const INIT: Self = RawMutex(raw::RawRwLock::new(MAX_READERS));
        type Guard = GuardSend;

        #[inline]
        fn lock(&self) -> GuardSend {
            self.lock_exclusive();
            GuardSend::new()
        }

        #[inline]
        fn try_lock(&self) -> Option<GuardSend> {
            guard(self.0.try_acquire(Kind::Write))
        }

        #[inline]
        unsafe fn unlock(&self, _: GuardSend) {
            // SAFETY: lock_api passes the guard of the lock we hold.
            unsafe { self.0.write_unlock() }
        }

        fn is_locked(&self) -> bool {
            self.0.is_locked()
        }
    }

    // SAFETY: the fair unlock releases the lock like the plain one; the
    // default `bump` is unlock-fair-then-lock.
    unsafe impl api::RawMutexFair for RawMutex {
        unsafe fn unlock_fair(&self, _: GuardSend) {
            // SAFETY: as `unlock`.
            unsafe { self.0.write_unlock_fair() }
        }
    }

    // SAFETY: the timed locks acquire exactly as `lock`, or return `None`
    // holding nothing.
    unsafe impl api::RawMutexTimed for RawMutex {
        type Duration = Duration;
        type Instant = Instant;

        fn try_lock_for(&self, timeout: Duration) -> Option<GuardSend> {
            guard(self.lock_exclusive_until(deadline(timeout)))
        }

        fn try_lock_until(&self, timeout: Instant) -> Option<GuardSend> {
            guard(self.lock_exclusive_until(timeout))
        }
    }
}

impl core::fmt::Debug for RawRwLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.0, f)
    }
}

impl core::fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&self.0, f)
    }
}
