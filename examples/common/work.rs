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
pub fn calibrate_work(target_ns: f64) {
    let n = 200_000u64;
    let t = Instant::now();
    let mut x = 1;
    for _ in 0..n {
        x = work(x);
    }
    std::hint::black_box(x);
    let per = t.elapsed().as_nanos() as f64 / n as f64;
    let iters = (WORK_ITERS.load(Ordering::Relaxed) as f64 * target_ns / per).round().max(1.0) as u64;
    WORK_ITERS.store(iters, Ordering::Relaxed);
}
