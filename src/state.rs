//! The lock word: layout, predicates and the acquisition policy.
//!
//! One `AtomicU32` holds everything an acquirer or a releaser needs to
//! decide, in one load or one read-modify-write (rwsem's `count`):
//!
//! ```text
//!  31                                         4   3   2   1   0
//! +--------------------------------------------+---+---+---+---+
//! |           reader count (28 bits)           | K | H | W | X |
//! +--------------------------------------------+---+---+---+---+
//!   X  WRITER    a writer owns the lock
//!   W  WAITERS   the wait queue is not empty
//!   H  HANDOFF   the queue head demands the lock: nobody else may take it,
//!                nobody spins, and the next release grants it to the head
//!   K  WOKEN     a writer that is awake will take the lock next: the queue
//!                head a release woke, or a writer spinning on readers while
//!                nobody is queued. New readers hold back, and a release
//!                need not wake anyone
//! ```
//!
//! # Who changes what
//!
//! * `WRITER` and the reader count change by compare-and-swap when a lock is
//!   taken (fast path, spinner, or a waiter under the queue lock), by one
//!   `fetch_sub` when it is released (a `LockRef`'s lock: a
//!   compare-and-swap, or with waiters to dispatch a `fetch_sub` under the
//!   queue lock, since its memory may be freed once it is released;
//!   `RawRwLock::write_release_pinned`), and under the queue lock when it is
//!   granted to queued waiters. A newcomer reader is the exception: its
//!   fast path adds itself with one `fetch_add` and looks at the word that
//!   returns, and if that word did not let it in, it takes itself back out
//!   with a `fetch_sub` (rwsem's `rwsem_read_trylock`). In between it is a
//!   *transient reader*.
//! * `WAITERS` and `HANDOFF` are set and cleared only under the queue lock.
//! * `WOKEN` is a token: whoever sets it (by CAS from clear) owns it and must
//!   give it up by taking the lock in the same CAS, by clearing it in a CAS
//!   that checks the lock is still held (so the holder's release will wake
//!   someone), or by clearing it and then dispatching if the lock is free.
//!   Its owners are the (writer) queue head that a release woke, and a
//!   writer spinner that took it while readers held the lock and the queue
//!   was empty: like parking_lot setting its writer bit before waiting for
//!   readers to drain, it stops new readers from streaming in while the
//!   writer waits for the current ones.
//!
//! # Invariants
//!
//! 1. Outside the queue lock, `WAITERS` is set if and only if the wait queue
//!    is not empty.
//! 2. `HANDOFF` implies `WAITERS`: it is set on behalf of the queue head and
//!    cleared whenever the head leaves the queue (granted, acquired or
//!    cancelled), so it is never left set without a head.
//! 3. `WRITER` is never set beside a reader that was let in; the count
//!    beside it is transient readers only.
//! 4. The readers let in never exceed the lock's `max_readers`. The count may,
//!    by the transient readers, at most one per running thread.
//! 5. `WOKEN` has exactly one owner while set, and the owner is running or
//!    will run (a woken head, a spinner, or a head sleeping with a deadline).
//!
//! # Transient readers
//!
//! A transient reader touches no data and leaves at once, and the rest of
//! the machine treats it as what it looks like, a reader about to release:
//! a writer cannot take the word until it has gone (the compare-and-swaps
//! expect no readers), a dispatch that finds it counts it as a holder whose
//! release will dispatch again, and its leaving makes that release's check
//! (last reader, or a full lock's room), skipped only while `WRITER` is set,
//! since the writer's own release comes later in the word's order and makes
//! the check then. So no state decision is new: the word only
//! spends a moment in states that real readers would also produce, and
//! beside a writer, in a state that its release already handles.
//!
//! # Why a release never loses a waiter
//!
//! A waiter sets `WAITERS` with a compare-and-swap against the locked state
//! it saw, under the queue lock, before it links its node; a release is one
//! read-modify-write that returns the previous word. Both act on this one
//! word, so one is ordered first: either the release sees `WAITERS` and takes
//! the queue lock (where the node is already linked), or the waiter's CAS
//! fails on the released word and it retries instead of sleeping. A release
//! that skips the queue because it saw `WOKEN` is covered by the token rule:
//! the owner either takes the lock or gives the token up in an RMW that comes
//! after that release and so sees the lock free.
//!
//! # Memory orderings
//!
//! The word orders exactly one thing, the critical sections: each owner's
//! writes to the protected value happen-before the next owner's reads.
//! Everything else it carries is a decision that the word's single
//! modification order settles by itself. So, for this word (and the
//! lock half of a [`LockRef`](crate::LockRef)'s word, which follows it):
//!
//! * A compare-and-swap that takes the lock (fast path, spinner, barger,
//!   woken head, reader joining readers) is `Acquire` on success, and a
//!   release is one `Release` read-modify-write (`fetch_sub`, or
//!   `fetch_add` for a downgrade): the pair that orders the sections. A
//!   grant takes the lock on the grantee's behalf with the same `Acquire`
//!   CAS, and the grantee reads its node's `GRANTED` with `Acquire`,
//!   stored with `Release` after that CAS: the chain runs from the last
//!   owner's release through the granter to the grantee.
//! * A failed compare-and-swap is `Relaxed`: its caller only retries (or
//!   gives up) with the value it returns, and no data is read on that value.
//! * A load that only feeds a compare-and-swap, or a decision a later
//!   compare-and-swap validates (whether to spin, barge or queue), is
//!   `Relaxed`: the CAS fails if the word has moved since.
//! * `WAITERS`, `HANDOFF` and `WOKEN` are set and cleared with `Relaxed`
//!   operations. They guard no data: the queue's list is ordered by the
//!   queue lock (`Acquire` to take it, `Release` to let it go, in
//!   [`crate::wait_queue`]), and "a release never loses a waiter" (above)
//!   rests on all of them acting on one word, whose read-modify-writes
//!   every thread sees in one order whatever their orderings.
//!
//! Each site says which of these it is, or why it differs.
//!
//! # The reader limit
//!
//! The count has 28 bits. At most `2^27 - 1` (134,217,727) readers hold the
//! lock at once: the other half of the field is room for transient readers
//! above a full lock, one per thread inside the read fast path, and a
//! process has far fewer threads than `2^27` (Linux allows at most `2^22`),
//! so the count never carries out of the word. tokio's `with_max_readers`
//! accepts up to `u32::MAX >> 3` (`2^29 - 1`); this crate accepts the same
//! range and caps the effective limit at `2^27 - 1`, a difference no
//! program can reach (it would need more than 1 GiB of live read guards).

/// A writer owns the lock.
pub(crate) const WRITER: u32 = 1 << 0;
/// The wait queue is not empty (Invariant 1).
pub(crate) const WAITERS: u32 = 1 << 1;
/// The queue head demands the lock; no barging, no spinning (Invariant 2).
pub(crate) const HANDOFF: u32 = 1 << 2;
/// Someone awake will compete for the lock; releases need not wake anyone.
pub(crate) const WOKEN: u32 = 1 << 3;
/// Bit position of the reader count.
pub(crate) const READER_SHIFT: u32 = 4;
/// One reader, as an increment of the word.
pub(crate) const ONE_READER: u32 = 1 << READER_SHIFT;
/// The reader count field.
pub(crate) const READERS_MASK: u32 = !(ONE_READER - 1);
/// The largest reader count the word holds.
pub(crate) const READER_FIELD_MAX: u32 = u32::MAX >> READER_SHIFT;
/// The most readers a lock lets in: half the field, so that transient
/// readers above a full lock cannot carry out of the word (see "The reader
/// limit").
pub(crate) const MAX_READERS: u32 = READER_FIELD_MAX >> 1;
/// The largest `max_readers` tokio accepts (its `MAX_READS`); larger values
/// panic, smaller ones are honoured up to [`MAX_READERS`].
pub(crate) const TOKIO_MAX_READS: u32 = u32::MAX >> 3;

const FLAGS: [u32; 4] = [WRITER, WAITERS, HANDOFF, WOKEN];
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
    assert!(WRITER | WAITERS | HANDOFF | WOKEN | READERS_MASK == u32::MAX);
    assert!(READERS_MASK >> READER_SHIFT == READER_FIELD_MAX);
    assert!(READER_FIELD_MAX - MAX_READERS >= 1 << 22, "room for a transient reader per thread");
    assert!(MAX_READERS < TOKIO_MAX_READS);
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

/// Someone awake holds the `WOKEN` token.
#[inline]
pub(crate) const fn has_woken(s: u32) -> bool {
    s & WOKEN != 0
}

/// Whether a release that left the word as `s` must dispatch: someone is
/// queued and nobody awake is coming for the lock.
#[inline]
pub(crate) const fn needs_wakeup(s: u32) -> bool {
    s & (WAITERS | WOKEN) == WAITERS
}

/// The uncontended read path: nobody writes, nobody waits, no writer is
/// about to, and there is room for one more reader. A queued or spinning
/// writer therefore blocks new readers.
#[inline]
pub(crate) const fn can_read_fast(s: u32, max_readers: u32) -> bool {
    s & (WRITER | WAITERS | HANDOFF | WOKEN) == 0 && reader_count(s) < max_readers
}

/// Whether an acquirer that is *not* in the queue (a newcomer or a spinner)
/// may take the lock in state `s`.
///
/// * Never while `HANDOFF` is set: the head has waited long enough.
/// * Under `fair`, never while anyone is queued: strict FIFO.
/// * A reader never passes queued waiters (rwsem's read fast path refuses
///   `WAITERS` too): a queued writer blocks new readers, and readers queued
///   behind it are granted together when their turn comes.
/// * A writer may take any unlocked word, ahead of a head that was woken but
///   has not run yet: that is the barging that keeps a contended lock busy
///   instead of idle for a wakeup's latency.
#[inline]
pub(crate) const fn may_barge(kind: Kind, s: u32, max_readers: u32, fair: bool) -> bool {
    match kind {
        Kind::Read => can_read_fast(s, max_readers),
        Kind::Write => is_unlocked(s) && !has_handoff(s) && !(fair && has_waiters(s)),
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
            if reader_count(s) > 0 {
                // Newcomer readers between their add and its back-out.
                write!(f, ", {} transient readers", reader_count(s))?;
            }
        } else {
            write!(f, "{} readers", reader_count(s))?;
        }
        if has_waiters(s) {
            f.write_str(", waiters")?;
        }
        if has_handoff(s) {
            f.write_str(", handoff")?;
        }
        if has_woken(s) {
            f.write_str(", woken")?;
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
        assert_eq!(reader_count((ONE_READER * 7) | WAITERS), 7);
        assert_eq!(reader_count(u32::MAX), READER_FIELD_MAX);
        assert_eq!(READER_FIELD_MAX, (1 << 28) - 1);
        assert_eq!(MAX_READERS, (1 << 27) - 1);
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
        assert!(!can_read_fast(ONE_READER | WOKEN, MAX), "a writer is about to take it");
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
        // A free word with a woken head: a writer barges by default, and
        // queues under fair; a reader never passes queued waiters.
        assert!(may_barge(Write, WAITERS | WOKEN, MAX, false));
        assert!(!may_barge(Write, WAITERS | WOKEN, MAX, true));
        assert!(!may_barge(Read, WAITERS, MAX, false));
        assert!(!may_barge(Read, WAITERS, MAX, true));
        // Readers never join readers past a queued writer.
        assert!(!may_barge(Read, ONE_READER | WAITERS, MAX, false));
        // max_readers is respected.
        assert!(!may_barge(Read, 4 * ONE_READER, 4, false));
    }

    #[test]
    fn wakeups() {
        assert!(needs_wakeup(WAITERS));
        assert!(needs_wakeup(WAITERS | HANDOFF | ONE_READER));
        assert!(!needs_wakeup(WAITERS | WOKEN));
        assert!(!needs_wakeup(WAITERS | WOKEN | HANDOFF));
        assert!(!needs_wakeup(0));
        assert!(has_woken(WOKEN | WAITERS));
    }

    #[test]
    fn head_ignores_handoff_but_not_owners() {
        assert!(head_may_take(Write, WAITERS | HANDOFF, MAX));
        assert!(head_may_take(Read, WAITERS | HANDOFF | ONE_READER, MAX));
        assert!(!head_may_take(Write, WAITERS | ONE_READER, MAX));
        assert!(!head_may_take(Read, WAITERS | WRITER, MAX));
        assert!(!head_may_take(Read, WAITERS | (2 * ONE_READER), 2));
    }

    #[test]
    fn owners() {
        assert_eq!(with_owner(Write, WAITERS), WAITERS | WRITER);
        assert_eq!(with_owner(Read, ONE_READER | WAITERS), (2 * ONE_READER) | WAITERS);
        // Downgrade arithmetic: adding ONE_READER - WRITER turns the writer
        // into one reader and keeps the flags.
        let w = WRITER | WAITERS | HANDOFF;
        assert_eq!(w.wrapping_add(ONE_READER - WRITER), ONE_READER | WAITERS | HANDOFF);
    }

    #[test]
    fn decoded() {
        let d = format!("{:?}", Decoded((2 * ONE_READER) | WAITERS | HANDOFF));
        assert!(d.contains("2 readers, waiters, handoff"), "{d}");
        let d = format!("{:?}", Decoded(WRITER));
        assert!(d.contains("write-locked"), "{d}");
        let d = format!("{:?}", Decoded(WRITER | ONE_READER | WAITERS));
        assert!(d.contains("write-locked, 1 transient readers, waiters"), "{d}");
    }
}
