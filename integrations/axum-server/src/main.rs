//! `hybrid-sync-axum-server --lock hybrid|tokio|parking_lot|arc-swap
//! [--addr 127.0.0.1:3000] [--workers N] [--store-us 1000]`
//!
//! Serves the inventory (see the library docs) until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::time::Duration;

use hybrid_sync_axum_server::{LOCKS, router_named};

fn usage(problem: &str) -> ! {
    eprintln!("error: {problem}");
    eprintln!(
        "usage: hybrid-sync-axum-server --lock {} [--addr 127.0.0.1:3000] [--workers N] [--store-us 1000]",
        LOCKS.join("|")
    );
    std::process::exit(2)
}

fn main() {
    let mut lock = None;
    let mut addr: SocketAddr = "127.0.0.1:3000".parse().expect("a valid address");
    let mut workers = None;
    let mut store_us = 1000u64;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        match flag.as_str() {
            "--lock" => lock = Some(value()),
            "--addr" => {
                let v = value();
                addr = v.parse().unwrap_or_else(|_| usage(&format!("--addr {v}: not an address")));
            }
            "--workers" => {
                let v = value();
                workers = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|&n| n > 0)
                        .unwrap_or_else(|| usage(&format!("--workers {v}: not a positive count"))),
                );
            }
            "--store-us" => {
                let v = value();
                store_us = v.parse().unwrap_or_else(|_| usage(&format!("--store-us {v}: not a number")));
            }
            other => usage(&format!("unknown argument {other}")),
        }
    }
    let lock = lock.unwrap_or_else(|| usage("--lock is required"));
    let router = router_named(&lock, Duration::from_micros(store_us))
        .unwrap_or_else(|| usage(&format!("unknown lock {lock:?}")));

    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if let Some(n) = workers {
        rt.worker_threads(n);
    }
    rt.build().expect("a tokio runtime").block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| usage(&format!("cannot listen on {addr}: {e}")));
        println!("listening on {} with lock {lock}", listener.local_addr().expect("bound"));
        if lock == "hybrid" {
            // The settings cargo's feature unification left hybrid-sync
            // with, and the crowd size it took from this machine's CPUs.
            println!("{}", hybrid_sync::tuning());
        }
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("a SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await
            .expect("the server runs");
    });
}
