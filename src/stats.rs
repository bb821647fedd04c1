//! Lock-event counters in the spirit of the kernel's `lockevent_inc` and
//! `lockstat`: with the `stats` feature each event is one relaxed increment
//! on a slow path; without it every hook is an empty inline function and
//! the per-lock counters take no space.
//!
//! Three views:
//! - per lock: [`RwLock::stats`](crate::RwLock::stats),
//!   [`Mutex::stats`](crate::Mutex::stats) and
//!   [`LockRef::stats`](crate::LockRef::stats) return a [`LockStats`]:
//!   acquisitions, contended acquisitions, total and longest wait, and the
//!   slow-path events of that lock alone (spins and spin wins, parks,
//!   handoffs...). This is what to read to pick a tuning feature.
//! - process-wide: [`snapshot`] sums each [`Event`] over all locks, for a
//!   benchmark that wants to see what the slow paths did.
//! - a flight recorder: between [`record`]`(true)` and [`record`]`(false)`
//!   every event is also appended, with a clock read, its thread and its
//!   lock, to a ring of the latest 262,144, which [`recorded`] returns in
//!   order. It shows what every lock user was doing during one long wait
//!   (`examples/wait_anatomy.rs --trace`); off, it costs each event one
//!   relaxed load.
//!
//! ```
//! let m = hybrid_sync::Mutex::new(0);
//! *m.try_lock().unwrap() += 1;
//! let stats = m.stats();
//! // All zeros unless built with `--features stats`.
//! assert!(stats.acquisitions() <= 1);
//! println!("{stats}");
//! ```
//!
//! With `stats` on, a lock grows by the counters (20 words) and every
//! acquisition pays one relaxed increment; a contended one also reads the
//! clock twice. [`LockRef`](crate::LockRef) then no longer fits in 8 bytes.

/// The events counted.
///
/// # Examples
///
/// One lock's count of an event, here the acquisitions that queued:
///
/// ```
/// use hybrid_sync::{Mutex, stats::Event};
///
/// let lock = Mutex::new(0);
/// *lock.blocking_lock() += 1; // uncontended: nothing queues
/// assert_eq!(lock.stats().event(Event::Queued), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// Entered the contended path (the fast path failed).
    Contended,
    /// A spin took the lock.
    SpinWin,
    /// A spin gave up (owner made no progress, or the limit was reached).
    SpinGiveUp,
    /// A spin left because a handoff was pending.
    SpinHandoff,
    /// Took the lock under the queue lock without queueing (barging).
    Barge,
    /// Linked a node into the wait queue.
    Queued,
    /// A release found waiters and ran dispatch.
    Dispatch,
    /// Dispatch woke the head to compete.
    WakeHead,
    /// Dispatch handed the lock to queued waiters (one event per grant).
    Grant,
    /// Dispatch or a waiter set the handoff bit.
    HandoffSet,
    /// A woken or polled queued waiter took the lock.
    RetryWon,
    /// A woken or polled queued waiter lost the race and waits again.
    RetryLost,
    /// A queued waiter gave up (its future was dropped).
    Cancel,
    /// A blocked thread woke from a timed park to look at the lock again.
    TimedRecheck,
    /// A barging acquisition looked at the queue head for an overdue
    /// handoff (one in 64 barges per thread, while anyone is queued).
    Audit,
    /// A thread parked in the queue woke up: woken, granted, spuriously, or
    /// (`lock_api`'s timed locks) at its deadline. The nap of a woken
    /// thread that lost is [`TimedRecheck`](Event::TimedRecheck).
    Unparked,
}

/// Number of [`Event`] kinds: the length of a [`snapshot`].
///
/// # Examples
///
/// ```
/// use hybrid_sync::stats::{ALL, EVENTS, snapshot};
///
/// let counts: [u64; EVENTS] = snapshot(false);
/// assert_eq!(counts.len(), ALL.len());
/// ```
pub const EVENTS: usize = Event::Unparked as usize + 1;

/// One event as the recorder saw it (see [`record`]).
///
/// # Examples
///
/// ```
/// use hybrid_sync::stats::{self, Recorded};
///
/// fn line(e: &Recorded) -> String {
///     format!("{:?} thread {} lock {:#x} {:?}", e.at, e.thread, e.lock, e.event)
/// }
/// for e in stats::recorded() {
///     println!("{}", line(&e));
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// When it happened (a clock read just after the event).
    pub at: std::time::Instant,
    /// The thread it happened on: a small number, the same for every event
    /// of one thread, in the order threads first recorded something.
    pub thread: u32,
    /// The lock it happened on: an address inside the lock.
    pub lock: usize,
    /// What happened.
    pub event: Event,
}

#[cfg(feature = "stats")]
mod imp {
    use super::{ALL, EVENTS, Event, LockStats, Recorded};
    // Plain std atomics even in loom builds: statistics are not part of the
    // protocol and must not multiply the schedules loom explores.
    use crate::loom::atomic64::AtomicU64;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    /// Events the recorder keeps, the latest ones (24 bytes each).
    const RECORDER_SLOTS: usize = 1 << 18;

    /// The flight recorder: a ring of the latest slow-path events of every
    /// lock. Each slot is three relaxed words (time since `base` + 1, 0 for
    /// an empty slot; thread and event; lock), written one by one, so a
    /// slot read while being written may mix two events: read after
    /// `record(false)`.
    struct Recorder {
        base: Instant,
        next: AtomicUsize,
        slots: Box<[[AtomicU64; 3]]>,
    }

    static RECORDING: AtomicBool = AtomicBool::new(false);
    static RECORDER: OnceLock<Recorder> = OnceLock::new();

    /// Starts recording (clearing what was recorded before) or stops.
    ///
    /// # Examples
    ///
    /// A thread waits for a lock that another holds; the recorder shows
    /// what the lock did meanwhile:
    ///
    /// ```
    /// use hybrid_sync::{Mutex, stats};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let lock = Arc::new(Mutex::new(()));
    /// stats::record(true);
    /// let guard = lock.blocking_lock();
    /// let waiter = {
    ///     let lock = lock.clone();
    ///     std::thread::spawn(move || drop(lock.blocking_lock()))
    /// };
    /// std::thread::sleep(Duration::from_millis(10));
    /// drop(guard);
    /// waiter.join().unwrap();
    /// stats::record(false);
    /// let events = stats::recorded();
    /// assert!(events.iter().any(|e| e.event == stats::Event::Contended));
    /// for e in &events {
    ///     println!("{:?} thread {} {:?}", e.at, e.thread, e.event);
    /// }
    /// ```
    pub fn record(on: bool) {
        if on {
            let r = RECORDER.get_or_init(|| Recorder {
                base: Instant::now(),
                next: AtomicUsize::new(0),
                slots: (0..RECORDER_SLOTS).map(|_| [const { AtomicU64::new(0) }; 3]).collect(),
            });
            for slot in r.slots.iter() {
                slot[0].store(0, Relaxed);
            }
            r.next.store(0, Relaxed);
        }
        RECORDING.store(on, Relaxed);
    }

    /// What the recorder holds, oldest first.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::stats;
    ///
    /// stats::record(true);
    /// // ... the workload to look at ...
    /// stats::record(false);
    /// let events = stats::recorded();
    /// assert!(events.windows(2).all(|w| w[0].at <= w[1].at));
    /// ```
    pub fn recorded() -> Vec<Recorded> {
        let Some(r) = RECORDER.get() else { return Vec::new() };
        // Relaxed, as the writes in `record_event`: the ring orders no other
        // data. Read once the recorded threads have been joined (which orders
        // their writes before this) or at least stopped recording; a slot
        // read while a thread rewrites it may mix two events' fields.
        let mut out: Vec<Recorded> = r
            .slots
            .iter()
            .filter_map(|slot| {
                let at = slot[0].load(Relaxed).checked_sub(1)?;
                let who = slot[1].load(Relaxed);
                Some(Recorded {
                    at: r.base + Duration::from_nanos(at),
                    thread: (who >> 8) as u32,
                    lock: slot[2].load(Relaxed) as usize,
                    event: *ALL.get((who & 0xff) as usize)?,
                })
            })
            .collect();
        out.sort_by_key(|e| e.at);
        out
    }

    /// Appends one event to the ring.
    #[cold]
    fn record_event(lock: usize, e: Event) {
        static THREADS: AtomicU32 = AtomicU32::new(0);
        std::thread_local! {
            static THREAD: u32 = THREADS.fetch_add(1, Relaxed);
        }
        let Some(r) = RECORDER.get() else { return };
        let thread = THREAD.try_with(|t| *t).unwrap_or(u32::MAX);
        // Relaxed throughout: `next` only hands out distinct slots (its RMW
        // does that in any ordering), and the slot's fields are read as a
        // best-effort log (see `recorded`).
        let slot = &r.slots[r.next.fetch_add(1, Relaxed) % RECORDER_SLOTS];
        let at = u64::try_from(r.base.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        slot[1].store(u64::from(thread) << 8 | e as u64, Relaxed);
        slot[2].store(lock as u64, Relaxed);
        slot[0].store(at + 1, Relaxed);
    }

    static COUNTS: [AtomicU64; EVENTS] = [const { AtomicU64::new(0) }; EVENTS];

    /// A snapshot of every process-wide counter, and resets them if `reset`.
    ///
    /// # Examples
    ///
    /// ```
    /// use hybrid_sync::{Mutex, stats::{Event, snapshot}};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let lock = Mutex::new(());
    /// let before = snapshot(false);
    /// let guard = lock.lock().await;
    /// let mut waiting = Box::pin(lock.lock());
    /// assert!(futures::poll!(&mut waiting).is_pending()); // contended
    /// drop(guard);
    /// drop(waiting.await);
    /// let after = snapshot(false);
    /// assert!(after[Event::Contended as usize] > before[Event::Contended as usize]);
    /// # }
    /// ```
    pub fn snapshot(reset: bool) -> [u64; EVENTS] {
        let mut out = [0; EVENTS];
        for (o, c) in out.iter_mut().zip(&COUNTS) {
            *o = if reset { c.swap(0, Relaxed) } else { c.load(Relaxed) };
        }
        out
    }

    /// One lock's counters. All Relaxed: each is a statistic on its own,
    /// read without any claim to be consistent with the others.
    pub(crate) struct Counters {
        events: [AtomicU64; EVENTS],
        acquisitions: AtomicU64,
        contended: AtomicU64,
        wait_total_ns: AtomicU64,
        wait_max_ns: AtomicU64,
    }

    /// When a contended acquisition started: a reading of the lock's own
    /// clock (`clock::now`, never 0), or 0 for none yet. Eight bytes, as
    /// against sixteen for an `Option<Instant>`: the stamp sits in every
    /// lock future, and the padding that the node's alignment leaves there
    /// has room for eight bytes, so `read`, `write` and `lock` stay the
    /// size of tokio's with it (the owned futures, which hold the `Arc` as
    /// well, grow to 128 bytes; `tests/locks.rs`).
    #[derive(Clone, Copy)]
    pub(crate) struct Stamp(u64);

    impl Stamp {
        #[inline]
        pub(crate) fn now() -> Self {
            Stamp(crate::clock::now())
        }
        /// No time yet: a future not polled yet must not read the clock.
        #[inline]
        pub(crate) const fn unset() -> Self {
            Stamp(0)
        }
        /// This stamp if it is set, else now: a wait that starts over
        /// (after a lock given back to yield) keeps its first start.
        #[inline]
        pub(crate) fn or_now(self) -> Self {
            if self.0 != 0 { self } else { Self::now() }
        }
        /// Nanoseconds since the stamp, or 0 for none.
        fn elapsed_ns(self) -> u64 {
            if self.0 == 0 { 0 } else { crate::clock::now().saturating_sub(self.0) }
        }
    }

    impl Counters {
        pub(crate) const fn new() -> Self {
            Counters {
                events: [const { AtomicU64::new(0) }; EVENTS],
                acquisitions: AtomicU64::new(0),
                contended: AtomicU64::new(0),
                wait_total_ns: AtomicU64::new(0),
                wait_max_ns: AtomicU64::new(0),
            }
        }

        #[inline]
        pub(crate) fn event(&self, e: Event) {
            COUNTS[e as usize].fetch_add(1, Relaxed);
            self.events[e as usize].fetch_add(1, Relaxed);
            if RECORDING.load(Relaxed) {
                record_event(self as *const Self as usize, e);
            }
        }

        /// An acquisition that did not wait.
        #[inline]
        pub(crate) fn acquired(&self) {
            self.acquisitions.fetch_add(1, Relaxed);
        }

        /// An acquisition counted by [`acquired`](Self::acquired) whose
        /// lock was given back before the caller got it (a spent coop
        /// budget, `acquire::future`): the caller's retry counts the one
        /// acquisition it sees, as a cancelled wait counts none.
        #[cold]
        pub(crate) fn given_back(&self) {
            self.acquisitions.fetch_sub(1, Relaxed);
        }

        /// An acquisition that waited since `since`.
        pub(crate) fn acquired_after(&self, since: Stamp) {
            let waited = since.elapsed_ns();
            self.acquisitions.fetch_add(1, Relaxed);
            self.contended.fetch_add(1, Relaxed);
            self.wait_total_ns.fetch_add(waited, Relaxed);
            self.wait_max_ns.fetch_max(waited, Relaxed);
        }

        pub(crate) fn snapshot(&self) -> LockStats {
            LockStats {
                enabled: true,
                acquisitions: self.acquisitions.load(Relaxed),
                contended: self.contended.load(Relaxed),
                wait_total_ns: self.wait_total_ns.load(Relaxed),
                wait_max_ns: self.wait_max_ns.load(Relaxed),
                events: core::array::from_fn(|i| self.events[i].load(Relaxed)),
            }
        }
    }
}

#[cfg(not(feature = "stats"))]
mod imp {
    use super::{EVENTS, Event, LockStats, Recorded};

    /// Always zeros without the `stats` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(hybrid_sync::stats::snapshot(false), [0; hybrid_sync::stats::EVENTS]);
    /// ```
    pub fn snapshot(_reset: bool) -> [u64; EVENTS] {
        [0; EVENTS]
    }

    /// Records nothing without the `stats` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// hybrid_sync::stats::record(true);
    /// drop(hybrid_sync::Mutex::new(()).try_lock());
    /// hybrid_sync::stats::record(false);
    /// assert!(hybrid_sync::stats::recorded().is_empty());
    /// ```
    pub fn record(_on: bool) {}

    /// Always empty without the `stats` feature.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(hybrid_sync::stats::recorded().is_empty());
    /// ```
    pub fn recorded() -> Vec<Recorded> {
        Vec::new()
    }

    /// No counters: a zero-sized field.
    pub(crate) struct Counters;

    /// No clock read.
    #[derive(Clone, Copy)]
    pub(crate) struct Stamp;

    impl Stamp {
        #[inline(always)]
        pub(crate) fn now() -> Self {
            Stamp
        }
        #[inline(always)]
        pub(crate) const fn unset() -> Self {
            Stamp
        }
        #[inline(always)]
        pub(crate) fn or_now(self) -> Self {
            Stamp
        }
    }

    impl Counters {
        pub(crate) const fn new() -> Self {
            Counters
        }
        #[inline(always)]
        pub(crate) fn event(&self, _: Event) {}
        #[inline(always)]
        pub(crate) fn acquired(&self) {}
        #[inline(always)]
        pub(crate) fn given_back(&self) {}
        #[inline(always)]
        pub(crate) fn acquired_after(&self, _: Stamp) {}
        pub(crate) fn snapshot(&self) -> LockStats {
            LockStats {
                enabled: false,
                acquisitions: 0,
                contended: 0,
                wait_total_ns: 0,
                wait_max_ns: 0,
                events: [0; EVENTS],
            }
        }
    }
}

pub(crate) use imp::{Counters, Stamp};
pub use imp::{record, recorded, snapshot};

/// One lock's counters at one moment, from
/// [`RwLock::stats`](crate::RwLock::stats) and friends. All zeros (and
/// [`enabled`](Self::enabled) `false`) without the `stats` feature.
///
/// The counters are read one by one while the lock may be in use, so they
/// need not add up exactly; two snapshots subtracted ([`since`](Self::since))
/// give the figures of a period.
///
/// # Examples
///
/// ```
/// let lock = hybrid_sync::Mutex::new(0);
/// let before = lock.stats();
/// for _ in 0..10 {
///     *lock.blocking_lock() += 1;
/// }
/// let period = lock.stats().since(&before);
/// if period.enabled() {
///     assert_eq!(period.acquisitions(), 10);
///     assert_eq!(period.contended(), 0); // nobody else wanted it
///     assert_eq!(period.wait_mean(), std::time::Duration::ZERO);
/// } else {
///     assert_eq!(period.acquisitions(), 0); // built without `stats`
/// }
/// println!("{period}");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockStats {
    enabled: bool,
    acquisitions: u64,
    contended: u64,
    wait_total_ns: u64,
    wait_max_ns: u64,
    events: [u64; EVENTS],
}

impl LockStats {
    /// Whether the crate was built with the `stats` feature (if not, every
    /// figure is zero).
    pub fn enabled(&self) -> bool {
        self.enabled
    }
    /// Acquisitions, read and write, blocking and async, `try_*` included:
    /// one per acquisition that completed. (A lock that a task took and
    /// gave back before it yielded on a spent coop budget, to take it anew
    /// when it runs next, counts once; a cancelled wait counts none.)
    pub fn acquisitions(&self) -> u64 {
        self.acquisitions
    }
    /// Acquisitions that found the lock unavailable and had to wait (spin,
    /// park or yield).
    pub fn contended(&self) -> u64 {
        self.contended
    }
    /// Total time contended acquisitions waited.
    pub fn wait_total(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.wait_total_ns)
    }
    /// Longest single wait (not reset by [`since`](Self::since)).
    pub fn wait_max(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.wait_max_ns)
    }
    /// Mean wait of a contended acquisition.
    pub fn wait_mean(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.wait_total_ns.checked_div(self.contended).unwrap_or(0))
    }
    /// How often `event` happened on this lock.
    pub fn event(&self, event: Event) -> u64 {
        self.events[event as usize]
    }
    /// Spin phases run (won, given up, or stopped by a handoff).
    pub fn spins(&self) -> u64 {
        self.event(Event::SpinWin) + self.event(Event::SpinGiveUp) + self.event(Event::SpinHandoff)
    }
    /// Spin phases that ended holding the lock.
    pub fn spin_wins(&self) -> u64 {
        self.event(Event::SpinWin)
    }
    /// Waiters that queued (a thread parked, a task registered its waker).
    pub fn parks(&self) -> u64 {
        self.event(Event::Queued)
    }
    /// Handoffs: the handoff bit set for a waiter that waited too long, and
    /// locks granted straight to queued waiters by a release.
    pub fn handoffs(&self) -> u64 {
        self.event(Event::HandoffSet) + self.event(Event::Grant)
    }
    /// The figures of the period from `earlier` to `self` (the maximum wait
    /// stays the all-time one).
    pub fn since(&self, earlier: &LockStats) -> LockStats {
        LockStats {
            enabled: self.enabled,
            acquisitions: self.acquisitions.saturating_sub(earlier.acquisitions),
            contended: self.contended.saturating_sub(earlier.contended),
            wait_total_ns: self.wait_total_ns.saturating_sub(earlier.wait_total_ns),
            wait_max_ns: self.wait_max_ns,
            events: core::array::from_fn(|i| self.events[i].saturating_sub(earlier.events[i])),
        }
    }
}

/// One line, lockstat-like: `acquisitions 1200 contended 37 (3.1%) wait
/// mean 2.1µs max 40µs spins 30 won 21 parks 9 handoffs 2`.
impl std::fmt::Display for LockStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.enabled {
            return f.write_str("(lock statistics need the `stats` feature)");
        }
        let share = if self.acquisitions == 0 { 0.0 } else { 100.0 * self.contended as f64 / self.acquisitions as f64 };
        write!(
            f,
            "acquisitions {} contended {} ({share:.1}%) wait mean {:?} max {:?} spins {} won {} parks {} handoffs {}",
            self.acquisitions,
            self.contended,
            self.wait_mean(),
            self.wait_max(),
            self.spins(),
            self.spin_wins(),
            self.parks(),
            self.handoffs(),
        )
    }
}

/// Every [`Event`], in counter order: `ALL[i] as usize == i`.
///
/// # Examples
///
/// Every process-wide counter by name:
///
/// ```
/// use hybrid_sync::stats::{ALL, snapshot};
///
/// for (event, count) in ALL.iter().zip(snapshot(false)) {
///     println!("{event:?}: {count}");
/// }
/// assert!(ALL.iter().enumerate().all(|(i, &e)| e as usize == i));
/// ```
pub const ALL: [Event; EVENTS] = [
    Event::Contended,
    Event::SpinWin,
    Event::SpinGiveUp,
    Event::SpinHandoff,
    Event::Barge,
    Event::Queued,
    Event::Dispatch,
    Event::WakeHead,
    Event::Grant,
    Event::HandoffSet,
    Event::RetryWon,
    Event::RetryLost,
    Event::Cancel,
    Event::TimedRecheck,
    Event::Audit,
    Event::Unparked,
];
