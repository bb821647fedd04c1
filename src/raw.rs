//! The lock state machine: one lock word, one wait queue, and every
//! transition between them. The async and blocking front ends
//! ([`crate::acquire`]) only decide how to wait; everything about who gets the
//! lock, and when, lives here.
//!
//! # The path of an acquisition
//!
//! ```text
//!   fast path: one CAS on an uncontended word (a reader: one add, taken
//!        │ back if the word did not let it in) ───────────────────────► owned
//!        │ contended
//!        ▼
//!   spin: at most two spinners per lock (and any tasks waiting to read)
//!        │ poll the word with per-address backoff while the owner makes
//!        │ progress, never past about a park round trip, and not at all
//!        │ once HANDOFF is set, or while the lock is granted to a waiter
//!        │ that has not run yet (GRANTEE in the queue word: its owner is
//!        │ not running) ────────────────────────────────── wins the CAS ► owned
//!        ▼
//!   queue lock: barge if the policy allows (no HANDOFF; a reader never
//!        │ past waiters; under `fair`, nobody past waiters) ────────────► owned
//!        │ else set WAITERS and link a node at the tail
//!        ▼
//!   wait: the thread parks / the task returns Pending, until
//!        ├── GRANTED: a release took the lock on its behalf (the head was
//!        │   due, or `fair`) ───────────────────────────────────────────► owned
//!        ├── LICENSED (readers): a release woke the run of readers at the
//!        │   head and unlinked them; each takes a read lock unless a writer
//!        │   barged in first, else goes back to the front of the queue ─► owned
//!        └── RETRY (a writer head, with the WOKEN token): a release woke it
//!            to compete; it spins and takes the lock the moment it is free,
//!            or waits again (a thread keeps the token and naps, a task gives
//!            it back). Once its wait passes the handoff timeout it sets
//!            HANDOFF and the next release grants the lock to it (a thread
//!            stays awake for that grant for up to one spin budget).
//! ```
//!
//! # Release and dispatch
//!
//! A release is one `fetch_sub` on the word. If it saw `WAITERS` and no
//! `WOKEN` token (for a reader: if it was the last reader, or the one that
//! made room under `max_readers`), it takes the queue lock and runs
//! [`RawRwLock::dispatch`]:
//!
//! * the head is a parked writer thread that is due only by the clock (it
//!   waited past the handoff timeout): wake it with the `WOKEN` token, as
//!   below, and let it claim its turn once it runs: it takes the lock if it
//!   can, else sets `HANDOFF` itself and stays awake for the grant. Bargers
//!   use the lock while it wakes up ([`RawRwLock::claims_own_turn`]);
//! * the head is otherwise due (`HANDOFF` is set, or `fair`, or a task head
//!   waited past the timeout, or it is a task that was woken and lost the
//!   lock to bargers twice in a row: waking it again would only repeat that,
//!   a wasted poll per release when holders keep the lock across `.await`;
//!   or it is a task and the woken readers of runs (or, for a writer head,
//!   the woken writers) this thread saw have lately kept losing the lock to
//!   owners that then sat on it, see [`backoff::wake_is_futile`]) and can
//!   take the lock: grant it (a writer, or the run of readers at the
//!   head). After a handoff, granted or claimed, the next head is not due
//!   again before a gap (an eighth of the timeout after a grant, a 32nd
//!   after a claim) has passed, so handoffs stay spaced out however many
//!   waiters are overdue (a grant made because waking was futile sets no
//!   gap: the next release grants or wakes by the same rule);
//! * the head is due but the lock is held: set `HANDOFF`, so that the
//!   holder's release grants it and nobody else, not even a spinner, can
//!   take the lock meanwhile;
//! * otherwise (barging): wake the head to compete with whoever is running,
//!   rather than hand the lock to a waiter that is not running yet. A lock
//!   granted to a task still in a run queue, or a thread still waking up, is
//!   a lock nobody uses while everyone behind it queues up.
//!
//! Wakeups are issued after the queue lock is released.

use core::pin::pin;
use core::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crate::backoff::{self, Pace, Probe, Spin};
use crate::clock;
use crate::config::{self, FAIR, SPIN};
use crate::layout::{Census, Inline, Layout};
use crate::loom::Ordering;
use crate::state::*;
use crate::stats::{Counters, Event, LockStats, Stamp};
use crate::trace::Trace;
use crate::wait_queue::{GRANTED, IDLE, LICENSED, QueueGuard, RETRY, Task, WAITING, WaitQueue, Waiter, WakeList};

/// Who spins on a contended lock: a task, inside its poll on a runtime
/// worker (or an executor's thread), or a thread of its own. Only admission
/// to the spin differs (see [`RawRwLock::spin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spinner {
    Task,
    Thread,
}

/// A reader-writer lock with no data. `L` says where its word, reader limit
/// and queue live: inline for [`RwLock`](crate::RwLock) and
/// [`Mutex`](crate::Mutex) ([`Inline`], 16 bytes), or sharing one 64-bit
/// word with a reference count for [`LockRef`](crate::LockRef)
/// ([`Counted`](crate::layout::Counted), 8 bytes, queue in a hashed table).
/// The state machine below is the same for both.
pub(crate) struct RawRwLock<L: Layout = Inline> {
    /// The lock word; see [`crate::state`] for its layout and invariants.
    state: L,
    /// This lock's counters (`stats` feature; zero-sized without it).
    stats: Counters,
    /// This lock's tokio-console span (`tracing` feature; zero-sized
    /// without it).
    trace: Trace,
}

impl RawRwLock {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pub(crate) const fn new(max_readers: u32) -> Self {
        RawRwLock { state: Inline::new(max_readers), stats: Counters::new(), trace: Trace::none() }
    }

    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    pub(crate) fn new(max_readers: u32) -> Self {
        RawRwLock { state: Inline::new(max_readers), stats: Counters::new(), trace: Trace::none() }
    }
}

impl<L: Layout> RawRwLock<L> {
    /// A lock over the given storage.
    #[inline]
    pub(crate) const fn with_layout(state: L) -> Self {
        RawRwLock { state, stats: Counters::new(), trace: Trace::none() }
    }

    /// The storage: the lock word and whatever shares it.
    #[inline]
    pub(crate) fn layout(&self) -> &L {
        &self.state
    }

    /// The storage, owned: under loom, for a model of its free.
    #[cfg(hybrid_sync_loom)]
    pub(crate) fn layout_mut(&mut self) -> &mut L {
        &mut self.state
    }

    /// The queue lock of this lock's wait queue, filtered to its waiters.
    #[inline]
    fn lock_queue(&self) -> QueueGuard<'_> {
        self.state.queue().lock(self.state.key(), self.state.census())
    }

    /// Whether blocking threads wait in this lock's queue (a racy snapshot;
    /// `false` where the lock keeps no census).
    #[inline]
    pub(crate) fn threads_queued(&self) -> bool {
        self.state.census().is_some_and(Census::threads_queued)
    }

    /// The wait queue (its spinner slots and word).
    #[inline]
    fn queue(&self) -> &WaitQueue {
        self.state.queue()
    }

    /// The key that marks this lock's waiters in a shared queue.
    #[inline]
    pub(crate) fn key(&self) -> usize {
        self.state.key()
    }

    /// The same lock, visible to tokio-console through `trace`.
    #[inline]
    pub(crate) fn traced(mut self, trace: Trace) -> Self {
        self.trace = trace;
        self
    }

    /// The lock's tokio-console span.
    #[inline]
    pub(crate) fn trace(&self) -> &Trace {
        &self.trace
    }

    /// Notes an acquisition in mode `kind` that waited since `since` (the
    /// contended paths of the front ends).
    #[inline]
    pub(crate) fn acquired_after(&self, kind: Kind, since: Stamp) {
        self.stats.acquired_after(since);
        self.trace.acquired(kind);
    }

    /// Lets go of a lock taken for an async caller that yields before it
    /// gets it, because its coop budget is spent (`acquire::future`); the
    /// caller takes the lock anew when it is polled next. The counters
    /// (`stats`) keep only the acquisition the caller completes: a take
    /// that [`try_acquire`](Self::try_acquire) counted already (`counted`)
    /// is taken off again, and an uncounted one, after a wait, is counted
    /// when its caller completes, with the wait from its first poll. The
    /// trace (tokio-console) sees this take and its release, as they
    /// happened.
    ///
    /// # Safety
    ///
    /// The caller holds the lock in mode `kind`, taken for a future that
    /// has not handed it to a guard and will not use it again before it
    /// takes it anew.
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn give_back(&self, kind: Kind, counted: bool) {
        if counted {
            self.stats.given_back();
        } else {
            self.trace.acquired(kind);
        }
        // SAFETY: the caller's promise.
        unsafe { self.unlock(kind) };
    }

    /// A snapshot of this lock's counters.
    pub(crate) fn stats(&self) -> LockStats {
        self.stats.snapshot()
    }

    // ----------------------------------------------------------------------
    // Fast paths.
    // ----------------------------------------------------------------------

    /// Takes the lock if that needs no waiting. One CAS when uncontended (a
    /// reader: one add, even among readers; see `try_read_fast`);
    /// under contention, barges only as the policy allows
    /// ([`may_barge`]).
    #[inline]
    pub(crate) fn try_acquire(&self, kind: Kind) -> bool {
        let acquired = match kind {
            Kind::Write => {
                // Acquire: pairs with the Release of the previous unlock.
                self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
                    || self.try_acquire_contended(kind)
            }
            Kind::Read => self.try_read_fast() || self.try_acquire_contended(kind),
        };
        self.note_acquired(kind, acquired)
    }

    /// The read fast path, rwsem's `rwsem_read_trylock`: one `fetch_add`
    /// of a reader, kept if the word it returns let a newcomer read
    /// ([`can_read_fast`]), taken back at once if not.
    ///
    /// A compare-and-swap expecting an idle word fails whenever other
    /// readers are inside, and its failure has already taken the line from
    /// them; loading first costs every uncontended read a load. The add
    /// needs neither: readers joining readers, the common contended case of
    /// a read-mostly lock, succeed in one atomic operation whatever the
    /// count. A newcomer that meets a writer, a queue or a full lock pays a
    /// second one to take its reader back (`back_out_reader`). Async read-heavy
    /// (64 tasks, 90% reads) went from 0.93x to 0.99x parking_lot in 12
    /// interleaved quick rounds, and the uncontended read kept its time
    /// (docs/performance.md, "Readers join with one add").
    ///
    /// Between the two, the word counts one reader too many: a transient
    /// reader, which may sit beside `WRITER`, behind `WAITERS`, `HANDOFF` or
    /// `WOKEN`, or above `max_readers` (state.rs, Invariants 3 and 4). It
    /// touches no data, and everyone else treats it as a reader that is
    /// about to leave: a writer cannot take the word until it has, and its
    /// leaving does what a reader's release does.
    #[inline]
    fn try_read_fast(&self) -> bool {
        // Acquire: pairs with the Release of the previous unlock, for the
        // reader that keeps its add (state.rs, "Memory orderings").
        let old = self.state.fetch_add(ONE_READER, Ordering::Acquire);
        // An idle word needs no limit: max_readers is at least 1.
        old == 0 || can_read_fast(old, self.state.max_readers()) || {
            self.back_out_reader();
            false
        }
    }

    /// Takes back the reader that `try_read_fast` added to a word that did
    /// not let it in, with the release check a reader's release makes: the
    /// lock may have been waiting for exactly this count to fall (a writer
    /// that released meanwhile found our reader and left the dispatch to
    /// us). While `WRITER` is still set, the writer's own release, later in
    /// the word's order, dispatches.
    #[cold]
    fn back_out_reader(&self) {
        // Relaxed: this reader read nothing, so it publishes nothing; a
        // waiter's acquisition still synchronizes with the last owner's
        // release through this RMW (it continues that release sequence).
        let old = self.state.fetch_sub(ONE_READER, Ordering::Relaxed);
        debug_assert!(reader_count(old) > 0, "reader back-out of {:?}", Decoded(old));
        if needs_wakeup(old)
            && !is_write_locked(old)
            && (reader_count(old) == 1 || reader_count(old) == self.state.max_readers())
        {
            self.release_slow();
        }
    }

    /// [`try_acquire`](Self::try_acquire) for a blocking caller, which looks
    /// at the word before it writes to it: a compare-and-swap on a lock that
    /// turns out to be held takes the line from its owner, inside the
    /// owner's critical section, while a load only shares it. Threads that
    /// find the lock held queue or spin next, as after a failed CAS. (The
    /// async front end keeps `try_acquire`: its uncontended path, one CAS
    /// inlined at every `.await`, took about 10% longer with the load, while
    /// a blocking acquisition did not; see docs/performance.md, "A load
    /// before the compare-and-swap".) Readers add themselves as in
    /// `try_acquire`: a reader mostly meets readers, which the add joins
    /// without a failure.
    ///
    /// Under the model checkers this is `try_acquire`: the load only decides
    /// whether to try the CAS, and a stale value leads to the same contended
    /// path as a failed CAS, so it adds interleavings (it multiplied the
    /// loom models' run time) without adding states.
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    #[inline]
    pub(crate) fn try_acquire_looking(&self, kind: Kind) -> bool {
        let acquired = match kind {
            Kind::Write => {
                // Relaxed load: the CAS validates it; Acquire CAS: pairs
                // with the Release of the previous unlock.
                (self.state.load(Ordering::Relaxed) == 0
                    && self.state.compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok())
                    || self.try_acquire_contended(kind)
            }
            Kind::Read => self.try_read_fast() || self.try_acquire_contended(kind),
        };
        self.note_acquired(kind, acquired)
    }

    /// The model checkers' [`try_acquire_looking`](Self::try_acquire_looking).
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    #[inline]
    pub(crate) fn try_acquire_looking(&self, kind: Kind) -> bool {
        self.try_acquire(kind)
    }

    /// The fast paths' bookkeeping (the `stats` and `trace` features; nothing
    /// without them): counts an acquisition that needed no waiting. Returns
    /// `acquired`.
    #[inline]
    fn note_acquired(&self, kind: Kind, acquired: bool) -> bool {
        if acquired {
            self.stats.acquired();
            self.trace.acquired(kind);
        }
        acquired
    }

    #[cold]
    fn try_acquire_contended(&self, kind: Kind) -> bool {
        // The deliberately broken build (`--cfg hybrid_sync_broken`, for
        // tests/torture.rs only): a writer walks in beside readers.
        #[cfg(hybrid_sync_broken)]
        if kind == Kind::Write {
            // Orderings as a real acquisition's (state.rs).
            let s = self.state.load(Ordering::Relaxed);
            if !is_write_locked(s)
                && reader_count(s) > 0
                && self.state.compare_exchange(s, s | WRITER, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return true;
            }
        }
        // Relaxed: the CAS below validates it (state.rs, "Memory orderings").
        let mut s = self.state.load(Ordering::Relaxed);
        if has_waiters(s) && !has_handoff(s) && !FAIR && barging_audit_due() {
            // About to pass queued waiters. Their head may be unable to run
            // (a woken thread still waiting for a CPU that bargers keep busy)
            // and so unable to claim its turn when it is due; now and then a
            // barger claims it for it, so the wait stays bounded even then.
            self.audit_head();
            s = self.state.load(Ordering::Relaxed);
        }
        while may_barge(kind, s, self.state.max_readers(), FAIR) {
            // Acquire: pairs with the previous owner's release.
            match self.state.compare_exchange_weak(s, with_owner(kind, s), Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(actual) => s = actual,
            }
        }
        false
    }

    /// Sets `HANDOFF` if the queue head is due (see `barging_audit_due`):
    /// bargers claim the turn of a head that cannot claim it itself, a
    /// woken thread that cannot get a CPU while they keep both busy. The
    /// handoff gap (`dispatch`) keeps this from turning every barging run
    /// into a convoy of handoffs: a head is due at most once per gap.
    #[cold]
    fn audit_head(&self) {
        self.stats.event(Event::Audit);
        let q = self.lock_queue();
        let Some(head) = q.head() else { return };
        // Relaxed: HANDOFF is set by a CAS against it (state.rs).
        let mut s = self.state.load(Ordering::Relaxed);
        // A head that claims its own turn (see `claims_own_turn`) is woken
        // by the next release; one that was woken to do so gets a claim gap
        // to come and claim it before bargers force the handoff for it. Not
        // more: a woken thread that has not claimed by then is most likely
        // waiting for a CPU that the bargers keep busy, and HANDOFF is what
        // sends them off it (spinners leave, newcomers queue). With a whole
        // handoff gap (125 us) here, queued waiters of 32 threads on 2
        // cores waited mostly 3.2-4.9 ms; with a claim gap (31 us), 1-2.4 ms,
        // and 1000 threads' worst wait fell from 150 ms to 70 ms, for 5-8%
        // of their throughput (interleaved A/B, 3 rounds).
        // SAFETY: under the queue lock.
        let grace = if unsafe { self.claims_own_turn(s, head) } {
            return;
        } else if !FAIR && head.kind == Kind::Write && head.state_relaxed() == RETRY {
            config::claim_gap_ns()
        } else {
            0
        };
        // SAFETY: under the queue lock.
        if !unsafe { head.waited_at_least(clock::now(), config::handoff_timeout_ns() + grace) } {
            return;
        }
        while !has_handoff(s) {
            // Relaxed: as in `request_handoff`.
            match self.state.compare_exchange(s, s | HANDOFF, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    self.stats.event(Event::HandoffSet);
                    break;
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// Releases a read lock.
    ///
    /// # Safety
    /// The caller holds a read lock and gives it up.
    #[inline]
    pub(crate) unsafe fn read_unlock(&self) {
        self.trace.released(Kind::Read);
        // SAFETY: forwarded.
        unsafe { self.read_release() }
    }

    /// [`read_unlock`](Self::read_unlock) without the tracing event.
    ///
    /// # Safety
    /// As for `read_unlock`.
    #[inline]
    unsafe fn read_release(&self) {
        // Release: publishes the critical section to the next owner.
        let old = self.state.fetch_sub(ONE_READER, Ordering::Release);
        debug_assert!(reader_count(old) > 0, "read unlock of {:?}", Decoded(old));
        // The last reader frees the lock for a queued writer; the reader that
        // leaves a full lock makes room for a queued reader.
        if needs_wakeup(old) && (reader_count(old) == 1 || reader_count(old) == self.state.max_readers()) {
            self.release_slow();
        }
    }

    /// Releases the write lock.
    ///
    /// # Safety
    /// The caller holds the write lock and gives it up.
    #[inline]
    pub(crate) unsafe fn write_unlock(&self) {
        self.trace.released(Kind::Write);
        // SAFETY: forwarded.
        unsafe { self.write_release() }
    }

    /// [`write_unlock`](Self::write_unlock) without the tracing event.
    ///
    /// # Safety
    /// As for `write_unlock`.
    #[inline]
    unsafe fn write_release(&self) {
        if L::FREED_ONCE_RELEASED {
            // SAFETY: forwarded.
            return unsafe { self.write_release_pinned() };
        }
        // Release: publishes the critical section to the next owner.
        let old = self.state.fetch_sub(WRITER, Ordering::Release);
        debug_assert!(is_write_locked(old), "write unlock of {:?}", Decoded(old));
        if needs_wakeup(old) {
            self.release_slow();
        }
    }

    /// [`write_release`](Self::write_release) for a lock whose memory may be
    /// freed as soon as it is released ([`Layout::FREED_ONCE_RELEASED`]: a
    /// `LockRef` whose holder gave its reference up under the lock). Once
    /// the lock is free, the owner of the last reference may take it, mark
    /// the `LockRef` dead, release it and free it, all without the queue
    /// lock; a release that went on to dispatch from the word would then
    /// read, and write, freed memory. So the word is released either in one
    /// compare-and-swap, after which nothing of the lock is touched, or, with
    /// waiters to dispatch, under the queue lock: each queued waiter pins the
    /// lock (it holds a reference, or whatever else keeps the `LockRef` alive
    /// for it), and none can leave the queue while we hold its lock, as
    /// parking_lot releases a contended lock inside `unpark_one`'s callback.
    ///
    /// # Safety
    /// As for `write_release`.
    #[inline]
    unsafe fn write_release_pinned(&self) {
        // Release: publishes the critical section to the next owner, as
        // `write_release`'s `fetch_sub` does.
        match self.state.fetch_sub_unless(WRITER, needs_wakeup, Ordering::Release) {
            Ok(old) => debug_assert!(is_write_locked(old), "write unlock of {:?}", Decoded(old)),
            // SAFETY: forwarded; the compare-and-swap left the lock ours.
            Err(_) => unsafe { self.release_queued() },
        }
    }

    /// The slow half of [`write_release_pinned`](Self::write_release_pinned):
    /// release under the queue lock, then dispatch while the waiters pin
    /// the lock.
    ///
    /// # Safety
    /// The caller holds the write lock and gives it up.
    #[cold]
    #[inline(never)]
    unsafe fn release_queued(&self) {
        // Counted while the lock is still ours: afterwards the counters may
        // be gone with it.
        self.stats.event(Event::Dispatch);
        let mut wakes = WakeList::new();
        let more = {
            let mut q = self.lock_queue();
            // Release: publishes the critical section to the next owner.
            let old = self.state.fetch_sub(WRITER, Ordering::Release);
            debug_assert!(is_write_locked(old), "write unlock of {:?}", Decoded(old));
            // From here on, whoever holds the last reference may free the
            // lock unless queued waiters pin it: the model checkers fail any
            // touch of the word by this release while nothing does.
            #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
            self.state.model_release_begin(!q.is_empty());
            // Nobody queued any more (the waiters left between our look at
            // the word and the queue lock: `WAITERS` is clear, Invariant 1),
            // or a woken head holds the token and takes over: the release
            // was our last touch of the lock.
            if !needs_wakeup(old) {
                #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
                self.state.model_release_end();
                return;
            }
            // Pinned by the waiters (above) for as long as we hold `q`, and
            // `dispatch` touches nothing of the lock after its last grant.
            // With nobody queued, nothing would pin it: the word `dispatch`
            // reads could be freed memory already. `WAITERS` in `old` rules
            // that out (Invariant 1); it is checked all the same, because
            // the model checkers find a queue emptied before this point at
            // once but a free inside the window after it seldom or never
            // (docs/checks.md).
            #[cfg(any(debug_assertions, hybrid_sync_loom, hybrid_sync_shuttle))]
            assert!(!q.is_empty(), "a released lock dispatched with nobody queued to pin it");
            self.dispatch(&mut q, &mut wakes)
        };
        // The queue let go: nothing pins the lock for us any more.
        #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
        self.state.model_unpinned();
        wakes.wake_all();
        if more {
            // Readers left over for the next round (never for a `LockRef`,
            // which has no readers): still queued, still pinning the lock.
            self.release_slow();
        }
        #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
        self.state.model_release_end();
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
        self.trace.downgraded();
        // WRITER is set, so adding ONE_READER - WRITER clears it and adds one
        // reader in one step, leaving the flags as they are: a pending
        // handoff keeps newcomers out of the downgraded lock too.
        // Release: the new readers see the writer's critical section.
        let old = self.state.fetch_add(ONE_READER - WRITER, Ordering::Release);
        debug_assert!(is_write_locked(old), "downgrade of {:?}", Decoded(old));
        // Readers queued at the head may join now, whoever holds the token.
        if has_waiters(old) {
            self.release_slow();
        }
    }

    /// A release found sleeping waiters: dispatch under the queue lock, then
    /// wake.
    #[cold]
    fn release_slow(&self) {
        self.stats.event(Event::Dispatch);
        let mut wakes = WakeList::new();
        loop {
            let more = {
                let mut q = self.lock_queue();
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
        // Asked once per dispatch (each yes spends a credit): the loop below
        // only comes round again after a failed CAS, with the same head.
        let mut futile = None;
        // Relaxed: every decision below ends in a CAS against this value.
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let Some(head) = q.head() else {
                debug_assert!(!has_waiters(s) && !has_handoff(s), "empty queue, {:?}", Decoded(s));
                return false;
            };
            let kind = head.kind;
            let free = head_may_take(kind, s, self.state.max_readers());
            // SAFETY: under the queue lock.
            let lost = unsafe { head.lost_wake() };
            // SAFETY: under the queue lock; `head` is its head.
            let futile_wake = *futile.get_or_insert_with(|| unsafe { self.wake_is_futile(head) });
            let mut due = FAIR || has_handoff(s) || lost || futile_wake || self.head_is_due(q, &mut now);
            // SAFETY: under the queue lock.
            if due && unsafe { self.claims_own_turn(s, head) } {
                // Woken below (it takes the token); once it runs it claims
                // its turn itself, setting HANDOFF while it is awake.
                due = false;
            }
            if !free && (due || kind == Kind::Read || !is_write_locked(s)) {
                // Its holder will release it and dispatch again; if the head
                // has waited too long, that release must be a handoff. (A
                // reader can do nothing while a writer holds the lock, and a
                // writer behind readers waits for the last one's release.)
                match self.request_handoff(q, s, &mut now) {
                    Ok(()) => return false,
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }
            if !due {
                // Barging: wake the head (a run of readers at the head) to
                // compete with whoever runs now, rather than hand the lock to
                // waiters that are not running yet: a lock granted to a task
                // still sitting in a run queue, or a thread still waking up,
                // is a lock nobody uses, and everyone behind it queues too.
                if kind == Kind::Read {
                    // Readers do not take the token: the run at the head is
                    // unlinked and licensed, so an emptied queue lets every
                    // reader in again at once.
                    self.stats.event(Event::WakeHead);
                    let more = q.wake_readers(self.state.max_readers() - reader_count(s), wakes) > 0
                        && q.head().is_some_and(|h| h.kind == Kind::Read)
                        && wakes.room() == 0;
                    if q.is_empty() {
                        // Relaxed: flag maintenance under the queue lock.
                        self.state.fetch_and(!WAITERS, Ordering::Relaxed);
                    }
                    return more;
                }
                // A writer head is woken even if a barging writer took the
                // lock in the meantime: it takes the WOKEN token, so that
                // releases stop coming here until it has run (spinning for
                // its turn) and either won or given the token back.
                if has_woken(s) || head.state_relaxed() == RETRY {
                    // Someone awake is coming already: a token owner, or the
                    // head itself between taking the lock (which gives the
                    // token up) and unlinking its node.
                    return false;
                }
                // A woken writer takes the WOKEN token, so that new readers
                // hold back and releases do not wake anyone else meanwhile.
                // Relaxed: the token guards no data (state.rs).
                match self.state.compare_exchange(s, s | WOKEN, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        self.stats.event(Event::WakeHead);
                        q.wake_head(wakes);
                        return false;
                    }
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }

            // Count the nodes to grant: the head, and for a reader head the
            // run of readers behind it that fits under max_readers and in
            // this round's wake list.
            let head_has_token = kind == Kind::Write && head.state_relaxed() == RETRY;
            let room = self.state.max_readers() - reader_count(s);
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
            let next = next.map(|n| n as *const Waiter);
            if head_has_token {
                new &= !WOKEN;
            }
            // Acquire: the previous owner's release happens-before the
            // grantees' critical sections (they read GRANTED, stored with
            // Release after this). Relaxed on failure: we only retry.
            match self.state.compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => {
                    // The lock is the grantees' now: a release that gave it
                    // up touches nothing of it from here on.
                    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
                    self.state.model_unpinned();
                    if kind == Kind::Write {
                        // Before the grantee can see its grant and clear it.
                        self.queue().set_grantee();
                    }
                    for _ in 0..count {
                        self.stats.event(Event::Grant);
                        // SAFETY: the lock was just taken for the head.
                        unsafe { q.grant_head(wakes) };
                    }
                    // One handoff per gap: the waiter that becomes the head is
                    // not due before a handoff gap (`config::handoff_gap_ns`)
                    // from now, however long it has waited, and newcomers may
                    // barge meanwhile (as parking_lot spaces out its fair
                    // unlocks). Without the gap, a queue where everyone is
                    // overdue (hundreds of threads on two cores) drains by
                    // handoffs alone, one wakeup at a time, and throughput
                    // falls to the rate at which sleepers wake. The price:
                    // the k-th overdue waiter waits about timeout + k gaps.
                    if let (false, Some(next)) = (FAIR || futile_wake, next) {
                        let now = *now.get_or_insert_with(clock::now);
                        // SAFETY: `next` is still linked (it follows the
                        // granted run), hence alive; under the queue lock.
                        unsafe { (*next).defer_due(now, config::handoff_gap_ns(), config::handoff_timeout_ns()) };
                    }
                    return more;
                }
                Err(actual) => s = actual,
            }
        }
    }

    /// The owner of a `GRANTED` node takes its grant up: the lock is its own
    /// now, and running, so spinners may come again (see `GRANTEE` in
    /// [`crate::wait_queue`]).
    ///
    /// # Safety
    /// As for [`Waiter::consume_grant`]: the caller owns the node, `GRANTED`.
    #[inline]
    unsafe fn take_grant(&self, node: &Waiter) {
        // SAFETY: forwarded.
        unsafe { node.consume_grant() };
        if node.kind == Kind::Write {
            self.queue().clear_grantee();
        }
    }

    /// Whether a head that is due only by the clock should be woken to claim
    /// its turn itself rather than be handed the lock (or `HANDOFF` be set
    /// for it) while it sleeps.
    ///
    /// A lock handed to a parked thread sits unused until that thread is
    /// back on a CPU: a futex wakeup, tens of microseconds on a VM whose
    /// idle vCPU must be woken too, during which every other contender
    /// queues. With hundreds of overdue waiters on two cores that idle time
    /// was a third of the run (32 threads: 11.5 M ops/s at the 1 ms
    /// timeout against 14.1 M with `handoff-4ms`). Woken with the `WOKEN`
    /// token instead, the head competes for the lock as soon as it runs,
    /// and if it still loses it sets `HANDOFF` itself (`retry_queued`), so
    /// the release that follows hands the lock to a thread that is awake.
    /// Bargers keep the lock busy meanwhile; the head's wait grows by one
    /// wakeup. Threads only: a task is woken by its executor whenever that
    /// gets to it, so a task head is granted the lock as before (this also
    /// covers a head due by lost wakeups: only tasks count those); under
    /// `fair`, or with `HANDOFF` already set (whoever set it is owed the
    /// grant), as before too.
    ///
    /// # Safety
    /// Under the queue lock; `head` is the head of `q`.
    unsafe fn claims_own_turn(&self, s: u32, head: &Waiter) -> bool {
        !FAIR
            && !has_handoff(s)
            && !has_woken(s)
            && head.kind == Kind::Write
            // SAFETY: forwarded.
            && unsafe { head.sleeping_thread() }
    }

    /// Whether waking the head, a task (a writer, or the first of a run of
    /// readers), to compete for the lock rather than granting it would most
    /// likely waste a poll (see [`backoff::wake_is_futile`]).
    ///
    /// # Safety
    /// Under the queue lock; `head` is the head of the queue.
    #[inline]
    unsafe fn wake_is_futile(&self, head: &Waiter) -> bool {
        !FAIR
            // SAFETY: forwarded.
            && unsafe { head.sleeping_task() }
            && backoff::wake_is_futile(self as *const Self as usize, head.kind)
    }

    /// Whether the head has waited past the handoff timeout.
    fn head_is_due(&self, q: &QueueGuard<'_>, now: &mut Option<u64>) -> bool {
        let now = *now.get_or_insert_with(clock::now);
        match q.head() {
            // SAFETY: under the queue lock.
            Some(head) => unsafe { head.waited_at_least(now, config::handoff_timeout_ns()) },
            None => false,
        }
    }

    /// Sets `HANDOFF` for a due head while the lock is held. `Err` carries the
    /// word if it changed under us.
    fn request_handoff(&self, q: &QueueGuard<'_>, s: u32, now: &mut Option<u64>) -> Result<(), u32> {
        // Under `fair` every release grants anyway, and WAITERS alone keeps
        // newcomers and spinners out.
        if FAIR || has_handoff(s) || !self.head_is_due(q, now) {
            return Ok(());
        }
        // Relaxed: the bit guards no data; it only redirects the next release.
        let r = self.state.compare_exchange(s, s | HANDOFF, Ordering::Relaxed, Ordering::Relaxed).map(drop);
        if r.is_ok() {
            self.stats.event(Event::HandoffSet);
        }
        r
    }

    /// Gives up the `WOKEN` token without taking the lock. A release may have
    /// skipped waking anyone because we held it, so if the lock may be free
    /// now, dispatch.
    fn drop_token(&self) {
        // Relaxed: the token guards no data; release_slow takes the queue lock.
        let s = self.state.fetch_and(!WOKEN, Ordering::Relaxed) & !WOKEN;
        if has_waiters(s) && !is_write_locked(s) {
            self.release_slow();
        }
    }

    // ----------------------------------------------------------------------
    // Contended acquisition, shared by both front ends.
    // ----------------------------------------------------------------------

    /// The contended path of a node that is not queued: spin, then barge or
    /// queue under the queue lock. Returns `true` if the lock was taken; if
    /// not, the node is queued as `WAITING` with the task from `task`.
    /// `spin_limit` says how long it may spin, asked only if nothing else
    /// rules a spin out (see [`spin`](Self::spin)).
    pub(crate) fn lock_contended(
        &self,
        node: &Waiter,
        spinner: Spinner,
        spin_limit: impl FnOnce() -> u32,
        task: impl FnOnce() -> Task,
    ) -> bool {
        debug_assert_eq!(node.state(), IDLE);
        self.stats.event(Event::Contended);
        let kind = node.kind;
        if SPIN && self.spin(kind, spinner, spin_limit) {
            return true;
        }
        // SAFETY: our node, not linked (IDLE).
        unsafe { node.stamp_wait_start() };
        let mut q = self.lock_queue();
        if self.take_or_announce(|s| may_barge(kind, s, self.state.max_readers(), FAIR).then(|| with_owner(kind, s))) {
            self.stats.event(Event::Barge);
            return true;
        }
        // SAFETY: the node is the caller's, pinned in its future or stack
        // frame, unlinked (IDLE), and the front ends unlink it before it dies.
        unsafe { q.push_back(node, task()) };
        self.stats.event(Event::Queued);
        false
    }

    /// Under the queue lock, just before queueing: takes the lock if `take`
    /// says how (`Some(new word)`), and otherwise makes sure `WAITERS` is set
    /// in a way that no release can slip past. Returns `true` if it took
    /// the lock.
    ///
    /// If `WAITERS` is already set, every later release sees it and
    /// dispatches (or a token owner is awake) once the caller releases the
    /// queue lock. If not, it is set by a CAS against the word just examined,
    /// which fails if a release slipped in since, so the caller cannot sleep
    /// through it (state.rs, "Why a release never loses a waiter").
    fn take_or_announce(&self, take: impl Fn(u32) -> Option<u32>) -> bool {
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let result = match take(s) {
                // Acquire: pairs with the previous owner's release.
                Some(new) => match self.state.compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(actual) => actual,
                },
                None if has_waiters(s) => return false,
                // Relaxed: WAITERS guards no data; the CAS only validates.
                None => match self.state.compare_exchange_weak(s, s | WAITERS, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return false,
                    Err(actual) => actual,
                },
            };
            s = result;
        }
    }

    /// Spins for the lock, holding one of this lock's two spinner slots
    /// (a task that waits to read needs none, see below).
    ///
    /// A writer that spins on readers while nobody is queued takes the
    /// `WOKEN` token: new readers then hold back and the ones inside drain,
    /// so the writer gets in within one read section instead of queueing
    /// behind a stream of readers. It never takes the token from a queue
    /// that has sleepers, so releases keep waking (or handing off to) the
    /// queue, nor from a writer owner: no reader can enter past a writer
    /// anyway, and the token's compare-and-swap would take the lock's cache
    /// line from an owner inside its critical section. (Taken on any held
    /// word, as before 2026-12-01, it cost async write-heavy, where every
    /// owner is a writer, 5-13% of its throughput in three interleaved A/Bs
    /// against parking_lot, with no change outside the noise elsewhere.)
    ///
    /// A task that waits to read spins without a slot. The slots bound how
    /// many CPUs burn on one lock, and a task spins inside its poll, so the
    /// runtime's workers bound those spinners already; readers do not
    /// compete with one another (they all get in once the writer is gone),
    /// and a reader spins only behind a writer with nobody queued. The
    /// claim and the give-back are two atomic operations on the queue word,
    /// which shares the lock word's cache line, on every contended read: in
    /// the showdown's async read-heavy run (64 tasks on 2 workers, 90%
    /// reads) leaving them out took hybrid-sync from 0.88-0.92x to
    /// 0.95-0.98x parking_lot's throughput, and its CPU per operation from
    /// 1.10-1.15x to 1.04-1.07x of parking_lot's, in four interleaved A/Bs
    /// of 8-10 quick rounds (docs/performance.md, "Readers spin without a
    /// slot"). A thread still takes a slot to read: nothing else bounds how
    /// many threads spin at once.
    /// `GRANTEE` keeps slotless readers off as it keeps everyone.
    ///
    /// The refusals come first and cost a load each (Relaxed: a heuristic;
    /// the poll's CAS decides): a futile word, then a full or granted lock
    /// (the slot's claim is two more atomic operations on the queue word).
    /// Only then is `limit` asked how long to spin, a thread-local look-up
    /// for a task (`acquire::future::spin_limit`), 0 where spinning is ruled
    /// out; a lock held across `.await`, granted on and on, never asks it.
    #[inline]
    fn spin(&self, kind: Kind, spinner: Spinner, limit: impl FnOnce() -> u32) -> bool {
        if spin_is_futile(kind, self.state.load(Ordering::Relaxed)) {
            // Counted as a spin phase only where the limit allowed one, as
            // when the limit was asked first.
            if cfg!(feature = "stats") && limit() > 0 {
                self.stats.event(Event::SpinHandoff);
            }
            return false;
        }
        let slotless = kind == Kind::Read && spinner == Spinner::Task;
        if !self.queue().may_spin(slotless) {
            return false;
        }
        let limit_ns = limit();
        if limit_ns == 0 || (!slotless && !self.queue().try_claim_spinner()) {
            return false;
        }
        self.spin_admitted(kind, slotless, limit_ns)
    }

    /// [`spin`](Self::spin) once admitted, holding a spinner slot unless
    /// `slotless`.
    fn spin_admitted(&self, kind: Kind, slotless: bool, limit_ns: u32) -> bool {
        let futile = |s: u32| spin_is_futile(kind, s);
        let max = self.state.max_readers();
        let mut token = false;
        // Seed 003's measurement, when switched on: time spent between a
        // poll that saw a pending handoff and the next poll (or the end).
        let mut handoff_seen: Option<Instant> = None;
        let mut handoff_ns = 0u64;
        let result = backoff::spin(self as *const Self as usize, limit_ns, || {
            // Relaxed: a poll, which orders nothing; the compare-and-swap
            // that wins takes the lock with Acquire.
            let s = self.state.load(Ordering::Relaxed);
            if let Some(seen) = handoff_seen.take() {
                handoff_ns += seen.elapsed().as_nanos() as u64;
            }
            if has_handoff(s) && config::measuring_handoff_spin() {
                handoff_seen = Some(Instant::now());
            }
            if futile(s) {
                return Probe::Handoff;
            }
            if may_barge(kind, s, max, FAIR) {
                let new = if token { with_owner(kind, s) & !WOKEN } else { with_owner(kind, s) };
                // Acquire: pairs with the previous owner's release.
                return match self.state.compare_exchange(s, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        token = false;
                        // Give the slot back at once: the lock is held from
                        // here on, so a cache miss here would lengthen the
                        // section, and inline locks keep the slot count on
                        // the lock word's line, still ours from the CAS.
                        if !slotless {
                            self.queue().release_spinner();
                        }
                        Probe::Acquired
                    }
                    Err(_) => Probe::Lost,
                };
            }
            if !token
                && kind == Kind::Write
                && reader_count(s) > 0
                // Not beside a writer owner, whose word counts readers only
                // while they take back a fast-path add.
                && s & (WRITER | WAITERS | WOKEN) == 0
                // Relaxed: the token guards no data (state.rs).
                && self.state.compare_exchange(s, s | WOKEN, Ordering::Relaxed, Ordering::Relaxed).is_ok()
            {
                token = true;
                // The word as it is now: our own token is no sign that the
                // owner makes progress (the stall rule in `backoff::spin`).
                return Probe::HeldPaced(s | WOKEN, Pace::Drain);
            }
            if token && reader_count(s) > 0 {
                // The readers inside are leaving, and nobody can come in
                // before us.
                Probe::HeldPaced(s, Pace::Drain)
            } else if kind == Kind::Read && (is_write_locked(s) || has_woken(s)) {
                // A writer holds the lock, or will take it first: `futile`
                // sent away readers that face queued waiters, so a token
                // here is a writer spinner's.
                Probe::HeldPaced(s, Pace::BehindWriter)
            } else {
                Probe::Held(s)
            }
        });
        if let Some(seen) = handoff_seen {
            handoff_ns += seen.elapsed().as_nanos() as u64;
        }
        if handoff_ns > 0 {
            config::add_handoff_spin(handoff_ns);
        }
        if token {
            self.drop_token();
        }
        // A win gave the slot back already, in the poll that won.
        if result != Spin::Acquired && !slotless {
            self.queue().release_spinner();
        }
        self.stats.event(match result {
            Spin::Acquired => Event::SpinWin,
            Spin::Handoff => Event::SpinHandoff,
            Spin::GaveUp => Event::SpinGiveUp,
        });
        result == Spin::Acquired
    }

    /// The owner of a queued node competes for the lock again: after it was
    /// woken (`RETRY`, holding the `WOKEN` token), or when its task polls it anyway
    /// (`WAITING`).
    ///
    /// The head may take the lock whenever it is free for it, `HANDOFF`
    /// notwithstanding (the bit is held for it). Any other queued node may
    /// take it only as a newcomer could ([`may_barge`]): a task that polls
    /// a queued future whose wakeup went to a sibling future (two lock
    /// futures in one `select!`, tokio#6450, async-lock#91) still gets in
    /// when the lock is free, unless `fair` forbids overtaking.
    ///
    /// A woken node that loses gives its token back, demanding a handoff if
    /// it is due, and waits again with the task from `task` (or keeps the
    /// stored one if `waker` would wake it anyway). With `retain`, a woken
    /// node that is not yet due instead keeps the token and returns
    /// [`Retry::Retained`]: its thread sleeps with a deadline rather than
    /// being woken by every release only to lose again.
    pub(crate) fn retry_queued(
        &self,
        node: &Waiter,
        waker: Option<&Waker>,
        retain: bool,
        task: impl FnOnce() -> Task,
    ) -> Retry {
        let kind = node.kind;
        let mut wakes = WakeList::new();
        let mut q = self.lock_queue();
        let woken = match node.state() {
            GRANTED => {
                drop(q);
                // SAFETY: our node, granted.
                unsafe { self.take_grant(node) };
                return Retry::Acquired;
            }
            // A release licensed the run of readers this node was part of
            // between its owner's look at the state and this queue lock.
            LICENSED => return Retry::Licensed,
            RETRY => true,
            WAITING => false,
            other => unreachable!("retry of a node in state {other}"),
        };
        // A woken node is a writer head holding the WOKEN token.
        let token = woken;
        let mut now = None;
        // Relaxed: each outcome below is a CAS against it (state.rs).
        let mut s = self.state.load(Ordering::Relaxed);
        loop {
            let is_head = q.is_head(node);
            // The head (and a woken writer, which the insertion of a licensed
            // reader may have moved to second place) may take the lock
            // whenever it is free for it: HANDOFF and the token are its own.
            let allowed = if is_head || woken {
                head_may_take(kind, s, self.state.max_readers())
            } else {
                may_barge(kind, s, self.state.max_readers(), FAIR)
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
                if token {
                    new &= !WOKEN;
                }
                // Acquire: pairs with the previous owner's release.
                match self.state.compare_exchange_weak(s, new, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => {
                        self.stats.event(Event::RetryWon);
                        if woken {
                            backoff::note_woken(self as *const Self as usize, Kind::Write, true);
                        }
                        // SAFETY: our node is linked in `q`, under its lock.
                        unsafe { self.space_handoffs(&q, node, &mut now) };
                        // SAFETY: our node is linked in `q`.
                        let stale = unsafe { q.remove_acquired(node) };
                        // Readers queued behind a reader may share the lock.
                        // (A head finds its lock free only between a
                        // release's word and its queue lock, and that
                        // release dispatches next, so it would let them in
                        // too: this only lets them in sooner. shuttle's
                        // `reader_head_polled_during_a_release` runs it.)
                        let more = kind == Kind::Read && !alone && self.dispatch(&mut q, &mut wakes);
                        drop(q);
                        drop(stale);
                        wakes.wake_all();
                        if more {
                            self.release_slow();
                        }
                        return Retry::Acquired;
                    }
                    Err(actual) => {
                        s = actual;
                        continue;
                    }
                }
            }
            if token {
                let due = is_head && self.head_is_due(&q, &mut now);
                if retain && !due {
                    self.stats.event(Event::RetryLost);
                    // Keep the token (and our place); sleep until the lock
                    // is likely free or we are due. Store the thread so a
                    // grant can wake us early.
                    // SAFETY: under the queue lock; the node is ours.
                    let stale = unsafe { node.set_task(task()) };
                    let due_in = self.time_to_due(&q, node, now);
                    drop(q);
                    drop(stale);
                    return Retry::Retained { due_in };
                }
                // Give the token up in a CAS that checks the lock is still
                // held, so its holder's release will wake the head. A due
                // head demands the handoff in the same step.
                let mut new = s & !WOKEN;
                if due && !FAIR && !has_handoff(s) {
                    new |= HANDOFF;
                }
                if let Err(actual) = self.state.compare_exchange(s, new, Ordering::Relaxed, Ordering::Relaxed) {
                    s = actual;
                    continue;
                }
                if new & HANDOFF != s & HANDOFF {
                    self.stats.event(Event::HandoffSet);
                }
            } else if is_head && let Err(actual) = self.request_handoff(&q, s, &mut now) {
                s = actual;
                continue;
            }
            break;
        }
        self.stats.event(Event::RetryLost);
        // Lost the race to a barging newcomer (or not our turn). Whoever holds
        // the lock will see WAITERS without WOKEN on release and wake or
        // grant the head.
        // SAFETY: our node is linked in `q`, and we hold the queue lock.
        let stale = unsafe {
            if woken && waker.is_some() {
                node.mark_lost_wake();
            }
            if woken || node.needs_task(waker) { node.rewait(task()) } else { None }
        };
        drop(q);
        drop(stale);
        Retry::Waiting
    }

    /// A licensed reader (woken from the head of the queue and unlinked)
    /// takes a read lock if the lock is not write-locked, waiting out a short
    /// write section by spinning; if a writer still holds it, the reader
    /// goes back to the front of the queue, and the wakeup counts as futile
    /// (see [`backoff::wake_is_futile`]). Returns `true` if it holds the
    /// lock.
    fn enter_licensed(&self, node: &Waiter, spin_limit_ns: u32, task: impl FnOnce() -> Task) -> bool {
        debug_assert_eq!(node.kind, Kind::Read);
        let max = self.state.max_readers();
        let try_enter = || {
            // Relaxed: a guess at the word, which the compare-and-swap checks.
            let mut s = self.state.load(Ordering::Relaxed);
            while !is_write_locked(s) && reader_count(s) < max {
                // Acquire: pairs with the writer's release.
                match self.state.compare_exchange_weak(s, s + ONE_READER, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(actual) => s = actual,
                }
            }
            false
        };
        let key = self as *const Self as usize;
        if try_enter() {
            backoff::note_woken(key, Kind::Read, true);
            // SAFETY: our node, licensed and unlinked; consuming the licence
            // leaves it IDLE, as after any acquisition.
            unsafe { node.consume_grant() };
            return true;
        }
        // Wait out a short write section, within the lock's spinner limit
        // (a woken run of readers must not turn into a crowd of spinners).
        if SPIN && spin_limit_ns > 0 && self.queue().try_claim_spinner() {
            backoff::spin(key, spin_limit_ns, || {
                // Relaxed: only says when to try; `try_enter`'s CAS acquires.
                let s = self.state.load(Ordering::Relaxed);
                if is_write_locked(s) { Probe::Held(s) } else { Probe::Acquired }
            });
            self.queue().release_spinner();
        }
        if try_enter() {
            // SAFETY: as above.
            unsafe { node.consume_grant() };
            return true;
        }
        let mut q = self.lock_queue();
        if self.take_or_announce(|s| (!is_write_locked(s) && reader_count(s) < max).then(|| s + ONE_READER)) {
            drop(q);
            // SAFETY: as above.
            unsafe { node.consume_grant() };
            return true;
        }
        self.stats.event(Event::Queued);
        let task = task();
        // A task woken for nothing: from the second time on, the release
        // that finds it at the head grants it the lock (`lost_wake`).
        if matches!(task, Task::Waker(_)) {
            // SAFETY: under the queue lock; our node.
            unsafe { node.mark_lost_wake() };
        }
        // SAFETY: our node, unlinked, pinned by its owner as for push_back.
        unsafe { q.push_front(node, task) };
        drop(q);
        // Woken for nothing: a loss, which in a row with others makes this
        // thread's releases grant task heads, runs of readers included,
        // instead of waking them (`backoff::wake_is_futile`). Whether the
        // writer that beat us stalls or not: a woken writer spins until it
        // gets in behind a writer that runs, and counts a loss only to one
        // that stalls, but a reader may find both spinner slots taken, and
        // its poll is wasted either way. Counted only behind a stalled
        // writer (0336bd4), the losses of a run of readers that mostly
        // lost to writers barging in and holding their guards over a yield
        // (64 tasks, half of them reads) came to 35% of them, too few in a
        // row to buy grants: 0.84x tokio's throughput there, 0.88x
        // counting every loss (docs/performance.md, "Half reads held across
        // `.await`").
        backoff::note_woken(key, Kind::Read, false);
        false
    }

    /// A woken writer (holding the WOKEN token) spins for its turn and takes
    /// the lock in the same CAS that gives the token up, the moment the lock
    /// is free: going through the queue lock first would lose that moment to
    /// any thread that can simply CAS. Only then does it take the queue lock
    /// to unlink itself. Returns `true` if it holds the lock.
    fn take_woken(&self, node: &Waiter, limit_ns: u32) -> bool {
        debug_assert_eq!(node.kind, Kind::Write);
        // It counts against the lock's spinner limit like any spinner; with
        // no slot free the caller retries once under the queue lock instead.
        if !SPIN || limit_ns == 0 || !self.queue().try_claim_spinner() {
            return false;
        }
        let result = backoff::spin(self as *const Self as usize, limit_ns, || {
            // Relaxed: the CAS below validates it.
            let s = self.state.load(Ordering::Relaxed);
            if !is_unlocked(s) {
                return Probe::Held(s);
            }
            // Acquire: pairs with the previous owner's release.
            match self.state.compare_exchange(s, (s | WRITER) & !WOKEN, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => Probe::Acquired,
                Err(_) => Probe::Lost,
            }
        });
        self.queue().release_spinner();
        let key = self as *const Self as usize;
        if result != Spin::Acquired {
            if result == Spin::GaveUp && backoff::owner_stalls(key, limit_ns) {
                // It lost to an owner that is not running: one that took the
                // lock back before we could run and then went to sleep with
                // it, a guard held across `.await`.
                backoff::note_woken(key, Kind::Write, false);
            }
            return false;
        }
        self.stats.event(Event::RetryWon);
        backoff::note_woken(key, Kind::Write, true);
        let mut q = self.lock_queue();
        let was_head = q.is_head(node);
        // SAFETY: our node is linked in `q`, under its lock.
        unsafe { self.space_handoffs(&q, node, &mut None) };
        // SAFETY: our node is linked in `q`.
        let stale = unsafe { q.remove_acquired(node) };
        // Relaxed: flag maintenance under the queue lock. HANDOFF, if set,
        // was set for us (or for a reader put in front of us, which will ask
        // again when it is due).
        if q.is_empty() {
            self.state.fetch_and(!(WAITERS | HANDOFF), Ordering::Relaxed);
        } else if was_head {
            self.state.fetch_and(!HANDOFF, Ordering::Relaxed);
        }
        drop(q);
        drop(stale);
        true
    }

    /// The head `node` took the lock itself (woken to claim its turn, see
    /// `claims_own_turn`): if it had waited past the timeout, that was a
    /// handoff, and the next head is not due before a handoff gap from now,
    /// as after a grant (see `dispatch`). Without this, a queue of overdue
    /// sleepers passes the lock from one to the next by handoffs alone.
    ///
    /// # Safety
    /// Under the queue lock `q`; `node` is linked in it.
    unsafe fn space_handoffs(&self, q: &QueueGuard<'_>, node: &Waiter, now: &mut Option<u64>) {
        if FAIR || !q.is_head(node) {
            return;
        }
        let now = *now.get_or_insert_with(clock::now);
        // SAFETY: under the queue lock; `node` and what follows it are linked.
        unsafe {
            if node.waited_at_least(now, config::handoff_timeout_ns())
                && let Some(next) = q.next(node)
            {
                next.defer_due(now, config::claim_gap_ns(), config::handoff_timeout_ns());
            }
        }
    }

    /// How long until `node` (the head) is due for a handoff.
    fn time_to_due(&self, _q: &QueueGuard<'_>, node: &Waiter, now: Option<u64>) -> Duration {
        let now = now.unwrap_or_else(clock::now);
        // SAFETY: under the queue lock (`_q`).
        let waited = unsafe { node.waited(now) };
        Duration::from_nanos(config::handoff_timeout_ns()).saturating_sub(waited)
    }

    /// An async owner polls its queued node: `Ready` once it holds the lock.
    /// While it still waits, the stored waker is replaced if the task now
    /// polls with another one, so a future moved between tasks is not lost.
    /// `spin_limit` says how long it may spin, asked only where it would
    /// (not for a grant, the hand-over of a lock held across `.await`).
    pub(crate) fn poll_queued(&self, node: &Waiter, waker: &Waker, spin_limit: impl Fn() -> u32) -> Poll<()> {
        match node.state() {
            GRANTED => {
                // SAFETY: our node, granted (Acquire load above).
                unsafe { self.take_grant(node) };
                return Poll::Ready(());
            }
            LICENSED => {
                return match self.enter_licensed(node, spin_limit(), || Task::Waker(waker.clone())) {
                    true => Poll::Ready(()),
                    false => Poll::Pending,
                };
            }
            RETRY if self.take_woken(node, spin_limit()) => return Poll::Ready(()),
            _ => {}
        }
        match self.retry_queued(node, Some(waker), false, || Task::Waker(waker.clone())) {
            Retry::Acquired => Poll::Ready(()),
            Retry::Licensed => match self.enter_licensed(node, spin_limit(), || Task::Waker(waker.clone())) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            },
            Retry::Waiting | Retry::Retained { .. } => Poll::Pending,
        }
    }

    /// The owner of a queued node gives up (its future was dropped). A node
    /// that was granted the lock meanwhile releases it, which passes it on;
    /// a head that leaves lets the new head proceed if it can, and a woken
    /// head gives its token back.
    pub(crate) fn cancel(&self, node: &Waiter) {
        self.leave(node, false);
    }

    /// The owner of a queued node stops waiting, as in [`cancel`](Self::cancel);
    /// with `keep_grant`, a lock granted to it meanwhile is kept instead of
    /// released (a timed blocking wait that ran out as the lock arrived).
    /// Returns `true` if the caller holds the lock.
    fn leave(&self, node: &Waiter, keep_grant: bool) -> bool {
        let mut wakes = WakeList::new();
        let mut q = self.lock_queue();
        match node.state() {
            GRANTED => {
                drop(q);
                // SAFETY: our node was granted the lock.
                unsafe { self.take_grant(node) };
                if keep_grant {
                    return true;
                }
                // SAFETY: we release it on the node's behalf through the
                // ordinary release path (untraced: nobody acquired it).
                unsafe {
                    match node.kind {
                        Kind::Read => self.read_release(),
                        Kind::Write => self.write_release(),
                    }
                }
            }
            state @ (WAITING | RETRY) => {
                self.stats.event(Event::Cancel);
                let was_head = q.is_head(node);
                // A woken writer holds the WOKEN token.
                let token = if state == RETRY { WOKEN } else { 0 };
                // SAFETY: our node is linked in `q`.
                let stale = unsafe { q.cancel(node) };
                // Relaxed: flag maintenance under the queue lock.
                let more = if q.is_empty() {
                    self.state.fetch_and(!(WAITERS | HANDOFF | token), Ordering::Relaxed);
                    false
                } else if was_head || token != 0 {
                    // HANDOFF was held for the head that left; the new head
                    // earns its own. A woken writer gives its token back even
                    // when it is not the head (a licensed reader that lost
                    // to a writer goes back in front of it): releases skipped
                    // waking anyone while it held the token. Then let the
                    // head in if it can go now (readers behind a cancelled
                    // writer) or wake it.
                    let leaving = if was_head { HANDOFF | token } else { token };
                    self.state.fetch_and(!leaving, Ordering::Relaxed);
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
            LICENSED => {
                // Unlinked and owning nothing, but woken in place of the
                // waiters behind: the release that licensed this reader did
                // not wake them, counting on it to take the lock and release
                // it later. Leaving without doing so, it passes the wakeup on.
                // SAFETY: our node, licensed; the licence is given up.
                unsafe { node.consume_grant() };
                self.stats.event(Event::Cancel);
                let s = self.state.load(Ordering::Relaxed);
                let more = needs_wakeup(s) && self.dispatch(&mut q, &mut wakes);
                drop(q);
                wakes.wake_all();
                if more {
                    self.release_slow();
                }
            }
            // IDLE: never queued.
            _ => {}
        }
        false
    }

    /// Spins, within the lock's spinner limit and with its per-address
    /// backoff, until a newcomer writer could take the lock, without taking
    /// it. For updates that share the word and only need the lock free for
    /// an instant ([`LockRef`](crate::LockRef)'s lockless count updates):
    /// they wait out a short section instead of taking the lock themselves.
    /// Returns `true` once the lock is free, `false` if the spin gave up or
    /// a handoff is pending.
    #[cold]
    pub(crate) fn spin_until_free(&self, limit_ns: u32) -> bool {
        if !SPIN || limit_ns == 0 || !self.queue().try_claim_spinner() {
            return false;
        }
        let result = backoff::spin(self as *const Self as usize, limit_ns, || {
            // Relaxed: only says when to try; the caller's own CAS on the
            // word validates.
            let s = self.state.load(Ordering::Relaxed);
            if has_handoff(s) || (FAIR && has_waiters(s)) {
                Probe::Handoff
            } else if may_barge(Kind::Write, s, self.state.max_readers(), FAIR) {
                Probe::Acquired
            } else {
                Probe::Held(s)
            }
        });
        self.queue().release_spinner();
        result == Spin::Acquired
    }

    /// Spins for the lock as a contended acquirer does before it queues.
    /// Returns `true` if it took the lock.
    pub(crate) fn spin_only(&self, kind: Kind, limit_ns: u32) -> bool {
        let since = Stamp::now();
        let acquired = SPIN && limit_ns > 0 && self.spin(kind, Spinner::Thread, || limit_ns);
        if acquired {
            self.acquired_after(kind, since);
        }
        acquired
    }

    /// The blocking front end's contended path: spin, queue, park until the
    /// lock is ours. Never returns with the node linked.
    pub(crate) fn lock_blocking_contended(&self, kind: Kind) {
        let acquired = self.lock_blocking_within(kind, None);
        debug_assert!(acquired, "an untimed wait returned without the lock");
    }

    /// The blocking front end's contended path with a deadline: as
    /// [`lock_blocking_contended`](Self::lock_blocking_contended), but a
    /// wait that reaches `deadline` leaves the queue (passing on whatever
    /// its node held) and returns `false`. A lock granted just as time ran
    /// out is kept.
    #[cfg(all(feature = "lock_api", not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
    pub(crate) fn lock_blocking_until(&self, kind: Kind, deadline: Instant) -> bool {
        self.lock_blocking_within(kind, Some(deadline))
    }

    /// Spin, queue, park until the lock is ours (`true`) or `deadline`
    /// passes (`false`, the node unlinked). Never returns with the node
    /// linked.
    fn lock_blocking_within(&self, kind: Kind, deadline: Option<Instant>) -> bool {
        let since = Stamp::now();
        let acquired = self.lock_blocking_wait(kind, deadline);
        if acquired {
            self.acquired_after(kind, since);
        }
        acquired
    }

    /// How long a blocking newcomer may spin on this lock: not at all while
    /// a crowd of threads waits in its queue (see [`config::crowd`]).
    #[inline]
    fn blocking_spin_limit(&self) -> u32 {
        let crowded = self.state.census().is_some_and(|census| census.threads() >= config::crowd());
        if crowded { 0 } else { config::SPIN_LIMIT_BLOCKING_NS }
    }

    fn lock_blocking_wait(&self, kind: Kind, deadline: Option<Instant>) -> bool {
        let node = pin!(Waiter::new(kind, self.key()));
        let node = &*node;
        let thread = || Task::Thread(crate::loom::current_thread());
        if self.lock_contended(node, Spinner::Thread, || self.blocking_spin_limit(), thread) {
            return true;
        }
        if config::NO_THREADS {
            // This thread is the only one, and whoever holds the lock (a
            // guard further up this stack, or a task of an executor this
            // thread runs) cannot release it while we wait: leave the queue
            // and say so, as tokio's `blocking_lock` panics there too,
            // rather than wait forever. A timed wait gives up at once.
            if self.leave(node, true) {
                return true;
            }
            assert!(
                deadline.is_some(),
                "hybrid-sync: a blocking wait for a held lock on a target without threads \
                 (WebAssembly without `atomics`) would never end: nothing else can release it"
            );
            return false;
        }
        let mut nap = config::RECHECK_MIN;
        loop {
            // How long we may still wait, if there is a deadline.
            let left = match deadline {
                None => None,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return self.leave(node, true);
                    }
                    Some(deadline - now)
                }
            };
            match node.state() {
                WAITING => {
                    match left {
                        None => crate::loom::park(),
                        Some(left) => crate::loom::park_timeout(left),
                    }
                    self.stats.event(Event::Unparked);
                }
                GRANTED => {
                    // SAFETY: our node, granted.
                    unsafe { self.take_grant(node) };
                    return true;
                }
                LICENSED => {
                    if self.enter_licensed(node, config::SPIN_LIMIT_BLOCKING_NS, thread) {
                        return true;
                    }
                }
                RETRY if self.take_woken(node, config::SPIN_LIMIT_BLOCKING_NS) => return true,
                RETRY => match self.retry_queued(node, None, config::RETAIN_TOKEN, thread) {
                    Retry::Acquired => return true,
                    Retry::Waiting => {
                        nap = config::RECHECK_MIN;
                        // Awake and owed a handoff (we just claimed it): the
                        // holder's release grants us the lock within one
                        // critical section, so wait for it awake rather
                        // than make the lock wait for our wakeup.
                        if has_handoff(self.state.load(Ordering::Relaxed)) {
                            self.await_grant(node);
                        }
                    }
                    Retry::Licensed => nap = config::RECHECK_MIN,
                    Retry::Retained { due_in } => {
                        // About to be due: stay awake for it (a timed sleep
                        // wakes up to a timer slack late, 50 us by default),
                        // giving the CPU to anyone runnable meanwhile.
                        if due_in < config::RECHECK_MAX {
                            crate::loom::yield_now();
                            continue;
                        }
                        // Sleep through the barging, looking again at growing
                        // intervals; never past the point where we are due
                        // (or out of time).
                        crate::loom::park_timeout(nap.min(due_in).min(left.unwrap_or(Duration::MAX)));
                        self.stats.event(Event::TimedRecheck);
                        nap = (nap * 2).min(config::RECHECK_MAX);
                    }
                },
                other => unreachable!("blocked node in state {other}"),
            }
        }
    }

    /// Polls a queued node's state for up to one blocking spin budget, so a
    /// grant that comes soon finds its thread awake. The caller then looks
    /// at the state again (and parks if nothing came).
    fn await_grant(&self, node: &Waiter) {
        #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
        {
            let start = clock::now();
            while node.state() == WAITING
                && clock::now().saturating_sub(start) < u64::from(config::SPIN_LIMIT_BLOCKING_NS)
            {
                backoff::relax_ns(config::NODE_POLL_NS);
            }
        }
        #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
        let _ = node;
    }

    /// Releases the write lock and hands it straight to the head of the
    /// queue, if anyone waits (`lock_api`'s fair unlock): `HANDOFF` keeps
    /// newcomers and spinners out until the head has it.
    ///
    /// # Safety
    /// The caller holds the write lock and gives it up.
    #[cfg(feature = "lock_api")]
    pub(crate) unsafe fn write_unlock_fair(&self) {
        let mut s = self.state.load(Ordering::Relaxed);
        // Relaxed: the bit guards no data; the release below publishes.
        while has_waiters(s) && !has_handoff(s) && !FAIR {
            match self.state.compare_exchange_weak(s, s | HANDOFF, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(actual) => s = actual,
            }
        }
        // SAFETY: forwarded.
        unsafe { self.write_unlock() }
    }

    /// Whether anyone holds the lock (a racy snapshot).
    #[cfg(feature = "lock_api")]
    pub(crate) fn is_locked(&self) -> bool {
        !is_unlocked(self.state.load(Ordering::Relaxed))
    }

    /// Whether a writer holds the lock (a racy snapshot).
    #[cfg(feature = "lock_api")]
    pub(crate) fn is_locked_exclusive(&self) -> bool {
        is_write_locked(self.state.load(Ordering::Relaxed))
    }

    // ----------------------------------------------------------------------
    // Diagnostics.
    // ----------------------------------------------------------------------

    /// The lock word, for tests and hang reports.
    pub(crate) fn word(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    /// A one-line description of the lock word and queue word, for hang
    /// reports. Racy on purpose: it takes no lock, so a watchdog can call it
    /// on a lock that is stuck.
    pub(crate) fn describe(&self) -> String {
        let mut out =
            format!("state {:?}, queue {}", Decoded(self.state.load(Ordering::Relaxed)), self.queue().describe());
        // The nodes, if the queue lock can be had without waiting.
        if let Some(q) = self.queue().try_lock(self.key(), self.state.census()) {
            out += &q.dump();
        }
        out
    }
}

/// Whether a spinner of `kind` cannot win in state `s`: the queue owns the
/// next turn (a pending handoff, or anyone queued under `fair`), or a
/// reader faces queued waiters, which it never passes.
#[inline]
fn spin_is_futile(kind: Kind, s: u32) -> bool {
    (has_handoff(s) && !config::spin_through_handoff())
        || (FAIR && has_waiters(s))
        || (kind == Kind::Read && has_waiters(s))
}

/// Whether this barging acquisition should first check the queue head for
/// an overdue handoff: one in `config::BARGE_AUDIT_EVERY`, counted per thread.
#[inline]
fn barging_audit_due() -> bool {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    {
        std::thread_local! {
            static BARGES: core::cell::Cell<u32> = const { core::cell::Cell::new(0) };
        }
        BARGES
            .try_with(|n| {
                let v = n.get().wrapping_add(1);
                n.set(v);
                v % config::BARGE_AUDIT_EVERY == 0
            })
            .unwrap_or(false)
    }
    // The model audits on every barging acquisition, so that the audit's
    // interplay with handoff and the token is explored.
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    {
        true
    }
}

/// The outcome of [`RawRwLock::retry_queued`].
pub(crate) enum Retry {
    /// The caller holds the lock; its node is unlinked.
    Acquired,
    /// The node waits again, asleep until a release wakes or grants it.
    Waiting,
    /// The node is a reader that a release has just licensed (unlinked):
    /// its owner takes the read lock through `enter_licensed`.
    Licensed,
    /// The node keeps the `WOKEN` token and its place; its thread should look
    /// again within `due_in`, when it may demand a handoff.
    Retained { due_in: Duration },
}

impl<L: Layout> core::fmt::Debug for RawRwLock<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawRwLock")
            .field("state", &Decoded(self.word()))
            .field("max_readers", &self.state.max_readers())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(any(hybrid_sync_loom, hybrid_sync_shuttle, miri))))]
mod tests {
    use super::*;
    use crate::acquire::future::{Acquire, spin_limit};
    use std::future::Future;
    use std::sync::Arc;
    use std::task::Context;

    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(20), "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The census follows real blocked threads: one that queues counts
    /// until it has the lock, one whose deadline passes until it gives up;
    /// a queued task does not count. Tasks may spin exactly while it is 0.
    #[test]
    fn threads_count_in_the_census_while_they_wait_and_tasks_do_not() {
        let lock = Arc::new(RawRwLock::<Inline>::new(config::MAX_READERS));
        let threads = || lock.state.census().expect("an inline lock keeps a census").threads();
        let task_spin = if SPIN { config::SPIN_LIMIT_ASYNC_NS } else { 0 };
        assert_eq!(spin_limit(&lock), task_spin);
        assert!(lock.try_acquire(Kind::Write));

        let mut task = Box::pin(Acquire::after_failed_try(&lock, Kind::Write, || ()));
        assert!(task.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending());
        assert!(lock.describe().contains("Write WAITING"), "the task did not queue: {}", lock.describe());
        assert_eq!(threads(), 0, "a task's node was counted");
        assert!(!lock.threads_queued());

        let first = std::thread::spawn({
            let lock = lock.clone();
            move || {
                lock.lock_blocking_contended(Kind::Write);
                // SAFETY: taken just above.
                unsafe { lock.unlock(Kind::Write) };
            }
        });
        wait_for("the first thread queues", || threads() == 1);
        assert!(lock.threads_queued());
        assert_eq!(spin_limit(&lock), 0, "a task may spin while a thread waits");

        let second = std::thread::spawn({
            let lock = lock.clone();
            move || lock.lock_blocking_within(Kind::Write, Some(Instant::now() + Duration::from_millis(300)))
        });
        wait_for("the second thread queues", || threads() == 2);
        assert!(!second.join().unwrap(), "the second thread got a lock that was held throughout");
        assert_eq!(threads(), 1, "a thread that timed out is still counted");

        drop(task);
        assert_eq!(threads(), 1, "cancelling a task's wait changed the count");
        // SAFETY: taken at the start.
        unsafe { lock.unlock(Kind::Write) };
        first.join().unwrap();
        assert_eq!(threads(), 0);
        assert!(!lock.threads_queued());
        assert_eq!(spin_limit(&lock), task_spin, "tasks may not spin after the threads left");
    }

    /// Blocking newcomers spin until a crowd of threads (`config::crowd`,
    /// three per CPU) waits in the queue, and again once it has gone.
    #[test]
    fn a_crowd_of_queued_threads_stops_blocking_spinners() {
        let lock = Arc::new(RawRwLock::<Inline>::new(config::MAX_READERS));
        let threads = || lock.state.census().expect("an inline lock keeps a census").threads();
        let crowd = config::crowd();
        let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
        if cpus > 0 && cpus * config::CROWD_PER_CPU as usize <= crate::layout::CENSUS_MAX as usize {
            assert_eq!(crowd as usize, cpus * config::CROWD_PER_CPU as usize);
        } else {
            assert_eq!(crowd, u32::MAX, "a crowd the census cannot count");
        }
        // Queue up to a crowd (or a few threads where the rule is off).
        let queue = if crowd == u32::MAX { 3 } else { crowd };
        assert!(lock.try_acquire(Kind::Write));
        let mut waiters = Vec::new();
        for n in 1..=queue {
            waiters.push(std::thread::spawn({
                let lock = lock.clone();
                move || {
                    lock.lock_blocking_contended(Kind::Write);
                    // SAFETY: taken just above.
                    unsafe { lock.unlock(Kind::Write) };
                }
            }));
            wait_for("a thread queues", || threads() == n);
            let limit = lock.blocking_spin_limit();
            if n < crowd {
                assert_eq!(
                    limit,
                    config::SPIN_LIMIT_BLOCKING_NS,
                    "{n} queued threads (a crowd is {crowd}) stopped spinning"
                );
            } else {
                assert_eq!(limit, 0, "a newcomer may spin past a crowd of {n} queued threads");
            }
        }
        // SAFETY: taken above.
        unsafe { lock.unlock(Kind::Write) };
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(threads(), 0);
        assert_eq!(
            lock.blocking_spin_limit(),
            config::SPIN_LIMIT_BLOCKING_NS,
            "spinning stayed off after the crowd left"
        );
    }
}
