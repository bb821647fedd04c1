//! The async front end: [`Lock`], the future of every async acquisition,
//! and [`Acquire`], the queue node's future it falls back to.
//!
//! [`Lock`] keeps the uncontended path small enough for the caller's
//! compiler to inline wherever it is awaited: one atomic operation (a
//! writer's compare-and-swap, a reader's add) and tokio's coop charge. Everything else (spinning, queueing, the tracing
//! spans of a wait) sits behind one out-of-line call, and so does a drop
//! before completion. An `async fn` with the fast path and the queued wait
//! side by side compiled to one poll function that LLVM inlined at some
//! call sites and not at others: in the showdown binary `Mutex::lock` +
//! release took a median 16.7 ns against 9.7 ns for `RwLock::write`, the
//! same code, whose poll happened to be inlined (8 interleaved runs,
//! 2026-12-02); with `Lock`, 10.7 and 10.1 ns in the same runs.
//!
//! Cancel safety is structural: whatever state a future is in when it is
//! dropped, its `Drop` puts things right. A queued node is unlinked (and if
//! it was the head, the new head is let in or woken); a node that was
//! granted the lock, or (under `fair`) a lock taken while the coop budget
//! said "yield", is released on the future's behalf, which passes it on.
//!
//! # tokio's coop budget
//!
//! Both futures charge the task's budget once per acquisition, as tokio's
//! locks do, and only once the lock word is taken: inside the critical
//! section, although it is a look-up of tokio's thread-local context that
//! costs about as much as the uncontended lock and release together (7-13 ns
//! on the development VMs). Charging first, as tokio did before tokio#8371,
//! and keeping only `made_progress` (a store to a local) after the CAS was
//! measured on 2026-12-01 in interleaved rounds against parking_lot: async
//! write-heavy fell from 0.78x to 0.68x (medians of 6 rounds; ranges
//! 0.68-0.80x and 0.64-0.71x) and seed 004's 100 tasks from 0.80x to 0.68x
//! (5 rounds); read-heavy (0.84x to 0.89x) and mixed moved within their
//! spread. The likely reason: a lock that 64 tasks on 2 workers contend is
//! always held, an owner's worker runs 16 sections back to back, and it
//! leaves the lock free between each release and its next CAS. A charge in
//! that window widens the gap in which a spinner on the other worker takes
//! the lock, and each such change of worker moves the lock's cache line and
//! the data's. (On the Intel VM of an earlier session the same change gave
//! write-heavy +4%.)
//!
//! What a spent budget does to a lock already taken differs by build.
//! tokio's futures keep it and yield holding it (tokio#8371: a budget check
//! ahead of the acquisition let a later task take the lock first, against
//! the FIFO order tokio documents), and so does this crate under `fair`,
//! and by default a waiter whose turn came through the queue (a grant, or
//! a wakeup it won), whose wait the handoff bound covers. By default a
//! lock taken *without* queueing (the fast path, a spin or a barge) is
//! given back before the future yields, and taken anew when the task runs
//! next: a default lock promises no order among tasks that never queued,
//! and a lock held by a task that sits in its run queue stops everyone. A
//! task in a tight loop of acquisitions runs out of budget once per 128 of
//! them; held through that yield, the lock made every other contender
//! queue behind a task that was not running, once per budget. In a loop of
//! 16 tasks on 2 workers with trivial sections and 10% writes (the
//! criterion bench's `async-read-heavy`), giving it back took 124-155 ns
//! per operation to about 30 (tokio's: 160; parking_lot's, blocking its
//! worker: 85-92; docs/performance.md, "A spent coop budget").

use core::future::Future;
use core::mem::ManuallyDrop;
use core::pin::Pin;
use core::ptr;
use core::task::{Context, Poll, ready};
use std::sync::Arc;

use crate::config::{FAIR, SPIN, SPIN_LIMIT_ASYNC_NS};
use crate::layout::{Inline, Layout};
use crate::raw::{RawRwLock, Spinner};
use crate::state::Kind;
use crate::stats::Stamp;
use crate::trace::AsyncOp;
use crate::wait_queue::{Task, Waiter};

/// Acquires `raw` in mode `kind` for an async caller; once the lock is held
/// it resolves to what `make` makes of it (the method's guard), which then
/// owns the lock. `make` runs once, and may take what it holds along (the
/// `Arc` of an owned acquisition, see [`owned`]).
///
/// `poll` is inlined at every `.await` on purpose: the uncontended path is a
/// compare-and-swap and tokio's coop charge, smaller than the call that would
/// reach it, and everything else is one out-of-line call.
///
/// The future is the queue node's future's size and no more: 96 bytes, as
/// tokio's `RwLock::read` and `write` (its `Mutex::lock` is 120; the sizes
/// are checked in `tests/locks.rs`). Every field lives in its step, and
/// the contended step keeps `make` inside the [`Acquire`] (in the padding
/// that the node's 32-byte alignment leaves there), which already holds the
/// lock's address. With `raw` and `make` beside the step, as until
/// 2026-12-04, it was 128 bytes: the same 96 and 16 more, rounded up to the
/// node's alignment.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub(crate) struct Lock<'a, F, L: Layout = Inline> {
    step: Step<'a, F, L>,
}

// The queue node is the future's size whichever step it is in, as in any
// lock future (tokio's holds its node inline too); boxing it would allocate.
#[allow(clippy::large_enum_variant)]
enum Step<'a, F, L: Layout> {
    /// Not polled yet (`held` false): what to take, and the public method
    /// (for the tracing spans of a wait). Or (`held`, under `fair` only) the
    /// fast path took the lock, but the coop budget made us yield before
    /// returning it: ours to release if we are dropped.
    Fast { raw: &'a RawRwLock<L>, kind: Kind, held: bool, source: &'static str, make: F },
    /// The fast path failed: the queue node's future, which is pinned in
    /// place from its first poll on (the `Lock` is, and this is never
    /// moved out of it). Dropped by hand, out of line (`Lock::drop_slow`),
    /// so that the drop glue every acquisition runs stays a test of `step`.
    Contended(ManuallyDrop<AsyncOp<Acquire<'a, F, L>>>),
    /// Returned `Ready`: the caller owns the lock now.
    Done,
}

impl<'a, F: FnOnce() -> G, G, L: Layout> Lock<'a, F, L> {
    /// # Safety
    ///
    /// `make` may assume that `raw` is held in mode `kind` on its behalf,
    /// and must hand the lock to what it returns (which releases it).
    #[inline]
    pub(crate) unsafe fn new(raw: &'a RawRwLock<L>, kind: Kind, source: &'static str, make: F) -> Self {
        Lock { step: Step::Fast { raw, kind, held: false, source, make } }
    }

    /// Everything but the uncontended path: out of line, so that the
    /// caller's poll stays small.
    #[inline(never)]
    fn poll_contended(&mut self, cx: &mut Context<'_>) -> Poll<G> {
        if let Step::Fast { .. } = self.step {
            // The fast path has just failed: go straight to the contended
            // path (a second CAS on a held word only pulls the owner's line).
            // Nothing is pinned yet: `make` may move into the node's future.
            let Step::Fast { raw, kind, source, make, .. } = core::mem::replace(&mut self.step, Step::Done) else {
                unreachable!()
            };
            let acquire = Acquire::after_failed_try(raw, kind, make);
            self.step = Step::Contended(ManuallyDrop::new(raw.trace().async_op(acquire, source)));
        }
        let Step::Contended(acquire) = &mut self.step else {
            panic!("lock future polled after completion");
        };
        // SAFETY: `acquire` lives inside the pinned `Lock` and is never moved
        // out: it is dropped in place below (after it completed) or in
        // `drop_slow`.
        let guard = ready!(unsafe { Pin::new_unchecked(&mut **acquire) }.poll(cx));
        // `Acquire` charged the coop budget itself once the lock was ours,
        // and made the guard.
        // SAFETY: dropped in place, once: `step` is overwritten next.
        unsafe { ManuallyDrop::drop(acquire) };
        self.step = Step::Done;
        Poll::Ready(guard)
    }
}

impl<F, L: Layout> Lock<'_, F, L> {
    /// A drop before the future completed: give back what it holds.
    #[inline(never)]
    fn drop_slow(&mut self) {
        match &mut self.step {
            // SAFETY: the fast path took the lock for this future and it was
            // never handed to a guard.
            Step::Fast { raw, kind, held: true, .. } => unsafe { raw.unlock(*kind) },
            // SAFETY: dropped in place (it is pinned), once: the `Lock` is
            // going away. Its own `Drop` unlinks or passes on its node.
            Step::Contended(acquire) => unsafe { ManuallyDrop::drop(acquire) },
            Step::Fast { held: false, .. } | Step::Done => {}
        }
    }
}

impl<F: FnOnce() -> G, G, L: Layout> Future for Lock<'_, F, L> {
    type Output = G;

    #[inline(always)]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G> {
        // SAFETY: nothing is moved out of `this`; `Step::Contended` is pinned
        // structurally (see `poll_contended`).
        let this = unsafe { self.get_unchecked_mut() };
        if let Step::Fast { raw, kind, held, make, .. } = &mut this.step
            && (*held || raw.try_acquire(*kind))
        {
            // As tokio's locks do, charge the task's coop budget only once
            // the lock is ours (see the module docs). A spent budget makes us
            // yield: under `fair` holding the lock, as tokio does (a drop
            // while we yield releases it); by default without it.
            if charge_coop(cx).is_pending() {
                if FAIR {
                    *held = true;
                } else {
                    // SAFETY: the fast path has just taken it (and counted
                    // it) for this future, which never handed it to a guard.
                    unsafe { raw.give_back(*kind, true) };
                }
                return Poll::Pending;
            }
            // The lock is ours: `make` runs once, as `step` is `Done` next.
            // SAFETY: `make` is moved out once, and `step` is overwritten
            // without dropping it again (its other fields own nothing).
            let make = unsafe { ptr::read(make) };
            // SAFETY: as above; `Fast` holds nothing pinned.
            unsafe { ptr::write(&mut this.step, Step::Done) };
            return Poll::Ready(make());
        }
        this.poll_contended(cx)
    }
}

impl<F, L: Layout> Drop for Lock<'_, F, L> {
    #[inline]
    fn drop(&mut self) {
        if !matches!(self.step, Step::Done | Step::Fast { held: false, .. }) {
            self.drop_slow();
        }
    }
}

/// Charges one unit of the task's coop budget, as tokio's locks do:
/// `Pending` (with the task's waker registered) when the budget is spent.
///
/// The charge stands: the `RestoreOnPending` that `poll_proceed` returns
/// is told so (`made_progress`) and then forgotten rather than dropped.
/// Dropped, it would do nothing more (it restores only a budget not marked
/// as progress), but its `Drop` is a call into tokio that is not inlined
/// across crates (`poll_proceed` itself still makes one such call, on the
/// default it builds for its `unwrap_or`). It owns nothing, so forgetting
/// it leaks nothing. Forgetting it took the showdown's uncontended read
/// from 0.411x to 0.387x tokio's time and the Mutex lock from 0.377x to
/// 0.360x (medians of 10 interleaved rounds, 2026-12-03).
#[inline(always)]
fn charge_coop(cx: &mut Context<'_>) -> Poll<()> {
    let coop = ready!(tokio::task::coop::poll_proceed(cx));
    coop.made_progress();
    core::mem::forget(coop);
    Poll::Ready(())
}

#[derive(PartialEq, Eq)]
enum Phase {
    /// Not polled yet, and the caller's fast path has just failed: the
    /// first poll goes straight to the contended path.
    Contend,
    /// The node is in the queue.
    Queued,
    /// The lock is ours, but the coop budget made us yield before returning.
    Held,
    /// Returned `Ready`: the caller owns the lock now.
    Done,
}

/// Acquires `lock` in mode `kind`; once the lock is held it resolves to
/// what `make` makes of it, as [`Lock`] does.
pub(crate) struct Acquire<'a, F, L: Layout = Inline> {
    lock: &'a RawRwLock<L>,
    node: Waiter,
    phase: Phase,
    /// When the contended path started (`stats` feature; zero-sized without).
    since: Stamp,
    /// [`Lock`]'s guard maker, called once, with the lock held for it:
    /// taken out when `phase` becomes `Done`, dropped by `Drop` before.
    make: ManuallyDrop<F>,
}

// SAFETY: the future holds a shared reference to a `RawRwLock` (Sync) and a
// `Waiter`, whose shared parts are only touched under the queue lock or by
// the future itself; moving the future between threads or polling it from
// one while another holds a `&` to it is therefore sound, as for tokio's
// `Acquire`.
unsafe impl<F: Send, L: Layout> Send for Acquire<'_, F, L> {}
// SAFETY: `&Acquire` exposes nothing: every method takes `Pin<&mut Self>`.
unsafe impl<F: Sync, L: Layout> Sync for Acquire<'_, F, L> {}

impl<'a, F, L: Layout> Acquire<'a, F, L> {
    /// For a caller whose own [`try_acquire`](RawRwLock::try_acquire) has
    /// just failed: the first poll does not try the word again. A second
    /// compare-and-swap on a held lock only takes its cache line from the
    /// owner, who is inside its critical section.
    #[inline]
    pub(crate) fn after_failed_try(lock: &'a RawRwLock<L>, kind: Kind, make: F) -> Self {
        let make = ManuallyDrop::new(make);
        Acquire { lock, node: Waiter::new(kind, lock.key()), phase: Phase::Contend, since: Stamp::unset(), make }
    }
}

impl<F: FnOnce() -> G, G, L: Layout> Future for Acquire<'_, F, L> {
    type Output = G;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<G> {
        // SAFETY: nothing is moved out of `this`; the node stays where it is
        // for as long as it can be linked (until our Drop unlinks it).
        let this = unsafe { self.get_unchecked_mut() };
        match this.phase {
            Phase::Contend => {
                // A wait that starts over after a lock given back to yield
                // (below) keeps its first start.
                this.since = this.since.or_now();
                let waker = || Task::Waker(cx.waker().clone());
                if !this.lock.lock_contended(&this.node, Spinner::Task, || spin_limit(this.lock), waker) {
                    this.phase = Phase::Queued;
                    return Poll::Pending;
                }
                if !FAIR {
                    // Taken by a spin or a barge, without ever queueing: as on
                    // the fast path, a spent budget gives the lock back, and
                    // the next poll contends afresh (the node is still idle).
                    if charge_coop(cx).is_pending() {
                        // SAFETY: taken just now for this future, never
                        // handed to a guard; not counted yet.
                        unsafe { this.lock.give_back(this.node.kind, false) };
                        return Poll::Pending;
                    }
                    this.lock.acquired_after(this.node.kind, this.since);
                    this.phase = Phase::Done;
                    // SAFETY: taken once: `phase` is `Done` from now on, and
                    // `Drop` drops `make` only before.
                    return Poll::Ready(unsafe { ManuallyDrop::take(&mut this.make) }());
                }
                this.lock.acquired_after(this.node.kind, this.since);
            }
            Phase::Queued => {
                ready!(this.lock.poll_queued(&this.node, cx.waker(), || spin_limit(this.lock)));
                this.lock.acquired_after(this.node.kind, this.since);
            }
            Phase::Held => {}
            Phase::Done => panic!("lock future polled after completion"),
        }
        // The lock is ours. As tokio's locks do, charge the task's coop budget
        // only now, so a spent budget keeps our place: we yield holding the
        // lock, and a drop from here releases it (tokio#8371). By default only
        // a waiter that queued comes here: its turn came through the queue
        // (a grant, or a wakeup it won), and the handoff bound counts on it.
        this.phase = Phase::Held;
        ready!(charge_coop(cx));
        this.phase = Phase::Done;
        // SAFETY: taken once: `phase` is `Done` from now on, and `Drop`
        // drops `make` only before.
        Poll::Ready(unsafe { ManuallyDrop::take(&mut this.make) }())
    }
}

impl<F, L: Layout> Drop for Acquire<'_, F, L> {
    fn drop(&mut self) {
        match self.phase {
            Phase::Queued => self.lock.cancel(&self.node),
            // SAFETY: the lock was taken for this future and never handed
            // to a guard.
            Phase::Held => unsafe { self.lock.unlock(self.node.kind) },
            Phase::Contend | Phase::Done => {}
        }
        // After the lock is let go: `make` may own the lock's allocation
        // (an `Arc`, see [`owned`]).
        if self.phase != Phase::Done {
            // SAFETY: not taken yet (`poll` takes it as the phase becomes
            // `Done`), and dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.make) };
        }
    }
}

/// The future of an owned acquisition (`read_owned`, `write_owned`,
/// `lock_owned`): `make` takes the `Arc` along into the guard, and the
/// lock's address is a reference into the allocation it keeps alive.
///
/// In the `async fn` these methods were, the `Arc` sat beside the [`Lock`]
/// and took it from 96 bytes to 128 (the node's alignment); inside `make` it
/// fills the node's padding instead, as tokio's own owned futures do.
///
/// # Safety
///
/// As [`Lock::new`]: `make` may assume that `raw(&arc)` is held in mode
/// `kind` on its behalf, and must hand the lock to what it returns.
#[inline]
pub(crate) unsafe fn owned<X: ?Sized, G>(
    arc: Arc<X>,
    raw: fn(&X) -> &RawRwLock,
    kind: Kind,
    source: &'static str,
    make: unsafe fn(Arc<X>) -> G,
) -> Lock<'static, impl FnOnce() -> G> {
    // SAFETY: the lock lives in the `Arc`'s allocation, which does not move
    // and which `make` keeps alive until it hands the `Arc` to the guard.
    // The future uses this reference only before that: its steps after
    // `make` ran (`Done`) hold none, and its drops let the lock go before
    // they drop `make` (`Acquire`'s drop, `Lock`'s drop glue after
    // `drop_slow`).
    let raw: &'static RawRwLock = unsafe { &*ptr::from_ref(raw(&arc)) };
    // SAFETY: `make` gets the lock with the `Arc` (the caller's promise).
    let make = move || unsafe { make(arc) };
    // SAFETY: the caller's promise.
    unsafe { Lock::new(raw, kind, source, make) }
}

/// How long an async acquirer may spin on `lock`.
///
/// On a current-thread runtime the owner can only run after this task
/// returns `Pending`, so spinning can never succeed: don't. Where there is
/// a runtime, `Handle::try_current` clones its handle (two atomic operations
/// on a count that all of the runtime's threads share), so a runtime's
/// flavour is looked up once per thread every 256 contended acquisitions.
/// Outside any runtime (`futures::executor::block_on`, another executor)
/// the look-up clones nothing and is made each time, and nothing is kept:
/// a thread that contends there and then on a current-thread runtime (a
/// test, a `main` that builds one) must not bring "spinning may pay" along.
/// A thread that moves from a multi-thread runtime's context to a
/// current-thread runtime may still spin on the rest of its 256, at most
/// one spin limit each.
///
/// Nor while blocking threads wait in the lock's queue (its census, see
/// `layout::Census`). A spinning task holds its worker thread on a CPU, and
/// those threads are the lock's next owners: a woken one needs a CPU to take
/// its turn, and the spinning worker holds one of them. A task that queues
/// instead costs its worker nothing: the worker polls its other tasks, or
/// parks and leaves the CPU to the threads. Measured on the showdown's mixed
/// workload (4 blocking threads and 32 tasks on 2 workers, one `Mutex`, 2
/// vCPUs; `docs/performance.md`): 0.85-0.90x parking_lot's throughput at
/// 1.0x its CPU per operation before, about 1.0x at 0.6x with this rule, and
/// the threads' share of the operations went from 0.45x parking_lot's
/// threads' to 0.86x. Where only tasks contend (async write-heavy, 64 tasks
/// on 2 workers, where spinning is what keeps both workers busy) nothing
/// changes.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
pub(crate) fn spin_limit<L: Layout>(lock: &RawRwLock<L>) -> u32 {
    use std::cell::Cell;
    std::thread_local! {
        /// (acquisitions left before the next look-up, on a current-thread
        /// runtime), of the runtime seen last on this thread
        static FLAVOR: Cell<(u8, bool)> = const { Cell::new((0, false)) };
    }
    if !SPIN || lock.threads_queued() {
        return 0;
    }
    let current_thread = FLAVOR.with(|cell| {
        let (left, current_thread) = cell.get();
        if left > 0 {
            cell.set((left - 1, current_thread));
            return current_thread;
        }
        // No runtime: nothing to keep, and the next call asks again.
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return false };
        let current_thread = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread;
        cell.set((u8::MAX, current_thread));
        current_thread
    });
    if current_thread { 0 } else { SPIN_LIMIT_ASYNC_NS }
}

#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
fn spin_limit<L: Layout>(lock: &RawRwLock<L>) -> u32 {
    if SPIN && !lock.threads_queued() { SPIN_LIMIT_ASYNC_NS } else { 0 }
}
