//! Where a lock keeps its word and its queue.
//!
//! The state machine in [`crate::raw`] works on a 32-bit lock word (layout in
//! [`crate::state`]) and a [`WaitQueue`]. A [`Layout`] says where those live:
//!
//! * [`Inline`]: for [`RwLock`](crate::RwLock) and [`Mutex`](crate::Mutex),
//!   the word, the reader limit and the queue side by side, 16 bytes; the
//!   reader limit's spare bits count the blocking threads in the queue
//!   ([`Census`]), which tells async acquirers not to spin.
//! * [`Counted`]: for [`LockRef`](crate::LockRef), the lock word is the low
//!   half of one 64-bit atomic whose high half is a reference count, and the
//!   queue lives in a process-wide table of queues keyed by the lock's
//!   address (parking_lot's design), so the whole lock is 8 bytes:
//!
//! ```text
//!  63                                   32 31                               0
//! +---------------------------------------+----------------------------------+
//! |     reference count (COUNT_SHIFT)     |  lock word (crate::state layout) |
//! +---------------------------------------+----------------------------------+
//! ```
//!
//! Every operation of [`Layout`] acts on the low half only and leaves the
//! count as it finds it; the count is changed by [`Counted::word`]'s users
//! (the lockref fast paths), by compare-and-swap against the whole word.
//!
//! A shared queue holds the waiters of every lock that hashes to it; each
//! node carries its lock's key (its address) and the queue guard shows a lock
//! only its own nodes, in their FIFO order ([`QueueGuard`]).
//!
//! [`QueueGuard`]: crate::wait_queue::QueueGuard

use crate::loom::{AtomicU32, AtomicU64, Ordering};
use crate::wait_queue::WaitQueue;

/// The storage of one lock: its 32-bit lock word, reader limit and queue.
///
/// The atomic methods mirror `AtomicU32`'s on the lock word, with its
/// orderings.
pub(crate) trait Layout: Sync {
    fn load(&self, order: Ordering) -> u32;
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32>;
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32>;
    /// Adds `v`; the lock word must not overflow (it never does: the reader
    /// count is bounded by `max_readers`).
    fn fetch_add(&self, v: u32, order: Ordering) -> u32;
    /// Subtracts `v`, which the lock word holds (the caller's own lock).
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32;
    /// Subtracts `v` (the caller's own, as for `fetch_sub`) unless the word
    /// it finds satisfies `stop`: `Ok` with the word before, or `Err` with
    /// the word that stopped it. One load and a compare-and-swap loop; the
    /// compare-and-swap that succeeds has ordering `success`.
    #[inline(always)]
    fn fetch_sub_unless(&self, v: u32, stop: impl Fn(u32) -> bool, success: Ordering) -> Result<u32, u32> {
        // Relaxed loads: each only feeds the compare-and-swap, which checks it.
        let mut s = self.load(Ordering::Relaxed);
        loop {
            if stop(s) {
                return Err(s);
            }
            match self.compare_exchange_weak(s, s - v, success, Ordering::Relaxed) {
                Ok(old) => return Ok(old),
                Err(actual) => s = actual,
            }
        }
    }
    fn fetch_and(&self, v: u32, order: Ordering) -> u32;
    /// For the model checkers, for a lock that may be freed once released
    /// ([`FREED_ONCE_RELEASED`](Self::FREED_ONCE_RELEASED)): the calling
    /// thread has just released the lock inside `RawRwLock::release_queued`,
    /// and until [`model_release_end`](Self::model_release_end) it may touch
    /// the word only while `pinned`, that is while queued waiters keep the
    /// lock alive.
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    #[inline(always)]
    fn model_release_begin(&self, _pinned: bool) {}
    /// For the model checkers: the release that the calling thread began
    /// ([`model_release_begin`](Self::model_release_begin)), if any, is
    /// pinned no longer (it handed the lock over, or let the queue go).
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    #[inline(always)]
    fn model_unpinned(&self) {}
    /// For the model checkers: the calling thread's release is over, and
    /// the thread's later touches are its own business again (it may hold a
    /// reference still).
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    #[inline(always)]
    fn model_release_end(&self) {}
    /// The most readers that may hold the lock at once.
    fn max_readers(&self) -> u32;
    /// The queue that holds this lock's waiters.
    fn queue(&self) -> &WaitQueue;
    /// The count of blocking threads in this lock's queue, where the lock
    /// keeps one (a queue of its own).
    fn census(&self) -> Option<&Census>;
    /// What marks this lock's nodes in its queue (0 for a queue of its own).
    fn key(&self) -> usize;
    /// Whether the lock's memory may be freed as soon as it is released, so
    /// that a release must not touch the word afterwards unless queued
    /// waiters pin it (`RawRwLock::write_release_pinned`).
    ///
    /// A [`Counted`] lock's count lives in its word: a `LockRef` holder may
    /// give its reference up under the lock (`put_or_lock`'s decrement when
    /// the lockless one finds the lock held, `LockRefGuard::set_count`),
    /// and once it releases, the last reference's owner may free the
    /// `LockRef` (as the kernel frees a dentry). An [`Inline`] lock is
    /// reached only through borrows that outlive each release (a guard
    /// borrows its lock, an owned guard holds an `Arc` until it has
    /// unlocked), as with the kernel's mutexes, whose `mutex_unlock` may also
    /// touch the lock after another task took it.
    const FREED_ONCE_RELEASED: bool;
}

/// The word, reader limit and queue of [`RwLock`](crate::RwLock) and
/// [`Mutex`](crate::Mutex), inline.
pub(crate) struct Inline {
    state: AtomicU32,
    limit: Census,
    queue: WaitQueue,
}

impl Inline {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub(crate) const fn new(max_readers: u32) -> Self {
        Inline { state: AtomicU32::new(0), limit: Census::new(max_readers), queue: WaitQueue::new() }
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    pub(crate) fn new(max_readers: u32) -> Self {
        Inline { state: AtomicU32::new(0), limit: Census::new(max_readers), queue: WaitQueue::new() }
    }
}

/// An [`Inline`] lock's reader limit, and in the word's spare top bits how
/// many blocking threads wait in its queue:
///
/// ```text
///  31        28 27                                                     0
/// +------------+--------------------------------------------------------+
/// |   census   |          max_readers (at most state::MAX_READERS)      |
/// +------------+--------------------------------------------------------+
/// ```
///
/// The census is written only under the queue lock, by whoever links or
/// unlinks a thread's node, and read without it by async acquirers deciding
/// whether to spin (`acquire::future`) and by blocking ones deciding whether
/// the queue holds a crowd (`config::crowd`): a hint, like the spinner slots.
/// It counts up to [`CENSUS_MAX`] exactly; from there it stays put until the
/// queue empties, so a lock that had that many threads queued at once keeps
/// its tasks and newcomer threads from spinning until its queue drains once.
///
/// A plain `core` atomic even under the model checkers: the census steers
/// only whether a task spins, which the models do not need to explore, and
/// the reader limit is read on every fast path, where a modelled atomic
/// would add a scheduling point to every step of every model.
pub(crate) struct Census(core::sync::atomic::AtomicU32);

/// Where the census starts in a [`Census`] word.
const CENSUS_SHIFT: u32 = 28;
/// One thread, as an increment of the word.
const ONE_THREAD: u32 = 1 << CENSUS_SHIFT;
/// The reader limit's bits.
const LIMIT_MASK: u32 = ONE_THREAD - 1;
/// The census saturates here (see [`Census`]).
pub(crate) const CENSUS_MAX: u32 = u32::MAX >> CENSUS_SHIFT;
const _: () = assert!(crate::state::MAX_READERS <= LIMIT_MASK, "the census would overlap the reader limit");

impl Census {
    pub(crate) const fn new(max_readers: u32) -> Self {
        assert!(max_readers <= LIMIT_MASK);
        Census(core::sync::atomic::AtomicU32::new(max_readers))
    }

    #[inline(always)]
    pub(crate) fn max_readers(&self) -> u32 {
        // Relaxed: the limit never changes; the census beside it is a hint.
        self.0.load(core::sync::atomic::Ordering::Relaxed) & LIMIT_MASK
    }

    /// Whether blocking threads wait in the queue (a racy snapshot).
    #[inline(always)]
    pub(crate) fn threads_queued(&self) -> bool {
        // Relaxed: a hint that guards no data.
        self.0.load(core::sync::atomic::Ordering::Relaxed) >= ONE_THREAD
    }

    /// How many threads the census counts (a racy snapshot; saturated at
    /// [`CENSUS_MAX`]).
    #[inline(always)]
    pub(crate) fn threads(&self) -> u32 {
        self.0.load(core::sync::atomic::Ordering::Relaxed) >> CENSUS_SHIFT
    }

    /// Replaces the count `n` with `f(n)`. Only under the queue lock, which
    /// orders every write: a load and a store do, no read-modify-write (the
    /// readers of the limit load the same word meanwhile, and see either).
    #[inline]
    fn update(&self, f: impl FnOnce(u32) -> u32) {
        use core::sync::atomic::Ordering::Relaxed;
        let w = self.0.load(Relaxed);
        // Relaxed: the queue lock orders the writers; the readers take a hint.
        self.0.store((f(w >> CENSUS_SHIFT) << CENSUS_SHIFT) | (w & LIMIT_MASK), Relaxed);
    }

    /// A thread's node was linked. Under the queue lock.
    pub(crate) fn thread_linked(&self) {
        self.update(|n| if n == CENSUS_MAX { n } else { n + 1 });
    }

    /// A thread's node was unlinked. Under the queue lock.
    pub(crate) fn thread_unlinked(&self) {
        self.update(|n| if n == CENSUS_MAX { n } else { n - 1 });
    }

    /// The queue is empty. Under the queue lock.
    pub(crate) fn emptied(&self) {
        // Relaxed: written only under the queue lock, which we hold.
        if self.0.load(core::sync::atomic::Ordering::Relaxed) >= ONE_THREAD {
            self.update(|_| 0);
        }
    }
}

impl Layout for Inline {
    const FREED_ONCE_RELEASED: bool = false;

    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        self.state.load(order)
    }
    #[inline(always)]
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        self.state.compare_exchange(current, new, success, failure)
    }
    #[inline(always)]
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        self.state.compare_exchange_weak(current, new, success, failure)
    }
    #[inline(always)]
    fn fetch_add(&self, v: u32, order: Ordering) -> u32 {
        self.state.fetch_add(v, order)
    }
    #[inline(always)]
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32 {
        self.state.fetch_sub(v, order)
    }
    #[inline(always)]
    fn fetch_and(&self, v: u32, order: Ordering) -> u32 {
        self.state.fetch_and(v, order)
    }
    #[inline(always)]
    fn max_readers(&self) -> u32 {
        self.limit.max_readers()
    }
    #[inline(always)]
    fn queue(&self) -> &WaitQueue {
        &self.queue
    }
    #[inline(always)]
    fn census(&self) -> Option<&Census> {
        Some(&self.limit)
    }
    #[inline(always)]
    fn key(&self) -> usize {
        0
    }
}

/// Where the count starts in a [`Counted`] word.
pub(crate) const COUNT_SHIFT: u32 = 32;
/// The lock-word half of a [`Counted`] word.
const LOCK_MASK: u64 = (1 << COUNT_SHIFT) - 1;
const _: () = assert!(LOCK_MASK == u32::MAX as u64);

/// A lock word sharing one 64-bit atomic with a reference count (above).
///
/// Its queue is one of [`BUCKETS`] shared queues, picked by address; under
/// the model checker (which cannot have statics) it has one of its own.
pub(crate) struct Counted {
    word: AtomicU64,
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    queue: WaitQueue,
    /// Under the model checkers, whether the model has freed the `LockRef`
    /// (see [`Counted::model_free`]). A plain `core` atomic, as the census
    /// is: loom and shuttle run one thread at a time, so it reads the
    /// execution's order without adding a scheduling point to every access
    /// of the word.
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    freed: core::sync::atomic::AtomicBool,
    /// Under the model checkers, the threads inside a release that gave the
    /// lock up (`RawRwLock::release_queued`), each with whether queued
    /// waiters pin the lock for it still (see
    /// [`Layout::model_release_begin`]). A touch of the word by such a
    /// thread while nothing pins the lock fails the model at once, where a
    /// free would have to be scheduled into the window before that touch,
    /// which loom's search does not always do (docs/checks.md). A std
    /// mutex, for the reason `freed` is a `core` atomic: no scheduling
    /// point.
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    releasing: std::sync::Mutex<Vec<(crate::loom::ThreadId, bool)>>,
}

/// How many shared queues [`Counted`] locks hash into. Only locks with
/// waiters use one, so collisions are rare; a collision costs a walk past
/// the other lock's nodes under the queue lock, and the two locks share
/// their spinner slots.
const BUCKETS: usize = 128;

/// One shared queue, on a cache line of its own.
#[repr(align(64))]
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
struct Bucket(WaitQueue);

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
static TABLE: [Bucket; BUCKETS] = [const { Bucket(WaitQueue::new()) }; BUCKETS];

/// The bucket of the lock at `addr` (Fibonacci hashing of the address).
#[inline]
pub(crate) fn bucket_index(addr: usize) -> usize {
    const _: () = assert!(BUCKETS.is_power_of_two());
    ((addr as u64 >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BUCKETS.trailing_zeros())) as usize
}

impl Counted {
    /// A free lock with `count` in its count half.
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub(crate) const fn new(count: u32) -> Self {
        Counted { word: AtomicU64::new((count as u64) << COUNT_SHIFT) }
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    pub(crate) fn new(count: u32) -> Self {
        Counted {
            word: AtomicU64::new((count as u64) << COUNT_SHIFT),
            queue: WaitQueue::new(),
            #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
            freed: core::sync::atomic::AtomicBool::new(false),
            #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
            releasing: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// The whole word, for the count's lockless updates. (Checked when
    /// handed out, not at each access: its users hold a reference, which
    /// keeps the `LockRef` alive, until their last access of it.)
    #[inline(always)]
    pub(crate) fn word(&self) -> &AtomicU64 {
        self.alive();
        &self.word
    }

    /// Under the model checkers: marks the word freed, as the owner of the
    /// last reference frees a `LockRef` (the kernel's dentry teardown;
    /// under shuttle, `LockArc`'s drop and `__testing::lockref_freed` call
    /// this and keep the memory). The memory stays, and any later access of the word by the
    /// lock's code fails the model. The queue is left out: in a real build
    /// it is a bucket of the static table, which outlives every lock (a
    /// model cannot have statics, so there it sits beside the word).
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    pub(crate) fn model_free(&self) {
        // Relaxed: loom and shuttle run their threads one at a time as
        // coroutines of one OS thread, so the store is in program order with
        // every later check, whichever model thread makes it.
        self.freed.store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// Under loom, the free of a `LockRef` that the caller owns now
    /// (`LockArc`'s last drop): loom checks a mutable access of an atomic
    /// against every access of it, so the model fails unless each load,
    /// store and read-modify-write of the word by any thread happened
    /// before this point, as a free of the memory must. A plain `drop`
    /// checks nothing (loom's atomics have no `Drop` of their own).
    #[cfg(hybrid_sync_loom)]
    pub(crate) fn model_dealloc(&mut self) {
        self.word.with_mut(|_| ());
    }

    /// Under the model checkers, fails the model if
    /// [`model_free`](Self::model_free) has run, or if the calling thread is
    /// inside a release that nothing pins any more
    /// ([`Layout::model_release_begin`]); nothing otherwise.
    #[inline(always)]
    fn alive(&self) {
        #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
        {
            assert!(
                // Relaxed: as in `model_free`.
                !self.freed.load(core::sync::atomic::Ordering::Relaxed),
                "a LockRef's word touched after its last owner freed it"
            );
            let me = crate::loom::current_thread().id();
            assert!(
                !self.releasing().iter().any(|&(t, pinned)| t == me && !pinned),
                "a LockRef's word touched by a release after nothing pinned the lock (its last owner could have freed it)"
            );
        }
    }

    /// The threads inside a release (the models' bookkeeping).
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    fn releasing(&self) -> std::sync::MutexGuard<'_, Vec<(crate::loom::ThreadId, bool)>> {
        // A model that failed while holding it fails anyway.
        self.releasing.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes one access of the word, checking that the word is alive as
    /// the access takes effect, as closely as each model checker allows.
    /// loom switches threads just before an access, so a free made at that
    /// switch comes before the access: the check follows the access (a
    /// check before it would pass, and a release that went on from its
    /// `fetch_sub` straight to `dispatch`'s load of the word got through
    /// such a check). shuttle switches both before and after an access, so
    /// a check after the release's own last access would see a free made
    /// at the switch that follows it, which is legal: there the check comes
    /// before, and catches a free made at the switch after the previous
    /// access.
    #[inline(always)]
    fn seen<R>(&self, access: impl FnOnce() -> R) -> R {
        #[cfg(hybrid_sync_shuttle)]
        self.alive();
        let result = access();
        #[cfg(not(hybrid_sync_shuttle))]
        self.alive();
        result
    }
}

/// The lock half of a whole word.
#[inline(always)]
pub(crate) const fn lock_half(w: u64) -> u32 {
    w as u32
}

/// The count half of a whole word.
#[inline(always)]
pub(crate) const fn count_half(w: u64) -> u32 {
    (w >> COUNT_SHIFT) as u32
}

impl Layout for Counted {
    const FREED_ONCE_RELEASED: bool = true;

    #[inline(always)]
    fn load(&self, order: Ordering) -> u32 {
        lock_half(self.seen(|| self.word.load(order)))
    }

    /// A compare-and-swap of the lock half: it fails only if the lock half
    /// differs from `current`, retrying while only the count moved under it.
    #[inline]
    fn compare_exchange(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        let mut w = self.seen(|| self.word.load(failure));
        loop {
            if lock_half(w) != current {
                return Err(lock_half(w));
            }
            let next = (w & !LOCK_MASK) | u64::from(new);
            match self.seen(|| self.word.compare_exchange_weak(w, next, success, failure)) {
                Ok(_) => return Ok(current),
                Err(actual) => w = actual,
            }
        }
    }

    #[inline(always)]
    fn compare_exchange_weak(&self, current: u32, new: u32, success: Ordering, failure: Ordering) -> Result<u32, u32> {
        self.compare_exchange(current, new, success, failure)
    }

    #[inline(always)]
    fn fetch_add(&self, v: u32, order: Ordering) -> u32 {
        // No carry into the count: the lock half never overflows.
        lock_half(self.seen(|| self.word.fetch_add(u64::from(v), order)))
    }

    #[inline(always)]
    fn fetch_sub(&self, v: u32, order: Ordering) -> u32 {
        // No borrow from the count: the lock half holds `v` (the caller's).
        let old = lock_half(self.seen(|| self.word.fetch_sub(u64::from(v), order)));
        debug_assert!(old >= v, "lock half {old:#x} does not hold {v:#x}");
        old
    }

    /// The default would load the word twice (once more inside
    /// `compare_exchange`, which retries on count changes): one load here.
    #[inline(always)]
    fn fetch_sub_unless(&self, v: u32, stop: impl Fn(u32) -> bool, success: Ordering) -> Result<u32, u32> {
        // Relaxed loads: each only feeds the compare-and-swap, which checks
        // the whole word (the count beside the lock half included).
        let mut w = self.seen(|| self.word.load(Ordering::Relaxed));
        loop {
            if stop(lock_half(w)) {
                return Err(lock_half(w));
            }
            // No borrow from the count: the lock half holds `v`.
            match self.seen(|| self.word.compare_exchange_weak(w, w - u64::from(v), success, Ordering::Relaxed)) {
                Ok(old) => return Ok(lock_half(old)),
                Err(actual) => w = actual,
            }
        }
    }

    #[inline(always)]
    fn fetch_and(&self, v: u32, order: Ordering) -> u32 {
        lock_half(self.seen(|| self.word.fetch_and(u64::from(v) | !LOCK_MASK, order)))
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    fn model_release_begin(&self, pinned: bool) {
        let me = crate::loom::current_thread().id();
        let mut releasing = self.releasing();
        assert!(releasing.iter().all(|&(t, _)| t != me), "a release inside a release of the same lock");
        releasing.push((me, pinned));
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    fn model_unpinned(&self) {
        let me = crate::loom::current_thread().id();
        for (t, pinned) in self.releasing().iter_mut() {
            if *t == me {
                *pinned = false;
            }
        }
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    fn model_release_end(&self) {
        let me = crate::loom::current_thread().id();
        self.releasing().retain(|&(t, _)| t != me);
    }

    #[inline(always)]
    fn max_readers(&self) -> u32 {
        // A LockRef is only ever write-locked.
        1
    }

    #[inline(always)]
    fn queue(&self) -> &WaitQueue {
        #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
        {
            &TABLE[bucket_index(self.key())].0
        }
        #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
        {
            &self.queue
        }
    }

    /// None: a shared queue holds the nodes of other locks too, and the
    /// word has no room. (A `LockRef`'s async acquirers spin as usual.)
    #[inline(always)]
    fn census(&self) -> Option<&Census> {
        None
    }

    #[inline(always)]
    fn key(&self) -> usize {
        &self.word as *const AtomicU64 as usize
    }
}
