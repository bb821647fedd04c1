//! The flight recorder of `hybrid_sync::stats` (`--features stats`; without
//! it, nothing is recorded). Its own test binary: the recorder is
//! process-wide, so no other test's locks may write into it meanwhile.

use std::sync::Arc;
use std::time::Duration;

use hybrid_sync::Mutex;
use hybrid_sync::stats;
#[cfg(feature = "stats")]
use hybrid_sync::stats::Event;

/// A thread blocks on `lock` until the caller's guard, held for 50 ms (long
/// enough for it to spin out and park), is dropped.
fn block_a_thread_on(lock: &Arc<Mutex<u32>>) {
    let held = lock.try_lock().unwrap();
    let waiter = {
        let lock = Arc::clone(lock);
        std::thread::spawn(move || *lock.blocking_lock() += 1)
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(held);
    waiter.join().unwrap();
}

#[cfg(not(feature = "stats"))]
#[test]
fn without_the_feature_nothing_is_recorded() {
    stats::record(true);
    block_a_thread_on(&Arc::new(Mutex::new(0)));
    stats::record(false);
    assert!(stats::recorded().is_empty());
}

#[cfg(feature = "stats")]
#[test]
fn a_blocked_thread_leaves_its_slow_path_in_order_and_nothing_is_kept_when_off() {
    // Off: nothing recorded.
    block_a_thread_on(&Arc::new(Mutex::new(0)));
    assert!(stats::recorded().is_empty());

    let (a, b) = (Arc::new(Mutex::new(0)), Arc::new(Mutex::new(0)));
    stats::record(true);
    block_a_thread_on(&a);
    block_a_thread_on(&b);
    stats::record(false);
    let events = stats::recorded();
    assert!(events.windows(2).all(|w| w[0].at <= w[1].at), "not in order: {events:?}");

    // Two locks, told apart; each shows its waiter's slow path in order,
    // every step on the waiter's thread except the release that woke it.
    let mut locks: Vec<usize> = events.iter().map(|e| e.lock).collect();
    locks.dedup();
    assert_eq!(locks.len(), 2, "{events:?}");
    for lock in locks {
        let of_lock: Vec<_> = events.iter().filter(|e| e.lock == lock).collect();
        let first = |event: Event| {
            of_lock.iter().position(|e| e.event == event).unwrap_or_else(|| panic!("no {event:?} in {of_lock:?}"))
        };
        let (contended, queued, released) = (first(Event::Contended), first(Event::Queued), first(Event::Dispatch));
        // (A park may also return spuriously before the release.)
        let unparked = released
            + of_lock[released..]
                .iter()
                .position(|e| e.event == Event::Unparked)
                .unwrap_or_else(|| panic!("{of_lock:?}"));
        assert!(contended < queued && queued < released, "{of_lock:?}");
        let waiter = of_lock[contended].thread;
        assert_eq!(of_lock[queued].thread, waiter, "{of_lock:?}");
        assert_eq!(of_lock[unparked].thread, waiter, "{of_lock:?}");
        assert_ne!(of_lock[released].thread, waiter, "{of_lock:?}");
        // The 50 ms hold lies between queueing and the release.
        assert!(of_lock[released].at - of_lock[queued].at >= Duration::from_millis(30), "{of_lock:?}");
    }

    // Off again: the log stays as it was; on again: it starts empty.
    block_a_thread_on(&a);
    assert_eq!(stats::recorded(), events);
    stats::record(true);
    assert!(stats::recorded().is_empty());
    stats::record(false);
}
