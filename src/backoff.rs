//! Spinning: per-address adaptive backoff and the optimistic spin on the
//! owner (seeds 000, 003 and 004).
//!
//! # Per-address backoff (seed 000)
//!
//! One adaptive delay per thread fails when a thread contends on two locks
//! with different hold times: the long-held lock teaches it to poll rarely,
//! and it then oversleeps the short-held one (the kernel measured a 13%
//! regression, then +45% with a per-CPU table keyed by a hash of the lock
//! address). So each thread keeps a small table of [`Slot`]s, tagged with a
//! hash of the lock's address, and learns per lock:
//!
//! * `delay_ns`: the pause between two polls of a held lock word. It grows a
//!   by an eighth after each poll that finds the lock still held and shrinks
//!   by an eighth after a pause that ends with the lock free (we may have
//!   overslept), so it settles where about half the polls find the lock
//!   free: a spinner on a 2 us lock stops hammering the owner's cache line
//!   (which slows the owner down), one on a 20 ns lock polls as often as the
//!   lower bound allows. That bound is one cache-line round trip, not one
//!   `pause` (see [`DELAY_MIN_NS`]): polling faster cannot see a release any
//!   sooner, and each poll makes the owner's next atomic wait for the line.
//!
//!   Two waits do not use it, because the lock word tells how they end
//!   ([`Pace`]). A writer spinner that holds `WOKEN` while the readers
//!   inside leave polls every [`DRAIN_POLL_NS`]:
//!   nobody can enter before it, so a poll delays no hand-over, and at the
//!   learned pace the lock sat empty after the last reader left, with every
//!   reader behind the writer waiting too. A reader behind a writer (such a
//!   spinner, or a writer that holds the lock) pauses twice the learned
//!   delay: no poll can win before the writer's section is over, and
//!   earlier polls only pull the line away from it. Neither teaches the
//!   learned delay anything. In the showdown's async read-heavy run the two
//!   took hybrid-sync from 0.92x to 1.07x parking_lot (8 interleaved quick
//!   rounds, 2026-12-02), and readers behind a writer owner as well to
//!   1.14x (three A/Bs of 6-8 rounds: +0.11x, +0.02x, +0.06x).
//! * `wait_ns`: an average of how long spinning had to wait before it won
//!   (glibc's adaptive mutex keeps the same statistic). Failures push it up;
//!   once it reaches the spin limit, spinning on that lock is reduced to a
//!   short probe, so a lock held across `.await`, or for longer than a park
//!   round trip, stops attracting spinners.
//! * `stalls`: how many spins in a row gave up with the lock word frozen
//!   (not one change between the first poll and the give-up: the owner is
//!   not running). Once spinning has stopped paying and a few spins in a
//!   row stalled, even the probe is skipped (one spin in eight still
//!   probes): with guards held across `.await` the probe, clock reads
//!   included, cost a third of each operation's CPU time. A writer
//!   spinner's own `WOKEN` token is not a change.
//!
//!   The rule has a blind spot: an owner that releases and takes the lock
//!   again between two polls leaves the word looking frozen too. In the
//!   showdown's async write-heavy run (a worker runs 16 ~50 ns sections per
//!   task before it yields) 78% of the task spins that got past the first
//!   poll gave up so, and another 130 k spins a second were skipped; the
//!   tasks queued instead, at about one queue-and-wake cycle per change of
//!   worker. A burst of 16 back-to-back polls before giving up tells the two
//!   owners apart (a cycling owner's free word shows within the burst, a
//!   frozen word never): give-ups fell by half and write-heavy rose from
//!   0.92-0.94x to 0.97-0.98x parking_lot, but tasks then also spun out
//!   owners that run beside oversubscribed threads (the mixed workload: the
//!   same throughput for 6-20% more CPU per operation), so it is not in.
//!   Nor are the variants that give up after one burst whether or not it
//!   saw the owner move (+3% on 64 tasks writing, 3-5% more CPU for 4
//!   threads and 32 tasks, in back-to-back runs of 0.7 s).
//! * `lost` and `credit`: how the tasks that releases woke to compete for the
//!   lock fared when they ran here. A release normally wakes a task head
//!   rather than grant it the lock, so that bargers keep the lock busy while
//!   the task waits for its worker. But when woken writers keep finding the
//!   lock taken back by an owner that then stalls (a task that releases,
//!   re-acquires at once and holds the guard across `.await`), each wakeup
//!   is a wasted poll: after [`LOST_IN_A_ROW`] such losses in a row this
//!   thread's releases grant the lock to task heads instead, as tokio does,
//!   for the next [`GRANT_CREDIT`] of them, then wake one again to see
//!   whether that still holds. A woken writer that wins clears count and
//!   credit. Readers of a woken run that find a writer in that then stalls
//!   keep a count and credit of their own (readers that hold the guard
//!   across `.await`: the first of the run get in and leave, the rest find
//!   the next writer in before they run), whose grants go to heads of either
//!   kind, runs of readers included; a reader that gets in clears its count,
//!   not the credit, since its run-mates may still lose. Writers' losses buy
//!   grants for writer heads only.
//!   Only losses to a stalled owner count: a task that loses to a running
//!   barger (short sections) would most likely win the next time, and
//!   granting there would idle the lock until the grantee runs.
//!
//! What the table buys depends on what owners do between acquisitions. A
//! lock that lets newcomers barge loses nothing to a spinner that oversleeps
//! a release while the owner takes the lock straight back; the oversleep
//! idles the lock only when owners go off to do other work (the kernel's
//! netperf run had ticket locks, where every oversleep idles the lock). The
//! showdown's two seed 000 tables show both: with 8 operations on a ~20 ns
//! lock per ~2 us one and nothing in between, the long lock is the
//! bottleneck and the table buys nothing (1.00x one delay per thread); with
//! 32 per long one and ~100 ns of work after each, 1.11x on both locks in
//! the run of 2026-11-30 (0.98-1.38x across runs on this noisy VM, most of
//! them 1.03-1.2x).
//!
//! Two other shapes of the poll loop were measured against parking_lot on
//! 2026-12-01 and left out (figures in `docs/performance.md`): three
//! clock-free polls after 1, 2 and 4 pauses before the timed spin (async
//! write-heavy 0.74x to 0.64x, mixed 0.71x to 0.64x; most likely each extra
//! poll pulls the owner's line), and a pause that doubles after every poll
//! of one spin (throughput within the noise either way, p99 waits longer:
//! seed 002 with 4 tight threads 64 us to 911 us).
//!
//! Delays are in nanoseconds: the cost of one `pause` is measured once at
//! first use (25 ns on the development EPYC, 10 to 140 cycles across Intel
//! generations, which is how parking_lot's fixed pause counts went wrong).
//!
//! # Optimistic owner spin (seeds 003, 004)
//!
//! User space cannot see whether the owner is on a CPU. What it can see is
//! the lock word: a spinner keeps going only while the word keeps changing
//! (readers come and go, the lock changes hands) or, while it does not, for
//! at most about twice the wait this lock usually needs. It stops at once
//! when the handoff bit appears (seed 003: a spinner can never win against a
//! pending handoff, so spinning on it only burns the machine), and never
//! spins longer than the caller's limit, about one park/unpark round trip.
//! Admission (at most two spinners per lock, the rest queue at once, tasks
//! that wait to read aside, and
//! none while the lock is granted to a waiter that has not run yet: that
//! owner is in a run queue or waking up, and a spinning task would even keep
//! it off its worker) is the caller's: see the `SPINNERS` and `GRANTEE`
//! fields of the wait queue word.

// Under the model checker only the two-poll `spin` below is used.
#![cfg_attr(any(hybrid_sync_loom, hybrid_sync_shuttle), allow(dead_code))]

use core::cell::Cell;
use std::time::Instant;

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
use crate::clock;
use crate::config::{self, BACKOFF_SLOTS, DELAY_MIN_NS};
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
use crate::config::{DELAY_MAX_NS, DRAIN_POLL_NS, SPIN_PROBE_NS, STALL_RECHECK, STALLS_BEFORE_SKIP};
use crate::state::Kind;

/// What one poll of the lock word found.
pub(crate) enum Probe {
    /// The poll took the lock.
    Acquired,
    /// The handoff bit is set (or, under `fair`, someone is queued): leave.
    Handoff,
    /// The lock was free but another thread's CAS won the race.
    Lost,
    /// The lock is held; the word as observed. The next poll comes after
    /// the pause learned for this lock.
    Held(u32),
    /// The lock is held, and who holds it or is next says when the next poll
    /// can pay better than the learned pause does (see [`Pace`]). Pauses
    /// taken at such a pace teach the learned one nothing.
    HeldPaced(u32, Pace),
}

/// When to poll a held lock word again, where the word itself says more
/// than this lock's history (see [`Probe::HeldPaced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pace {
    /// A writer holding `WOKEN` waits for the readers inside to leave.
    /// Nobody can enter before it (new readers hold back, and a barging
    /// writer needs the readers gone too), so a poll cannot cost anyone a
    /// hand-over; it costs a leaving reader's release one cache miss, which
    /// the writer's CAS would cost it anyway. Poll every
    /// [`DRAIN_POLL_NS`].
    Drain,
    /// A reader waits behind a writer: one that holds the lock, or a writer
    /// spinner that holds `WOKEN` and takes it first. No poll can win
    /// before the writer's whole section is over (and, for a spinner, the
    /// readers inside have left before it). Pause twice the learned delay,
    /// so that the reader's polls stay out of the writer's way meanwhile.
    BehindWriter,
}

/// How a spin ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spin {
    Acquired,
    Handoff,
    GaveUp,
}

/// Learned spin state of one lock, as seen by one thread.
#[derive(Clone, Copy)]
struct Slot {
    /// Hash tag of the lock address; 0 marks an empty slot.
    tag: u32,
    delay_ns: u32,
    wait_ns: u32,
    /// Spins in a row on this lock that gave up without the word ever
    /// changing: its owner was not running (a task holding it across
    /// `.await`, or a preempted thread).
    stalls: u32,
    /// Per [`Kind`] (`Kind as usize`): woken readers of runs that found
    /// this lock write-locked, and woken writers (tasks or threads, woken by
    /// a release to compete) that found it taken again by an owner that
    /// stalls, in a row (see [`wake_is_futile`]); a woken task of that kind
    /// that got in clears it.
    lost: [u16; 2],
    /// Per [`Kind`]: releases left that grant the lock to a task head rather
    /// than wake it, bought by the losses of that kind.
    credit: [u16; 2],
}

impl Slot {
    /// A lock seen for the first time: poll as often as [`DELAY_MIN_NS`]
    /// allows, and expect a wait of about half a microsecond (a short
    /// critical section plus a cache-line transfer or two) until its own
    /// history says otherwise.
    const EMPTY: Slot = Slot { tag: 0, delay_ns: DELAY_MIN_NS, wait_ns: 500, stalls: 0, lost: [0; 2], credit: [0; 2] };
}

std::thread_local! {
    static SLOTS: [Cell<Slot>; BACKOFF_SLOTS] = const { [const { Cell::new(Slot::EMPTY) }; BACKOFF_SLOTS] };
}

const _: () = assert!(BACKOFF_SLOTS.is_power_of_two());
const SLOT_BITS: u32 = BACKOFF_SLOTS.trailing_zeros();

/// Fibonacci hashing of the lock address (parking_lot_core's multiplier):
/// the top bits pick the slot, the next 32 form the tag.
#[inline]
fn slot_of(addr: usize) -> (usize, u32) {
    if !config::per_address_backoff() {
        return (0, 1);
    }
    let h = (addr as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let index = (h >> (64 - SLOT_BITS)) as usize;
    let tag = ((h >> (32 - SLOT_BITS)) as u32) | 1;
    (index, tag)
}

/// Nanoseconds per `spin_loop()`, times 16; 0 until measured. Relaxed
/// throughout: a value every thread measures alike on its own, publishing
/// nothing else; a thread that sees 0 measures again.
static PAUSE_NS_X16: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Measures the cost of one `pause`, once per process. Takes about 2 us.
#[cold]
fn calibrate() -> u32 {
    let mut best = u128::MAX;
    for _ in 0..4 {
        let start = Instant::now();
        for _ in 0..64 {
            core::hint::spin_loop();
        }
        best = best.min(start.elapsed().as_nanos());
    }
    // ns per pause * 16, at least 1/16 ns so that division is defined.
    let x16 = ((best * 16) / 64).clamp(1, u32::MAX as u128) as u32;
    PAUSE_NS_X16.store(x16, core::sync::atomic::Ordering::Relaxed);
    x16
}

/// Nanoseconds per pause, times 16; measured on first use.
#[inline]
fn pause_cost_x16() -> u32 {
    match PAUSE_NS_X16.load(core::sync::atomic::Ordering::Relaxed) {
        0 => calibrate(),
        x => x,
    }
}

/// Pauses for about `ns` nanoseconds without touching shared memory; under
/// the model checkers, one yield to the other threads instead.
#[inline]
pub(crate) fn relax_ns(ns: u32) {
    #[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
    pause_ns(ns);
    #[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
    {
        let _ = ns;
        crate::loom::spin_loop();
    }
}

/// Pauses for about `ns` nanoseconds without touching shared memory.
#[inline]
fn pause_ns(ns: u32) {
    let x16 = pause_cost_x16();
    let n = ((ns as u64 * 16) / x16 as u64).max(1);
    for _ in 0..n {
        core::hint::spin_loop();
    }
}

/// Polls the lock of address `addr` with `probe` until it is acquired, a
/// handoff is pending, or spinning stops paying; never longer than
/// `limit_ns`.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
pub(crate) fn spin(addr: usize, limit_ns: u32, mut probe: impl FnMut() -> Probe) -> Spin {
    let (index, tag) = slot_of(addr);
    let mut slot = SLOTS.with(|slots| slots[index].get());
    if slot.tag != tag {
        slot = Slot { tag, ..Slot::EMPTY };
    }
    // The first poll needs no clock: many spins end there (the lock was
    // free, or a handoff is pending), and reading the clock costs more than
    // the poll.
    let first = match probe() {
        Probe::Acquired => {
            slot.wait_ns = ewma(slot.wait_ns, 0);
            slot.stalls = 0;
            SLOTS.with(|slots| slots[index].set(slot));
            return Spin::Acquired;
        }
        Probe::Handoff => return Spin::Handoff,
        held_or_lost => held_or_lost,
    };
    // A lock whose spins stopped paying and whose owner keeps stalling (the
    // last spins on it saw the word frozen until they gave up: a task that
    // holds it across `.await`, a preempted thread) is not worth even a
    // probe: the first poll was it. One spin in `STALL_RECHECK` probes
    // anyway, to notice an owner that runs again.
    if slot.wait_ns >= limit_ns
        && slot.stalls >= STALLS_BEFORE_SKIP
        && slot.stalls - STALLS_BEFORE_SKIP + 1 < STALL_RECHECK
    {
        slot.stalls += 1;
        SLOTS.with(|slots| slots[index].set(slot));
        return Spin::GaveUp;
    }
    // How long the word may stay unchanged before we conclude the owner is
    // not making progress: twice what this lock usually needs, or only a
    // probe once spinning on it has stopped paying.
    let stall_ns = if slot.wait_ns >= limit_ns {
        SPIN_PROBE_NS
    } else {
        slot.wait_ns.saturating_mul(2).clamp(SPIN_PROBE_NS, limit_ns)
    } as u64;

    pause_cost_x16(); // calibrate before the clock starts
    let start = clock::now();
    let mut last_change = start;
    let mut last_word = None;
    let mut changed = false;
    // Whether the latest pause was the learned one, whose outcome the
    // learning rules below judge.
    let mut paused = false;
    let mut polled = Some(first);
    // The latest clock reading, and the pause taken after it.
    let (mut now, mut pause) = (start, 0);
    let outcome = loop {
        let found = polled.take().unwrap_or_else(&mut probe);
        let mut moved = false;
        let pace = match found {
            Probe::HeldPaced(_, pace) => Some(pace),
            _ => None,
        };
        match found {
            Probe::Acquired => break Spin::Acquired,
            Probe::Handoff => break Spin::Handoff,
            Probe::Lost => {
                changed = true;
                // Someone else took it: it is held again, so poll it like a
                // held lock, but count the free sighting as an oversleep.
                if paused {
                    slot.delay_ns -= (slot.delay_ns / 8).min(slot.delay_ns - DELAY_MIN_NS);
                }
            }
            Probe::Held(word) | Probe::HeldPaced(word, _) => {
                if paused {
                    slot.delay_ns = (slot.delay_ns + slot.delay_ns / 8 + 1).min(DELAY_MAX_NS);
                }
                if last_word != Some(word) {
                    changed |= last_word.is_some();
                    last_word = Some(word);
                    moved = true;
                }
            }
        }
        now = clock::now();
        if moved {
            last_change = now;
        }
        let quiet = now.saturating_sub(last_change);
        if now.saturating_sub(start) >= u64::from(limit_ns) || quiet >= stall_ns {
            break Spin::GaveUp;
        }
        // Never sleep past the point where the owner counts as stalled: a
        // learned delay longer than the stall budget would turn every
        // "probe only" spin into a full delay.
        let delay = match pace {
            None => slot.delay_ns,
            Some(Pace::Drain) => DRAIN_POLL_NS,
            Some(Pace::BehindWriter) => slot.delay_ns.saturating_mul(2),
        };
        pause = u64::from(delay).min(stall_ns - quiet) as u32;
        pause_ns(pause);
        paused = pace.is_none();
    };

    // No clock read after a win: the lock is ours from the winning poll on,
    // and whatever runs here lengthens the critical section (a clock read
    // costs about 10 ns with the TSC, 20-45 ns through `Instant` on the
    // development VMs, up to a short section; see `clock`). The
    // last reading plus the pause after it is what the win took, to within
    // one poll.
    let waited = match outcome {
        Spin::Acquired => now.saturating_sub(start) + u64::from(pause),
        _ => now.saturating_sub(start),
    }
    .min(u64::from(u32::MAX)) as u32;
    // Count the spins in a row that ended on a frozen word (a probe after a
    // run of skipped spins restarts the run); any sign of life clears it.
    slot.stalls = match outcome {
        Spin::GaveUp if !changed => (slot.stalls + 1).min(STALLS_BEFORE_SKIP),
        _ => 0,
    };
    match outcome {
        Spin::Acquired => {
            // A win after a pause means we may have slept past the release.
            if paused {
                slot.delay_ns -= (slot.delay_ns / 8).min(slot.delay_ns - DELAY_MIN_NS);
            }
            slot.wait_ns = ewma(slot.wait_ns, waited);
        }
        // Spinning did not pay: steer this lock towards "probe only".
        Spin::GaveUp => slot.wait_ns = ewma(slot.wait_ns, limit_ns.saturating_mul(2)),
        // A handoff says nothing about how long the lock is held.
        Spin::Handoff => {}
    }
    SLOTS.with(|slots| slots[index].set(slot));
    outcome
}

/// Woken writers (tasks or threads) lost the lock to a stalled owner, or
/// readers of woken runs found it write-locked, this many times in a row,
/// on this thread's count, before its releases grant the lock to task heads
/// instead of waking them: for the next [`GRANT_CREDIT`] releases that find
/// a writer head after writers' losses, for the next [`READ_GRANT_CREDIT`]
/// that find a head of either kind after readers' losses.
const LOST_IN_A_ROW: u16 = 4;
/// How many releases grant once woken writers lost [`LOST_IN_A_ROW`] times;
/// one wakeup in this many is the price of noticing a change of pattern.
/// With guards held across `.await` (the showdown's hold-across workload,
/// 64 tasks on 2 workers), wake-and-lose cost two wasted polls per three
/// operations: 0.76-0.84x tokio's throughput, 0.89-0.96x with this rule.
/// Writers' losses buy grants for writer heads only: a run of readers that
/// is granted the lock before it runs keeps every writer out meanwhile, the
/// cost that waking the run avoids where its readers do get in.
const GRANT_CREDIT: u16 = 16;
/// How many releases grant once readers of woken runs lost [`LOST_IN_A_ROW`]
/// times in a row: to the head whatever its kind (a writer woken into a lock
/// whose owners stall idles it as much). A wasted wakeup of a run costs the
/// polls of most of the run, so a credit of 16 was too little: with 64 tasks
/// holding their guards over a yield, 90% of them reads, 0.93x tokio's
/// throughput against 0.97-0.98x with 64, and 0.50-0.52x before readers'
/// losses counted (docs/performance.md, "Read guards held across `.await`").
/// 256 rather than 64 since every licensed reader's loss counts: 0.908x
/// against 0.885x with half the operations reads, 0.959x against 0.949x with
/// 90%, and a lock whose tasks stop holding their guards across `.await`
/// runs at full speed in the first 100 ms after (docs/performance.md, "Half
/// reads held across `.await`").
const READ_GRANT_CREDIT: u16 = 256;

/// Records how a task or thread of `kind` that a release woke to compete
/// for the lock at `addr` fared when it ran here: `won` it (a reader: got in
/// at once), or lost: a writer found it taken again by an owner that stalls
/// (`owner_stalls` after its spin), a reader found it write-locked and went
/// back to the queue.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
pub(crate) fn note_woken(addr: usize, kind: Kind, won: bool) {
    let (index, tag) = slot_of(addr);
    let k = kind as usize;
    SLOTS.with(|slots| {
        let mut slot = slots[index].get();
        if slot.tag != tag {
            if won {
                // Nothing learned to clear; keep the slot's lock.
                return;
            }
            slot = Slot { tag, ..Slot::EMPTY };
        }
        if won {
            slot.lost[k] = 0;
            // A reader's win says nothing of its run-mates.
            if kind == Kind::Write {
                slot.credit[k] = 0;
            }
        } else {
            slot.lost[k] = (slot.lost[k] + 1).min(LOST_IN_A_ROW);
            if slot.lost[k] == LOST_IN_A_ROW {
                slot.credit[k] = match kind {
                    Kind::Read => READ_GRANT_CREDIT,
                    Kind::Write => GRANT_CREDIT,
                };
            }
        }
        slots[index].set(slot);
    });
}

/// Whether waking a task head of kind `head` to compete for the lock at
/// `addr` most likely wastes a poll: the last woken writers (for a writer
/// head) or readers of woken runs (for either) all lost it (the lock is
/// taken again before a woken task can run: a guard held across `.await`
/// whose owner re-acquires at once), so the release should grant it
/// instead. Each yes spends a credit, a writer head its own kind's first;
/// once they are spent a release wakes again, and the wakeup's outcome says
/// whether that still holds.
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
pub(crate) fn wake_is_futile(addr: usize, head: Kind) -> bool {
    let (index, tag) = slot_of(addr);
    SLOTS.with(|slots| {
        let mut slot = slots[index].get();
        if slot.tag != tag {
            return false;
        }
        let k = match head {
            Kind::Write if slot.credit[Kind::Write as usize] > 0 => Kind::Write as usize,
            _ => Kind::Read as usize,
        };
        if slot.credit[k] == 0 {
            return false;
        }
        slot.credit[k] -= 1;
        slots[index].set(slot);
        true
    })
}

/// Whether this thread's history of the lock at `addr` says its owners
/// stall: spinning on it stopped paying within `limit_ns`, and the last
/// spins saw the word frozen until they gave up (the state in which `spin`
/// skips even the probe).
#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
#[inline]
pub(crate) fn owner_stalls(addr: usize, limit_ns: u32) -> bool {
    let (index, tag) = slot_of(addr);
    let slot = SLOTS.with(|slots| slots[index].get());
    slot.tag == tag && slot.wait_ns >= limit_ns && slot.stalls >= STALLS_BEFORE_SKIP
}

/// Under the model checkers nothing is learned.
#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
pub(crate) fn owner_stalls(_addr: usize, _limit_ns: u32) -> bool {
    false
}

/// Under the model checkers nothing is learned.
#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
pub(crate) fn note_woken(_addr: usize, _kind: Kind, _won: bool) {}

/// Under the model checkers nothing is learned.
#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
pub(crate) fn wake_is_futile(_addr: usize, _head: Kind) -> bool {
    false
}

/// The model checker's spin: two polls, no clock, no learning, and no
/// `yield` between them (loom's `spin_loop` yields, which would let the owner
/// run to completion first in every schedule and hide the queueing paths).
#[cfg(any(hybrid_sync_loom, hybrid_sync_shuttle))]
pub(crate) fn spin(_addr: usize, _limit_ns: u32, mut probe: impl FnMut() -> Probe) -> Spin {
    for _ in 0..2 {
        match probe() {
            Probe::Acquired => return Spin::Acquired,
            Probe::Handoff => return Spin::Handoff,
            Probe::Lost | Probe::Held(_) | Probe::HeldPaced(..) => {}
        }
    }
    Spin::GaveUp
}

/// `avg + (sample - avg) / 8`, the weight glibc's adaptive mutex uses.
#[inline]
fn ewma(avg: u32, sample: u32) -> u32 {
    let avg = avg as i64;
    (avg + (sample as i64 - avg) / 8) as u32
}

#[cfg(all(test, not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn woken_writers_losing_to_a_stalled_owner_buy_grants_and_a_win_clears_them() {
        let addr = 0x5eed_0000usize;
        let (r, w) = (Kind::Read, Kind::Write);
        assert!(!wake_is_futile(addr, w), "nothing learned yet");
        for _ in 0..LOST_IN_A_ROW - 1 {
            note_woken(addr, w, false);
        }
        assert!(!wake_is_futile(addr, w), "fewer losses than LOST_IN_A_ROW");
        note_woken(addr, w, false);
        assert!(!wake_is_futile(addr, r), "writers' losses buy no grants for readers");
        for _ in 0..GRANT_CREDIT {
            assert!(wake_is_futile(addr, w));
        }
        assert!(!wake_is_futile(addr, w), "the credit is spent: the next release wakes");
        // That wakeup lost again: one loss renews the credit.
        note_woken(addr, w, false);
        assert!(wake_is_futile(addr, w));
        // A woken writer that wins clears count and credit.
        note_woken(addr, w, true);
        assert!(!wake_is_futile(addr, w));
        note_woken(addr, w, false);
        assert!(!wake_is_futile(addr, w), "one loss after a win is not a pattern");
        // Another lock learned nothing.
        assert!(!wake_is_futile(addr + 64, w));
    }

    #[test]
    fn woken_readers_losing_buy_grants_for_both_kinds_and_a_win_clears_only_the_count() {
        let addr = 0x5eed_1000usize;
        let (r, w) = (Kind::Read, Kind::Write);
        for _ in 0..LOST_IN_A_ROW - 1 {
            note_woken(addr, r, false);
        }
        // A reader that got in breaks the row.
        note_woken(addr, r, true);
        note_woken(addr, r, false);
        assert!(!wake_is_futile(addr, r), "the losses were not in a row");
        for _ in 0..LOST_IN_A_ROW - 1 {
            note_woken(addr, r, false);
        }
        // The first of the next woken run got in; its run-mates' losses
        // still bought grants: a reader's win leaves the credit.
        note_woken(addr, r, true);
        assert!(wake_is_futile(addr, r));
        // Writer heads are granted on readers' credit too, when they have
        // none of their own; a woken writer's win does not touch it.
        assert!(wake_is_futile(addr, w));
        note_woken(addr, w, true);
        for _ in 2..READ_GRANT_CREDIT {
            assert!(wake_is_futile(addr, r));
        }
        assert!(!wake_is_futile(addr, r), "the credit is spent");
        assert!(!wake_is_futile(addr, w), "the credit is spent");
    }

    #[test]
    fn ewma_moves_an_eighth() {
        assert_eq!(ewma(0, 800), 100);
        assert_eq!(ewma(800, 0), 700);
        assert_eq!(ewma(500, 500), 500);
    }

    #[test]
    fn slots_separate_addresses() {
        let a = slot_of(0x1000);
        let b = slot_of(0x1040);
        assert_ne!(a.1, 0);
        assert!(a != b, "neighbouring locks should not share a slot");
    }

    #[test]
    fn pause_is_calibrated_in_nanoseconds() {
        pause_ns(1);
        let x16 = PAUSE_NS_X16.load(core::sync::atomic::Ordering::Relaxed);
        assert!(x16 > 0);
        let start = Instant::now();
        pause_ns(20_000);
        // Generous bounds: the machine is shared and noisy; this only catches
        // a unit error (a pause count taken for nanoseconds).
        let took = start.elapsed().as_nanos();
        assert!(took >= 5_000, "20 us pause took {took} ns");
    }

    #[test]
    // Under Miri a poll costs microseconds of its clock (it advances with
    // the work done), so every spin runs out of budget at its first poll.
    #[cfg_attr(miri, ignore = "times spins against the clock, which Miri slows ~1000x")]
    fn a_frozen_owner_is_polled_once_and_rechecked_now_and_then() {
        // The spins below are timed by the clock, so a thread preempted
        // mid-spin (the test threads share two vCPUs with everything else)
        // can turn one spin into a single poll. Each attempt runs on fresh
        // lock addresses; a broken rule fails every attempt the same way.
        let mut failures = Vec::new();
        for attempt in 0..5 {
            match frozen_owner_scenario(0x1000_0000 * (attempt + 1)) {
                Ok(()) => return,
                Err(e) => failures.push(e),
            }
        }
        panic!("every attempt failed: {failures:#?}");
    }

    /// One run of the scenario on locks at `base` and nearby.
    fn frozen_owner_scenario(base: usize) -> Result<(), String> {
        let check = |ok: bool, what: String| if ok { Ok(()) } else { Err(what) };
        // An owner that never runs (the word never changes): once spinning
        // stopped paying and enough spins stalled, a spin is one poll...
        let frozen = base;
        let polls_of = |addr: usize, word: &mut dyn FnMut(u32) -> Probe| {
            let mut n = 0;
            let outcome = spin(addr, 2_000, || {
                n += 1;
                word(n)
            });
            (outcome, n)
        };
        for _ in 0..32 {
            assert_eq!(polls_of(frozen, &mut |_| Probe::Held(1)).0, Spin::GaveUp);
        }
        let polls: Vec<u32> = (0..2 * STALL_RECHECK).map(|_| polls_of(frozen, &mut |_| Probe::Held(1)).1).collect();
        let probes = polls.iter().filter(|&&n| n > 1).count();
        check(probes == 2, format!("one probe in {STALL_RECHECK} spins, got polls {polls:?}"))?;
        // ...until a probe finds the owner alive (the word changes while it
        // polls): from then on every spin probes again.
        let mut spins = 0;
        while polls_of(frozen, &mut |n| Probe::Held(n)).1 == 1 {
            spins += 1;
            check(spins < STALL_RECHECK, format!("no probe in {spins} spins"))?;
        }
        for _ in 0..STALLS_BEFORE_SKIP {
            let (_, n) = polls_of(frozen, &mut |_| Probe::Held(1));
            check(n > 1, "a spin was skipped right after the owner showed signs of life".into())?;
        }

        // A lock whose word keeps changing never gets there, however long
        // its spins last.
        let busy = (1..).map(|i| base + i * 64).find(|&a| slot_of(a).0 != slot_of(frozen).0).unwrap();
        for _ in 0..64 {
            let (outcome, n) = polls_of(busy, &mut |n| Probe::Held(n));
            assert_eq!(outcome, Spin::GaveUp);
            check(n > 1, "a spin on a changing word was skipped".into())?;
        }
        Ok(())
    }

    #[test]
    // Under Miri a poll costs microseconds of its clock (it advances with
    // the work done), so every spin runs out of budget at its first poll.
    #[cfg_attr(miri, ignore = "times spins against the clock, which Miri slows ~1000x")]
    fn handoff_stops_at_once_and_learning_is_per_address() {
        let mut polls = 0;
        assert_eq!(
            spin(0x10_0000, 4_000, || {
                polls += 1;
                Probe::Handoff
            }),
            Spin::Handoff
        );
        assert_eq!(polls, 1);
        // So does one that appears mid-spin: the poll that sees it is the
        // last (unless a preemption ran the budget out before it).
        let mut polls = 0;
        let outcome = spin(0x11_0000, 4_000, || {
            polls += 1;
            if polls < 3 { Probe::Held(polls) } else { Probe::Handoff }
        });
        assert!(
            (outcome, polls) == (Spin::Handoff, 3) || (outcome == Spin::GaveUp && polls < 3),
            "{outcome:?} after {polls} polls"
        );

        // A lock that is never released: spinning gives up and the slot
        // learns it, so the next spin on it is only a probe...
        let long = 0x20_0000;
        for _ in 0..32 {
            assert_eq!(spin(long, 4_000, || Probe::Held(1)), Spin::GaveUp);
        }
        assert_eq!(spin(long, 4_000, || Probe::Held(1)), Spin::GaveUp);
        // ...while another lock's slot is untouched.
        let (li, _) = slot_of(long);
        let long_slot = SLOTS.with(|s| s[li].get());
        assert!(long_slot.wait_ns >= 4_000, "{}", long_slot.wait_ns);
        // Its spin is timed by the clock, so a preemption mid-spin (the test
        // threads share two vCPUs with everything else) can run it out of
        // budget before its fourth poll: a few attempts, each on a lock of
        // its own. A long lock's learning leaking into other slots fails
        // every attempt the same way.
        let mut failures = Vec::new();
        for attempt in 0..5 {
            let short = 0x30_0000 + attempt * 0x1_0000;
            let (si, st) = slot_of(short);
            assert!(si != li, "pick addresses in distinct slots");
            let mut n = 0;
            let outcome = spin(short, 4_000, || {
                n += 1;
                if n > 3 { Probe::Acquired } else { Probe::Held(n) }
            });
            let short_slot = SLOTS.with(|s| s[si].get());
            assert_eq!(short_slot.tag, st);
            if outcome == Spin::Acquired && short_slot.wait_ns < 4_000 {
                return;
            }
            failures.push(format!("{outcome:?} after {n} polls, wait {} ns", short_slot.wait_ns));
        }
        panic!("every attempt failed: {failures:#?}");
    }

    #[test]
    #[cfg_attr(miri, ignore = "times spins against the clock, which Miri slows ~1000x")]
    fn paced_polls_follow_the_word_and_teach_the_learned_pause_nothing() {
        // The spins below are timed by the clock, and a thread preempted
        // mid-spin polls less than it meant to, so the comparisons of poll
        // rates get a few attempts, each on a lock of its own.
        let mut failures = Vec::new();
        for attempt in 0..5 {
            match paced_scenario(0x50_0000 + attempt * 0x1_0000) {
                Ok(()) => return,
                Err(e) => failures.push(e),
            }
        }
        panic!("every attempt failed: {failures:#?}");
    }

    fn paced_scenario(addr: usize) -> Result<(), String> {
        let limit_ns = 40_000;
        let delay = || SLOTS.with(|s| s[slot_of(addr).0].get().delay_ns);
        // One spin's polls per microsecond, with `probe` saying what each
        // poll (numbered from 1) found.
        let rate = |probe: &mut dyn FnMut(u32) -> Probe| {
            let mut polls = 0;
            let started = Instant::now();
            assert_eq!(
                spin(addr, limit_ns, || {
                    polls += 1;
                    probe(polls)
                }),
                Spin::GaveUp
            );
            f64::from(polls) * 1e3 / started.elapsed().as_nanos() as f64
        };
        // Polls of a held, changing word at the learned pace: every one finds
        // it held, so the pause grows to the ceiling, and stays there (the
        // spin after, whose rate is the learned pace's). Growing takes about
        // 16 pauses, 14 us of a spin's 40; a spin preempted on the way ends
        // at its limit with fewer (CI's test threads share 2 vCPUs), so it
        // gets a few spins, as the rates get a few attempts.
        for _ in 0..8 {
            if delay() == DELAY_MAX_NS {
                break;
            }
            rate(&mut |n| Probe::Held(n));
        }
        if delay() != DELAY_MAX_NS {
            return Err(format!("the learned pause did not grow to the ceiling in 8 spins: {} ns", delay()));
        }
        let learned_rate = rate(&mut |n| Probe::Held(n));
        let learned = delay();
        assert_eq!(learned, DELAY_MAX_NS, "the learned pause left the ceiling on a held word");
        // A writer waiting for readers to drain polls far more often than
        // the learned pause lets it (DRAIN_POLL_NS against 2 us)...
        let drain_rate = rate(&mut |n| Probe::HeldPaced(n, Pace::Drain));
        if drain_rate < 4.0 * learned_rate {
            return Err(format!("drain: {drain_rate:.2} polls/us, learned pace {learned_rate:.2}"));
        }
        // ...a reader behind a writer about half as often.
        let behind_rate = rate(&mut |n| Probe::HeldPaced(n, Pace::BehindWriter));
        if behind_rate > 0.75 * learned_rate {
            return Err(format!("behind a writer: {behind_rate:.2} polls/us, learned pace {learned_rate:.2}"));
        }
        // Neither teaches the learned pause anything: not a held word after
        // a paced pause (which would grow it, were it not at the ceiling),
        // nor a free one (which would shrink it).
        for pace in [Pace::Drain, Pace::BehindWriter] {
            rate(&mut |n| if n % 2 == 0 { Probe::Lost } else { Probe::HeldPaced(n, pace) });
            assert_eq!(delay(), learned, "{pace:?}: paced pauses changed the learned pause");
        }
        Ok(())
    }

    #[test]
    #[cfg_attr(miri, ignore = "times spins against the clock, which Miri slows ~1000x")]
    fn polls_are_never_closer_than_the_floor() {
        // An owner that keeps running and a spinner that keeps losing the
        // race for every release it sees: two polls in three find the word
        // free but taken (each shrinks the pause), the third finds it held
        // by the next owner (a changed word, so the spin never counts as
        // stalled). The pause would shrink to nothing but for the floor,
        // and the spin runs its whole budget: at most one poll per floor,
        // and the first one. A thread preempted mid-spin only polls less;
        // the factor 2 leaves room for a `pause` calibration that came out
        // long.
        let limit_ns = 40_000;
        let mut polls = 0u32;
        let started = Instant::now();
        let outcome = spin(0x40_0000, limit_ns, || {
            polls += 1;
            if polls.is_multiple_of(3) { Probe::Held(polls) } else { Probe::Lost }
        });
        let took = started.elapsed().as_nanos();
        assert_eq!(outcome, Spin::GaveUp);
        let most = 2 * (took / u128::from(DELAY_MIN_NS)) + 2;
        assert!(
            u128::from(polls) <= most,
            "{polls} polls in {took} ns, at most {most} with a pause of at least {DELAY_MIN_NS} ns"
        );
    }
}
