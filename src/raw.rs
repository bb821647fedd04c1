//! The lock state machine: one lock word, one wait queue, and every
//! transition between them. The async and blocking front ends
//! ([`crate::acquire`]) only decide how to wait; everything about who gets the
//! lock, and when, lives here.
//!
//! # The path of an acquisition
//!
//! ```text
//!   fast path: one CAS on an uncontended word ──────────────────────► owned
//!        │ contended
//!        ▼
//!   spin: one spinner per lock polls the word with per-address backoff
//!        │ while the owner makes progress, never past a park round trip,
//!        │ and not at all once HANDOFF is set ─────────── wins the CAS ► owned
//!        ▼
//!   queue lock: barge if the policy allows (no HANDOFF; under `fair`, no
//!        │ waiters) ───────────────────────────────────────────────────► owned
//!        │ else set WAITERS and link a node at the tail
//!        ▼
//!   wait: the thread parks / the task returns Pending
//!        │
//!        ├── GRANTED: a release took the lock on our behalf ────────────► owned
//!        └── WOKEN: a release freed the lock and woke us, the head, to
//!            compete; we take it unless a newcomer barged in first, in which
//!            case we wait again, and once our wait passes the handoff timeout
//!            HANDOFF is set and the next release grants the lock to us.
//! ```
//!
//! # Release and dispatch
//!
//! A release is one `fetch_sub` on the word. If it saw `WAITERS` (for a
//! reader: if it was the last reader, or the one that made room under
//! `max_readers`), it takes the queue lock and runs [`RawRwLock::dispatch`]:
//!
//! * head is a reader and the lock is not write-locked: grant the lock to
//!   the run of readers at the head at once (up to `max_readers`);
//! * head is a writer and the lock is free: grant it if `fair`, if `HANDOFF`
//!   is set, or if the head has waited past the handoff timeout; otherwise
//!   wake the head to compete (barging), unless it is already awake;
//! * the lock is still held: if the head has waited past the timeout, set
//!   `HANDOFF`, so that the holder's release grants it and nobody else, not
//!   even a spinner, can take the lock meanwhile.
//!
//! Wakeups are issued after the queue lock is released.

use core::pin::pin;
use core::task::{Poll, Waker};
use std::time::Instant;

use crate::backoff::{self, Probe, Spin};
use crate::config::{self, FAIR, SPIN};
use crate::loom::{AtomicU32, Ordering};
use crate::state::*;
use crate::wait_queue::{GRANTED, IDLE, QueueGuard, Task, WAITING, WOKEN, WaitQueue, Waiter, WakeList};

/// A reader-writer lock with no data: the word, the limit, the queue.
pub(crate) struct RawRwLock {
    /// The lock word; see [`crate::state`] for its layout and invariants.
    state: AtomicU32,
    /// The most readers that may hold the lock at once.
    max_readers: u32,
    /// Waiters, the queue lock and the spinner slot.
    queue: WaitQueue,
}

impl RawRwLock {
    #[cfg(not(hybrid_sync_loom))]
    pub(crate) const fn new(max_readers: u32) -> Self {
        RawRwLock { state: AtomicU32::new(0), max_readers, queue: WaitQueue::new() }
    }

    #[cfg(hybrid_sync_loom)]
    pub(crate) fn new(max_readers: u32) -> Self {
        RawRwLock { state: AtomicU32::new(0), max_readers, queue: WaitQueue::new() }
    }

    #[inline]
    pub(crate) fn max_readers(&self) -> u32 {
        self.max_readers
    }

    // ----------------------------------------------------------------------
    // Fast paths.
    // ----------------------------------------------------------------------

    /// Takes the lock if that needs no waiting. One CAS when uncontended;
    /// under contention, barges only as the policy allows
    /// ([`may_barge`]).
    #[inline]
    pub(crate) fn try_acquire(&self, kind: Kind) -> bool {
        match kind {
            Kind::Write => {
                // Acquire: pairs with the Release of the previous unlock.
                self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
                    || self.try_acquire_contended(kind)
            }
            Kind::Read => {
                let s = self.state.load(Ordering::Relaxed);
                (can_read_fast(s, self.max_readers)
                    && self
                        .state
                        .compare_exchange_weak(s, s + ONE_READER, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok())
                    || self.try_acquire_contended(kind)
            }
        }
    }

    #[cold]
    fn try_acquire_contended(&self, kind: Kind) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        while may_barge(kind, s, self.max_readers, FAIR) {
            match self.state.compare_exchange_weak(s, with_owner(kind, s), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => s = actual,
            }
        }
        false
    }

    /// Releases a read lock.
    ///
    /// # Safety
    /// The caller holds a read lock and gives it up.
    #[inline]
    pub(crate) unsafe fn read_unlock(&self) {
        // Release: publishes the critical section to the next owner.
        let old = self.state.fetch_sub(ONE_READER, Ordering::Release);
        debug_assert!(reader_count(old) > 0, "read unlock of {:?}", Decoded(old));
        // The last reader frees the lock for a queued writer; the reader that
        // leaves a full lock makes room for a queued reader.
        if has_waiters(old) && (reader_count(old) == 1 || reader_count(old) == self.max_readers) {
            self.release_slow();
        }
    }

    /// Releases the write lock.
    ///
    /// # Safety
    /// The caller holds the write lock and gives it up.
    #[inline]
    pub(crate) unsafe fn write_unlock(&self) {
        // Release: publishes the critical section to the next owner.
        let old = self.state.fetch_sub(WRITER, Ordering::Release);
        debug_assert!(is_write_locked(old), "write unlock of {:?}", Decoded(old));
        if has_waiters(old) {
            self.release_slow();
        }
    }

    /// Releases a lock of `kind`.
    ///
    /// # Safety
    /// The caller holds a lock of that kind and gives it up.
    #[inline]
    pub(crate) unsafe fn unlock(&self, kind: Kind) {
        // SAFETY: forwarded.
        unsafe {
            match kind {
                Kind::Read => self.read_unlock(),
                Kind::Write => self.write_unlock(),
            }
        }
    }

    /// Turns the caller's write lock into a read lock, atomically: no writer
    /// can get in between, and queued readers at the head join it.
    ///
    /// # Safety
    /// The caller holds the write lock.
    pub(crate) unsafe fn downgrade(&self) {
        // WRITER is set, so adding ONE_READER - WRITER clears it and adds one
        // reader in one step, leaving WAITERS and HANDOFF as they are: a
        // pending handoff keeps newcomers out of the downgraded lock too.
        // Release: the new readers see the writer's critical section.
        let old = self.state.fetch_add(ONE_READER - WRITER, Ordering::Release);
        debug_assert!(is_write_locked(old), "downgrade of {:?}", Decoded(old));
        if has_waiters(old) {
            self.release_slow();
        }
    }

    /// The release found waiters: dispatch under the queue lock, then wake.
    #[cold]
    fn release_slow(&self) {
        let mut wakes = WakeList::new();
        loop {
            let more = {
                let mut q = self.queue.lock();
                self.dispatch(&mut q, &mut wakes)
            };
            wakes.wake_all();
            if !more {
                return;
            }
        }
    }

    // ----------------------------------------------------------------------
    // Dispatch: the one place that decides who gets a released lock.
    // ----------------------------------------------------------------------

    /// Hands the lock to the head of the queue, wakes it, or marks it due,
    /// as the module docs describe. Returns `true` if readers are left that
    /// could be granted but did not fit in `wakes`; the caller wakes what it
    /// has and dispatches again.
    fn dispatch(&self, q: &mut QueueGuard<'_>, wakes: &mut WakeList) -> bool {
        let mut now = None;
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let Some(head) = q.head() else {
                debug_assert!(!has_waiters(s) && !has_handoff(s), "empty queue, {:?}", Decoded(s));
                return false;
            };
            let kind = head.kind;
            if !head_may_take(kind, s, self.max_readers) {
                // Its holder will release it and dispatch again; if the head
                // has waited too long, that release must be a handoff.
                match self.request_handoff(q, s, &mut now) {
                    Ok(()) => return false,
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }
            let grant = FAIR || kind == Kind::Read || has_handoff(s) || self.head_is_due(q, &mut now);
            if !grant {
                // Barging: let the head compete with whoever runs now.
                q.wake_head(wakes);
                return false;
            }

            // Count the nodes to grant: the head, and for a reader head the
            // run of readers behind it that fits under max_readers and in
            // this round's wake list.
            let room = self.max_readers - reader_count(s);
            let mut count = 1u32;
            let mut more = false;
            // SAFETY: `head` is linked in `q`.
            let mut next = unsafe { q.next(head) };
            if kind == Kind::Read {
                let capacity = wakes.room();
                while let Some(node) = next {
                    if node.kind != Kind::Read || count == room {
                        break;
                    }
                    if count as usize == capacity {
                        more = true;
                        break;
                    }
                    count += 1;
                    // SAFETY: `node` is linked in `q`.
                    next = unsafe { q.next(node) };
                }
            }
            let mut new = match kind {
                Kind::Write => s | WRITER,
                Kind::Read => s + count * ONE_READER,
            } & !HANDOFF;
            if next.is_none() {
                new &= !WAITERS;
            }
            // Acquire: the previous owner's release happens-before the
            // grantees' critical sections (they read GRANTED, stored with
            // Release after this). Relaxed on failure: we only retry.
            match self.state.compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    for _ in 0..count {
                        // SAFETY: the lock was just taken for the head.
                        unsafe { q.grant_head(wakes) };
                    }
                    return more;
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Whether the head has waited past the handoff timeout.
    fn head_is_due(&self, q: &QueueGuard<'_>, now: &mut Option<Instant>) -> bool {
        let now = *now.get_or_insert_with(Instant::now);
        match q.head() {
            // SAFETY: under the queue lock.
            Some(head) => unsafe { head.waited_at_least(now, config::handoff_timeout_ns()) },
            None => false,
        }
    }

    /// Sets `HANDOFF` for a due head while the lock is held. `Err` carries the
    /// word if it changed under us.
    fn request_handoff(&self, q: &QueueGuard<'_>, s: u32, now: &mut Option<Instant>) -> Result<(), u32> {
        // Under `fair` every release grants anyway, and WAITERS alone keeps
        // newcomers and spinners out.
        if FAIR || has_handoff(s) || !self.head_is_due(q, now) {
            return Ok(());
        }
        // Relaxed: the bit guards no data; it only redirects the next release.
        self.state.compare_exchange(s, s | HANDOFF, Ordering::Relaxed, Ordering::Relaxed).map(drop)
    }

    // ----------------------------------------------------------------------
    // Contended acquisition, shared by both front ends.
    // ----------------------------------------------------------------------

    /// The contended path of a node that is not queued: spin, then barge or
    /// queue under the queue lock. Returns `true` if the lock was taken; if
    /// not, the node is queued as `WAITING` with the task from `task`.
    pub(crate) fn lock_contended(&self, node: &Waiter, spin_limit_ns: u32, task: impl FnOnce() -> Task) -> bool {
        debug_assert_eq!(node.state(), IDLE);
        let kind = node.kind;
        if SPIN && spin_limit_ns > 0 && self.spin(kind, spin_limit_ns) {
            return true;
        }
        let mut q = self.queue.lock();
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            if may_barge(kind, s, self.max_readers, FAIR) {
                match self.state.compare_exchange_weak(s, with_owner(kind, s), Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(actual) => s = actual,
                }
            } else if has_waiters(s) {
                // Every release from here on sees WAITERS and dispatches
                // after we release the queue lock.
                break;
            } else {
                // The CAS fails if a release slipped in since the load, so
                // we cannot sleep through it (state.rs, "Why a release
                // never loses a waiter").
                match self.state.compare_exchange_weak(s, s | WAITERS, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => break,
                    Err(actual) => s = actual,
                }
            }
        }
        // SAFETY: the node is the caller's, pinned in its future or stack
        // frame, unlinked (IDLE), and the front ends unlink it before it dies.
        unsafe { q.push_back(node, task()) };
        false
    }

    /// Spins for the lock, holding this lock's single spinner slot.
    fn spin(&self, kind: Kind, limit_ns: u32) -> bool {
        if !self.queue.try_claim_spinner() {
            return false;
        }
        let max = self.max_readers;
        let result = backoff::spin(self as *const Self as usize, limit_ns, || {
            let s = self.state.load(Ordering::Relaxed);
            if has_handoff(s) || (FAIR && has_waiters(s)) {
                // The queue owns the next turn: spinning can only burn CPU.
                return Probe::Handoff;
            }
            if kind == Kind::Read && has_waiters(s) && !is_unlocked(s) {
                // A writer is queued ahead: its wait plus its hold is no spin.
                return Probe::Handoff;
            }
            if !may_barge(kind, s, max, FAIR) {
                return Probe::Held(s);
            }
            match self.state.compare_exchange(s, with_owner(kind, s), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => Probe::Acquired,
                Err(_) => Probe::Lost,
            }
        });
        self.queue.release_spinner();
        result == Spin::Acquired
    }

    /// The owner of a queued node competes for the lock again: after it was
    /// woken (`WOKEN`), or when its task polls it anyway (`WAITING`). Returns
    /// `true` if it now holds the lock (the node is `IDLE` and unlinked);
    /// otherwise the node waits on, with the task from `task` if it was woken
    /// or if `waker` would not wake the stored one.
    ///
    /// The head may take the lock whenever it is free for it, `HANDOFF`
    /// notwithstanding (the bit is held for it). Any other queued node may
    /// take it only as a newcomer could ([`may_barge`]): a task that polls
    /// a queued future whose wakeup went to a sibling future (two lock
    /// futures in one `select!`, tokio#6450, async-lock#91) still gets in
    /// when the lock is free, unless `fair` forbids overtaking.
    pub(crate) fn retry_queued(&self, node: &Waiter, waker: Option<&Waker>, task: impl FnOnce() -> Task) -> bool {
        let kind = node.kind;
        let mut wakes = WakeList::new();
        let mut q = self.queue.lock();
        let woken = match node.state() {
            GRANTED => {
                drop(q);
                // SAFETY: our node, granted.
                unsafe { node.consume_grant() };
                return true;
            }
            WOKEN => true,
            WAITING => false,
            other => unreachable!("retry of a node in state {other}"),
        };
        let mut now = None;
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let is_head = q.is_head(node);
            let allowed = if is_head {
                head_may_take(kind, s, self.max_readers)
            } else {
                may_barge(kind, s, self.max_readers, FAIR)
            };
            if allowed {
                // SAFETY: our node is linked in `q`.
                let alone = unsafe { q.is_only(node) };
                let mut new = with_owner(kind, s);
                if is_head {
                    new &= !HANDOFF;
                }
                if alone {
                    new &= !WAITERS;
                }
                match self.state.compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: our node is linked in `q`.
                        let stale = unsafe { q.remove_acquired(node) };
                        // Whoever is now first may be able to go too (readers
                        // behind a reader), or must be told it is first.
                        let more = !alone && self.dispatch(&mut q, &mut wakes);
                        drop(q);
                        drop(stale);
                        wakes.wake_all();
                        if more {
                            self.release_slow();
                        }
                        return true;
                    }
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }
            if is_head {
                if let Err(actual) = self.request_handoff(&q, s, &mut now) {
                    s = actual;
                    continue;
                }
            }
            break;
        }
        // Lost the race to a barging newcomer (or not our turn). Whoever holds
        // the lock will see WAITERS on release and wake or grant the head.
        // SAFETY: our node is linked in `q`, and we hold the queue lock.
        let stale = unsafe { if woken || node.needs_task(waker) { node.rewait(task()) } else { None } };
        drop(q);
        drop(stale);
        false
    }

    /// An async owner polls its queued node: `Ready` once it holds the lock.
    /// While it still waits, the stored waker is replaced if the task now
    /// polls with another one, so a future moved between tasks is not lost.
    pub(crate) fn poll_queued(&self, node: &Waiter, waker: &Waker) -> Poll<()> {
        if node.state() == GRANTED {
            // SAFETY: our node, granted (Acquire load above).
            unsafe { node.consume_grant() };
            return Poll::Ready(());
        }
        match self.retry_queued(node, Some(waker), || Task::Waker(waker.clone())) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }

    /// The owner of a queued node gives up (its future was dropped). A node
    /// that was granted the lock meanwhile releases it, which passes it on;
    /// a head that leaves lets the new head proceed if it can.
    pub(crate) fn cancel(&self, node: &Waiter) {
        let mut wakes = WakeList::new();
        let mut q = self.queue.lock();
        match node.state() {
            GRANTED => {
                drop(q);
                // SAFETY: our node was granted the lock; we release it on its
                // behalf through the ordinary release path.
                unsafe {
                    node.consume_grant();
                    self.unlock(node.kind);
                }
            }
            WAITING | WOKEN => {
                let was_head = q.is_head(node);
                // SAFETY: our node is linked in `q`.
                let stale = unsafe { q.cancel(node) };
                let more = if q.is_empty() {
                    // Relaxed: flag maintenance under the queue lock.
                    self.state.fetch_and(!(WAITERS | HANDOFF), Ordering::Relaxed);
                    false
                } else if was_head {
                    // HANDOFF was held for the node that left; the new head
                    // earns its own. Then let it in if it can go now
                    // (readers behind a cancelled writer) or compete.
                    self.state.fetch_and(!HANDOFF, Ordering::Relaxed);
                    self.dispatch(&mut q, &mut wakes)
                } else {
                    false
                };
                drop(q);
                drop(stale);
                wakes.wake_all();
                if more {
                    self.release_slow();
                }
            }
            _ => {}
        }
    }

    /// The blocking front end's contended path: spin, queue, park until the
    /// lock is ours. Never returns with the node linked.
    pub(crate) fn lock_blocking_contended(&self, kind: Kind) {
        let node = pin!(Waiter::new(kind));
        let node = &*node;
        let thread = || Task::Thread(crate::loom::current_thread());
        if self.lock_contended(node, config::SPIN_LIMIT_BLOCKING_NS, thread) {
            return;
        }
        loop {
            match node.state() {
                WAITING => crate::loom::park(),
                GRANTED => {
                    // SAFETY: our node, granted.
                    unsafe { node.consume_grant() };
                    return;
                }
                WOKEN => {
                    if self.retry_queued(node, None, thread) {
                        return;
                    }
                }
                other => unreachable!("blocked node in state {other}"),
            }
        }
    }

    // ----------------------------------------------------------------------
    // Diagnostics.
    // ----------------------------------------------------------------------

    /// The lock word, for tests and hang reports.
    pub(crate) fn word(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    /// A one-line description of the lock word and queue, for hang reports.
    pub(crate) fn describe(&self) -> String {
        let q = self.queue.lock();
        format!(
            "state {:?}, {} queued, queue word {:#x}",
            Decoded(self.state.load(Ordering::Relaxed)),
            q.len(),
            self.queue.debug_word() & 0b111
        )
    }
}

impl core::fmt::Debug for RawRwLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawRwLock")
            .field("state", &Decoded(self.word()))
            .field("max_readers", &self.max_readers)
            .finish_non_exhaustive()
    }
}
