//! The sequences of `tests/differential.rs`, with every choice (the reader
//! limit, each step, the slot it acts on) drawn from the fuzzer's input
//! instead of a seeded generator, so that libFuzzer's coverage feedback
//! steers them into the lock's rarer paths: cancelled heads and grants,
//! downgrades with queued readers, the reader limit, licensed runs. The
//! same input drives the `RwLock`s, then the `Mutex`es. A broken invariant,
//! a step whose outcome differs from tokio's (built with `--features fair`)
//! or a future left pending on a free lock panics, and libFuzzer saves the
//! input under `artifacts/differential/`; `cargo fuzz run differential
//! FILE` replays it with the steps printed.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/differential.rs"]
mod differential;

use differential::{Choices, run};

/// The fuzzer's bytes as choices: one byte for a choice among at most 256,
/// two for more. Running out ends the sequence.
struct Bytes<'a> {
    data: &'a [u8],
}

impl Choices for Bytes<'_> {
    fn below(&mut self, n: u64) -> u64 {
        let width = if n <= 256 { 1 } else { 2 };
        let (taken, rest) = self.data.split_at(width.min(self.data.len()));
        self.data = rest;
        let value = taken.iter().fold(0u64, |v, &b| v << 8 | u64::from(b));
        value % n
    }

    fn exhausted(&self) -> bool {
        self.data.is_empty()
    }
}

/// A sequence may be as long as the input allows, up to this many steps.
const STEPS: usize = 1_000;

fuzz_target!(|data: &[u8]| {
    run::<hybrid_sync::RwLock<u32>, tokio::sync::RwLock<u32>>(&mut Bytes { data }, "fuzz input", STEPS);
    run::<hybrid_sync::Mutex<u32>, tokio::sync::Mutex<u32>>(&mut Bytes { data }, "fuzz input", STEPS);
});
