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
        if !self.0.try_acquire_looking(Kind::Write) {
            self.0.lock_blocking_contended(Kind::Write);
        }
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
        self.0.try_acquire_looking(Kind::Write) || self.0.lock_blocking_until(Kind::Write, timeout)
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
