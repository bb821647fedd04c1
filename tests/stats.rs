//! Per-lock statistics (`--features stats`; without it, all zeros).

#[cfg(feature = "stats")]
use std::sync::Arc;
#[cfg(feature = "stats")]
use std::time::Duration;

use hybrid_sync::RwLock;
#[cfg(feature = "stats")]
use hybrid_sync::stats::Event;
#[cfg(feature = "stats")]
use hybrid_sync::{LockRef, Mutex};

#[cfg(not(feature = "stats"))]
#[test]
fn without_the_feature_every_figure_is_zero() {
    let lock = RwLock::new(0);
    drop(lock.try_write());
    drop(lock.blocking_read());
    let stats = lock.stats();
    assert!(!stats.enabled());
    assert_eq!(stats.acquisitions(), 0);
    assert_eq!(stats.to_string(), "(lock statistics need the `stats` feature)");
}

/// Zero-sized counters: without the feature the lock does not grow
/// (`tracing` adds a span): its word, its reader limit and its queue's
/// pointer-sized word. (Named `sizes` as the size tests of tests/locks.rs
/// and tests/lockref.rs are, which `.ci/layout` skips.)
#[cfg(not(feature = "stats"))]
#[test]
fn sizes() {
    if !cfg!(feature = "tracing") {
        assert_eq!(size_of::<RwLock<()>>(), 8 + size_of::<usize>());
    }
}

#[cfg(feature = "stats")]
#[test]
fn uncontended_acquisitions_are_counted_and_not_contended() {
    let lock = RwLock::new(0);
    drop(lock.try_write().unwrap());
    drop(lock.try_read().unwrap());
    drop(lock.blocking_read());
    *lock.blocking_write() += 1;
    futures::executor::block_on(async {
        drop(lock.read().await);
        drop(lock.write().await);
    });
    let stats = lock.stats();
    assert!(stats.enabled());
    assert_eq!(stats.acquisitions(), 6, "{stats}");
    assert_eq!(stats.contended(), 0, "{stats}");
    assert_eq!(stats.wait_total(), Duration::ZERO);
    // A failed try is not an acquisition.
    let held = lock.try_write().unwrap();
    assert!(lock.try_read().is_err());
    drop(held);
    assert_eq!(lock.stats().acquisitions(), 7);
}

#[cfg(feature = "stats")]
#[test]
fn a_blocked_thread_counts_a_contended_acquisition_its_wait_and_its_park() {
    let lock = Arc::new(Mutex::new(0));
    // Long enough that the waiter certainly spins out and parks.
    a_thread_waits(&lock, Duration::from_millis(50));
    let stats = lock.stats();
    assert_eq!(stats.acquisitions(), 2, "{stats}");
    assert_eq!(stats.contended(), 1, "{stats}");
    assert!(stats.wait_max() >= Duration::from_millis(40), "{stats}");
    assert_eq!(stats.wait_total(), stats.wait_max());
    assert_eq!(stats.parks(), 1, "{stats}");
    assert_eq!(stats.event(Event::Contended), 1, "{stats}");
    assert!(stats.to_string().starts_with("acquisitions 2 contended 1 (50.0%)"), "{stats}");

    // A second, shorter wait: the maximum stays the first, the total adds
    // both, and the mean is over the two waits, not the four acquisitions.
    a_thread_waits(&lock, Duration::from_millis(10));
    let both = lock.stats();
    let second = both.wait_total() - stats.wait_total();
    assert_eq!((both.acquisitions(), both.contended()), (4, 2), "{both}");
    assert!(second >= Duration::from_millis(8), "{both}");
    assert_eq!(both.wait_max(), stats.wait_max().max(second), "{both}");
    assert_eq!(both.wait_mean(), both.wait_total() / 2, "{both}");
}

/// Holds `lock` for `wait` while a thread blocks on it, then lets the thread
/// in (it adds one) and waits for it to finish.
#[cfg(feature = "stats")]
fn a_thread_waits(lock: &Arc<Mutex<i32>>, wait: Duration) {
    let held = lock.try_lock().unwrap();
    let waiter = {
        let lock = Arc::clone(lock);
        std::thread::spawn(move || *lock.blocking_lock() += 1)
    };
    // The hold is timed from when the thread has queued, so that its wait
    // is at least `wait` however late it started (on a loaded machine a
    // new thread can take milliseconds to run).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !lock.__describe().contains("Write WAITING") {
        assert!(std::time::Instant::now() < deadline, "the thread did not queue: {}", lock.__describe());
        std::thread::sleep(Duration::from_micros(100));
    }
    std::thread::sleep(wait);
    drop(held);
    waiter.join().unwrap();
}

#[cfg(feature = "stats")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_counts_its_wait_and_others_locks_do_not_mix_in() {
    let lock = Arc::new(RwLock::new(0));
    let other = RwLock::new(0);
    let before = lock.stats();
    let held = lock.write().await;
    let reader = tokio::spawn({
        let lock = Arc::clone(&lock);
        async move { *lock.read().await }
    });
    tokio::time::sleep(Duration::from_millis(30)).await;
    drop(other.write().await);
    drop(held);
    assert_eq!(reader.await.unwrap(), 0);
    let period = lock.stats().since(&before);
    assert_eq!(period.acquisitions(), 2, "{period}");
    assert_eq!(period.contended(), 1, "{period}");
    assert_eq!(period.parks(), 1, "{period}");
    assert!(period.wait_max() >= Duration::from_millis(20), "{period}");
    // The release found the reader queued: it was granted or woken.
    assert!(period.event(Event::Dispatch) >= 1, "{period}");
    assert_eq!(other.stats().acquisitions(), 1);
    assert_eq!(other.stats().contended(), 0);
}

#[cfg(feature = "stats")]
#[test]
fn a_cancelled_wait_is_not_an_acquisition() {
    let lock = Mutex::new(());
    let held = lock.try_lock().unwrap();
    let mut waiting = tokio_test::task::spawn(lock.lock());
    assert!(waiting.poll().is_pending());
    drop(waiting);
    drop(held);
    let stats = lock.stats();
    assert_eq!(stats.acquisitions(), 1, "{stats}");
    assert_eq!(stats.contended(), 0, "{stats}");
    assert_eq!(stats.event(Event::Cancel), 1, "{stats}");
}

/// A task's coop budget runs out once per 128 acquisitions. By default a
/// lock taken without queueing is then given back before the task yields,
/// and taken anew when the task runs next: one acquisition for the caller,
/// and one for the counters, whether the take was uncontended (one task
/// alone) or won by a spin or a barge (tasks in a tight loop on two
/// workers), and with its wait counted from its first poll. Under `fair`
/// the task yields holding the lock, which counts once as well.
#[cfg(feature = "stats")]
#[test]
fn an_acquisition_given_back_to_yield_counts_once() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let lock = Arc::new(Mutex::new(0u32));
    let alone = runtime.spawn({
        let lock = Arc::clone(&lock);
        async move {
            for _ in 0..1_000 {
                *lock.lock().await += 1;
            }
        }
    });
    runtime.block_on(alone).unwrap();
    let stats = lock.stats();
    assert_eq!(stats.acquisitions(), 1_000, "{stats}");
    assert_eq!(stats.contended(), 0, "{stats}");

    let lock = Arc::new(RwLock::new(0u32));
    let (tasks, rounds) = (8, 20_000);
    let handles: Vec<_> = (0..tasks)
        .map(|i| {
            let lock = Arc::clone(&lock);
            runtime.spawn(async move {
                for n in 0..rounds {
                    // Sections long enough that the two workers' tasks meet.
                    if (n + i) % 10 == 0 {
                        let mut guard = lock.write().await;
                        for _ in 0..100 {
                            *guard = std::hint::black_box(*guard);
                        }
                        *guard += 1;
                    } else {
                        let guard = lock.read().await;
                        for _ in 0..10 {
                            std::hint::black_box(*guard);
                        }
                    }
                }
            })
        })
        .collect();
    runtime.block_on(async {
        for handle in handles {
            handle.await.unwrap();
        }
    });
    assert_eq!(*lock.try_read().unwrap(), tasks * rounds / 10);
    let stats = lock.stats();
    assert_eq!(stats.acquisitions(), u64::from(tasks * rounds) + 1, "{stats}");
    assert!(stats.contended() <= stats.acquisitions(), "{stats}");
}

#[cfg(feature = "stats")]
#[test]
fn lockref_counts_its_lock_not_its_lockless_count_updates() {
    let r = LockRef::new(());
    r.get();
    r.put();
    drop(r.lock());
    assert_eq!(r.stats().acquisitions(), 1);
    assert_eq!(r.stats().contended(), 0);
}

#[cfg(feature = "stats")]
#[test]
fn contention_between_threads_is_seen_as_spins_or_parks() {
    let lock = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let mut g = lock.blocking_lock();
                    *g += 1;
                    for _ in 0..50 {
                        std::hint::spin_loop();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = lock.stats();
    assert_eq!(*lock.blocking_lock(), 80_000);
    assert_eq!(stats.acquisitions(), 80_000, "{stats}");
    assert!(stats.contended() > 0, "{stats}");
    // Every blocking acquisition that entered the contended path finished
    // there, and it spun or parked on the way (or barged in under the queue
    // lock, with spinning compiled out).
    assert_eq!(stats.contended(), stats.event(Event::Contended), "{stats}");
    assert!(stats.spins() + stats.parks() + stats.event(Event::Barge) > 0, "{stats}");
    assert!(stats.spin_wins() <= stats.spins(), "{stats}");
}

/// A task facing a held lock spins first while only tasks wait; while a
/// blocking thread waits in the queue it queues at once instead (a spinning
/// task holds its worker's CPU, which the queued threads need to take their
/// turns), and spins again once no thread waits.
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn a_task_queues_without_spinning_while_a_blocking_thread_waits() {
    let lock = Arc::new(Mutex::new(0));
    // A task's first poll of the held lock, and what it did there.
    fn first_poll(
        lock: &Mutex<i32>,
    ) -> (tokio_test::task::Spawn<impl Future<Output = hybrid_sync::MutexGuard<'_, i32>>>, hybrid_sync::stats::LockStats)
    {
        let before = lock.stats();
        let mut waiting = tokio_test::task::spawn(lock.lock());
        assert!(waiting.poll().is_pending(), "the held lock was taken");
        let period = lock.stats().since(&before);
        (waiting, period)
    }
    let held = lock.try_lock().unwrap();

    let (alone, period) = first_poll(&lock);
    assert_eq!(period.spins(), 1, "with nobody queued, a task did not spin: {period}");
    drop(alone);

    let thread = std::thread::spawn({
        let lock = Arc::clone(&lock);
        move || *lock.blocking_lock() += 1
    });
    let start = std::time::Instant::now();
    while lock.stats().parks() < 2 {
        assert!(start.elapsed() < Duration::from_secs(20), "the thread never queued");
        std::thread::sleep(Duration::from_millis(1));
    }
    let (mut behind, period) = first_poll(&lock);
    assert_eq!(period.spins(), 0, "a task spun while a blocking thread waited in the queue: {period}");
    assert_eq!(period.parks(), 1, "{period}");

    // The thread goes first (it queued first), then the task.
    drop(held);
    thread.join().unwrap();
    let start = std::time::Instant::now();
    while !behind.is_woken() {
        assert!(start.elapsed() < Duration::from_secs(20), "the task was never woken");
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut guard = match behind.poll() {
        std::task::Poll::Ready(guard) => guard,
        std::task::Poll::Pending => panic!("the woken task did not get the free lock"),
    };
    *guard += 1;
    drop(guard);
    drop(behind);
    assert_eq!(*lock.try_lock().unwrap(), 2);

    // No thread waits any more: a task spins again.
    let held = lock.try_lock().unwrap();
    let (again, period) = first_poll(&lock);
    assert_eq!(period.spins(), 1, "a task still did not spin after the thread left: {period}");
    drop(again);
    drop(held);
}

/// Seed 003: a newcomer that finds a handoff pending does not spin at all
/// (a spinner cannot win against the bit, so spinning only burns a CPU); it
/// queues at once behind the head that demanded the lock. Counted on the
/// lock: the newcomer's spin phase ends before its first poll, as
/// `SpinHandoff`, never as a spin that gave up.
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn a_newcomer_facing_a_pending_handoff_queues_without_spinning() {
    let lock = Arc::new(Mutex::new(0));
    let held = lock.try_lock().unwrap();
    let mut overdue = tokio_test::task::spawn(lock.lock());
    assert!(overdue.poll().is_pending());
    std::thread::sleep(hybrid_sync::tuning().handoff_timeout * 3);
    // Polled again, past the timeout and with the lock held, the head
    // demands the lock (under `fair` it is owed the lock anyway).
    assert!(overdue.poll().is_pending());
    assert!(cfg!(feature = "fair") || lock.__describe().contains("handoff"), "{}", lock.__describe());
    // Counted as a handoff before any release grants one.
    assert!(cfg!(feature = "fair") || lock.stats().handoffs() == 1, "{}", lock.stats());
    let before = lock.stats();
    let newcomer = std::thread::spawn({
        let lock = Arc::clone(&lock);
        move || *lock.blocking_lock() += 1
    });
    let start = std::time::Instant::now();
    while lock.stats().since(&before).parks() < 1 {
        assert!(start.elapsed() < Duration::from_secs(20), "the newcomer never queued");
        std::thread::sleep(Duration::from_millis(1));
    }
    let period = lock.stats().since(&before);
    assert_eq!(period.event(Event::SpinGiveUp), 0, "the newcomer spun on a pending handoff: {period}");
    assert_eq!(period.event(Event::SpinHandoff), 1, "{period}");
    // The release hands the lock to the head, then the newcomer gets it.
    drop(held);
    let mut guard = match overdue.poll() {
        std::task::Poll::Ready(guard) => guard,
        std::task::Poll::Pending => panic!("the release did not hand the lock to the head"),
    };
    *guard += 1;
    drop(guard);
    newcomer.join().unwrap();
    assert_eq!(*lock.try_lock().unwrap(), 2);
}

/// `lock` write-locked by the caller, and a task's `write` queued behind it.
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
fn write_locked_with_a_writer_queued(
    lock: &RwLock<i32>,
) -> (
    hybrid_sync::RwLockWriteGuard<'_, i32>,
    tokio_test::task::Spawn<impl Future<Output = hybrid_sync::RwLockWriteGuard<'_, i32>>>,
) {
    let held = lock.try_write().unwrap();
    let mut queued = tokio_test::task::spawn(lock.write());
    assert!(queued.poll().is_pending(), "the write-locked lock was taken");
    (held, queued)
}

/// A lock granted to a queued task that has not run yet admits no spinner:
/// its owner sits in a run queue, so a spin could only give up. A task
/// reader spins without a spinner slot, so the grant's hint is all that
/// keeps it from spinning (a writer's slot claim checks the hint as well).
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn a_lock_granted_to_a_task_not_yet_running_admits_no_spinner() {
    let lock = RwLock::new(0);
    let (held, mut head) = write_locked_with_a_writer_queued(&lock);
    // Past the handoff timeout the queued task is due, so the release grants
    // it the lock (under `fair` every release does).
    std::thread::sleep(hybrid_sync::tuning().handoff_timeout * 3);
    drop(held);
    assert!(lock.__describe().contains("granted to a waiter not yet running"), "{}", lock.__describe());
    let before = lock.stats();
    let mut reader = tokio_test::task::spawn(lock.read());
    let mut writer = tokio_test::task::spawn(lock.write());
    assert!(reader.poll().is_pending(), "a newcomer read the lock granted to the head");
    assert!(writer.poll().is_pending(), "a newcomer took the lock granted to the head");
    // Under `fair` the writer, finding the reader queued, stops its spin
    // phase before its first probe (`SpinHandoff`); nobody runs one.
    let period = lock.stats().since(&before);
    let ran = period.event(Event::SpinGiveUp) + period.event(Event::SpinWin);
    assert_eq!(ran, 0, "a newcomer spun on a lock granted to a task not yet running: {period}");
    let mut guard = match head.poll() {
        std::task::Poll::Ready(guard) => guard,
        std::task::Poll::Pending => panic!("the head did not find its granted lock"),
    };
    *guard += 1;
    drop(guard);
    drop(reader);
    drop(writer);
    assert_eq!(*lock.try_read().unwrap(), 1);
}

/// A reader that finds a writer queued cannot take the lock ahead of it
/// (a queued writer blocks new readers), so it does not spin: its spin
/// phase ends before its first probe, counted as stopped (`SpinHandoff`),
/// never as a spin that ran and gave up. Where it would not have spun
/// anyway (a current-thread runtime, a spin limit of 0) nothing is counted.
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn a_reader_behind_a_queued_writer_queues_without_spinning() {
    let lock = RwLock::new(0);
    let (held, queued_writer) = write_locked_with_a_writer_queued(&lock);
    let before = lock.stats();
    let mut reader = tokio_test::task::spawn(lock.read());
    assert!(reader.poll().is_pending(), "a reader passed the queued writer");
    let period = lock.stats().since(&before);
    assert_eq!(period.event(Event::SpinGiveUp), 0, "a reader spun behind a queued writer: {period}");
    assert_eq!(period.event(Event::SpinHandoff), 1, "{period}");
    drop(reader);
    drop(queued_writer);
    drop(held);

    // Then on a current-thread runtime, on the same thread: the contention
    // outside any runtime above must not have left "spinning pays" behind
    // (the runtime's flavour is cached per thread, a runtime's answer only).
    reader_behind_a_queued_writer_on_a_current_thread_runtime(&lock);
}

#[cfg(all(feature = "stats", not(feature = "no-spin")))]
fn reader_behind_a_queued_writer_on_a_current_thread_runtime(lock: &RwLock<i32>) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let held = lock.write().await;
        let mut queued_writer = tokio_test::task::spawn(lock.write());
        assert!(queued_writer.poll().is_pending());
        let before = lock.stats();
        let mut reader = tokio_test::task::spawn(lock.read());
        assert!(reader.poll().is_pending(), "a reader passed the queued writer");
        let period = lock.stats().since(&before);
        assert_eq!(period.spins(), 0, "a spin phase counted on a current-thread runtime: {period}");
        drop(held);
        *queued_writer.await += 1;
        assert_eq!(*reader.await, 1);
    });
}

/// On a current-thread runtime the owner of a held lock can only run on the
/// thread a waiting task would spin on: the task queues at once, without
/// spinning (a spin there could only ever give up).
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn a_task_on_a_current_thread_runtime_queues_without_spinning() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let lock = Mutex::new(0);
    rt.block_on(async {
        let held = lock.lock().await;
        let before = lock.stats();
        let mut waiting = tokio_test::task::spawn(lock.lock());
        assert!(waiting.poll().is_pending(), "the held lock was taken");
        let period = lock.stats().since(&before);
        assert_eq!(period.event(Event::Contended), 1, "{period}");
        assert_eq!(period.spins(), 0, "a task spun on a current-thread runtime: {period}");
        drop(held);
        assert!(waiting.is_woken());
        *waiting.await += 1;
    });
    assert_eq!(*lock.try_lock().unwrap(), 1);
}

/// Tasks that hold their guards across `.await`, nine in ten of them to read
/// (a handler that reads shared state around an awaited call): a run of
/// readers woken to compete mostly finds the lock write-locked again by the
/// time it runs, by a writer that then sits on it until its own task runs
/// again, and each such wakeup is a wasted poll for most of the run. The
/// lock learns that and grants the runs instead, as it does for writers
/// (`backoff::wake_is_futile`): here nearly every contended acquisition is
/// a grant, where waking the runs granted one in a few thousand.
#[cfg(all(feature = "stats", not(feature = "no-spin")))]
#[test]
fn read_guards_held_across_await_are_granted_not_woken_to_lose() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let lock = Arc::new(RwLock::new(0u64));
    let before = lock.stats();
    rt.block_on(async {
        let tasks: Vec<_> = (0..32u64)
            .map(|i| {
                let lock = Arc::clone(&lock);
                tokio::spawn(async move {
                    let mut x = 0x9E37_79B9_7F4A_7C15 ^ (i + 1);
                    for _ in 0..500 {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if x % 10 == 0 {
                            let mut guard = lock.write().await;
                            tokio::task::yield_now().await;
                            *guard += 1;
                        } else {
                            let guard = lock.read().await;
                            tokio::task::yield_now().await;
                            std::hint::black_box(*guard);
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let period = lock.stats().since(&before);
    assert_eq!(period.acquisitions(), 32 * 500, "{period}");
    let (grants, contended) = (period.event(Event::Grant), period.contended());
    assert!(contended > 1000, "the workload did not contend: {period}");
    assert!(
        grants * 2 >= contended,
        "{grants} grants for {contended} contended acquisitions: woken runs of readers kept losing \
         instead of being granted the lock\n{period}"
    );
}
