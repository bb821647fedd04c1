//! The contenders, behind one small trait, so the showdown and the criterion
//! benches run the same code against every lock (parking_lot's benchmark
//! does the same with its `trait Mutex`).
//!
//! Every operation takes a closure that runs inside the critical section and
//! returns a timestamp taken there, so callers can measure how long the
//! acquisition waited.

#![allow(dead_code)]

use std::future::Future;

/// A lock guarding a `u64`, usable from tasks and (where the lock allows it)
/// from plain threads.
pub trait Peer: Send + Sync + 'static {
    /// Name in tables.
    const NAME: &'static str;
    /// Whether waiting yields the task (false: it blocks the worker thread).
    const ASYNC: bool;
    fn new(v: u64) -> Self;
    fn read<'a>(&'a self, f: impl FnOnce(&u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a;
    fn write<'a>(&'a self, f: impl FnOnce(&mut u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a;
    fn blocking_read(&self, f: impl FnOnce(&u64) -> u64) -> u64;
    fn blocking_write(&self, f: impl FnOnce(&mut u64) -> u64) -> u64;
    /// `n` uncontended acquire+release pairs in one task, calling the lock's
    /// API directly (no closure or extra future in between, which would
    /// cost async peers a layer that blocking peers do not pay). Reads and
    /// writes are separate functions so that each loop has one call site of
    /// the lock's future, which the compiler inlines alike for every peer.
    fn uncontended_read(&self, rt: &tokio::runtime::Runtime, n: u64);
    fn uncontended_write(&self, rt: &tokio::runtime::Runtime, n: u64);
    /// Takes the write lock, holds it across one `yield_now().await`, then
    /// runs `f` in it. Only for `ASYNC` peers (a blocking guard cannot be
    /// held across `.await` in a spawned task).
    fn write_across_yield<'a>(
        &'a self,
        f: impl FnOnce(&mut u64) -> u64 + Send + 'a,
    ) -> impl Future<Output = u64> + Send + 'a;
    /// The same with the read lock.
    fn read_across_yield<'a>(
        &'a self,
        f: impl FnOnce(&u64) -> u64 + Send + 'a,
    ) -> impl Future<Output = u64> + Send + 'a;
}

macro_rules! async_rwlock_peer {
    ($ty:ident, $name:expr, $lock:ty, $read:ident, $write:ident, $bread:ident, $bwrite:ident) => {
        pub struct $ty(pub $lock);
        impl Peer for $ty {
            const NAME: &'static str = $name;
            const ASYNC: bool = true;
            fn new(v: u64) -> Self {
                $ty(<$lock>::new(v))
            }
            fn read<'a>(&'a self, f: impl FnOnce(&u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a {
                async move { f(&*self.0.$read().await) }
            }
            fn write<'a>(
                &'a self,
                f: impl FnOnce(&mut u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                async move { f(&mut *self.0.$write().await) }
            }
            fn blocking_read(&self, f: impl FnOnce(&u64) -> u64) -> u64 {
                f(&*self.0.$bread())
            }
            fn blocking_write(&self, f: impl FnOnce(&mut u64) -> u64) -> u64 {
                f(&mut *self.0.$bwrite())
            }
            fn uncontended_read(&self, rt: &tokio::runtime::Runtime, n: u64) {
                rt.block_on(async {
                    for _ in 0..n {
                        std::hint::black_box(*self.0.$read().await);
                    }
                })
            }
            fn uncontended_write(&self, rt: &tokio::runtime::Runtime, n: u64) {
                rt.block_on(async {
                    for _ in 0..n {
                        *self.0.$write().await += 1;
                    }
                })
            }
            fn write_across_yield<'a>(
                &'a self,
                f: impl FnOnce(&mut u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                async move {
                    let mut guard = self.0.$write().await;
                    tokio::task::yield_now().await;
                    f(&mut *guard)
                }
            }
            fn read_across_yield<'a>(
                &'a self,
                f: impl FnOnce(&u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                async move {
                    let guard = self.0.$read().await;
                    tokio::task::yield_now().await;
                    f(&*guard)
                }
            }
        }
    };
}

macro_rules! blocking_peer {
    ($ty:ident, $name:expr, $lock:ty, |$l:ident| $read:expr, |$l2:ident| $write:expr) => {
        pub struct $ty(pub $lock);
        impl Peer for $ty {
            const NAME: &'static str = $name;
            const ASYNC: bool = false;
            fn new(v: u64) -> Self {
                $ty(<$lock>::new(v))
            }
            fn read<'a>(&'a self, f: impl FnOnce(&u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a {
                let r = self.blocking_read(f);
                async move { r }
            }
            fn write<'a>(
                &'a self,
                f: impl FnOnce(&mut u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                let r = self.blocking_write(f);
                async move { r }
            }
            fn blocking_read(&self, f: impl FnOnce(&u64) -> u64) -> u64 {
                let $l = &self.0;
                f(&*$read)
            }
            fn blocking_write(&self, f: impl FnOnce(&mut u64) -> u64) -> u64 {
                let $l2 = &self.0;
                f(&mut *$write)
            }
            fn uncontended_read(&self, rt: &tokio::runtime::Runtime, n: u64) {
                rt.block_on(async {
                    for _ in 0..n {
                        let $l = &self.0;
                        std::hint::black_box(*$read);
                    }
                })
            }
            fn uncontended_write(&self, rt: &tokio::runtime::Runtime, n: u64) {
                rt.block_on(async {
                    for _ in 0..n {
                        let $l2 = &self.0;
                        *$write += 1;
                    }
                })
            }
            fn write_across_yield<'a>(
                &'a self,
                _: impl FnOnce(&mut u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                async { unreachable!("{} cannot be held across .await", $name) }
            }
            fn read_across_yield<'a>(
                &'a self,
                _: impl FnOnce(&u64) -> u64 + Send + 'a,
            ) -> impl Future<Output = u64> + Send + 'a {
                async { unreachable!("{} cannot be held across .await", $name) }
            }
        }
    };
}

async_rwlock_peer!(HybridRw, "hybrid-sync", hybrid_sync::RwLock<u64>, read, write, blocking_read, blocking_write);
async_rwlock_peer!(TokioRw, "tokio", tokio::sync::RwLock<u64>, read, write, blocking_read, blocking_write);
async_rwlock_peer!(AsyncLockRw, "async-lock", async_lock::RwLock<u64>, read, write, read_blocking, write_blocking);
blocking_peer!(ParkingLotRw, "parking_lot", parking_lot::RwLock<u64>, |l| l.read(), |l| l.write());
blocking_peer!(ParkingLot012Rw, "parking_lot 0.12", parking_lot_012::RwLock<u64>, |l| l.read(), |l| l.write());
blocking_peer!(StdRw, "std", std::sync::RwLock<u64>, |l| l.read().unwrap(), |l| l.write().unwrap());

async_rwlock_peer!(HybridMutex, "hybrid-sync", hybrid_sync::Mutex<u64>, lock, lock, blocking_lock, blocking_lock);

/// The per-lock statistics of the last hybrid-sync lock a workload dropped
/// (all zeros without `--features stats`), for `showdown --stats`.
pub static LAST_HYBRID_STATS: std::sync::Mutex<Option<hybrid_sync::stats::LockStats>> = std::sync::Mutex::new(None);

impl Drop for HybridRw {
    fn drop(&mut self) {
        *LAST_HYBRID_STATS.lock().unwrap() = Some(self.0.stats());
    }
}

impl Drop for HybridMutex {
    fn drop(&mut self) {
        *LAST_HYBRID_STATS.lock().unwrap() = Some(self.0.stats());
    }
}
async_rwlock_peer!(TokioMutex, "tokio", tokio::sync::Mutex<u64>, lock, lock, blocking_lock, blocking_lock);
async_rwlock_peer!(AsyncLockMutex, "async-lock", async_lock::Mutex<u64>, lock, lock, lock_blocking, lock_blocking);
blocking_peer!(ParkingLotMutex, "parking_lot", parking_lot::Mutex<u64>, |l| l.lock(), |l| l.lock());
blocking_peer!(ParkingLot012Mutex, "parking_lot 0.12", parking_lot_012::Mutex<u64>, |l| l.lock(), |l| l.lock());
blocking_peer!(StdMutex, "std", std::sync::Mutex<u64>, |l| l.lock().unwrap(), |l| l.lock().unwrap());

/// A lock that never spins: a contended acquirer parks at once (the futex
/// mutex of Drepper's "Futexes Are Tricky", on parking_lot_core). Seed 004's
/// baseline: optimistic spinning must beat it at every contender count.
pub struct PlainParking {
    /// 0 free, 1 locked, 2 locked with (maybe) parked waiters.
    state: std::sync::atomic::AtomicU8,
    value: std::cell::UnsafeCell<u64>,
}

// SAFETY: `value` is only touched while `state` says we hold the lock.
unsafe impl Sync for PlainParking {}

impl PlainParking {
    fn key(&self) -> usize {
        &self.state as *const _ as usize
    }

    fn lock(&self) {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        if self.state.compare_exchange(0, 1, Acquire, Relaxed).is_ok() {
            return;
        }
        while self.state.swap(2, Acquire) != 0 {
            // SAFETY: the callbacks neither panic nor call into
            // parking_lot_core; the key is our own state's address.
            unsafe {
                parking_lot_core::park(
                    self.key(),
                    || self.state.load(Relaxed) == 2,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    None,
                );
            }
        }
    }

    fn unlock(&self) {
        use std::sync::atomic::Ordering::Release;
        if self.state.swap(0, Release) == 2 {
            // SAFETY: as in `lock`.
            unsafe {
                parking_lot_core::unpark_one(self.key(), |_| parking_lot_core::DEFAULT_UNPARK_TOKEN);
            }
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
        self.lock();
        // SAFETY: we hold the lock.
        let r = f(unsafe { &mut *self.value.get() });
        self.unlock();
        r
    }
}

impl Peer for PlainParking {
    const NAME: &'static str = "plain parking";
    const ASYNC: bool = false;
    fn new(v: u64) -> Self {
        PlainParking { state: 0.into(), value: v.into() }
    }
    fn read<'a>(&'a self, f: impl FnOnce(&u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a {
        let r = self.blocking_read(f);
        async move { r }
    }
    fn write<'a>(&'a self, f: impl FnOnce(&mut u64) -> u64 + Send + 'a) -> impl Future<Output = u64> + Send + 'a {
        let r = self.blocking_write(f);
        async move { r }
    }
    fn blocking_read(&self, f: impl FnOnce(&u64) -> u64) -> u64 {
        self.with(|v| f(v))
    }
    fn blocking_write(&self, f: impl FnOnce(&mut u64) -> u64) -> u64 {
        self.with(f)
    }
    fn uncontended_read(&self, _: &tokio::runtime::Runtime, n: u64) {
        for _ in 0..n {
            std::hint::black_box(self.with(|v| *v));
        }
    }
    fn uncontended_write(&self, _: &tokio::runtime::Runtime, n: u64) {
        for _ in 0..n {
            self.with(|v| *v += 1);
        }
    }
    #[allow(clippy::manual_async_fn)] // the trait's signature, with its Send bound
    fn write_across_yield<'a>(
        &'a self,
        _: impl FnOnce(&mut u64) -> u64 + Send + 'a,
    ) -> impl Future<Output = u64> + Send + 'a {
        async { unreachable!("a blocking lock cannot be held across .await") }
    }
    #[allow(clippy::manual_async_fn)] // the trait's signature, with its Send bound
    fn read_across_yield<'a>(
        &'a self,
        _: impl FnOnce(&u64) -> u64 + Send + 'a,
    ) -> impl Future<Output = u64> + Send + 'a {
        async { unreachable!("a blocking lock cannot be held across .await") }
    }
}

/// Runs `$body` once per RwLock contender, with `$p` bound to its type.
#[macro_export]
macro_rules! for_each_rwlock {
    ($p:ident => $body:expr) => {{
        {
            type $p = peers::HybridRw;
            $body
        }
        {
            type $p = peers::TokioRw;
            $body
        }
        {
            type $p = peers::AsyncLockRw;
            $body
        }
        {
            type $p = peers::ParkingLotRw;
            $body
        }
        {
            type $p = peers::ParkingLot012Rw;
            $body
        }
        {
            type $p = peers::StdRw;
            $body
        }
    }};
}

/// Runs `$body` once per Mutex contender, with `$p` bound to its type.
#[macro_export]
macro_rules! for_each_mutex {
    ($p:ident => $body:expr) => {{
        {
            type $p = peers::HybridMutex;
            $body
        }
        {
            type $p = peers::TokioMutex;
            $body
        }
        {
            type $p = peers::AsyncLockMutex;
            $body
        }
        {
            type $p = peers::ParkingLotMutex;
            $body
        }
        {
            type $p = peers::ParkingLot012Mutex;
            $body
        }
        {
            type $p = peers::StdMutex;
            $body
        }
    }};
}

// ---------------------------------------------------------------------------
// Reference counts (seed 001): LockRef against the ways a count is kept today.
// ---------------------------------------------------------------------------

/// A shared reference count, perhaps with a lock beside it.
pub trait RefCount: Send + Sync + 'static {
    const NAME: &'static str;
    /// Whether `get_put` may run inside a task (tokio's `blocking_lock`
    /// may not).
    const IN_TASKS: bool = true;
    fn new() -> Self;
    /// Takes a reference and gives it back.
    fn get_put(&self);
    /// The mixed case's rare operation: a short section under the lock that
    /// guards the count (`None` if there is no lock).
    fn locked(&self, f: &dyn Fn()) -> Option<()>;
    /// The count, at rest.
    fn count(&self) -> u64;
}

/// `hybrid_sync::LockRef`: get/put one CAS each while the lock is free.
pub struct LockRefCount(pub hybrid_sync::LockRef<u64>);
impl RefCount for LockRefCount {
    const NAME: &'static str = "LockRef";
    fn new() -> Self {
        LockRefCount(hybrid_sync::LockRef::new(0))
    }
    #[inline]
    fn get_put(&self) {
        self.0.get();
        self.0.put();
    }
    fn locked(&self, f: &dyn Fn()) -> Option<()> {
        let mut g = self.0.lock();
        f();
        *g += 1;
        Some(())
    }
    fn count(&self) -> u64 {
        self.0.count().into()
    }
}

/// A bare atomic: the floor (fetch_add, fetch_sub).
pub struct AtomicCount(pub std::sync::atomic::AtomicU64);
impl RefCount for AtomicCount {
    const NAME: &'static str = "AtomicU64";
    fn new() -> Self {
        AtomicCount(std::sync::atomic::AtomicU64::new(1))
    }
    #[inline]
    fn get_put(&self) {
        use std::sync::atomic::Ordering;
        self.0.fetch_add(1, Ordering::Relaxed);
        self.0.fetch_sub(1, Ordering::Release);
    }
    fn locked(&self, _: &dyn Fn()) -> Option<()> {
        None
    }
    fn count(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// `Arc::clone` and drop.
pub struct ArcCount(pub std::sync::Arc<()>);
impl RefCount for ArcCount {
    const NAME: &'static str = "Arc";
    fn new() -> Self {
        ArcCount(std::sync::Arc::new(()))
    }
    #[inline]
    fn get_put(&self) {
        drop(std::hint::black_box(self.0.clone()));
    }
    fn locked(&self, _: &dyn Fn()) -> Option<()> {
        None
    }
    fn count(&self) -> u64 {
        std::sync::Arc::strong_count(&self.0) as u64
    }
}

macro_rules! mutex_count {
    ($ty:ident, $name:expr, $lock:ty, $in_tasks:expr, |$m:ident| $acquire:expr) => {
        /// A count kept under a mutex: lock, add, unlock, twice per get+put.
        pub struct $ty(pub $lock);
        impl RefCount for $ty {
            const NAME: &'static str = $name;
            const IN_TASKS: bool = $in_tasks;
            fn new() -> Self {
                $ty(<$lock>::new(1))
            }
            #[inline]
            fn get_put(&self) {
                let $m = &self.0;
                *$acquire += 1;
                *$acquire -= 1;
            }
            fn locked(&self, f: &dyn Fn()) -> Option<()> {
                let $m = &self.0;
                let _g = $acquire;
                f();
                Some(())
            }
            fn count(&self) -> u64 {
                let $m = &self.0;
                *$acquire
            }
        }
    };
}

mutex_count!(PlMutexCount, "parking_lot", parking_lot::Mutex<u64>, true, |m| m.lock());
mutex_count!(Pl012MutexCount, "parking_lot 0.12", parking_lot_012::Mutex<u64>, true, |m| m.lock());
mutex_count!(StdMutexCount, "std", std::sync::Mutex<u64>, true, |m| m.lock().unwrap());
mutex_count!(TokioMutexCount, "tokio", tokio::sync::Mutex<u64>, false, |m| m.blocking_lock());

/// A count under a test-and-test-and-set spinlock: the kernel's
/// spinlock-protected count, which lockref replaced.
pub struct SpinCount {
    locked: std::sync::atomic::AtomicBool,
    count: std::cell::UnsafeCell<u64>,
}
// SAFETY: `count` is only touched while `locked` is held.
unsafe impl Sync for SpinCount {}
impl SpinCount {
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
        use std::sync::atomic::Ordering;
        while self.locked.swap(true, Ordering::Acquire) {
            while self.locked.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        }
        // SAFETY: we hold the spinlock.
        let r = f(unsafe { &mut *self.count.get() });
        self.locked.store(false, Ordering::Release);
        r
    }
}
impl RefCount for SpinCount {
    const NAME: &'static str = "spinlock";
    fn new() -> Self {
        SpinCount { locked: false.into(), count: 1.into() }
    }
    #[inline]
    fn get_put(&self) {
        self.with(|c| *c += 1);
        self.with(|c| *c -= 1);
    }
    fn locked(&self, f: &dyn Fn()) -> Option<()> {
        self.with(|_| f());
        Some(())
    }
    fn count(&self) -> u64 {
        self.with(|c| *c)
    }
}

/// Runs `$body` once per reference-count contender, with `$p` naming it.
#[macro_export]
macro_rules! for_each_refcount {
    ($p:ident => $body:expr) => {{
        {
            type $p = peers::LockRefCount;
            $body
        }
        {
            type $p = peers::AtomicCount;
            $body
        }
        {
            type $p = peers::ArcCount;
            $body
        }
        {
            type $p = peers::SpinCount;
            $body
        }
        {
            type $p = peers::PlMutexCount;
            $body
        }
        {
            type $p = peers::Pl012MutexCount;
            $body
        }
        {
            type $p = peers::StdMutexCount;
            $body
        }
        {
            type $p = peers::TokioMutexCount;
            $body
        }
    }};
}
