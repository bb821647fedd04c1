//! Locks for programs that mix threads and async tasks.
//!
//! `hybrid-sync` provides [`RwLock`] and [`Mutex`] with the API of
//! [`tokio::sync::RwLock`] and [`tokio::sync::Mutex`] (swap the import and
//! your code compiles and behaves), plus blocking use from plain threads on
//! the very same lock; and [`LockRef`], the kernel's `lockref`: a reference
//! count and the same hybrid lock in one 64-bit word, with lockless
//! get/put while the lock is free ([`LockArc`] is the `Arc<Mutex<T>>` built
//! on it). Underneath is one state machine in the style of the
//! Linux kernel's rwsem: a lock word, a FIFO wait queue shared by parked
//! threads and suspended tasks, and a handoff bit that bounds how long any
//! waiter can be passed over.
//!
//! # Example
//!
//! One `Mutex` shared by a plain thread, which blocks on it, and tokio
//! tasks, which await it, as they would `tokio::sync::Mutex`:
//!
//! ```
//! use std::sync::Arc;
//! use hybrid_sync::Mutex;
//!
//! let hits = Arc::new(Mutex::new(0u64));
//!
//! // A thread outside any runtime: `blocking_lock` spins briefly, then
//! // parks it in the lock's queue, beside the tasks.
//! let thread = std::thread::spawn({
//!     let hits = hits.clone();
//!     move || {
//!         for _ in 0..1000 {
//!             *hits.blocking_lock() += 1;
//!         }
//!     }
//! });
//!
//! // Tasks on a tokio runtime: `lock().await` yields the worker while it waits.
//! let runtime = tokio::runtime::Runtime::new().unwrap();
//! runtime.block_on(async {
//!     let tasks: Vec<_> = (0..4)
//!         .map(|_| {
//!             let hits = hits.clone();
//!             tokio::spawn(async move {
//!                 for _ in 0..1000 {
//!                     *hits.lock().await += 1;
//!                 }
//!             })
//!         })
//!         .collect();
//!     for task in tasks {
//!         task.await.unwrap();
//!     }
//! });
//!
//! thread.join().unwrap();
//! assert_eq!(*hits.blocking_lock(), 5000);
//! ```
//!
//! # How an acquisition proceeds
//!
//! ```text
//!  lock() / blocking_lock()
//!      │
//!      ├─ uncontended: one compare-and-swap (a reader: one add) ───────► held
//!      │
//!      ├─ spin: at most two spinners per lock (and any tasks waiting to
//!      │   read) poll the lock word, pausing between polls for a delay
//!      │   learned per lock address (shorter for a writer waiting for
//!      │   readers to leave, longer for a reader behind a writer); they
//!      │   go on only while the owner makes visible progress,
//!      │   never past about one park/unpark round trip, and stop the moment
//!      │   HANDOFF is set; nobody starts on a lock granted to a
//!      │   waiter not yet running; tasks do not spin while blocking
//!      │   threads wait in the queue, nor threads while three per CPU
//!      │   of them do (the queued threads need the CPUs) ───────────────► held
//!      │
//!      ├─ queue: under the queue lock, take the lock if the policy allows
//!      │   (no handoff pending; readers never pass queued waiters), else
//!      │   append to the one FIFO of threads and tasks ──────────────────► held
//!      │
//!      └─ wait: a thread parks, a task returns Pending with its waker queued
//!           │
//!           ├─ a release wakes the head to compete with running threads:
//!           │   a writer takes the WOKEN token and spins for the lock, a run
//!           │   of readers is unlinked and let in together ──────────────► held
//!           └─ once the head has waited past the handoff timeout it sets
//!               HANDOFF: spinners leave, newcomers queue, and the next
//!               release grants the lock straight to it ──────────────────► held
//! ```
//!
//! Letting a running thread take a free lock ahead of a sleeping waiter
//! ("barging") is what keeps a contended lock busy: it does not sit idle for
//! the microseconds a wakeup takes, and a release does not hand it to a task
//! that is still waiting in a run queue. The handoff bit keeps that fair
//! enough: a waiter is passed over for at most about the handoff timeout
//! (1 ms by default). A parked thread whose turn has come is woken to
//! claim it rather than handed the lock in its sleep, so the lock keeps
//! working during the wakeup; a woken thread that cannot even get a CPU to
//! claim its turn (the threads barging past it keep them busy) has it
//! claimed for it by a barger. Handoffs on one lock are spaced apart (an
//! eighth of the timeout after a grant to a sleeper, a 32nd after a turn
//! claimed by a waiter that was awake for it), as parking_lot spaces out
//! its fair unlocks: with hundreds of overdue waiters the lock keeps
//! running at barging speed, and the k-th of them waits about the timeout
//! plus k gaps.
//! Under `fair`, every release that finds waiters hands the lock over
//! instead, in strict FIFO order, as tokio does.
//!
//! The design follows the Linux kernel's rwsem (lock word, handoff bit,
//! optimistic spinning that stops on handoff), its per-address spin backoff
//! and MCS-style spinner limits, and Go's `sync.Mutex` (the woken-waiter
//! token and the starvation bound).

//! # Tuning features
//!
//! | feature | effect |
//! |---|---|
//! | *(none)* | barging with a 1 ms handoff bound; spin up to 4 µs (threads) / 6 µs (tasks); tasks skip it on a current-thread runtime and while blocking threads wait in the lock's queue, threads while three per CPU wait there (machines of up to 5 CPUs) |
//! | `fair` | strict FIFO, tokio's exact order: every unlock that finds waiters grants the lock to the head; spinning only while the queue is empty |
//! | `no-spin` | never spin: queue and park at once. For real-time priorities, where a spinner can keep the owner off its CPU, and for tasks that all run on one thread of an executor other than tokio (which cannot tell the lock so). On one vCPU the default measured level with it: its spins stop at an owner that does not run |
//! | `handoff-250us` | handoff timeout 250 µs: tighter worst-case wait, less barging |
//! | `handoff-4ms` | handoff timeout 4 ms (rwsem's): more throughput under heavy contention |
//! | `stats` | per-lock counters (`lock.stats()`: acquisitions, contended, wait mean/max, spins and spin wins, parks, handoffs), process-wide event counters ([`stats`]) and a flight recorder of every slow-path event ([`stats::record`]), zero-cost when off |
//! | `lock_api` | `hybrid_sync::RawRwLock` and `RawMutex` implement `lock_api`'s raw lock traits (timed, fair, downgrade), for blocking `lock_api::RwLock<hybrid_sync::RawRwLock, T>` |
//! | `lock_api-0_5` | the same for `lock_api` 0.5 (parking_lot 0.13's), beside 0.4's; needs Rust 1.95, as `lock_api` 0.5 does |
//! | `tracing` | tokio-console sees `RwLock` and `Mutex` as resources: tokio's `runtime.resource` span schema (state updates, async-op spans for waits) through `tracing`, no `tokio_unstable` needed; zero-cost when off |
//!
//! Cargo unifies features across the dependency graph, so every combination
//! builds: `fair` is independent of the others, `no-spin` overrides spin
//! settings, and of several handoff presets the shortest wins. A target
//! without a clock (`wasm32-unknown-unknown`) is `fair` and `no-spin`
//! whatever the features say ([Platforms](#platforms)).
//! [`tuning()`] returns the settings a build ended up with, for a start-up
//! log line.
//!
//! # Which lock should I use?
//!
//! * Data never locked across `.await`, mostly uncontended: a blocking lock
//!   ([`std::sync::Mutex`], `parking_lot`) is as fast or faster and simpler.
//! * Plain threads only, contended, many more of them than cores, where
//!   throughput counts more than CPU time or a bound on each wait:
//!   `parking_lot` 0.13. With 32 threads on 2 vCPUs it moved 27-38% more
//!   operations than this crate's blocking API, at 1.4-1.6x the CPU per
//!   operation (its waiters spin and yield where these park), and it bounds
//!   no single wait since it dropped 0.12's eventual fairness; 0.12 moved
//!   3-22% more (the README's targets table, runs 95-97, round by round).
//!   Built with `handoff-4ms` this crate came within a few percent of
//!   0.13's rate, at half its CPU, with worst waits of 8-12 ms against the
//!   default's 2-6 ms.
//! * Read-mostly data that is replaced wholesale: `arc-swap` (readers never
//!   block or even write shared memory).
//! * A reference count that must agree with a lock (a cache entry that
//!   lookups may only take while it is live, torn down under the lock when
//!   the last reference goes): [`LockRef`]. Just a shared count: `Arc` or an
//!   atomic is cheaper still. A `LockRef` may also be freed by whoever
//!   drops the last reference as soon as it has released the lock, even
//!   while another thread is still inside its own release; [`Mutex`] and
//!   [`RwLock`], like tokio's locks and the kernel's mutexes, may touch
//!   their memory until each unlock returns (which safe code cannot
//!   observe: a guard borrows its lock).
//! * A guard held across `.await`, threads and tasks sharing a lock, or
//!   tasks contending hard: this crate. Compared with tokio's locks, the
//!   uncontended path is one atomic operation and the contended path spins
//!   before it queues, so it is several times faster; compared with a
//!   blocking lock used in async code, a waiting task yields its worker
//!   instead of blocking it. The exception: a lock that is *contended* while
//!   its guards are held across `.await`. Woken tasks would lose it to the
//!   task that just released it, so the lock learns to hand it over in
//!   FIFO order there, as tokio does, at a little more than tokio's cost per
//!   hand-over (the showdown's hold-across table: 0.83-1.10x tokio's
//!   throughput across hosts and runs since the lock keeps its own clock for
//!   the wait stamps of the handoff bound; the tuning builds run within a
//!   few percent of each other there, `fair` 3-5% ahead of the default in
//!   interleaved rounds). If that table is your workload, tokio's lock is as
//!   good a choice, or a little better; and where readers share it with
//!   writers that hold it across `.await`, async-lock, whose readers pass a
//!   writer that waits, ran 1.5-1.7x both on one thread (the README's
//!   "Other shapes", which also has `select!` and `timeout` around
//!   acquisitions: 12-13x and 1.9x tokio).
//! * Hundreds of tasks mostly *reading* one contended lock on a many-core
//!   runtime: measure both builds on your load. On a 16-core machine the
//!   default once fell into a convoy in such a table (512 tasks on 16
//!   workers, 90% reads) and ran at about half of tokio's throughput, where
//!   `fair` ran level with tokio; the lock has changed since in ways aimed
//!   at those losses, unmeasured there (the README's "On 16 cores").
//!
//! # Differences from `tokio::sync`
//!
//! * **Order.** tokio hands locks out in strict FIFO order. By default this
//!   crate lets newcomers take a free lock ahead of a queued writer that was
//!   woken but has not run yet, until a waiter has waited past the handoff
//!   timeout: the bound is on *time*, not on queue position. Overdue waiters
//!   are served in queue order, one handoff gap apart, so a deep queue
//!   stretches it (1000 threads on 2 CPUs: worst waits of 65-80 ms,
//!   parking_lot's 78-306 ms). Readers never pass a queued writer.
//!   Enable `fair` for tokio's exact order (at tokio-like contended
//!   throughput, with the faster uncontended path).
//!   None of tokio's own lock tests depends on the difference; this crate's
//!   `tests/locks.rs` shows where it is observable.
//! * **A spent coop budget.** Both crates' futures charge tokio's coop
//!   budget once the lock is taken; tokio's then yield holding the lock
//!   (tokio#8371, for its FIFO order). By default this crate gives back a
//!   lock it took without queueing before it yields, and takes it again
//!   when the task runs next, so that a task in a tight loop of
//!   acquisitions does not stop every other contender once per budget.
//!   Under `fair`, and for a waiter whose turn came through the queue, it
//!   keeps the lock, as tokio does.
//! * **Blocking.** `blocking_*` spin briefly, then park the thread on the
//!   lock's own queue, beside the tasks, instead of running a `block_on`;
//!   they panic in exactly the contexts tokio's do, with tokio's message.
//!   On threads with a runtime context (`spawn_blocking`, `block_in_place`,
//!   an entered handle) that takes running tokio's own check, which costs
//!   about what an uncontended tokio `blocking_lock` does; plain threads pay
//!   two thread-local reads.
//! * **Reader limit.** At most `2^27 - 1` readers at once (tokio: `2^29 - 1`).
//!   `with_max_readers` accepts tokio's whole range and caps it there, a
//!   limit no program reaches (it takes 1 GiB of live read guards).
//! * **Size.** `RwLock<()>` and `Mutex<()>` are 16 bytes (tokio: 48 and
//!   40). The futures of `read`, `write`, `lock` and their `_owned` forms
//!   are 96 bytes each (tokio: 96, 96 and 120, owned or not). On 32-bit
//!   targets the locks are 12 bytes and the futures stay at 96, where
//!   tokio's shrink to 48 and 60 (see [Platforms](#platforms)).
//! * **Tracing.** tokio-console sees the locks only with the `tracing`
//!   feature (tokio needs `tokio_unstable` and its own `tracing` feature);
//!   the async-op spans are made only for acquisitions that wait.
//! * **Signatures.** `read`, `write` and `lock` and their `_owned` forms
//!   are `fn`s that return `impl Future` where tokio has `async fn`s. Callers cannot tell (the
//!   futures have tokio's auto traits, `!Unpin` included), and the
//!   uncontended path, one atomic operation and tokio's coop charge, is
//!   inlined wherever the future is awaited.
//! * **A future that is never polled again.** A queued future woken by a
//!   release holds that wakeup (and a writer's WOKEN token) until it is
//!   polled or dropped, as a tokio future holds a granted permit: a future
//!   parked forever in a `select!` arm that is never polled delays the
//!   waiters behind it (newcomers can still take the lock).

//! # Cancel safety
//!
//! Every async method is cancel safe in tokio's sense: dropping the future
//! gives up its place in the queue and never leaks the lock. A future that
//! was granted the lock but dropped before it returned releases it; a
//! cancelled head lets the waiters behind it proceed if they now can.
//!
//! # Platforms
//!
//! Every target tokio builds for, except 32-bit RISC-V Linux, where
//! `parking_lot_core` (which parks the blocking front end's threads) does
//! not build. On x86-64 the lock's clock reads the TSC where the CPU says
//! it is invariant, and `Instant` elsewhere.
//!
//! * **32-bit targets.** The futures are larger than tokio's: the queue
//!   node is aligned to 32 bytes, for the five flag bits that the queue's
//!   word keeps beside the head's address, whatever the width of a pointer.
//! * **No 64-bit atomics** (32-bit PowerPC, MIPS and SPARC, some 32-bit
//!   RISC-V and Arm). [`LockRef`]'s word, its count and its lock, is a `u64`
//!   behind a mutex, as tokio keeps its own 64-bit atomics there: get and
//!   put take that mutex where they would be one compare-and-swap (the
//!   kernel's lockref takes its spinlock on such architectures), and a
//!   `LockRef` is 16 bytes instead of 8. `RwLock` and `Mutex` keep their
//!   state in 32-bit atomics, and read only a testing hook (the
//!   handoff-timeout override) through such a mutex, on their slow paths.
//! * **WebAssembly.** The async API works as tokio's does there. Without a
//!   clock (`wasm32-unknown-unknown`, where `Instant::now` panics) a
//!   waiter's wait cannot be timed, so neither can the handoff bound on
//!   barging, nor a spin: the build hands the lock out in tokio's FIFO
//!   order and never spins, whatever its features (`tuning()` says so); the
//!   `stats` feature's wait times read zero, and what takes an `Instant`
//!   panics as `Instant::now` does there (`lock_api`'s timed waits, the
//!   flight recorder's `stats::record`). WASI targets have a clock
//!   and the default's behaviour. Built without the `atomics` feature,
//!   WebAssembly runs one thread: a `blocking_*` call (or a blocking
//!   `LockRef::lock`) that finds the lock held panics there, since nothing
//!   else could ever release it (tokio's panics too, in std's condition
//!   variable), and a timed wait through `lock_api` gives up at once.
//!
//! CI runs the tests on 32-bit big-endian PowerPC, which has no 64-bit
//! atomics, and on AArch64, under qemu, and the random operation sequences
//! of `tests/differential.rs` on `wasm32-unknown-unknown` (compared step
//! by step with tokio's) and `wasm32-wasip1`, with that panic, under
//! wasmtime (`.ci/cross`).
//!
//! # Minimum supported Rust version
//!
//! Rust 1.91, the `rust-version` in `Cargo.toml` and the lowest release the
//! crate builds with (the wait queue's `AtomicPtr::fetch_or` and friends are
//! stable since 1.91); CI builds it with that toolchain, with every feature
//! but `lock_api-0_5`, which needs `lock_api` 0.5's own minimum, Rust 1.95.
//! As with tokio, the minimum moves only in a minor release, and stays at
//! least six months behind the newest stable Rust.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, rust_2018_idioms)]
// docs.rs (nightly, `--cfg docsrs`) marks the items a feature adds.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acquire;
mod backoff;
mod clock;
mod config;
mod error;
mod guard;
mod layout;
mod lockref;
mod loom;
mod mutex;
mod raw;
#[cfg(all(feature = "lock_api", not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
mod raw_api;
mod rwlock;
mod state;
pub mod stats;
mod trace;
mod wait_queue;

pub use config::{Tuning, testing as __testing, tuning};
pub use error::TryLockError;
pub use lockref::{LockArc, LockArcGuard, LockRef, LockRefGuard, MAX_COUNT};
pub use mutex::{MappedMutexGuard, Mutex, MutexGuard, OwnedMappedMutexGuard, OwnedMutexGuard};
#[cfg(all(feature = "lock_api", not(any(hybrid_sync_loom, hybrid_sync_shuttle))))]
#[cfg_attr(docsrs, doc(cfg(feature = "lock_api")))]
pub use raw_api::{RawMutex, RawRwLock};
pub use rwlock::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard,
    RwLockReadGuard, RwLockWriteGuard,
};

#[cfg(all(test, hybrid_sync_loom))]
mod loom_models;
