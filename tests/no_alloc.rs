//! "No allocation, ever, on any acquire path" (issue 2), checked: a counting
//! global allocator watches one thread at a time while it acquires and
//! releases, uncontended and contended, queued and parked, cancelled and
//! granted, from a plain thread, a tokio task and `spawn_blocking`.
//!
//! Set-up that happens once per process (the CPU count behind the crowd
//! rule) or once per thread (`parking_lot_core`'s entry for a thread, tokio's
//! per-thread parker at the first blocking call, the blocking check's closed
//! channel, thread-locals that register a destructor) is done before the
//! counting starts; everything counted is what every acquisition after it
//! pays.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll};
use std::thread;
use std::time::Duration;

use hybrid_sync::{LockRef, Mutex, RwLock};

struct Counting;

std::thread_local! {
    /// Whether this thread's allocations are being counted.
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    /// This thread's allocations since it started watching.
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

/// Counts one allocation if this thread is watching. Both thread-locals are
/// const-initialised and need no destructor, so touching them never
/// allocates (no recursion into the allocator), and `try_with` keeps a
/// thread that is tearing down its thread-locals from panicking here.
fn note() {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees are ours; the counting beside it only
// touches thread-locals that never allocate (`note`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded; `ptr` came from this allocator, which is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from this allocator, which is `System`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What a process sets up once, done before any count: the CPU count behind
/// the crowd rule, which std reads from the cgroup quota (allocating) and
/// which the first contended blocking acquisition would otherwise ask for.
/// `tuning()` reports it, so a start-up log line asks it first.
fn process_set_up() {
    let _ = hybrid_sync::tuning();
}

/// How many allocations `f` made on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    COUNT.set(0);
    WATCHING.set(true);
    f();
    WATCHING.set(false);
    COUNT.get()
}

/// Polls `f` once with a waker that does nothing (and whose clones allocate
/// nothing), so that only the lock's own code is counted.
fn poll<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(futures::task::noop_waker_ref()))
}

/// Polls `f` until it is ready; a future whose lock was released polls
/// ready within a few tries (a woken waiter may spin once more first).
fn poll_ready<F: Future>(mut f: Pin<&mut F>) -> F::Output {
    for _ in 0..1000 {
        if let Poll::Ready(out) = poll(f.as_mut()) {
            return out;
        }
        thread::yield_now();
    }
    panic!("the future never became ready although the lock was free");
}

#[test]
fn uncontended_acquisitions_allocate_nothing() {
    process_set_up();
    let rw = Arc::new(RwLock::new(0u64));
    let m = Arc::new(Mutex::new(0u64));
    let run = || {
        drop(poll_ready(pin!(rw.read())));
        *poll_ready(pin!(rw.write())) += 1;
        *poll_ready(pin!(m.lock())) += 1;
        drop(poll_ready(pin!(rw.clone().read_owned())));
        *poll_ready(pin!(rw.clone().write_owned())) += 1;
        *poll_ready(pin!(m.clone().lock_owned())) += 1;
        drop(rw.try_read().unwrap());
        *rw.try_write().unwrap() += 1;
        *m.try_lock().unwrap() += 1;
        drop(rw.blocking_read());
        *rw.blocking_write() += 1;
        *m.blocking_lock() += 1;
        let w = rw.blocking_write();
        let r = w.downgrade();
        drop(r);
        let mapped = hybrid_sync::RwLockWriteGuard::into_mapped(rw.try_write().unwrap());
        drop(mapped);
    };
    run();
    assert_eq!(allocations(run), 0);
}

#[test]
fn acquisitions_in_a_tokio_task_allocate_nothing() {
    process_set_up();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let rw = RwLock::new(0u64);
    let m = Mutex::new(0u64);
    let counted = rt.block_on(async {
        // Uncounted first, then counted: the coop charge of each
        // acquisition included, and the yields when the task's budget (128)
        // is spent, the first of which grows tokio's list of deferred
        // wakeups on this thread.
        for _ in 0..100 {
            drop(rw.read().await);
            *rw.write().await += 1;
            *m.lock().await += 1;
        }
        COUNT.set(0);
        WATCHING.set(true);
        for _ in 0..100 {
            drop(rw.read().await);
            *rw.write().await += 1;
            *m.lock().await += 1;
        }
        WATCHING.set(false);
        COUNT.get()
    });
    assert_eq!(counted, 0);
}

#[test]
fn queued_and_cancelled_futures_allocate_nothing() {
    process_set_up();
    let rw = RwLock::new(0u64);
    let run = || {
        // Queued behind a writer: a writer and two readers wait, the
        // release lets them in in turn.
        let held = rw.try_write().unwrap();
        let mut writer = pin!(rw.write());
        let mut reader1 = pin!(rw.read());
        let mut reader2 = pin!(rw.read());
        assert!(poll(writer.as_mut()).is_pending());
        assert!(poll(reader1.as_mut()).is_pending());
        assert!(poll(reader2.as_mut()).is_pending());
        drop(held);
        drop(poll_ready(writer));
        drop(poll_ready(reader1));
        drop(poll_ready(reader2));

        // Cancelled while queued: the head leaves after the release woke
        // it, and the reader queued behind it gets in.
        let held = rw.try_write().unwrap();
        let mut reader = pin!(rw.read());
        {
            let mut writer = pin!(rw.write());
            assert!(poll(writer.as_mut()).is_pending());
            assert!(poll(reader.as_mut()).is_pending());
            drop(held);
            // `writer` is dropped here, unpolled since the release.
        }
        drop(poll_ready(reader));
        assert!(rw.try_write().is_ok());
    };
    run();
    assert_eq!(allocations(run), 0);
}

#[test]
fn a_granted_future_dropped_unpolled_allocates_nothing() {
    process_set_up();
    // A handoff timeout of zero makes every queued waiter due at once, so
    // the release grants the lock to the queued future, which is then
    // dropped without being polled and must pass the lock on.
    hybrid_sync::__testing::set_handoff_timeout(Some(Duration::ZERO));
    let rw = RwLock::new(0u64);
    let run = || {
        let held = rw.try_write().unwrap();
        {
            let mut writer = pin!(rw.write());
            assert!(poll(writer.as_mut()).is_pending());
            drop(held);
        }
        assert!(rw.try_write().is_ok(), "the grant was passed on");
    };
    run();
    let counted = allocations(run);
    hybrid_sync::__testing::set_handoff_timeout(None);
    assert_eq!(counted, 0);
}

#[test]
fn parked_threads_allocate_nothing() {
    process_set_up();
    let rw = Arc::new(RwLock::new(0u64));
    const ROUNDS: usize = 20;
    // The waiter and the holder meet at the barrier once before the rounds
    // and twice a round: once with the lock held, once after the waiter
    // got it.
    let barrier = Arc::new(Barrier::new(2));
    let waiter = {
        let (rw, barrier) = (rw.clone(), barrier.clone());
        thread::spawn(move || {
            let mut counts = Vec::with_capacity(ROUNDS);
            // The lock parks threads with `std::thread::park`, and its
            // queue lock, if a holder is preempted, with `parking_lot_core`,
            // whose first use on a thread makes the thread's entry (and may
            // grow its table). Made here, outside the count: a `park` whose
            // validation fails returns at once.
            // SAFETY: the callbacks neither panic nor call into
            // parking_lot_core, and the key is an address of ours that
            // nothing else parks on.
            unsafe {
                let key = &counts as *const Vec<usize> as usize;
                parking_lot_core::park(key, || false, || {}, |_, _| {}, parking_lot_core::DEFAULT_PARK_TOKEN, None);
            }
            // And the thread-locals the blocking path reads (tokio's
            // context among them, which registers its destructor).
            *rw.blocking_write() += 1;
            barrier.wait();
            for round in 0..ROUNDS {
                barrier.wait();
                let count = allocations(|| {
                    if round % 2 == 0 {
                        *rw.blocking_write() += 1;
                    } else {
                        drop(rw.blocking_read());
                    }
                });
                counts.push(count);
                barrier.wait();
            }
            counts
        })
    };
    // The waiter's set-up is done (and its lock released).
    barrier.wait();
    for _ in 0..ROUNDS {
        let held = rw.try_write().unwrap();
        barrier.wait();
        // Long enough for the waiter to spin out and park.
        thread::sleep(Duration::from_millis(2));
        drop(held);
        barrier.wait();
    }
    let counts = waiter.join().unwrap();
    assert_eq!(counts, [0; ROUNDS], "allocations per round");
}

#[test]
fn blocking_from_spawn_blocking_allocates_nothing_after_the_first() {
    process_set_up();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let m = Arc::new(Mutex::new(0u64));
    let counted = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            // The first one makes the check's channel and tokio's parker.
            *m.blocking_lock() += 1;
            allocations(|| {
                for _ in 0..100 {
                    *m.blocking_lock() += 1;
                }
            })
        })
        .await
        .unwrap()
    });
    assert_eq!(counted, 0);
}

#[test]
fn lockref_operations_allocate_nothing() {
    process_set_up();
    let lr = LockRef::new(0u64);
    let run = || {
        lr.get();
        assert!(lr.get_not_zero());
        lr.put();
        lr.put();
        *lr.lock() += 1;
        *poll_ready(pin!(lr.lock_async())) += 1;
        // Lockless updates wait for a held lock: queued behind it here.
        let held = lr.lock();
        let mut queued = pin!(lr.lock_async());
        assert!(poll(queued.as_mut()).is_pending());
        drop(held);
        *poll_ready(queued) += 1;
    };
    run();
    assert_eq!(allocations(run), 0);
}

/// lock_api's guards over the raw locks, `$api` naming the release.
#[cfg(feature = "lock_api")]
macro_rules! lock_api_acquisitions_allocate_nothing {
    ($api:ident) => {{
        process_set_up();
        type RwLock<T> = $api::RwLock<hybrid_sync::RawRwLock, T>;
        type Mutex<T> = $api::Mutex<hybrid_sync::RawMutex, T>;
        let rw = RwLock::new(0u64);
        let m = Mutex::new(0u64);
        let run = || {
            drop(rw.read());
            *rw.write() += 1;
            *m.lock() += 1;
            drop($api::RwLockWriteGuard::downgrade(rw.write()));
            $api::RwLockWriteGuard::unlock_fair(rw.write());
            $api::MutexGuard::unlock_fair(m.lock());
            // Timed waits on a held lock: queued, parked with a deadline,
            // timed out and unlinked.
            let held = rw.write();
            assert!(rw.try_write_for(Duration::from_micros(200)).is_none());
            assert!(rw.try_read_for(Duration::from_micros(200)).is_none());
            drop(held);
            let held = m.lock();
            assert!(m.try_lock_for(Duration::from_micros(200)).is_none());
            drop(held);
        };
        run();
        assert_eq!(allocations(run), 0);
    }};
}

#[cfg(feature = "lock_api")]
#[test]
fn lock_api_acquisitions_allocate_nothing() {
    lock_api_acquisitions_allocate_nothing!(lock_api);
}

#[cfg(feature = "lock_api-0_5")]
#[test]
fn lock_api_0_5_acquisitions_allocate_nothing() {
    lock_api_acquisitions_allocate_nothing!(lock_api_05);
}
