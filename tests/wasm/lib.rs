//! The module `.ci/cross` runs under wasmtime (`run.py`), for
//! `wasm32-unknown-unknown` and `wasm32-wasip1`. Each export returns what
//! it checked, or panics, which traps: on `wasm32-unknown-unknown` the
//! panic's message goes nowhere, so a failing sequence is replayed natively
//! (`DIFFERENTIAL_SEED=n cargo test --features fair --test differential`,
//! the same steps: the target without a clock builds as `fair`). The two
//! `*_blocking_on_held` exports must panic: neither target has threads.

#[path = "../support/differential.rs"]
mod differential;
#[path = "../support/rng.rs"]
mod rng;

use differential::{Choices, run};
use rng::Rng;

impl Choices for Rng {
    fn below(&mut self, n: u64) -> u64 {
        Rng::below(self, n)
    }
}

/// The build's effective order and spinning: bit 0 set for FIFO (`fair`),
/// bit 1 for spinning.
#[unsafe(no_mangle)]
pub extern "C" fn tuning() -> u32 {
    let t = hybrid_sync::tuning();
    u32::from(t.fair) | u32::from(t.spin) << 1
}

/// Runs the sequences of seeds `first..first + count` on the `RwLock`s and
/// on the `Mutex`es, as `tests/differential.rs` draws them, compared step by
/// step with tokio's where the build is FIFO; returns `count`.
#[unsafe(no_mangle)]
pub extern "C" fn sequences(first: u64, count: u32) -> u32 {
    for seed in first..first + u64::from(count) {
        let rng = || Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let label = format!("seed {seed}");
        run::<hybrid_sync::RwLock<u32>, tokio::sync::RwLock<u32>>(&mut rng(), &label, 200);
        run::<hybrid_sync::Mutex<u32>, tokio::sync::Mutex<u32>>(&mut rng(), &label, 200);
    }
    count
}

/// A `LockRef`'s count and lock (one 64-bit word: a lockless
/// compare-and-swap on `wasm32`, which has 64-bit atomics), and a
/// `LockArc`'s: updates while the lock is free, the fallback while it is
/// held, the last reference taken under the lock. Returns the number of
/// checks.
#[unsafe(no_mangle)]
pub extern "C" fn lockref() -> u32 {
    let r = hybrid_sync::LockRef::new(5u32);
    r.get();
    assert_eq!(r.count(), 2);
    {
        let mut guard = r.lock();
        *guard += 1;
        assert_eq!(r.put_return(), None, "locked: the lockless put refuses");
        guard.set_count(guard.count() + 1);
    }
    assert_eq!(r.put_return(), Some(2));
    assert!(r.put_or_lock().is_none());
    let mut last = r.put_or_lock().expect("the last reference, under the lock");
    assert_eq!((last.count(), *last), (1, 6));
    last.mark_dead();
    drop(last);
    assert!(r.is_dead() && !r.get_not_dead());
    let a = hybrid_sync::LockArc::new(7u32);
    let b = a.clone();
    *b.lock() += 1;
    assert_eq!((hybrid_sync::LockArc::count(&a), *a.lock()), (2, 8));
    6
}

/// `blocking_read` and `blocking_write` of a free `RwLock`, and
/// `blocking_lock` of a free `Mutex`: they take it at once. Returns the
/// number of acquisitions.
#[unsafe(no_mangle)]
pub extern "C" fn blocking_on_free() -> u32 {
    let lock = hybrid_sync::RwLock::new(1u32);
    assert_eq!(*lock.blocking_read(), 1);
    *lock.blocking_write() += 1;
    let mutex = hybrid_sync::Mutex::new(2u32);
    *mutex.blocking_lock() += 1;
    assert_eq!((*lock.blocking_read(), *mutex.blocking_lock()), (2, 3));
    5
}

/// A blocking wait for a held lock, on a target whose only thread is this
/// one: it must panic (the wait could never end), not hang.
#[unsafe(no_mangle)]
pub extern "C" fn hybrid_blocking_on_held() -> u32 {
    let lock = hybrid_sync::RwLock::new(0u32);
    let _held = lock.try_write().expect("free");
    drop(lock.blocking_read());
    0
}

/// The same with tokio's `Mutex`, for the README's claim that tokio panics
/// there too.
#[unsafe(no_mangle)]
pub extern "C" fn tokio_blocking_on_held() -> u32 {
    let mutex = tokio::sync::Mutex::new(0u32);
    let _held = mutex.try_lock().expect("free");
    drop(mutex.blocking_lock());
    0
}
