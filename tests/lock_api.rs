//! `lock_api::RwLock<hybrid_sync::RawRwLock, T>` and
//! `lock_api::Mutex<hybrid_sync::RawMutex, T>`: the same state machine as the
//! async types, behind lock_api's guards. The same cases
//! (`tests/support/lock_api_cases.rs`) run for lock_api 0.4 (feature
//! `lock_api`) and for 0.5 (feature `lock_api-0_5`, which implies it),
//! whose raw locks hand a guard value to each acquisition.

#![cfg(feature = "lock_api")]

/// lock_api 0.4.
mod v0_4 {
    include!("support/lock_api_cases.rs");

    #[test]
    fn const_init() {
        static COUNT: Mutex<u32> = Mutex::const_new(<hybrid_sync::RawMutex as lock_api::RawMutex>::INIT, 0);
        *COUNT.lock() += 1;
        assert_eq!(*COUNT.lock(), 1);
    }
}

/// lock_api 0.5 (parking_lot 0.13's).
#[cfg(feature = "lock_api-0_5")]
mod v0_5 {
    use lock_api_05 as lock_api;

    include!("support/lock_api_cases.rs");

    #[test]
    fn const_init() {
        // 0.5's `new` is a `const fn`, `const_new` gone.
        static COUNT: Mutex<u32> = Mutex::new(0);
        *COUNT.lock() += 1;
        assert_eq!(*COUNT.lock(), 1);
    }

    /// 0.5's guards carry the acquisition's state through the raw lock's
    /// default `bump` (unlock fair, lock again) and through
    /// `unlocked_fair`: with a thread queued, a bump lets it in first.
    #[test]
    fn bump_lets_the_queued_thread_in() {
        let m = Arc::new(Mutex::new(Vec::new()));
        let mut g = m.lock();
        let waiter = thread::spawn({
            let m = m.clone();
            move || m.lock().push("waiter")
        });
        let start = Instant::now();
        // SAFETY: only read, for its Debug output.
        while !format!("{:?}", unsafe { m.raw() }).contains("waiters") {
            assert!(start.elapsed() < Duration::from_secs(20), "the waiter never queued");
            thread::yield_now();
        }
        lock_api::MutexGuard::bump(&mut g);
        g.push("holder");
        lock_api::MutexGuard::unlocked_fair(&mut g, thread::yield_now);
        drop(g);
        waiter.join().unwrap();
        assert_eq!(*m.lock(), ["waiter", "holder"]);

        let l = RwLock::new(1);
        let mut r = l.read();
        lock_api::RwLockReadGuard::bump(&mut r);
        assert_eq!(*r, 1);
        drop(r);
        let mut w = l.write();
        lock_api::RwLockWriteGuard::bump(&mut w);
        *w += 1;
        let r = lock_api::RwLockWriteGuard::downgrade(w);
        assert_eq!(*r, 2);
        assert!(l.try_write().is_none() && l.try_read().is_some());
    }
}
