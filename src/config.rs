//! Tuning: every constant that shapes spinning, parking and handoff, chosen
//! by cargo features, in one place. The crate docs' feature table is written
//! from this file; [`tuning()`] reports what a build ended up with.
//!
//! # Precedence
//!
//! Cargo unifies features across the whole dependency graph, so any mix of
//! them must build and mean something. The rules:
//!
//! 1. `fair` is independent of the rest: it changes who may take a free lock,
//!    not how long anyone spins or waits.
//! 2. `no-spin` beats every spin setting: with it, nobody spins.
//! 3. Of the handoff presets (`handoff-250us`, default 1 ms, `handoff-4ms`),
//!    the shortest enabled one wins, because a shorter bound on waiting is
//!    the safer thing to impose on a crate that asked for the longer one.
//! 4. A target without a clock (`wasm32-unknown-unknown`, where
//!    `Instant::now` panics) is `fair` and `no-spin` whatever the features
//!    say: a handoff timeout cannot be timed there, nor a spin bounded.

use crate::loom::atomic64::AtomicU64;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Whether the target has no clock: `std::time::Instant::now` panics on
/// `wasm32-unknown-unknown` (and its 64-bit twin). The lock cannot time a
/// waiter's wait there, so it cannot bound barging by a handoff timeout:
/// it hands the lock out in strict FIFO order, tokio's, and does not spin
/// (a spin is bounded by the clock too, and such a target has one thread
/// unless it was built with `atomics`). The clock reads a constant there
/// (`clock::now`).
pub(crate) const NO_CLOCK: bool = cfg!(all(target_family = "wasm", target_os = "unknown"));

/// Whether the target has no threads but the one running: WebAssembly
/// built without the `atomics` feature. A blocking wait for a held lock
/// there can never end (nothing else can release it), so it panics
/// instead of hanging (`RawRwLock::lock_blocking_wait`).
pub(crate) const NO_THREADS: bool = cfg!(all(target_family = "wasm", not(target_feature = "atomics")));

/// Strict FIFO hand-out (feature `fair`, or a target without a clock).
pub(crate) const FAIR: bool = cfg!(feature = "fair") || NO_CLOCK;

/// Whether acquirers spin at all before queueing (off with `no-spin`, and
/// on a target without a clock).
/// Under the model checker a "spin" is two polls, so that the spinner's
/// interplay with handoff is explored without multiplying schedules.
pub(crate) const SPIN: bool = !cfg!(feature = "no-spin") && !NO_CLOCK;

/// How long a queued waiter may be passed over by barging newcomers before
/// the next unlock hands the lock straight to it.
///
/// 1 ms is Go's `starvationThresholdNs`; parking_lot draws a random 0-1 ms,
/// async-lock uses 0.5 ms, rwsem at least 4 ms. A barging lock reaches its
/// throughput by letting a running thread re-take the lock while the head
/// waiter is still waking up (several microseconds); 1 ms leaves hundreds of
/// such rounds and still bounds the wait well below a scheduler tick.
pub(crate) const HANDOFF_TIMEOUT: Duration = if cfg!(feature = "handoff-250us") {
    Duration::from_micros(250)
} else if cfg!(feature = "handoff-4ms") {
    Duration::from_millis(4)
} else {
    Duration::from_millis(1)
};

/// The longest a blocking acquirer spins before it queues and parks.
///
/// Spinning can only pay while it is shorter than what it saves: a park and
/// unpark round trip, measured at 4.3 us one-way on the 2-vCPU development VM
/// (2-5 us on bare metal). Past that, parking is cheaper for everyone.
pub(crate) const SPIN_LIMIT_BLOCKING_NS: u32 = 4_000;

/// How many CPUs' worth of blocking threads may wait in a lock's queue before
/// a blocking newcomer stops spinning on it and queues at once.
///
/// With `CROWD_PER_CPU` threads per CPU queued (the lock's census,
/// `layout::Census`), contenders well outnumber the CPUs: a woken queue head
/// needs a CPU to take its turn, and a spinner holds one, spinning on an
/// owner that may itself be off its CPU. Measured on 2 vCPUs (a crowd of 6),
/// interleaved quick showdown rounds against parking_lot, medians of two A/Bs
/// of 12 rounds (`docs/performance.md`): 32 threads on one `Mutex` 0.87x and
/// 0.84x its throughput to 0.92x and 0.87x, at 0.81x and 0.83x its CPU per
/// operation to 0.66x and 0.69x; 8 threads 1.05x and 1.00x to 1.07x and 1.04x
/// at 0.57-0.59x to 0.52-0.53x; mixed 0.95x and 0.92x to 0.98x and 0.94x. Two
/// per CPU (a crowd of 4) cost seed 002 with four tight threads 3-5% in three
/// A/Bs out of three: their turns come from spinning, and five threads on
/// two CPUs are not yet a crowd. The census counts to 15, so on machines with
/// more than 5 CPUs the rule is off and threads spin as before it.
pub(crate) const CROWD_PER_CPU: u32 = 3;

/// The number of queued threads at which blocking newcomers stop spinning
/// ([`CROWD_PER_CPU`] per CPU), or `u32::MAX` where the census cannot count
/// that far. The CPU count is asked once per process.
pub(crate) fn crowd() -> u32 {
    // Relaxed: every thread computes the same value; the cache orders nothing.
    match CROWD.load(Ordering::Relaxed) {
        0 => {
            let cpus =
                std::thread::available_parallelism().map_or(u32::MAX, |n| u32::try_from(n.get()).unwrap_or(u32::MAX));
            let crowd = match cpus.checked_mul(CROWD_PER_CPU) {
                Some(n) if n <= crate::layout::CENSUS_MAX => n,
                _ => u32::MAX,
            };
            CROWD.store(crowd, Ordering::Relaxed);
            crowd
        }
        crowd => crowd,
    }
}

/// [`crowd`]'s cache: 0 until first asked (or after
/// [`testing::set_crowd_rule`]`(true)`), `u32::MAX` where the rule is off.
static CROWD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The longest an async acquirer spins inside `poll` before it queues.
///
/// What a task saves by spinning is its own park round trip: queue, return
/// `Pending`, be woken by a release on another worker, be polled again,
/// about one cross-worker wake (6 us measured here). A spinning task holds
/// its worker, so every other task on that worker waits too, which the
/// same bound keeps to one such wake. At 2 us, spins on a lock that 64
/// tasks on 2 workers contend gave up two times in three (the owner's
/// worker runs a burst of operations before it yields) and 60% of
/// contended acquisitions queued; at 6 us 15% do, and the write-heavy
/// showdown rose from 0.72-0.79x parking_lot to 0.78-1.06x. Spins that
/// cannot pay stay short all the same: a lock granted to a waiter that has
/// not run yet admits no spinner (`GRANTEE`), a frozen owner is given up on
/// after the stall budget, and a lock whose spins stopped paying is only
/// probed (see [`crate::backoff`]).
pub(crate) const SPIN_LIMIT_ASYNC_NS: u32 = 6_000;

/// Every acquirer that is allowed to spin at all spins at least this long,
/// even on a lock whose history says spinning fails, so that a lock whose
/// hold time drops is noticed again (glibc's adaptive mutex keeps a similar
/// `+10` floor for the same reason).
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const SPIN_PROBE_NS: u32 = 150;

/// After this many spins in a row on one lock that gave up with the lock
/// word frozen (its owner not running), spinning on it is skipped.
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const STALLS_BEFORE_SKIP: u32 = 4;

/// While spinning on a lock is skipped, every this many spins still probe.
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const STALL_RECHECK: u32 = 8;

/// Bounds of the learned pause between two polls of a held lock word.
///
/// The lower bound is what one poll costs the owner, not what a `pause`
/// costs the spinner. A poll of a word that another core owns pulls its
/// cache line over, and the owner's next atomic operation on it (its
/// release, or its next acquisition) waits for the line to come back: a
/// round trip of some hundred nanoseconds. A spinner that polls more often
/// than that cannot see a release sooner, yet it slows every section of an
/// owner that runs short ones back to back, the common case under
/// contention (a worker running 16 operations per task, a thread in an
/// acquire-release loop). With the bound at one `pause` (20 ns), the two
/// atomics of each such section took three times what parking_lot's did in
/// the showdown's async write-heavy run (perf, 2026-12-02), whose waiting
/// worker sits in `sched_yield` instead. At 300 ns, in 5 interleaved quick
/// rounds against the bound at 20 ns (medians, ratios to parking_lot):
/// write-heavy 0.75x to 0.97x, mixed 0.77x to 0.87x, 2 threads 0.90x to
/// 1.16x, seed 004's 10/100/1000 tasks 0.79x/0.78x/0.56x to
/// 0.94x/1.01x/0.69x, all at less CPU per operation; read-heavy, 8 and 32
/// threads, seed 000, seed 002 and hold-across moved within their spread.
/// 600 ns and 1 us gave up some of it (read-heavy, mixed, 2 threads, seed
/// 002), and a floor for tasks alone some more (mixed, 2 threads).
///
/// The upper bound lets a spinner on a busy lock poll only a few times per
/// budget: in the showdown's 2-worker write-heavy run, raising it from 1 us
/// to 2 us moved throughput from 0.76x to about 0.8x parking_lot's, because
/// every poll pulls the owner's line.
pub(crate) const DELAY_MIN_NS: u32 = 300;
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const DELAY_MAX_NS: u32 = 2_000;

/// The pause between two polls of a writer spinner that holds `WOKEN`
/// while the readers inside leave (`backoff::Pace::Drain`). No reader can
/// enter meanwhile, so a poll delays no hand-over: polling at the learned
/// pace (300 ns or more) only left the lock empty for that long after the
/// last reader left, with every reader behind the writer waiting too. In
/// 8 interleaved quick rounds of the showdown's async read-heavy run
/// (2026-12-02, medians, ratios to parking_lot): 0.95x as it was, 1.02x
/// with this pace, 1.07x with `Pace::BehindWriter` as well.
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const DRAIN_POLL_NS: u32 = 100;

/// The pause between two looks of a queued thread at its own node while it
/// waits for a grant that may come soon. The node's line is written once,
/// by the granter, so the look costs nobody else anything.
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const NODE_POLL_NS: u32 = 80;

/// The pause of a lockless `LockRef` update after its first lost
/// compare-and-swap in a row; each further loss doubles it, up to
/// `LOCKREF_BACKOFF_MAX_NS`.
///
/// The kernel's `CMPXCHG_LOOP` retries at once (some architectures' relax
/// instruction yields to the hypervisor). A lost CAS means another updater
/// owns the cache line right now; letting it finish a run of updates while
/// it keeps the line is cheaper for both than pulling the line back and
/// forth on every try. Measured with the showdown's refcount workloads
/// (2 threads get+put, 3 alternating rounds): 50-400 ns (2-16 pauses, the
/// previous setting) gave 72-90 M pairs/s, 0.6-0.8x a bare `AtomicU64`;
/// 400-1600 ns gave 97-157 M, 0.8-1.3x; 800-3200 ns about the same as
/// 400-1600. Only a lost CAS pauses: an uncontended update never does.
pub(crate) const LOCKREF_BACKOFF_MIN_NS: u32 = 400;
/// The longest pause between two compare-and-swaps of one lockless update.
pub(crate) const LOCKREF_BACKOFF_MAX_NS: u32 = 1_600;

/// Slots in the per-thread table of per-lock backoff state (seed 000 used 64
/// per CPU). A thread rarely contends on more locks than this at once; two
/// locks that collide on a slot evict each other's history, which costs a
/// few polls of re-learning, never correctness.
pub(crate) const BACKOFF_SLOTS: usize = 64;

/// Wakers collected under the queue lock before it is released to wake them
/// (tokio's `NUM_WAKERS`). A larger reader batch is granted in rounds.
///
/// One under the model checkers, whose models queue two or three readers:
/// with 32 they never reach the rounds (a release, a cancellation or a
/// reader's own retry that lets in part of a run and comes back for the
/// rest), which are then model-checked like every other step.
pub(crate) const WAKE_BATCH: usize = if cfg!(any(hybrid_sync_loom, hybrid_sync_shuttle)) { 1 } else { 32 };

/// Polls of the queue lock before a thread parks on it. The queue lock is
/// held for a few list edits, tens of nanoseconds; only a preempted holder
/// makes waiting longer than this worthwhile to sleep through.
pub(crate) const QUEUE_LOCK_SPINS: u32 = 16;

/// Whether a blocked thread that was woken but lost the race keeps the
/// `WOKEN` token and sleeps with a deadline (see `raw::Retry::Retained`)
/// instead of giving it back, which would make the very next release pay
/// for another wakeup that most likely loses again. Tasks cannot do this
/// (there is no timer to wake them), and loom has no timed park.
pub(crate) const RETAIN_TOKEN: bool = !cfg!(any(hybrid_sync_loom, hybrid_sync_shuttle));

/// First and longest nap of a thread that retains the token. Each time it
/// looks and loses it sleeps twice as long, up to `RECHECK_MAX`: a lock that
/// stays busy costs it about log2(timeout / RECHECK_MIN) wakeups until it is
/// due, and a lock that falls idle is noticed within `RECHECK_MAX`.
pub(crate) const RECHECK_MIN: Duration = Duration::from_micros(16);
pub(crate) const RECHECK_MAX: Duration = Duration::from_micros(128);

/// One barging acquisition in this many (per thread) first looks at the
/// queue head and sets `HANDOFF` for it if it is due (waited past the
/// handoff timeout, plus a claim gap if it was woken to claim its turn).
/// The head normally claims its turn itself, but a woken thread
/// that cannot get a CPU (the threads barging past it keep them busy)
/// cannot; without this backstop its wait would be bounded by the
/// scheduler's time slices (about 3 ms here, measured) rather than by the
/// timeout. At 64 the queue lock costs well under 1 ns per acquisition.
#[cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))] // unused by the models
pub(crate) const BARGE_AUDIT_EVERY: u32 = 64;

/// The largest reader count the lock word holds.
pub(crate) const MAX_READERS: u32 = crate::state::MAX_READERS;

// Process-wide overrides, for benchmarks and tests that compare settings in
// one run. Read with relaxed loads on slow paths only: each is a setting
// read on its own, publishing no other data, and a thread that sees a
// switch a little late only follows the old setting for a moment.
static HANDOFF_OVERRIDE_NS: AtomicU64 = AtomicU64::new(u64::MAX);
static PER_ADDRESS_BACKOFF: AtomicBool = AtomicBool::new(true);
static SPIN_THROUGH_HANDOFF: AtomicBool = AtomicBool::new(false);
static MEASURE_HANDOFF_SPIN: AtomicBool = AtomicBool::new(false);
static HANDOFF_SPIN_NS: AtomicU64 = AtomicU64::new(0);

/// The effective handoff timeout, in nanoseconds.
#[inline]
pub(crate) fn handoff_timeout_ns() -> u64 {
    match HANDOFF_OVERRIDE_NS.load(Ordering::Relaxed) {
        u64::MAX => HANDOFF_TIMEOUT.as_nanos() as u64,
        ns => ns,
    }
}

/// The least time between two handoffs on one lock: an eighth of the
/// handoff timeout (125 us by default). See `RawRwLock::dispatch`.
#[inline]
pub(crate) fn handoff_gap_ns() -> u64 {
    handoff_timeout_ns() / 8
}

/// The least time between two turns claimed by overdue heads that were
/// awake to take them (see `RawRwLock::claims_own_turn`), and how long
/// bargers leave an overdue head that was woken to claim its turn before
/// they force the handoff for it (`RawRwLock::audit_head`): a 32nd of the
/// handoff timeout (31 us by default). Such a handoff costs the lock no idle
/// time, only the displaced runner's cache, so they may come closer than
/// grants to sleepers. 32 threads on 2 cores (quick showdown): with an
/// eighth (125 us) the rounds' maximum waits were 4-11 ms; at a 32nd they
/// were 5-8 ms, at 13-15 M ops/s against 11-12 M with grants to sleepers.
/// Below that the gap stops setting the pace: each claimed turn still costs
/// one wakeup (about 100 us on the VM), and a 64th changed nothing.
#[inline]
pub(crate) fn claim_gap_ns() -> u64 {
    handoff_timeout_ns() / 32
}

/// Whether backoff state is kept per lock address (the default) or in one
/// shared slot per thread (the single-delay baseline of seed 000).
#[inline]
pub(crate) fn per_address_backoff() -> bool {
    PER_ADDRESS_BACKOFF.load(Ordering::Relaxed)
}

/// Whether spinners keep spinning while `HANDOFF` is set: never, except in
/// seed 003's baseline (the rwsem bug the crate must not have), switched on
/// by [`testing::set_spin_through_handoff`].
#[inline]
pub(crate) fn spin_through_handoff() -> bool {
    SPIN_THROUGH_HANDOFF.load(Ordering::Relaxed)
}

/// Whether spinners account the time they spin while `HANDOFF` is set
/// (seed 003's figure), switched on by
/// [`testing::measure_handoff_spin`]. Read only on a poll that saw the bit.
#[inline]
pub(crate) fn measuring_handoff_spin() -> bool {
    MEASURE_HANDOFF_SPIN.load(Ordering::Relaxed)
}

/// Adds one spin's time under a pending handoff to the process-wide total.
pub(crate) fn add_handoff_spin(ns: u64) {
    HANDOFF_SPIN_NS.fetch_add(ns, Ordering::Relaxed);
}

/// The settings this build of hybrid-sync runs with, as returned by
/// [`tuning()`]. Its `Display` is one line meant for a start-up log.
///
/// ```
/// let t = hybrid_sync::tuning();
/// // Under `fair` every unlock hands off, and the timeout plays no part.
/// if !t.fair {
///     assert!(t.handoff_timeout > std::time::Duration::ZERO);
/// }
/// assert!(t.to_string().starts_with("hybrid-sync: order="));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tuning {
    /// Strict FIFO hand-out (feature `fair`).
    pub fair: bool,
    /// Whether acquirers spin before queueing (off with `no-spin`).
    pub spin: bool,
    /// Longest spin of a blocking acquirer.
    pub spin_limit_blocking: Duration,
    /// Longest spin of an async acquirer inside `poll`.
    pub spin_limit_async: Duration,
    /// How long a queued waiter may be barged past before the lock is handed
    /// to it directly. Ignored under `fair`, where every unlock hands off.
    pub handoff_timeout: Duration,
    /// Whether spin backoff is learned per lock address.
    pub per_address_backoff: bool,
    /// How many blocking threads waiting in one lock's queue make a blocking
    /// newcomer queue at once rather than spin: three per CPU of this
    /// machine (`std::thread::available_parallelism`). `None` where that is
    /// more than the lock counts (above 5 CPUs), so blocking newcomers always
    /// spin first.
    pub crowd: Option<u32>,
}

impl fmt::Display for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "hybrid-sync: order={} spin={} (blocking {:?}, async {:?}) handoff_timeout={:?} backoff={} crowd=",
            if self.fair { "fifo" } else { "barging+handoff" },
            if self.spin { "on" } else { "off" },
            self.spin_limit_blocking,
            self.spin_limit_async,
            self.handoff_timeout,
            if self.per_address_backoff { "per-address" } else { "per-thread" },
        )?;
        match self.crowd {
            Some(n) => write!(f, "{n}"),
            None => f.write_str("off"),
        }
    }
}

/// Reports the effective tuning of this build, so a deployment can log which
/// features cargo's unification left it with, and what it made of this
/// machine (the crowd size, from the CPU count, which the first call in a
/// process asks the OS for, reading the cgroup quota on Linux; calling this
/// at start-up also spares the first contended blocking acquisition that).
///
/// # Examples
///
/// ```
/// let t = hybrid_sync::tuning();
/// println!("{t}");
/// assert_eq!(t.fair, cfg!(feature = "fair"));
/// ```
pub fn tuning() -> Tuning {
    Tuning {
        fair: FAIR,
        spin: SPIN,
        spin_limit_blocking: Duration::from_nanos(SPIN_LIMIT_BLOCKING_NS.into()),
        spin_limit_async: Duration::from_nanos(SPIN_LIMIT_ASYNC_NS.into()),
        handoff_timeout: Duration::from_nanos(handoff_timeout_ns()),
        per_address_backoff: per_address_backoff(),
        crowd: Some(crowd()).filter(|&n| n != u32::MAX),
    }
}

/// Knobs for benchmarks and tests that compare settings inside one process.
/// Not part of the stable API.
#[doc(hidden)]
pub mod testing {
    use super::*;

    /// Overrides the handoff timeout for the whole process (`None` restores
    /// the build's default).
    pub fn set_handoff_timeout(timeout: Option<Duration>) {
        let ns = timeout.map_or(u64::MAX, |d| d.as_nanos().min(u64::MAX as u128 - 1) as u64);
        HANDOFF_OVERRIDE_NS.store(ns, Ordering::Relaxed);
    }

    /// Switches per-address backoff off (one shared slot per thread, the
    /// single-delay baseline of seed 000) or back on.
    pub fn set_per_address_backoff(on: bool) {
        PER_ADDRESS_BACKOFF.store(on, Ordering::Relaxed);
    }

    /// Makes spinners ignore the handoff bit and spin on (to their spin
    /// limit) while a handoff is pending: the broken behaviour of seed 003,
    /// for the benchmark that shows what leaving on the bit saves. Never
    /// for production: the spinners can only burn CPU.
    pub fn set_spin_through_handoff(on: bool) {
        SPIN_THROUGH_HANDOFF.store(on, Ordering::Relaxed);
    }

    /// Switches off (or back on) the rule that blocking newcomers do not
    /// spin while a crowd of threads waits in the lock's queue
    /// (`CROWD_PER_CPU`), so that seed 003's benchmark still has spinners
    /// with 32 threads on 2 cores, to show what leaving on the handoff bit
    /// saves.
    pub fn set_crowd_rule(on: bool) {
        CROWD.store(if on { 0 } else { u32::MAX }, Ordering::Relaxed);
    }

    /// Makes spinners measure the time they spend polling while a handoff
    /// is pending (from a poll that saw the handoff bit to the next poll or
    /// the end of the spin), summed over all locks and threads into the
    /// total that [`take_handoff_spin`] returns. Seed 003's figure: CPU
    /// burnt by spinners that cannot win. Off by default (costs two clock
    /// reads per such poll).
    pub fn measure_handoff_spin(on: bool) {
        MEASURE_HANDOFF_SPIN.store(on, Ordering::Relaxed);
    }

    /// The time spinners spent polling under a pending handoff since the
    /// last call (see [`measure_handoff_spin`]), and resets it.
    pub fn take_handoff_spin() -> Duration {
        Duration::from_nanos(HANDOFF_SPIN_NS.swap(0, Ordering::Relaxed))
    }

    /// Which of the shared wait queues a [`LockRef`](crate::LockRef) at
    /// this address uses, so tests can make two of them collide.
    pub fn lockref_bucket<T: ?Sized>(lockref: &crate::LockRef<T>) -> usize {
        crate::layout::bucket_index(lockref.queue_key())
    }

    /// Adds `n` to `lock_arc`'s handle count, as if `n` clones had been
    /// leaked, so that a test reaches [`MAX_COUNT`](crate::MAX_COUNT)
    /// without 2^31 clones.
    ///
    /// # Panics
    ///
    /// If the count would pass `MAX_COUNT`.
    pub fn lockarc_leak_handles<T: ?Sized>(lock_arc: &crate::LockArc<T>, n: u32) {
        lock_arc.leak_handles(n);
    }

    /// Takes back `n` handles that [`lockarc_leak_handles`] added.
    ///
    /// # Panics
    ///
    /// If that would leave no handle: the last one goes by its drop.
    ///
    /// # Safety
    ///
    /// The caller leaked those `n` handles (with `lockarc_leak_handles` or
    /// `mem::forget`) and none of them is used again.
    pub unsafe fn lockarc_reclaim_handles<T: ?Sized>(lock_arc: &crate::LockArc<T>, n: u32) {
        // SAFETY: forwarded.
        unsafe { lock_arc.reclaim_handles(n) }
    }

    /// Under shuttle: marks `lockref` freed, where its last owner would free
    /// it, so that any later touch of its word by the lock's code fails the
    /// test (`tests/shuttle.rs`; the memory itself stays).
    #[cfg(hybrid_sync_shuttle)]
    pub fn lockref_freed<T: ?Sized>(lockref: &crate::LockRef<T>) {
        lockref.raw.layout().model_free();
    }
}
