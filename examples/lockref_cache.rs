//! A cache whose entries are counted with `LockRef`, in the pattern of the
//! Linux kernel's dentry cache: lookups take a reference without any lock
//! (`get_not_dead`, one compare-and-swap) and users give it back the same
//! way (`put`); an entry nobody uses (count 0) stays cached until an
//! evictor, holding the entry's lock, finds its count still 0, marks it
//! dead and unlinks it. A lookup racing the evictor either got its
//! reference first (the evictor then sees count 1 and leaves the entry) or
//! waits for the evictor's lock and sees "dead" (a miss): never a reference
//! to an evicted entry. Threads and tasks use the cache at once.
//!
//! ```text
//! cargo run --release --example lockref_cache
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use hybrid_sync::LockRef;

/// A cached value and how often it was used.
struct Value {
    text: String,
    uses: u64,
}

/// An entry's count is its users; the map's own pointer is not counted.
type Entry = Arc<LockRef<Value>>;

#[derive(Default)]
struct Cache {
    map: RwLock<HashMap<u64, Entry>>,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

/// A user's reference to an entry: `put` on drop.
struct Handle {
    entry: Entry,
}

impl Cache {
    fn lookup(&self, key: u64) -> Handle {
        let found = self.map.read().unwrap().get(&key).cloned();
        if let Some(entry) = found {
            // Lockless while nobody holds the entry's lock: one CAS.
            if entry.get_not_dead() {
                self.hits.fetch_add(1, Relaxed);
                return Handle { entry };
            }
        }
        // A miss, or an entry being torn down: build a fresh one (count 1,
        // ours) unless another thread got there first.
        self.misses.fetch_add(1, Relaxed);
        let mut map = self.map.write().unwrap();
        if let Some(entry) = map.get(&key).filter(|e| e.get_not_dead()) {
            return Handle { entry: entry.clone() };
        }
        let entry = Arc::new(LockRef::new(Value { text: format!("value of {key}"), uses: 0 }));
        map.insert(key, entry.clone());
        Handle { entry }
    }
}

impl Handle {
    fn use_it(&self) -> usize {
        let mut value = self.entry.lock();
        assert!(!value.is_dead(), "a user holds a reference to a dead entry");
        value.uses += 1;
        value.text.len()
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // Lockless while the entry's lock is free; may leave the count at 0.
        self.entry.put();
    }
}

impl Cache {
    /// Unlinks every entry nobody uses. Returns how many it evicted.
    fn evict_unused(&self) -> usize {
        let mut map = self.map.write().unwrap();
        let before = map.len();
        map.retain(|_, entry| {
            let mut guard = entry.lock();
            if guard.count() > 0 {
                return true; // in use: a lookup got its reference first
            }
            // No lookup can take a reference while we hold the lock, and
            // after this none ever will.
            guard.mark_dead();
            false
        });
        let evicted = before - map.len();
        self.evictions.fetch_add(evicted as u64, Relaxed);
        evicted
    }
}

fn main() {
    let cache = Arc::new(Cache::default());
    let run_for = Duration::from_secs(2);
    let start = Instant::now();
    let ops = Arc::new(AtomicU64::new(0));

    // An evictor runs every millisecond, as memory pressure would.
    let evictor = {
        let cache = cache.clone();
        std::thread::spawn(move || {
            while start.elapsed() < run_for {
                cache.evict_unused();
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };

    // Threads hold a few entries at once and look up hot keys; tasks do
    // short lookups.
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (cache, ops) = (cache.clone(), ops.clone());
            std::thread::spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                while start.elapsed() < run_for {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let held: Vec<_> = (0..4).map(|i| cache.lookup((x >> (i * 8)) % 64)).collect();
                    for h in &held {
                        h.use_it();
                    }
                    ops.fetch_add(held.len() as u64, Relaxed);
                }
            })
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    rt.block_on(async {
        let tasks: Vec<_> = (0..16u64)
            .map(|t| {
                let (cache, ops) = (cache.clone(), ops.clone());
                tokio::spawn(async move {
                    let mut x = t + 1;
                    while start.elapsed() < run_for {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        let h = cache.lookup((x >> 33) % 64);
                        h.use_it();
                        drop(h);
                        ops.fetch_add(1, Relaxed);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    for t in threads {
        t.join().unwrap();
    }
    evictor.join().unwrap();

    // Every user is gone: one more pass evicts everything.
    cache.evict_unused();
    let left = cache.map.read().unwrap().len();
    let (hits, misses, evictions) =
        (cache.hits.load(Relaxed), cache.misses.load(Relaxed), cache.evictions.load(Relaxed));
    println!(
        "{} lookups in {:.1?}: {hits} hits, {misses} misses, {evictions} evictions, {left} entries left",
        ops.load(Relaxed),
        start.elapsed()
    );
    assert_eq!(left, 0, "an unused entry survived eviction");
}
