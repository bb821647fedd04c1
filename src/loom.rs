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
//! [`atomic64`] is where the crate's own (never modelled) 64-bit atomics
//! come from: `core`'s where the target has them, a mutex where it does not
//! (32-bit PowerPC and MIPS, among tokio's targets).
//!
//! [loom]: https://docs.rs/loom
//! [shuttle]: https://docs.rs/shuttle

#[cfg(hybrid_sync_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::hint::spin_loop;
    pub(crate) use loom::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence};
    pub(crate) use loom::thread::{Thread, ThreadId, current as current_thread, park, yield_now};

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
    pub(crate) use shuttle::thread::{Thread, ThreadId, current as current_thread, park, yield_now};

    /// shuttle does not model time either (its `park_timeout` is `park`);
    /// the token is never retained under it, as under loom.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        unreachable!("no timed parks under the model")
    }

    pub(crate) use super::cell::UnsafeCell;
}

#[cfg(not(any(hybrid_sync_loom, hybrid_sync_shuttle)))]
mod imp {
    pub(crate) use super::atomic64::AtomicU64;
    pub(crate) use core::hint::spin_loop;
    pub(crate) use core::sync::atomic::{AtomicU8, AtomicU32, Ordering};
    // ThreadSanitizer does not model fences: its build (`--cfg hybrid_sync_tsan`)
    // has none, and loads with `Acquire` where the others fence.
    #[cfg(not(hybrid_sync_tsan))]
    pub(crate) use core::sync::atomic::fence;
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

/// `AtomicU64`, on every target tokio builds for.
///
/// Where the target has 64-bit atomics it is `core`'s. Where it does not
/// (`target_has_atomic = "64"` unset: 32-bit PowerPC, MIPS and SPARC
/// Linux, some 32-bit RISC-V and Arm), it is a `u64` behind a
/// `std::sync::Mutex` with the same methods, as tokio itself does on those
/// targets (its `loom::std::atomic_u64`). Each operation holds the mutex
/// for a plain read or write of the value, so every one of them is
/// sequentially consistent, at least as strong as the ordering it is
/// given, and the fences that pair with them (`LockRef`'s acquire fence
/// after the last put) only repeat what the mutex already orders. What the
/// crate keeps in one:
///
/// * [`LockRef`](crate::LockRef)'s word, count and lock together: its
///   lockless get and put become the mutex's lock and unlock, the kernel's
///   own fallback where an architecture has no `cmpxchg` of the whole
///   lockref (`lib/lockref.c` without `CONFIG_ARCH_USE_CMPXCHG_LOCKREF`
///   takes the spinlock);
/// * the clock's TSC scale (read only on x86-64, which always has them),
///   the handoff-timeout override (a testing hook, read by releases that
///   find waiters) and the `stats` counters.
///
/// `.ci/cross` builds and tests the crate on such a target (32-bit PowerPC,
/// big-endian too, under qemu).
pub(crate) mod atomic64 {
    #[cfg(target_has_atomic = "64")]
    pub(crate) use core::sync::atomic::AtomicU64;

    #[cfg(not(target_has_atomic = "64"))]
    pub(crate) use fallback::AtomicU64;

    #[cfg(not(target_has_atomic = "64"))]
    mod fallback {
        use core::sync::atomic::Ordering;
        use std::sync::{Mutex, MutexGuard};

        /// A `u64` behind a mutex, with `core::sync::atomic::AtomicU64`'s
        /// methods (those this crate uses); the orderings are all met by
        /// the mutex and otherwise ignored.
        #[derive(Debug, Default)]
        pub(crate) struct AtomicU64(Mutex<u64>);

        impl AtomicU64 {
            pub(crate) const fn new(v: u64) -> Self {
                AtomicU64(Mutex::new(v))
            }

            /// The value, locked. No operation panics while holding it, so
            /// the mutex is never poisoned; if it were, the value would
            /// still be whole (a `u64` written in one store).
            #[inline]
            fn value(&self) -> MutexGuard<'_, u64> {
                self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
            }

            #[inline]
            fn update(&self, f: impl FnOnce(u64) -> u64) -> u64 {
                let mut v = self.value();
                let old = *v;
                *v = f(old);
                old
            }

            #[inline]
            pub(crate) fn load(&self, _: Ordering) -> u64 {
                *self.value()
            }

            #[inline]
            pub(crate) fn store(&self, v: u64, _: Ordering) {
                *self.value() = v;
            }

            #[inline]
            pub(crate) fn swap(&self, v: u64, _: Ordering) -> u64 {
                self.update(|_| v)
            }

            #[inline]
            pub(crate) fn fetch_add(&self, v: u64, _: Ordering) -> u64 {
                self.update(|old| old.wrapping_add(v))
            }

            #[inline]
            pub(crate) fn fetch_sub(&self, v: u64, _: Ordering) -> u64 {
                self.update(|old| old.wrapping_sub(v))
            }

            #[inline]
            pub(crate) fn fetch_and(&self, v: u64, _: Ordering) -> u64 {
                self.update(|old| old & v)
            }

            #[inline]
            #[cfg_attr(not(feature = "stats"), allow(dead_code))] // the wait maxima
            pub(crate) fn fetch_max(&self, v: u64, _: Ordering) -> u64 {
                self.update(|old| old.max(v))
            }

            #[inline]
            pub(crate) fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                _: Ordering,
                _: Ordering,
            ) -> Result<u64, u64> {
                let mut v = self.value();
                if *v == current {
                    *v = new;
                    Ok(current)
                } else {
                    Err(*v)
                }
            }

            /// Never fails spuriously.
            #[inline]
            pub(crate) fn compare_exchange_weak(
                &self,
                current: u64,
                new: u64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<u64, u64> {
                self.compare_exchange(current, new, success, failure)
            }
        }
    }
}
