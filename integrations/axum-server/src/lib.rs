//! An axum server whose shared state sits behind a lock chosen at start-up.
//!
//! The state is an inventory of [`ENTRIES`] counters. Most routes read one
//! entry, some move a unit between two entries, and one, `/store`, holds the
//! write guard across an `.await` (a simulated call to an async store) the
//! way real handlers do with tokio's `RwLock`. The handler code is generic
//! over [`SharedLock`]; only the lock type differs between runs:
//!
//! | name     | lock                                   | `/store`           |
//! |----------|----------------------------------------|--------------------|
//! | `hybrid` | `hybrid_sync::RwLock`                  | yes                |
//! | `tokio`  | `tokio::sync::RwLock`                  | yes                |
//! | `parking_lot` | `parking_lot::RwLock` (reference) | no: 501, a worker thread would block |
//! | `arc-swap` | `ArcSwap` + a tokio writers' mutex, copy on write (reference) | yes |
//!
//! Transfers conserve the sum of all entries, so after any storm of
//! requests, aborted ones included, `/check` can tell whether the state is
//! consistent and whether the lock is still free.
//!
//! Routes:
//! - `GET /item/{k}`: read one entry (`k` is taken modulo [`ENTRIES`]).
//! - `POST /transfer/{from}/{to}`: under the write lock, move one unit.
//! - `POST /store/{from}/{to}`: take the write lock, await the store call,
//!   then move one unit.
//! - `GET /sum`: read every entry; answers `sum applied`.
//! - `GET /check`: takes the write lock within a second; answers
//!   `sum applied cancelled`, or 503 when the lock cannot be taken.
//! - `GET /lockstats`: the lock's own counters (hybrid-sync built with its
//!   `stats` feature), or 404.
//!
//! A request carrying `x-deadline-us: N` is dropped inside the server after
//! N microseconds, wherever its handler is (waiting for the lock, holding
//! it across the store call): cancellation inside handlers, the way tokio's
//! 2019 mutex bug showed up.

use std::collections::HashMap;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

/// Number of entries in the shared inventory.
pub const ENTRIES: u32 = 4096;
/// Initial value of every entry.
pub const INITIAL: u64 = 1000;
/// The sum of all entries, which transfers conserve.
pub const TOTAL: u64 = ENTRIES as u64 * INITIAL;

/// The lock names [`serve`] accepts, in the order the load script runs them.
pub const LOCKS: [&str; 4] = ["hybrid", "tokio", "parking_lot", "arc-swap"];

/// One counter of the inventory.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Units held.
    pub value: u64,
    /// Number of transfers that touched this entry.
    pub version: u64,
}

/// The shared state: a map of counters and the number of transfers applied.
#[derive(Clone, Debug)]
pub struct Inventory {
    entries: HashMap<u32, Entry>,
    applied: u64,
}

impl Default for Inventory {
    fn default() -> Self {
        let entries = (0..ENTRIES).map(|k| (k, Entry { value: INITIAL, version: 0 })).collect();
        Inventory { entries, applied: 0 }
    }
}

impl Inventory {
    /// The entry for `k` (taken modulo [`ENTRIES`]).
    pub fn get(&self, k: u32) -> &Entry {
        &self.entries[&(k % ENTRIES)]
    }

    /// The sum of all entries.
    pub fn sum(&self) -> u64 {
        self.entries.values().map(|e| e.value).sum()
    }

    /// Transfers applied so far.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Moves one unit from `from` to `to` if `from` has one; counts the
    /// transfer as applied either way.
    pub fn transfer(&mut self, from: u32, to: u32) {
        let (from, to) = (from % ENTRIES, to % ENTRIES);
        let src = self.entries.get_mut(&from).expect("every key is present");
        if src.value > 0 && from != to {
            src.value -= 1;
            src.version += 1;
            let dst = self.entries.get_mut(&to).expect("every key is present");
            dst.value += 1;
            dst.version += 1;
        }
        self.applied += 1;
    }
}

/// An async reader-writer lock around the [`Inventory`]: the one thing that
/// differs between the servers compared.
pub trait SharedLock: Send + Sync + 'static {
    /// Name on the command line and in reports.
    const NAME: &'static str;
    /// Whether a handler may hold the write guard across an `.await`.
    const HOLDS_ACROSS_AWAIT: bool;
    /// Shared access.
    type Read<'a>: Deref<Target = Inventory> + Send
    where
        Self: 'a;
    /// Exclusive access.
    type Write<'a>: DerefMut<Target = Inventory> + Send
    where
        Self: 'a;
    /// The lock around `value`.
    fn new(value: Inventory) -> Self;
    /// Waits for shared access.
    fn read(&self) -> impl Future<Output = Self::Read<'_>> + Send;
    /// Waits for exclusive access.
    fn write(&self) -> impl Future<Output = Self::Write<'_>> + Send;
    /// The lock's own statistics, where it keeps any (hybrid-sync built
    /// with its `stats` feature).
    fn stats(&self) -> Option<String> {
        None
    }
}

impl SharedLock for hybrid_sync::RwLock<Inventory> {
    const NAME: &'static str = "hybrid";
    const HOLDS_ACROSS_AWAIT: bool = true;
    type Read<'a> = hybrid_sync::RwLockReadGuard<'a, Inventory>;
    type Write<'a> = hybrid_sync::RwLockWriteGuard<'a, Inventory>;
    fn new(value: Inventory) -> Self {
        hybrid_sync::RwLock::new(value)
    }
    fn read(&self) -> impl Future<Output = Self::Read<'_>> + Send {
        hybrid_sync::RwLock::read(self)
    }
    fn write(&self) -> impl Future<Output = Self::Write<'_>> + Send {
        hybrid_sync::RwLock::write(self)
    }
    fn stats(&self) -> Option<String> {
        let stats = hybrid_sync::RwLock::stats(self);
        stats.enabled().then(|| stats.to_string())
    }
}

impl SharedLock for tokio::sync::RwLock<Inventory> {
    const NAME: &'static str = "tokio";
    const HOLDS_ACROSS_AWAIT: bool = true;
    type Read<'a> = tokio::sync::RwLockReadGuard<'a, Inventory>;
    type Write<'a> = tokio::sync::RwLockWriteGuard<'a, Inventory>;
    fn new(value: Inventory) -> Self {
        tokio::sync::RwLock::new(value)
    }
    fn read(&self) -> impl Future<Output = Self::Read<'_>> + Send {
        tokio::sync::RwLock::read(self)
    }
    fn write(&self) -> impl Future<Output = Self::Write<'_>> + Send {
        tokio::sync::RwLock::write(self)
    }
}

impl SharedLock for parking_lot::RwLock<Inventory> {
    const NAME: &'static str = "parking_lot";
    const HOLDS_ACROSS_AWAIT: bool = false;
    type Read<'a> = parking_lot::RwLockReadGuard<'a, Inventory>;
    type Write<'a> = parking_lot::RwLockWriteGuard<'a, Inventory>;
    fn new(value: Inventory) -> Self {
        parking_lot::RwLock::new(value)
    }
    fn read(&self) -> impl Future<Output = Self::Read<'_>> + Send {
        std::future::ready(parking_lot::RwLock::read(self))
    }
    fn write(&self) -> impl Future<Output = Self::Write<'_>> + Send {
        std::future::ready(parking_lot::RwLock::write(self))
    }
}

/// Read-copy-update with `arc-swap`: readers load the current snapshot,
/// writers serialise on a tokio mutex, edit a private copy and publish it
/// when the guard drops. Reads never wait; every write copies the map.
pub struct ArcSwapLock {
    current: ArcSwap<Inventory>,
    writers: tokio::sync::Mutex<()>,
}

/// Write access to an [`ArcSwapLock`]: a copy, published on drop.
pub struct RcuWrite<'a> {
    _writer: tokio::sync::MutexGuard<'a, ()>,
    copy: Option<Inventory>,
    target: &'a ArcSwap<Inventory>,
}

impl Deref for RcuWrite<'_> {
    type Target = Inventory;
    fn deref(&self) -> &Inventory {
        self.copy.as_ref().expect("present until drop")
    }
}

impl DerefMut for RcuWrite<'_> {
    fn deref_mut(&mut self) -> &mut Inventory {
        self.copy.as_mut().expect("present until drop")
    }
}

impl Drop for RcuWrite<'_> {
    fn drop(&mut self) {
        if let Some(copy) = self.copy.take() {
            self.target.store(Arc::new(copy));
        }
    }
}

impl SharedLock for ArcSwapLock {
    const NAME: &'static str = "arc-swap";
    const HOLDS_ACROSS_AWAIT: bool = true;
    type Read<'a> = Arc<Inventory>;
    type Write<'a> = RcuWrite<'a>;
    fn new(value: Inventory) -> Self {
        ArcSwapLock { current: ArcSwap::from_pointee(value), writers: tokio::sync::Mutex::new(()) }
    }
    fn read(&self) -> impl Future<Output = Self::Read<'_>> + Send {
        std::future::ready(self.current.load_full())
    }
    async fn write(&self) -> RcuWrite<'_> {
        let writer = self.writers.lock().await;
        let copy = Inventory::clone(&self.current.load());
        RcuWrite { _writer: writer, copy: Some(copy), target: &self.current }
    }
}

/// Everything a handler sees.
pub struct App<L> {
    /// The shared state.
    pub lock: L,
    /// How long `/store` holds the write guard across its simulated call.
    pub store_delay: Duration,
    /// Handler futures dropped before they finished.
    pub cancelled: AtomicU64,
}

/// Counts a handler future dropped before it finished.
struct Watch<'a> {
    cancelled: &'a AtomicU64,
    done: bool,
}

impl<'a> Watch<'a> {
    fn new(cancelled: &'a AtomicU64) -> Self {
        Watch { cancelled, done: false }
    }
    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Relaxed: a statistic read after the storm, ordered by the
            // requests that observe it.
            self.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn get_item<L: SharedLock>(State(app): State<Arc<App<L>>>, Path(k): Path<u32>) -> String {
    let watch = Watch::new(&app.cancelled);
    let value = app.lock.read().await.get(k).value;
    watch.finish();
    value.to_string()
}

async fn sum<L: SharedLock>(State(app): State<Arc<App<L>>>) -> String {
    let watch = Watch::new(&app.cancelled);
    let (sum, applied) = {
        let inv = app.lock.read().await;
        (inv.sum(), inv.applied())
    };
    watch.finish();
    format!("{sum} {applied}")
}

async fn transfer<L: SharedLock>(State(app): State<Arc<App<L>>>, Path((from, to)): Path<(u32, u32)>) -> &'static str {
    let watch = Watch::new(&app.cancelled);
    app.lock.write().await.transfer(from, to);
    watch.finish();
    "ok"
}

/// Holds the write guard across the simulated store call, then applies the
/// transfer. The await comes first so that a cancelled request leaves the
/// state as it was: the handler is cancel safe, and so must the lock be.
async fn store<L: SharedLock>(State(app): State<Arc<App<L>>>, Path((from, to)): Path<(u32, u32)>) -> Response {
    if !L::HOLDS_ACROSS_AWAIT {
        return (StatusCode::NOT_IMPLEMENTED, "this lock cannot be held across .await\n").into_response();
    }
    let watch = Watch::new(&app.cancelled);
    let mut inv = app.lock.write().await;
    tokio::time::sleep(app.store_delay).await;
    inv.transfer(from, to);
    drop(inv);
    watch.finish();
    "ok".into_response()
}

async fn check<L: SharedLock>(State(app): State<Arc<App<L>>>) -> Response {
    match tokio::time::timeout(Duration::from_secs(1), app.lock.write()).await {
        Ok(inv) => {
            let cancelled = app.cancelled.load(Ordering::Relaxed);
            format!("{} {} {cancelled}", inv.sum(), inv.applied()).into_response()
        }
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "the write lock was not free within 1 s\n").into_response(),
    }
}

async fn lockstats<L: SharedLock>(State(app): State<Arc<App<L>>>) -> Response {
    match app.lock.stats() {
        Some(line) => format!("{line}\n").into_response(),
        None => {
            (StatusCode::NOT_FOUND, "no statistics for this lock (hybrid-sync's `stats` feature)\n").into_response()
        }
    }
}

/// Drops the request's handler after `x-deadline-us` microseconds.
async fn deadline(request: Request, next: Next) -> Response {
    let micros =
        request.headers().get("x-deadline-us").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    match micros {
        None => next.run(request).await,
        Some(us) => match tokio::time::timeout(Duration::from_micros(us), next.run(request)).await {
            Ok(response) => response,
            Err(_) => (StatusCode::GATEWAY_TIMEOUT, "deadline\n").into_response(),
        },
    }
}

/// The router over lock `L`, and the state it shares.
pub fn router<L: SharedLock>(store_delay: Duration) -> (Router, Arc<App<L>>) {
    let app = Arc::new(App { lock: L::new(Inventory::default()), store_delay, cancelled: AtomicU64::new(0) });
    let router = Router::new()
        .route("/item/{k}", get(get_item::<L>))
        .route("/sum", get(sum::<L>))
        .route("/transfer/{from}/{to}", post(transfer::<L>))
        .route("/store/{from}/{to}", post(store::<L>))
        .route("/check", get(check::<L>))
        .route("/lockstats", get(lockstats::<L>))
        .layer(middleware::from_fn(deadline))
        .with_state(Arc::clone(&app));
    (router, app)
}

/// The router over the lock named `lock` (one of [`LOCKS`]).
pub fn router_named(lock: &str, store_delay: Duration) -> Option<Router> {
    Some(match lock {
        "hybrid" => router::<hybrid_sync::RwLock<Inventory>>(store_delay).0,
        "tokio" => router::<tokio::sync::RwLock<Inventory>>(store_delay).0,
        "parking_lot" => router::<parking_lot::RwLock<Inventory>>(store_delay).0,
        "arc-swap" => router::<ArcSwapLock>(store_delay).0,
        _ => return None,
    })
}
