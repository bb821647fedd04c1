//! The one place this crate takes its concurrency primitives from.
//!
//! Every atomic, every `UnsafeCell` that guards lock-internal state, thread
//! parking and spin hints come through here, so that the model checker sees
//! all of them. Under `--cfg hybrid_sync_loom` they are [loom]'s instrumented
//! versions, under `--cfg hybrid_sync_shuttle` [shuttle]'s (randomized
//! schedules of many threads and tasks, `tests/shuttle.rs`); otherwise they
//! are core's and std's. The cfgs are namespaced on purpose: a global
//! `--cfg loom` would also change tokio (its `MAX_READS` drops to 10) and
//! other dependencies.
//!
//! Elsewhere `any(hybrid_sync_loom, hybrid_sync_shuttle)` marks what a
//! model checker needs changed: no `const` constructors (loom's atomics are
//! not `const`), no timed parks (neither models time), the queue lock parks
//! on a loom mutex and park (loom) or yields (shuttle) where parking_lot_core
//! would park, spinning is two polls with no clock, and `LockRef` keeps its
//! wait queue inline instead of in a static table.
//!
//! [loom]: https://docs.rs/loom
//! [shuttle]: https://docs.rs/shuttle

#[cfg(hybrid_sync_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::hint::spin_loop;
    pub(crate) use loom::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub(crate) use loom::thread::{Thread, current as current_thread, park, yield_now};

    /// loom has no timed park; the model never retains the token (see
    /// `config::RETAIN_TOKEN`), so this is never reached there.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        unreachable!("no timed parks under the model")
    }
}

#[cfg(all(hybrid_sync_shuttle, not(hybrid_sync_loom)))]
mod imp {
    pub(crate) use shuttle::hint::spin_loop;
    pub(crate) use shuttle::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub(crate) use shuttle::thread::{Thread, current as current_thread, park, yield_now};

    /// shuttle does not model time either (its `park_timeout` is `park`);
    /// the token is never retained under it, as under loom.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        unreachable!("no timed parks under the model")
    }

    pub(crate) use super::cell::UnsafeCell;
}

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
mod imp {
    pub(crate) use core::hint::spin_loop;
    pub(crate) use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering, fence};
    pub(crate) use std::thread::{Thread, current as current_thread, park, park_timeout, yield_now};

    pub(crate) use super::cell::UnsafeCell;
}

#[cfg(not(hybrid_sync_loom))]
mod cell {
    /// `core::cell::UnsafeCell` with loom's closure-based accessors, so code
    /// written against loom's cell compiles unchanged.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T: ?Sized>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }
    }

    impl<T: ?Sized> UnsafeCell<T> {
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

pub(crate) use imp::*;
