//! Locks for programs that mix threads and async tasks.
//!
//! `hybrid-sync` provides [`RwLock`] and [`Mutex`] with the API of
//! [`tokio::sync::RwLock`] and [`tokio::sync::Mutex`] (swap the import and
//! your code compiles and behaves), plus blocking use from plain threads on
//! the very same lock. Underneath is one state machine in the style of the
//! Linux kernel's rwsem: a lock word, a FIFO wait queue shared by parked
//! threads and suspended tasks, and a handoff bit that bounds how long any
//! waiter can be passed over.
//!
//! # How an acquisition proceeds
//!
//! ```text
//!  lock()/blocking_lock()
//!      │
//!      ├─ uncontended: one compare-and-swap ─────────────────────────► held
//!      │
//!      ├─ spin: at most one spinner per lock polls the lock word, with a
//!      │   pause learned per lock address; it keeps going only while the
//!      │   owner makes visible progress, never past about one park/unpark
//!      │   round trip, and stops the moment the handoff bit is set ───► held
//!      │
//!      ├─ queue: under the queue lock, take the lock if the policy allows
//!      │   (no handoff pending), else append to the FIFO ──────────────► held
//!      │
//!      └─ wait: a thread parks, a task returns Pending with its waker queued
//!           │
//!           ├─ an unlock grants the lock directly (readers at the head
//!           │   together; under `fair`, everyone) ─────────────────────► held
//!           └─ an unlock wakes the head to compete with newcomers; a head
//!               passed over for longer than the handoff timeout sets the
//!               handoff bit: spinners leave, newcomers queue, and the next
//!               unlock hands the lock straight to it ───────────────────► held
//! ```
//!
//! Letting a running thread take a free lock ahead of a sleeping waiter
//! ("barging") is what makes the lock fast under contention: the lock does
//! not sit idle for the microseconds a wakeup takes. The handoff bit is what
//! keeps that fair enough: no waiter waits more than about the handoff
//! timeout (1 ms by default) plus one hold time. Seeds of this design: the
//! kernel threads on per-address spin backoff, rwsem handoff and optimistic
//! spinning, and lock starvation (see the repository's `shared/seeds`).
//!
//! # Tuning features
//!
//! | feature | effect |
//! |---|---|
//! | *(none)* | barging with a 1 ms handoff bound; spin up to 4 µs (threads) / 2 µs (tasks) |
//! | `fair` | strict FIFO, tokio's exact order: every unlock that finds waiters grants the lock to the head; spinning only while the queue is empty |
//! | `no-spin` | never spin: queue and park at once. For single-vCPU containers and real-time priorities, where a spinner steals the owner's CPU |
//! | `handoff-250us` | handoff timeout 250 µs: tighter worst-case wait, less barging |
//! | `handoff-4ms` | handoff timeout 4 ms (rwsem's): more throughput under heavy contention |
//!
//! Cargo unifies features across the dependency graph, so every combination
//! builds: `fair` is independent of the others, `no-spin` overrides spin
//! settings, and of several handoff presets the shortest wins.
//! [`tuning()`] returns the settings a build ended up with, for a start-up
//! log line.
//!
//! # Which lock should I use?
//!
//! * Data never locked across `.await`, mostly uncontended: a blocking lock
//!   ([`std::sync::Mutex`], `parking_lot`) is as fast or faster and simpler.
//! * Read-mostly data that is replaced wholesale: `arc-swap` (readers never
//!   block or even write shared memory).
//! * A guard held across `.await`, threads and tasks sharing a lock, or
//!   tasks contending hard: this crate. Compared with tokio's locks, the
//!   uncontended path is one atomic operation and the contended path spins
//!   before it queues, so it is several times faster; compared with a
//!   blocking lock used in async code, a waiting task yields its worker
//!   instead of blocking it.
//!
//! # Differences from `tokio::sync`
//!
//! * **Order.** tokio hands locks out in strict FIFO order. By default this
//!   crate lets newcomers take a free lock ahead of queued waiters until a
//!   waiter has waited past the handoff timeout; the bound is on *time*, not
//!   on queue position. Enable `fair` for tokio's exact order (at tokio-like
//!   contended throughput, with the faster uncontended path).
//! * **Blocking.** `blocking_*` park the thread on the lock's own queue
//!   (after a short spin) instead of running a `block_on`; they panic in
//!   exactly the contexts tokio's do.
//! * **Size.** `RwLock<()>` and `Mutex<()>` are 16 bytes (tokio: 48 and 40).
//! * **Tracing.** tokio's `tokio-console` resource spans are not emitted.
//!
//! # Cancel safety
//!
//! Every async method is cancel safe in tokio's sense: dropping the future
//! gives up its place in the queue and never leaks the lock. A future that
//! was granted the lock but dropped before it returned releases it; a
//! cancelled head lets the waiters behind it proceed if they now can.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, rust_2018_idioms)]

mod acquire;
mod backoff;
mod config;
mod error;
mod guard;
mod loom;
mod mutex;
mod raw;
mod rwlock;
mod state;
#[doc(hidden)]
pub mod stats;
mod wait_queue;

pub use config::{Tuning, testing as __testing, tuning};
pub use error::TryLockError;
pub use mutex::{MappedMutexGuard, Mutex, MutexGuard, OwnedMappedMutexGuard, OwnedMutexGuard};
pub use rwlock::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard,
    RwLockReadGuard, RwLockWriteGuard,
};

#[cfg(all(test, hybrid_sync_loom))]
mod loom_models;
