//! The module `.ci/cross` runs under wasmtime (`run.py`), for
//! `wasm32-unknown-unknown` and `wasm32-wasip1`. Each export returns what
//! it checked, or panics, which traps: on `wasm32-unknown-unknown` the
//! panic's message goes nowhere, so a failing sequence is replayed natively
//! (`DIFFERENTIAL_SEED=n cargo test --features fair --test differential`,
//! the same steps: the target without a clock builds as `fair`).

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
