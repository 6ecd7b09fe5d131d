//! Shared helpers of the `http_*` integration tests: a real node on an ephemeral port and a tiny
//! HTTP/1.1 client over the Env seam that shows the raw status line (reason phrases matter here).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use annal::config::Config;
use annal::node::Node;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `Authorization` of the default admin.
pub const ADMIN: (&str, &str) = ("authorization", "Basic YWRtaW46Y2hhbmdlaXQ=");
/// `Authorization` of the default ops user.
pub const OPS: (&str, &str) = ("authorization", "Basic b3BzOmNoYW5nZWl0");
/// The host links are built from in these tests.
pub const HOST: &str = "h:2113";

/// A client of a node.
#[derive(Clone, Copy, Debug)]
pub struct Client {
    /// Where the node listens.
    pub addr: SocketAddr,
}

/// A running node.
pub struct Server {
    /// Its client.
    pub client: Client,
    /// The node.
    pub node: Arc<Node>,
    /// Completes when the node has shut down.
    pub done: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// Starts a node with a small chunk size and cheap password hashing.
pub async fn start() -> Server {
    start_with(|_| {}).await
}

/// Starts a node after `tweak` adjusted its configuration.
pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::for_dir(dir.path());
    config.chunk_size = 4 * 1024 * 1024;
    config.password_iterations = 16;
    tweak(&mut config);
    let node = Node::open(annal::env::real::env(), config).unwrap();
    let (addr, serve) = node.bind().await.unwrap();
    let done = tokio::spawn(async move {
        serve.await.unwrap();
    });
    let s = Server { client: Client { addr }, node, done, _dir: dir };
    // The default users are created before the first connection is accepted.
    let r = s.get("/ping", &[]).await;
    assert_eq!(r.status, 200);
    s
}

/// A response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status code.
    pub status: u16,
    /// Reason phrase as sent.
    pub reason: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Resp {
    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses one response from raw bytes (the connection was closed after it).
pub fn parse(raw: &[u8]) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end: {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let mut parts = status_line.splitn(3, ' ');
    let _version = parts.next();
    let status: u16 = parts.next().unwrap().parse().unwrap();
    let reason = parts.next().unwrap_or("").to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if let Some(n) =
        headers.iter().find(|(k, _)| k == "content-length").and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.truncate(n);
    }
    Resp { status, reason, headers, body }
}

impl std::ops::Deref for Server {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl Client {
    /// Sends raw bytes and reads until the server closes the connection.
    pub async fn raw(&self, bytes: &[u8]) -> Vec<u8> {
        let env = annal::env::real::env();
        let mut c = env.net.connect(self.addr).await.unwrap();
        c.write_all(bytes).await.unwrap();
        let mut out = Vec::new();
        let read = c.read_to_end(&mut out);
        tokio::time::timeout(Duration::from_secs(30), read).await.expect("response in time").ok();
        out
    }

    /// Sends a request (`Host: h:2113`, `Connection: close`) and parses the response.
    pub async fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {HOST}\r\nconnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || method == "POST" || method == "PUT" {
            req.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        parse(&self.raw(&bytes).await)
    }

    /// `GET`.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Resp {
        self.request("GET", path, headers, b"").await
    }

    /// `POST` of a body with a content type.
    pub async fn post(&self, path: &str, content_type: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        let mut h = vec![("content-type", content_type)];
        h.extend_from_slice(headers);
        self.request("POST", path, &h, body).await
    }

    /// Appends `n` JSON events `{"n": i}` of type `type-i` to `stream` (as admin, one batch).
    pub async fn append_n(&self, stream: &str, from: usize, n: usize) {
        let events: Vec<Value> = (from..from + n)
            .map(|i| {
                serde_json::json!({
                    "eventId": new_id(),
                    "eventType": format!("type-{i}"),
                    "data": {"n": i},
                    "metadata": {"m": i}
                })
            })
            .collect();
        let r = self
            .post(
                &format!("/streams/{stream}"),
                "application/vnd.eventstore.events+json",
                &[ADMIN],
                &serde_json::to_vec(&events).unwrap(),
            )
            .await;
        assert_eq!(r.status, 201, "{r:?}");
    }
}

/// A fresh event id.
pub fn new_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    uuid::Uuid::from_u128(
        0x5eed_0000_0000_4000_8000_0000_0000_0000 | u128::from(n) | (u128::from(std::process::id()) << 64),
    )
    .to_string()
}

/// Redacts what changes between runs in a feed or entry: dates and event ids.
#[macro_export]
macro_rules! assert_feed_snapshot {
    ($name:expr, $value:expr) => {
        insta::assert_json_snapshot!($name, $value, {
            ".updated" => "[date]",
            ".entries[].updated" => "[date]",
            ".entries[].eventId" => "[id]",
            ".entries[].content.eventId" => "[id]",
            ".eventId" => "[id]",
            ".content.eventId" => "[id]",
            "[].updated" => "[date]",
            "[].eventId" => "[id]",
            "[].content.eventId" => "[id]",
        })
    };
}

impl Server {
    /// Shuts the node down (everything acknowledged is kept) and starts a new one on the same
    /// directory with the same configuration.
    pub async fn restart(self) -> Server {
        let Server { node, done, _dir, .. } = self;
        let config = node.config().clone();
        node.request_shutdown();
        done.await.unwrap();
        drop(node);
        let node = Node::open(annal::env::real::env(), config).unwrap();
        let (addr, serve) = node.bind().await.unwrap();
        let done = tokio::spawn(async move {
            serve.await.unwrap();
        });
        let s = Server { client: Client { addr }, node, done, _dir };
        assert_eq!(s.get("/ping", &[]).await.status, 200);
        s
    }
}

/// A stream's events as `(type, data, metadata)`, read from the node's store (a stream that does
/// not exist or is deleted reads as empty).
pub fn stream_rows(s: &Server, stream: &str) -> Vec<(String, String, Value)> {
    let slice = match s.node.store().read_forward(stream, 0, 10_000, false, i64::MAX / 2) {
        Ok(slice) => slice,
        Err(annal::store::ReadError::NoStream | annal::store::ReadError::StreamDeleted) => return Vec::new(),
        Err(e) => panic!("{stream}: {e}"),
    };
    slice
        .events
        .iter()
        .map(|e| {
            let e = &e.event;
            let meta = serde_json::from_slice(&e.metadata).unwrap_or(Value::Null);
            (e.event_type.clone(), String::from_utf8_lossy(&e.data).into_owned(), meta)
        })
        .collect()
}
