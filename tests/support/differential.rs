//! The interpreter of `tests/differential.rs` (read its docs first): random
//! single-threaded sequences of lock operations, applied step by step to
//! hybrid-sync's locks and to tokio's, checked against the invariants and,
//! under `fair`, against tokio's outcome at every step. Shared with the
//! fuzz target (`fuzz/fuzz_targets/differential.rs`), which draws each
//! choice from the fuzzer's input instead of a seeded generator, so that
//! coverage guides the sequences into the lock's rarer states.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

type Boxed<T> = Pin<Box<dyn Future<Output = T>>>;

/// The operations both locks offer, on owned guards so that every future and
/// guard can be kept in a table.
pub trait Lock: 'static {
    type Read: 'static;
    type Write: 'static;
    const NAME: &'static str;
    /// A `Mutex`: "reads" take the lock exclusively too.
    const EXCLUSIVE: bool = false;
    fn with_max_readers(max: u32) -> Arc<Self>;
    fn read(self: &Arc<Self>) -> Boxed<Self::Read>;
    fn write(self: &Arc<Self>) -> Boxed<Self::Write>;
    fn try_read(self: &Arc<Self>) -> Option<Self::Read>;
    fn try_write(self: &Arc<Self>) -> Option<Self::Write>;
    fn downgrade(guard: Self::Write) -> Self::Read;
}

macro_rules! lock {
    ($name:literal, $path:ident) => {
        impl Lock for $path::sync_types::RwLock<u32> {
            type Read = $path::sync_types::OwnedRwLockReadGuard<u32>;
            type Write = $path::sync_types::OwnedRwLockWriteGuard<u32>;
            const NAME: &'static str = $name;
            fn with_max_readers(max: u32) -> Arc<Self> {
                Arc::new(Self::with_max_readers(0, max))
            }
            fn read(self: &Arc<Self>) -> Boxed<Self::Read> {
                Box::pin(self.clone().read_owned())
            }
            fn write(self: &Arc<Self>) -> Boxed<Self::Write> {
                Box::pin(self.clone().write_owned())
            }
            fn try_read(self: &Arc<Self>) -> Option<Self::Read> {
                self.clone().try_read_owned().ok()
            }
            fn try_write(self: &Arc<Self>) -> Option<Self::Write> {
                self.clone().try_write_owned().ok()
            }
            fn downgrade(guard: Self::Write) -> Self::Read {
                guard.downgrade()
            }
        }
    };
}

mod ours {
    pub mod sync_types {
        pub use hybrid_sync::{Mutex, OwnedMutexGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
    }
}
mod theirs {
    pub mod sync_types {
        pub use tokio::sync::{Mutex, OwnedMutexGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
    }
}
lock!("hybrid-sync", ours);
lock!("tokio", theirs);

/// A `Mutex` as a lock whose every acquisition is exclusive (a "read" is a
/// `lock_owned`, a "downgrade" keeps the guard), so the same sequences drive
/// it.
macro_rules! mutex {
    ($name:literal, $path:ident) => {
        impl Lock for $path::sync_types::Mutex<u32> {
            type Read = $path::sync_types::OwnedMutexGuard<u32>;
            type Write = $path::sync_types::OwnedMutexGuard<u32>;
            const NAME: &'static str = $name;
            const EXCLUSIVE: bool = true;
            fn with_max_readers(_: u32) -> Arc<Self> {
                Arc::new(Self::new(0))
            }
            fn read(self: &Arc<Self>) -> Boxed<Self::Read> {
                Box::pin(self.clone().lock_owned())
            }
            fn write(self: &Arc<Self>) -> Boxed<Self::Write> {
                Box::pin(self.clone().lock_owned())
            }
            fn try_read(self: &Arc<Self>) -> Option<Self::Read> {
                self.clone().try_lock_owned().ok()
            }
            fn try_write(self: &Arc<Self>) -> Option<Self::Write> {
                self.clone().try_lock_owned().ok()
            }
            fn downgrade(guard: Self::Write) -> Self::Read {
                guard
            }
        }
    };
}
mutex!("hybrid-sync Mutex", ours);
mutex!("tokio Mutex", theirs);

/// A read or write future, boxed.
enum Acquiring<L: Lock> {
    Read(Boxed<L::Read>),
    Write(Boxed<L::Write>),
}

/// A pending future and whether its waker has been woken since its last poll.
struct Waiting<L: Lock> {
    future: Acquiring<L>,
    woken: Arc<Woken>,
}

#[derive(Default)]
struct Woken(AtomicBool);
impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Relaxed);
    }
}

enum Held<L: Lock> {
    Read(#[allow(dead_code)] L::Read),
    Write(L::Write),
}

/// One lock with its pending futures and held guards, in slots that both
/// locks number alike.
struct World<L: Lock> {
    lock: Arc<L>,
    max_readers: u32,
    waiting: Vec<Option<Waiting<L>>>,
    held: Vec<Option<Held<L>>>,
}

/// What a step did, compared between the two locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    /// A poll that completed: the future's guard is now held.
    Ready,
    Pending,
    /// A `try_*` that succeeded, or failed.
    Took,
    Refused,
    /// Nothing to compare (a drop, a downgrade).
    Done,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Read,
    Write,
    Poll(usize),
    Cancel(usize),
    Release(usize),
    TryRead,
    TryWrite,
    Downgrade(usize),
}

impl<L: Lock> World<L> {
    fn new(max_readers: u32) -> Self {
        World { lock: L::with_max_readers(max_readers), max_readers, waiting: Vec::new(), held: Vec::new() }
    }

    fn poll_slot(&mut self, slot: usize) -> Outcome {
        let waiting = self.waiting[slot].as_mut().expect("a live future");
        waiting.woken.0.store(false, Ordering::Relaxed);
        let waker = Waker::from(waiting.woken.clone());
        let mut cx = Context::from_waker(&waker);
        let held = match &mut waiting.future {
            Acquiring::Read(f) => match f.as_mut().poll(&mut cx) {
                Poll::Ready(g) => Held::Read(g),
                Poll::Pending => return Outcome::Pending,
            },
            Acquiring::Write(f) => match f.as_mut().poll(&mut cx) {
                Poll::Ready(g) => Held::Write(g),
                Poll::Pending => return Outcome::Pending,
            },
        };
        self.waiting[slot] = None;
        self.held.push(Some(held));
        Outcome::Ready
    }

    fn apply(&mut self, step: Step) -> Outcome {
        match step {
            Step::Read | Step::Write => {
                let future = match step {
                    Step::Read => Acquiring::Read(self.lock.read()),
                    _ => Acquiring::Write(self.lock.write()),
                };
                self.waiting.push(Some(Waiting { future, woken: Arc::default() }));
                self.poll_slot(self.waiting.len() - 1)
            }
            Step::Poll(slot) => self.poll_slot(slot),
            Step::Cancel(slot) => {
                self.waiting[slot] = None;
                Outcome::Done
            }
            Step::Release(slot) => {
                self.held[slot] = None;
                Outcome::Done
            }
            Step::TryRead | Step::TryWrite => {
                let guard = match step {
                    Step::TryRead => self.lock.try_read().map(Held::Read),
                    _ => self.lock.try_write().map(Held::Write),
                };
                match guard {
                    Some(g) => {
                        self.held.push(Some(g));
                        Outcome::Took
                    }
                    None => Outcome::Refused,
                }
            }
            Step::Downgrade(slot) => {
                if let Some(Held::Write(g)) = self.held[slot].take() {
                    self.held[slot] = Some(Held::Read(L::downgrade(g)));
                }
                Outcome::Done
            }
        }
    }

    /// At most one writer, never beside a reader; at most `max_readers` readers.
    fn check(&self, log: &dyn Fn() -> String) {
        let writers = self.held.iter().flatten().filter(|h| matches!(h, Held::Write(_))).count();
        let readers = self.held.iter().flatten().filter(|h| matches!(h, Held::Read(_))).count();
        assert!(
            writers <= 1 && (writers == 0 || readers == 0),
            "{}: {writers} writer(s) and {readers} reader(s) held\n{}",
            L::NAME,
            log()
        );
        assert!(
            readers <= self.max_readers as usize,
            "{}: {readers} readers over a limit of {}\n{}",
            L::NAME,
            self.max_readers,
            log()
        );
        assert!(!L::EXCLUSIVE || writers + readers <= 1, "{}: {} guards held\n{}", L::NAME, writers + readers, log());
    }

    /// Drops every guard, then runs the pending futures as an executor
    /// would, polling only those whose waker was woken and dropping each
    /// guard as it comes: every one of them must be woken and complete (a
    /// future left pending with nobody holding the lock lost its wakeup).
    fn drain(&mut self, log: &dyn Fn() -> String) {
        self.held.clear();
        loop {
            let woken = (0..self.waiting.len())
                .find(|&slot| self.waiting[slot].as_ref().is_some_and(|w| w.woken.0.load(Ordering::Relaxed)));
            let Some(slot) = woken else { break };
            if self.poll_slot(slot) == Outcome::Ready {
                self.held.clear();
            }
        }
        let stuck = self.waiting.iter().flatten().count();
        assert_eq!(stuck, 0, "{}: {stuck} future(s) left pending and never woken on a free lock\n{}", L::NAME, log());
        assert!(self.lock.try_write().is_some(), "{}: the lock is not free at the end\n{}", L::NAME, log());
    }
}

/// Where a sequence's choices come from: a seeded generator
/// (`tests/differential.rs`) or a fuzzer's input (`fuzz/`), which ends the
/// sequence when it runs out.
pub trait Choices {
    /// A number below `n`.
    fn below(&mut self, n: u64) -> u64;
    /// Whether the source has run out (a seeded generator never does).
    fn exhausted(&self) -> bool {
        false
    }
}

/// A slot of `slots` that holds something, if any does.
fn live<T>(choices: &mut impl Choices, slots: &[Option<T>]) -> Option<usize> {
    let live: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
    (!live.is_empty()).then(|| live[choices.below(live.len() as u64) as usize])
}

/// One sequence of up to `steps` steps drawn from `choices` (named `label`
/// in a failure's report), applied to `Ours` and, where the build hands the
/// lock out in FIFO order (`fair`, or a target without a clock), to
/// `Theirs`.
pub fn run<Ours: Lock, Theirs: Lock>(choices: &mut impl Choices, label: &str, steps: usize) {
    let fair = hybrid_sync::tuning().fair;
    let max_readers = 1 + choices.below(4) as u32;
    let mut ours = World::<Ours>::new(max_readers);
    let mut theirs = World::<Theirs>::new(max_readers);
    let mut history: Vec<(Step, Outcome, Outcome)> = Vec::new();
    for _ in 0..steps {
        if choices.exhausted() {
            break;
        }
        // Slots are numbered alike in both worlds; liveness may differ
        // under the default order, so a step picks from ours and is skipped
        // by a world where that slot is empty.
        let step = match choices.below(16) {
            0..=2 => Step::Read,
            3..=4 => Step::Write,
            5..=7 => match live(choices, &ours.waiting) {
                Some(slot) => Step::Poll(slot),
                None => Step::Read,
            },
            8 => match live(choices, &ours.waiting) {
                Some(slot) => Step::Cancel(slot),
                None => Step::Write,
            },
            9..=11 => match live(choices, &ours.held) {
                Some(slot) => Step::Release(slot),
                None => Step::TryWrite,
            },
            12 => Step::TryRead,
            13 => Step::TryWrite,
            _ => match live(choices, &ours.held) {
                Some(slot) => Step::Downgrade(slot),
                None => Step::Read,
            },
        };
        let ours_out = ours.apply(step);
        let theirs_out = if fair { theirs.apply(step) } else { Outcome::Done };
        history.push((step, ours_out, theirs_out));
        let log = || {
            let steps: Vec<String> = history.iter().map(|(s, o, t)| format!("  {s:?}: {o:?} (tokio {t:?})")).collect();
            format!("{label}, max_readers {max_readers}, steps:\n{}", steps.join("\n"))
        };
        ours.check(&log);
        if fair {
            theirs.check(&log);
            assert_eq!(ours_out, theirs_out, "{} and {} differ at the last step\n{}", Ours::NAME, Theirs::NAME, log());
        }
    }
    let log = || format!("{label}, max_readers {max_readers}, {} steps, then drained", history.len());
    ours.drain(&log);
    if fair {
        theirs.drain(&log);
    }
}
