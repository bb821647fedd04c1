//! [`Mutex`]: the hybrid lock in exclusive-only mode.

use core::cell::UnsafeCell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use std::sync::Arc;

use crate::acquire::blocking;
use crate::acquire::future::{Lock, owned};
use crate::config::MAX_READERS;
use crate::error::TryLockError;
use crate::guard::{Held, Holder, impl_guard_traits, nn_mut};
use crate::raw::RawRwLock;
use crate::state::Kind;
use crate::trace::Trace;

/// An asynchronous mutual-exclusion lock that threads can use too: a drop-in
/// replacement for [`tokio::sync::Mutex`].
///
/// `lock().await` from tasks and [`blocking_lock`](Mutex::blocking_lock) from
/// threads compete for the same lock. A contended acquirer spins briefly with
/// per-address backoff, then queues: a task returns `Pending` with its waker
/// queued, a thread parks. The guard may be held across `.await`.
///
/// By default a newcomer may take a free lock ahead of queued waiters
/// ("barging"), which keeps the lock hot on a running thread; a waiter that
/// has been passed over for longer than the handoff timeout (1 ms) sets the
/// handoff bit, and the next unlock hands the lock straight to it. With the
/// `fair` feature the order is strictly FIFO, as tokio's. See the
/// [crate docs](crate) for the trade-off.
///
/// # Which kind of mutex?
///
/// For data that is never locked across an `.await`, a blocking mutex
/// ([`std::sync::Mutex`], `parking_lot::Mutex`) is simpler and cannot be
/// beaten when uncontended. Use this one when a guard must be held across
/// `.await`, when threads and tasks share the lock, or when tasks contend
/// hard enough that a blocking lock would stall runtime workers.
///
/// # Examples
///
/// ```
/// use hybrid_sync::Mutex;
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let counter = Arc::new(Mutex::new(0));
/// let mut tasks = Vec::new();
/// for _ in 0..10 {
///     let counter = counter.clone();
///     tasks.push(tokio::spawn(async move {
///         *counter.lock().await += 1;
///     }));
/// }
/// for t in tasks {
///     t.await.unwrap();
/// }
/// assert_eq!(*counter.lock().await, 10);
/// # }
/// ```
pub struct Mutex<T: ?Sized> {
    raw: RawRwLock,
    c: UnsafeCell<T>,
}

// SAFETY: the data is only reached through guards, which the lock makes
// exclusive; sending or sharing the lock can only move `T` between threads.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above: `&Mutex<T>` gives at most one thread `&mut T` at a time.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

impl<T: ?Sized> Holder for Mutex<T> {
    #[inline]
    fn raw(&self) -> &RawRwLock {
        &self.raw
    }
}

/// A handle to a held [`Mutex`]; the lock is released when it is dropped.
///
/// Returned by [`Mutex::lock`], [`Mutex::blocking_lock`] and
/// [`Mutex::try_lock`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let m = hybrid_sync::Mutex::new(vec![1]);
/// m.lock().await.push(2);
/// assert_eq!(*m.lock().await, vec![1, 2]);
/// # }
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    inner: Held<&'a Mutex<T>, T, true>,
}

/// An owned handle to a held [`Mutex`], keeping the mutex alive through an
/// `Arc`. Returned by [`Mutex::lock_owned`] and friends.
///
/// ```
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let m = Arc::new(hybrid_sync::Mutex::new(0));
/// let mut guard = m.clone().lock_owned().await;
/// tokio::spawn(async move { *guard += 1 }).await.unwrap();
/// assert_eq!(*m.lock().await, 1);
/// # }
/// ```
#[clippy::has_significant_drop]
pub struct OwnedMutexGuard<T: ?Sized> {
    inner: Held<Arc<Mutex<T>>, T, true>,
}

/// A [`MutexGuard`] re-pointed at a part of the data with
/// [`MutexGuard::map`].
///
/// ```
/// use hybrid_sync::{Mutex, MutexGuard};
///
/// let m = Mutex::new((1, 2));
/// let first = MutexGuard::map(m.try_lock().unwrap(), |t| &mut t.0);
/// assert_eq!(*first, 1);
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MappedMutexGuard<'a, T: ?Sized> {
    inner: Held<&'a RawRwLock, T, true>,
    marker: PhantomData<&'a mut T>,
}

/// An [`OwnedMutexGuard`] re-pointed at a part of the data with
/// [`OwnedMutexGuard::map`].
///
/// ```
/// use hybrid_sync::{Mutex, OwnedMutexGuard};
/// use std::sync::Arc;
///
/// let m = Arc::new(Mutex::new((1, 2)));
/// let second = OwnedMutexGuard::map(m.try_lock_owned().unwrap(), |t| &mut t.1);
/// assert_eq!(*second, 2);
/// ```
#[clippy::has_significant_drop]
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct OwnedMappedMutexGuard<T: ?Sized, U: ?Sized = T> {
    inner: Held<Arc<Mutex<T>>, U, true>,
}

// The guards hold raw pointers, so their auto traits are spelled out, exactly
// as tokio's (a guard gives `&mut T`, so sending it sends access to `T`).
// SAFETY: for each: the guard grants exclusive access to a `T` (or `U`);
// moving it to another thread needs `Send`, sharing `&guard` needs `Sync`.
unsafe impl<T: ?Sized + Send + Sync> Sync for MutexGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Send for MutexGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedMutexGuard<T> {}
// SAFETY: as above; the `Arc` may drop the mutex, and with it `T`, on
// whichever thread drops the guard, which `T: Send` allows.
unsafe impl<T: ?Sized + Send> Send for OwnedMutexGuard<T> {}
// SAFETY: as above; the mapped guard reaches only a `T`.
unsafe impl<'a, T: ?Sized + Sync + 'a> Sync for MappedMutexGuard<'a, T> {}
// SAFETY: as above.
unsafe impl<'a, T: ?Sized + Send + 'a> Send for MappedMutexGuard<'a, T> {}
// SAFETY: as above; it reaches a `U` and may drop the `T`.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Sync for OwnedMappedMutexGuard<T, U> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send, U: ?Sized + Send> Send for OwnedMappedMutexGuard<T, U> {}

impl<T: ?Sized> Mutex<T> {
    /// Creates a new unlocked mutex holding `t`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// let lock = Mutex::new(5);
    /// ```
    #[track_caller]
    pub fn new(t: T) -> Self
    where
        T: Sized,
    {
        Mutex { raw: RawRwLock::new(MAX_READERS).traced(Trace::mutex()), c: UnsafeCell::new(t) }
    }

    /// Creates a new unlocked mutex in a `const` context, e.g. a `static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// static LOCK: Mutex<i32> = Mutex::const_new(5);
    /// ```
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub const fn const_new(t: T) -> Self
    where
        T: Sized,
    {
        Mutex { raw: RawRwLock::new(MAX_READERS), c: UnsafeCell::new(t) }
    }

    /// Locks this mutex, waiting until it is available.
    ///
    /// A contended call spins briefly, then queues the task and returns
    /// `Pending` until the lock is granted or the task is woken to take it.
    /// Inside a tokio task it consumes one unit of coop budget, as tokio's
    /// locks do.
    ///
    /// # Cancel safety
    ///
    /// This method uses a queue to distribute the lock in the order it was
    /// requested (bounded by the handoff timeout by default, strictly under
    /// `fair`). Cancelling a call to `lock` makes you lose your place in the
    /// queue. A call cancelled after the lock was handed to it releases the
    /// lock, so nothing is ever leaked.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mutex = Mutex::new(1);
    /// let mut n = mutex.lock().await;
    /// *n = 2;
    /// # }
    /// ```
    pub fn lock(&self) -> impl Future<Output = MutexGuard<'_, T>> {
        // SAFETY: `Lock` makes the guard once, with the lock held for it.
        let make = move || unsafe { MutexGuard::new(self) };
        // SAFETY: `make` hands the lock to the guard.
        unsafe { Lock::new(&self.raw, Kind::Write, "Mutex::lock", make) }
    }

    /// Locks this mutex from a thread that is not running async code,
    /// spinning briefly and then parking the thread until it is available.
    /// It shares the queue with `lock().await` callers.
    ///
    /// # Panics
    ///
    /// Panics if called within an asynchronous execution context (a tokio
    /// task or `block_on`), as tokio's `blocking_lock` does. It works from
    /// plain threads, `spawn_blocking` and `block_in_place`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main]
    /// # async fn main() {
    /// let mutex = Arc::new(Mutex::new(1));
    /// let lock = mutex.lock().await;
    ///
    /// let mutex1 = Arc::clone(&mutex);
    /// let blocking = tokio::task::spawn_blocking(move || {
    ///     // Waits until the async guard below is dropped.
    ///     let mut n = mutex1.blocking_lock();
    ///     *n = 2;
    /// });
    ///
    /// assert_eq!(*lock, 1);
    /// drop(lock);
    /// blocking.await.unwrap();
    /// assert_eq!(*mutex.lock().await, 2);
    /// # }
    /// ```
    #[track_caller]
    pub fn blocking_lock(&self) -> MutexGuard<'_, T> {
        blocking::lock(&self.raw, Kind::Write);
        // SAFETY: `blocking::lock` returned, so the lock is ours.
        unsafe { MutexGuard::new(self) }
    }

    /// The owned version of [`blocking_lock`](Mutex::blocking_lock).
    ///
    /// # Panics
    ///
    /// Panics if called within an asynchronous execution context.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    /// use std::sync::Arc;
    ///
    /// let mutex = Arc::new(Mutex::new(1));
    /// let mut guard = mutex.clone().blocking_lock_owned();
    /// *guard = 2;
    /// drop(guard);
    /// assert_eq!(*mutex.blocking_lock(), 2);
    /// ```
    #[track_caller]
    pub fn blocking_lock_owned(self: Arc<Self>) -> OwnedMutexGuard<T> {
        blocking::lock(&self.raw, Kind::Write);
        // SAFETY: `blocking::lock` returned, so the lock is ours.
        unsafe { OwnedMutexGuard::new(self) }
    }

    /// Locks this mutex, returning a guard that keeps the mutex alive through
    /// its `Arc` and so has no lifetime.
    ///
    /// # Cancel safety
    ///
    /// As for [`lock`](Mutex::lock): cancelling loses your place in the
    /// queue and never leaks the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let mutex = Arc::new(Mutex::new(1));
    /// let mut n = mutex.clone().lock_owned().await;
    /// *n = 2;
    /// # }
    /// ```
    pub fn lock_owned(self: Arc<Self>) -> impl Future<Output = OwnedMutexGuard<T>> {
        // SAFETY: the guard gets the lock with the `Arc`.
        unsafe { owned(self, |mutex| &mutex.raw, Kind::Write, "Mutex::lock_owned", OwnedMutexGuard::new) }
    }

    /// Locks this mutex if that needs no waiting.
    ///
    /// # Errors
    ///
    /// [`TryLockError`] if the mutex is held, or (by default) a waiter has
    /// claimed the next turn with the handoff bit, or (under `fair`) anyone
    /// is queued.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// let mutex = Mutex::new(1);
    /// let n = mutex.try_lock().unwrap();
    /// assert_eq!(*n, 1);
    /// assert!(mutex.try_lock().is_err());
    /// ```
    pub fn try_lock(&self) -> Result<MutexGuard<'_, T>, TryLockError> {
        if self.raw.try_acquire(Kind::Write) {
            // SAFETY: just acquired.
            Ok(unsafe { MutexGuard::new(self) })
        } else {
            Err(TryLockError(()))
        }
    }

    /// The owned version of [`try_lock`](Mutex::try_lock).
    ///
    /// # Errors
    ///
    /// As for `try_lock`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    /// use std::sync::Arc;
    ///
    /// let mutex = Arc::new(Mutex::new(1));
    /// let n = mutex.clone().try_lock_owned().unwrap();
    /// assert_eq!(*n, 1);
    /// ```
    pub fn try_lock_owned(self: Arc<Self>) -> Result<OwnedMutexGuard<T>, TryLockError> {
        if self.raw.try_acquire(Kind::Write) {
            // SAFETY: just acquired.
            Ok(unsafe { OwnedMutexGuard::new(self) })
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
    /// let lock = hybrid_sync::Mutex::new(0);
    /// drop(lock.try_lock());
    /// let stats = lock.stats();
    /// assert_eq!(stats.acquisitions(), if stats.enabled() { 1 } else { 0 });
    /// ```
    pub fn stats(&self) -> crate::stats::LockStats {
        self.raw.stats()
    }

    /// Returns a mutable reference to the data. No locking is needed: the
    /// `&mut self` borrow proves nobody else can hold the lock.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// let mut mutex = Mutex::new(1);
    /// *mutex.get_mut() = 2;
    /// assert_eq!(mutex.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.c.get_mut()
    }

    /// Consumes the mutex, returning the data.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::Mutex;
    ///
    /// let mutex = Mutex::new(1);
    /// assert_eq!(mutex.into_inner(), 1);
    /// ```
    pub fn into_inner(self) -> T
    where
        T: Sized,
    {
        self.c.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// The raw lock word and queue state, decoded, for hang reports (the
    /// torture and stress tests print it when a watchdog fires). Takes no
    /// lock. Not part of the stable API.
    #[doc(hidden)]
    pub fn __describe(&self) -> String {
        self.raw.describe()
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(t: T) -> Self {
        Mutex::new(t)
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    /// Prints the data if the lock is free right now, `<locked>` otherwise;
    /// never waits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(inner) => d.field("data", &&*inner),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

// === guards ===

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// # Safety
    /// The caller holds `lock` exclusively and gives it to the guard.
    #[inline]
    unsafe fn new(lock: &'a Mutex<T>) -> Self {
        // SAFETY: forwarded; the pointer comes from the mutex's own cell.
        MutexGuard { inner: unsafe { Held::new(lock, nn_mut(&mut *lock.c.get())) } }
    }

    /// Makes a guard for a part of the locked data, e.g. one field.
    ///
    /// An associated function, to avoid clashing with methods of `T`; call it
    /// as `MutexGuard::map(guard, ...)`. If `f` panics the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, MutexGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// #[derive(Debug)]
    /// struct Foo(u32);
    ///
    /// let foo = Mutex::new(Foo(1));
    /// {
    ///     let mut mapped = MutexGuard::map(foo.lock().await, |f| &mut f.0);
    ///     *mapped = 2;
    /// }
    /// assert_eq!(foo.lock().await.0, 2);
    /// # }
    /// ```
    #[inline]
    pub fn map<U: ?Sized, F>(this: Self, f: F) -> MappedMutexGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        MappedMutexGuard {
            // SAFETY: the guard's pointer is valid and exclusive while held.
            inner: this.inner.remap(|m| &m.raw, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))),
            marker: PhantomData,
        }
    }

    /// Like [`map`](MutexGuard::map), but `f` may decline by returning
    /// `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, MutexGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let m = Mutex::new(vec![1, 2]);
    /// let first = MutexGuard::try_map(m.lock().await, |v| v.first_mut()).unwrap();
    /// assert_eq!(*first, 1);
    /// drop(first);
    /// let g = MutexGuard::try_map(m.lock().await, |v| v.get_mut(5)).unwrap_err();
    /// assert_eq!(*g, vec![1, 2]);
    /// # }
    /// ```
    #[inline]
    pub fn try_map<U: ?Sized, F>(this: Self, f: F) -> Result<MappedMutexGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|m| &m.raw, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(MappedMutexGuard { inner, marker: PhantomData }),
            Err(inner) => Err(MutexGuard { inner }),
        }
    }

    /// The mutex this guard locks.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, MutexGuard};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let m = Mutex::new(0);
    /// let guard = m.lock().await;
    /// assert!(std::ptr::eq(MutexGuard::mutex(&guard), &m));
    /// # }
    /// ```
    #[inline]
    pub fn mutex(this: &Self) -> &'a Mutex<T> {
        this.inner.holder()
    }
}

impl<T: ?Sized> OwnedMutexGuard<T> {
    /// # Safety
    /// The caller holds `lock` exclusively and gives it to the guard.
    #[inline]
    unsafe fn new(lock: Arc<Mutex<T>>) -> Self {
        // SAFETY: forwarded; the pointer comes from the mutex's own cell,
        // which the `Arc` keeps alive.
        let data = nn_mut(unsafe { &mut *lock.c.get() });
        // SAFETY: forwarded.
        OwnedMutexGuard { inner: unsafe { Held::new(lock, data) } }
    }

    /// Makes a guard for a part of the locked data. If `f` panics the lock
    /// is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, OwnedMutexGuard};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let foo = Arc::new(Mutex::new((1, 2)));
    /// let mut second = OwnedMutexGuard::map(foo.clone().lock_owned().await, |f| &mut f.1);
    /// *second = 3;
    /// drop(second);
    /// assert_eq!(*foo.lock().await, (1, 3));
    /// # }
    /// ```
    #[inline]
    pub fn map<U: ?Sized, F>(this: Self, f: F) -> OwnedMappedMutexGuard<T, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        OwnedMappedMutexGuard { inner: this.inner.remap(|m| m, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))) }
    }

    /// Like [`map`](OwnedMutexGuard::map), but `f` may decline by returning
    /// `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, OwnedMutexGuard};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let m = Arc::new(Mutex::new(Some(1)));
    /// let inner = OwnedMutexGuard::try_map(m.clone().lock_owned().await, |o| o.as_mut()).unwrap();
    /// assert_eq!(*inner, 1);
    /// # }
    /// ```
    #[inline]
    pub fn try_map<U: ?Sized, F>(this: Self, f: F) -> Result<OwnedMappedMutexGuard<T, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|m| m, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(OwnedMappedMutexGuard { inner }),
            Err(inner) => Err(OwnedMutexGuard { inner }),
        }
    }

    /// The `Arc` of the mutex this guard locks.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, OwnedMutexGuard};
    /// use std::sync::Arc;
    ///
    /// let m = Arc::new(Mutex::new(0));
    /// let guard = m.clone().try_lock_owned().unwrap();
    /// assert!(Arc::ptr_eq(OwnedMutexGuard::mutex(&guard), &m));
    /// ```
    #[inline]
    pub fn mutex(this: &Self) -> &Arc<Mutex<T>> {
        this.inner.holder()
    }
}

impl<'a, T: ?Sized> MappedMutexGuard<'a, T> {
    /// Re-points the guard again. If `f` panics the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{MappedMutexGuard, Mutex, MutexGuard};
    ///
    /// let m = Mutex::new(((1, 2), 3));
    /// let outer = MutexGuard::map(m.try_lock().unwrap(), |t| &mut t.0);
    /// let inner = MappedMutexGuard::map(outer, |t| &mut t.1);
    /// assert_eq!(*inner, 2);
    /// ```
    #[inline]
    pub fn map<U: ?Sized, F>(this: Self, f: F) -> MappedMutexGuard<'a, U>
    where
        F: FnOnce(&mut T) -> &mut U,
    {
        MappedMutexGuard {
            // SAFETY: the guard's pointer is valid and exclusive while held.
            inner: this.inner.remap(|r| r, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))),
            marker: PhantomData,
        }
    }

    /// Like [`map`](MappedMutexGuard::map), but `f` may decline by returning
    /// `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{MappedMutexGuard, Mutex, MutexGuard};
    ///
    /// let m = Mutex::new((vec![1], 3));
    /// let v = MutexGuard::map(m.try_lock().unwrap(), |t| &mut t.0);
    /// let v = MappedMutexGuard::try_map(v, |v| v.get_mut(9)).unwrap_err();
    /// assert_eq!(*v, vec![1]);
    /// ```
    #[inline]
    pub fn try_map<U: ?Sized, F>(this: Self, f: F) -> Result<MappedMutexGuard<'a, U>, Self>
    where
        F: FnOnce(&mut T) -> Option<&mut U>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|r| r, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(MappedMutexGuard { inner, marker: PhantomData }),
            Err(inner) => Err(MappedMutexGuard { inner, marker: PhantomData }),
        }
    }
}

impl<T: ?Sized, U: ?Sized> OwnedMappedMutexGuard<T, U> {
    /// Re-points the guard again. If `f` panics the lock is released.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};
    /// use std::sync::Arc;
    ///
    /// let m = Arc::new(Mutex::new(((1, 2), 3)));
    /// let outer = OwnedMutexGuard::map(m.try_lock_owned().unwrap(), |t| &mut t.0);
    /// let inner = OwnedMappedMutexGuard::map(outer, |t| &mut t.1);
    /// assert_eq!(*inner, 2);
    /// ```
    #[inline]
    pub fn map<S: ?Sized, F>(this: Self, f: F) -> OwnedMappedMutexGuard<T, S>
    where
        F: FnOnce(&mut U) -> &mut S,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        OwnedMappedMutexGuard { inner: this.inner.remap(|m| m, |p| nn_mut(f(unsafe { &mut *p.as_ptr() }))) }
    }

    /// Like [`map`](OwnedMappedMutexGuard::map), but `f` may decline by
    /// returning `None`, which gives the original guard back.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};
    /// use std::sync::Arc;
    ///
    /// let m = Arc::new(Mutex::new((None::<u8>, 3)));
    /// let o = OwnedMutexGuard::map(m.try_lock_owned().unwrap(), |t| &mut t.0);
    /// assert!(OwnedMappedMutexGuard::try_map(o, |o| o.as_mut()).is_err());
    /// ```
    #[inline]
    pub fn try_map<S: ?Sized, F>(this: Self, f: F) -> Result<OwnedMappedMutexGuard<T, S>, Self>
    where
        F: FnOnce(&mut U) -> Option<&mut S>,
    {
        // SAFETY: the guard's pointer is valid and exclusive while held.
        match this.inner.try_remap(|m| m, |p| f(unsafe { &mut *p.as_ptr() }).map(nn_mut)) {
            Ok(inner) => Ok(OwnedMappedMutexGuard { inner }),
            Err(inner) => Err(OwnedMappedMutexGuard { inner }),
        }
    }
}

impl_guard_traits!(mut, ['a, T: ?Sized] MutexGuard<'a, T> => T);
impl_guard_traits!(mut, [T: ?Sized] OwnedMutexGuard<T> => T);
impl_guard_traits!(mut, ['a, T: ?Sized] MappedMutexGuard<'a, T> => T);
impl_guard_traits!(mut, [T: ?Sized, U: ?Sized] OwnedMappedMutexGuard<T, U> => U);
