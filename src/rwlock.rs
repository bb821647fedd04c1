//! [`RwLock`]: the hybrid reader-writer lock.

use core::cell::UnsafeCell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use std::sync::Arc;

use crate::acquire::blocking;
use crate::acquire::future::{Lock, owned};
use crate::config::MAX_READERS;
use crate::error::TryLockError;
use crate::guard::{Held, Holder, impl_guard_traits, nn, nn_mut};
use crate::raw::RawRwLock;
use crate::state::Kind;
use crate::state::TOKIO_MAX_READS;
use crate::trace::Trace;

/// An asynchronous reader-writer lock that threads can use too: a drop-in
/// replacement for [`tokio::sync::RwLock`].
///
/// Any number of readers, or one writer, may hold the lock. It is
/// write-preferring: once a writer is queued, new readers queue behind it,
/// so a stream of readers cannot starve writers, and a run of readers at the
/// head of the queue is let in together. Tasks (`read().await`,
/// `write().await`) and threads ([`blocking_read`](RwLock::blocking_read),
/// [`blocking_write`](RwLock::blocking_write)) share one queue.
///
/// As with tokio's lock, a task that holds a read guard and asks for another
/// while a writer is queued deadlocks: the second read waits behind the
/// writer, which waits for the first read.
///
/// By default newcomers may take a free lock ahead of a queued writer that
/// was woken but has not run yet, until that writer has waited past the
/// handoff timeout; under `fair` the order is tokio's strict FIFO. See the
/// [crate docs](crate).
///
/// # Examples
///
/// ```
/// use hybrid_sync::RwLock;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let lock = RwLock::new(5);
///
/// // many reader locks can be held at once
/// {
///     let r1 = lock.read().await;
///     let r2 = lock.read().await;
///     assert_eq!(*r1, 5);
///     assert_eq!(*r2, 5);
/// } // read locks are dropped at this point
///
/// // only one write lock may be held, however
/// {
///     let mut w = lock.write().await;
///     *w += 1;
///     assert_eq!(*w, 6);
/// } // write lock is dropped here
/// # }
/// ```
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    c: UnsafeCell<T>,
}

// SAFETY: sending the lock sends the `T` inside.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: `&RwLock<T>` hands out `&T` to many threads at once (needs
// `Sync`) and `&mut T` to one at a time (needs `Send`).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

impl<T: ?Sized> Holder for RwLock<T> {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        &self.raw
    }
}

/// Shared access to the data of a [`RwLock`], released on drop.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let lock = hybrid_sync::RwLock::new(1);
/// let (a, b) = (lock.read().await, lock.read().await);
/// assert_eq!(*a + *b, 2);
/// # }
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    inner: Held<&'a RawRwLock, T, false>,
    marker: PhantomData<&'a T>,
}

/// Exclusive access to the data of a [`RwLock`], released on drop.
///
/// ```
/// let lock = hybrid_sync::RwLock::new(1);
/// *lock.blocking_write() += 1; // from a thread that runs no async code
/// assert_eq!(*lock.try_read().unwrap(), 2);
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    inner: Held<&'a RawRwLock, T, true>,
    marker: PhantomData<&'a mut T>,
}

/// A [`RwLockWriteGuard`] re-pointed at a part of the data
/// ([`RwLockWriteGuard::map`]); it cannot be downgraded.
///
/// ```
/// use hybrid_sync::{RwLock, RwLockWriteGuard};
///
/// let lock = RwLock::new((0, 0));
/// let mut second = RwLockWriteGuard::map(lock.try_write().unwrap(), |t| &mut t.1);
/// *second = 5;
/// drop(second);
/// assert_eq!(*lock.try_read().unwrap(), (0, 5));
/// ```
#[clippy::has_significant_drop]
pub struct RwLockMappedWriteGuard<'a, T: ?Sized> {
    inner: Held<&'a RawRwLock, T, true>,
    marker: PhantomData<&'a mut T>,
}

/// Shared access that keeps the lock alive through an `Arc`, so it has no
/// lifetime. `U` is what the guard points at after [`map`](Self::map).
///
/// ```
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let lock = Arc::new(hybrid_sync::RwLock::new(1));
/// let guard = lock.clone().read_owned().await;
/// tokio::spawn(async move { assert_eq!(*guard, 1) }).await.unwrap();
/// # }
/// ```
#[clippy::has_significant_drop]
pub struct OwnedRwLockReadGuard<T: ?Sized, U: ?Sized = T> {
    inner: Held<Arc<RwLock<T>>, U, false>,
}

/// Exclusive access that keeps the lock alive through an `Arc`.
///
/// ```
/// use std::sync::Arc;
///
/// let lock = Arc::new(hybrid_sync::RwLock::new(1));
/// let mut guard = lock.clone().try_write_owned().unwrap();
/// std::thread::spawn(move || *guard += 1).join().unwrap();
/// assert_eq!(*lock.try_read().unwrap(), 2);
/// ```
#[clippy::has_significant_drop]
pub struct OwnedRwLockWriteGuard<T: ?Sized> {
    inner: Held<Arc<RwLock<T>>, T, true>,
}

/// An [`OwnedRwLockWriteGuard`] re-pointed at a part of the data.
///
/// ```
/// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
/// use std::sync::Arc;
///
/// let lock = Arc::new(RwLock::new(vec![1, 2]));
/// let mut last = OwnedRwLockWriteGuard::map(lock.clone().try_write_owned().unwrap(), |v| &mut v[1]);
/// *last = 3;
/// drop(last);
/// assert_eq!(*lock.try_read().unwrap(), vec![1, 3]);
/// ```
#[clippy::has_significant_drop]
pub struct OwnedRwLockMappedWriteGuard<T: ?Sized, U: ?Sized = T> {
    inner: Held<Arc<RwLock<T>>, U, true>,
}

// Guard auto traits, exactly as tokio's: they hold raw pointers, so each is
// spelled out.

// SAFETY: (this and all below) a read guard gives `&T`, so sending it needs
// `T: Sync`; a write guard gives `&mut T`, so it needs `T: Send + Sync` to
// move (the lock may be shared) and the same to share. An owned guard may
// drop the lock and its `T` wherever it is dropped, hence `T: Send + Sync`.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Sync> Send for OwnedRwLockReadGuard<T, U> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Sync for OwnedRwLockReadGuard<T, U> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockWriteGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockWriteGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockMappedWriteGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockMappedWriteGuard<'_, T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Send for OwnedRwLockWriteGuard<T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedRwLockWriteGuard<T> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Send for OwnedRwLockMappedWriteGuard<T, U> {}
// SAFETY: see above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Sync for OwnedRwLockMappedWriteGuard<T, U> {}

impl<T: ?Sized> RwLock<T> {
    /// Creates a new unlocked lock holding `value`, allowing up to
    /// `2^27 - 1` concurrent readers (tokio's default is `u32::MAX >> 3`;
    /// either bound is far beyond any real program).
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// let lock = RwLock::new(5);
    /// ```
    #[track_caller]
    pub fn new(value: T) -> RwLock<T>
    where
        T: Sized,
    {
        RwLock { raw: RawRwLock::new(MAX_READERS).traced(Trace::rwlock(MAX_READERS)), c: UnsafeCell::new(value) }
    }

    /// Creates a new unlocked lock that lets at most `max_reads` readers
    /// hold it at once; further readers queue.
    ///
    /// # Panics
    ///
    /// Panics, at the caller, if `max_reads` is 0 or more than
    /// `u32::MAX >> 3`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// let lock = RwLock::with_max_readers(5, 1024);
    /// ```
    #[track_caller]
    pub fn with_max_readers(value: T, max_reads: u32) -> RwLock<T>
    where
        T: Sized,
    {
        assert_ne!(max_reads, 0, "a RwLock may not be created with 0 readers");
        assert!(max_reads <= TOKIO_MAX_READS, "a RwLock may not be created with more than {TOKIO_MAX_READS} readers");
        let max_readers = effective_max_readers(max_reads);
        RwLock { raw: RawRwLock::new(max_readers).traced(Trace::rwlock(max_readers)), c: UnsafeCell::new(value) }
    }

    /// Creates a new unlocked lock in a `const` context, e.g. a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// static LOCK: RwLock<i32> = RwLock::const_new(5);
    /// ```
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub const fn const_new(value: T) -> RwLock<T>
    where
        T: Sized,
    {
        RwLock { raw: RawRwLock::new(MAX_READERS), c: UnsafeCell::new(value) }
    }

    /// [`with_max_readers`](RwLock::with_max_readers) in a `const` context.
    ///
    /// # Panics
    ///
    /// Panics if `max_reads` is 0 or more than `u32::MAX >> 3` (at compile
    /// time when evaluated in a constant).
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// static LOCK: RwLock<i32> = RwLock::const_with_max_readers(5, 1024);
    /// ```
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    #[track_caller]
    pub const fn const_with_max_readers(value: T, max_reads: u32) -> RwLock<T>
    where
        T: Sized,
    {
        assert!(max_reads != 0, "a RwLock may not be created with 0 readers");
        assert!(max_reads <= TOKIO_MAX_READS, "a RwLock may not be created with more than u32::MAX >> 3 readers");
        RwLock { raw: RawRwLock::new(effective_max_readers(max_reads)), c: UnsafeCell::new(value) }
    }

    /// Locks this lock with shared read access, waiting until no writer
    /// holds it and no writer is queued ahead.
    ///
    /// Inside a tokio task it consumes one unit of coop budget, as tokio's
    /// locks do.
    ///
    /// # Cancel safety
    ///
    /// This method uses a queue to distribute the lock in the order it was
    /// requested (bounded by the handoff timeout by default, strictly under
    /// `fair`). Cancelling a call to `read` makes you lose your place in the
    /// queue; a call cancelled after the lock was handed to it releases it.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let c_lock = lock.clone();
    ///
    /// let n = lock.read().await;
    /// assert_eq!(*n, 1);
    ///
    /// tokio::spawn(async move {
    ///     // While main has an active read lock, we acquire one too.
    ///     let r = c_lock.read().await;
    ///     assert_eq!(*r, 1);
    /// }).await.expect("The spawned task has panicked");
    ///
    /// // Drop the guard after the spawned task finishes.
    /// drop(n);
    /// # }
    /// ```
    pub fn read(&self) -> impl Future<Output = RwLockReadGuard<'_, T>> {
        // SAFETY: `Lock` makes the guard once, with the lock held for it.
        let make = move || unsafe { RwLockReadGuard::new(self) };
        // SAFETY: `make` hands the lock to the guard.
        unsafe { Lock::new(&self.raw, Kind::Read, "RwLock::read", make) }
    }

    /// Locks this lock with shared read access from a thread that is not
    /// running async code, parking the thread while it waits.
    ///
    /// # Panics
    ///
    /// Panics if called within an asynchronous execution context, as tokio's
    /// `blocking_read` does. It works from plain threads, `spawn_blocking`
    /// and `block_in_place`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// let rwlock = Arc::new(RwLock::new(1));
    /// let mut write_lock = rwlock.write().await;
    ///
    /// let blocking_task = tokio::task::spawn_blocking({
    ///     let rwlock = Arc::clone(&rwlock);
    ///     move || {
    ///         // This shall block until the `write_lock` is released.
    ///         let read_lock = rwlock.blocking_read();
    ///         assert_eq!(*read_lock, 0);
    ///     }
    /// });
    ///
    /// *write_lock -= 1;
    /// drop(write_lock); // release the lock.
    ///
    /// // Await the completion of the blocking task.
    /// blocking_task.await.unwrap();
    ///
    /// // Assert uncontended.
    /// assert!(rwlock.try_write().is_ok());
    /// # }
    /// ```
    #[track_caller]
    pub fn blocking_read(&self) -> RwLockReadGuard<'_, T> {
        blocking::lock(&self.raw, Kind::Read);
        // SAFETY: `blocking::lock` returned, so we hold a read lock.
        unsafe { RwLockReadGuard::new(self) }
    }

    /// Locks this lock with shared read access, returning a guard that keeps
    /// the lock alive through its `Arc`.
    ///
    /// # Cancel safety
    ///
    /// As for [`read`](RwLock::read).
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let n = lock.clone().read_owned().await;
    /// assert_eq!(*n, 1);
    /// # }
    /// ```
    pub fn read_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockReadGuard<T>> {
        // SAFETY: the guard gets the read lock with the `Arc`.
        unsafe { owned(self, |lock| &lock.raw, Kind::Read, "RwLock::read_owned", OwnedRwLockReadGuard::new) }
    }

    /// Takes a read lock if that needs no waiting.
    ///
    /// # Errors
    ///
    /// [`TryLockError`] if a writer holds the lock, a writer is queued, the
    /// lock has `max_readers` readers, or a handoff is pending.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// let lock = RwLock::new(1);
    /// let v = lock.try_read().unwrap();
    /// assert_eq!(*v, 1);
    /// assert!(lock.try_write().is_err());
    /// ```
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        if self.raw.try_acquire(Kind::Read) {
            // SAFETY: just acquired.
            Ok(unsafe { RwLockReadGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }

    /// The owned version of [`try_read`](RwLock::try_read).
    ///
    /// # Errors
    ///
    /// As for `try_read`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let v = lock.clone().try_read_owned().unwrap();
    /// assert_eq!(*v, 1);
    /// ```
    pub fn try_read_owned(self: Arc<Self>) -> Result<OwnedRwLockReadGuard<T>, TryLockError> {
        if self.raw.try_acquire(Kind::Read) {
            // SAFETY: just acquired.
            Ok(unsafe { OwnedRwLockReadGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }

    /// Locks this lock with exclusive write access, waiting until nobody
    /// else holds it.
    ///
    /// # Cancel safety
    ///
    /// As for [`read`](RwLock::read): cancelling loses your place in the
    /// queue, lets readers queued behind you in if they now can, and never
    /// leaks the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(1);
    /// let mut n = lock.write().await;
    /// *n = 2;
    /// # }
    /// ```
    pub fn write(&self) -> impl Future<Output = RwLockWriteGuard<'_, T>> {
        // SAFETY: `Lock` makes the guard once, with the lock held for it.
        let make = move || unsafe { RwLockWriteGuard::new(self) };
        // SAFETY: `make` hands the lock to the guard.
        unsafe { Lock::new(&self.raw, Kind::Write, "RwLock::write", make) }
    }

    /// Locks this lock with exclusive write access from a thread that is not
    /// running async code, parking the thread while it waits.
    ///
    /// # Panics
    ///
    /// Panics if called within an asynchronous execution context.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// let rwlock = Arc::new(RwLock::new(1));
    /// let read_lock = rwlock.read().await;
    ///
    /// let blocking_task = tokio::task::spawn_blocking({
    ///     let rwlock = Arc::clone(&rwlock);
    ///     move || {
    ///         // This shall block until the `read_lock` is released.
    ///         let mut write_lock = rwlock.blocking_write();
    ///         *write_lock = 2;
    ///     }
    /// });
    ///
    /// assert_eq!(*read_lock, 1);
    /// // Release the last outstanding read lock.
    /// drop(read_lock);
    ///
    /// // Await the completion of the blocking task.
    /// blocking_task.await.unwrap();
    ///
    /// // Assert uncontended.
    /// let read_lock = rwlock.try_read().unwrap();
    /// assert_eq!(*read_lock, 2);
    /// # }
    /// ```
    #[track_caller]
    pub fn blocking_write(&self) -> RwLockWriteGuard<'_, T> {
        blocking::lock(&self.raw, Kind::Write);
        // SAFETY: `blocking::lock` returned, so we hold the write lock.
        unsafe { RwLockWriteGuard::new(self) }
    }

    /// Locks this lock with exclusive write access, returning a guard that
    /// keeps the lock alive through its `Arc`.
    ///
    /// # Cancel safety
    ///
    /// As for [`write`](RwLock::write).
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut n = lock.clone().write_owned().await;
    /// *n = 2;
    /// # }
    /// ```
    pub fn write_owned(self: Arc<Self>) -> impl Future<Output = OwnedRwLockWriteGuard<T>> {
        // SAFETY: the guard gets the write lock with the `Arc`.
        unsafe { owned(self, |lock| &lock.raw, Kind::Write, "RwLock::write_owned", OwnedRwLockWriteGuard::new) }
    }

    /// Takes the write lock if that needs no waiting.
    ///
    /// # Errors
    ///
    /// [`TryLockError`] if anyone holds the lock, or a queued waiter has the
    /// next turn (a handoff, or under `fair` anyone queued).
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// let rw = RwLock::new(1);
    /// let v = rw.try_read().unwrap();
    /// assert_eq!(*v, 1);
    /// assert!(rw.try_write().is_err());
    /// ```
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        if self.raw.try_acquire(Kind::Write) {
            // SAFETY: just acquired.
            Ok(unsafe { RwLockWriteGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }

    /// The owned version of [`try_write`](RwLock::try_write).
    ///
    /// # Errors
    ///
    /// As for `try_write`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// let rw = Arc::new(RwLock::new(1));
    /// let v = rw.clone().read_owned();
    /// # drop(v);
    /// let w = rw.clone().try_write_owned().unwrap();
    /// assert_eq!(*w, 1);
    /// ```
    pub fn try_write_owned(self: Arc<Self>) -> Result<OwnedRwLockWriteGuard<T>, TryLockError> {
        if self.raw.try_acquire(Kind::Write) {
            // SAFETY: just acquired.
            Ok(unsafe { OwnedRwLockWriteGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }

    /// This lock's counters (acquisitions, contended acquisitions, waits,
    /// spins, parks, handoffs): see [`LockStats`](crate::stats::LockStats).
    /// All zeros unless the crate is built with the `stats` feature, which
    /// is what a deployment turns on to pick its tuning from its own numbers.
    ///
    /// # Examples
    ///
    /// ```
    /// let lock = hybrid_sync::RwLock::new(0);
    /// drop(lock.try_write());
    /// let stats = lock.stats();
    /// assert_eq!(stats.acquisitions(), if stats.enabled() { 1 } else { 0 });
    /// ```
    pub fn stats(&self) -> crate::stats::LockStats {
        self.raw.stats()
    }

    /// Returns a mutable reference to the data, without locking: the
    /// `&mut self` borrow proves nobody holds the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// let mut lock = RwLock::new(1);
    /// *lock.get_mut() = 2;
    /// assert_eq!(lock.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.c.get_mut()
    }

    /// Consumes the lock, returning the data.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    ///
    /// assert_eq!(RwLock::new(42).into_inner(), 42);
    /// ```
    pub fn into_inner(self) -> T
    where
        T: Sized,
    {
        self.c.into_inner()
    }

    #[inline]
    fn data(&self) -> *mut T {
        self.c.get()
    }
}

/// tokio's accepted range is `1..=u32::MAX >> 3`; the lock word counts up to
/// `2^27 - 1` readers (see the crate docs' differences from tokio).
const fn effective_max_readers(max_reads: u32) -> u32 {
    if max_reads > MAX_READERS { MAX_READERS } else { max_reads }
}

impl<T: ?Sized> RwLock<T> {
    /// The raw lock word and queue state, decoded, for hang reports (the
    /// torture and stress tests print it when a watchdog fires). Takes no
    /// lock. Not part of the stable API.
    #[doc(hidden)]
    pub fn __describe(&self) -> String {
        self.raw.describe()
    }
}

impl<T> From<T> for RwLock<T> {
    fn from(value: T) -> Self {
        RwLock::new(value)
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    /// Prints the data if a read lock is available right now, `<locked>`
    /// otherwise; never waits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(inner) => d.field("data", &&*inner),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

// === borrowed guards ===

impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
    /// # Safety
    /// The caller holds a read lock on `lock` and gives it to the guard.
    #[inline]
    unsafe fn new(lock: &'a RwLock<T>) -> Self {
        // SAFETY: forwarded; the pointer comes from the lock's cell.
        let inner = unsafe { Held::new(&lock.raw, nn(&*lock.data())) };
        RwLockReadGuard { inner, marker: PhantomData }
    }

    /// Makes a guard for a part of the locked data. An associated function:
    /// call it as `RwLockReadGuard::map(guard, ...)`. If `f` panics, the
    /// lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockReadGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new((1, 2));
    /// let second = RwLockReadGuard::map(lock.read().await, |t| &t.1);
    /// assert_eq!(*second, 2);
    /// # }
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(this: Self, f: F) -> RwLockReadGuard<'a, U>
    where
        F: FnOnce(&T) -> &U,
    {
        // SAFETY: the guard's pointer is valid for shared access while held.
        let inner = this.inner.remap(|r| r, |p| nn(f(unsafe { p.as_ref() })));
        RwLockReadGuard { inner, marker: PhantomData }
    }

    /// Like [`map`](RwLockReadGuard::map), but `f` may decline by returning
    /// `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockReadGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(vec![1]);
    /// let first = RwLockReadGuard::try_map(lock.read().await, |v| v.first()).unwrap();
    /// assert_eq!(*first, 1);
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockReadGuard<'a, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        // SAFETY: the guard's pointer is valid for shared access while held.
        match this.inner.try_remap(|r| r, |p| f(unsafe { p.as_ref() }).map(nn)) {
            Ok(inner) => Ok(RwLockReadGuard { inner, marker: PhantomData }),
            Err(inner) => Err(RwLockReadGuard { inner, marker: PhantomData }),
        }
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// # Safety
    /// The caller holds the write lock on `lock` and gives it to the guard.
    #[inline]
    unsafe fn new(lock: &'a RwLock<T>) -> Self {
        // SAFETY: forwarded; the pointer comes from the lock's cell.
        let inner = unsafe { Held::new(&lock.raw, nn_mut(&mut *lock.data())) };
        RwLockWriteGuard { inner, marker: PhantomData }
    }

    /// Makes a write guard for a part of the locked data. If `f` panics, the
    /// lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new((1, 2));
    /// {
    ///     let mut second = RwLockWriteGuard::map(lock.write().await, |t| &mut t.1);
    ///     *second = 3;
    /// }
    /// assert_eq!(*lock.read().await, (1, 3));
    /// # }
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(this: Self, f: F) -> RwLockMappedWriteGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        let inner = this.inner.remap(|r| r, |p| nn_mut(f(unsafe { &mut *p.as_ptr() })));
        RwLockMappedWriteGuard { inner, marker: PhantomData }
    }

    /// Like [`map`](RwLockWriteGuard::map), but `f` may decline by returning
    /// `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(vec![1]);
    /// let g = RwLockWriteGuard::try_map(lock.write().await, |v| v.get_mut(3)).unwrap_err();
    /// assert_eq!(*g, vec![1]);
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockMappedWriteGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|r| r, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(RwLockMappedWriteGuard { inner, marker: PhantomData }),
            Err(inner) => Err(RwLockWriteGuard { inner, marker: PhantomData }),
        }
    }

    /// Turns this write guard into a mapped one without changing what it
    /// points at; the result can be mapped further but not downgraded.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(1);
    /// let mut mapped = RwLockWriteGuard::into_mapped(lock.write().await);
    /// *mapped = 2;
    /// # }
    /// ```
    #[inline]
    pub fn into_mapped(this: Self) -> RwLockMappedWriteGuard<'a, T> {
        RwLockMappedWriteGuard { inner: this.inner, marker: PhantomData }
    }

    /// Atomically turns the write lock into a read lock of a part of the
    /// data: no writer can get in between. `f` runs while the write lock is
    /// still held. If `f` panics, the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new((1, 2));
    /// let mut w = lock.write().await;
    /// w.1 = 3;
    /// let r = RwLockWriteGuard::downgrade_map(w, |t| &t.1);
    /// assert_eq!(*r, 3);
    /// assert_eq!(lock.try_read().unwrap().0, 1);
    /// # }
    /// ```
    #[inline]
    pub fn downgrade_map<F, U: ?Sized>(this: Self, f: F) -> RwLockReadGuard<'a, U>
    where
        F: FnOnce(&T) -> &U,
    {
        // SAFETY: the guard's pointer is valid while held.
        match this.inner.try_downgrade(|p| Some(nn(f(unsafe { p.as_ref() })))) {
            Ok(inner) => RwLockReadGuard { inner, marker: PhantomData },
            Err(_) => unreachable!(),
        }
    }

    /// Like [`downgrade_map`](RwLockWriteGuard::downgrade_map), but `f` may
    /// decline by returning `None`, which gives the write guard back,
    /// still write-locked.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(Some(1));
    /// let r = RwLockWriteGuard::try_downgrade_map(lock.write().await, |o| o.as_ref()).unwrap();
    /// assert_eq!(*r, 1);
    /// # }
    /// ```
    #[inline]
    pub fn try_downgrade_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockReadGuard<'a, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        // SAFETY: the guard's pointer is valid while held.
        match this.inner.try_downgrade(|p| f(unsafe { p.as_ref() }).map(nn)) {
            Ok(inner) => Ok(RwLockReadGuard { inner, marker: PhantomData }),
            Err(inner) => Err(RwLockWriteGuard { inner, marker: PhantomData }),
        }
    }

    /// Atomically turns the write lock into a read lock: no writer can get
    /// in between, and readers queued at the head join at once.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut n = lock.write().await;
    /// *n = 2;
    /// let n = n.downgrade();
    /// assert_eq!(*n, 2, "downgrade is atomic");
    /// assert!(lock.try_read().is_ok());
    /// # }
    /// ```
    #[inline]
    pub fn downgrade(self) -> RwLockReadGuard<'a, T> {
        Self::downgrade_map(self, |t| t)
    }
}

impl<'a, T: ?Sized> RwLockMappedWriteGuard<'a, T> {
    /// Re-points the guard again. If `f` panics, the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(((1, 2), 3));
    /// let outer = RwLockWriteGuard::map(lock.write().await, |t| &mut t.0);
    /// let mut inner = RwLockMappedWriteGuard::map(outer, |t| &mut t.1);
    /// *inner = 5;
    /// # }
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(this: Self, f: F) -> RwLockMappedWriteGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        let inner = this.inner.remap(|r| r, |p| nn_mut(f(unsafe { &mut *p.as_ptr() })));
        RwLockMappedWriteGuard { inner, marker: PhantomData }
    }

    /// Like [`map`](RwLockMappedWriteGuard::map), but `f` may decline by
    /// returning `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{RwLock, RwLockMappedWriteGuard, RwLockWriteGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = RwLock::new(vec![1]);
    /// let all = RwLockWriteGuard::into_mapped(lock.write().await);
    /// assert!(RwLockMappedWriteGuard::try_map(all, |v| v.get_mut(1)).is_err());
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(this: Self, f: F) -> Result<RwLockMappedWriteGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|r| r, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(RwLockMappedWriteGuard { inner, marker: PhantomData }),
            Err(inner) => Err(RwLockMappedWriteGuard { inner, marker: PhantomData }),
        }
    }
}

// === owned guards ===

impl<T: ?Sized> OwnedRwLockReadGuard<T> {
    /// # Safety
    /// The caller holds a read lock on `lock` and gives it to the guard.
    #[inline]
    unsafe fn new(lock: Arc<RwLock<T>>) -> Self {
        // SAFETY: the pointer comes from the lock's cell, kept alive by the
        // `Arc`; the read lock is forwarded.
        let data = nn(unsafe { &*lock.data() });
        // SAFETY: forwarded.
        OwnedRwLockReadGuard { inner: unsafe { Held::new(lock, data) } }
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockReadGuard<T, U> {
    /// Makes a guard for a part of the locked data. If `f` panics, the lock
    /// is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockReadGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let first = OwnedRwLockReadGuard::map(lock.read_owned().await, |t| &t.0);
    /// assert_eq!(*first, 1);
    /// # }
    /// ```
    #[inline]
    pub fn map<F, V: ?Sized>(this: Self, f: F) -> OwnedRwLockReadGuard<T, V>
    where
        F: FnOnce(&U) -> &V,
    {
        // SAFETY: the guard's pointer is valid for shared access while held.
        OwnedRwLockReadGuard { inner: this.inner.remap(|a| a, |p| nn(f(unsafe { p.as_ref() }))) }
    }

    /// Like [`map`](OwnedRwLockReadGuard::map), but `f` may decline by
    /// returning `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockReadGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(vec![1]));
    /// let g = OwnedRwLockReadGuard::try_map(lock.read_owned().await, |v| v.get(4));
    /// assert!(g.is_err());
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, V: ?Sized>(this: Self, f: F) -> Result<OwnedRwLockReadGuard<T, V>, Self>
    where
        F: FnOnce(&U) -> Option<&V>,
    {
        // SAFETY: the guard's pointer is valid for shared access while held.
        match this.inner.try_remap(|a| a, |p| f(unsafe { p.as_ref() }).map(nn)) {
            Ok(inner) => Ok(OwnedRwLockReadGuard { inner }),
            Err(inner) => Err(OwnedRwLockReadGuard { inner }),
        }
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockReadGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = lock.clone().try_read_owned().unwrap();
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockReadGuard::rwlock(&guard)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        this.inner.holder()
    }
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// # Safety
    /// The caller holds the write lock on `lock` and gives it to the guard.
    #[inline]
    unsafe fn new(lock: Arc<RwLock<T>>) -> Self {
        // SAFETY: the pointer comes from the lock's cell, kept alive by the
        // `Arc`; the write lock is forwarded.
        let data = nn_mut(unsafe { &mut *lock.data() });
        // SAFETY: forwarded.
        OwnedRwLockWriteGuard { inner: unsafe { Held::new(lock, data) } }
    }

    /// Makes a write guard for a part of the locked data. If `f` panics, the
    /// lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let mut first = OwnedRwLockWriteGuard::map(lock.clone().write_owned().await, |t| &mut t.0);
    /// *first = 5;
    /// drop(first);
    /// assert_eq!(*lock.read().await, (5, 2));
    /// # }
    /// ```
    #[inline]
    pub fn map<F, U: ?Sized>(this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        OwnedRwLockMappedWriteGuard { inner: this.inner.remap(|a| a, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))) }
    }

    /// Like [`map`](OwnedRwLockWriteGuard::map), but `f` may decline by
    /// returning `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(vec![1]));
    /// let g = OwnedRwLockWriteGuard::try_map(lock.write_owned().await, |v| v.get_mut(0)).unwrap();
    /// assert_eq!(*g, 1);
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, U: ?Sized>(this: Self, f: F) -> Result<OwnedRwLockMappedWriteGuard<T, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|a| a, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(OwnedRwLockMappedWriteGuard { inner }),
            Err(inner) => Err(OwnedRwLockWriteGuard { inner }),
        }
    }

    /// Turns this guard into a mapped one pointing at the whole data.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut mapped = OwnedRwLockWriteGuard::into_mapped(lock.write_owned().await);
    /// *mapped = 2;
    /// # }
    /// ```
    #[inline]
    pub fn into_mapped(this: Self) -> OwnedRwLockMappedWriteGuard<T> {
        OwnedRwLockMappedWriteGuard { inner: this.inner }
    }

    /// Atomically turns the write lock into a read lock of a part of the
    /// data. `f` runs while the write lock is still held; if it panics, the
    /// lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new((1, 2)));
    /// let r = OwnedRwLockWriteGuard::downgrade_map(lock.clone().write_owned().await, |t| &t.1);
    /// assert_eq!(*r, 2);
    /// assert!(lock.try_read().is_ok());
    /// # }
    /// ```
    #[inline]
    pub fn downgrade_map<F, U: ?Sized>(this: Self, f: F) -> OwnedRwLockReadGuard<T, U>
    where
        F: FnOnce(&T) -> &U,
    {
        // SAFETY: the guard's pointer is valid while held.
        match this.inner.try_downgrade(|p| Some(nn(f(unsafe { p.as_ref() })))) {
            Ok(inner) => OwnedRwLockReadGuard { inner },
            Err(_) => unreachable!(),
        }
    }

    /// Like [`downgrade_map`](OwnedRwLockWriteGuard::downgrade_map), but `f`
    /// may decline by returning `None`, which gives the write guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(None::<u8>));
    /// let w = OwnedRwLockWriteGuard::try_downgrade_map(lock.write_owned().await, |o| o.as_ref());
    /// assert!(w.is_err(), "still write-locked");
    /// # }
    /// ```
    #[inline]
    pub fn try_downgrade_map<F, U: ?Sized>(this: Self, f: F) -> Result<OwnedRwLockReadGuard<T, U>, Self>
    where
        F: FnOnce(&T) -> Option<&U>,
    {
        // SAFETY: the guard's pointer is valid while held.
        match this.inner.try_downgrade(|p| f(unsafe { p.as_ref() }).map(nn)) {
            Ok(inner) => Ok(OwnedRwLockReadGuard { inner }),
            Err(inner) => Err(OwnedRwLockWriteGuard { inner }),
        }
    }

    /// Atomically turns the write lock into a read lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::RwLock;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(1));
    /// let mut w = lock.clone().write_owned().await;
    /// *w = 2;
    /// let r = w.downgrade();
    /// assert_eq!(*r, 2);
    /// assert!(lock.try_read().is_ok());
    /// # }
    /// ```
    #[inline]
    pub fn downgrade(self) -> OwnedRwLockReadGuard<T> {
        Self::downgrade_map(self, |t| t)
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let guard = lock.clone().try_write_owned().unwrap();
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockWriteGuard::rwlock(&guard)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        this.inner.holder()
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockMappedWriteGuard<T, U> {
    /// Re-points the guard again. If `f` panics, the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(((1, 2), 3)));
    /// let outer = OwnedRwLockWriteGuard::map(lock.write_owned().await, |t| &mut t.0);
    /// let inner = OwnedRwLockMappedWriteGuard::map(outer, |t| &mut t.1);
    /// assert_eq!(*inner, 2);
    /// # }
    /// ```
    #[inline]
    pub fn map<F, V: ?Sized>(this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, V>
    where
        F: FnOnce(&mut U) -> &mut V,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        OwnedRwLockMappedWriteGuard { inner: this.inner.remap(|a| a, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))) }
    }

    /// Like [`map`](OwnedRwLockMappedWriteGuard::map), but `f` may decline
    /// by returning `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Arc::new(RwLock::new(vec![1]));
    /// let all = OwnedRwLockWriteGuard::into_mapped(lock.write_owned().await);
    /// assert!(OwnedRwLockMappedWriteGuard::try_map(all, |v| v.get_mut(3)).is_err());
    /// # }
    /// ```
    #[inline]
    pub fn try_map<F, V: ?Sized>(this: Self, f: F) -> Result<OwnedRwLockMappedWriteGuard<T, V>, Self>
    where
        F: FnOnce(&mut U) -> Option<&mut V>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|a| a, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(OwnedRwLockMappedWriteGuard { inner }),
            Err(inner) => Err(OwnedRwLockMappedWriteGuard { inner }),
        }
    }

    /// The `Arc` of the lock this guard holds.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{OwnedRwLockMappedWriteGuard, OwnedRwLockWriteGuard, RwLock};
    /// use std::sync::Arc;
    ///
    /// let lock = Arc::new(RwLock::new(1));
    /// let g = OwnedRwLockWriteGuard::into_mapped(lock.clone().try_write_owned().unwrap());
    /// assert!(Arc::ptr_eq(&lock, OwnedRwLockMappedWriteGuard::rwlock(&g)));
    /// ```
    #[inline]
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        this.inner.holder()
    }
}

impl_guard_traits!(ref, ['a, T: ?Sized] RwLockReadGuard<'a, T> => T);
impl_guard_traits!(mut, ['a, T: ?Sized] RwLockWriteGuard<'a, T> => T);
impl_guard_traits!(mut, ['a, T: ?Sized] RwLockMappedWriteGuard<'a, T> => T);
impl_guard_traits!(ref, [T: ?Sized, U: ?Sized] OwnedRwLockReadGuard<T, U> => U);
impl_guard_traits!(mut, [T: ?Sized] OwnedRwLockWriteGuard<T> => T);
impl_guard_traits!(mut, [T: ?Sized, U: ?Sized] OwnedRwLockMappedWriteGuard<T, U> => U);
