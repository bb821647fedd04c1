//! The smallest web server sharing state through `hybrid_sync::RwLock`: an
//! axum key-value store. The handlers are exactly what they would be with
//! `tokio::sync::RwLock`; only the `use` line differs.
//!
//! ```text
//! cargo run --release --example web_state            # serves itself a few requests, then exits
//! cargo run --release --example web_state -- --serve # keeps serving on 127.0.0.1:3000
//! curl -X PUT -d hello localhost:3000/kv/greeting; curl localhost:3000/kv/greeting
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use hybrid_sync::RwLock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Db = Arc<RwLock<HashMap<String, String>>>;

async fn get_key(State(db): State<Db>, Path(key): Path<String>) -> Result<String, StatusCode> {
    db.read().await.get(&key).cloned().ok_or(StatusCode::NOT_FOUND)
}

async fn put_key(State(db): State<Db>, Path(key): Path<String>, value: String) -> StatusCode {
    match db.write().await.insert(key, value) {
        Some(_) => StatusCode::OK,
        None => StatusCode::CREATED,
    }
}

async fn list(State(db): State<Db>) -> String {
    let db = db.read().await;
    let mut keys: Vec<_> = db.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys.join("\n")
}

/// One HTTP/1.1 request over a fresh connection; the status line and body.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("the server listens");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.expect("the request is sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("a response");
    let status = response.lines().next().unwrap_or_default().to_string();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    format!("{status:<24} {body:?}")
}

#[tokio::main]
async fn main() {
    let serve = std::env::args().any(|a| a == "--serve");
    let db: Db = Arc::default();
    let app = Router::new().route("/kv", get(list)).route("/kv/{key}", get(get_key).put(put_key)).with_state(db);
    let listener = tokio::net::TcpListener::bind(if serve { "127.0.0.1:3000" } else { "127.0.0.1:0" })
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("bound");
    if serve {
        println!("serving on http://{addr}; try: curl -X PUT -d hello {addr}/kv/greeting");
        axum::serve(listener, app).await.expect("the server runs");
        return;
    }
    tokio::spawn(async move { axum::serve(listener, app).await });
    for (method, path, body) in [
        ("PUT", "/kv/greeting", "hello"),
        ("PUT", "/kv/answer", "42"),
        ("PUT", "/kv/greeting", "hello again"),
        ("GET", "/kv/greeting", ""),
        ("GET", "/kv/missing", ""),
        ("GET", "/kv", ""),
    ] {
        println!("{method:<4} {path:<14} -> {}", request(addr, method, path, body).await);
    }
}
