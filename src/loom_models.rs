//! loom models of the state machine: every interleaving of a few threads and
//! futures (up to the preemption bound, `LOOM_MAX_PREEMPTIONS`, 2 in CI).
//!
//! Run with
//! `RUSTFLAGS="--cfg hybrid_sync_loom" LOOM_MAX_PREEMPTIONS=2 cargo test --lib --release loom_models`.
//!
//! Each model checks, besides its own assertion, that the lock word is back
//! to zero at the end: no reader count, no writer, and no `WAITERS` or
//! `HANDOFF` left behind. Data accesses go through loom's `UnsafeCell`, so a
//! reader overlapping a writer, or a writer another writer, fails the model.

use std::future::Future;
use std::pin::pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::AtomicUsize;
use loom::sync::atomic::Ordering::SeqCst;
use loom::thread;

use crate::acquire::{blocking, future::Lock};
use crate::config::testing::set_handoff_timeout;
use crate::raw::RawRwLock;
use crate::state::Kind::{Read, Write};

/// The handoff timeout is process-wide; models that depend on it run one at
/// a time, holding this.
static SERIAL: Mutex<()> = Mutex::new(());

/// The future every async acquisition awaits (`RwLock::read`, `Mutex::lock`
/// and the rest), making no guard: the model owns the lock once it completes.
fn acquire(lock: &RawRwLock, kind: crate::state::Kind) -> Lock<'_, fn()> {
    // SAFETY: `make` does nothing; the model releases the lock itself.
    unsafe { Lock::new(lock, kind, "model", || ()) }
}

/// An [`acquire`] future, boxed and pinned so that a model can poll it and
/// drop it when it likes.
type Acquiring<'a> = std::pin::Pin<Box<Lock<'a, fn()>>>;

/// Pins the handoff timeout for one model: `Some(ZERO)` makes every queued
/// waiter due at once (every release hands off), `None`-like "never" makes
/// every release wake the head to compete (barging). Both are deterministic,
/// as loom requires; a real-time timeout would not be.
fn handoff(always: bool) -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    set_handoff_timeout(Some(if always { Duration::ZERO } else { Duration::from_secs(3600) }));
    guard
}

struct Shared {
    lock: RawRwLock,
    data: UnsafeCell<usize>,
}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Shared { lock: RawRwLock::new(crate::config::MAX_READERS), data: UnsafeCell::new(0) })
    }

    /// Blocking write: lock, increment, unlock.
    fn write_add(&self) {
        blocking::lock(&self.lock, Write);
        // SAFETY: the write lock taken just above excludes every other access (loom's cell checks that it does).
        self.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: the write lock taken just above, given up.
        unsafe { self.lock.write_unlock() };
    }

    /// Blocking read: lock, read, unlock.
    fn read(&self) -> usize {
        blocking::lock(&self.lock, Read);
        // SAFETY: the read lock taken just above excludes writers (loom's cell checks that it does).
        let v = self.data.with(|d| unsafe { *d });
        // SAFETY: the read lock taken just above, given up.
        unsafe { self.lock.read_unlock() };
        v
    }

    fn assert_idle(&self) {
        assert_eq!(self.lock.word(), 0, "lock left as {:?}", crate::state::Decoded(self.lock.word()));
    }

    /// A thread that takes a read lock, counts itself in `inside`, waits
    /// there until `together` readers have come in, and leaves with what it
    /// read. A model that needs readers inside at once finds out this way
    /// that part of a run was left queued: that reader never comes, and the
    /// model's wait never ends.
    fn reader_counted_in(this: &Arc<Self>, inside: &Arc<AtomicUsize>, together: usize) -> thread::JoinHandle<usize> {
        let (s, inside) = (this.clone(), inside.clone());
        thread::spawn(move || {
            blocking::lock(&s.lock, Read);
            inside.fetch_add(1, SeqCst);
            while inside.load(SeqCst) < together {
                thread::yield_now();
            }
            // SAFETY: the read lock taken above excludes writers.
            let v = s.data.with(|d| unsafe { *d });
            // SAFETY: the read lock taken above, given up.
            unsafe { s.lock.read_unlock() };
            v
        })
    }

    /// A thread that releases the write lock the caller took: the release
    /// runs beside whatever the caller does next.
    ///
    /// # Safety
    ///
    /// The caller holds the write lock and gives its release up to the
    /// thread.
    unsafe fn write_unlock_on_a_thread(this: &Arc<Self>) -> thread::JoinHandle<()> {
        let s = this.clone();
        // SAFETY: the caller's write lock, released here (a raw lock is not
        // tied to the thread that took it).
        thread::spawn(move || unsafe { s.lock.write_unlock() })
    }

    /// Takes the write lock and queues a read future behind it (polled
    /// once, pending). The caller releases the write lock.
    fn reader_queued_behind_a_writer(&self) -> Acquiring<'_> {
        blocking::lock(&self.lock, Write);
        let mut reader = Box::pin(acquire(&self.lock, Read));
        assert!(poll_once(reader.as_mut()).is_pending());
        reader
    }
}

/// `loom::model`, with a checkpoint file of its own for each model of a
/// test that runs several (both handoff modes, say).
///
/// Under `scripts/loom-deep` (`LOOM_CHECKPOINT_FILE` set, one test per
/// process) loom stores its place in the search in that file as it goes,
/// loads it at the start of every `loom::model` call, and leaves it in
/// place when a search completes. A test's second model would then start
/// from a place in the first one's search: where the two branch alike that
/// far it skips part of its own search and passes all the same, and where
/// they do not loom panics ("Reached unexpected exploration state. Is the
/// model fully deterministic?"), which is how this was found (2026-12-06,
/// `reader_backs_out_beside_a_releasing_writer` at four preemptions). So
/// the first model of the process keeps the file's name and the k-th adds
/// `.k` before its extension. Without the variable this is `loom::model`
/// (which also installs the subscriber of loom's `LOOM_LOG`; a checkpointed
/// run goes without it).
fn model(f: impl Fn() + Sync + Send + 'static) {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Relaxed: a count of this process's models; it orders nothing.
    static MODELS: AtomicU32 = AtomicU32::new(0);
    let Some(file) = std::env::var_os("LOOM_CHECKPOINT_FILE") else {
        return loom::model(f);
    };
    let k = MODELS.fetch_add(1, Relaxed) + 1;
    let mut file = std::path::PathBuf::from(file);
    if k > 1 {
        file.set_extension(format!("{k}.json"));
    }
    let mut builder = loom::model::Builder::new();
    builder.checkpoint_file = Some(file);
    builder.check(f);
}

/// Polls a future once with a waker that does nothing (the model never waits
/// on it).
fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    let waker = futures_noop_waker();
    f.poll(&mut Context::from_waker(&waker))
}

fn futures_noop_waker() -> std::task::Waker {
    std::task::Waker::noop().clone()
}

/// Two writers (one blocking thread, one on the main thread) with barging
/// releases: neither may sleep through the other's release (the lost-wakeup
/// race between setting WAITERS and the releasing fetch_sub).
#[test]
fn lock_unlock_with_waiter() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        s.write_add();
        t.join().unwrap();
        assert_eq!(s.read(), 2);
        s.assert_idle();
    });
}

/// A task and a thread on one lock: the future queues with its waker and is
/// woken by a thread's release, and vice versa.
#[test]
fn task_and_thread_share_the_queue() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let t = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        loom::future::block_on(acquire(&s.lock, Write));
        // SAFETY: the future took the write lock for this thread.
        s.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: the write lock the future took, given up.
        unsafe { s.lock.write_unlock() };
        t.join().unwrap();
        assert_eq!(s.read(), 2);
        s.assert_idle();
    });
}

/// With every waiter due at once, releases hand the lock straight to the
/// head while a newcomer (that spins, then queues) competes: HANDOFF is set,
/// honoured, and cleared, and nobody is stranded.
#[test]
fn handoff_set_and_granted() {
    two_writers_race_for_a_release(true);
}

/// A queued future has waited past the handoff timeout (zero here) and
/// demanded the lock (`HANDOFF`) while the lock is held; the holder releases
/// it while a newcomer tries to take it. The newcomer must fail in every
/// interleaving: between the release's `fetch_sub` and the grant, the word
/// is free with `HANDOFF` set, and only the head may take it. (Nothing else
/// in the tests sees that window: with writers barging through `HANDOFF`
/// every other test and model still passed.) Under `fair` the same holds
/// for `WAITERS` alone.
#[test]
fn handoff_keeps_bargers_out() {
    let _g = handoff(true);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let mut head = pin!(acquire(&s.lock, Write));
        assert!(poll_once(head.as_mut()).is_pending());
        // Polled again while the lock is held, the due head demands it
        // (under `fair` no newcomer passes a queued waiter, handoff or not).
        assert!(poll_once(head.as_mut()).is_pending());
        let word = s.lock.word();
        assert!(
            crate::state::has_handoff(word) || crate::config::FAIR,
            "no handoff demanded: {:?}",
            crate::state::Decoded(word)
        );
        let barger = {
            let s = s.clone();
            thread::spawn(move || s.lock.try_acquire(Write))
        };
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        assert!(
            !barger.join().unwrap(),
            "a newcomer took the lock ahead of the queued head (a pending handoff, or `fair`)"
        );
        assert!(poll_once(head.as_mut()).is_ready(), "the release must grant the lock to the head");
        // SAFETY: the head's future took the write lock for this thread.
        unsafe { s.lock.write_unlock() };
        s.assert_idle();
    });
}

/// A queued future is dropped while a release races to grant it the lock
/// (every release hands off here): whether the drop wins or the grant does,
/// the lock ends up free and usable, never owned by a dead future.
#[test]
fn cancel_granted_waiter() {
    let _g = handoff(true);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let mut fut = pin!(acquire(&s.lock, Write));
                let first = poll_once(fut.as_mut());
                if first.is_ready() {
                    // Acquired after the release: give it back.
                    // SAFETY: a ready future took the write lock for this thread.
                    unsafe { s.lock.write_unlock() };
                }
                // Dropped here: if it was queued, and perhaps granted, its
                // Drop must unlink or release.
            })
        };
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        t.join().unwrap();
        s.write_add();
        s.assert_idle();
    });
}

/// tokio's `write_read_shared_drop_pending`, concurrently: a reader holds
/// the lock, a writer queues and is then cancelled, and a reader that may
/// have queued behind that writer must get in.
#[test]
fn cancel_head_lets_readers_behind_in() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Read);
        let writer = {
            let s = s.clone();
            thread::spawn(move || {
                let mut fut = pin!(acquire(&s.lock, Write));
                if poll_once(fut.as_mut()).is_ready() {
                    // Only once the main thread has released both reads.
                    // SAFETY: a ready future took the write lock for this thread.
                    unsafe { s.lock.write_unlock() };
                }
                // Dropped: unlinked, and a reader behind it must be let in.
            })
        };
        // Completes only if the cancelled writer lets it through.
        loom::future::block_on(acquire(&s.lock, Read));
        // SAFETY: the read lock the future took, given up.
        unsafe { s.lock.read_unlock() };
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        writer.join().unwrap();
        s.assert_idle();
    });
}

/// A writer at the head of the queue, with two readers behind it, gives up
/// while a reader holds the lock: the readers behind it must join the one
/// inside, both of them, while it stays (under the model checkers a round
/// of wakeups holds one reader, so the second comes in a second round of
/// the cancellation's dispatch). A cancellation that let in only part of
/// the run would leave the rest to the next release, which the reader
/// inside does not make until both are in.
#[test]
fn cancel_head_lets_a_run_of_readers_in() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let inside = Arc::new(AtomicUsize::new(0));
        blocking::lock(&s.lock, Read);
        // Queued behind the read lock this thread holds; readers that come
        // now queue behind it.
        let mut writer = Box::pin(acquire(&s.lock, Write));
        assert!(poll_once(writer.as_mut()).is_pending());
        let readers: Vec<_> = (0..2).map(|_| Shared::reader_counted_in(&s, &inside, 0)).collect();
        drop(writer);
        while inside.load(SeqCst) < 2 {
            thread::yield_now();
        }
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        for r in readers {
            r.join().unwrap();
        }
        s.assert_idle();
    });
}

/// Readers queued behind a writer are let in together by its release: each
/// holds its read lock until both are inside, so a release that let in only
/// part of the run, leaving the rest to the next release, deadlocks the
/// model. (Under the model checkers a round of wakeups holds one reader,
/// `config::WAKE_BATCH`, so the second comes in a second round.)
#[test]
fn reader_batch_wake() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let inside = Arc::new(AtomicUsize::new(0));
        blocking::lock(&s.lock, Write);
        let readers: Vec<_> = (0..2).map(|_| Shared::reader_counted_in(&s, &inside, 2)).collect();
        // SAFETY: the write lock taken at the start of the model excludes the readers.
        s.data.with_mut(|d| unsafe { *d = 7 });
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        for r in readers {
            assert_eq!(r.join().unwrap(), 7);
        }
        s.assert_idle();
    });
}

/// A writer downgrades while a reader and a writer wait: the reader may join
/// at once, the writer only after every read lock is gone.
#[test]
fn downgrade_with_waiters() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.read())
        };
        let writer = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        // SAFETY: the write lock taken at the start of the model excludes the other threads.
        s.data.with_mut(|d| unsafe { *d = 10 });
        // SAFETY: this thread holds the write lock taken at the start of the model.
        unsafe { s.lock.downgrade() };
        // SAFETY: the downgrade left this thread a read lock, which excludes the writer.
        assert!(s.data.with(|d| unsafe { *d }) == 10, "no writer between");
        // SAFETY: the read lock the downgrade left, given up.
        unsafe { s.lock.read_unlock() };
        let seen = reader.join().unwrap();
        assert!(seen == 10 || seen == 11, "{seen}");
        writer.join().unwrap();
        assert_eq!(s.read(), 11);
        s.assert_idle();
    });
}

/// A writer spins while a reader holds the lock and the queue is empty: it
/// takes the WOKEN token (writer intent), which holds a second reader back,
/// and must give it up (or take the lock) without stranding anyone.
#[test]
fn spinning_writer_token_and_readers() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Read);
        let writer = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.read())
        };
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        writer.join().unwrap();
        let seen = reader.join().unwrap();
        assert!(seen <= 1);
        s.assert_idle();
    });
}

/// A woken writer (holding the token, spinning for its turn) races a
/// barging writer for the lock a third writer releases.
#[test]
fn woken_writer_races_a_barger() {
    two_writers_race_for_a_release(false);
}

/// The lock is held; two writers come for it (each may spin, queue, or be
/// woken) while it is released, with every release handing off
/// (`always_handoff`) or waking the head to compete with a barger.
fn two_writers_race_for_a_release(always_handoff: bool) {
    let _g = handoff(always_handoff);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let first = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        let second = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        // SAFETY: the write lock taken at the start of the model excludes the other writers.
        s.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(s.read(), 3);
        s.assert_idle();
    });
}

/// A reader woken (licensed) by a writer's release finds another writer got
/// in first: it must go back to the front of the queue and still get in.
#[test]
fn licensed_reader_loses_to_a_writer() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let reader = {
            let s = s.clone();
            thread::spawn(move || s.read())
        };
        let writer = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        let seen = reader.join().unwrap();
        assert!(seen <= 1);
        writer.join().unwrap();
        s.assert_idle();
    });
}

/// A queued future is woken (handed the WOKEN token) by a release and then
/// dropped before it runs: the token must not be lost with it, or the thread
/// queued behind would sleep on a free lock forever.
#[test]
fn woken_future_dropped_passes_the_token_on() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let task = {
            let s = s.clone();
            thread::spawn(move || {
                let mut fut = pin!(acquire(&s.lock, Write));
                let ready = poll_once(fut.as_mut()).is_ready();
                if ready {
                    // SAFETY: a ready future took the write lock for this thread.
                    unsafe { s.lock.write_unlock() };
                }
                // Dropped: queued, woken or granted, it must pass the lock on.
            })
        };
        let behind = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        task.join().unwrap();
        behind.join().unwrap();
        s.assert_idle();
    });
}

/// A grant orders every reader's release before the writer it grants the
/// lock to, not only the release of the reader that dispatches. Two
/// readers hold the lock, a writer's future is queued (every waiter due,
/// so the last release grants it), and the reader on the other thread
/// reads the data and releases first, dispatching nothing: only the
/// grant's compare-and-swap, which reads the word after that release,
/// orders its read before the writer's write on this thread. (With it
/// `Relaxed`, loom's cell reports the race; every other model passed that
/// mutant, since a grant elsewhere follows the dispatcher's own release or
/// its queue lock, which orders the last owner's section already.)
#[test]
fn a_grant_orders_every_reader_release_before_the_writer() {
    let _g = handoff(true);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Read);
        let other = {
            let s = s.clone();
            thread::spawn(move || {
                blocking::lock(&s.lock, Read);
                // SAFETY: under the read lock just taken.
                s.data.with(|v| unsafe { *v });
                // SAFETY: that read lock, given up.
                unsafe { s.lock.read_unlock() };
            })
        };
        let mut writer = pin!(acquire(&s.lock, Write));
        assert!(poll_once(writer.as_mut()).is_pending(), "a reader holds the lock");
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        while poll_once(writer.as_mut()).is_pending() {
            thread::yield_now();
        }
        // SAFETY: under the write lock the writer's future took.
        s.data.with_mut(|v| unsafe { *v += 1 });
        // SAFETY: that write lock, given up.
        unsafe { s.lock.write_unlock() };
        other.join().unwrap();
        s.assert_idle();
    });
}

/// A queued reader future is woken with a licence by a release, which does
/// not wake the writer queued behind it (the reader is to take the lock and
/// wake the writer with its own release), and is dropped before it takes
/// the lock, as the losing branch of a `select!`: giving the licence up
/// must pass that wakeup on, or the writer sleeps on a free lock forever
/// (`tests/torture.rs` once found this; `tests/locks.rs` has one order of
/// it). The drop comes in every order with the release and with the
/// writer's queueing: still queued, licensed, or (under `fair`) granted
/// the lock, which the drop then releases. A licensed future polled again
/// instead is `reader_polled_while_licensed`.
#[test]
fn licensed_future_dropped_passes_the_wakeup_on() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let reader = s.reader_queued_behind_a_writer();
        let behind = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        // SAFETY: `reader_queued_behind_a_writer` took the write lock for this model.
        let releaser = unsafe { Shared::write_unlock_on_a_thread(&s) };
        drop(reader);
        releaser.join().unwrap();
        behind.join().unwrap();
        assert_eq!(s.read(), 1);
        s.assert_idle();
    });
}

// --------------------------------------------------------------------------
// LockRef: the count shares the word with the lock.
// --------------------------------------------------------------------------

use crate::{LockRef, LockRefGuard};

/// Lockless get/put racing a lock holder that adds to the count under the
/// lock, in both handoff modes: no update is lost, and the count a holder
/// reads does not move while it holds the lock.
#[test]
fn lockref_get_put_vs_lock() {
    for always in [false, true] {
        let _g = handoff(always);
        model(|| {
            let r = Arc::new(LockRef::with_count(1, ()));
            let t = {
                let r = r.clone();
                thread::spawn(move || {
                    r.get();
                    r.put();
                    r.get();
                })
            };
            {
                let mut g = r.lock();
                let c = g.count();
                thread::yield_now();
                assert_eq!(g.count(), c, "the count moved under the lock");
                g.set_count(c + 10);
            }
            t.join().unwrap();
            assert_eq!(r.count(), 12);
            assert_eq!(r.raw.word(), 0, "lock half left as {:?}", crate::state::Decoded(r.raw.word()));
        });
    }
}

/// The count orders the object's uses before its teardown, as `Arc`'s
/// does: a holder uses the object (outside the lock) and puts its reference
/// back locklessly; the owner, if it then finds the count at zero under the
/// lock, tears the object down. The put is a `Release` and the lock's
/// compare-and-swap an `Acquire` on the same word, so the use happens
/// before the teardown (with a `Relaxed` put, loom's cell reports the race).
#[test]
fn lockref_put_orders_a_use_before_the_teardown() {
    let _g = handoff(false);
    model(|| {
        let r = Arc::new((LockRef::with_count(1, ()), UnsafeCell::new(7usize)));
        let holder = {
            let r = r.clone();
            thread::spawn(move || {
                // SAFETY: a read while holding a reference; only the teardown writes.
                assert_eq!(r.1.with(|v| unsafe { *v }), 7);
                r.0.put();
            })
        };
        let g = r.0.lock();
        if g.count() == 0 {
            // SAFETY: no reference is left, so nobody uses the object.
            r.1.with_mut(|v| unsafe { *v = 0 });
        }
        drop(g);
        holder.join().unwrap();
        assert_eq!(r.0.raw.word(), 0);
    });
}

/// The same for the other decrements: a holder uses the object and gives
/// its reference back with `put_not_zero`, `put_return` or `put_or_lock`
/// (each falling back to the lock where it would), while the owner uses it
/// too and gives its own back with `put_or_lock`. Whichever of the two is
/// left with the last reference tears down: the owner under the lock, the
/// holder after `put_return` returned `Some(0)` or `put_or_lock` the lock.
/// Each decrement is a `Release` that the teardown's lock reads, and
/// `put_return`'s own `Acquire` fence at zero orders the owner's use before
/// the holder's teardown (with any decrement `Relaxed`, or the fence left
/// out, loom's cell reports the race: `put`'s model covered `put` alone).
#[test]
fn lockref_every_put_orders_a_use_before_the_teardown() {
    /// Gives the holder's reference back; whether that left the holder the
    /// last reference, to tear down.
    type GiveBack = fn(&LockRef<()>) -> bool;
    fn give_back_not_zero(r: &LockRef<()>) -> bool {
        // Refused with a count of 1: the holder's is then the last
        // reference, which it keeps (the owner gave its own back and left).
        let _ = r.put_not_zero();
        false
    }
    fn give_back_return(r: &LockRef<()>) -> bool {
        match r.put_return() {
            Some(count) => count == 0,
            None => {
                // The lock was held: the kernel's callers fall back to the lock.
                r.put();
                false
            }
        }
    }
    fn give_back_or_lock(r: &LockRef<()>) -> bool {
        r.put_or_lock().map(|mut last| last.set_count(0)).is_some()
    }
    let _g = handoff(false);
    for give_back in [give_back_not_zero as GiveBack, give_back_return, give_back_or_lock] {
        model(move || {
            let r = Arc::new((LockRef::with_count(2, ()), UnsafeCell::new(7usize)));
            let holder = {
                let r = r.clone();
                thread::spawn(move || {
                    // SAFETY: a read while holding a reference; only the teardown writes.
                    assert_eq!(r.1.with(|v| unsafe { *v }), 7);
                    if give_back(&r.0) {
                        // SAFETY: the count reached zero by our hand: nobody uses the object.
                        r.1.with_mut(|v| unsafe { *v = 0 });
                    }
                })
            };
            // SAFETY: as in the holder.
            assert_eq!(r.1.with(|v| unsafe { *v }), 7);
            if let Some(mut last) = r.0.put_or_lock() {
                // The count is 1 and the reference ours: the holder gave its
                // own back, so nobody uses the object.
                assert_eq!(last.count(), 1);
                last.set_count(0);
                // SAFETY: as above.
                r.1.with_mut(|v| unsafe { *v = 0 });
            }
            holder.join().unwrap();
            assert_eq!(r.0.raw.word(), 0);
        });
    }
}

/// A `LockRef`'s unlock publishes the critical section to the next holder,
/// whichever way it releases: one compare-and-swap while nobody is queued
/// (`Counted::fetch_sub_unless`; two threads add to a counter under the
/// lock), or the subtraction under the queue lock with a waiter queued
/// (`release_queued`; this thread releases with another thread's future
/// queued behind it, and that thread barges in with `try_lock`). A release
/// that is not `Release` lets the next holder's access race the last
/// one's, which loom's cell reports. (A waiter woken or granted by the
/// release is ordered after it by the queue's own synchronization anyway:
/// only a barger shows the second.)
#[test]
fn lockref_unlock_publishes_the_critical_section() {
    fn add(g: &LockRefGuard<'_, UnsafeCell<usize>>) {
        // SAFETY: under the lock, which every access of the counter takes.
        g.with_mut(|v| unsafe { *v += 1 });
    }
    fn total(r: &LockRef<UnsafeCell<usize>>) -> usize {
        // SAFETY: as in `add`.
        r.lock().with(|v| unsafe { *v })
    }
    let _g = handoff(false);
    model(|| {
        let r = Arc::new(LockRef::new(UnsafeCell::new(0usize)));
        let t = {
            let r = r.clone();
            thread::spawn(move || add(&r.lock()))
        };
        add(&r.lock());
        t.join().unwrap();
        assert_eq!(total(&r), 2);
        assert_eq!(r.raw.word(), 0);
    });
    model(|| {
        let r = Arc::new(LockRef::new(UnsafeCell::new(0usize)));
        let held = r.lock();
        // The other thread queues a future behind this thread's lock and
        // then barges in with `try_lock`, which may meet the release's
        // subtraction before its dispatch. (The waiter and the barger are
        // one thread so that the model stays at two; queueing on this
        // thread would order the section before the release by the queue
        // entry's own `Release`.)
        let other = {
            let r = r.clone();
            thread::spawn(move || {
                let mut queued = pin!(r.lock_async());
                let mut barged = false;
                let g = loop {
                    if let Poll::Ready(g) = poll_once(queued.as_mut()) {
                        break g;
                    }
                    barged = barged || r.try_lock().map(|g| add(&g)).is_ok();
                    thread::yield_now();
                };
                add(&g);
                barged
            })
        };
        add(&held);
        drop(held);
        let barged = other.join().unwrap();
        assert_eq!(total(&r), 2 + usize::from(barged));
        assert_eq!(r.raw.word(), 0);
    });
}

/// The dentry pattern: a lookup's get_not_dead races the owner's last
/// put_or_lock + mark_dead. Either the lookup got a reference before the
/// owner's put (which then only decrements), or it sees the ref dead; never
/// a reference to a dead object.
#[test]
fn lockref_get_not_dead_vs_mark_dead() {
    let _g = handoff(false);
    model(|| {
        let r = Arc::new(LockRef::with_count(1, ()));
        let lookup = {
            let r = r.clone();
            thread::spawn(move || r.get_not_dead())
        };
        let tore_down = match r.put_or_lock() {
            Some(mut last) => {
                assert_eq!(last.count(), 1);
                last.mark_dead();
                true
            }
            None => false,
        };
        let got = lookup.join().unwrap();
        assert_ne!(got, tore_down, "exactly one of: the lookup's reference, the teardown");
        if got {
            assert_eq!(r.count(), 1);
            assert!(!r.is_dead());
        } else {
            assert!(r.is_dead());
        }
        assert_eq!(r.raw.word(), 0);
    });
}

/// Two last-reference drops race: exactly one is left holding the lock with
/// the count at 1, as a teardown relies on (the kernel's dentries). One
/// drops from a task (`lock_async` is the queue the other may wait in).
#[test]
fn lockref_put_or_lock_race_and_async_lock() {
    let _g = handoff(false);
    model(|| {
        let r = Arc::new(LockRef::with_count(2, ()));
        let other = {
            let r = r.clone();
            thread::spawn(move || r.put_or_lock().map(|g| g.count()))
        };
        let mine = r.put_or_lock().map(|g| g.count());
        let theirs = other.join().unwrap();
        match (mine, theirs) {
            (Some(1), None) | (None, Some(1)) => {}
            other => panic!("put_or_lock outcomes {other:?}"),
        }
        let t = {
            let r = r.clone();
            thread::spawn(move || drop(loom::future::block_on(r.lock_async())))
        };
        r.get();
        t.join().unwrap();
        assert_eq!(r.count(), 2);
        assert_eq!(r.raw.word(), 0);
    });
}

/// Gives back a reference to `r` the way the kernel's dentries are (and
/// `LockArc`'s handles were, until 2026-12-07): the last one, which
/// `put_or_lock` returns with the lock held, marks the `LockRef` dead,
/// releases the lock and frees it (here [`Counted::model_free`], after which
/// the lock's code must not touch its word). Returns whether it freed.
///
/// [`Counted::model_free`]: crate::layout::Counted::model_free
fn drop_reference(r: &LockRef<()>) -> bool {
    let Some(mut last) = r.put_or_lock() else { return false };
    last.mark_dead();
    drop(last);
    r.raw.layout().model_free();
    true
}

/// Two references to a `LockRef`, ours and a task's, whose future queues
/// behind the lock we hold; then `task` runs on its thread while we give
/// our reference up under the lock (as `put_or_lock` does when the
/// lockless decrement finds the lock held) and release it. `task` returns
/// whether it freed the `LockRef`, which it must: its reference is the
/// last.
fn release_beside_a_queued_task(task: impl FnOnce(&LockRef<()>) -> bool + Send + 'static) {
    let r = Arc::new(LockRef::with_count(2, ()));
    let mut held = r.lock();
    let task = {
        let r = r.clone();
        thread::spawn(move || task(&r))
    };
    while r.raw.word() & crate::state::WAITERS == 0 {
        thread::yield_now();
    }
    held.set_count(held.count() - 1);
    drop(held);
    assert!(task.join().unwrap(), "the task's reference is the last");
}

/// A `LockRef` may be freed by whoever drops its last reference, as soon as
/// that thread has released the lock (the kernel's dentries; `LockArc`'s
/// drop until 2026-12-07). So a release must not touch the word once
/// another thread could have freed it. The path this checks: this thread
/// gives its reference up under the lock (as `put_or_lock` does when the
/// lockless decrement finds the lock held) and releases the lock with a
/// task's future queued behind it. Before that release gets to the queue,
/// the task drops its future and then its reference, the last: it takes
/// the lock, marks the `LockRef` dead and frees it. (A release that went on
/// to dispatch with the queue emptied would touch the word after the task's
/// free only if loom scheduled the free into that window, which it does
/// not; `release_queued`'s check that waiters pin the lock, and `Counted`'s
/// watch over releases that nothing pins, fail it instead.)
#[test]
fn lockref_release_touches_no_word_its_last_owner_freed() {
    let _g = handoff(false);
    model(|| {
        release_beside_a_queued_task(|r| {
            {
                let mut fut = pin!(r.lock_async());
                assert!(poll_once(fut.as_mut()).is_pending(), "the lock is held");
            } // The future, dropped: it leaves the queue.
            drop_reference(r)
        });
    });
}

/// The same free through a handoff: every release hands the lock to the
/// head waiter, here the task's future, whose owner takes it up, marks the
/// `LockRef` dead and frees it (its reference is the last), while the
/// release that granted it may still be inside `dispatch`, which must touch
/// nothing of the lock after its grant. loom does not schedule the free
/// between the grant and a later touch (the task's own accesses of the word
/// come between, and its search keeps only the last access of each atomic),
/// so the touch is caught by `Counted`'s watch instead: from the grant on,
/// a word touched by the release that made it fails the model (checked
/// with a load of the word added after the grant: it fails here, and
/// passed every model before the watch).
#[test]
fn lockref_handed_over_and_freed_while_the_release_dispatches() {
    let _g = handoff(true);
    model(|| {
        release_beside_a_queued_task(|r| {
            // Polled again and again, as a task that its other futures keep
            // waking (a `select!`): it may see its grant while the release
            // is still inside `dispatch`.
            let mut fut = pin!(r.lock_async());
            let mut last = loop {
                if let Poll::Ready(guard) = poll_once(fut.as_mut()) {
                    break guard;
                }
                thread::yield_now();
            };
            assert_eq!(last.count(), 1, "the task's reference is the last");
            last.mark_dead();
            drop(last);
            r.raw.layout().model_free();
            true
        });
    });
}

/// `LockArc`'s last handle frees the value, as `Arc`'s does, and the
/// other handles' uses of it happen before the free. A thread writes the
/// value under the lock and drops its handle while this thread drops its
/// own; whichever drop is the last drops the value, whose `Drop` reads it.
/// The drops are `Release` subtractions and the last one's `Acquire` fence
/// pairs with them, as in `Arc`'s drop: without the fence, the read in the
/// value's `Drop` races the thread's write, which loom's cell reports
/// (checked: it fails there). The free itself is modelled as a mutable
/// access of the word (`Counted::model_dealloc`), which loom checks against
/// every access of it: with the subtractions `Relaxed`, the thread's own
/// accesses of the word are not ordered before the free, and the model
/// fails there (checked). Neither drop waits for the lock: ours may come
/// while the thread holds it.
#[test]
fn lockarc_last_handle_sees_every_use() {
    struct Value(UnsafeCell<usize>);
    impl Drop for Value {
        fn drop(&mut self) {
            // SAFETY: dropped with the last handle, when no other handle
            // exists to reach the value.
            let v = self.0.with(|v| unsafe { *v });
            assert_eq!(v, 1, "the write made under the lock, lost");
        }
    }
    let _g = handoff(false);
    model(|| {
        let ours = crate::LockArc::new(Value(UnsafeCell::new(0)));
        let theirs = ours.clone();
        let t = thread::spawn(move || {
            let g = theirs.lock();
            // SAFETY: under the lock, which every access of the value takes.
            g.0.with_mut(|v| unsafe { *v = 1 });
            drop(g);
            drop(theirs);
        });
        // Before, during or after the thread's critical section: whichever
        // drop comes last frees the value.
        drop(ours);
        t.join().unwrap();
    });
}

/// A queued reader's future is polled (spuriously: a `select!` sibling
/// woke the task) just as a release licenses it: whichever the poll sees
/// first, it must take the read lock or stay queued, never trip over the
/// licence (a reader licensed between the poll's look at its node and the
/// queue lock once hit an `unreachable!`).
#[test]
fn reader_polled_while_licensed() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        let mut fut = s.reader_queued_behind_a_writer();
        // SAFETY: `reader_queued_behind_a_writer` took the write lock for this model.
        let releaser = unsafe { Shared::write_unlock_on_a_thread(&s) };
        let mut ready = poll_once(fut.as_mut()).is_ready();
        releaser.join().unwrap();
        if !ready {
            ready = poll_once(fut.as_mut()).is_ready();
        }
        assert!(ready, "a licensed reader with the lock free must get in");
        drop(fut);
        // SAFETY: the read lock the future took, given up.
        unsafe { s.lock.read_unlock() };
        s.assert_idle();
    });
}

/// A queued future is polled again with a different waker (moved to
/// another task) while the lock is released: the wakeup must reach the new
/// waker. `block_on`'s waker unparks its thread; the first poll's waker
/// does nothing, so a wakeup sent there leaves the thread parked forever,
/// which loom reports as a deadlock.
#[test]
fn waker_change_on_repoll() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Write);
        let t = {
            let s = s.clone();
            thread::spawn(move || {
                let mut fut = pin!(acquire(&s.lock, Write));
                if poll_once(fut.as_mut()).is_pending() {
                    loom::future::block_on(fut.as_mut());
                }
                // SAFETY: the future completed (on its first poll or in block_on): it took the write lock for this thread.
                s.data.with_mut(|d| unsafe { *d += 1 });
                // SAFETY: that write lock, given up.
                unsafe { s.lock.write_unlock() };
            })
        };
        // SAFETY: the write lock taken at the start of the model excludes the other thread.
        s.data.with_mut(|d| unsafe { *d += 1 });
        // SAFETY: the write lock taken at the start of the model, given up.
        unsafe { s.lock.write_unlock() };
        t.join().unwrap();
        assert_eq!(s.read(), 2);
        s.assert_idle();
    });
}

/// Writer starvation by readers (hazard 9): once a writer has queued
/// behind a reader, a new reader may not join the read lock ahead of it.
/// While the main thread holds its read lock the writer cannot leave the
/// queue, so `WAITERS` seen before the newcomer's try stays set through it.
#[test]
fn a_queued_writer_blocks_new_readers() {
    let _g = handoff(false);
    model(|| {
        let s = Shared::new();
        blocking::lock(&s.lock, Read);
        let writer = {
            let s = s.clone();
            thread::spawn(move || s.write_add())
        };
        let newcomer = {
            let s = s.clone();
            thread::spawn(move || {
                let before = s.lock.word();
                let got = s.lock.try_acquire(Read);
                assert!(!(got && crate::state::has_waiters(before)), "a reader passed a queued writer");
                if got {
                    // SAFETY: try_acquire took a read lock for this thread.
                    unsafe { s.lock.read_unlock() };
                }
            })
        };
        newcomer.join().unwrap();
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        writer.join().unwrap();
        assert_eq!(s.read(), 1);
        s.assert_idle();
    });
}

/// Reader overflow (hazard 13): with room for one reader, a second one
/// queues (never wraps the count) and is let in by the first's release.
/// The readers count themselves in `inside`: the word may count one more
/// for an instant, the second reader's fast-path add before it takes it
/// back (state.rs, "Transient readers").
#[test]
fn reader_overflow_queues() {
    let _g = handoff(false);
    model(|| {
        let s = Arc::new(Shared { lock: RawRwLock::new(1), data: UnsafeCell::new(0) });
        let inside = Arc::new(AtomicUsize::new(0));
        blocking::lock(&s.lock, Read);
        inside.fetch_add(1, SeqCst);
        let second = {
            let (s, inside) = (s.clone(), inside.clone());
            thread::spawn(move || {
                loom::future::block_on(acquire(&s.lock, Read));
                assert_eq!(inside.fetch_add(1, SeqCst), 0, "two readers where one fits");
                inside.fetch_sub(1, SeqCst);
                // SAFETY: the read lock the future took, given up.
                unsafe { s.lock.read_unlock() };
            })
        };
        inside.fetch_sub(1, SeqCst);
        // SAFETY: the read lock taken at the start of the model, given up.
        unsafe { s.lock.read_unlock() };
        second.join().unwrap();
        s.assert_idle();
    });
}

/// Transient readers (state.rs): a newcomer reader adds itself to a
/// write-locked word with a writer queued, and takes itself back while
/// the writer releases, in either order; the queued writer is dispatched
/// all the same, with releases that wake it to compete and with releases
/// that hand off.
#[test]
fn reader_backs_out_beside_a_releasing_writer() {
    for always in [false, true] {
        let _g = handoff(always);
        model(|| {
            let s = Shared::new();
            blocking::lock(&s.lock, Write);
            let queued = {
                let s = s.clone();
                thread::spawn(move || s.write_add())
            };
            let newcomer = {
                let s = s.clone();
                thread::spawn(move || {
                    if s.lock.try_acquire(Read) {
                        // SAFETY: try_acquire took a read lock (loom's cell checks that no writer is in).
                        s.data.with(|d| unsafe { *d });
                        // SAFETY: the read lock taken just above, given up.
                        unsafe { s.lock.read_unlock() };
                    }
                })
            };
            // SAFETY: the write lock taken at the start excludes every other access.
            s.data.with_mut(|d| unsafe { *d += 1 });
            // SAFETY: the write lock taken at the start of the model, given up.
            unsafe { s.lock.write_unlock() };
            newcomer.join().unwrap();
            queued.join().unwrap();
            assert_eq!(s.read(), 2);
            s.assert_idle();
        });
    }
}
