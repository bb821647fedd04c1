//! [`LockRef`]: a reference count and a lock in one 64-bit atomic word, after
//! the Linux kernel's `lockref`; and [`LockArc`], the owned handle built on it.

use core::cell::UnsafeCell;
use core::fmt;
use core::future::Future;
use core::marker::PhantomData;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;

use crate::acquire::future::Lock;
use crate::config::{FAIR, LOCKREF_BACKOFF_MAX_NS, LOCKREF_BACKOFF_MIN_NS};
use crate::error::TryLockError;
use crate::layout::{COUNT_SHIFT, Counted, count_half, lock_half};
use crate::loom::Ordering;
#[cfg(not(hybrid_sync_tsan))]
use crate::loom::fence;
use crate::raw::RawRwLock;
use crate::state::{Kind, may_barge};

/// The largest count a live [`LockRef`] holds: `i32::MAX`, as the kernel's
/// `int` count. One more reference panics, as an `Arc` overflow aborts.
pub const MAX_COUNT: u32 = i32::MAX as u32;

/// The count of a dead `LockRef` ([`LockRefGuard::mark_dead`]): above every
/// live count, so one comparison rejects both overflow and death.
const DEAD: u32 = MAX_COUNT + 1;

/// One reference, in the count half of the word.
const ONE: u64 = 1 << COUNT_SHIFT;
const _: () = assert!(ONE == 1 << 32);

/// How many compare-and-swaps a lockless update tries before it takes the
/// lock instead: the kernel's `CMPXCHG_LOOP` limit.
const CMPXCHG_LOOPS: u32 = 100;

/// A reference count and a lock packed in one 64-bit atomic word, guarding a
/// value: the Linux kernel's `lockref` for threads and tasks.
///
/// While the lock is free, [`get`](Self::get), [`put`](Self::put) and their
/// conditional forms are one compare-and-swap on the word, with no lock
/// taken; while it is held they wait for it and update the count under it.
/// Every lockless update behaves as if the lock had been taken around it: a
/// lock holder sees a count nobody else changes, and a lockless update sees
/// the count as the last holder left it. That is what makes the pattern of
/// the kernel's dentry cache safe: a lookup takes a reference only if the
/// object is not dead ([`get_not_dead`](Self::get_not_dead)), while the last
/// [`put_or_lock`](Self::put_or_lock) returns with the lock held so the
/// caller can [`mark_dead`](LockRefGuard::mark_dead) and tear down, and no
/// lookup can slip in between.
///
/// The lock half is the crate's hybrid lock: threads
/// ([`lock`](Self::lock)) and tasks ([`lock_async`](Self::lock_async))
/// spin briefly with per-address backoff, then queue in one FIFO with the
/// same handoff bound as [`Mutex`](crate::Mutex). It guards the value and
/// the count. Its waiters live in a process-wide table keyed by address, so
/// `size_of::<LockRef<()>>()` is 8 bytes (more with the `stats` feature,
/// which adds per-lock counters).
///
/// # Freeing after the last reference
///
/// A release of the lock touches nothing of the `LockRef` once another
/// thread could free it: with waiters to wake it releases under the wait
/// queue's lock, while the waiters keep the `LockRef` alive, and otherwise
/// in one compare-and-swap after which it touches nothing. So whoever holds
/// the last reference may free the memory as soon as it has released the
/// lock, even while the thread that held the lock before it is still
/// inside its release (having given its reference up under the lock), as
/// the kernel's dentries are freed after `spin_unlock` (and as `LockArc`'s
/// drop was until its handles were counted without the lock). A lookup
/// that holds no reference yet ([`get_not_dead`](Self::get_not_dead)) must
/// keep the memory alive by other means while it runs, as the kernel's RCU
/// does.
///
/// # The lock is for short critical sections
///
/// [`LockRefGuard`] is `!Send`, so a guard cannot be held across an `.await`
/// in a spawned task: the lock is meant for updates of a few instructions,
/// like the kernel's spinlock. In exchange, the count operations, which
/// wait for the lock while it is held, may be called from async code as a
/// `std::sync::Mutex` lock may. A wait that outlasts the spin parks the
/// thread; on a worker of a multi-thread tokio runtime it parks inside
/// `block_in_place`, so that the worker's other tasks (among them, perhaps,
/// a `lock_async` waiter the lock was just handed to) keep running.
///
/// A count operation waits for a held lock, so the holder of a guard must
/// not call one on the same `LockRef`: it would wait for itself, as a
/// second lock of a `parking_lot` mutex does. Under the lock, read and
/// change the count through the guard ([`LockRefGuard::count`],
/// [`LockRefGuard::set_count`]). ([`LockArc`]'s handles are counted
/// without the lock, and have no such rule.)
///
/// On a current-thread runtime (or a `LocalSet`) there is no other thread
/// to run them: there, take the lock from tasks with either `lock_async` or
/// the blocking methods, not both, and never hold a guard across `.await`
/// (a `!Send` guard can be, there). Otherwise a count operation that falls
/// back to the lock can wait for a task that cannot run until it returns.
/// For a value locked across `.await`, use [`Mutex`](crate::Mutex).
///
/// # The count
///
/// Live counts are `0..=`[`MAX_COUNT`]. An increment past `MAX_COUNT`
/// panics and leaves the count unchanged. A dead `LockRef` has no count
/// ([`count`](Self::count) reads 0 and [`is_dead`](Self::is_dead) is true):
/// [`get_not_zero`](Self::get_not_zero) and
/// [`get_not_dead`](Self::get_not_dead) refuse it, and [`get`](Self::get)
/// and [`put`](Self::put) panic on it, since a caller that holds a reference
/// cannot meet a dead object. Only a lock holder can revive it
/// ([`LockRefGuard::set_count`]).
///
/// # Examples
///
/// ```
/// use hybrid_sync::LockRef;
///
/// let entry = LockRef::new(String::from("cached")); // count 1: ours
/// entry.get(); // lockless: one compare-and-swap
/// assert_eq!(entry.count(), 2);
/// entry.put();
///
/// // The last reference: put_or_lock returns with the lock held, so we can
/// // mark the entry dead before anyone else can take a new reference.
/// let mut guard = entry.put_or_lock().expect("ours was the last reference");
/// guard.mark_dead();
/// guard.clear();
/// drop(guard);
/// assert!(!entry.get_not_dead());
/// ```
pub struct LockRef<T: ?Sized> {
    pub(crate) raw: RawRwLock<Counted>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through guards, which the lock makes
// exclusive; sending or sharing the `LockRef` can only move `T` between
// threads. The count is an atomic.
unsafe impl<T: ?Sized + Send> Send for LockRef<T> {}
// SAFETY: as above: `&LockRef<T>` gives at most one thread `&mut T` at a time.
unsafe impl<T: ?Sized + Send> Sync for LockRef<T> {}

/// The outcome of one attempt at a lockless update.
enum Lockless<R> {
    /// The update was made; the new count.
    Done(u32),
    /// The update does not apply to the count seen (with the lock free, so
    /// the answer is as good as one taken under the lock).
    Refused(R),
    /// The lock is held, a handoff is pending, or the word kept changing:
    /// take the lock.
    Busy,
}

impl<T> LockRef<T> {
    /// A `LockRef` holding `value`, with a count of 1 (the caller's
    /// reference, as `Arc::new` and the kernel's `lockref_init`).
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(5);
    /// assert_eq!(r.count(), 1);
    /// ```
    pub fn new(value: T) -> Self {
        Self::with_count(1, value)
    }

    /// A `LockRef` holding `value`, with the given count.
    ///
    /// # Panics
    ///
    /// If `count` is over [`MAX_COUNT`].
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(0, "idle");
    /// assert!(!r.get_not_zero());
    /// ```
    #[track_caller]
    pub fn with_count(count: u32, value: T) -> Self {
        assert!(count <= MAX_COUNT, "LockRef count {count} is over MAX_COUNT ({MAX_COUNT})");
        LockRef { raw: RawRwLock::with_layout(Counted::new(count)), value: UnsafeCell::new(value) }
    }

    /// Consumes the `LockRef`, returning the value.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(hybrid_sync::LockRef::new(7).into_inner(), 7);
    /// ```
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T: ?Sized> LockRef<T> {
    /// What marks this lock's waiters in its shared wait queue.
    pub(crate) fn queue_key(&self) -> usize {
        self.raw.key()
    }

    /// The raw lock word and this lock's waiters, decoded, for hang reports
    /// and tests, as [`RwLock`](crate::RwLock) has it. Takes no lock. Not
    /// part of the stable API.
    #[doc(hidden)]
    pub fn __describe(&self) -> String {
        self.raw.describe()
    }

    /// The word: count above, lock below.
    #[inline(always)]
    fn word(&self) -> &crate::loom::AtomicU64 {
        self.raw.layout().word()
    }

    /// An acquire fence after the count reached zero. ThreadSanitizer does
    /// not model fences, so its build (`--cfg hybrid_sync_tsan`, set by
    /// `.ci/sanitizers`) loads the word with Acquire instead, which orders
    /// at least as much: what std's `Arc` does under TSan.
    #[inline(always)]
    fn acquire_fence(&self) {
        #[cfg(not(hybrid_sync_tsan))]
        fence(Ordering::Acquire);
        #[cfg(hybrid_sync_tsan)]
        self.word().load(Ordering::Acquire);
    }

    /// The kernel's `CMPXCHG_LOOP`: while the lock could be taken right now,
    /// apply `update` to the count with one compare-and-swap, as if the lock
    /// had been taken and released around it.
    ///
    /// "Could be taken right now" is the lock's own barging rule: the lock
    /// half is free and no handoff is pending (under `fair`, nobody queued
    /// either), so a lockless update never passes a waiter that the lock
    /// itself would not let a newcomer pass.
    #[inline(always)]
    fn lockless<R>(&self, success: Ordering, update: impl Fn(u32) -> Result<u32, R>) -> Lockless<R> {
        let word = self.word();
        prefetch_for_write(word);
        // Relaxed: the compare-and-swap below validates what we read; a
        // refusal reads only the count, which is its own atomic variable.
        let mut w = word.load(Ordering::Relaxed);
        let mut waited = false;
        let mut fails = 0u32;
        for _ in 0..CMPXCHG_LOOPS {
            if !may_barge(Kind::Write, lock_half(w), 1, FAIR) {
                // Held: wait out the section once, then try again; taking
                // the lock ourselves would cost two more atomic operations
                // on the word and the other side's dispatch check.
                if waited || !self.raw.spin_until_free(crate::config::SPIN_LIMIT_BLOCKING_NS) {
                    return Lockless::Busy;
                }
                waited = true;
                w = word.load(Ordering::Relaxed);
                continue;
            }
            let count = match update(count_half(w)) {
                Ok(count) => count,
                Err(r) => return Lockless::Refused(r),
            };
            // Written as an addition of the difference, which the compiler
            // folds to `w ± ONE` for get and put: the fewer instructions
            // between reading the word and the CAS, the fewer CASes lose.
            let new = w.wrapping_add(u64::from(count.wrapping_sub(count_half(w))) << COUNT_SHIFT);
            match word.compare_exchange_weak(w, new, success, Ordering::Relaxed) {
                Ok(_) => return Lockless::Done(count),
                Err(_) => {
                    fails += 1;
                    // Another updater owns the line: let it finish a run of
                    // updates before pulling the line back (see the constants).
                    crate::backoff::relax_ns(
                        (LOCKREF_BACKOFF_MIN_NS << (fails - 1).min(8)).min(LOCKREF_BACKOFF_MAX_NS),
                    );
                    // Relaxed: as above; after the pause, the word as it is now.
                    w = word.load(Ordering::Relaxed);
                }
            }
        }
        Lockless::Busy
    }

    /// Applies `update` to the count under the lock, taking it the blocking
    /// way (this is the fallback of a lockless update, for which the lock is
    /// held only for short sections).
    #[cold]
    #[inline(never)]
    fn locked<R>(&self, update: impl FnOnce(u32) -> Result<u32, R>) -> Result<u32, R> {
        let mut guard = self.lock();
        let count = guard.raw_count();
        let new = update(count)?;
        guard.store_count(new);
        Ok(new)
    }

    /// Increments the count: lockless while the lock is free, else under it.
    /// For a caller that already holds a reference (as the kernel's
    /// `lockref_get`).
    ///
    /// # Panics
    ///
    /// If the count is [`MAX_COUNT`] (it is left unchanged), or the `LockRef`
    /// is dead: a caller with a reference cannot meet a dead object.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(());
    /// r.get();
    /// assert_eq!(r.count(), 2);
    /// ```
    #[inline]
    #[track_caller]
    pub fn get(&self) {
        // Relaxed: a new reference to an object the caller already holds a
        // reference to publishes and reads nothing (`Arc::clone`'s argument);
        // the value is reached only through the lock, which orders itself.
        match self.lockless(Ordering::Relaxed, |c| if c < MAX_COUNT { Ok(c + 1) } else { Err(c) }) {
            Lockless::Done(_) => {}
            Lockless::Refused(c) => count_panic("get", c),
            Lockless::Busy => {
                if let Err(c) = self.locked(|c| if c < MAX_COUNT { Ok(c + 1) } else { Err(c) }) {
                    count_panic("get", c)
                }
            }
        }
    }

    /// Increments the count unless it is 0 (or the `LockRef` is dead);
    /// returns whether it did (the kernel's `lockref_get_not_zero`).
    ///
    /// # Panics
    ///
    /// If the count is [`MAX_COUNT`].
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(0, ());
    /// assert!(!r.get_not_zero());
    /// r.get();
    /// assert!(r.get_not_zero());
    /// ```
    #[inline]
    #[track_caller]
    pub fn get_not_zero(&self) -> bool {
        self.get_if("get_not_zero", |c| c > 0)
    }

    /// Increments the count unless the `LockRef` is dead; returns whether it
    /// did (the kernel's `lockref_get_not_dead`). The lookup of a shared
    /// cache entry that may be torn down concurrently.
    ///
    /// # Panics
    ///
    /// If the count is [`MAX_COUNT`].
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(0, ());
    /// assert!(r.get_not_dead());
    /// r.lock().mark_dead();
    /// assert!(!r.get_not_dead());
    /// ```
    #[inline]
    #[track_caller]
    pub fn get_not_dead(&self) -> bool {
        self.get_if("get_not_dead", |_| true)
    }

    #[inline(always)]
    #[track_caller]
    fn get_if(&self, what: &'static str, live: impl Fn(u32) -> bool + Copy) -> bool {
        let update = |c: u32| match c {
            DEAD => Err(false),
            MAX_COUNT => Err(true),
            c if live(c) => Ok(c + 1),
            _ => Err(false),
        };
        // Relaxed: as in `get`; the value is reached only through the lock.
        let result = match self.lockless(Ordering::Relaxed, update) {
            Lockless::Done(_) => return true,
            Lockless::Refused(overflow) => Err(overflow),
            Lockless::Busy => self.locked(update).map(drop),
        };
        match result {
            Ok(()) => true,
            Err(false) => false,
            Err(true) => count_panic(what, MAX_COUNT),
        }
    }

    /// Decrements the count, to 0 if it is 1: lockless while the lock is
    /// free, else under it. To tear down at zero under the lock, use
    /// [`put_or_lock`](Self::put_or_lock).
    ///
    /// # Panics
    ///
    /// If the count is 0 or the `LockRef` is dead (there is no reference to
    /// give back).
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(2, ());
    /// r.put();
    /// assert_eq!(r.count(), 1);
    /// ```
    #[inline]
    #[track_caller]
    pub fn put(&self) {
        let update = |c: u32| if c > 0 && c != DEAD { Ok(c - 1) } else { Err(c) };
        // Release: the caller's uses of the object happen before whoever
        // sees the count drop to zero tears it down (`Arc::drop`'s argument).
        let count = match self.lockless(Ordering::Release, update) {
            Lockless::Done(count) => count,
            Lockless::Refused(c) => count_panic("put", c),
            Lockless::Busy => match self.locked(update) {
                Ok(count) => count,
                Err(c) => count_panic("put", c),
            },
        };
        if count == 0 {
            // Acquire: pairs with the Release of every earlier put, so the
            // caller may tear down after this (`Arc::drop`'s fence).
            self.acquire_fence();
        }
    }

    /// Decrements the count unless it is 1 or less (or the `LockRef` is
    /// dead); returns whether it did (the kernel's `lockref_put_not_zero`).
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(2, ());
    /// assert!(r.put_not_zero());
    /// assert!(!r.put_not_zero());
    /// assert_eq!(r.count(), 1);
    /// ```
    #[inline]
    pub fn put_not_zero(&self) -> bool {
        let update = |c: u32| if c > 1 && c != DEAD { Ok(c - 1) } else { Err(()) };
        // Release: as in `put`.
        match self.lockless(Ordering::Release, update) {
            Lockless::Done(_) => true,
            Lockless::Refused(()) => false,
            Lockless::Busy => self.locked(update).is_ok(),
        }
    }

    /// Decrements the count locklessly and returns the new count, or `None`
    /// if it could not: the count was 0, the `LockRef` is dead, or the lock
    /// was held (the kernel's `lockref_put_return`, which never waits). On
    /// `Some(0)` the caller holds the last reference and may tear down.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(1, ());
    /// let guard = r.lock();
    /// assert_eq!(r.put_return(), None); // locked: the caller falls back
    /// drop(guard);
    /// assert_eq!(r.put_return(), Some(0));
    /// assert_eq!(r.put_return(), None);
    /// ```
    #[inline]
    pub fn put_return(&self) -> Option<u32> {
        // Release: as in `put`.
        match self.lockless(Ordering::Release, |c| if c > 0 && c != DEAD { Ok(c - 1) } else { Err(()) }) {
            Lockless::Done(count) => {
                if count == 0 {
                    // Acquire: as in `put`.
                    self.acquire_fence();
                }
                Some(count)
            }
            Lockless::Refused(()) | Lockless::Busy => None,
        }
    }

    /// Decrements the count unless that would take it to zero: with a count
    /// of 1 or less (or a dead `LockRef`) it returns with the lock held and
    /// the count unchanged, so the caller can decide, under the lock,
    /// whether to tear down (the kernel's `lockref_put_or_lock`).
    ///
    /// Waits for the lock the blocking way, like [`lock`](Self::lock).
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(2, vec![1, 2]);
    /// assert!(r.put_or_lock().is_none()); // 2 -> 1
    /// let mut last = r.put_or_lock().expect("the last reference");
    /// assert_eq!(last.count(), 1);
    /// last.set_count(0);
    /// last.clear();
    /// ```
    #[inline]
    pub fn put_or_lock(&self) -> Option<LockRefGuard<'_, T>> {
        // Release: as in `put`. (The caller that gets the lock instead
        // synchronizes through the lock's Acquire.)
        match self.lockless(Ordering::Release, |c| if c > 1 && c != DEAD { Ok(c - 1) } else { Err(()) }) {
            Lockless::Done(_) => None,
            Lockless::Refused(()) | Lockless::Busy => self.put_or_lock_slow(),
        }
    }

    #[cold]
    fn put_or_lock_slow(&self) -> Option<LockRefGuard<'_, T>> {
        let mut guard = self.lock();
        match guard.raw_count() {
            c if c > 1 && c != DEAD => {
                guard.store_count(c - 1);
                None
            }
            _ => Some(guard),
        }
    }

    /// The count now: a snapshot that other threads may change at once.
    /// 0 for a dead `LockRef`.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(3, ());
    /// assert_eq!(r.count(), 3);
    /// ```
    #[inline]
    pub fn count(&self) -> u32 {
        // Relaxed: a snapshot, ordered with nothing.
        match count_half(self.word().load(Ordering::Relaxed)) {
            DEAD => 0,
            c => c,
        }
    }

    /// Whether the `LockRef` has been marked dead
    /// ([`LockRefGuard::mark_dead`]). Once dead it stays dead unless a lock
    /// holder sets a count again.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(());
    /// assert!(!r.is_dead());
    /// ```
    #[inline]
    pub fn is_dead(&self) -> bool {
        // Relaxed: as in `count`.
        count_half(self.word().load(Ordering::Relaxed)) == DEAD
    }

    /// Locks the value and the count from a thread, spinning briefly and
    /// then parking until the lock is free. It shares the wait queue with
    /// [`lock_async`](Self::lock_async) callers.
    ///
    /// Unlike [`Mutex::blocking_lock`](crate::Mutex::blocking_lock) it may be
    /// called from async code, as `std::sync::Mutex::lock` may: the guard is
    /// `!Send` and its sections are short (see the type's docs).
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(1);
    /// *r.lock() += 1;
    /// assert_eq!(*r.lock(), 2);
    /// ```
    #[inline]
    pub fn lock(&self) -> LockRefGuard<'_, T> {
        if !self.raw.try_acquire(Kind::Write) {
            self.lock_slow();
        }
        // SAFETY: the lock is ours.
        unsafe { LockRefGuard::new(self) }
    }

    /// The contended path of [`lock`](Self::lock): spin, then park. On a
    /// worker of a multi-thread tokio runtime the park runs inside
    /// `block_in_place`, which hands the worker's other tasks to another
    /// thread first: the lock may have been handed to a task that is still
    /// waiting in a run queue (a due waiter of `lock_async`), and the task
    /// must be able to run while this thread waits for it.
    #[cold]
    #[inline(never)]
    fn lock_slow(&self) {
        if self.raw.spin_only(Kind::Write, crate::config::SPIN_LIMIT_BLOCKING_NS) {
            return;
        }
        // (WebAssembly has no multi-thread runtime: tokio builds without one.)
        #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle, target_family = "wasm")))]
        if tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
        {
            return tokio::task::block_in_place(|| self.raw.lock_blocking_contended(Kind::Write));
        }
        self.raw.lock_blocking_contended(Kind::Write);
    }

    /// Locks the value and the count from a task: spins briefly, then
    /// queues with the task's waker (beside any threads waiting in
    /// [`lock`](Self::lock)) and resolves once the lock is ours.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future gives up its place in the queue, and
    /// a lock that was handed to it meanwhile is passed on.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let r = hybrid_sync::LockRef::new(1);
    /// {
    ///     let mut guard = r.lock_async().await;
    ///     *guard += 1;
    /// } // dropped before any other `.await`
    /// assert_eq!(*r.lock_async().await, 2);
    /// # }
    /// ```
    pub fn lock_async(&self) -> impl Future<Output = LockRefGuard<'_, T>> + Send + '_
    where
        T: Send,
    {
        // SAFETY: `Lock` makes the guard once, with the lock held for it.
        let make = move || unsafe { LockRefGuard::new(self) };
        // SAFETY: `make` hands the lock to the guard.
        unsafe { Lock::new(&self.raw, Kind::Write, "LockRef::lock_async", make) }
    }

    /// Locks the value and the count if the lock is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError`] if the lock is held, or a handoff to a waiter is
    /// pending.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(());
    /// let guard = r.try_lock().unwrap();
    /// assert!(r.try_lock().is_err());
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Result<LockRefGuard<'_, T>, TryLockError> {
        if self.raw.try_acquire(Kind::Write) {
            // SAFETY: just acquired.
            Ok(unsafe { LockRefGuard::new(self) })
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
    /// let lock = hybrid_sync::LockRef::new(0);
    /// drop(lock.try_lock());
    /// let stats = lock.stats();
    /// assert_eq!(stats.acquisitions(), if stats.enabled() { 1 } else { 0 });
    /// ```
    pub fn stats(&self) -> crate::stats::LockStats {
        self.raw.stats()
    }
    /// The value, through exclusive access (no locking needed).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut r = hybrid_sync::LockRef::new(1);
    /// *r.get_mut() = 2;
    /// assert_eq!(r.into_inner(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T: Default> Default for LockRef<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T> From<T> for LockRef<T> {
    fn from(value: T) -> Self {
        Self::new(value)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for LockRef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("LockRef");
        match self.is_dead() {
            true => d.field("count", &"dead"),
            false => d.field("count", &self.count()),
        };
        match self.try_lock() {
            Ok(guard) => d.field("value", &&*guard),
            Err(_) => d.field("value", &format_args!("<locked>")),
        };
        d.finish()
    }
}

/// Asks for the word's cache line in exclusive state before reading it, so
/// that the load and the compare-and-swap after it cost one transfer of the
/// line instead of two (shared for the load, then exclusive for the CAS),
/// as the kernel's `prefetchw` does. Only where the build targets CPUs with
/// `prefetchw` (`-C target-feature=+prfchw`, or `target-cpu=native` on most
/// x86 machines); elsewhere the hint would be a read prefetch, which does
/// not help.
#[inline(always)]
fn prefetch_for_write<W>(word: &W) {
    #[cfg(all(target_arch = "x86_64", target_feature = "prfchw", not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
    // SAFETY: a prefetch is a hint: it never faults and has no effect on
    // program semantics, whatever the address.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_ET0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_ET0>(word as *const W as *const i8);
    }
    #[cfg(not(all(
        target_arch = "x86_64",
        target_feature = "prfchw",
        not(any(hybrid_sync_loom, hybrid_sync_shuttle))
    )))]
    let _ = word;
}

#[cold]
#[inline(never)]
#[track_caller]
fn count_panic(what: &str, count: u32) -> ! {
    match count {
        DEAD => panic!("LockRef::{what} on a dead LockRef"),
        MAX_COUNT => panic!("LockRef::{what}: reference count overflow (the count is at MAX_COUNT, {MAX_COUNT})"),
        _ => panic!("LockRef::{what} with a count of {count}: there is no reference to give back"),
    }
}

/// The lock of a [`LockRef`], held: access to the value and the count.
///
/// `!Send`: it cannot be held across an `.await` in a spawned task (see
/// [`LockRef`]'s docs on short sections). The lock is released on drop.
///
/// ```compile_fail
/// # async fn other() {}
/// let r = std::sync::Arc::new(hybrid_sync::LockRef::new(0));
/// tokio::spawn(async move {
///     let guard = r.lock_async().await;
///     other().await; // error: the guard is not `Send`
///     drop(guard);
/// });
/// ```
///
/// In a block that ends before the `.await` (as with a `std::sync::MutexGuard`,
/// the compiler goes by scopes, not by `drop` calls), it is fine:
///
/// ```
/// # async fn other() {}
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let r = std::sync::Arc::new(hybrid_sync::LockRef::new(0));
/// tokio::spawn(async move {
///     {
///         let mut guard = r.lock_async().await;
///         *guard += 1;
///     }
///     other().await;
/// })
/// .await
/// .unwrap();
/// # }
/// ```
#[must_use = "if unused the LockRef unlocks at once"]
pub struct LockRefGuard<'a, T: ?Sized> {
    lock: &'a LockRef<T>,
    /// `!Send`: the guard stays on the thread (and task) that locked.
    _not_send: PhantomData<*const ()>,
}

// SAFETY: sharing the guard shares `&T` only (every `&mut` access takes
// `&mut self`), which is sound for `T: Sync`.
unsafe impl<T: ?Sized + Sync> Sync for LockRefGuard<'_, T> {}

impl<'a, T: ?Sized> LockRefGuard<'a, T> {
    /// # Safety
    /// The caller holds `lock`'s lock and gives it to the guard.
    #[inline]
    unsafe fn new(lock: &'a LockRef<T>) -> Self {
        LockRefGuard { lock, _not_send: PhantomData }
    }

    /// The count half as stored (DEAD included).
    #[inline]
    fn raw_count(&self) -> u32 {
        // Relaxed: with the lock held nobody else writes the count, and the
        // lock's Acquire made the last writer's value visible.
        count_half(self.lock.word().load(Ordering::Relaxed))
    }

    /// Replaces the count half, leaving the lock half (where waiters may be
    /// setting flags) alone.
    #[inline]
    fn store_count(&mut self, count: u32) {
        let old = self.raw_count();
        // One add of the difference, shifted: it wraps in the count half
        // and never carries into the lock half, whose bits are all zero in
        // the addend. Relaxed: the lock orders the count for its next
        // holder, and a lockless update reads it back through the lock
        // word's modification order after our Release unlock.
        self.lock.word().fetch_add(u64::from(count.wrapping_sub(old)) << COUNT_SHIFT, Ordering::Relaxed);
    }

    /// The count: stable while the guard is held (lockless updates wait for
    /// the lock). 0 for a dead `LockRef`.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::with_count(2, ());
    /// let guard = r.lock();
    /// assert_eq!(guard.count(), 2);
    /// ```
    #[inline]
    pub fn count(&self) -> u32 {
        match self.raw_count() {
            DEAD => 0,
            c => c,
        }
    }

    /// Sets the count, reviving a dead `LockRef`.
    ///
    /// # Panics
    ///
    /// If `count` is over [`MAX_COUNT`].
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(());
    /// r.lock().set_count(5);
    /// assert_eq!(r.count(), 5);
    /// r.get(); // lockless again, now that the lock is free
    /// assert_eq!(r.count(), 6);
    /// ```
    #[inline]
    #[track_caller]
    pub fn set_count(&mut self, count: u32) {
        assert!(count <= MAX_COUNT, "LockRef count {count} is over MAX_COUNT ({MAX_COUNT})");
        self.store_count(count);
    }

    /// Marks the `LockRef` dead (the kernel's `lockref_mark_dead`): from now
    /// on [`get_not_dead`](LockRef::get_not_dead) and
    /// [`get_not_zero`](LockRef::get_not_zero) fail and the count reads 0.
    /// The usual last step before tearing down the object, under the lock
    /// that [`put_or_lock`](LockRef::put_or_lock) returned.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new("entry");
    /// let mut last = r.put_or_lock().expect("the last reference");
    /// last.mark_dead();
    /// drop(last);
    /// assert!(r.is_dead());
    /// assert_eq!(r.count(), 0);
    /// assert!(!r.get_not_dead()); // no new references to a dead entry
    /// ```
    #[inline]
    pub fn mark_dead(&mut self) {
        self.store_count(DEAD);
    }

    /// Whether the `LockRef` is dead.
    ///
    /// # Examples
    ///
    /// ```
    /// let r = hybrid_sync::LockRef::new(());
    /// let mut guard = r.lock();
    /// assert!(!guard.is_dead());
    /// guard.mark_dead();
    /// assert!(guard.is_dead());
    /// guard.set_count(1); // revived
    /// assert!(!guard.is_dead());
    /// ```
    #[inline]
    pub fn is_dead(&self) -> bool {
        self.raw_count() == DEAD
    }
}

impl<T: ?Sized> Deref for LockRefGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the lock is held by this guard, so nobody else has `&mut T`.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> DerefMut for LockRefGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held by this guard, and `&mut self` makes this
        // the only access through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: ?Sized> Drop for LockRefGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: the guard holds the lock and gives it up.
        unsafe { self.lock.raw.write_unlock() }
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for LockRefGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Display> fmt::Display for LockRefGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// A shared, locked value whose handles are counted in its lock word: what
/// `Arc<Mutex<T>>` is, with the `Arc`'s count and the mutex's lock in one
/// 64-bit word ([`LockRef`]).
///
/// `clone` is one atomic add on the count half of the word and `drop` one
/// atomic subtraction, as `Arc`'s are, whether or not the lock is
/// held: a handle is cloned or dropped without waiting for the lock, as an
/// `Arc` is beside the `Mutex` in it. (Unlike [`LockRef::get`] and
/// [`LockRef::put`], which wait for a held lock: a `LockRef`'s holder may
/// read or change the count, but a handle's count belongs to the handles.)
/// So a thread may clone and drop handles while it holds the lock, and a
/// task may while another task holds it across `.await`, where waiting
/// for the lock would deadlock. The last handle's drop frees the value.
/// The value is reached through [`lock`](Self::lock) (threads) or
/// [`lock_async`](Self::lock_async) (tasks), with the same short-section
/// rules as [`LockRef`].
///
/// # Examples
///
/// ```
/// use hybrid_sync::LockArc;
///
/// let hits = LockArc::new(0u64);
/// let threads: Vec<_> = (0..4)
///     .map(|_| {
///         let hits = hits.clone();
///         std::thread::spawn(move || *hits.lock() += 1)
///     })
///     .collect();
/// for t in threads {
///     t.join().unwrap();
/// }
/// assert_eq!(*hits.lock(), 4);
/// assert_eq!(LockArc::count(&hits), 1);
/// ```
pub struct LockArc<T: ?Sized> {
    inner: NonNull<LockRef<T>>,
    _owns: PhantomData<LockRef<T>>,
}

// SAFETY: as `Arc<Mutex<T>>`: handles on several threads share the
// `LockRef<T>`, which is Send + Sync for `T: Send`.
unsafe impl<T: ?Sized + Send> Send for LockArc<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for LockArc<T> {}

impl<T> LockArc<T> {
    /// Moves `value` to the heap, with one handle.
    ///
    /// # Examples
    ///
    /// ```
    /// let shared = hybrid_sync::LockArc::new(String::from("hello"));
    /// assert_eq!(*shared.lock(), "hello");
    /// ```
    pub fn new(value: T) -> Self {
        let inner = Box::new(LockRef::new(value));
        LockArc { inner: NonNull::from(Box::leak(inner)), _owns: PhantomData }
    }
}

impl<T: ?Sized> LockArc<T> {
    #[inline]
    fn inner(&self) -> &LockRef<T> {
        // SAFETY: the allocation lives while any handle does, and we are one.
        unsafe { self.inner.as_ref() }
    }

    /// How many handles exist (a snapshot). An associated function, as
    /// `Arc::strong_count` is, so that it cannot shadow a method of `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::LockArc;
    ///
    /// let a = LockArc::new(());
    /// let b = a.clone();
    /// assert_eq!(LockArc::count(&a), 2);
    /// drop(b);
    /// assert_eq!(LockArc::count(&a), 1);
    /// ```
    pub fn count(this: &Self) -> u32 {
        this.inner().count()
    }

    /// Whether two handles share one value.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::LockArc;
    ///
    /// let a = LockArc::new(1);
    /// let b = a.clone();
    /// let c = LockArc::new(1);
    /// assert!(LockArc::ptr_eq(&a, &b));
    /// assert!(!LockArc::ptr_eq(&a, &c));
    /// ```
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        core::ptr::addr_eq(this.inner.as_ptr(), other.inner.as_ptr())
    }

    /// Locks the value from a thread; see [`LockRef::lock`].
    ///
    /// # Examples
    ///
    /// ```
    /// let list = hybrid_sync::LockArc::new(Vec::new());
    /// let worker = {
    ///     let list = list.clone();
    ///     std::thread::spawn(move || list.lock().push(1))
    /// };
    /// worker.join().unwrap();
    /// list.lock().push(2);
    /// assert_eq!(*list.lock(), [1, 2]);
    /// ```
    #[inline]
    pub fn lock(&self) -> LockArcGuard<'_, T> {
        LockArcGuard(self.inner().lock())
    }

    /// Locks the value from a task; see [`LockRef::lock_async`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`LockRef::lock_async`].
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() {
    /// let hits = hybrid_sync::LockArc::new(0);
    /// let tasks: Vec<_> = (0..8)
    ///     .map(|_| {
    ///         let hits = hits.clone();
    ///         tokio::spawn(async move { *hits.lock_async().await += 1 })
    ///     })
    ///     .collect();
    /// for t in tasks {
    ///     t.await.unwrap();
    /// }
    /// assert_eq!(*hits.lock_async().await, 8);
    /// # }
    /// ```
    pub fn lock_async(&self) -> impl Future<Output = LockArcGuard<'_, T>> + Send + '_
    where
        T: Send,
    {
        // The `Lock` future itself, not an `async` block around
        // `LockRef::lock_async`: a block keeps the future it awaits apart
        // from the one it captured, 224 bytes where this is 96.
        let inner = self.inner();
        // SAFETY: `Lock` makes the guard once, with the lock held for it.
        let make = move || LockArcGuard(unsafe { LockRefGuard::new(inner) });
        // SAFETY: `make` hands the lock to the guard.
        unsafe { Lock::new(&inner.raw, Kind::Write, "LockArc::lock_async", make) }
    }

    /// Locks the value if the lock is free right now.
    ///
    /// # Errors
    ///
    /// [`TryLockError`] if it is not.
    ///
    /// # Examples
    ///
    /// ```
    /// let a = hybrid_sync::LockArc::new(0);
    /// let b = a.clone();
    /// let guard = a.try_lock().unwrap();
    /// assert!(b.try_lock().is_err());
    /// drop(guard);
    /// assert!(b.try_lock().is_ok());
    /// ```
    #[inline]
    pub fn try_lock(&self) -> Result<LockArcGuard<'_, T>, TryLockError> {
        self.inner().try_lock().map(LockArcGuard)
    }
}

impl<T: ?Sized> LockArc<T> {
    /// Adds `n` to the handle count, as if `n` clones had been leaked: for
    /// the tests of the count's limit, which 2^31 real clones would take
    /// seconds to reach (`__testing::lockarc_leak_handles`).
    pub(crate) fn leak_handles(&self, n: u32) {
        self.move_count(|c| c.checked_add(n).filter(|&c| c <= MAX_COUNT), "leak_handles", n);
    }

    /// Takes back `n` handles that [`leak_handles`](Self::leak_handles)
    /// added, never the last one.
    ///
    /// # Safety
    /// The caller leaked those `n` handles and no longer counts on them.
    pub(crate) unsafe fn reclaim_handles(&self, n: u32) {
        self.move_count(|c| c.checked_sub(n).filter(|&c| c > 0), "reclaim_handles", n);
    }

    fn move_count(&self, update: impl Fn(u32) -> Option<u32>, what: &str, n: u32) {
        let word = self.inner().word();
        // Relaxed: a test's bookkeeping, ordered by the test's own joins.
        let mut w = word.load(Ordering::Relaxed);
        loop {
            let Some(count) = update(count_half(w)) else {
                panic!("LockArc {what}({n}) with a count of {}: out of 1..=MAX_COUNT", count_half(w));
            };
            let new = u64::from(lock_half(w)) | (u64::from(count) << COUNT_SHIFT);
            match word.compare_exchange_weak(w, new, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => w = now,
            }
        }
    }
}

impl<T: ?Sized> Clone for LockArc<T> {
    /// A new handle: one atomic add on the count, made whether or not the
    /// lock is held (see [`LockArc`]).
    ///
    /// # Panics
    ///
    /// If [`MAX_COUNT`] handles exist already.
    #[inline]
    #[track_caller]
    fn clone(&self) -> Self {
        // One add, as `Arc::clone`'s: under contention a compare-and-swap
        // loop retries, an add never does. Relaxed: a new handle made from
        // one we hold publishes and reads nothing (`Arc::clone`'s argument).
        // Only the count half changes: the lock half's compare-and-swaps
        // retry when the count moves under them.
        let old = count_half(self.inner().word().fetch_add(ONE, Ordering::Relaxed));
        // A live handle (ours) keeps the count above 0; at most MAX_COUNT
        // before the add, since every add past it is taken back.
        debug_assert!(old > 0, "a LockArc's count of {old}");
        if old >= MAX_COUNT {
            // Taken back before the panic: the count past MAX_COUNT is seen
            // only while MAX_COUNT handles exist already (8 bytes each, 16
            // GiB of them), as `Arc` lets its count pass its limit before it
            // aborts. Relaxed: as the add.
            self.inner().word().fetch_sub(ONE, Ordering::Relaxed);
            panic!("LockArc::clone: handle count overflow ({MAX_COUNT} handles exist, MAX_COUNT)");
        }
        LockArc { inner: self.inner, _owns: PhantomData }
    }
}

impl<T: ?Sized> Drop for LockArc<T> {
    #[inline]
    fn drop(&mut self) {
        // Release: everything this handle did with the lock happens before
        // the last handle's drop frees it, as `Arc`'s drop orders it: its
        // critical sections (released before the handle could be dropped,
        // since guards and lock futures borrow it) and every access of the
        // word itself (a failed `try_lock`, `count`, a spinner's polls, this
        // subtraction). The critical sections alone would be ordered by
        // their unlocks, Release writes of this same word that the later
        // subtractions carry on; the word's own plain accesses would not be,
        // and the free must come after them too (loom checks both:
        // `lockarc_last_handle_sees_every_use`). Only the count half
        // changes.
        let old = self.inner().word().fetch_sub(ONE, Ordering::Release);
        debug_assert!(count_half(old) > 0, "a LockArc's count of 0");
        if count_half(old) != 1 {
            return;
        }
        // The last handle: no other handle exists, so no guard, lock future,
        // waiter or spinner does (each borrows a handle), and the lock is
        // free. Acquire: pairs with the other handles' Release above.
        self.inner().acquire_fence();
        // Under shuttle, the memory stays and the lock's code may not touch
        // its word any more (`tests/shuttle.rs` drops handles while releases
        // are in flight): a touch fails the test instead of reading freed
        // memory.
        #[cfg(hybrid_sync_shuttle)]
        self.inner().raw.layout().model_free();
        // SAFETY: the allocation came from `Box::leak` in `new`; this was the
        // last handle, and every other handle's drop, with all its uses of
        // the lock before it (the last of them a release, which touches the
        // word for the last time before it returns), happened before this
        // point (the fence above).
        #[cfg(not(hybrid_sync_shuttle))]
        #[cfg_attr(not(hybrid_sync_loom), allow(unused_mut))]
        let mut inner = unsafe { Box::from_raw(self.inner.as_ptr()) };
        // Under loom, the free is checked against every access of the word
        // by every handle, which the Release and Acquire above order before
        // it.
        #[cfg(hybrid_sync_loom)]
        inner.raw.layout_mut().model_dealloc();
        #[cfg(not(hybrid_sync_shuttle))]
        drop(inner);
    }
}

impl<T: Default> Default for LockArc<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for LockArc<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LockArc").field(&self.inner()).finish()
    }
}

/// The lock of a [`LockArc`], held. `!Send`, like [`LockRefGuard`]; unlike
/// it, it cannot change the count, which belongs to the handles.
///
/// ```
/// let hits = hybrid_sync::LockArc::new(0u64);
/// let mut guard = hits.lock();
/// *guard += 1;
/// drop(guard);
/// assert_eq!(*hits.lock(), 1);
/// ```
#[must_use = "if unused the LockArc unlocks at once"]
pub struct LockArcGuard<'a, T: ?Sized>(LockRefGuard<'a, T>);

impl<T: ?Sized> LockArcGuard<'_, T> {
    /// How many handles exist: a snapshot, as [`LockArc::count`] (handles
    /// are cloned and dropped without waiting for the lock).
    ///
    /// # Examples
    ///
    /// ```
    /// let a = hybrid_sync::LockArc::new(());
    /// let _b = a.clone();
    /// assert_eq!(a.lock().count(), 2);
    /// ```
    pub fn count(&self) -> u32 {
        self.0.count()
    }
}

impl<T: ?Sized> Deref for LockArcGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: ?Sized> DerefMut for LockArcGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for LockArcGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
