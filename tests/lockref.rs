//! `LockRef` and `LockArc`: every operation, the zero and dead edge cases,
//! lockless updates waiting for a held lock, threads and tasks in one queue,
//! and two `LockRef`s sharing a wait-queue bucket. (The threads + tasks
//! stress that checks the final count exactly is in tests/torture.rs.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::Duration;

use hybrid_sync::{LockArc, LockRef, MAX_COUNT};
use tokio_test::{assert_pending, assert_ready, task::spawn};

/// `n` iterations of a stress loop, or a hundredth of them under Miri,
/// which runs ~1000x slower (`.ci/miri`): enough interleavings of the
/// queue code for it to check, in seconds rather than hours.
const fn iters(n: usize) -> usize {
    if cfg!(miri) { n / 100 } else { n }
}

fn panic_message(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("expected a panic");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The panic message of `op` on another thread while this one holds `r`'s
/// lock for a while, so that `op` goes through the lock path (it waits for
/// the lock, then panics under it).
fn panic_behind_the_lock(r: &LockRef<()>, op: impl FnOnce(&LockRef<()>) + Send) -> String {
    let guard = r.lock();
    thread::scope(|s| {
        let h = s.spawn(move || panic_message(|| op(r)));
        thread::sleep(Duration::from_millis(20));
        drop(guard);
        h.join().unwrap()
    })
}

#[test]
fn sizes() {
    // The `stats` feature adds per-lock counters (documented in stats.rs),
    // `tracing` the lock's span (trace.rs).
    if !cfg!(any(feature = "stats", feature = "tracing")) {
        if cfg!(target_has_atomic = "64") {
            assert_eq!(size_of::<LockRef<()>>(), 8);
            assert_eq!(size_of::<LockRef<u32>>(), 16);
        } else {
            // Without 64-bit atomics (32-bit PowerPC, `.ci/cross`) the word
            // is a `u64` behind a mutex (`atomic64` in src/loom.rs).
            assert_eq!(size_of::<LockRef<()>>(), size_of::<std::sync::Mutex<u64>>());
        }
    }
    assert_eq!(size_of::<LockArc<()>>(), size_of::<usize>());
    assert_eq!(size_of::<Option<LockArc<()>>>(), size_of::<usize>());
}

/// `lock_async`'s future is the `Mutex`'s, no bigger than tokio's
/// `Mutex::lock` (120 bytes), for `LockArc` as for `LockRef` (an `async`
/// block around `LockRef`'s made `LockArc`'s 224 bytes until 2026-12-04).
#[test]
fn lock_futures_are_no_bigger_than_tokios_mutex_lock() {
    // `tracing` adds the spans of a wait to the future.
    if cfg!(feature = "tracing") {
        return;
    }
    let tokio = tokio::sync::Mutex::new(0u64);
    let tokios = size_of_val(&tokio.lock());
    let (r, a) = (LockRef::new(0u64), LockArc::new(0u64));
    let (lockref, lockarc) = (size_of_val(&r.lock_async()), size_of_val(&a.lock_async()));
    if cfg!(target_pointer_width = "32") {
        // tokio's is 60 bytes there; ours keeps its 64-bit size (see
        // `futures_are_no_bigger_than_tokios` in tests/locks.rs).
        assert!(lockref <= 96 && lockarc <= 96, "LockRef's lock_async: {lockref} bytes, LockArc's {lockarc}");
        return;
    }
    assert!(lockref <= tokios, "LockRef::lock_async's future is {lockref} bytes, tokio's Mutex::lock {tokios}");
    assert!(lockarc <= tokios, "LockArc::lock_async's future is {lockarc} bytes, tokio's Mutex::lock {tokios}");
}

#[test]
fn new_and_with_count() {
    let r = LockRef::new(());
    assert_eq!(r.count(), 1);
    assert!(!r.is_dead());
    assert_eq!(LockRef::with_count(0, ()).count(), 0);
    assert_eq!(LockRef::with_count(MAX_COUNT, ()).count(), MAX_COUNT);
    let msg = panic_message(|| {
        LockRef::with_count(MAX_COUNT + 1, ());
    });
    assert!(msg.contains("over MAX_COUNT"), "{msg}");
    assert_eq!(LockRef::<u8>::default().count(), 1);
}

#[test]
fn get_and_put() {
    let r = LockRef::with_count(0, ());
    for i in 1..=10 {
        r.get();
        assert_eq!(r.count(), i);
    }
    for i in (0..10).rev() {
        r.put();
        assert_eq!(r.count(), i);
    }
    let msg = panic_message(|| r.put());
    assert!(msg.contains("no reference to give back"), "{msg}");
    assert_eq!(r.count(), 0);
    // Through the lock path too: a put that finds the lock held waits for it,
    // then finds nothing to give back.
    let t = panic_behind_the_lock(&r, |r| r.put());
    assert!(t.contains("no reference to give back"), "{t}");
    assert_eq!(r.count(), 0);
    // The lock was released by the panicking fallback.
    assert!(r.try_lock().is_ok());
}

#[test]
fn overflow_panics_and_leaves_the_count() {
    let r = LockRef::with_count(MAX_COUNT, ());
    let msg = panic_message(|| r.get());
    assert!(msg.contains("overflow"), "{msg}");
    let msg = panic_message(|| {
        r.get_not_zero();
    });
    assert!(msg.contains("overflow"), "{msg}");
    let msg = panic_message(|| {
        r.get_not_dead();
    });
    assert!(msg.contains("overflow"), "{msg}");
    assert_eq!(r.count(), MAX_COUNT);
    // Through the lock path too.
    let t = panic_behind_the_lock(&r, |r| r.get());
    assert!(t.contains("overflow"), "{t}");
    assert_eq!(r.count(), MAX_COUNT);
    // The lock was released by the panicking fallback.
    assert!(r.try_lock().is_ok());
}

#[test]
fn conditional_gets() {
    let r = LockRef::with_count(0, ());
    assert!(!r.get_not_zero());
    assert_eq!(r.count(), 0);
    assert!(r.get_not_dead());
    assert_eq!(r.count(), 1);
    assert!(r.get_not_zero());
    assert_eq!(r.count(), 2);
    r.lock().mark_dead();
    assert!(r.is_dead());
    assert_eq!(r.count(), 0);
    assert!(!r.get_not_zero());
    assert!(!r.get_not_dead());
    assert_eq!(r.count(), 0);
    let msg = panic_message(|| r.get());
    assert!(msg.contains("dead"), "{msg}");
    let msg = panic_message(|| r.put());
    assert!(msg.contains("dead"), "{msg}");
    // A lock holder can revive it.
    r.lock().set_count(3);
    assert!(!r.is_dead());
    assert!(r.get_not_zero());
    assert_eq!(r.count(), 4);
}

#[test]
fn conditional_puts() {
    let r = LockRef::with_count(3, ());
    assert!(r.put_not_zero());
    assert!(r.put_not_zero());
    assert!(!r.put_not_zero());
    assert_eq!(r.count(), 1);
    assert_eq!(r.put_return(), Some(0));
    assert_eq!(r.put_return(), None);
    assert!(!r.put_not_zero());
    r.lock().set_count(2);
    assert_eq!(r.put_return(), Some(1));
    {
        let _held = r.lock();
        // Held: put_return never waits.
        assert_eq!(r.put_return(), None);
    }
    r.lock().mark_dead();
    assert_eq!(r.put_return(), None);
    assert!(!r.put_not_zero());
}

#[test]
fn put_or_lock() {
    let r = LockRef::with_count(3, 10);
    assert!(r.put_or_lock().is_none());
    assert!(r.put_or_lock().is_none());
    assert_eq!(r.count(), 1);
    let mut guard = r.put_or_lock().expect("count 1: the lock, count unchanged");
    assert_eq!(guard.count(), 1);
    assert_eq!(*guard, 10);
    *guard = 0;
    guard.mark_dead();
    assert!(guard.is_dead());
    drop(guard);
    // Dead or zero: always the lock.
    let guard = r.put_or_lock().expect("dead");
    assert!(guard.is_dead());
    drop(guard);
    let z = LockRef::with_count(0, ());
    assert_eq!(z.put_or_lock().expect("zero").count(), 0);
}

#[test]
fn guard_count_and_value() {
    let r = LockRef::new(String::from("a"));
    let mut g = r.lock();
    g.push('b');
    assert_eq!(g.count(), 1);
    g.set_count(7);
    assert_eq!(g.count(), 7);
    assert_eq!(format!("{g:?}"), "\"ab\"");
    assert_eq!(format!("{g}"), "ab");
    let msg = panic_message(|| g.set_count(MAX_COUNT + 1));
    assert!(msg.contains("over MAX_COUNT"), "{msg}");
    drop(g);
    assert_eq!(r.count(), 7);
    assert_eq!(format!("{r:?}"), "LockRef { count: 7, value: \"ab\" }");
    let g = r.lock();
    assert_eq!(format!("{r:?}"), "LockRef { count: 7, value: <locked> }");
    drop(g);
    r.lock().mark_dead();
    assert_eq!(format!("{r:?}"), "LockRef { count: \"dead\", value: \"ab\" }");
    let mut r = r;
    r.get_mut().push('c');
    assert_eq!(r.into_inner(), "abc");
}

#[test]
fn try_lock() {
    let r = LockRef::new(());
    let g = r.try_lock().unwrap();
    assert_eq!(r.try_lock().unwrap_err().to_string(), "operation would block");
    drop(g);
    assert!(r.try_lock().is_ok());
}

/// Every lockless operation waits while the lock is held, so a lock holder
/// sees a count nobody else changes ("as if the lock had been taken").
#[test]
fn updates_wait_for_a_held_lock() {
    type Op = fn(&LockRef<()>);
    let ops: [(&str, Op, u32); 5] = [
        ("get", |r| r.get(), 6),
        ("get_not_zero", |r| assert!(r.get_not_zero()), 6),
        ("get_not_dead", |r| assert!(r.get_not_dead()), 6),
        ("put", |r| r.put(), 4),
        ("put_not_zero", |r| assert!(r.put_not_zero()), 4),
    ];
    for (name, op, after) in ops {
        let r = LockRef::with_count(5, ());
        let done = AtomicBool::new(false);
        thread::scope(|s| {
            let guard = r.lock();
            s.spawn(|| {
                op(&r);
                done.store(true, SeqCst);
            });
            thread::sleep(Duration::from_millis(30));
            assert!(!done.load(SeqCst), "{name} did not wait for the lock");
            assert_eq!(guard.count(), 5, "{name} changed the count under the lock");
            drop(guard);
        });
        assert!(done.load(SeqCst));
        assert_eq!(r.count(), after, "{name}");
    }
}

#[test]
fn async_lock_queues_behind_a_thread_and_is_cancel_safe() {
    let r = LockRef::new(0);
    let held = r.lock();
    let mut first = spawn(r.lock_async());
    let mut second = spawn(r.lock_async());
    assert_pending!(first.poll());
    assert_pending!(second.poll());
    // A count update while the lock is held and tasks wait falls back to the
    // lock and queues behind them; do it on a thread, and release only once
    // it has queued: a thread still spinning when the lock is released
    // takes it first, as it may (Miri's schedules find that order).
    thread::scope(|s| {
        let t = s.spawn(|| r.get());
        let start = std::time::Instant::now();
        while !r.__describe().contains("wakes thread") {
            assert!(start.elapsed() < Duration::from_secs(60), "the thread never queued: {}", r.__describe());
            thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        assert!(first.is_woken());
        let mut g = assert_ready!(first.poll());
        *g += 1;
        assert_eq!(g.count(), 1, "the thread's get is queued behind us");
        drop(g);
        // Dropping a future that was woken (or granted) passes the lock on.
        drop(second);
        t.join().unwrap();
    });
    assert_eq!(r.count(), 2);
    assert_eq!(*r.lock(), 1);
    assert!(r.try_lock().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_and_threads_share_the_lock() {
    let r = Arc::new(LockRef::new(0u64));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let r = r.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..iters(500) {
                *r.lock_async().await += 1;
                tokio::task::yield_now().await;
            }
        }));
    }
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            thread::spawn(move || {
                for _ in 0..iters(2000) {
                    *r.lock() += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*r.lock(), (8 * iters(500) + 2 * iters(2000)) as u64);
    assert_eq!(r.count(), 1);
}

/// Two `LockRef`s whose waiters share one queue bucket: each release wakes
/// its own waiters only, in their own order.
#[test]
fn colliding_buckets_keep_their_waiters_apart() {
    let pool: Vec<Box<LockRef<u32>>> = (0..2048).map(|_| Box::new(LockRef::new(0))).collect();
    let mut by_bucket = std::collections::HashMap::new();
    let (a, b) = pool
        .iter()
        .find_map(|r| {
            let bucket = hybrid_sync::__testing::lockref_bucket(&**r);
            by_bucket.insert(bucket, &**r).map(|other| (other, &**r))
        })
        .expect("2048 locks in 128 buckets collide");
    assert_eq!(hybrid_sync::__testing::lockref_bucket(a), hybrid_sync::__testing::lockref_bucket(b));

    let ga = a.lock();
    let gb = b.lock();
    let mut a1 = spawn(a.lock_async());
    let mut b1 = spawn(b.lock_async());
    let mut a2 = spawn(a.lock_async());
    let mut b2 = spawn(b.lock_async());
    for f in [&mut a1, &mut a2] {
        assert_pending!(f.poll());
    }
    for f in [&mut b1, &mut b2] {
        assert_pending!(f.poll());
    }
    drop(gb);
    assert!(!a1.is_woken() && !a2.is_woken(), "b's release woke a's waiters");
    assert!(b1.is_woken());
    let g = assert_ready!(b1.poll());
    assert_pending!(b2.poll());
    drop(g);
    drop(assert_ready!(b2.poll()));
    assert_pending!(a1.poll());
    drop(ga);
    assert!(a1.is_woken());
    let g = assert_ready!(a1.poll());
    drop(a2); // cancelled while queued
    drop(g);
    assert!(a.try_lock().is_ok() && b.try_lock().is_ok());

    // And under load: threads on both locks at once.
    thread::scope(|s| {
        for r in [a, b, a, b] {
            s.spawn(move || {
                for _ in 0..iters(20_000) {
                    *r.lock() += 1;
                    r.get();
                    r.put();
                }
            });
        }
    });
    assert_eq!((*a.lock(), *b.lock()), (2 * iters(20_000) as u32, 2 * iters(20_000) as u32));
    assert_eq!((a.count(), b.count()), (1, 1));
}

struct CountsDrops(Arc<AtomicUsize>);
impl Drop for CountsDrops {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn lock_arc_counts_handles_and_frees_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    let a = LockArc::new(CountsDrops(drops.clone()));
    assert_eq!(LockArc::count(&a), 1);
    let b = a.clone();
    assert!(LockArc::ptr_eq(&a, &b));
    assert_eq!(LockArc::count(&a), 2);
    assert_eq!(a.lock().count(), 2);
    drop(a);
    assert_eq!(LockArc::count(&b), 1);
    assert_eq!(drops.load(SeqCst), 0);
    drop(b);
    assert_eq!(drops.load(SeqCst), 1);

    // Many threads cloning and dropping, half the time under the lock (a
    // handle's count does not wait for it), the last handle dropped by
    // whichever thread ends last: the value is freed exactly once.
    let drops = Arc::new(AtomicUsize::new(0));
    let root = LockArc::new(CountsDrops(drops.clone()));
    thread::scope(|s| {
        for i in 0..4 {
            let mine = root.clone();
            s.spawn(move || {
                for j in 0..iters(10_000) {
                    let c = mine.clone();
                    if j % 2 == 0 {
                        drop(mine.clone());
                        drop(c);
                    } else {
                        let g = mine.lock();
                        drop(mine.clone());
                        // Either order: the handle's drop or the unlock first.
                        if i % 2 == 0 {
                            drop(g);
                            drop(c);
                        } else {
                            drop(c);
                            drop(g);
                        }
                    }
                }
            });
        }
    });
    assert_eq!(LockArc::count(&root), 1);
    thread::scope(|s| {
        for _ in 0..2 {
            let mine = root.clone();
            s.spawn(move || drop(mine));
        }
        drop(root);
    });
    assert_eq!(drops.load(SeqCst), 1);
}

/// `LockArc::clone` past `MAX_COUNT` handles panics, takes its add back
/// and leaves the handles working: the limit is reached by leaking handles
/// through the testing hook, since 2^31 clones would take seconds.
#[test]
fn lock_arc_clone_past_max_count_panics_and_leaves_the_count() {
    use hybrid_sync::__testing::{lockarc_leak_handles, lockarc_reclaim_handles};
    let drops = Arc::new(AtomicUsize::new(0));
    let a = LockArc::new(CountsDrops(drops.clone()));
    lockarc_leak_handles(&a, MAX_COUNT - 2);
    let last = a.clone();
    assert_eq!(LockArc::count(&a), MAX_COUNT);
    let msg = panic_message(|| drop(a.clone()));
    assert!(msg.contains("LockArc::clone") && msg.contains("overflow"), "{msg}");
    assert_eq!(LockArc::count(&a), MAX_COUNT, "the failed clone's add was not taken back");
    // Again while the lock is held: a handle's count does not wait for it.
    let guard = last.lock();
    let msg = panic_message(|| drop(a.clone()));
    assert!(msg.contains("overflow"), "{msg}");
    assert_eq!(guard.count(), MAX_COUNT);
    drop(guard);
    // Below the limit again, clones work and the count comes back down.
    drop(last);
    drop(a.clone());
    // SAFETY: the handles leaked above, never used.
    unsafe { lockarc_reclaim_handles(&a, MAX_COUNT - 2) };
    assert_eq!(LockArc::count(&a), 1);
    // The hooks refuse to pass the limit or to take the last handle.
    let msg = panic_message(|| lockarc_leak_handles(&a, MAX_COUNT));
    assert!(msg.contains("out of 1..=MAX_COUNT"), "{msg}");
    // SAFETY: panics before it changes anything.
    let msg = panic_message(|| unsafe { lockarc_reclaim_handles(&a, 1) });
    assert!(msg.contains("out of 1..=MAX_COUNT"), "{msg}");
    assert_eq!((LockArc::count(&a), drops.load(SeqCst)), (1, 0));
    drop(a);
    assert_eq!(drops.load(SeqCst), 1);
}

/// Runs `f` on a thread of its own and fails, rather than hangs, if it
/// does not return within a minute.
///
/// The thread is polled and then joined, not waited for on a channel:
/// ThreadSanitizer cannot see the synchronization inside std's channels,
/// whose code it instruments while the std they lock with is not, and
/// reported the receiver's wakeup as a race with the sender's drop (a
/// clean-clone `.ci/run` of 60a7caf). A join is synchronization it sees.
fn within_a_minute(what: &str, f: impl FnOnce() + Send + 'static) {
    let t = thread::spawn(f);
    let start = std::time::Instant::now();
    while !t.is_finished() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what}: still waiting after a minute (deadlocked)");
        thread::sleep(Duration::from_millis(1));
    }
    if let Err(panic) = t.join() {
        std::panic::resume_unwind(panic);
    }
}

/// A handle is cloned and dropped without waiting for the lock, as an
/// `Arc<Mutex<T>>` is: by the thread that holds the lock (which would wait
/// for itself), and by a task while another task on the same
/// current-thread runtime holds the lock across `.await` (which would wait
/// for a task that cannot run until it returns). Both deadlocked while a
/// clone was `LockRef::get`, which waits for a held lock.
#[test]
fn lock_arc_clones_and_drops_handles_beside_a_held_lock() {
    within_a_minute("a clone by the lock's holder", || {
        let a = LockArc::new(0u32);
        let mut g = a.lock();
        let b = a.clone();
        assert_eq!(g.count(), 2);
        *g += 1;
        drop(b);
        assert_eq!(g.count(), 1);
        drop(g);
        assert_eq!((LockArc::count(&a), *a.lock()), (1, 1));
    });
    within_a_minute("a clone beside a guard held across .await", || {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let a = LockArc::new(0u32);
            let holder = async {
                let mut g = a.lock_async().await;
                tokio::task::yield_now().await;
                *g += 1;
            };
            let cloner = async {
                let b = a.clone();
                tokio::task::yield_now().await;
                drop(b.clone());
                drop(b);
            };
            futures::join!(holder, cloner);
            assert_eq!((LockArc::count(&a), *a.lock_async().await), (1, 1));
        });
    });
}

#[tokio::test]
async fn lock_arc_async() {
    let a = LockArc::new(vec![1]);
    let b = a.clone();
    let t = tokio::spawn(async move {
        b.lock_async().await.push(2);
    });
    t.await.unwrap();
    assert_eq!(*a.lock_async().await, [1, 2]);
    assert_eq!(LockArc::count(&a), 1);
    assert!(a.try_lock().is_ok());
    assert_eq!(format!("{a:?}"), "LockArc(LockRef { count: 1, value: [1, 2] })");
}

// The threads + tasks stress with an exact final count is `lockref_torture`
// in tests/torture.rs.
