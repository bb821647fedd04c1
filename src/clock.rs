//! The lock's own clock: nanoseconds, monotonic, cheap to read.
//!
//! Every queued acquisition stamps the start of its wait, releases compare
//! the head's stamp with the time now to decide whether it is due a
//! handoff, and a spinner reads the time after every poll to bound its
//! spin. `Instant::now()` costs 20-45 ns on the development VMs (a vDSO
//! call that reads the TSC and scales it to a `timespec`), about a short
//! critical section; with guards held across `.await` every acquisition
//! queues, and in a profile of that workload on one runtime worker the
//! clock was 3.5% of the CPU per operation (`docs/performance.md`, "Hold
//! across `.await`").
//!
//! On x86-64 with an invariant TSC (CPUID `0x8000_0007`, EDX bit 8: one rate
//! in every power state, the same count on every core) [`now`] reads the
//! TSC itself and scales it by a factor measured against `Instant` over
//! the clock's first [`CALIBRATION_NS`]: about 10 ns a reading here, and
//! plain integers to compare. Until then, and on other targets, under Miri
//! and under the model checkers, it reads `Instant`. Readings are compared
//! only with each other, never with an `Instant` (user deadlines and timed
//! parks stay on `Instant`), so the TSC's drift against the system clock
//! does not matter: a 1 ms timeout stays 1 ms to within the calibration's
//! error, about one part in ten thousand (the unit test holds it to 1%).
//!
//! ```text
//!   first reading             CALIBRATION_NS later        from then on
//!   ANCHOR = (Instant, TSC)   SCALE = elapsed ns / ticks  now = (TSC - TSC0) * SCALE
//!   now = Instant - Instant0  (now as before)             (Instant no longer read)
//! ```

use crate::loom::atomic64::AtomicU64;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// How long the TSC is measured against `Instant` before its rate is
/// trusted. The paired readings at either end are each exact to within half
/// their slop (tens of nanoseconds unless preempted, at most
/// [`PAIR_SLOP_TICKS`] when every retry was), so the rate is exact to about
/// one part in ten thousand as measured, and to a few parts in a thousand
/// at worst.
const CALIBRATION_NS: u64 = 10_000_000;

/// `SCALE` while calibrating.
const CALIBRATING: u64 = 0;
/// `SCALE` where the TSC is not used: the readings are `Instant`'s.
const NO_TSC: u64 = u64::MAX;

/// Nanoseconds per TSC tick as a 32.32 fixed-point number, or
/// [`CALIBRATING`] or [`NO_TSC`].
static SCALE: AtomicU64 = AtomicU64::new(CALIBRATING);
/// The TSC reading of the anchor, for the fast path (the anchor's `Instant`
/// is only needed while calibrating).
static ANCHOR_TSC: AtomicU64 = AtomicU64::new(0);
/// Where the clock starts: an `Instant` and the TSC reading taken with it.
static ANCHOR: OnceLock<(Instant, u64)> = OnceLock::new();

/// Now, in nanoseconds since the clock's first use in this process, plus
/// one: never 0, so that 0 can mean "not stamped".
#[inline]
pub(crate) fn now() -> u64 {
    if crate::config::NO_CLOCK {
        // Nothing to read (`Instant::now` would panic). Under the settings
        // such a target gets (`config::NO_CLOCK`) nobody compares readings:
        // a `fair` lock grants every release to its head, timing nothing,
        // and nobody spins; the stamps of queued waits stay unread.
        return 1;
    }
    if cfg!(not(target_arch = "x86_64")) {
        // No TSC to read: `Instant` it is, without a look at the scale
        // (which on a target without 64-bit atomics is behind a mutex).
        return slow_now();
    }
    // Acquire: pairs with the Release store of the scale, which follows the
    // store of ANCHOR_TSC.
    match SCALE.load(Ordering::Acquire) {
        CALIBRATING | NO_TSC => slow_now(),
        scale => {
            // Saturating: a core whose TSC reads a little behind the anchor's
            // core just after the anchor was taken counts from the anchor.
            let ticks = rdtsc().saturating_sub(ANCHOR_TSC.load(Ordering::Relaxed));
            ((u128::from(ticks) * u128::from(scale)) >> 32) as u64 + 1
        }
    }
}

/// The clock before calibration ends, and where the TSC is not used.
#[cold]
fn slow_now() -> u64 {
    let &(anchor, anchor_tsc) = ANCHOR.get_or_init(|| {
        let (instant, tsc) = paired_reading();
        if tsc.is_none() {
            // Relaxed: NO_TSC sends readers to `slow_now`, which reads the
            // anchor through the OnceLock (its own synchronisation).
            SCALE.store(NO_TSC, Ordering::Relaxed);
        }
        // Relaxed: published with SCALE's Release store.
        ANCHOR_TSC.store(tsc.unwrap_or(0), Ordering::Relaxed);
        (instant, tsc.unwrap_or(0))
    });
    let (instant, tsc) = paired_reading();
    let elapsed = u64::try_from(instant.saturating_duration_since(anchor).as_nanos()).unwrap_or(u64::MAX - 1);
    if let Some(tsc) = tsc
        && elapsed >= CALIBRATION_NS
    {
        let ticks = tsc.saturating_sub(anchor_tsc).max(1);
        let scale = ((u128::from(elapsed) << 32) / u128::from(ticks)).min(u128::from(NO_TSC - 1)) as u64;
        // A TSC between 100 MHz and 10 GHz, or none we trust.
        let plausible = ((1u64 << 32) / 10..=10u64 << 32).contains(&scale);
        // Release: publishes ANCHOR_TSC to the fast path. Whoever gets here
        // first decides; the scale of a racing caller is as good.
        let _ = SCALE.compare_exchange(
            CALIBRATING,
            if plausible { scale } else { NO_TSC },
            Ordering::Release,
            Ordering::Relaxed,
        );
    }
    elapsed + 1
}

/// `Instant::now()` and the TSC at the same moment (the TSC midway between
/// two readings that bracket the `Instant`), or no TSC where it is not used.
fn paired_reading() -> (Instant, Option<u64>) {
    if !invariant_tsc() {
        return (Instant::now(), None);
    }
    let mut best = None;
    // A preemption between the readings would skew the pair: retry a few
    // times for a tight one, and keep the tightest.
    for _ in 0..8 {
        let before = rdtsc();
        let instant = Instant::now();
        let after = rdtsc();
        let slop = after.wrapping_sub(before);
        if best.is_none_or(|(_, _, s)| slop < s) {
            best = Some((instant, before + slop / 2, slop));
        }
        if slop < PAIR_SLOP_TICKS {
            break;
        }
    }
    let (instant, tsc, _) = best.expect("at least one reading");
    (instant, Some(tsc))
}

/// A paired reading this tight (about 15 us at 3 GHz) is not preempted.
const PAIR_SLOP_TICKS: u64 = 50_000;

#[cfg(target_arch = "x86_64")]
#[inline]
fn rdtsc() -> u64 {
    // SAFETY: RDTSC exists on every x86-64 CPU, reads a counter and touches
    // no memory. (A process that forbade itself RDTSC with
    // `prctl(PR_SET_TSC)` gets a SIGSEGV here, not undefined behaviour.)
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn rdtsc() -> u64 {
    0
}

/// Whether the CPU says its TSC is invariant; once per process.
// `__cpuid` is a safe function since Rust 1.94 and an unsafe one before,
// down to the crate's rust-version (1.91), whose build needs the block
// (`.ci/msrv`).
#[allow(unused_unsafe)]
fn invariant_tsc() -> bool {
    #[cfg(all(target_arch = "x86_64", not(any(hybrid_sync_loom, hybrid_sync_shuttle, miri))))]
    {
        static INVARIANT: OnceLock<bool> = OnceLock::new();
        *INVARIANT.get_or_init(|| {
            use core::arch::x86_64::__cpuid;
            // SAFETY: CPUID exists on every x86-64 CPU and reads no memory;
            // leaf 0x8000_0007 is asked for only where the first call says
            // it exists.
            unsafe {
                let max_extended = __cpuid(0x8000_0000).eax;
                max_extended >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
            }
        })
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(hybrid_sync_loom, hybrid_sync_shuttle, miri)))))]
    {
        false
    }
}

#[cfg(all(test, not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Once calibrated, the clock runs at `Instant`'s rate, and on an
    /// x86-64 with an invariant TSC it is the TSC that it reads.
    #[test]
    #[cfg_attr(miri, ignore = "Miri's clock advances with the work done")]
    fn keeps_instants_pace_once_calibrated() {
        assert!(now() > 0, "0 means unstamped");
        // The first use anchors the clock; one after the window calibrates it.
        std::thread::sleep(Duration::from_nanos(CALIBRATION_NS) + Duration::from_millis(2));
        let _ = now();
        let scale = SCALE.load(Ordering::Acquire);
        assert_ne!(scale, CALIBRATING, "still calibrating after the window");
        assert_eq!(scale != NO_TSC, invariant_tsc(), "scale {scale:#x}");
        // A sleep, timed by both clocks; retried because a preemption between
        // the two readings at either end skews one of them.
        let mut ratios = vec![];
        for _ in 0..5 {
            let (i0, c0) = (Instant::now(), now());
            std::thread::sleep(Duration::from_millis(20));
            let (c1, i1) = (now(), Instant::now());
            let ratio = (c1 - c0) as f64 / (i1 - i0).as_nanos() as f64;
            if (0.99..=1.01).contains(&ratio) {
                return;
            }
            ratios.push(ratio);
        }
        panic!("the clock's rate against Instant's: {ratios:?}");
    }

    /// Readings on one thread never go back by more than the TSC's
    /// synchronisation between cores allows (none, where the kernel uses
    /// the TSC as its clock source).
    #[test]
    #[cfg_attr(miri, ignore = "slow under Miri")]
    fn readings_go_forward() {
        let mut last = now();
        for _ in 0..100_000 {
            let t = now();
            assert!(t + 1_000 >= last, "went back from {last} to {t}");
            last = last.max(t);
        }
    }
}
