//! The wait queue: one FIFO of parked threads and suspended tasks per lock.
//!
//! # Layout
//!
//! The queue is a single pointer-sized word, next to the lock word (or, for a
//! [`LockRef`](crate::LockRef), in a process-wide table of queues shared by
//! the locks that hash to it: each node then carries its lock's key and a
//! [`QueueGuard`] shows each lock only its own nodes; see
//! [`crate::layout`]):
//!
//! ```text
//!  63                                      5       4      3-2       1         0
//! +-----------------------------------------+---------+---------+---------+---------+
//! |        pointer to the head Waiter       | GRANTEE | SPINNERS| QPARKED | QLOCKED |
//! +-----------------------------------------+---------+---------+---------+---------+
//!   QLOCKED   the queue lock is held; only its holder reads or writes the list
//!   QPARKED   threads are parked (parking_lot_core, keyed by this word's
//!             address) waiting for the queue lock
//!   SPINNERS  (2 bits, bits 2-3) how many optimistic spinners poll the lock
//!             word: at most two, everyone else queues at once (tasks that
//!             wait to read spin without a slot: their workers bound them)
//!   GRANTEE   the write lock was granted to a queued waiter that has not
//!             run since: its owner is a task in a run queue or a thread
//!             waking up, not a running thread, so nobody may start spinning
//!             on it. Set under the queue lock by the grant, cleared by the
//!             grantee when it takes the grant up. A hint: spinning is a
//!             heuristic, and a stale value only costs (or saves) a spin. In
//!             a queue shared by several `LockRef`s it holds back the
//!             spinners of all of them until the grantee runs
//! ```
//!
//! The word is an `AtomicPtr`, not an `AtomicUsize`: the flags live in the
//! low bits of the head's address (a node's alignment keeps them clear), set
//! and cleared with `map_addr` and `AtomicPtr`'s bitwise read-modify-writes
//! (Rust 1.91), so the pointer read back under the queue lock keeps the
//! provenance of the node it was made from (strict provenance). Nothing
//! turns an integer into a pointer, and Miri checks every access through
//! the list (`.ci/miri`). Under the model checkers, whose `AtomicPtr` has no
//! bitwise operations, the word is an integer with the pointer's provenance
//! exposed ([`Word`]), so that they see the same atomic operations.
//!
//! Waiters are intrusive, pinned nodes ([`Waiter`]) living in the acquiring
//! future or on the blocked thread's stack, so queueing never allocates. The
//! list is doubly linked with `head.prev` pointing at the tail, so append and
//! unlink are O(1).
//!
//! The queue lock is held for a handful of list edits. A contender polls it
//! [`QUEUE_LOCK_SPINS`] times, then parks on it like parking_lot's
//! `RawMutex`, so a holder preempted on an oversubscribed machine costs its
//! contenders a sleep, not a time slice of spinning.
//!
//! # Invariants
//!
//! 1. The pointer bits change only while `QLOCKED` is held, by its holder.
//! 2. A node is linked only while its owner keeps it pinned and alive: the
//!    owner unlinks it (under the queue lock) before the memory is reused,
//!    or a granter unlinks it before marking it [`GRANTED`].
//! 3. A node's `links` and `task` are touched only under the queue lock, or
//!    by its owner while it is not linked.
//! 4. Wakers and unparks run after the queue lock is released ([`WakeList`]).

use crate::clock;
use crate::layout::Census;
use core::marker::PhantomPinned;
use core::mem::MaybeUninit;
use core::ptr;
use core::task::Waker;

use crate::config::{FAIR, QUEUE_LOCK_SPINS, WAKE_BATCH};
use crate::loom::{AtomicU8, Ordering, Thread, UnsafeCell};
use crate::state::Kind;

const QLOCKED: usize = 1 << 0;
const QPARKED: usize = 1 << 1;
const ONE_SPINNER: usize = 1 << 2;
const SPINNERS: usize = 3 << 2;
const GRANTEE: usize = 1 << 4;
/// At most this many spinners per lock (the kernel's osq admits one; the
/// second slot lets a reader wait out a spinning writer's short section).
const MAX_SPINNERS: usize = 2;
const PTR_MASK: usize = !(QLOCKED | QPARKED | SPINNERS | GRANTEE);
const _: () = assert!(align_of::<Waiter>() > (QLOCKED | QPARKED | SPINNERS | GRANTEE));
const _: () = assert!(MAX_SPINNERS * ONE_SPINNER <= SPINNERS);

/// The flag bits of a queue word.
#[inline(always)]
fn flags(w: *mut Waiter) -> usize {
    w.addr() & !PTR_MASK
}

/// The head node a queue word points to (null if the queue is empty), with
/// the word's provenance.
#[inline(always)]
fn head_of(w: *mut Waiter) -> *const Waiter {
    w.map_addr(|a| a & PTR_MASK)
}

/// The node is not in a queue and owns nothing.
pub(crate) const IDLE: u8 = 0;
/// The node is queued and its owner sleeps.
pub(crate) const WAITING: u8 = 1;
/// The node is queued (the head) and its owner was woken to compete for the
/// lock again, holding the lock word's `WOKEN` token; it returns to
/// `WAITING` if it loses and gives the token back.
pub(crate) const RETRY: u8 = 2;
/// The node was unlinked and the lock was taken on its behalf: its owner now
/// holds the lock, whether or not it has noticed yet.
pub(crate) const GRANTED: u8 = 3;
/// A reader that was at the head when a release woke the run of readers
/// there: unlinked, owning nothing, and licensed to take a read lock that is
/// not write-locked even past queued waiters (it was ahead of them). If a
/// writer barged in first, it goes back to the front of the queue.
pub(crate) const LICENSED: u8 = 4;

/// A woken task that has lost the lock to bargers this many times is handed
/// the next release. Once is common under short sections (a barger slips in
/// while the task is on its way: the next wakeup usually wins, and a grant
/// would leave the lock idle until the task runs); twice in a row means the
/// lock is taken back before the task can ever run (a holder across
/// `.await` re-acquiring at once), where every further wakeup is a wasted
/// poll. The next task in the queue would pay the same two wakeups again;
/// `backoff::wake_is_futile` is what spares it them.
pub(crate) const LOST_WAKES_BEFORE_GRANT: u8 = 2;

/// Whoever must be told that a node changed state.
pub(crate) enum Task {
    /// A suspended future.
    Waker(Waker),
    /// A parked thread.
    Thread(Thread),
}

impl Task {
    #[inline]
    pub(crate) fn wake(self) {
        match self {
            Task::Waker(waker) => waker.wake(),
            Task::Thread(thread) => thread.unpark(),
        }
    }
}

#[derive(Clone, Copy)]
struct Links {
    /// The previous node; for the head, the tail.
    prev: *const Waiter,
    /// The next node; null for the tail.
    next: *const Waiter,
}

/// One queued acquisition, embedded in an acquiring future or on the stack
/// of a blocked thread.
#[repr(align(32))]
pub(crate) struct Waiter {
    /// # Safety
    /// Only under the queue lock (Invariant 3).
    links: UnsafeCell<Links>,
    /// Who to wake; taken when the node is woken or granted.
    ///
    /// # Safety
    /// Only under the queue lock, or by the owner while the node is unlinked.
    task: UnsafeCell<Option<Task>>,
    /// When the node first queued; the handoff timeout counts from here, and
    /// it survives lost races so that the wait it bounds is the whole wait.
    /// A handoff to the node ahead moves it forward ([`Waiter::defer_due`]),
    /// spacing handoffs out by the handoff gap.
    ///
    /// In [`clock`] nanoseconds; 0 until stamped, and always 0 under `fair`.
    ///
    /// # Safety
    /// As `task`.
    since: UnsafeCell<u64>,
    /// [`IDLE`], [`WAITING`], [`RETRY`], [`GRANTED`] or [`LICENSED`]. Written under the
    /// queue lock, except `GRANTED`/`LICENSED -> IDLE` by the owner of an
    /// unlinked node;
    /// read without the lock by the owner.
    state: AtomicU8,
    /// How often the node, a woken task (a writer, or a licensed reader that
    /// went back to the queue), lost the lock to a barger: from
    /// [`LOST_WAKES_BEFORE_GRANT`] on, the next release hands the lock to it
    /// instead of waking it again.
    ///
    /// # Safety
    /// Under the queue lock.
    lost_wake: UnsafeCell<u8>,
    /// Whether the node was linked with a thread to unpark, and so counts
    /// in the lock's [`Census`] until it is unlinked.
    ///
    /// # Safety
    /// Under the queue lock.
    counted: UnsafeCell<bool>,
    /// What the owner wants.
    pub(crate) kind: Kind,
    /// Which lock the node waits for, in a queue shared by several
    /// ([`Layout::key`](crate::layout::Layout::key)).
    key: usize,
    _pinned: PhantomPinned,
}

// SAFETY: the raw pointers and cells of a `Waiter` are only touched under the
// queue lock or by the owner of an unlinked node (Invariant 3), so sharing a
// node between the owner and queue-lock holders is race-free; `Task` itself
// is Send + Sync (`Waker` and `Thread` both are).
unsafe impl Send for Waiter {}
// SAFETY: as above.
unsafe impl Sync for Waiter {}

impl Waiter {
    pub(crate) fn new(kind: Kind, key: usize) -> Self {
        Waiter {
            links: UnsafeCell::new(Links { prev: ptr::null(), next: ptr::null() }),
            task: UnsafeCell::new(None),
            since: UnsafeCell::new(0),
            state: AtomicU8::new(IDLE),
            lost_wake: UnsafeCell::new(0),
            counted: UnsafeCell::new(false),
            kind,
            key,
            _pinned: PhantomPinned,
        }
    }

    /// The node's state. `Acquire` pairs with the `Release` store of whoever
    /// granted or woke it, so a `GRANTED` reader sees the lock word and the
    /// data as the granter left them.
    #[inline]
    pub(crate) fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    /// The node's state, for a reader that holds the queue lock (which
    /// orders it with every writer).
    #[inline]
    pub(crate) fn state_relaxed(&self) -> u8 {
        self.state.load(Ordering::Relaxed)
    }

    /// Marks a granted or licensed node as consumed by its owner.
    ///
    /// # Safety
    /// The caller owns the node and it is `GRANTED` or `LICENSED` (hence
    /// unlinked).
    #[inline]
    pub(crate) unsafe fn consume_grant(&self) {
        debug_assert!(matches!(self.state(), GRANTED | LICENSED));
        // Relaxed: nobody else refers to an unlinked node.
        self.state.store(IDLE, Ordering::Relaxed);
    }

    /// Whether the owner must re-register its task: it has none stored, or
    /// a waker that would not wake the current one.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn needs_task(&self, waker: Option<&Waker>) -> bool {
        // SAFETY: the caller holds the queue lock (Invariant 3).
        self.task.with(|t| match (unsafe { &*t }, waker) {
            (Some(Task::Waker(old)), Some(new)) => !old.will_wake(new),
            (Some(_), None) => false,
            (None, _) | (Some(Task::Thread(_)), Some(_)) => true,
        })
    }

    /// Stores the owner's task, returning the previous one so that the caller
    /// drops it after releasing the queue lock (a waker's drop may re-enter).
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn set_task(&self, task: Task) -> Option<Task> {
        // SAFETY: the caller holds the queue lock (Invariant 3).
        self.task.with_mut(|t| unsafe { (*t).replace(task) })
    }

    /// Whether the node is a parked thread, waiting to be told (`WAITING`
    /// with a thread to unpark): asleep, or about to be.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn sleeping_thread(&self) -> bool {
        self.state_relaxed() == WAITING
            // SAFETY: the caller holds the queue lock (Invariant 3).
            && self.task.with(|t| matches!(unsafe { &*t }, Some(Task::Thread(_))))
    }

    /// Whether the node's owner is a task waiting for a wakeup.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn sleeping_task(&self) -> bool {
        self.state_relaxed() == WAITING
            // SAFETY: the caller holds the queue lock (Invariant 3).
            && self.task.with(|t| matches!(unsafe { &*t }, Some(Task::Waker(_))))
    }

    /// # Safety
    /// Under the queue lock.
    unsafe fn take_task(&self) -> Option<Task> {
        // SAFETY: the caller holds the queue lock (Invariant 3).
        self.task.with_mut(|t| unsafe { (*t).take() })
    }

    /// Records now as the start of the node's wait. Called once per node,
    /// before it first queues (`RawRwLock::lock_contended`); the stamp then
    /// holds across lost wakeups and requeues, so the wait it bounds is the
    /// whole wait, and a stamp already made is never replaced. Its owner
    /// calls this before taking the queue lock, so the clock is not read
    /// while others wait for that lock.
    ///
    /// Under `fair` it does nothing: every release grants the lock to the
    /// head, so no decision asks how long anyone has waited (every reader of
    /// the stamp is behind `!FAIR`, or on the retry of a head woken to
    /// compete, which `fair` never wakes), and a clock read per queued
    /// acquisition would buy nothing but the wait times of the hang report
    /// ([`QueueGuard::dump`], which says "wait untimed" instead).
    ///
    /// # Safety
    /// By the node's owner while the node is not linked (Invariant 3).
    #[inline]
    pub(crate) unsafe fn stamp_wait_start(&self) {
        if FAIR {
            return;
        }
        // SAFETY: the caller owns the node and it is not linked.
        self.since.with_mut(|s| unsafe {
            if *s == 0 {
                *s = clock::now();
            }
        });
    }

    /// How long the node has waited since it first queued.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn waited(&self, now: u64) -> core::time::Duration {
        // SAFETY: the caller holds the queue lock (Invariant 3).
        let since = self.since.with(|s| unsafe { *s });
        core::time::Duration::from_nanos(if since == 0 { 0 } else { now.saturating_sub(since) })
    }

    /// Whether the node has waited at least `timeout_ns` since it queued.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn waited_at_least(&self, now: u64, timeout_ns: u64) -> bool {
        // Constant per build, but it asserts reachability: no path that
        // `fair` takes asks this (see `stamp_wait_start`).
        #[allow(clippy::assertions_on_constants)]
        {
            debug_assert!(!FAIR, "a wait timed under `fair`, which stamps none");
        }
        // SAFETY: the caller holds the queue lock (Invariant 3).
        let since = self.since.with(|s| unsafe { *s });
        since != 0 && now.saturating_sub(since) >= timeout_ns
    }

    /// Makes the node due for a handoff no earlier than `gap_ns` after
    /// `now`, by moving the origin of its wait forward (never back).
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn defer_due(&self, now: u64, gap_ns: u64, timeout_ns: u64) {
        let Some(origin) = now.saturating_add(gap_ns).checked_sub(timeout_ns) else { return };
        // SAFETY: the caller holds the queue lock (Invariant 3).
        self.since.with_mut(|s| unsafe {
            if *s != 0 && *s < origin {
                *s = origin;
            }
        });
    }

    /// Sets the node's state.
    ///
    /// # Safety
    /// Under the queue lock; for `GRANTED`, as the last access to the node.
    #[inline]
    unsafe fn set_state(&self, state: u8) {
        // Release: a `GRANTED` or `RETRY` owner that reads this with Acquire
        // sees every write made before it (the lock word, the unlink).
        self.state.store(state, Ordering::Release);
    }

    /// Records that the node, woken, lost the lock to a barger.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn mark_lost_wake(&self) {
        // SAFETY: the caller holds the queue lock.
        self.lost_wake.with_mut(|l| unsafe { *l = (*l).saturating_add(1) });
    }

    /// Whether the node, woken, lost the lock to a barger.
    ///
    /// # Safety
    /// Under the queue lock.
    pub(crate) unsafe fn lost_wake(&self) -> bool {
        // SAFETY: the caller holds the queue lock.
        self.lost_wake.with(|l| unsafe { *l }) >= LOST_WAKES_BEFORE_GRANT
    }

    /// Sends a `RETRY` node back to sleep with a fresh task.
    ///
    /// # Safety
    /// Under the queue lock, on a linked node of the caller's.
    pub(crate) unsafe fn rewait(&self, task: Task) -> Option<Task> {
        // SAFETY: forwarded.
        let old = unsafe { self.set_task(task) };
        // SAFETY: forwarded.
        unsafe { self.set_state(WAITING) };
        old
    }
}

/// What a compare-and-swap on the queue word returns: the word it saw.
type Cas = Result<*mut Waiter, *mut Waiter>;

/// The queue word's storage: the head node's address with the flags in its
/// low bits, as a pointer (see the module docs).
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
struct Word(core::sync::atomic::AtomicPtr<Waiter>);

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
impl Word {
    const fn new() -> Self {
        Word(core::sync::atomic::AtomicPtr::new(ptr::null_mut()))
    }

    #[inline(always)]
    fn load(&self, order: Ordering) -> *mut Waiter {
        self.0.load(order)
    }

    #[inline(always)]
    fn compare_exchange_weak(&self, current: *mut Waiter, new: *mut Waiter, ok: Ordering, err: Ordering) -> Cas {
        self.0.compare_exchange_weak(current, new, ok, err)
    }

    /// Sets flag bits; the address keeps its provenance.
    #[inline(always)]
    fn fetch_or(&self, bits: usize, order: Ordering) {
        self.0.fetch_or(bits, order);
    }

    /// Clears the flag bits not in `mask`.
    #[inline(always)]
    fn fetch_and(&self, mask: usize, order: Ordering) {
        self.0.fetch_and(mask, order);
    }

    /// Subtracts from a flag field that holds at least `bits`.
    #[inline(always)]
    fn fetch_sub(&self, bits: usize, order: Ordering) {
        self.0.fetch_byte_sub(bits, order);
    }

    /// The address parking_lot_core keys the queue lock's sleepers by.
    fn park_key(&self) -> usize {
        ptr::from_ref(self).addr()
    }
}

/// The model checkers' queue word: their `AtomicPtr` has no bitwise
/// read-modify-writes, and compare-and-swap loops in their place would add
/// interleavings that the native word does not have (a third more loom
/// time). Neither checks provenance, so the word is an integer here, with
/// the pointer's provenance exposed on the way in and taken back out.
#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
struct Word(crate::loom::AtomicUsize);

#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
impl Word {
    fn new() -> Self {
        Word(crate::loom::AtomicUsize::new(0))
    }

    fn load(&self, order: Ordering) -> *mut Waiter {
        ptr::with_exposed_provenance_mut(self.0.load(order))
    }

    fn compare_exchange_weak(&self, current: *mut Waiter, new: *mut Waiter, ok: Ordering, err: Ordering) -> Cas {
        self.0
            .compare_exchange_weak(current.expose_provenance(), new.expose_provenance(), ok, err)
            .map(ptr::with_exposed_provenance_mut)
            .map_err(ptr::with_exposed_provenance_mut)
    }

    fn fetch_or(&self, bits: usize, order: Ordering) {
        self.0.fetch_or(bits, order);
    }

    fn fetch_and(&self, mask: usize, order: Ordering) {
        self.0.fetch_and(mask, order);
    }

    fn fetch_sub(&self, bits: usize, order: Ordering) {
        self.0.fetch_sub(bits, order);
    }
}

/// The queue word of one lock.
pub(crate) struct WaitQueue {
    /// The head node's address and the flags (see the module docs).
    word: Word,
    /// Under loom, the threads parked on the queue lock: the model's
    /// stand-in for parking_lot_core's bucket of this word's address, so that
    /// the `QPARKED` handshake is modelled too (see `park_on_lock`).
    #[cfg(hybrid_sync_loom)]
    parked: loom::sync::Mutex<Vec<loom::thread::Thread>>,
}

impl WaitQueue {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub(crate) const fn new() -> Self {
        WaitQueue { word: Word::new() }
    }

    #[cfg(hybrid_sync_loom)]
    pub(crate) fn new() -> Self {
        WaitQueue { word: Word::new(), parked: loom::sync::Mutex::new(Vec::new()) }
    }

    #[cfg(all(hybrid_sync_shuttle, not(hybrid_sync_loom)))]
    pub(crate) fn new() -> Self {
        WaitQueue { word: Word::new() }
    }

    /// Takes the queue lock, for the lock whose nodes carry `key` and whose
    /// census of queued threads is `census`, if it keeps one.
    #[inline]
    pub(crate) fn lock<'a>(&'a self, key: usize, census: Option<&'a Census>) -> QueueGuard<'a> {
        // Relaxed: a guess at the word, which the compare-and-swap checks.
        let w = self.word.load(Ordering::Relaxed);
        let w = if flags(w) & QLOCKED == 0 {
            // Acquire: pairs with the Release of the previous holder's unlock,
            // making its list edits visible.
            match self.word.compare_exchange_weak(w, w.map_addr(|a| a | QLOCKED), Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => w,
                Err(_) => self.lock_contended(),
            }
        } else {
            self.lock_contended()
        };
        QueueGuard { queue: self, first: head_of(w), key, census }
    }

    /// Takes the queue lock if it is free right now (for hang reports,
    /// which must not wait on a stuck queue lock).
    pub(crate) fn try_lock<'a>(&'a self, key: usize, census: Option<&'a Census>) -> Option<QueueGuard<'a>> {
        // Relaxed: as in `lock`.
        let w = self.word.load(Ordering::Relaxed);
        if flags(w) & QLOCKED != 0 {
            return None;
        }
        // Acquire: as in `lock`. A spurious failure only makes the hang
        // report leave the nodes out, as a held queue lock would.
        self.word.compare_exchange_weak(w, w.map_addr(|a| a | QLOCKED), Ordering::Acquire, Ordering::Relaxed).ok()?;
        Some(QueueGuard { queue: self, first: head_of(w), key, census })
    }

    #[cold]
    fn lock_contended(&self) -> *mut Waiter {
        let mut spins = 0;
        loop {
            // Relaxed load: only a guess at the word, which the CAS checks;
            // Acquire on success, as in `lock`.
            let w = self.word.load(Ordering::Relaxed);
            if flags(w) & QLOCKED == 0 {
                match self.word.compare_exchange_weak(
                    w,
                    w.map_addr(|a| a | QLOCKED),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return w,
                    Err(_) => continue,
                }
            }
            // shuttle's waiters yield (its scheduler is randomized, and fair
            // in the long run); loom's park at once, as a waiter here does
            // after its spins. A yield loop would not do under loom: its
            // exhaustive scheduler also explores two waiters yielding to
            // each other forever while the holder never runs (the branch
            // limit, at 3 preemptions), a schedule no real one keeps up.
            // Miri's waiters yield too: parking_lot_core 0.9 makes a pointer
            // out of an integer when two threads meet on its bucket lock
            // (`WordLock::lock_slow`, parking_lot#477, fixed only in 0.10,
            // which needs Rust 1.95), and `-Zmiri-strict-provenance`
            // (`.ci/miri`) refuses that: a schedule in which two threads met
            // there stopped Miri inside parking_lot_core (`tests/locks.rs`,
            // in the `.ci/run` of 56cef08). tokio leaves parking_lot out
            // under Miri for the same reason. The parking handshake itself
            // is loom's to check (`park_on_lock`).
            if cfg!(any(miri, all(hybrid_sync_shuttle, not(hybrid_sync_loom)))) {
                crate::loom::yield_now();
                continue;
            }
            if !cfg!(hybrid_sync_loom) && flags(w) & QPARKED == 0 && spins < QUEUE_LOCK_SPINS {
                spins += 1;
                for _ in 0..(1 << spins.min(4)) {
                    crate::loom::spin_loop();
                }
                continue;
            }
            // Relaxed: QPARKED guards no data; parking_lot_core's bucket lock
            // orders it against the unpark (see `unlock_and_unpark`).
            if flags(w) & QPARKED == 0
                && self
                    .word
                    .compare_exchange_weak(w, w.map_addr(|a| a | QPARKED), Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            self.park_on_lock();
            spins = 0;
        }
    }

    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    fn park_on_lock(&self) {
        let key = self.word.park_key();
        // Relaxed: read under parking_lot_core's bucket lock, which orders it
        // against `unlock_and_unpark`'s release (QPARKED guards no data).
        let validate = || flags(self.word.load(Ordering::Relaxed)) & (QLOCKED | QPARKED) == QLOCKED | QPARKED;
        // SAFETY: `park` requires that the callbacks neither panic nor call
        // into parking_lot_core: `validate` is one atomic load, the others are
        // empty. The key is the address of our queue word, which only this
        // queue parks on.
        unsafe {
            parking_lot_core::park(key, validate, || {}, |_, _| {}, parking_lot_core::DEFAULT_PARK_TOKEN, None);
        }
    }

    /// The model's park: parking_lot_core's protocol on a loom mutex. The
    /// parker validates `QLOCKED | QPARKED` under the mutex, as under the
    /// bucket lock, and the unlocker clears `QPARKED` under it
    /// (`unlock_and_unpark`), so nobody parks after the unlock that should
    /// have woken it.
    #[cfg(hybrid_sync_loom)]
    fn park_on_lock(&self) {
        let me = loom::thread::current();
        {
            let mut parked = self.parked.lock().unwrap();
            // Relaxed: under the mutex, as `validate` under the bucket lock.
            if flags(self.word.load(Ordering::Relaxed)) & (QLOCKED | QPARKED) != QLOCKED | QPARKED {
                return;
            }
            parked.push(me.clone());
        }
        loom::thread::park();
        // loom's park returns early on an unpark meant for this thread's
        // lock node (unlike parking_lot_core's): then we are still listed.
        self.parked.lock().unwrap().retain(|t| t.id() != me.id());
    }

    #[cfg(all(hybrid_sync_shuttle, not(hybrid_sync_loom)))]
    fn park_on_lock(&self) {
        unreachable!("shuttle's waiters never park on the queue lock")
    }

    /// Releases the queue lock, publishing `head`.
    #[inline]
    fn unlock(&self, head: *const Waiter) {
        let head = head.cast_mut();
        debug_assert_eq!(flags(head), 0);
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            debug_assert!(flags(w) & QLOCKED != 0);
            if flags(w) & QPARKED != 0 {
                return self.unlock_and_unpark(head);
            }
            // Release: publishes the list edits to the next holder. Only
            // SPINNERS, QPARKED and GRANTEE can change under us, hence the
            // loop.
            match self.word.compare_exchange_weak(
                w,
                head.map_addr(|a| a | (flags(w) & (SPINNERS | GRANTEE))),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => w = actual,
            }
        }
    }

    #[cold]
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    fn unlock_and_unpark(&self, head: *mut Waiter) {
        let key = self.word.park_key();
        let callback = |result: parking_lot_core::UnparkResult| {
            // Runs under parking_lot_core's bucket lock, which is where a
            // would-be parker validates QLOCKED|QPARKED: nobody can park
            // between this release and the unpark, and QPARKED stays set
            // exactly while someone is still parked.
            self.unlock_parked(head, result.have_more_threads);
            parking_lot_core::DEFAULT_UNPARK_TOKEN
        };
        // SAFETY: the callback does not panic and does not call into
        // parking_lot_core; the key is our queue word's address.
        unsafe {
            parking_lot_core::unpark_one(key, callback);
        }
    }

    /// The model's unpark (see `park_on_lock`): the oldest parker goes,
    /// after the unlock, made under the mutex.
    #[cold]
    #[cfg(hybrid_sync_loom)]
    fn unlock_and_unpark(&self, head: *mut Waiter) {
        let next = {
            let mut parked = self.parked.lock().unwrap();
            let next = (!parked.is_empty()).then(|| parked.remove(0));
            self.unlock_parked(head, !parked.is_empty());
            next
        };
        if let Some(thread) = next {
            thread.unpark();
        }
    }

    #[cfg(all(hybrid_sync_shuttle, not(hybrid_sync_loom)))]
    fn unlock_and_unpark(&self, _head: *mut Waiter) {
        unreachable!("QPARKED is never set under shuttle")
    }

    /// Releases the queue lock with threads parked on it, publishing `head`
    /// and keeping `QPARKED` if some are left parked. Called where no
    /// thread can park meanwhile (under the bucket lock, or the model's).
    #[cfg_attr(all(hybrid_sync_shuttle, not(hybrid_sync_loom)), allow(dead_code))]
    fn unlock_parked(&self, head: *mut Waiter, more_parked: bool) {
        let parked = if more_parked { QPARKED } else { 0 };
        let mut w = self.word.load(Ordering::Relaxed);
        // Release: as in `unlock`.
        while let Err(actual) = self.word.compare_exchange_weak(
            w,
            head.map_addr(|a| a | (flags(w) & (SPINNERS | GRANTEE)) | parked),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            w = actual;
        }
    }

    /// Whether a newcomer may spin, by one load (a racy snapshot, checked
    /// again by the claim): the lock is not granted to a waiter that has
    /// not run yet, and a spinner slot is free, unless it spins `slotless`.
    #[inline]
    pub(crate) fn may_spin(&self, slotless: bool) -> bool {
        // Relaxed: a hint that guards no data.
        let f = flags(self.word.load(Ordering::Relaxed));
        f & GRANTEE == 0 && (slotless || (f & SPINNERS) / ONE_SPINNER < MAX_SPINNERS)
    }

    /// Claims one of the lock's spinner slots, if one is free.
    #[inline]
    pub(crate) fn try_claim_spinner(&self) -> bool {
        let mut w = self.word.load(Ordering::Relaxed);
        loop {
            if (flags(w) & SPINNERS) / ONE_SPINNER >= MAX_SPINNERS || flags(w) & GRANTEE != 0 {
                return false;
            }
            // Relaxed: the slots are an admission heuristic and guard no data.
            match self.word.compare_exchange_weak(
                w,
                w.map_addr(|a| a + ONE_SPINNER),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => w = actual,
            }
        }
    }

    /// Notes that the write lock was just granted to a queued waiter (see
    /// `GRANTEE`), before the grantee can see its grant.
    #[inline]
    pub(crate) fn set_grantee(&self) {
        // Relaxed: a hint that guards no data. The grantee's clear comes
        // after it in the word's modification order all the same: the
        // grant's Release store of GRANTED follows this in program order,
        // and the grantee reads GRANTED with Acquire before clearing.
        self.word.fetch_or(GRANTEE, Ordering::Relaxed);
    }

    /// The grantee took its grant up (or gave it back): the lock's owner
    /// runs, and spinning on it may pay again.
    #[inline]
    pub(crate) fn clear_grantee(&self) {
        if self.has_grantee() {
            // Relaxed: as in `set_grantee`.
            self.word.fetch_and(!GRANTEE, Ordering::Relaxed);
        }
    }

    /// Whether the write lock was granted to a queued waiter that has not
    /// run yet (`GRANTEE`; a racy snapshot): what keeps a spinner that
    /// takes no slot off the lock, as it keeps everyone.
    #[inline]
    pub(crate) fn has_grantee(&self) -> bool {
        // Relaxed: a hint that guards no data (see `set_grantee`).
        flags(self.word.load(Ordering::Relaxed)) & GRANTEE != 0
    }

    /// Gives a spinner slot back.
    #[inline]
    pub(crate) fn release_spinner(&self) {
        self.word.fetch_sub(ONE_SPINNER, Ordering::Relaxed);
    }

    /// A racy description of the queue word, for hang reports.
    pub(crate) fn describe(&self) -> String {
        // Relaxed: a snapshot for people to read.
        let w = self.word.load(Ordering::Relaxed);
        format!(
            "{} (queue lock {}, {} spinner(s){})",
            if head_of(w).is_null() { "empty" } else { "non-empty" },
            if flags(w) & QLOCKED != 0 { "held" } else { "free" },
            (flags(w) & SPINNERS) / ONE_SPINNER,
            if flags(w) & GRANTEE != 0 { ", granted to a waiter not yet running" } else { "" },
        )
    }
}

/// The held queue lock, seen from one lock: it caches the list's first node
/// (publishing it on drop) and shows only the nodes that carry its key, so in
/// a queue shared by several locks each sees its own FIFO. In a queue of
/// its own (key 0) every node matches and the filter never skips.
pub(crate) struct QueueGuard<'a> {
    queue: &'a WaitQueue,
    /// The list's first node, whoever it waits for.
    first: *const Waiter,
    key: usize,
    /// The lock's count of queued threads, kept up to date by every link
    /// and unlink below.
    census: Option<&'a Census>,
}

impl QueueGuard<'_> {
    /// The first node at or after `p` that waits for our lock.
    #[inline]
    fn ours_from(&self, mut p: *const Waiter) -> *const Waiter {
        // SAFETY: we hold the lock (Invariant 3); linked nodes are alive
        // (Invariant 2).
        while let Some(node) = unsafe { p.as_ref() } {
            if node.key == self.key {
                return p;
            }
            // SAFETY: as above (Invariant 3).
            p = node.links.with(|l| unsafe { (*l).next });
        }
        ptr::null()
    }

    /// Our first node, if any: the head of our lock's queue.
    #[inline]
    pub(crate) fn head(&self) -> Option<&Waiter> {
        // SAFETY: linked nodes are alive while linked (Invariant 2), and we
        // hold the lock, so nobody unlinks it during this borrow of `self`.
        unsafe { self.ours_from(self.first).as_ref() }
    }

    /// Whether no node waits for our lock.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head().is_none()
    }

    #[inline]
    pub(crate) fn is_head(&self, node: &Waiter) -> bool {
        ptr::eq(self.ours_from(self.first), node)
    }

    /// Our node after `node`.
    ///
    /// # Safety
    /// `node` is linked in this queue.
    pub(crate) unsafe fn next(&self, node: &Waiter) -> Option<&Waiter> {
        // SAFETY: we hold the lock (Invariant 3); the next node is linked,
        // hence alive (Invariant 2).
        let next = node.links.with(|l| unsafe { (*l).next });
        // SAFETY: as above.
        unsafe { self.ours_from(next).as_ref() }
    }

    /// Whether only `node` waits for our lock.
    ///
    /// # Safety
    /// `node` is linked in this queue.
    pub(crate) unsafe fn is_only(&self, node: &Waiter) -> bool {
        // SAFETY: forwarded.
        self.is_head(node) && unsafe { self.next(node) }.is_none()
    }

    /// Appends `node` as `WAITING` with `task` to wake. Its owner has
    /// stamped the start of its wait ([`Waiter::stamp_wait_start`]).
    ///
    /// # Safety
    /// The node is pinned, not linked anywhere, owned by the caller, carries
    /// our key, and stays alive until it is unlinked again (Invariant 2).
    pub(crate) unsafe fn push_back(&mut self, node: &Waiter, task: Task) {
        debug_assert_eq!(node.key, self.key);
        let me = node as *const Waiter;
        // SAFETY: under the queue lock (Invariant 3).
        debug_assert!(FAIR || node.since.with(|s| unsafe { *s != 0 }), "push_back of an unstamped node");
        // SAFETY: under the queue lock; the node is the caller's and unlinked.
        unsafe {
            self.count_in(node, &task);
            node.task.with_mut(|t| *t = Some(task));
            if let Some(first) = self.first.as_ref() {
                let tail = first.links.with(|l| (*l).prev);
                node.links.with_mut(|l| *l = Links { prev: tail, next: ptr::null() });
                (*tail).links.with_mut(|l| (*l).next = me);
                first.links.with_mut(|l| (*l).prev = me);
            } else {
                node.links.with_mut(|l| *l = Links { prev: me, next: ptr::null() });
                self.first = me;
            }
            node.set_state(WAITING);
        }
    }

    /// Unlinks `node`.
    ///
    /// # Safety
    /// `node` is linked in this queue.
    pub(crate) unsafe fn remove(&mut self, node: &Waiter) {
        // SAFETY: under the queue lock; `node` and its neighbours are linked,
        // hence alive (Invariant 2).
        unsafe {
            let Links { prev, next } = node.links.with(|l| *l);
            if ptr::eq(self.first, node) {
                self.first = next;
                if let Some(next) = next.as_ref() {
                    next.links.with_mut(|l| (*l).prev = prev);
                }
            } else {
                (*prev).links.with_mut(|l| (*l).next = next);
                match next.as_ref() {
                    Some(next) => next.links.with_mut(|l| (*l).prev = prev),
                    // `node` was the tail: the first node's `prev` names the tail.
                    None => (*self.first).links.with_mut(|l| (*l).prev = prev),
                }
            }
            node.links.with_mut(|l| *l = Links { prev: ptr::null(), next: ptr::null() });
            if let Some(census) = self.census {
                if node.counted.with_mut(|c| core::mem::replace(&mut *c, false)) {
                    census.thread_unlinked();
                }
                if self.first.is_null() {
                    census.emptied();
                }
            }
        }
    }

    /// Counts a node about to be linked with `task` in the census, if it is
    /// a thread's.
    ///
    /// # Safety
    /// Under the queue lock; the node is the caller's and unlinked.
    unsafe fn count_in(&self, node: &Waiter, task: &Task) {
        if let Some(census) = self.census
            && matches!(task, Task::Thread(_))
        {
            // SAFETY: under the queue lock (Invariant 3).
            node.counted.with_mut(|c| unsafe { *c = true });
            census.thread_linked();
        }
    }

    /// Unlinks the head, marks it granted and queues its task for waking.
    ///
    /// # Safety
    /// The queue is not empty, and the caller has already taken the lock on
    /// the head's behalf.
    pub(crate) unsafe fn grant_head(&mut self, wakes: &mut WakeList) {
        // SAFETY: forwarded.
        unsafe { self.pop_head(GRANTED, wakes) }
    }

    /// Unlinks the head, queues its task for waking and leaves it in `state`
    /// (`GRANTED` or `LICENSED`), after which its owner may free it.
    ///
    /// # Safety
    /// The queue is not empty.
    unsafe fn pop_head(&mut self, state: u8, wakes: &mut WakeList) {
        let head = self.ours_from(self.first);
        // SAFETY: non-null by the caller's contract; under the queue lock.
        unsafe {
            let node = &*head;
            self.remove(node);
            if let Some(task) = node.take_task() {
                wakes.push(task);
            }
            // Last access: the owner may return and free the node after this.
            node.set_state(state);
        }
    }

    /// Tells the head to compete for the lock again, handing it the `WOKEN`
    /// token the caller just took.
    pub(crate) fn wake_head(&mut self, wakes: &mut WakeList) {
        if let Some(head) = self.head() {
            debug_assert_eq!(head.state.load(Ordering::Relaxed), WAITING, "the token had no owner");
            // SAFETY: under the queue lock.
            unsafe {
                if let Some(task) = head.take_task() {
                    wakes.push(task);
                }
                head.set_state(RETRY);
            }
        }
    }

    /// Wakes the run of readers at the head (as many as `room` allows and
    /// the wake list holds): unlinks them and licenses them to take the
    /// lock whenever it is not write-locked. Returns how many.
    pub(crate) fn wake_readers(&mut self, room: u32, wakes: &mut WakeList) -> u32 {
        let mut n = 0;
        while let Some(head) = self.head() {
            if head.kind != Kind::Read || n == room || wakes.room() == 0 {
                break;
            }
            // SAFETY: the queue is not empty (we just saw its head).
            unsafe { self.pop_head(LICENSED, wakes) };
            n += 1;
        }
        n
    }

    /// Puts the caller's node back at the front of the queue, as `WAITING`
    /// with `task` (a licensed reader that a writer beat to the lock keeps
    /// its place ahead of everyone who queued after it). It goes to the very
    /// front of a shared list, which keeps every lock's own order.
    ///
    /// # Safety
    /// As [`push_back`](Self::push_back).
    pub(crate) unsafe fn push_front(&mut self, node: &Waiter, task: Task) {
        debug_assert_eq!(node.key, self.key);
        let me = node as *const Waiter;
        // SAFETY: under the queue lock; the node is the caller's and unlinked;
        // linked nodes are alive (Invariant 2).
        unsafe {
            self.count_in(node, &task);
            node.task.with_mut(|t| *t = Some(task));
            match self.first.as_ref() {
                Some(first) => {
                    let tail = first.links.with(|l| (*l).prev);
                    node.links.with_mut(|l| *l = Links { prev: tail, next: self.first });
                    first.links.with_mut(|l| (*l).prev = me);
                }
                None => node.links.with_mut(|l| *l = Links { prev: me, next: ptr::null() }),
            }
            self.first = me;
            node.set_state(WAITING);
        }
    }

    /// One line per node of our lock, for hang reports: kind, state, what
    /// it wakes, how long it has waited.
    pub(crate) fn dump(&self) -> String {
        let now = clock::now();
        let mut out = String::new();
        let mut node = self.head();
        while let Some(n) = node {
            // SAFETY: under the queue lock.
            let (task, waited) = unsafe {
                let task = n.task.with(|t| match &*t {
                    Some(Task::Waker(_)) => "task",
                    Some(Task::Thread(_)) => "thread",
                    None => "nobody",
                });
                (task, n.waited(now))
            };
            // `fair` stamps no waits (`Waiter::stamp_wait_start`).
            let waited = if FAIR { "wait untimed (fair)".to_string() } else { format!("waited {waited:?}") };
            out += &format!(
                "\n    {:?} {} (wakes {task}), {waited}",
                n.kind,
                ["IDLE", "WAITING", "RETRY", "GRANTED", "LICENSED"].get(n.state_relaxed() as usize).unwrap_or(&"?"),
            );
            // SAFETY: `n` is linked in this queue.
            node = unsafe { self.next(n) };
        }
        out
    }

    /// Marks the caller's own woken node as the new owner: unlinks it and
    /// leaves it `IDLE`.
    ///
    /// # Safety
    /// `node` is the caller's, linked in this queue.
    pub(crate) unsafe fn remove_acquired(&mut self, node: &Waiter) -> Option<Task> {
        // SAFETY: forwarded.
        unsafe {
            self.remove(node);
            let task = node.take_task();
            // Relaxed: our own node, which only we read from here on; the
            // lock itself was taken by our Acquire CAS.
            node.state.store(IDLE, Ordering::Relaxed);
            task
        }
    }

    /// Unlinks the caller's own node because it gives up waiting.
    ///
    /// # Safety
    /// `node` is the caller's, linked in this queue.
    pub(crate) unsafe fn cancel(&mut self, node: &Waiter) -> Option<Task> {
        // SAFETY: forwarded.
        unsafe { self.remove_acquired(node) }
    }
}

impl Drop for QueueGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.queue.unlock(self.first);
    }
}

/// Tasks to wake once the queue lock is released (Invariant 4).
///
/// The slots are uninitialized until pushed (tokio's `WakeList` does the
/// same): a release that wakes one task then writes one slot instead of
/// clearing all of them first (a 768-byte `memset` on every contended
/// release, 2% of the hold-across-`.await` profile).
pub(crate) struct WakeList {
    /// `tasks[..len]` are initialized and owned by the list.
    tasks: [MaybeUninit<Task>; WAKE_BATCH],
    len: usize,
}

impl WakeList {
    pub(crate) const fn new() -> Self {
        WakeList { tasks: [const { MaybeUninit::uninit() }; WAKE_BATCH], len: 0 }
    }

    /// How many more tasks fit.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        WAKE_BATCH - self.len
    }

    /// Adds a task. Panics (index out of bounds) if the list is full:
    /// callers check [`room`](Self::room).
    #[inline]
    pub(crate) fn push(&mut self, task: Task) {
        self.tasks[self.len].write(task);
        self.len += 1;
    }

    /// Wakes everything collected so far, in the order it was pushed.
    pub(crate) fn wake_all(&mut self) {
        // The list gives up its tasks before the first wake, so that a
        // panicking waker cannot make it read a slot twice; `Rest` wakes
        // whatever a panicking waker left behind (tokio's `WakeList` guard).
        let len = core::mem::replace(&mut self.len, 0);
        let mut rest = Rest { tasks: &mut self.tasks[..len], next: 0 };
        while rest.next < rest.tasks.len() {
            let task = rest.take_next();
            task.wake();
        }
        // Every task is woken: the guard has nothing left to do, and its
        // drop is an out-of-line call on every contended release.
        core::mem::forget(rest);
    }
}

/// The not yet woken part of a [`WakeList`] being woken.
struct Rest<'a> {
    /// Initialized slots, owned: `tasks[next..]` are still to be read.
    tasks: &'a mut [MaybeUninit<Task>],
    next: usize,
}

impl Rest<'_> {
    #[inline]
    fn take_next(&mut self) -> Task {
        let slot = &self.tasks[self.next];
        self.next += 1;
        // SAFETY: `slot` is below the list's former `len`, so `push` wrote
        // it, and `next` moved past it before this read, so nothing reads
        // it again (the list's `len` is already 0).
        unsafe { slot.assume_init_read() }
    }
}

impl Drop for Rest<'_> {
    fn drop(&mut self) {
        // Only reached with tasks left after a waker panicked.
        while self.next < self.tasks.len() {
            self.take_next().wake();
        }
    }
}

impl Drop for WakeList {
    #[inline]
    fn drop(&mut self) {
        // A panic between collecting and waking must not lose a wakeup.
        // (Every caller has woken its list already when it drops it.)
        if self.len > 0 {
            self.wake_all();
        }
    }
}

#[cfg(all(test, not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn spinner_slots_close_while_a_grantee_has_not_run() {
        let q = WaitQueue::new();
        assert!(q.try_claim_spinner() && q.try_claim_spinner());
        assert!(!q.try_claim_spinner(), "a third spinner was admitted");
        q.release_spinner();
        q.release_spinner();

        q.set_grantee();
        assert!(!q.try_claim_spinner(), "a spinner was admitted on a lock granted to a waiter not yet running");
        // The queue lock's release keeps the hint, as it keeps the slots.
        drop(q.lock(0, None));
        assert!(q.describe().contains("granted to a waiter not yet running"), "{}", q.describe());
        assert!(!q.try_claim_spinner(), "unlocking the queue lost the grantee hint");
        q.clear_grantee();
        assert!(q.try_claim_spinner(), "no spinner admitted once the grantee ran");
        q.release_spinner();
        assert_eq!(q.describe(), "empty (queue lock free, 0 spinner(s))");
    }

    /// A node, stamped as its owner stamps it before queueing.
    fn node() -> core::pin::Pin<Box<Waiter>> {
        let node = Box::pin(Waiter::new(Kind::Write, 0));
        // SAFETY: ours, not linked.
        unsafe { node.stamp_wait_start() };
        node
    }

    fn thread() -> Task {
        Task::Thread(std::thread::current())
    }

    fn task() -> Task {
        Task::Waker(Waker::noop().clone())
    }

    /// Every way a node enters (`push_back`, `push_front`) or leaves the
    /// queue (granted, woken and then acquiring, cancelled) keeps the count
    /// of threads' nodes; tasks' nodes are not counted.
    #[test]
    fn the_census_counts_threads_nodes_through_every_link_and_unlink() {
        let census = Census::new(crate::state::MAX_READERS);
        let q = WaitQueue::new();
        let (a, b, c, d) = (node(), node(), node(), node());
        let mut wakes = WakeList::new();
        {
            let mut g = q.lock(0, Some(&census));
            // SAFETY: under the queue lock; the nodes are pinned, alive for
            // the whole test, and each is linked once.
            unsafe {
                g.push_back(&a, thread());
                g.push_back(&b, task());
                g.push_back(&c, thread());
                g.push_front(&d, thread());
            }
        }
        assert_eq!(census.threads(), 3);
        assert_eq!(census.max_readers(), crate::state::MAX_READERS, "the census spilled into the reader limit");
        {
            let mut g = q.lock(0, Some(&census));
            // The head (d, a thread) is granted: unlinked, uncounted.
            // SAFETY: the queue is not empty; nobody holds the lock it stands
            // for, and the test takes nothing on d's behalf.
            unsafe { g.grant_head(&mut wakes) };
            assert_eq!(census.threads(), 2);
            // The next head (a) is woken: still linked, still counted ...
            g.wake_head(&mut wakes);
            assert_eq!(census.threads(), 2);
            // ... until it takes the lock.
            // SAFETY: a is linked in this queue, and the test is its owner.
            unsafe { g.remove_acquired(&a) };
            assert_eq!(census.threads(), 1);
            // A task's node leaving changes nothing.
            // SAFETY: b is linked in this queue, and the test is its owner.
            unsafe { g.cancel(&b) };
            assert_eq!(census.threads(), 1);
            // SAFETY: c is linked in this queue, and the test is its owner.
            unsafe { g.cancel(&c) };
            assert_eq!(census.threads(), 0);
            assert!(g.is_empty());
        }
        assert!(!census.threads_queued());
        wakes.wake_all();
    }

    /// Past `CENSUS_MAX` threads the count stays put until the queue
    /// empties: never an underflow into the reader limit, never "no
    /// threads" while one waits.
    #[test]
    fn a_saturated_census_holds_until_the_queue_empties() {
        let census = Census::new(7);
        let q = WaitQueue::new();
        let n = crate::layout::CENSUS_MAX as usize + 3;
        let threads: Vec<_> = (0..n).map(|_| node()).collect();
        let tail = node();
        {
            let mut g = q.lock(0, Some(&census));
            for t in &threads {
                // SAFETY: under the queue lock; the nodes are pinned, alive
                // for the whole test, and each is linked once.
                unsafe { g.push_back(t, thread()) };
            }
            // SAFETY: as for the threads' nodes.
            unsafe { g.push_back(&tail, task()) };
        }
        assert_eq!(census.threads(), crate::layout::CENSUS_MAX);
        {
            let mut g = q.lock(0, Some(&census));
            for t in &threads {
                // SAFETY: t is linked in this queue, and the test is its owner.
                unsafe { g.cancel(t) };
                assert!(census.threads_queued(), "a saturated census dropped while the queue holds nodes");
            }
            assert_eq!(census.max_readers(), 7);
            // Only the task is left; the saturated count cannot tell, and
            // keeps saying "threads" until the queue empties.
            // SAFETY: as for the threads' nodes.
            unsafe { g.cancel(&tail) };
        }
        assert_eq!(census.threads(), 0);
        assert_eq!(census.max_readers(), 7);
    }
}
