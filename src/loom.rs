//! The one place this crate takes its concurrency primitives from.
//!
//! Every atomic, every `UnsafeCell` that guards lock-internal state, thread
//! parking and spin hints come through here, so that the model checker sees
//! all of them. Under `--cfg hybrid_sync_loom` they are [loom]'s instrumented
//! versions; otherwise they are core's and std's. The cfg is namespaced on
//! purpose: a global `--cfg loom` would also change tokio (its `MAX_READS`
//! drops to 10) and other dependencies.
//!
//! [loom]: https://docs.rs/loom

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

#[cfg(not(hybrid_sync_loom))]
mod imp {
    pub(crate) use core::hint::spin_loop;
    pub(crate) use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub(crate) use std::thread::{Thread, current as current_thread, park, park_timeout, yield_now};

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
