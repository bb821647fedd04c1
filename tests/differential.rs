//! Random single-threaded sequences of lock operations, applied step by step
//! to hybrid-sync's `RwLock` and to `tokio::sync::RwLock` (and the same
//! sequences to the two `Mutex`es, where every acquisition is exclusive): new
//! read and write futures polled at once, pending futures polled again (woken
//! or not) or dropped, guards dropped or downgraded, `try_read` and
//! `try_write`, with a small `max_readers` so that the reader limit takes part.
//!
//! Under `fair` (tokio's strict FIFO order) every poll and every `try_*`
//! must come out exactly as it does with tokio: the differential half of the
//! test, which checks grants, wakeups passed on by cancelled waiters, the
//! reader limit and downgrades against tokio's own semaphore as the model.
//! Under the default (bounded barging) the order may differ, so there both
//! locks are held to the invariants alone: at most one writer and never
//! beside a reader, at most `max_readers` readers. In both builds, once
//! every guard is dropped, the pending futures are run as an executor runs
//! them, each polled only when its waker has been woken: every one must be
//! woken and complete, so a wakeup lost anywhere in the sequence (a
//! cancelled head that does not pass its turn on, a release that wakes
//! nobody) leaves a future stuck and fails the test.
//!
//! A failure prints the seed and the steps so far, which replay it
//! (`DIFFERENTIAL_SEED=n`); `DIFFERENTIAL_SEQUENCES=n` runs n sequences
//! instead of 2,000, for a soak.

#[path = "support/differential.rs"]
mod differential;
#[path = "support/rng.rs"]
mod rng;

use differential::{Choices, run};
use rng::Rng;

impl Choices for Rng {
    fn below(&mut self, n: u64) -> u64 {
        Rng::below(self, n)
    }
}

/// One sequence from `seed` on the `RwLock`s and one on the `Mutex`es, as
/// the seeds of this test have always drawn them.
fn run_seed(seed: u64, steps: usize) {
    let rng = || Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let label = format!("seed {seed}");
    run::<hybrid_sync::RwLock<u32>, tokio::sync::RwLock<u32>>(&mut rng(), &label, steps);
    run::<hybrid_sync::Mutex<u32>, tokio::sync::Mutex<u32>>(&mut rng(), &label, steps);
}

/// Runs `count` sequences on the `RwLock`s and on the `Mutex`es (or
/// `DIFFERENTIAL_SEQUENCES` of them, for a soak), or the one sequence
/// `DIFFERENTIAL_SEED` names.
fn sequences(count: u64, steps: usize) {
    let env = |name| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let seeds = match (env("DIFFERENTIAL_SEED"), env("DIFFERENTIAL_SEQUENCES")) {
        (Some(seed), _) => seed..seed + 1,
        (None, Some(count)) => 0..count,
        (None, None) => 0..count,
    };
    for seed in seeds {
        run_seed(seed, steps);
    }
}

#[test]
fn random_sequences_keep_the_invariants_and_under_fair_match_tokio() {
    // Miri runs each sequence about a thousand times slower.
    if cfg!(miri) { sequences(10, 60) } else { sequences(2_000, 200) }
}
