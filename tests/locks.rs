//! Deterministic tests of hybrid-sync's own behaviour: ordering, cancellation
//! at every point, max readers, downgrade, threads and tasks on one lock,
//! panics, and the regressions of other lock crates' historic bugs
//! (research notes, ecosystem-reliability.md section 4).
//!
//! Futures are polled by hand (`tokio_test::task::spawn`), so each test pins
//! down one interleaving exactly.

#![allow(clippy::assertions_on_constants)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use hybrid_sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use tokio_test::task::{Spawn, spawn};
use tokio_test::{assert_pending, assert_ready};

// Fairness-dependent branches read this at run time (the tests run in both
// modes), hence clippy's constant-assertion lint is allowed below.
const FAIR: bool = cfg!(feature = "fair");

#[test]
fn sizes() {
    // `stats` and `tracing` add per-lock counters and a span.
    if cfg!(any(feature = "stats", feature = "tracing")) {
        return;
    }
    assert!(size_of::<RwLock<()>>() <= 16, "{}", size_of::<RwLock<()>>());
    assert!(size_of::<Mutex<()>>() <= 16, "{}", size_of::<Mutex<()>>());
}

/// A drop-in's futures are no bigger than the ones they replace: an `async
/// fn` that awaits a lock holds its future in its own state, and so does
/// every future that awaits that one.
#[test]
fn futures_are_no_bigger_than_tokios() {
    // `tracing` adds the spans of a wait to the future. `stats` adds when
    // the wait started, eight bytes, which fit in the padding that the
    // node's alignment leaves in the borrowed futures but not in the owned
    // ones, which hold the `Arc` as well: they take another 32 bytes.
    if cfg!(feature = "tracing") {
        return;
    }
    let slack = |method: &str| if cfg!(feature = "stats") && method.ends_with("_owned") { 32 } else { 0 };
    use std::sync::Arc;
    let (lock, tokio_lock) = (Arc::new(RwLock::new(0u64)), Arc::new(tokio::sync::RwLock::new(0u64)));
    let (mutex, tokio_mutex) = (Arc::new(Mutex::new(0u64)), Arc::new(tokio::sync::Mutex::new(0u64)));
    // (method, ours, tokio's)
    let sizes = [
        ("read", size_of_val(&lock.read()), size_of_val(&tokio_lock.read())),
        ("write", size_of_val(&lock.write()), size_of_val(&tokio_lock.write())),
        ("lock", size_of_val(&mutex.lock()), size_of_val(&tokio_mutex.lock())),
        ("read_owned", size_of_val(&lock.clone().read_owned()), size_of_val(&tokio_lock.clone().read_owned())),
        ("write_owned", size_of_val(&lock.clone().write_owned()), size_of_val(&tokio_lock.clone().write_owned())),
        ("lock_owned", size_of_val(&mutex.clone().lock_owned()), size_of_val(&tokio_mutex.clone().lock_owned())),
    ];
    eprintln!("futures' sizes (method, ours, tokio's): {sizes:?}");
    for (method, ours, tokios) in sizes {
        if cfg!(target_pointer_width = "32") {
            // On a 32-bit target tokio's futures shrink with its pointers
            // (to 48 and 60 bytes on 32-bit PowerPC), and ours keep their
            // 64-bit size: the queue node is aligned to 32 bytes, for the
            // five flag bits the queue word keeps beside the head's address
            // (src/wait_queue.rs), and it no longer fits in 32.
            assert!(ours <= 96 + slack(method), "{method}'s future is {ours} bytes, 96 on 64-bit targets");
        } else {
            assert!(ours <= tokios + slack(method), "{method}'s future is {ours} bytes, tokio's {tokios}");
        }
    }
}

#[test]
fn tuning_reports_the_build() {
    let t = {
        let _default_timeout = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        hybrid_sync::tuning()
    };
    assert_eq!(t.fair, FAIR);
    assert_eq!(t.spin, !cfg!(feature = "no-spin"));
    let order = if FAIR { "order=fifo " } else { "order=barging+handoff " };
    assert!(t.to_string().starts_with(&format!("hybrid-sync: {order}")), "{t}");
    // Of the handoff presets, the shortest enabled one wins (config.rs,
    // "Precedence"): `--all-features` enables both.
    let timeout = if cfg!(feature = "handoff-250us") {
        std::time::Duration::from_micros(250)
    } else if cfg!(feature = "handoff-4ms") {
        std::time::Duration::from_millis(4)
    } else {
        std::time::Duration::from_millis(1)
    };
    assert_eq!(t.handoff_timeout, timeout);
    assert!(t.per_address_backoff && t.to_string().contains(" backoff=per-address "), "{t}");
    // The seed-000 baseline's switch shows too (it changes only how spinners
    // learn their pace, which no test here depends on).
    hybrid_sync::__testing::set_per_address_backoff(false);
    let per_thread = hybrid_sync::tuning();
    hybrid_sync::__testing::set_per_address_backoff(true);
    assert!(!per_thread.per_address_backoff && per_thread.to_string().contains(" backoff=per-thread "), "{per_thread}");
    // Three queued threads per CPU make a crowd, where the census counts
    // that far (15, so up to 5 CPUs).
    let cpus = std::thread::available_parallelism().map_or(usize::MAX, |n| n.get());
    let expected = (cpus <= 5).then(|| cpus as u32 * 3);
    assert_eq!(t.crowd, expected);
    let shown = expected.map_or("crowd=off".to_string(), |n| format!("crowd={n}"));
    assert!(t.to_string().ends_with(&shown), "{t}");
}

#[test]
fn debug_prints_locked() {
    let lock = RwLock::new(5);
    assert_eq!(format!("{lock:?}"), "RwLock { data: 5 }");
    let w = lock.try_write().unwrap();
    assert_eq!(format!("{lock:?}"), "RwLock { data: <locked> }");
    assert_eq!(format!("{w:?} {w}"), "5 5");
    drop(w);
    let m = Mutex::new("x");
    let g = m.try_lock().unwrap();
    assert_eq!(format!("{m:?}"), "Mutex { data: <locked> }");
    drop(g);
}

/// `n` readers queue behind a held write lock, and a writer behind them: the
/// release lets every reader in, together, and the writer only after them.
fn readers_behind_a_writer_are_let_in_together(n: usize) {
    let lock = RwLock::new(0);
    let w = lock.try_write().unwrap();
    let mut readers: Vec<_> = (0..n).map(|_| spawn(lock.read())).collect();
    for r in &mut readers {
        assert_pending!(r.poll());
    }
    let mut writer = spawn(lock.write());
    assert_pending!(writer.poll());
    drop(w);
    let woken = readers.iter().filter(|r| r.is_woken()).count();
    assert_eq!(woken, n, "a release let in {woken} of the {n} queued readers");
    let guards: Vec<_> = readers.iter_mut().map(|r| assert_ready!(r.poll())).collect();
    assert!(!writer.is_woken(), "the writer behind the readers woke while they hold the lock");
    drop(guards);
    assert!(writer.is_woken());
    let _guard = assert_ready!(writer.poll());
}

#[test]
fn readers_queued_behind_a_writer_are_let_in_together() {
    readers_behind_a_writer_are_let_in_together(3);
}

/// A run of queued readers longer than one round of wakeups (the lock wakes
/// at most 32 tasks per queue-lock hold, as tokio does) is let in whole, in
/// rounds: woken (default) or granted (`fair`), every one of them.
#[test]
fn a_run_of_readers_longer_than_a_wake_batch_is_let_in_whole() {
    readers_behind_a_writer_are_let_in_together(100);
}

/// A writer queued at the head, with a run of readers longer than one round
/// of wakeups behind it, gives up while readers hold the lock: the readers
/// behind it may join the ones inside, and every one of them is let in, in
/// rounds (the cancellation's own round, then the rest). `woken_first`:
/// the writer was woken to compete (it holds the woken-writer token) before
/// it gave up, rather than still waiting.
fn a_cancelled_writer_lets_in_the_readers_behind_it(n: usize, woken_first: bool) {
    let lock = RwLock::new(0);
    let mut held = Some(lock.try_read().unwrap());
    let mut writer = spawn(lock.write());
    assert_pending!(writer.poll());
    let mut readers: Vec<_> = (0..n).map(|_| spawn(lock.read())).collect();
    for r in &mut readers {
        assert_pending!(r.poll());
    }
    if woken_first {
        // The last reader inside leaves: the writer is woken (default) or
        // granted the lock (`fair`) but has not run yet.
        drop(held.take());
        assert!(writer.is_woken());
    }
    drop(writer);
    let woken = readers.iter().filter(|r| r.is_woken()).count();
    assert_eq!(woken, n, "the writer's cancellation let in {woken} of the {n} readers behind it");
    let guards: Vec<_> = readers.iter_mut().map(|r| assert_ready!(r.poll())).collect();
    assert!(lock.try_write().is_err());
    drop((guards, held));
    assert!(lock.try_write().is_ok(), "every guard is gone, and the lock is still held");
}

#[test]
fn a_cancelled_writer_lets_in_a_long_run_of_readers_behind_it() {
    a_cancelled_writer_lets_in_the_readers_behind_it(100, false);
}

#[test]
fn a_cancelled_woken_writer_lets_in_a_long_run_of_readers_behind_it() {
    a_cancelled_writer_lets_in_the_readers_behind_it(100, true);
}

#[test]
fn a_queued_writer_blocks_new_readers_but_not_the_held_ones() {
    let lock = RwLock::new(0);
    let r1 = lock.try_read().unwrap();
    let mut w = spawn(lock.write());
    assert_pending!(w.poll());
    assert!(lock.try_read().is_err(), "writer preference");
    let mut r2 = spawn(lock.read());
    assert_pending!(r2.poll());
    drop(r1);
    assert!(w.is_woken());
    let g = assert_ready!(w.poll());
    assert!(!r2.is_woken());
    drop(g);
    assert!(r2.is_woken());
    let _guard = assert_ready!(r2.poll());
}

/// Runs `attempt` until it is conclusive, at most 20 times. The tests that
/// expect a newcomer to take a free lock past a queued waiter hold only
/// while no waiter is due for a handoff: an attempt slowed past half the
/// handoff timeout (a preempted test thread; CI once stalled one past 1 ms
/// between queueing a reader and the release, and the due reader was
/// rightly granted the lock) is inconclusive. `attempt` gets `slow`, which
/// says whether it has run that long, and returns `false` to be tried again.
fn retry_if_slow(mut attempt: impl FnMut(&dyn Fn() -> bool) -> bool) {
    let _timeout = timeout_not_due();
    let budget = hybrid_sync::tuning().handoff_timeout / 2;
    for _ in 0..20 {
        let start = std::time::Instant::now();
        if attempt(&|| start.elapsed() >= budget) {
            return;
        }
    }
    panic!("every attempt ran past half the handoff timeout ({budget:?}): the machine is too slow for this test");
}

/// Serializes the tests that depend on the handoff timeout (see
/// [`timeout_not_due`]), so that one test's lengthened timeout never shows
/// in another.
static TIMEOUT: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// For a test that needs no waiter to become due while it runs: holds
/// [`TIMEOUT`] and, on a host that runs the code far slower than the
/// hardware (see [`slow_host`]), lengthens the handoff timeout to an hour
/// until dropped. There the 1 ms timeout passes inside any test of a few
/// steps, every attempt of [`retry_if_slow`] is slow, and the waiters a
/// test queued come due under it.
struct TimeoutNotDue(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

fn timeout_not_due() -> TimeoutNotDue {
    let held = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if slow_host() {
        hybrid_sync::__testing::set_handoff_timeout(Some(std::time::Duration::from_secs(3600)));
    }
    TimeoutNotDue(held)
}

impl Drop for TimeoutNotDue {
    fn drop(&mut self) {
        if slow_host() {
            hybrid_sync::__testing::set_handoff_timeout(None);
        }
    }
}

/// Whether the code runs far slower than on the hardware: under Miri
/// (~1000 times, and its clock advances with the work done), or where
/// `HYBRID_SYNC_SLOW_HOST` is set, as `.ci/sanitizers` sets it for
/// valgrind (10-50 times, one thread at a time). With two test binaries
/// under valgrind side by side, 1 ms covered an attempt of
/// `a_licensed_reader_that_keeps_losing_to_bargers_gets_the_next_release`
/// only one time in four.
fn slow_host() -> bool {
    cfg!(miri) || std::env::var_os("HYBRID_SYNC_SLOW_HOST").is_some()
}

/// Queues a task behind a holder of `m`, and releases: returns the task,
/// woken at the head of the queue (under `fair`, granted the lock), not yet
/// polled again.
fn woken_head(m: &Mutex<i32>) -> Spawn<impl Future<Output = MutexGuard<'_, i32>>> {
    let g = m.try_lock().unwrap();
    let mut head = spawn(m.lock());
    assert_pending!(head.poll());
    drop(g);
    assert!(head.is_woken());
    head
}

/// By default a release wakes the queued writer to compete instead of handing
/// it the lock, so a running thread may take the lock first (barging); the
/// woken writer then waits again, keeping its place. Under `fair` the release
/// hands the lock to the writer and a newcomer must wait.
#[test]
fn release_wakes_head_to_compete_or_hands_off_under_fair() {
    retry_if_slow(|slow| {
        let m = Mutex::new(0);
        let mut head = woken_head(&m);
        match m.try_lock() {
            Ok(barger) => {
                assert!(!FAIR, "fair must not let a newcomer overtake");
                assert_pending!(head.poll());
                drop(barger);
                assert!(head.is_woken());
                let _guard = assert_ready!(head.poll());
            }
            Err(_) if !FAIR && slow() => return false,
            Err(_) => {
                assert!(FAIR, "the default lets a newcomer take a free lock");
                let _guard = assert_ready!(head.poll());
            }
        }
        true
    });
}

/// A woken task that lost the lock to bargers twice in a row is not woken
/// only to lose again: the next release hands the lock straight to it.
#[test]
fn a_woken_task_that_keeps_losing_to_bargers_gets_the_next_release() {
    if FAIR {
        return; // under fair nobody barges
    }
    retry_if_slow(|slow| {
        let m = Mutex::new(0);
        let g = m.try_lock().unwrap();
        let mut head = spawn(m.lock());
        assert_pending!(head.poll());
        drop(g);
        for round in 0..2 {
            assert!(head.is_woken(), "round {round}");
            let barger = match m.try_lock() {
                Ok(b) => b,
                Err(_) if slow() => return false,
                Err(e) => panic!("the default lets a newcomer take a free lock: {e}"),
            };
            assert_pending!(head.poll()); // lost
            drop(barger);
        }
        assert!(head.is_woken());
        // Handed over: a newcomer cannot take it before the head runs.
        assert!(m.try_lock().is_err());
        let guard = assert_ready!(head.poll());
        drop(guard);
        assert!(m.try_lock().is_ok());
        true
    });
}

/// `first` and then `second` queue behind the guard `held`; its release
/// wakes (or hands the lock to) `first`, the head, and leaves `second` queued.
fn queue_two_and_release<A: Future<Output: std::fmt::Debug>, B: Future<Output: std::fmt::Debug>>(
    held: impl Sized,
    first: A,
    second: B,
) -> (Spawn<A>, Spawn<B>) {
    let (mut first, mut second) = (spawn(first), spawn(second));
    assert_pending!(first.poll());
    assert_pending!(second.poll());
    drop(held);
    assert!(first.is_woken());
    (first, second)
}

/// A writer holds `lock` while a reader and then a writer queue behind it;
/// its release licenses the reader at the head (wakes it to take the lock
/// when it runs, unlinked) and leaves the writer queued.
fn license_a_reader_ahead_of_a_writer(
    lock: &RwLock<i32>,
) -> (Spawn<impl Future<Output = RwLockReadGuard<'_, i32>>>, Spawn<impl Future<Output = RwLockWriteGuard<'_, i32>>>) {
    queue_two_and_release(lock.try_write().unwrap(), lock.read(), lock.write())
}

/// A newcomer's `try_write`, which the default lets take a free lock ahead
/// of queued waiters that are not due; `None` if it failed in an attempt
/// that ran slow (see [`retry_if_slow`]: a waiter may have come due).
fn barge<'a>(lock: &'a RwLock<i32>, slow: &dyn Fn() -> bool) -> Option<RwLockWriteGuard<'a, i32>> {
    match lock.try_write() {
        Ok(guard) => Some(guard),
        Err(_) if slow() => None,
        Err(e) => panic!("a newcomer may take the free lock: {e}"),
    }
}

/// A woken writer that a licensed reader went back in front of is dropped:
/// it must give its wakeup token back (found by tests/torture.rs: the token
/// leaked, and every later release skipped waking anyone).
#[test]
fn dropping_a_woken_writer_behind_a_requeued_reader_passes_the_token_on() {
    if FAIR {
        return; // under fair nobody barges, so a licensed reader never loses
    }
    retry_if_slow(|slow| {
        let lock = RwLock::new(0);
        let (mut reader, writer) = license_a_reader_ahead_of_a_writer(&lock);
        let Some(b) = barge(&lock, slow) else { return false };
        drop(b); // wakes the writer, now the head, with the token
        assert!(writer.is_woken());
        let Some(b2) = barge(&lock, slow) else { return false };
        assert_pending!(reader.poll()); // loses to b2: back in front of the writer
        drop(writer); // the woken writer leaves, not from the head
        drop(b2);
        assert!(reader.is_woken(), "the release must wake the reader");
        let _r = assert_ready!(reader.poll());
        true
    });
}

/// A reader woken with a licence that finds a barging writer got in first
/// goes back to the front of the queue, ahead of the writer that queued
/// after it: the next release wakes the reader, not that writer.
#[test]
fn a_licensed_reader_that_loses_keeps_its_place_in_front() {
    licensed_reader_loses_to_bargers(1);
}

/// A reader woken with a licence that lost the lock to bargers twice in a
/// row is not woken only to lose again: the next release grants it the read
/// lock, as it does a woken writer that keeps losing.
#[test]
fn a_licensed_reader_that_keeps_losing_to_bargers_gets_the_next_release() {
    licensed_reader_loses_to_bargers(2);
}

/// A licensed reader loses the lock to a barging writer `rounds` times,
/// each release after that waking it (first in the queue) and not the
/// writer behind it; from the second loss on, the release grants it.
fn licensed_reader_loses_to_bargers(rounds: usize) {
    if FAIR {
        return; // under fair nobody barges, so a licensed reader never loses
    }
    retry_if_slow(|slow| {
        let lock = RwLock::new(0);
        let (mut reader, mut writer) = license_a_reader_ahead_of_a_writer(&lock);
        for round in 0..rounds {
            let Some(barger) = barge(&lock, slow) else { return false };
            assert_pending!(reader.poll()); // lost: back in front of the writer
            drop(barger);
            assert!(reader.is_woken(), "round {round}: the release must wake the reader, first in the queue");
            assert!(!writer.is_woken(), "round {round}: the writer queued behind the reader was woken first");
        }
        if rounds >= 2 {
            // Granted: the read lock is the reader's before it runs.
            assert!(lock.try_write().is_err(), "the release woke the reader to lose again");
        }
        let r = assert_ready!(reader.poll());
        drop(r);
        assert!(writer.is_woken());
        let _w = assert_ready!(writer.poll());
        true
    });
}

/// Readers of a woken run that find the lock write-locked were woken for
/// nothing, whether the writer that beat them stalls or not: four such
/// losses in a row on one thread make that thread's releases grant the lock
/// to task heads for a while (a writer head here) rather than wake them.
/// Nothing here has spun long enough to learn that the lock's owners stall,
/// which is all that counted before.
#[test]
fn licensed_readers_that_lose_make_the_next_releases_grant_the_head() {
    if FAIR {
        return; // under fair every release grants; nobody barges
    }
    retry_if_slow(|slow| {
        let lock = RwLock::new(0);
        let first = lock.try_write().unwrap();
        let mut readers: Vec<_> = (0..4).map(|_| spawn(lock.read())).collect();
        for reader in &mut readers {
            assert_pending!(reader.poll());
        }
        drop(first); // licenses the run of four
        let Some(barger) = barge(&lock, slow) else { return false };
        for reader in &mut readers {
            assert_pending!(reader.poll()); // each loses and queues again
        }
        drop(barger);
        let guards: Vec<_> = readers.iter_mut().map(|r| assert_ready!(r.poll())).collect();
        drop(guards);
        // A writer head now: the release grants it before it runs.
        let held = lock.try_write().unwrap();
        let mut writer = spawn(lock.write());
        assert_pending!(writer.poll());
        drop(held);
        assert!(writer.is_woken());
        if lock.try_write().is_ok() {
            if slow() {
                return false;
            }
            panic!("the release woke the writer to compete: {}", lock.__describe());
        }
        let _w = assert_ready!(writer.poll());
        true
    });
}

/// A reader woken with a licence (its release did not wake the writer
/// behind it) and dropped before it ran, as the losing branch of a
/// `select!`: the writer must be woken (found by tests/torture.rs).
#[test]
fn dropping_a_licensed_reader_wakes_the_writer_behind_it() {
    let lock = RwLock::new(0);
    // (Under `fair` the release grants the reader instead; dropping it then
    // releases the lock, which must wake the writer all the same.)
    let (reader, mut writer) = license_a_reader_ahead_of_a_writer(&lock);
    drop(reader);
    assert!(writer.is_woken(), "the writer behind a dropped licensed reader must be woken");
    let _w = assert_ready!(writer.poll());
}

#[test]
fn max_readers_queues_the_extra_reader_and_admits_it_on_release() {
    let lock = RwLock::with_max_readers((), 2);
    let r1 = lock.try_read().unwrap();
    let _r2 = lock.try_read().unwrap();
    assert!(lock.try_read().is_err());
    let mut r3 = spawn(lock.read());
    assert_pending!(r3.poll());
    // Polled again while the lock is full, the queued head stays queued.
    assert_pending!(r3.poll());
    assert!(lock.try_read().is_err());
    drop(r1);
    assert!(r3.is_woken());
    let _guard = assert_ready!(r3.poll());
}

/// A release that grants a run of queued readers (they are due, or it is
/// `fair`) grants no more of them than `max_readers` lets in; the rest wait
/// for room and get it from the next release.
#[test]
fn a_granted_run_of_readers_stops_at_max_readers() {
    // This one needs the build's own timeout (see `TIMEOUT`).
    let _default_timeout = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let lock = RwLock::with_max_readers((), 2);
    let writer = lock.try_write().unwrap();
    let mut readers: Vec<_> = (0..3).map(|_| spawn(lock.read())).collect();
    for reader in &mut readers {
        assert_pending!(reader.poll());
    }
    // Past the handoff timeout queued tasks are due: the release grants.
    std::thread::sleep(hybrid_sync::tuning().handoff_timeout * 3);
    drop(writer);
    let first = assert_ready!(readers[0].poll());
    let _second = assert_ready!(readers[1].poll());
    assert_pending!(readers[2].poll());
    assert!(lock.try_read().is_err(), "{}", lock.__describe());
    drop(first);
    assert!(readers[2].is_woken());
    let _third = assert_ready!(readers[2].poll());
}

/// A licensed reader (woken, and no longer queued) that finds the lock
/// filled to `max_readers` by newcomers meanwhile does not squeeze in: it
/// queues again, in front, and gets in when a reader leaves.
#[test]
fn a_licensed_reader_finding_the_lock_full_queues_again() {
    if FAIR {
        return; // under fair the release grants the reader its place
    }
    retry_if_slow(|slow| {
        let lock = RwLock::with_max_readers((), 2);
        let writer = lock.try_write().unwrap();
        let mut reader = spawn(lock.read());
        assert_pending!(reader.poll());
        drop(writer); // licenses the reader; nobody is queued any more
        assert!(reader.is_woken());
        let (first, second) = match (lock.try_read(), lock.try_read()) {
            (Ok(first), Ok(second)) => (first, second),
            _ if slow() => return false,
            _ => panic!("newcomers may read while nobody is queued: {}", lock.__describe()),
        };
        assert_pending!(reader.poll()); // full: back in the queue
        assert!(lock.try_read().is_err(), "{}", lock.__describe());
        drop(first);
        assert!(reader.is_woken());
        let _third = assert_ready!(reader.poll());
        drop(second);
        true
    });
}

#[test]
#[should_panic(expected = "a RwLock may not be created with more than 536870911 readers")]
fn too_many_max_readers() {
    RwLock::with_max_readers((), (u32::MAX >> 3) + 1);
}

/// tokio's largest limit, `u32::MAX >> 3`, is accepted (the lock word counts
/// fewer readers and caps it there: the crate docs' differences).
#[test]
fn tokios_largest_max_readers_is_accepted() {
    static LOCK: RwLock<i32> = RwLock::const_with_max_readers(1, u32::MAX >> 3);
    let lock = RwLock::with_max_readers(1, u32::MAX >> 3);
    for lock in [&LOCK, &lock] {
        let readers: Vec<_> = (0..3).map(|_| lock.try_read().unwrap()).collect();
        assert!(lock.try_write().is_err());
        drop(readers);
        *lock.try_write().unwrap() += 1;
    }
}

#[test]
fn downgrade_admits_readers_and_keeps_writers_out() {
    let lock = RwLock::new(1);
    let mut w = lock.try_write().unwrap();
    let mut r = spawn(lock.read());
    let mut w2 = spawn(lock.write());
    assert_pending!(r.poll());
    assert_pending!(w2.poll());
    *w = 2;
    let down = w.downgrade();
    assert!(r.is_woken());
    let rg = assert_ready!(r.poll());
    assert_eq!((*down, *rg), (2, 2));
    assert_pending!(w2.poll());
    assert!(lock.try_write().is_err());
    drop(down);
    assert!(!w2.is_woken());
    drop(rg);
    assert!(w2.is_woken());
    let _guard = assert_ready!(w2.poll());
}

/// tokio#2941: a downgraded guard was released twice. After downgrade and
/// drop the lock must be exactly free: one writer, then nothing else.
#[test]
fn downgrade_then_drop_leaves_the_lock_free() {
    let lock = RwLock::new(());
    drop(lock.try_write().unwrap().downgrade());
    let w = lock.try_write().unwrap();
    assert!(lock.try_read().is_err());
    assert!(lock.try_write().is_err());
    drop(w);
    let r1 = lock.try_read().unwrap();
    let r2 = lock.try_read().unwrap();
    drop((r1, r2));
    assert!(lock.try_write().is_ok());
}

// --- cancellation at every point -------------------------------------------

/// Owned guards hold a clone of the lock's `Arc` and give it back when
/// dropped, through every map, downgrade and `into_mapped`.
#[test]
fn owned_guards_give_their_arc_back() {
    use hybrid_sync::{OwnedMutexGuard, OwnedRwLockWriteGuard};
    let rw = Arc::new(RwLock::new((0, 0)));
    let m = Arc::new(Mutex::new((0, 0)));
    let count =
        |rw: &Arc<RwLock<(i32, i32)>>, m: &Arc<Mutex<(i32, i32)>>| (Arc::strong_count(rw), Arc::strong_count(m));
    {
        let r = Arc::clone(&rw).try_read_owned().unwrap();
        let r = hybrid_sync::OwnedRwLockReadGuard::map(r, |v| &v.0);
        assert_eq!(count(&rw, &m), (2, 1));
        drop(r);
        let w = Arc::clone(&rw).try_write_owned().unwrap();
        let w = OwnedRwLockWriteGuard::downgrade(w);
        drop(w);
        let w = Arc::clone(&rw).try_write_owned().unwrap();
        let w = OwnedRwLockWriteGuard::into_mapped(w);
        drop(w);
        let w = Arc::clone(&rw).try_write_owned().unwrap();
        let w = OwnedRwLockWriteGuard::map(w, |v| &mut v.1);
        assert_eq!(count(&rw, &m), (2, 1));
        drop(w);
        let w = Arc::clone(&rw).try_write_owned().unwrap();
        let w = OwnedRwLockWriteGuard::downgrade_map(w, |v| &v.0);
        drop(w);
        let g = Arc::clone(&m).try_lock_owned().unwrap();
        let g = OwnedMutexGuard::map(g, |v| &mut v.0);
        assert_eq!(count(&rw, &m), (1, 2));
        drop(g);
        let g = futures::executor::block_on(Arc::clone(&m).lock_owned());
        drop(g);
        let g = Arc::clone(&m).blocking_lock_owned();
        drop(g);
    }
    assert_eq!(count(&rw, &m), (1, 1), "an owned guard kept its Arc");
}

#[test]
fn never_polled_futures_can_be_dropped() {
    let lock = Arc::new(RwLock::new(0));
    drop(lock.read());
    drop(lock.write());
    drop(lock.clone().read_owned());
    drop(lock.clone().write_owned());
    let m = Arc::new(Mutex::new(0));
    drop(m.lock());
    drop(m.clone().lock_owned());
    assert!(lock.try_write().is_ok());
    assert!(m.try_lock().is_ok());
}

/// A lock future polled again after it returned its guard panics, as an
/// `async fn` (tokio's lock futures) does, whichever path it took: it never
/// acquires a second time, and the guard it returned still holds the lock.
#[test]
fn polling_a_finished_lock_future_panics_and_acquires_nothing() {
    use std::panic::{AssertUnwindSafe, catch_unwind};
    fn repoll_panics<F: Future>(task: &mut tokio_test::task::Spawn<F>) {
        let panic = catch_unwind(AssertUnwindSafe(|| {
            let _ = task.poll();
        }))
        .expect_err("a finished lock future polled again must panic");
        let message = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        assert!(message.contains("after completion"), "unexpected panic message {message:?}");
    }

    // The fast path: a free lock.
    let lock = Arc::new(RwLock::new(0));
    let mut write = spawn(lock.write());
    let guard = assert_ready!(write.poll());
    repoll_panics(&mut write);
    assert!(lock.try_read().is_err(), "the guard no longer holds the lock");
    drop(guard);
    let mut read = spawn(lock.read());
    let guard = assert_ready!(read.poll());
    repoll_panics(&mut read);
    assert!(lock.try_write().is_err());
    drop(guard);
    assert!(lock.try_write().is_ok(), "the readers' count is off");

    // The contended path: queued behind a writer, then let in (a reader,
    // borrowed and owned, and a writer behind it).
    let held = lock.try_write().unwrap();
    let mut reader = spawn(lock.read());
    let mut owned = spawn(lock.clone().read_owned());
    let mut writer = spawn(lock.write());
    assert_pending!(reader.poll());
    assert_pending!(owned.poll());
    assert_pending!(writer.poll());
    drop(held);
    let (r1, r2) = (assert_ready!(reader.poll()), assert_ready!(owned.poll()));
    repoll_panics(&mut reader);
    repoll_panics(&mut owned);
    assert!(lock.try_write().is_err());
    drop((r1, r2));
    assert!(writer.is_woken());
    let guard = assert_ready!(writer.poll());
    repoll_panics(&mut writer);
    assert!(lock.try_read().is_err());
    drop(guard);
    drop((reader, owned, writer));
    assert!(lock.try_write().is_ok(), "the lock is not free");

    let m = Arc::new(Mutex::new(0));
    let held = m.try_lock().unwrap();
    let mut borrowed = spawn(m.lock());
    let mut owned = spawn(m.clone().lock_owned());
    assert_pending!(borrowed.poll());
    assert_pending!(owned.poll());
    drop(held);
    let guard = assert_ready!(borrowed.poll());
    repoll_panics(&mut borrowed);
    drop(guard);
    let guard = assert_ready!(owned.poll());
    repoll_panics(&mut owned);
    assert!(m.try_lock().is_err());
    drop(guard);
    drop((borrowed, owned));
    assert!(m.try_lock().is_ok());
}

#[test]
fn dropping_a_queued_non_head_changes_nothing() {
    let m = Mutex::new(());
    let g = m.try_lock().unwrap();
    let mut a = spawn(m.lock());
    let mut b = spawn(m.lock());
    assert_pending!(a.poll());
    assert_pending!(b.poll());
    drop(b);
    drop(g);
    assert!(a.is_woken());
    let _guard = assert_ready!(a.poll());
}

/// A writer woken to compete, then dropped before it ran: the wakeup must
/// pass to the next waiter, or it would sleep on a free lock.
#[test]
fn dropping_a_woken_head_passes_the_wakeup_on() {
    let m = Mutex::new(());
    let (a, mut b) = queue_two_and_release(m.try_lock().unwrap(), m.lock(), m.lock());
    drop(a);
    assert!(b.is_woken());
    let _guard = assert_ready!(b.poll());
}

/// A reader granted the lock (readers are always granted directly) and
/// dropped before it was polled again must release its share.
#[test]
fn dropping_a_granted_reader_releases_its_share() {
    let lock = RwLock::new(());
    let w = lock.try_write().unwrap();
    let mut r = spawn(lock.read());
    assert_pending!(r.poll());
    drop(w);
    assert!(r.is_woken());
    drop(r);
    assert!(lock.try_write().is_ok(), "the granted share was released");
}

/// A cancelled writer at the head lets the readers queued behind it in
/// (tokio's write_read_shared_drop_pending; embassy#6964 and .NET's
/// ReaderWriterLockSlim had this bug).
#[test]
fn cancelled_head_writer_lets_readers_behind_in() {
    let lock = RwLock::new(());
    let _r1 = lock.try_read().unwrap();
    let mut w = spawn(lock.write());
    assert_pending!(w.poll());
    let mut r2 = spawn(lock.read());
    let mut r3 = spawn(lock.read());
    assert_pending!(r2.poll());
    assert_pending!(r3.poll());
    drop(w);
    assert!(r2.is_woken() && r3.is_woken());
    let _guard = assert_ready!(r2.poll());
    let _guard = assert_ready!(r3.poll());
}

/// Waits until `done` holds, failing the test by name after 10 s. (An
/// atomic polled on a timer rather than a std channel: std is not built for
/// ThreadSanitizer here, and its channels' internal handshakes show up as
/// races there, `.ci/tsan.supp`.)
#[track_caller]
fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "{what} after 10 s");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A server shuts its runtime down while its tasks wait on a lock that a
/// plain thread shares: the runtime drops every task's future, queued, woken
/// or granted, while the thread that held the lock releases it (20 rounds,
/// the release up to 1 ms into the shutdown; 4 under Miri). The other thread, queued
/// behind them, must get the lock and keep using it, and the lock must end
/// free.
#[test]
fn a_runtime_shut_down_with_tasks_queued_leaves_the_lock_to_the_threads() {
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;
    // Miri runs a round in about a second.
    for round in 0..if cfg!(miri) { 4 } else { 20u64 } {
        let lock = Arc::new(RwLock::new(0u64));
        let held = lock.clone().try_write_owned().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        for i in 0..16 {
            let lock = lock.clone();
            rt.spawn(async move {
                loop {
                    if i % 2 == 0 {
                        *lock.write().await += 1;
                    } else {
                        drop(lock.read().await);
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        {
            let (lock, stop, done) = (lock.clone(), stop.clone(), done.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    *lock.blocking_write() += 1;
                }
                done.store(true, Ordering::Release);
            });
        }
        // Everyone queues behind `held`, then its release races the shutdown.
        std::thread::sleep(Duration::from_millis(2));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_micros(round * 50));
            drop(held);
        });
        drop(rt);
        release.join().unwrap();
        std::thread::sleep(Duration::from_millis(1));
        stop.store(true, Ordering::Relaxed);
        wait_until(&format!("round {round}: the thread stranded in the queue"), || done.load(Ordering::Acquire));
        assert!(lock.try_write().is_ok(), "round {round}: the lock was left held");
    }
}

// --- wakers ------------------------------------------------------------------

struct CountingWaker(AtomicUsize);
impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The only waiter, overdue and demanding the lock, is dropped: its demand
/// goes with it, and once released the lock is anyone's again.
#[test]
fn a_dropped_overdue_waiter_leaves_no_handoff_behind() {
    let _default_timeout = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let m = Mutex::new(0);
    let g = m.try_lock().unwrap();
    let mut overdue = spawn(m.lock());
    assert_pending!(overdue.poll());
    std::thread::sleep(hybrid_sync::tuning().handoff_timeout * 3);
    assert_pending!(overdue.poll());
    assert!(FAIR || m.__describe().contains("handoff"), "{}", m.__describe());
    drop(overdue);
    assert!(!m.__describe().contains("handoff"), "{}", m.__describe());
    drop(g);
    assert!(m.try_lock().is_ok(), "{}", m.__describe());
}

/// A head that demanded a handoff and is then dropped takes its demand
/// along: the new head has not waited long, so the release wakes it to
/// compete and a newcomer may take the lock first, as for any head that is
/// not due (under `fair` the release grants it the lock all the same).
#[test]
#[cfg_attr(miri, ignore = "needs one waiter past the handoff timeout and one well within it, by the real clock")]
fn a_dropped_head_takes_its_handoff_demand_along() {
    // The spacing tests' timeout, not the build's: at 1 ms the test rested
    // on its retries wherever the code runs slowly (valgrind, qemu).
    let _timeout = handoff_timeout(spacing_timeout());
    let timeout = spacing_timeout();
    for _ in 0..20 {
        let m = Mutex::new(0);
        let g = m.try_lock().unwrap();
        let mut overdue = spawn(m.lock());
        assert_pending!(overdue.poll());
        sleep_until_overdue();
        let mut next = spawn(m.lock());
        let queued = std::time::Instant::now();
        assert_pending!(next.poll());
        // Polled again, past the timeout and with the lock held, the head
        // demands the lock.
        assert_pending!(overdue.poll());
        assert!(FAIR || m.__describe().contains("handoff"), "{}", m.__describe());
        drop(overdue);
        drop(g);
        let newcomer = m.try_lock();
        if queued.elapsed() >= timeout / 2 {
            continue; // the new head may have come due itself: inconclusive
        }
        if FAIR {
            assert!(newcomer.is_err(), "fair must not let a newcomer overtake");
        } else {
            assert!(newcomer.is_ok(), "the handoff demand outlived its head: {}", m.__describe());
        }
        drop(newcomer);
        assert!(next.is_woken());
        let _guard = assert_ready!(next.poll());
        return;
    }
    panic!(
        "every attempt ran past half the handoff timeout ({:?}): the machine is too slow for this test",
        timeout / 2
    );
}

/// The barging audit: a woken head that cannot get to the lock (a task not
/// yet polled, a thread waiting for a CPU) cannot demand its handoff itself,
/// so now and then (one barge in 64 per thread) a barger looks at the head
/// and, finding it overdue, demands the handoff for it and stays out itself.
#[test]
#[cfg_attr(miri, ignore = "needs a waiter past the handoff timeout, by the real clock")]
fn bargers_demand_the_handoff_for_an_overdue_head_that_cannot_run() {
    if FAIR {
        return; // nobody barges
    }
    // The spacing tests' timeout, not the build's: the head must not come
    // due between its first poll and the release that wakes it (else that
    // release grants it the lock, and there is nothing to audit), and under
    // valgrind, two test binaries side by side, 1 ms once did not cover
    // that (CI, 2026-12-06).
    let _timeout = handoff_timeout(spacing_timeout());
    let m = Mutex::new(0);
    let mut head = woken_head(&m);
    // The woken head is never polled: it cannot claim its turn.
    sleep_until_overdue();
    barge_until_a_handoff_is_demanded(&m);
    let _guard = assert_ready!(head.poll());
}

/// Takes and releases `m` as a newcomer until one of the barges finds the
/// lock owed to a waiter (`HANDOFF`): at most 64, one barging audit's worth.
fn barge_until_a_handoff_is_demanded(m: &Mutex<i32>) {
    let mut barges = 0;
    while let Ok(barger) = m.try_lock() {
        drop(barger);
        barges += 1;
        assert!(barges <= 64, "64 barges past an overdue head and none demanded its handoff");
    }
    assert!(m.__describe().contains("handoff"), "{}", m.__describe());
}

/// The handoff that bargers demand for a woken head is that head's alone:
/// once it has taken the lock, the bit is gone, and the waiter that queued
/// behind it meanwhile, not due, is barged past as before instead of being
/// handed the lock at the head's release.
#[test]
#[cfg_attr(miri, ignore = "needs a waiter past the handoff timeout, by the real clock")]
fn a_demanded_handoff_ends_when_the_head_takes_the_lock() {
    if FAIR {
        return; // nobody barges
    }
    let _timeout = handoff_timeout(spacing_timeout());
    let m = Mutex::new(0);
    let mut head = woken_head(&m);
    sleep_until_overdue();
    barge_until_a_handoff_is_demanded(&m);
    // Kept out by the bit, a newcomer queues behind the head.
    let mut behind = spawn(m.lock());
    assert_pending!(behind.poll());
    let guard = assert_ready!(head.poll());
    assert!(!m.__describe().contains("handoff"), "the head took the lock and left HANDOFF: {}", m.__describe());
    drop(guard);
    let newcomer = m.try_lock();
    the_newcomer_went_first(&m, newcomer, &mut behind, "the head's handoff passed to the waiter behind it");
}

/// Sets the handoff timeout to `timeout` for one test (serialized with the
/// others that depend on it by [`TIMEOUT`]) and back to the default on drop.
struct HandoffTimeout(#[allow(dead_code)] std::sync::MutexGuard<'static, ()>);

fn handoff_timeout(timeout: std::time::Duration) -> HandoffTimeout {
    let held = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    hybrid_sync::__testing::set_handoff_timeout(Some(timeout));
    HandoffTimeout(held)
}

impl Drop for HandoffTimeout {
    fn drop(&mut self) {
        hybrid_sync::__testing::set_handoff_timeout(None);
    }
}

/// The timeout of the handoff-spacing tests below: long enough to tell its
/// gaps (a handoff gap is an eighth of it, a claim gap a thirty-second) from
/// the timeout itself, and the gaps from a test's own steps, on a busy
/// machine: 160 ms, and four times that on a [`slow_host`]. Under valgrind
/// a thread's release took 0.4-2.5 ms to reach the test's next step (25 ms
/// while valgrind was still translating the code), and at 160 ms
/// `a_claimed_turn_spaces_the_next_handoff_by_a_claim_gap_only` was
/// inconclusive in three attempts of five (of the 10 it may take).
fn spacing_timeout() -> std::time::Duration {
    std::time::Duration::from_millis(if slow_host() { 640 } else { 160 })
}

/// Runs a handoff-spacing test (none under `fair`, where every release
/// grants and nothing is due or spaced) with the handoff timeout at
/// [`spacing_timeout`]: `attempt` until it is conclusive, at most 10 times.
/// `attempt` gets `slow`, which says whether the step it times (from the
/// instant it passes) took `budget` or longer, and returns `false` to be
/// tried again.
fn spacing_test(
    budget: std::time::Duration,
    what: &str,
    mut attempt: impl FnMut(&dyn Fn(std::time::Instant) -> bool) -> bool,
) {
    if FAIR {
        return;
    }
    let _timeout = handoff_timeout(spacing_timeout());
    for _ in 0..10 {
        if attempt(&|since| since.elapsed() >= budget) {
            return;
        }
    }
    panic!("every attempt ran past {what} ({budget:?}): the machine is too slow for this test");
}

/// Sleeps until every waiter queued before is past [`spacing_timeout`].
fn sleep_until_overdue() {
    std::thread::sleep(spacing_timeout() + spacing_timeout() / 4);
}

/// How each spacing test ends: the released lock went to a newcomer, not to
/// the queue's head, which was woken instead and gets the lock next.
fn the_newcomer_went_first<'a>(
    m: &Mutex<i32>,
    newcomer: Result<MutexGuard<'a, i32>, hybrid_sync::TryLockError>,
    head: &mut Spawn<impl Future<Output = MutexGuard<'a, i32>>>,
    what: &str,
) {
    assert!(newcomer.is_ok(), "{what}: {}", m.__describe());
    drop(newcomer);
    assert!(head.is_woken());
    let _guard = assert_ready!(head.poll());
}

/// One handoff per gap: after a release hands the lock to an overdue head,
/// the next waiter, overdue too, is not due again before a handoff gap
/// (20 ms of the 160 ms timeout) has passed, so a newcomer may still take the lock released
/// within it. Without the gap a queue of overdue waiters drains by handoffs
/// alone, one wakeup at a time.
#[test]
#[cfg_attr(miri, ignore = "needs waiters past the handoff timeout, by the real clock")]
fn a_handoff_spaces_out_the_next_one() {
    spacing_test(spacing_timeout() / 16, "half the handoff gap", |slow| {
        let m = Mutex::new(0);
        let g = m.try_lock().unwrap();
        let mut first = spawn(m.lock());
        let mut second = spawn(m.lock());
        assert_pending!(first.poll());
        assert_pending!(second.poll());
        sleep_until_overdue();
        drop(g);
        let handed = std::time::Instant::now();
        drop(assert_ready!(first.poll()));
        let newcomer = m.try_lock();
        if slow(handed) {
            return false; // the gap may have passed: inconclusive
        }
        let what = "the overdue waiter behind a handoff was handed the lock at once";
        the_newcomer_went_first(&m, newcomer, &mut second, what);
        true
    });
}

/// A handoff spaces the next one out by moving the next waiter's wait
/// forward, never back: a waiter that queued just now stays due a whole
/// timeout after it queued, not a gap after the handoff.
#[test]
#[cfg_attr(miri, ignore = "needs one waiter past the handoff timeout and one well within it, by the real clock")]
fn the_handoff_gap_never_makes_a_fresh_waiter_due_sooner() {
    spacing_test(spacing_timeout() / 2, "half the handoff timeout", |slow| {
        let m = Mutex::new(0);
        let g = m.try_lock().unwrap();
        let mut overdue = spawn(m.lock());
        assert_pending!(overdue.poll());
        sleep_until_overdue();
        let mut fresh = spawn(m.lock());
        let queued = std::time::Instant::now();
        assert_pending!(fresh.poll());
        // The overdue head is handed the lock and the fresh waiter becomes
        // the head; a gap and a half later it is still not due.
        drop(g);
        let held = assert_ready!(overdue.poll());
        std::thread::sleep(spacing_timeout() / 8 + spacing_timeout() / 16);
        drop(held);
        let newcomer = m.try_lock();
        if slow(queued) {
            return false; // the fresh waiter may have come due itself: inconclusive
        }
        the_newcomer_went_first(
            &m,
            newcomer,
            &mut fresh,
            "a waiter that queued within the timeout was handed the lock",
        );
        true
    });
}

/// The claim-gap tests' set-up: a thread, then a task, queue behind the
/// holder of `m` until both are overdue; the holder releases, and the thread,
/// woken at the head, claims its overdue turn and releases in turn. Returns
/// the task, woken by that release, and when the thread released.
fn a_task_behind_a_claimed_turn(
    m: &Arc<Mutex<i32>>,
) -> (Spawn<impl Future<Output = MutexGuard<'_, i32>>>, std::time::Instant) {
    let g = m.try_lock().unwrap();
    let thread = std::thread::spawn({
        let m = Arc::clone(m);
        move || {
            drop(m.blocking_lock());
            std::time::Instant::now()
        }
    });
    while !m.__describe().contains("(wakes thread)") {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut task = spawn(m.lock());
    assert_pending!(task.poll());
    sleep_until_overdue();
    drop(g);
    (task, thread.join().unwrap())
}

/// An overdue thread at the head is woken to claim its turn itself rather
/// than handed the lock while it sleeps; taking the lock that way is a
/// handoff too, and spaces the next one out by a claim gap (5 ms of 160): the
/// overdue task behind it is not handed a lock released within that gap.
#[test]
#[cfg_attr(miri, ignore = "needs waiters past the handoff timeout, by the real clock")]
fn an_overdue_thread_claiming_its_turn_spaces_out_the_next_handoff() {
    spacing_test(spacing_timeout() / 64, "half the claim gap", |slow| {
        let m = Arc::new(Mutex::new(0));
        let (mut task, released) = a_task_behind_a_claimed_turn(&m);
        let newcomer = m.try_lock();
        if slow(released) {
            return false; // the claim gap may have passed: inconclusive
        }
        let what = "the overdue task behind a claimed turn was handed the lock at once";
        the_newcomer_went_first(&m, newcomer, &mut task, what);
        true
    });
}

/// The other side of the claim gap: it is shorter than a handoff gap. Two
/// claim gaps after the overdue thread claimed its turn (10 ms of 160, half a
/// handoff gap), the overdue task behind it is due again and takes its turn:
/// the next release is its.
#[test]
#[cfg_attr(miri, ignore = "needs waiters past the handoff timeout, by the real clock")]
fn a_claimed_turn_spaces_the_next_handoff_by_a_claim_gap_only() {
    spacing_test(spacing_timeout() * 3 / 32, "three quarters of the handoff gap", |slow| {
        let m = Arc::new(Mutex::new(0));
        let (mut task, released) = a_task_behind_a_claimed_turn(&m);
        let newcomer = m.try_lock();
        if newcomer.is_err() && released.elapsed() >= spacing_timeout() / 64 {
            // Half the claim gap passed before the newcomer came (under
            // valgrind, from the thread's release to its join), so the
            // claim gap may have too: the task was due. Inconclusive.
            return false;
        }
        let newcomer = newcomer.expect("nobody is due within the claim gap");
        // The task, woken by the thread's release, looks again: due by now,
        // it claims its turn (a woken head claims it rather than being
        // handed the lock), so the newcomer's release goes to it.
        std::thread::sleep((released + spacing_timeout() / 16).saturating_duration_since(std::time::Instant::now()));
        assert!(task.is_woken());
        assert_pending!(task.poll());
        drop(newcomer);
        let next = m.try_lock();
        if slow(released) {
            return false; // a handoff gap may have passed too: inconclusive
        }
        assert!(
            next.is_err(),
            "the overdue task did not get its turn two claim gaps after the claimed one: {}",
            m.__describe()
        );
        let _guard = assert_ready!(task.poll());
        true
    });
}

/// A queued future polled again with a different waker must wake the new
/// one (futures moved between tasks or `select!` arms).
#[test]
fn repoll_with_a_new_waker_replaces_the_old() {
    let m = Mutex::new(());
    let g = m.try_lock().unwrap();
    let mut fut = Box::pin(m.lock());
    let old = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let new = Arc::new(CountingWaker(AtomicUsize::new(0)));
    assert!(fut.as_mut().poll(&mut Context::from_waker(&Waker::from(old.clone()))).is_pending());
    assert!(fut.as_mut().poll(&mut Context::from_waker(&Waker::from(new.clone()))).is_pending());
    drop(g);
    assert_eq!(old.0.load(Ordering::SeqCst), 0);
    assert_eq!(new.0.load(Ordering::SeqCst), 1);
    assert!(fut.as_mut().poll(&mut Context::from_waker(&Waker::from(new))).is_ready());
}

/// tokio#5429: a waker whose drop re-enters the lock deadlocked because it
/// was dropped under the internal queue lock.
#[test]
fn a_waker_may_reenter_the_lock_when_dropped_or_woken() {
    struct Reentrant(Arc<Mutex<()>>);
    impl Wake for Reentrant {
        fn wake(self: Arc<Self>) {
            let _ = self.0.try_lock();
        }
    }
    impl Drop for Reentrant {
        fn drop(&mut self) {
            let _ = self.0.try_lock();
        }
    }
    let m = Arc::new(Mutex::new(()));
    let g = m.try_lock().unwrap();
    let mut fut = Box::pin(m.lock());
    let w1 = Waker::from(Arc::new(Reentrant(m.clone())));
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w1)).is_pending());
    drop(w1);
    let w2 = Waker::from(Arc::new(Reentrant(m.clone())));
    // Replaces (and drops) the first waker: must not deadlock.
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w2)).is_pending());
    drop(g); // wakes w2 after the queue lock is released
    assert!(fut.as_mut().poll(&mut Context::from_waker(&w2)).is_ready());
}

/// A waker that panics (a bug in someone's executor) fails the release that
/// woke it, but not the other waiters woken in the same round: each is still
/// woken, and the lock stays usable.
#[test]
fn a_panicking_waker_does_not_cost_the_others_their_wakeup() {
    struct Panics;
    impl Wake for Panics {
        fn wake(self: Arc<Self>) {
            panic!("this waker panics");
        }
    }
    let lock = RwLock::new(0);
    let g = lock.try_write().unwrap();
    let mut first = Box::pin(lock.read());
    let panics = Waker::from(Arc::new(Panics));
    assert!(first.as_mut().poll(&mut Context::from_waker(&panics)).is_pending());
    let mut others: Vec<_> = (0..3).map(|_| spawn(lock.read())).collect();
    for r in &mut others {
        assert_pending!(r.poll());
    }
    let release = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(g)));
    assert!(release.is_err(), "the panicking waker was not woken");
    for (i, r) in others.iter_mut().enumerate() {
        assert!(r.is_woken(), "reader {i} behind the panicking waker was not woken");
        drop(assert_ready!(r.poll()));
    }
    let noop = Waker::noop();
    let Poll::Ready(guard) = first.as_mut().poll(&mut Context::from_waker(noop)) else {
        panic!("the reader whose waker panicked lost its turn");
    };
    drop(guard);
    drop(first);
    assert!(lock.try_write().is_ok(), "the lock is left held");
}

/// tokio#6450 / async-lock#91: one task with two pending lock futures, the
/// wakeup going to the one it does not await. By default the awaited one
/// still gets a free lock (a queued future may take it like a newcomer);
/// under `fair` it waits its turn, exactly as tokio.
#[test]
fn two_pending_futures_on_one_task() {
    retry_if_slow(|slow| {
        let m = Mutex::new(());
        let g = m.try_lock().unwrap();
        let mut b = spawn(m.lock());
        let mut a = spawn(m.lock());
        assert_pending!(b.poll());
        assert_pending!(a.poll());
        drop(g);
        if FAIR {
            assert_pending!(a.poll());
            drop(b);
            assert!(a.is_woken());
            let _guard = assert_ready!(a.poll());
        } else {
            let ga = match a.poll() {
                std::task::Poll::Ready(ga) => ga,
                std::task::Poll::Pending if slow() => return false,
                std::task::Poll::Pending => panic!("the awaited future did not get the free lock"),
            };
            assert_pending!(b.poll());
            drop(ga);
            assert!(b.is_woken());
            let _guard = assert_ready!(b.poll());
        }
        true
    });
}

// --- coop budget ---------------------------------------------------------------

#[tokio::test]
async fn spent_budget_yields_even_on_a_free_lock_and_a_drop_frees_it() {
    use futures::FutureExt;
    let m = Arc::new(Mutex::new(()));
    let m2 = m.clone();
    let mut t = spawn(async move {
        while tokio::task::coop::consume_budget().now_or_never().is_some() {}
        m2.lock_owned().await
    });
    assert_pending!(t.poll());
    drop(t);
    assert!(m.try_lock().is_ok());
}

/// A lock taken without queueing when the task's coop budget is spent: by
/// default the future gives it back before it yields, so the lock is free
/// while the task waits for its next turn (a task in a tight loop of
/// acquisitions would otherwise sit on the lock in its run queue once per
/// budget, and every other contender would queue behind it). Under `fair`
/// it keeps it, as tokio's own locks do, so that no newcomer takes it first
/// (tokio#8371). The next poll takes it again, with a fresh budget.
#[tokio::test]
async fn a_spent_budget_gives_back_a_lock_taken_without_queueing_except_under_fair() {
    use futures::FutureExt;
    let m = Mutex::new(0u32);
    let rw = RwLock::new(0u32);
    let mut lock = std::pin::pin!(m.lock());
    let mut write = std::pin::pin!(rw.write());
    let mut read = std::pin::pin!(rw.read());
    tokio::task::yield_now().await;
    while tokio::task::coop::consume_budget().now_or_never().is_some() {}
    assert!(futures::poll!(lock.as_mut()).is_pending(), "a spent budget did not make lock() yield");
    assert!(futures::poll!(write.as_mut()).is_pending(), "a spent budget did not make write() yield");
    let (lock_free, rw_free) = (m.try_lock().is_ok(), rw.try_write().is_ok());
    if cfg!(feature = "fair") {
        assert!(!lock_free && !rw_free, "under fair a future that yields for the budget keeps its lock, as tokio's");
    } else {
        assert!(lock_free && rw_free, "a future that yields for the budget kept a lock it took without queueing");
    }
    // A reader too (under `fair` it queues behind the yielding writer).
    assert!(futures::poll!(read.as_mut()).is_pending(), "a spent budget did not make read() yield");
    assert_eq!(rw.try_write().is_ok(), !cfg!(feature = "fair"), "the read lock was kept across the yield");
    // The next poll of the task starts with a fresh budget.
    tokio::task::yield_now().await;
    *lock.await += 1;
    *write.await += 1;
    drop(read.await);
    assert_eq!((*m.lock().await, *rw.read().await), (1, 1));
}

/// Tasks in tight loops of acquisitions, no `.await` between them but the
/// lock's: each runs out of coop budget every so many acquisitions, on the
/// fast path, after a spin or a barge, or queued, and must still finish
/// with every increment in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_in_tight_loops_run_out_of_budget_and_all_finish() {
    // Under Miri, fewer: still past one budget (128 units) per task.
    const TASKS: u64 = if cfg!(miri) { 3 } else { 16 };
    const OPS: u64 = if cfg!(miri) { 150 } else { 5_000 };
    let lock = Arc::new(RwLock::new(0u64));
    let mutex = Arc::new(Mutex::new(0u64));
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let (lock, mutex) = (lock.clone(), mutex.clone());
            tokio::spawn(async move {
                for i in 0..OPS {
                    if (i + t) % 4 == 0 {
                        *lock.write().await += 1;
                    } else {
                        let _ = *lock.read().await;
                    }
                    *mutex.lock().await += 1;
                }
            })
        })
        .collect();
    let all = async {
        for t in tasks {
            t.await.unwrap();
        }
    };
    // Miri's clock runs with the work it interprets.
    let limit = std::time::Duration::from_secs(if cfg!(miri) { 3600 } else { 60 });
    tokio::time::timeout(limit, all).await.expect("tasks in tight loops of acquisitions did not finish in time");
    let writes = (0..TASKS).map(|t| (0..OPS).filter(|i| (i + t) % 4 == 0).count() as u64).sum::<u64>();
    assert_eq!(*lock.read().await, writes);
    assert_eq!(*mutex.lock().await, TASKS * OPS);
}

/// A queued future that gets the lock (granted, or woken and winning) when
/// its task's coop budget is spent holds the lock but yields; dropped then,
/// it releases the lock it never returned.
#[tokio::test]
async fn a_queued_future_out_of_budget_when_it_gets_the_lock_frees_it_when_dropped() {
    use futures::FutureExt;
    let m = Arc::new(Mutex::new(()));
    let g = m.try_lock().unwrap();
    let mut t = spawn(Arc::clone(&m).lock_owned());
    assert_pending!(t.poll());
    drop(g);
    assert!(t.is_woken());
    while tokio::task::coop::consume_budget().now_or_never().is_some() {}
    assert_pending!(t.poll());
    assert!(m.try_lock().is_err(), "the queued future did not take the lock before yielding");
    drop(t);
    assert!(m.try_lock().is_ok(), "a dropped future kept the lock it took");
}

/// How many times `acquire` succeeds in a row within one poll of the
/// calling task, starting from a fresh coop budget.
async fn acquisitions_per_budget(mut acquire: impl FnMut() -> bool) -> usize {
    // A yield ends this poll of the task; the next one starts with a full
    // budget.
    tokio::task::yield_now().await;
    let mut n = 0;
    while acquire() {
        n += 1;
        assert!(n < 1_000_000, "acquisitions never ran out of coop budget");
    }
    n
}

#[tokio::test]
async fn every_acquisition_charges_one_unit_of_coop_budget_as_tokio_s_locks_do() {
    use futures::FutureExt;
    let tokio_mutex = tokio::sync::Mutex::new(());
    let per_budget = acquisitions_per_budget(|| tokio_mutex.lock().now_or_never().is_some()).await;
    assert!(per_budget > 1, "tokio's Mutex took {per_budget} locks per budget");

    // The uncontended path, in every mode.
    let m = Mutex::new(());
    let rw = RwLock::new(());
    assert_eq!(acquisitions_per_budget(|| m.lock().now_or_never().is_some()).await, per_budget);
    assert_eq!(acquisitions_per_budget(|| rw.read().now_or_never().is_some()).await, per_budget);
    assert_eq!(acquisitions_per_budget(|| rw.write().now_or_never().is_some()).await, per_budget);
    assert!(m.try_lock().is_ok() && rw.try_write().is_ok(), "a future dropped while yielding kept its lock");

    // The queued path: a waiter granted the lock charges the budget's last
    // unit and completes; the charge stands.
    tokio::task::yield_now().await;
    let held = m.lock().await;
    let mut queued = std::pin::pin!(m.lock());
    assert!(futures::poll!(queued.as_mut()).is_pending());
    drop(held);
    for _ in 0..per_budget - 2 {
        assert!(tokio::task::coop::consume_budget().now_or_never().is_some());
    }
    assert!(futures::poll!(queued.as_mut()).is_ready(), "the granted waiter did not complete on the last unit");
    assert!(tokio::task::coop::consume_budget().now_or_never().is_none(), "the granted waiter's charge was given back");
}

/// A waiter whose turn came through the queue keeps the lock when the coop
/// budget is spent (tokio#8371; by default only a lock taken without
/// queueing is given back): it yields holding it, nobody else gets in
/// meanwhile, and its next poll, with a fresh budget, completes. tokio's
/// own Mutex does the same.
#[tokio::test]
async fn a_granted_waiter_out_of_budget_yields_holding_the_lock_and_completes_next_poll() {
    use futures::FutureExt;
    let tokio_mutex = tokio::sync::Mutex::new(());
    let per_budget = acquisitions_per_budget(|| tokio_mutex.lock().now_or_never().is_some()).await;
    let m = Mutex::new(());
    let held = m.lock().await;
    let mut queued = std::pin::pin!(m.lock());
    assert!(futures::poll!(queued.as_mut()).is_pending());
    drop(held);
    // Spend the rest of this poll's budget (one unit went on the lock above).
    tokio::task::yield_now().await;
    for _ in 0..per_budget {
        assert!(tokio::task::coop::consume_budget().now_or_never().is_some());
    }
    assert!(tokio::task::coop::consume_budget().now_or_never().is_none(), "the budget is not spent");
    assert!(futures::poll!(queued.as_mut()).is_pending(), "completed with the budget spent");
    assert!(m.try_lock().is_err(), "the waiter let go of its turn while it yields");
    tokio::task::yield_now().await;
    let guard = futures::poll!(queued.as_mut());
    assert!(guard.is_ready(), "the waiter did not complete with a fresh budget");
    assert!(m.try_lock().is_err());
    drop(guard);
    assert!(m.try_lock().is_ok());
}

/// An owned future keeps its lock's `Arc` and uses the lock through it:
/// one that holds the last `Arc` must let the lock go before it frees it,
/// whatever step it is dropped in. Here it is dropped queued (the guard
/// ahead gone, so granted or woken, and not polled since), and holding the
/// lock while the coop budget makes it yield; Miri (`.ci/miri`) fails a
/// use after free. (No `Weak` may watch the lock: it would keep the
/// allocation, and the lock's memory readable, after the lock's drop. The
/// lock's value says when it is dropped instead.)
#[tokio::test]
async fn an_owned_future_holding_the_last_arc_lets_the_lock_go_before_freeing_it() {
    use futures::FutureExt;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::AtomicBool;
    type Acquire = Pin<Box<dyn Future<Output = ()>>>;
    /// The lock's value: marks its drop.
    struct Freed(Arc<AtomicBool>);
    impl Drop for Freed {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    fn freed() -> (Arc<AtomicBool>, Freed) {
        let flag = Arc::new(AtomicBool::new(false));
        (flag.clone(), Freed(flag))
    }
    type Held = Box<dyn std::any::Any>;
    fn check<L>(
        what: &str,
        new: impl FnOnce(Freed) -> L,
        hold: impl FnOnce(&Arc<L>) -> Held,
        acquire: impl FnOnce(Arc<L>) -> Acquire,
    ) {
        let (flag, value) = freed();
        let lock = Arc::new(new(value));
        let held = hold(&lock);
        let mut queued = acquire(lock);
        assert!(queued.as_mut().poll(&mut Context::from_waker(Waker::noop())).is_pending(), "{what}");
        drop(held);
        assert!(!flag.load(Ordering::Relaxed), "{what}: the guard ahead freed the lock");
        drop(queued);
        assert!(flag.load(Ordering::Relaxed), "{what}: the future did not free the lock");
    }
    let write = |l: &Arc<RwLock<Freed>>| -> Held { Box::new(l.clone().try_write_owned().unwrap()) };
    let read = |l: &Arc<RwLock<Freed>>| -> Held { Box::new(l.clone().try_read_owned().unwrap()) };
    let lock = |m: &Arc<Mutex<Freed>>| -> Held { Box::new(m.clone().try_lock_owned().unwrap()) };
    check("read_owned", RwLock::new, write, |l| Box::pin(l.read_owned().map(drop)));
    check("write_owned", RwLock::new, write, |l| Box::pin(l.write_owned().map(drop)));
    check("write_owned behind a reader", RwLock::new, read, |l| Box::pin(l.write_owned().map(drop)));
    check("lock_owned", Mutex::new, lock, |m| Box::pin(m.lock_owned().map(drop)));

    // Taken on the fast path, then the budget says yield: the future holds
    // the last `Arc`, and under `fair` the lock (by default it gave the lock
    // back before yielding).
    async fn yield_holding<L>(what: &str, new: impl FnOnce(Freed) -> L, acquire: impl FnOnce(Arc<L>) -> Acquire) {
        let (flag, value) = freed();
        let mut fut = acquire(Arc::new(new(value)));
        tokio::task::yield_now().await;
        while tokio::task::coop::consume_budget().now_or_never().is_some() {}
        assert!(futures::poll!(fut.as_mut()).is_pending(), "{what}: a spent budget did not make it yield");
        drop(fut);
        assert!(flag.load(Ordering::Relaxed), "{what}: the future did not free the lock");
    }
    yield_holding("read_owned", RwLock::new, |l| Box::pin(l.read_owned().map(drop))).await;
    yield_holding("write_owned", RwLock::new, |l| Box::pin(l.write_owned().map(drop))).await;
    yield_holding("lock_owned", Mutex::new, |m| Box::pin(m.lock_owned().map(drop))).await;
}

// --- threads and tasks on one lock ---------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_and_a_task_hand_the_lock_back_and_forth() {
    let lock = Arc::new(RwLock::new(0u64));
    let g = lock.write().await;
    let thread = {
        let lock = lock.clone();
        std::thread::spawn(move || {
            // Parks until the task's guard is gone.
            let mut w = lock.blocking_write();
            *w += 1;
            let task_side = lock.try_read();
            assert!(task_side.is_err());
        })
    };
    tokio::task::yield_now().await;
    drop(g);
    tokio::task::spawn_blocking(move || thread.join().unwrap()).await.unwrap();
    let held = lock.blocking_read_in_spawn_blocking().await;
    assert_eq!(held, 1);
}

trait SpawnBlockingRead {
    async fn blocking_read_in_spawn_blocking(&self) -> u64;
}
impl SpawnBlockingRead for Arc<RwLock<u64>> {
    async fn blocking_read_in_spawn_blocking(&self) -> u64 {
        let lock = self.clone();
        tokio::task::spawn_blocking(move || *lock.blocking_read()).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_works_inside_block_in_place() {
    let m = Mutex::new(1);
    let v = tokio::task::block_in_place(|| *m.blocking_lock());
    assert_eq!(v, 1);
}

#[test]
fn blocking_works_outside_any_runtime_and_inside_an_entered_handle() {
    let m = Arc::new(Mutex::new(1));
    *m.blocking_lock() += 1;
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let _enter = rt.enter();
    *m.clone().blocking_lock_owned() += 1;
    assert_eq!(*m.blocking_lock(), 3);
}

/// Anyone with a thread's `Thread` handle may unpark it, and an earlier
/// wakeup's token may arrive late: a parked waiter that finds its node still
/// waiting must park again, neither entering a held lock nor losing its
/// place. One thread waits three times (for a `Mutex`, to read behind a
/// writer, to write behind a reader) while this one unparks it for 30 ms
/// each time.
#[test]
fn stray_unparks_leave_a_blocked_thread_waiting() {
    use std::time::{Duration, Instant};
    let (m, rw) = (Arc::new(Mutex::new(())), Arc::new(RwLock::new(())));
    // The waits the thread has started, and the locks it has entered.
    let (waits, entered) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (mutex_held, write_held) = (m.clone().try_lock_owned().unwrap(), rw.clone().try_write_owned().unwrap());
    let waiter = {
        let (m, rw, waits, entered) = (m.clone(), rw.clone(), waits.clone(), entered.clone());
        std::thread::spawn(move || {
            let about_to_wait = || waits.fetch_add(1, Ordering::Release);
            let enter = || entered.fetch_add(1, Ordering::Relaxed);
            about_to_wait();
            let guard = m.blocking_lock();
            enter();
            drop(guard);
            about_to_wait();
            let guard = rw.blocking_read();
            enter();
            drop(guard);
            about_to_wait();
            let _guard = rw.blocking_write();
            enter();
        })
    };
    let unpark_for_a_while = |entered_so_far: usize| {
        wait_until("the next wait", || waits.load(Ordering::Acquire) > entered_so_far);
        let until = Instant::now() + Duration::from_millis(30);
        while Instant::now() < until {
            waiter.thread().unpark();
            std::thread::yield_now();
        }
        assert_eq!(entered.load(Ordering::Relaxed), entered_so_far, "a stray unpark let the thread into a held lock");
    };
    unpark_for_a_while(0);
    drop(mutex_held);
    unpark_for_a_while(1);
    // The queued reader gets in beside the downgraded guard.
    let read_held = write_held.downgrade();
    unpark_for_a_while(2);
    drop(read_held);
    waiter.join().unwrap();
    assert_eq!(entered.load(Ordering::Relaxed), 3);
}

/// A thread may wait for a lock in a thread-local's destructor, as it may for
/// a std or parking_lot lock (a per-thread cache flushed into shared state
/// as the thread exits). Keys are torn down in the reverse order of their
/// registration, so `FIRST`, registered before the thread touched any lock,
/// is dropped after every thread-local the lock's paths registered while the
/// thread waited at the gate and in `LAST`'s destructor (spinning, parking,
/// the blocking check): those must need no destructor, or be asked with
/// `try_with`. A panic in there would abort the test binary.
#[test]
fn a_thread_local_destructor_may_wait_for_a_lock() {
    use std::cell::RefCell;
    use std::time::Duration;
    type Locks = (Arc<Mutex<u32>>, Arc<RwLock<u32>>);
    struct OnExit(Locks);
    impl Drop for OnExit {
        fn drop(&mut self) {
            *self.0.0.blocking_lock() += 1;
            *self.0.1.blocking_write() += 1;
            drop(self.0.1.blocking_read());
        }
    }
    std::thread_local! {
        static FIRST: RefCell<Option<OnExit>> = const { RefCell::new(None) };
        static LAST: RefCell<Option<OnExit>> = const { RefCell::new(None) };
    }
    let locks = || -> Locks { (Arc::new(Mutex::new(0)), Arc::new(RwLock::new(0))) };
    let hold = |(m, r): &Locks| (m.clone().try_lock_owned().unwrap(), r.clone().try_write_owned().unwrap());
    let (first, last, gate) = (locks(), locks(), Arc::new(Mutex::new(())));
    let (closed, first_held, last_held) = (gate.clone().try_lock_owned().unwrap(), hold(&first), hold(&last));
    let thread = {
        let (first, last) = (first.clone(), last.clone());
        std::thread::spawn(move || {
            FIRST.with(|k| *k.borrow_mut() = Some(OnExit(first)));
            drop(gate.blocking_lock());
            LAST.with(|k| *k.borrow_mut() = Some(OnExit(last)));
        })
    };
    // Most likely each wait is contended: the thread spins and parks at the
    // gate, then in each destructor.
    let pause = || std::thread::sleep(Duration::from_millis(50));
    pause();
    drop(closed);
    pause();
    drop(last_held);
    pause();
    drop(first_held);
    thread.join().expect("the exiting thread's destructors took the locks");
    for (m, r) in [first, last] {
        assert_eq!((*m.try_lock().unwrap(), *r.try_read().unwrap()), (1, 1));
    }
}

#[test]
#[should_panic(expected = "Cannot block the current thread from within a runtime")]
fn blocking_inside_a_task_panics() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let m = Mutex::new(1);
        let _g = m.blocking_lock();
    });
}

/// A thread that ran blocking acquisitions inside tokio tasks (first from
/// `spawn_blocking`, then from `block_in_place`) is remembered as a task
/// thread, which only shortens how the check asks; it still panics once the
/// same thread drives async code.
#[test]
fn blocking_in_async_code_panics_on_a_thread_that_blocked_fine_in_tasks() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let m = Arc::new(Mutex::new(0));
    let m2 = m.clone();
    let handle = rt.handle().clone();
    let inner = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            for _ in 0..3 {
                *m2.blocking_lock() += 1;
            }
            // The same blocking-pool thread, the same blocking task, now
            // driving a future: tokio's blocking methods panic here.
            let inner = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                handle.block_on(async { drop(m2.blocking_lock()) })
            }));
            // And block fine again once it no longer does (the check's
            // per-thread channel went with the panic and is made anew).
            *m2.blocking_lock() += 1;
            inner
        })
        .await
        .unwrap()
    });
    let message = inner.expect_err("blocking_lock inside Handle::block_on must panic");
    let message = message.downcast_ref::<String>().map(String::as_str).or(message.downcast_ref::<&str>().copied());
    assert!(
        message.is_some_and(|m| m.contains("Cannot block the current thread from within a runtime")),
        "{message:?}"
    );
    // A worker whose task called `block_in_place`, then blocks in the task itself.
    let count = m.clone();
    let after = rt.block_on(async move {
        tokio::spawn(async move {
            tokio::task::block_in_place(|| *m.blocking_lock() += 1);
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(m.blocking_lock()))).is_err()
        })
        .await
        .unwrap()
    });
    assert!(after, "blocking_lock in a task after block_in_place must panic");
    assert_eq!(*count.try_lock().unwrap(), 5, "three, one after the panic, one in block_in_place");
}

#[test]
fn async_api_works_on_another_executor() {
    let m = Arc::new(Mutex::new(0));
    let g = m.try_lock().unwrap();
    let t = {
        let m = m.clone();
        std::thread::spawn(move || futures::executor::block_on(async move { *m.lock().await += 1 }))
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    drop(g);
    t.join().unwrap();
    assert_eq!(*futures::executor::block_on(m.lock()), 1);
}

/// Tasks of a single-threaded executor that is not tokio (no runtime
/// context, no coop budget: nothing tells the lock that spinning there is
/// futile) share a lock with blocking threads, write guards held across a
/// yield. Every task and thread finishes (a lost wakeup would leave
/// `LocalPool::run` waiting forever), no reader sees a write half done, and
/// every write counts.
#[test]
fn local_pool_tasks_and_threads_share_a_lock_with_guards_held_across_yields() {
    use futures::task::LocalSpawnExt;
    use std::future::Future;
    use std::pin::Pin;

    /// Ready at its second poll, waking its task at the first.
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if std::mem::replace(&mut self.0, true) {
                return Poll::Ready(());
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    const TASKS: u64 = 16;
    const THREADS: u64 = 2;
    let ops: u64 = if cfg!(miri) { 20 } else { 2_000 };
    // (writes so far, a copy written after a yield): equal whenever no writer
    // is inside.
    let lock = Arc::new(RwLock::new((0u64, 0u64)));
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let lock = lock.clone();
            std::thread::spawn(move || {
                for i in 0..ops {
                    if i % 4 == 0 {
                        let mut g = lock.blocking_write();
                        g.0 += 1;
                        g.1 = g.0;
                    } else {
                        let g = lock.blocking_read();
                        assert_eq!(g.0, g.1, "a thread read a write half done");
                    }
                }
            })
        })
        .collect();
    let mut pool = futures::executor::LocalPool::new();
    for t in 0..TASKS {
        let lock = lock.clone();
        pool.spawner()
            .spawn_local(async move {
                for i in 0..ops {
                    if (i + t) % 10 == 0 {
                        let mut g = lock.write().await;
                        g.0 += 1;
                        YieldNow(false).await;
                        g.1 = g.0;
                    } else {
                        let g = lock.read().await;
                        assert_eq!(g.0, g.1, "a task read a write half done");
                    }
                    if i % 16 == 0 {
                        YieldNow(false).await;
                    }
                }
            })
            .unwrap();
    }
    pool.run();
    for t in threads {
        t.join().unwrap();
    }
    let writes = TASKS * ops.div_ceil(10) + THREADS * ops.div_ceil(4);
    assert_eq!(*lock.try_read().unwrap(), (writes, writes));
}

// --- panics ------------------------------------------------------------------

#[test]
fn a_panic_while_holding_any_guard_releases_the_lock() {
    let lock = Arc::new(RwLock::new(0));
    let m = Arc::new(Mutex::new(0));
    let catch = |f: Box<dyn FnOnce()>| assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).is_err());
    {
        let lock = lock.clone();
        catch(Box::new(move || {
            let _w = lock.blocking_write();
            panic!("in a write section");
        }));
    }
    {
        let lock = lock.clone();
        catch(Box::new(move || {
            let _r = lock.clone().try_read_owned().unwrap();
            panic!("in a read section");
        }));
    }
    {
        let m = m.clone();
        catch(Box::new(move || {
            let _g = m.blocking_lock();
            panic!("in a mutex section");
        }));
    }
    // No poisoning: everything is free and usable.
    assert_eq!(*lock.try_write().unwrap(), 0);
    assert_eq!(*m.try_lock().unwrap(), 0);
}

#[test]
fn a_panic_inside_map_closures_releases_the_lock() {
    let lock = RwLock::new((1, 2));
    let m = Mutex::new((1, 2));
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| RwLockWriteGuard::map(
            lock.try_write().unwrap(),
            |_| -> &mut i32 { panic!() }
        )))
        .is_err()
    );
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| RwLockWriteGuard::downgrade_map(
            lock.try_write().unwrap(),
            |_| -> &i32 { panic!() }
        )))
        .is_err()
    );
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| RwLockWriteGuard::try_downgrade_map(
            lock.try_write().unwrap(),
            |_| -> Option<&i32> { panic!() }
        )))
        .is_err()
    );
    assert!(
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| MutexGuard::try_map(
            m.try_lock().unwrap(),
            |_| -> Option<&mut i32> { panic!() }
        )))
        .is_err()
    );
    assert!(lock.try_write().is_ok());
    assert!(m.try_lock().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_panics_holding_a_guard_releases_it() {
    let m = Arc::new(Mutex::new(0));
    let m2 = m.clone();
    let mut waiter = spawn(m.lock());
    let held = m2.clone().lock_owned().await;
    assert_pending!(waiter.poll());
    let res = tokio::spawn(async move {
        let _held = held;
        panic!("task dies holding the lock");
    })
    .await;
    assert!(res.is_err());
    assert!(waiter.is_woken());
    let _guard = assert_ready!(waiter.poll());
}

/// A lock handed to a queued task that has not run yet admits no spinner
/// (its owner is in a run queue: spinning could not win, and on the
/// grantee's own worker would keep it from running), and the grantee's
/// first poll, or its drop, opens the lock to spinners again. A hint left
/// set would switch spinning off for good.
#[test]
fn a_grant_to_a_task_closes_spinning_until_the_task_runs_or_leaves() {
    // This one needs the build's own timeout to pass (see `TIMEOUT`).
    let _default_timeout = TIMEOUT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    const HINT: &str = "granted to a waiter not yet running";
    let lock = RwLock::new(0);
    for poll_it in [true, false] {
        let guard = lock.try_write().unwrap();
        let mut waiter = spawn(lock.write());
        assert_pending!(waiter.poll());
        // Past the handoff timeout a queued task is due, so the release
        // grants it the lock rather than waking it to compete.
        std::thread::sleep(hybrid_sync::tuning().handoff_timeout * 3);
        drop(guard);
        assert!(lock.__describe().contains(HINT), "{}", lock.__describe());
        assert!(lock.try_read().is_err(), "the lock should be the task's");
        if poll_it {
            let guard = assert_ready!(waiter.poll());
            assert!(!lock.__describe().contains(HINT), "{}", lock.__describe());
            drop(guard);
        } else {
            drop(waiter);
            assert!(!lock.__describe().contains(HINT), "{}", lock.__describe());
        }
        assert!(lock.try_write().is_ok(), "the lock was not released");
    }
}

/// A release wakes a queued task to compete for the lock rather than
/// granting it, so that bargers keep the lock busy meanwhile. But when the
/// woken tasks keep finding the lock taken back by an owner that then sits
/// on it (a guard held across `.await` whose task re-acquires at once),
/// every such wakeup is a wasted poll: the thread learns that from the
/// woken tasks' spins and grants the lock to the head task on release
/// instead, as tokio does. Woken tasks that win teach nothing of the kind.
/// The learning is per thread and per lock, and this test is one thread.
#[cfg(not(any(feature = "fair", feature = "no-spin")))]
#[test]
fn woken_tasks_that_keep_losing_to_a_sleeping_owner_make_releases_grant() {
    let _timeout = timeout_not_due();
    // A round in which the test thread was preempted for half the handoff
    // timeout may have granted to a waiter that came due: it says nothing
    // of what the thread learned, and is not counted (as in `retry_if_slow`).
    let budget = hybrid_sync::tuning().handoff_timeout / 2;
    let mut slow_rounds = 0;
    let mut slow = |queued: std::time::Instant| {
        let slow = queued.elapsed() >= budget;
        slow_rounds += u32::from(slow);
        assert!(slow_rounds <= 20, "20 rounds ran past {budget:?}: the machine is too slow for this test");
        slow
    };
    let lock = RwLock::new(0);
    // Woken tasks that win: releases keep waking, never granting.
    let mut wins = 0;
    while wins < 32 {
        let guard = lock.try_write().unwrap();
        let mut waiter = spawn(lock.write());
        let queued = std::time::Instant::now();
        assert_pending!(waiter.poll());
        drop(guard);
        let granted = lock.__describe().contains("granted");
        if granted && slow(queued) {
            drop(assert_ready!(waiter.poll()));
            continue;
        }
        assert!(!granted, "a release granted: {}", lock.__describe());
        assert!(waiter.is_woken());
        drop(assert_ready!(waiter.poll()));
        wins += 1;
    }
    // Woken tasks that lose to an owner that took the lock back and sleeps
    // with it. Each round is a fresh task that loses once, so the per-node
    // rule (a task that lost twice is granted the next release) never
    // applies: what changes the release is what the thread learned.
    let mut guard = lock.try_write().unwrap();
    let mut granted_in = None;
    for round in 0..64 {
        let mut waiter = spawn(lock.write());
        let queued = std::time::Instant::now();
        assert_pending!(waiter.poll());
        drop(guard);
        match lock.try_write() {
            Ok(g) => {
                guard = g;
                assert!(waiter.is_woken(), "round {round}: the release neither woke nor granted the head");
                assert_pending!(waiter.poll());
            }
            Err(_) => {
                guard = assert_ready!(waiter.poll());
                if !slow(queued) {
                    granted_in = Some(round);
                    break;
                }
            }
        }
    }
    let round = granted_in.expect("releases kept waking tasks that always lost");
    assert!(round >= 4, "the first release to find a task head granted it (round {round})");
    drop(guard);
}
