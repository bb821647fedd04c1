// The cases of `tests/lock_api.rs`, included once per lock_api release,
// where `lock_api` names that release.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc::RecvTimeoutError;
use std::thread;
use std::time::{Duration, Instant};

type RwLock<T> = lock_api::RwLock<hybrid_sync::RawRwLock, T>;
type Mutex<T> = lock_api::Mutex<hybrid_sync::RawMutex, T>;

#[test]
fn basics() {
    let l = RwLock::new(1);
    {
        let r1 = l.read();
        let r2 = l.read();
        assert_eq!(*r1 + *r2, 2);
        assert!(l.try_write().is_none());
        assert!(l.is_locked() && !l.is_locked_exclusive());
    }
    *l.write() += 1;
    assert!(!l.is_locked());
    let w = l.write();
    assert!(l.is_locked_exclusive());
    assert!(l.try_read().is_none());
    let r = lock_api::RwLockWriteGuard::downgrade(w);
    assert_eq!(*r, 2);
    assert!(l.try_read().is_some());
    assert!(l.try_write().is_none());
    drop(r);
    assert_eq!(l.into_inner(), 2);

    let m = Mutex::new(String::new());
    m.lock().push('a');
    let g = m.lock();
    assert!(m.try_lock().is_none() && m.is_locked());
    lock_api::MutexGuard::unlock_fair(g);
    assert_eq!(*m.lock(), "a");
}

/// Runs `wait` on a thread of its own and returns what it returned, failing
/// the test if it has not returned within 10 s: a timed wait that never times
/// out fails here, by name, instead of hanging the suite.
#[track_caller]
fn within_10s<T: Send + 'static>(what: &str, wait: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(wait());
    });
    match result.recv_timeout(Duration::from_secs(10)) {
        Ok(value) => value,
        Err(RecvTimeoutError::Timeout) => panic!("{what} had not returned after 10 s"),
        Err(RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

#[test]
fn timed_locks_time_out_and_succeed() {
    let l = Arc::new(RwLock::new(0));
    let held = l.write();
    let t = Instant::now();
    let l2 = l.clone();
    assert!(within_10s("try_read_for(30 ms)", move || l2.try_read_for(Duration::from_millis(30)).is_none()));
    let l2 = l.clone();
    let until = Instant::now() + Duration::from_millis(30);
    assert!(within_10s("try_write_until(30 ms)", move || l2.try_write_until(until).is_none()));
    assert!(t.elapsed() >= Duration::from_millis(60));
    // A waiter that times out leaves the queue: the lock is then free for
    // everyone, with no WAITERS left behind.
    drop(held);
    assert!(l.try_write().is_some());

    // A timed wait that the holder releases in time gets the lock.
    let held = l.write();
    let l2 = l.clone();
    let waiter = thread::spawn(move || l2.try_write_for(Duration::from_secs(10)).map(|mut g| *g += 1).is_some());
    thread::sleep(Duration::from_millis(20));
    drop(held);
    assert!(waiter.join().unwrap());
    assert_eq!(*l.read(), 1);

    // Timed reads join a reader that is inside: the lock stays shared, never
    // exclusive.
    let reader = l.read();
    let l2 = l.clone();
    within_10s("try_read_until beside a reader", move || {
        let second = l2.try_read_until(Instant::now() + Duration::from_secs(5)).expect("a second reader waits");
        assert!(!l2.is_locked_exclusive(), "a timed read took the lock exclusively");
        assert!(l2.try_read_for(Duration::from_secs(5)).is_some(), "a third reader waits");
        drop(second);
    });
    drop(reader);

    let m = Arc::new(Mutex::new(()));
    let g = m.lock();
    let m2 = m.clone();
    assert!(within_10s("try_lock_for(10 ms)", move || m2.try_lock_for(Duration::from_millis(10)).is_none()));
    let m2 = m.clone();
    let until = Instant::now() + Duration::from_millis(10);
    assert!(within_10s("try_lock_until(10 ms)", move || m2.try_lock_until(until).is_none()));
    drop(g);
    assert!(m.try_lock_for(Duration::from_millis(10)).is_some());
    // An absurd timeout does not overflow.
    assert!(m.try_lock_for(Duration::MAX).is_some());
}

/// A stray unpark (anyone with the `Thread` handle, or an earlier wakeup's
/// late token) ends a timed park early: the waiter must look at the clock
/// and its node and park again for the time left, neither timing out early
/// nor entering the held lock. The holder unparks the waiter for 30 ms, then
/// releases well within its timeout.
#[test]
fn stray_unparks_neither_end_a_timed_wait_nor_let_it_in() {
    let m = Arc::new(Mutex::new(0));
    let held = m.lock();
    let m2 = m.clone();
    let waiter = thread::spawn(move || m2.try_lock_for(Duration::from_secs(10)).map(|mut g| *g += 1).is_some());
    let until = Instant::now() + Duration::from_millis(30);
    while Instant::now() < until {
        waiter.thread().unpark();
        thread::yield_now();
    }
    assert!(!waiter.is_finished(), "a stray unpark ended a 10 s timed wait after 30 ms");
    assert_eq!(*held, 0, "the waiter entered the held lock");
    drop(held);
    assert!(waiter.join().unwrap(), "the timed wait did not get the released lock");
    assert_eq!(*m.lock(), 1);
}

/// Timed waiters that give up while others wait behind them and the holder
/// keeps releasing: nobody is stranded, mutual exclusion holds.
#[test]
fn timeouts_under_contention() {
    let l = Arc::new(RwLock::new(0u64));
    let stop = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let (l, stop, inside) = (l.clone(), stop.clone(), inside.clone());
            thread::spawn(move || {
                let mut got = 0u64;
                while !stop.load(SeqCst) {
                    let timeout = Duration::from_micros(50 + 97 * (i as u64));
                    if i % 3 == 0 {
                        if let Some(r) = l.try_read_for(timeout) {
                            assert_eq!(inside.load(SeqCst), 0, "a reader beside a writer");
                            std::hint::black_box(*r);
                        }
                    } else if let Some(mut w) = l.try_write_for(timeout) {
                        assert_eq!(inside.fetch_add(1, SeqCst), 0, "two writers");
                        *w += 1;
                        got += 1;
                        thread::sleep(Duration::from_micros(20));
                        inside.fetch_sub(1, SeqCst);
                    }
                }
                got
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    stop.store(true, SeqCst);
    let total: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(*l.read(), total);
    assert!(l.try_write().is_some(), "the lock is left free");
}

#[test]
fn threads_hammer_the_mutex() {
    let m = Arc::new(Mutex::new(0u64));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let m = m.clone();
            thread::spawn(move || {
                for i in 0..20_000 {
                    let mut g = m.lock();
                    *g += 1;
                    if i % 1000 == 0 {
                        lock_api::MutexGuard::unlock_fair(g);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(*m.lock(), 160_000);
}

/// `unlock_fair` with a thread queued hands the lock to that thread: as
/// soon as the unlock returns, the lock is the waiter's (granted, or already
/// taken up), so it reads as locked and no newcomer can take it first.
#[test]
fn unlock_fair_hands_the_lock_to_the_queued_thread() {
    let m = Arc::new(Mutex::new(0));
    hands_over_on_unlock_fair(&m);
    assert_eq!(*m.lock(), 3);
    let l = Arc::new(RwLock::new(0));
    hands_over_on_unlock_fair(&l);
    assert_eq!(*l.read(), 3);
}

/// The exclusive side of a lock_api lock, for `hands_over_on_unlock_fair`.
trait FairUnlock: Send + Sync + 'static {
    /// Takes the lock, runs `meanwhile`, and releases it with `unlock_fair`.
    fn hold_then_unlock_fair(&self, meanwhile: impl FnOnce());
    /// Takes the lock, adds one to the value, and keeps the lock until
    /// `release` is set.
    fn add_one_and_hold(&self, release: &AtomicBool);
    /// Whether the raw lock shows queued waiters.
    fn has_waiters(&self) -> bool;
    /// Whether a newcomer is kept out (every try fails).
    fn shut_out(&self) -> bool;
}

impl FairUnlock for Mutex<i32> {
    fn hold_then_unlock_fair(&self, meanwhile: impl FnOnce()) {
        let g = self.lock();
        meanwhile();
        lock_api::MutexGuard::unlock_fair(g);
    }
    fn add_one_and_hold(&self, release: &AtomicBool) {
        let mut g = self.lock();
        *g += 1;
        while !release.load(SeqCst) {
            thread::yield_now();
        }
    }
    fn has_waiters(&self) -> bool {
        // SAFETY: only read, for its Debug output.
        format!("{:?}", unsafe { self.raw() }).contains("waiters")
    }
    fn shut_out(&self) -> bool {
        self.try_lock().is_none()
    }
}

impl FairUnlock for RwLock<i32> {
    fn hold_then_unlock_fair(&self, meanwhile: impl FnOnce()) {
        let g = self.write();
        meanwhile();
        lock_api::RwLockWriteGuard::unlock_fair(g);
    }
    fn add_one_and_hold(&self, release: &AtomicBool) {
        let mut g = self.write();
        *g += 1;
        while !release.load(SeqCst) {
            thread::yield_now();
        }
    }
    fn has_waiters(&self) -> bool {
        // SAFETY: only read, for its Debug output.
        format!("{:?}", unsafe { self.raw() }).contains("waiters")
    }
    fn shut_out(&self) -> bool {
        self.try_read().is_none() && self.try_write().is_none()
    }
}

/// Three rounds of: hold the lock, let a thread queue behind it to add one
/// (and hold on), release with `unlock_fair`, and check that nobody else can
/// take the lock meanwhile.
fn hands_over_on_unlock_fair<L: FairUnlock>(lock: &Arc<L>) {
    let release = Arc::new(AtomicBool::new(false));
    for _ in 0..3 {
        release.store(false, SeqCst);
        let mut waiter = None;
        lock.hold_then_unlock_fair(|| {
            waiter = Some(thread::spawn({
                let (lock, release) = (Arc::clone(lock), Arc::clone(&release));
                move || lock.add_one_and_hold(&release)
            }));
            // Unlock as soon as the waiter has queued, well before it would
            // be due a handoff by its wait alone: this unlock is what must
            // hand over.
            let start = Instant::now();
            while !lock.has_waiters() {
                assert!(start.elapsed() < Duration::from_secs(20), "the waiter never queued");
                thread::yield_now();
            }
        });
        assert!(lock.shut_out(), "unlock_fair did not hand the lock over");
        release.store(true, SeqCst);
        waiter.expect("spawned").join().unwrap();
    }
}
