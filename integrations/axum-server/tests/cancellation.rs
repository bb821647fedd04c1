//! A storm of requests against the server, a third of them abandoned
//! mid-flight: some by the client (the connection is dropped while the
//! handler waits for or holds the lock), some inside the server (an
//! `x-deadline-us` timeout drops the handler future). Afterwards the
//! inventory must be consistent, the write lock free, and the server still
//! answering. This is how tokio's 2019 mutex bug (a cancelled waiter that
//! had been handed the lock kept it) showed up in production.
//!
//! `STORM_REQUESTS=N` and `STORM_SEED=S` change its size and schedule.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use hybrid_sync_axum_server::{ArcSwapLock, Inventory, SharedLock, TOTAL, router};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// xorshift64*: the schedule is reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[derive(Default)]
struct Tally {
    writes_sent: AtomicU64,
    writes_ok: AtomicU64,
    client_aborts: AtomicU64,
    deadline_hits: AtomicU64,
    ok: AtomicU64,
}

async fn storm<L: SharedLock>() {
    let requests = env_u64("STORM_REQUESTS", 3000);
    let seed = env_u64("STORM_SEED", 0x5eed_2019) | 1;
    let (router, app) = router::<L>(Duration::from_micros(300));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
    let base = format!("http://{}", listener.local_addr().expect("bound"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let tally = Arc::new(Tally::default());
    let in_flight = Arc::new(tokio::sync::Semaphore::new(64));
    let mut rng = Rng(seed);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..requests {
        let (a, b) = (rng.below(4096), rng.below(4096));
        let (method, path, write) = match rng.below(20) {
            0..=7 => (Method::GET, format!("/item/{a}"), false),
            8..=12 => (Method::POST, format!("/transfer/{a}/{b}"), true),
            13..=17 => (Method::POST, format!("/store/{a}/{b}"), true),
            _ => (Method::GET, "/sum".to_string(), false),
        };
        // A third abandoned: half of those by the client, half by the server.
        let abort = match rng.below(6) {
            0 => Some(("client", rng.below(1500))),
            1 => Some(("server", rng.below(1500))),
            _ => None,
        };
        let mut request = Request::builder().method(method).uri(format!("{base}{path}"));
        if let Some(("server", us)) = abort {
            request = request.header("x-deadline-us", us.to_string());
        }
        let request = request.body(Empty::new()).expect("a valid request");
        let (client, tally, permit) = (client.clone(), Arc::clone(&tally), Arc::clone(&in_flight).acquire_owned());
        tasks.spawn(async move {
            let _permit = permit.await.expect("never closed");
            if write {
                tally.writes_sent.fetch_add(1, Ordering::Relaxed);
            }
            let send = async {
                let response = client.request(request).await.expect("the server answers");
                let status = response.status();
                response.into_body().collect().await.expect("a whole body");
                status
            };
            let status = match abort {
                Some(("client", us)) => match tokio::time::timeout(Duration::from_micros(us), send).await {
                    Ok(status) => status,
                    Err(_) => {
                        tally.client_aborts.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                },
                _ => send.await,
            };
            match status {
                StatusCode::OK => {
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                    if write {
                        tally.writes_ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
                StatusCode::GATEWAY_TIMEOUT => {
                    tally.deadline_hits.fetch_add(1, Ordering::Relaxed);
                }
                other => panic!("unexpected status {other}"),
            }
        });
    }
    let storm = async {
        while let Some(done) = tasks.join_next().await {
            done.expect("a request task panicked");
        }
    };
    tokio::time::timeout(Duration::from_secs(60), storm)
        .await
        .unwrap_or_else(|_| panic!("{}: the storm did not finish within 60 s", L::NAME));

    // Handlers of connections the client dropped may still be running (the
    // server notices a closed connection when it next reads): wait for the
    // lock itself, with a bound, rather than for a fixed time.
    let check =
        client.get(format!("{base}/check").parse().expect("a valid uri")).await.expect("the server answers /check");
    let status = check.status();
    let body = check.into_body().collect().await.expect("a whole body").to_bytes();
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, StatusCode::OK, "{}: /check answered {status}: {body}", L::NAME);
    let fields: Vec<u64> = body.split_whitespace().map(|f| f.parse().expect("numbers")).collect();
    let (sum, applied, cancelled) = (fields[0], fields[1], fields[2]);

    let t = |c: &AtomicU64| c.load(Ordering::Relaxed);
    eprintln!(
        "{}: {requests} requests, {} ok, {} client aborts, {} server deadlines, \
         {cancelled} handlers cancelled; writes sent {} ok {} applied {applied}",
        L::NAME,
        t(&tally.ok),
        t(&tally.client_aborts),
        t(&tally.deadline_hits),
        t(&tally.writes_sent),
        t(&tally.writes_ok),
    );
    assert_eq!(sum, TOTAL, "{}: transfers must conserve the total", L::NAME);
    assert!(
        applied >= t(&tally.writes_ok) && applied <= t(&tally.writes_sent),
        "{}: {applied} transfers applied, but {} were acknowledged and {} sent",
        L::NAME,
        t(&tally.writes_ok),
        t(&tally.writes_sent),
    );
    assert!(t(&tally.deadline_hits) > 0, "the storm must cancel handlers inside the server");
    assert!(cancelled >= t(&tally.deadline_hits), "every deadline drops a handler future");
    assert!(t(&tally.ok) > requests / 2, "most requests must succeed");

    // Still serving, and the lock is free from the test's side too.
    for k in 0..16 {
        let response = client
            .get(format!("{base}/item/{k}").parse().expect("a valid uri"))
            .await
            .expect("the server still answers");
        assert_eq!(response.status(), StatusCode::OK);
    }
    let free = tokio::time::timeout(Duration::from_secs(1), app.lock.write()).await;
    assert!(free.is_ok(), "{}: the write lock is still held after the storm", L::NAME);
    drop(free);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancellation_storm_leaves_hybrid_state_consistent() {
    storm::<hybrid_sync::RwLock<Inventory>>().await;
}

/// The same storm against tokio's lock: the test's own yardstick.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancellation_storm_leaves_tokio_state_consistent() {
    storm::<tokio::sync::RwLock<Inventory>>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancellation_storm_leaves_arc_swap_state_consistent() {
    storm::<ArcSwapLock>().await;
}
