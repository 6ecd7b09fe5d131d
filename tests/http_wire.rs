//! The HTTP/1.1 connection layer (`src/http/wire.rs`) on a real socket: interim replies, bodies
//! over the limit, malformed heads, HTTP/1.0, HEAD, pipelining and shutdown. Every refusal says
//! why in its status line and loses nothing.

mod http_support;

use std::time::Duration;

use http_support::{self as support, start_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const EVENTS_JSON: &str = "application/vnd.eventstore.events+json";

fn events(id: &str) -> String {
    format!(r#"[{{"eventId":"{id}","eventType":"t","data":{{"a":1}}}}]"#)
}

/// Reads until the server closes the connection.
async fn read_all(c: &mut Box<dyn annal::env::Conn>) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), c.read_to_end(&mut out))
        .await
        .expect("closed in time")
        .ok();
    out
}

/// Splits raw bytes into responses (each head, then as many body bytes as its length says).
fn responses(raw: &[u8]) -> Vec<support::Resp> {
    responses_to(raw, &[])
}

/// [`responses`], where `head_only[i]` says that the i-th answered a HEAD (no body follows).
fn responses_to(mut raw: &[u8], head_only: &[bool]) -> Vec<support::Resp> {
    let mut out = Vec::new();
    while let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
        let mut r = support::parse(raw);
        let bodiless = head_only.get(out.len()).copied().unwrap_or(false);
        if bodiless {
            r.body.clear();
        }
        let len = if bodiless || r.status == 100 || r.status == 204 || r.status == 304 {
            0
        } else {
            r.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0)
        };
        raw = &raw[(end + 4 + len).min(raw.len())..];
        out.push(r);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_continue_gets_an_interim_reply_before_the_body_is_sent() {
    let s = start_with(|_| {}).await;
    let env = annal::env::real::env();
    let body = events("11111111-1111-4111-8111-111111111111");
    let mut c = env.net.connect(s.addr).await.unwrap();
    let head = format!(
        "POST /streams/cont HTTP/1.1\r\nhost: h\r\nconnection: close\r\ncontent-type: {EVENTS_JSON}\r\n\
         expect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let mut interim = [0u8; 25];
    tokio::time::timeout(Duration::from_secs(10), c.read_exact(&mut interim)).await.unwrap().unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(body.as_bytes()).await.unwrap();
    let r = support::parse(&read_all(&mut c).await);
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(s.get("/streams/cont/0", &[("accept", "application/json")]).await.json()["a"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_get_413_unread_and_the_connection_closes() {
    let s = start_with(|c| c.max_append_bytes = 4096).await;
    let env = annal::env::real::env();
    // Declared too long: answered before the body is sent, nothing read or written.
    let mut c = env.net.connect(s.addr).await.unwrap();
    let head = format!(
        "POST /streams/big HTTP/1.1\r\nhost: h\r\ncontent-type: {EVENTS_JSON}\r\ncontent-length: 100000\r\n\r\n"
    );
    c.write_all(head.as_bytes()).await.unwrap();
    let all = responses(&read_all(&mut c).await);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!((all[0].status, all[0].reason.as_str()), (413, "Request body larger than 4096 bytes"));
    assert_eq!(all[0].header("connection"), Some("close"));
    // Chunked, growing past the route's limit: the rest is not read.
    let chunk = |c: char, n: usize| format!("{n:x}\r\n{}\r\n", c.to_string().repeat(n));
    let req = format!(
        "POST /streams/big HTTP/1.1\r\nhost: h\r\nconnection: close\r\ncontent-type: {EVENTS_JSON}\r\ntransfer-encoding: chunked\r\n\r\n{}{}0\r\n\r\n",
        chunk('x', 3000),
        chunk('y', 3000)
    );
    let all = responses(&s.raw(req.as_bytes()).await);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].status, 413, "{all:?}");
    // Far past it: the client's unread bytes do not reset the reply away.
    let limit = 4096;
    let req = format!(
        "POST /streams/big HTTP/1.1\r\nhost: h\r\ncontent-type: {EVENTS_JSON}\r\ntransfer-encoding: chunked\r\n\r\n{}{}",
        chunk('x', limit - 10),
        chunk('y', 300_000)
    );
    let all = responses(&s.raw(req.as_bytes()).await);
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!((all[0].status, all[0].header("connection")), (413, Some("close")), "{all:?}");
    // Within the limit, chunked with extensions and a trailer: accepted.
    let body = events("22222222-2222-4222-8222-222222222222");
    let (a, b) = body.split_at(10);
    let req = format!(
        "POST /streams/big HTTP/1.1\r\nhost: h\r\ncontent-type: {EVENTS_JSON}\r\ntransfer-encoding: chunked\r\n\
         connection: close\r\n\r\n{:x};ext=1\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\nx-trailer: t\r\n\r\n",
        a.len(),
        b.len()
    );
    let r = support::parse(&s.raw(req.as_bytes()).await);
    assert_eq!(r.status, 201, "{r:?}");
    let page = s.get("/streams/big", &[("accept", "application/json")]).await.json();
    assert_eq!(page["entries"].as_array().map(Vec::len), Some(1), "only the accepted append: {page}");
}

/// Each route reads bodies only up to its own limit: a route that takes no body reads a small
/// one and drops it (the connection stays in step), and leaves a longer one unread, answering and
/// then closing; the users routes stop at their 64 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_reads_bodies_up_to_its_own_limit() {
    let s = start_with(|_| {}).await;
    let small = "GET /ping HTTP/1.1\r\nhost: h\r\naccept: application/json\r\ncontent-length: 10\r\n\r\n\
                 0123456789GET /ping HTTP/1.1\r\nhost: h\r\naccept: application/json\r\nconnection: close\r\n\r\n";
    let all = responses(&s.raw(small.as_bytes()).await);
    assert_eq!(all.iter().map(|r| r.status).collect::<Vec<_>>(), [200, 200], "{all:?}");
    let big = annal::http::IGNORED_BODY_MAX + 1;
    let req = format!(
        "GET /ping HTTP/1.1\r\nhost: h\r\naccept: application/json\r\ncontent-length: {big}\r\n\r\n{}\
         GET /ping HTTP/1.1\r\nhost: h\r\n\r\n",
        "x".repeat(big)
    );
    let all = responses(&s.raw(req.as_bytes()).await);
    assert_eq!(all.len(), 1, "the second request is never read: {all:?}");
    assert_eq!((all[0].status, all[0].header("connection")), (200, Some("close")), "{all:?}");
    let body = format!("{{\"loginName\":\"u\",\"fullName\":\"{}\",\"password\":\"p\"}}", "n".repeat(70_000));
    let r = s.post("/users/", "application/json", &[support::ADMIN], body.as_bytes()).await;
    assert_eq!(r.status, 413, "{r:?}");
    assert_eq!(s.get("/users/u", &[support::ADMIN]).await.status, 404, "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_heads_are_refused_with_the_reason_and_close() {
    let s = start_with(|_| {}).await;
    let many: String = (0..120).map(|i| format!("x-h{i}: v\r\n")).collect();
    let long = format!("GET /ping HTTP/1.1\r\nx-long: {}\r\n\r\n", "v".repeat(70 * 1024));
    let cases: Vec<(String, u16, &str)> = vec![
        ("NOT A REQUEST\r\n\r\n".into(), 400, "Bad request"),
        ("GET /ping HTTP/1.1\r\nbad header\r\n\r\n".into(), 400, "Bad request"),
        (format!("GET /ping HTTP/1.1\r\n{many}\r\n"), 431, "Request Header Fields Too Large"),
        (long, 431, "Request Header Fields Too Large"),
        (
            "POST /streams/m HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n"
                .into(),
            400,
            "Both Content-Length and Transfer-Encoding",
        ),
        (
            "POST /streams/m HTTP/1.1\r\ncontent-length: 1, 2\r\n\r\nab".into(),
            400,
            "Conflicting Content-Length values",
        ),
        (
            "POST /streams/m HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n".into(),
            400,
            "Transfer-Encoding must end with chunked",
        ),
        (
            "POST /streams/m HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".into(),
            400,
            "Invalid chunk size",
        ),
    ];
    for (req, status, reason) in cases {
        let raw = s.raw(req.as_bytes()).await;
        let all = responses(&raw);
        assert_eq!(all.len(), 1, "{:?}: {all:?}", &req[..req.len().min(60)]);
        assert_eq!(all[0].status, status, "{:?}: {all:?}", &req[..req.len().min(60)]);
        assert!(all[0].reason.starts_with(reason), "{:?}: {all:?}", &req[..req.len().min(60)]);
    }
    // Nothing was written by any of them.
    assert_eq!(s.get("/streams/m", &[("accept", "application/json")]).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_head_and_pipelined_requests() {
    let s = start_with(|_| {}).await;
    // HTTP/1.0 keep-alive is honoured and said; HTTP/1.0 without keep-alive closes after its
    // reply, so the third request is never read.
    let raw = s
        .raw(
            b"GET /ping HTTP/1.0\r\nconnection: keep-alive\r\naccept: application/json\r\n\r\n\
              GET /ping HTTP/1.0\r\naccept: application/json\r\n\r\n\
              GET /ping HTTP/1.1\r\n\r\n",
        )
        .await;
    let all = responses(&raw);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0].status, 200);
    assert_eq!(all[0].header("connection"), Some("keep-alive"));
    let len: usize = all[0].header("content-length").unwrap().parse().unwrap();
    assert!(len > 0, "{all:?}");
    assert_eq!(all[1].header("connection"), Some("close"));
    assert_eq!((all[1].body.len(), all[0].body.len()), (len, len));
    assert!(all[1].header("date").is_some_and(|d| d.ends_with(" GMT")), "{all:?}");
    // Three appends pipelined on one connection are answered in order.
    let body = |id| events(id);
    let mut req = String::new();
    for (i, id) in [
        "33333333-3333-4333-8333-333333333331",
        "33333333-3333-4333-8333-333333333332",
        "33333333-3333-4333-8333-333333333333",
    ]
    .iter()
    .enumerate()
    {
        let b = body(id);
        let close = if i == 2 { "connection: close\r\n" } else { "" };
        req += &format!(
            "POST /streams/pipe HTTP/1.1\r\nhost: h\r\n{close}content-type: {EVENTS_JSON}\r\nes-expectedversion: {}\r\ncontent-length: {}\r\n\r\n{b}",
            i as i64 - 1,
            b.len()
        );
    }
    let all = responses(&s.raw(req.as_bytes()).await);
    let locations: Vec<_> =
        all.iter().map(|r| (r.status, r.header("location").unwrap_or("").to_owned())).collect();
    assert_eq!(
        locations,
        (0..3).map(|i| (201, format!("http://h/streams/pipe/{i}"))).collect::<Vec<_>>(),
        "{all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_keep_alive_connections() {
    let s = start_with(|_| {}).await;
    let env = annal::env::real::env();
    let mut c = env.net.connect(s.addr).await.unwrap();
    c.write_all(b"GET /ping HTTP/1.1\r\nhost: h\r\n\r\n").await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf)).await.unwrap().unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200 OK\r\n"));
    s.node.request_shutdown();
    // The idle connection is closed by the server (end of stream), not left open.
    let rest = read_all(&mut c).await;
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    let support::Server { done, .. } = s;
    tokio::time::timeout(Duration::from_secs(10), done).await.expect("node stopped").unwrap();
}
