//! The lock word: layout, predicates and the acquisition policy.
//!
//! One `AtomicU32` holds everything an acquirer needs to decide, in one load,
//! whether it may take the lock (rwsem's `count`):
//!
//! ```text
//!  31                                              3   2   1   0
//! +-------------------------------------------------+---+---+---+
//! |              reader count (29 bits)             | H | W | X |
//! +-------------------------------------------------+---+---+---+
//!   X  WRITER    a writer owns the lock
//!   W  WAITERS   the wait queue is not empty
//!   H  HANDOFF   the queue head demands the lock: nobody else may take it,
//!                nobody spins, and the next release grants it to the head
//! ```
//!
//! The reader count has 29 bits, so the largest count is `u32::MAX >> 3`,
//! which is exactly tokio's `MAX_READS`: every `max_readers` tokio accepts,
//! the word can count.
//!
//! # Who changes what
//!
//! * `WRITER` and the reader count change by compare-and-swap when a lock is
//!   taken (fast path, spinner, or a waiter under the queue lock), by one
//!   `fetch_sub` when it is released, and under the queue lock when it is
//!   granted to queued waiters.
//! * `WAITERS` is set and cleared only under the queue lock, and it is set
//!   exactly while the queue holds a node (Invariant 1).
//! * `HANDOFF` is set and cleared only under the queue lock.
//!
//! # Invariants
//!
//! 1. Outside the queue lock, `WAITERS` is set if and only if the wait queue
//!    is not empty.
//! 2. `HANDOFF` implies `WAITERS`: it is set on behalf of the queue head and
//!    cleared whenever the head leaves the queue (granted, acquired or
//!    cancelled), so it is never left set without a head.
//! 3. `WRITER` and a non-zero reader count are never set together.
//! 4. The reader count never exceeds the lock's `max_readers`.
//!
//! # Why a release never loses a waiter
//!
//! A waiter sets `WAITERS` with a compare-and-swap against the locked state
//! it saw, under the queue lock, before it links its node; a release is one
//! read-modify-write that returns the previous word. Both act on this one
//! word, so one is ordered first: either the release sees `WAITERS` and takes
//! the queue lock (where the node is already linked), or the waiter's CAS
//! fails on the released word and it retries instead of sleeping.

/// A writer owns the lock.
pub(crate) const WRITER: u32 = 1 << 0;
/// The wait queue is not empty (Invariant 1).
pub(crate) const WAITERS: u32 = 1 << 1;
/// The queue head demands the lock; no barging, no spinning (Invariant 2).
pub(crate) const HANDOFF: u32 = 1 << 2;
/// Bit position of the reader count.
pub(crate) const READER_SHIFT: u32 = 3;
/// One reader, as an increment of the word.
pub(crate) const ONE_READER: u32 = 1 << READER_SHIFT;
/// The reader count field.
pub(crate) const READERS_MASK: u32 = !(ONE_READER - 1);
/// The largest reader count the word holds (tokio's `MAX_READS`).
pub(crate) const MAX_READERS: u32 = u32::MAX >> READER_SHIFT;

const FLAGS: [u32; 3] = [WRITER, WAITERS, HANDOFF];
const _: () = {
    // Each flag is a single bit, and no two fields overlap.
    let mut i = 0;
    while i < FLAGS.len() {
        assert!(FLAGS[i].count_ones() == 1);
        assert!(FLAGS[i] & READERS_MASK == 0);
        let mut j = i + 1;
        while j < FLAGS.len() {
            assert!(FLAGS[i] & FLAGS[j] == 0);
            j += 1;
        }
        i += 1;
    }
    // The fields cover the whole word.
    assert!(WRITER | WAITERS | HANDOFF | READERS_MASK == u32::MAX);
    assert!(READERS_MASK >> READER_SHIFT == MAX_READERS);
    assert!(MAX_READERS == u32::MAX >> 3);
};

/// What an acquirer wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Shared access.
    Read,
    /// Exclusive access.
    Write,
}

/// Number of readers holding the lock.
#[inline]
pub(crate) const fn reader_count(s: u32) -> u32 {
    s >> READER_SHIFT
}

/// A writer holds the lock.
#[inline]
pub(crate) const fn is_write_locked(s: u32) -> bool {
    s & WRITER != 0
}

/// Nobody holds the lock (the flags may be set).
#[inline]
pub(crate) const fn is_unlocked(s: u32) -> bool {
    s & (WRITER | READERS_MASK) == 0
}

/// Someone is queued.
#[inline]
pub(crate) const fn has_waiters(s: u32) -> bool {
    s & WAITERS != 0
}

/// The queue head has demanded the lock.
#[inline]
pub(crate) const fn has_handoff(s: u32) -> bool {
    s & HANDOFF != 0
}

/// The uncontended read path: nobody writes, nobody waits, room for one more
/// reader. A queued writer (`WAITERS`) therefore blocks new readers.
#[inline]
pub(crate) const fn can_read_fast(s: u32, max_readers: u32) -> bool {
    s & (WRITER | WAITERS | HANDOFF) == 0 && reader_count(s) < max_readers
}

/// Whether an acquirer that is *not* in the queue (a newcomer or a spinner)
/// may take the lock in state `s`.
///
/// * Never while `HANDOFF` is set: the head has waited long enough.
/// * Under `fair`, never while anyone is queued: strict FIFO.
/// * Otherwise a writer may take any unlocked word (barging past a woken
///   head), and a reader may join other readers only when nobody is queued,
///   since a queued waiter behind readers is a writer (rwsem's rule: readers
///   do not steal from a reader-owned lock with waiters).
#[inline]
pub(crate) const fn may_barge(kind: Kind, s: u32, max_readers: u32, fair: bool) -> bool {
    if has_handoff(s) || (fair && has_waiters(s)) {
        return false;
    }
    match kind {
        Kind::Write => is_unlocked(s),
        Kind::Read => !is_write_locked(s) && reader_count(s) < max_readers && (reader_count(s) == 0 || !has_waiters(s)),
    }
}

/// Whether the queue head may take the lock in state `s`. `HANDOFF` does
/// not stop it: the bit is held on its behalf.
#[inline]
pub(crate) const fn head_may_take(kind: Kind, s: u32, max_readers: u32) -> bool {
    match kind {
        Kind::Write => is_unlocked(s),
        Kind::Read => !is_write_locked(s) && reader_count(s) < max_readers,
    }
}

/// The word after `kind` takes the lock in state `s`.
#[inline]
pub(crate) const fn with_owner(kind: Kind, s: u32) -> u32 {
    match kind {
        Kind::Write => s | WRITER,
        Kind::Read => s + ONE_READER,
    }
}

/// Decodes a lock word for panic messages and hang reports.
pub(crate) struct Decoded(pub(crate) u32);

impl core::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.0;
        write!(f, "{s:#010x} (")?;
        if is_write_locked(s) {
            f.write_str("write-locked")?;
        } else {
            write!(f, "{} readers", reader_count(s))?;
        }
        if has_waiters(s) {
            f.write_str(", waiters")?;
        }
        if has_handoff(s) {
            f.write_str(", handoff")?;
        }
        f.write_str(")")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Kind::{Read, Write};

    const MAX: u32 = MAX_READERS;

    #[test]
    fn reader_field() {
        assert_eq!(reader_count(0), 0);
        assert_eq!(reader_count(ONE_READER * 7 | WAITERS), 7);
        assert_eq!(reader_count(u32::MAX), MAX_READERS);
        assert!(is_unlocked(WAITERS | HANDOFF));
        assert!(!is_unlocked(ONE_READER));
        assert!(!is_unlocked(WRITER));
    }

    #[test]
    fn fast_read_refuses_writers_waiters_handoff_and_full() {
        assert!(can_read_fast(0, MAX));
        assert!(can_read_fast(3 * ONE_READER, MAX));
        assert!(!can_read_fast(WRITER, MAX));
        assert!(!can_read_fast(ONE_READER | WAITERS, MAX));
        assert!(!can_read_fast(HANDOFF | WAITERS, MAX));
        assert!(!can_read_fast(2 * ONE_READER, 2));
        assert!(can_read_fast(ONE_READER, 2));
    }

    #[test]
    fn barging_policy() {
        // Handoff stops everyone, in both modes.
        for fair in [false, true] {
            assert!(!may_barge(Write, WAITERS | HANDOFF, MAX, fair));
            assert!(!may_barge(Read, WAITERS | HANDOFF, MAX, fair));
            assert!(may_barge(Write, 0, MAX, fair));
            assert!(may_barge(Read, ONE_READER, MAX, fair));
            assert!(!may_barge(Write, ONE_READER, MAX, fair));
            assert!(!may_barge(Read, WRITER, MAX, fair));
        }
        // A free word with a woken head: default barges, fair queues.
        assert!(may_barge(Write, WAITERS, MAX, false));
        assert!(may_barge(Read, WAITERS, MAX, false));
        assert!(!may_barge(Write, WAITERS, MAX, true));
        assert!(!may_barge(Read, WAITERS, MAX, true));
        // Readers never join readers past a queued writer.
        assert!(!may_barge(Read, ONE_READER | WAITERS, MAX, false));
        // max_readers is respected.
        assert!(!may_barge(Read, 4 * ONE_READER, 4, false));
    }

    #[test]
    fn head_ignores_handoff_but_not_owners() {
        assert!(head_may_take(Write, WAITERS | HANDOFF, MAX));
        assert!(head_may_take(Read, WAITERS | HANDOFF | ONE_READER, MAX));
        assert!(!head_may_take(Write, WAITERS | ONE_READER, MAX));
        assert!(!head_may_take(Read, WAITERS | WRITER, MAX));
        assert!(!head_may_take(Read, WAITERS | 2 * ONE_READER, 2));
    }

    #[test]
    fn owners() {
        assert_eq!(with_owner(Write, WAITERS), WAITERS | WRITER);
        assert_eq!(with_owner(Read, ONE_READER | WAITERS), 2 * ONE_READER | WAITERS);
        // Downgrade arithmetic: adding ONE_READER - WRITER turns the writer
        // into one reader and keeps the flags.
        let w = WRITER | WAITERS | HANDOFF;
        assert_eq!(w.wrapping_add(ONE_READER - WRITER), ONE_READER | WAITERS | HANDOFF);
    }

    #[test]
    fn decoded() {
        let d = format!("{:?}", Decoded(2 * ONE_READER | WAITERS | HANDOFF));
        assert!(d.contains("2 readers, waiters, handoff"), "{d}");
        let d = format!("{:?}", Decoded(WRITER));
        assert!(d.contains("write-locked"), "{d}");
    }
}
