//! The examples' critical section: about 50 ns of dependent arithmetic on
//! the data, calibrated once per run.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Iterations of [`work`] that take about 50 ns here, once [`calibrate_work`]
/// has run.
pub static WORK_ITERS: AtomicU64 = AtomicU64::new(16);

/// The critical section: about 50 ns of dependent arithmetic on the data.
#[inline(never)]
pub fn work(v: u64) -> u64 {
    let mut x = v;
    for i in 0..WORK_ITERS.load(Ordering::Relaxed) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

/// About `ns` nanoseconds of the same arithmetic.
#[inline(never)]
pub fn work_ns(v: u64, ns: u64) -> u64 {
    let iters = (WORK_ITERS.load(Ordering::Relaxed) * ns / 50).max(1);
    let mut x = v;
    for i in 0..iters {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    x
}

/// Sets [`WORK_ITERS`] so that [`work`] takes about `target_ns`.
///
/// Each step times batches of calls at the current count, keeps the fastest
/// batch (a VM's stalls and interrupts only ever add time) and rescales the
/// count; three steps let the count settle, so that the fixed cost of a call
/// is measured at the count that will be used instead of extrapolated from
/// a short one. Extrapolating once from 16 iterations, from one timing,
/// gave 105-212 iterations from run to run on the development VM, sections
/// of about 30-65 ns.
pub fn calibrate_work(target_ns: f64) {
    const CALLS: u32 = 20_000;
    for _ in 0..3 {
        let fastest = (0..7)
            .map(|_| {
                let t = Instant::now();
                let mut x = 1;
                for _ in 0..CALLS {
                    x = work(std::hint::black_box(x));
                }
                std::hint::black_box(x);
                t.elapsed().as_nanos() as f64 / f64::from(CALLS)
            })
            .fold(f64::INFINITY, f64::min);
        let iters = WORK_ITERS.load(Ordering::Relaxed) as f64 * target_ns / fastest;
        WORK_ITERS.store(iters.round().max(1.0) as u64, Ordering::Relaxed);
    }
}
