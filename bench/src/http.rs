//! `annal-bench http`: the HTTP driver (Annal's own protocol, EventStoreDB v5 HTTP) and the HTTP
//! load test of issue 3.
//!
//! Every connection is a keep-alive HTTP/1.1 client connection owned by one task: a small client
//! that writes each request in one `write` and parses the status line, the headers and a
//! `Content-Length` or chunked body in the same task (no connection task and no channel between
//! them, as in wrk), so the generator spends little of the 2 cores the server needs. Appends
//! send `application/vnd.eventstore.events+json` batches with `ES-ExpectedVersion` (each
//! connection owns its stream, so it knows the version to expect); reads ask for
//! `application/vnd.eventstore.atom+json` pages with `?embed=body`.

// Some helpers serve only the peer comparison.
#![cfg_attr(not(feature = "peers"), allow(dead_code))]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::gen::{self, BoxFut, Measured, Op};
use crate::Args;

/// Basic credentials of the default admin (`$all` needs them).
pub const ADMIN_AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";

/// A connection's byte stream: TCP, or TLS over TCP (`annal-bench tls`).
pub trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// One keep-alive connection to a node.
pub struct Client {
    tcp: Box<dyn Stream>,
    host: String,
    /// Bytes read past the last response.
    inbuf: BytesMut,
    out: Vec<u8>,
}

/// A response: status, a header the caller asked for, body.
pub struct Resp {
    pub status: u16,
    pub reason: String,
    pub body: Bytes,
}

/// Largest response head (status line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;

impl Client {
    /// Opens a connection (`TCP_NODELAY`, as every HTTP client does).
    pub async fn connect(addr: SocketAddr) -> Result<Client, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(Client::over(Box::new(tcp), addr))
    }

    /// Opens a TLS connection (`TCP_NODELAY`; the handshake completes before this returns).
    pub async fn connect_tls(addr: SocketAddr, tls: &tokio_rustls::TlsConnector) -> Result<Client, String> {
        let tcp = tokio::net::TcpStream::connect(addr).await.map_err(|e| format!("connect {addr}: {e}"))?;
        tcp.set_nodelay(true).map_err(|e| e.to_string())?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        // rustls reads at most 4 KiB per call: a buffer below it saves system calls on feed pages.
        let tcp = tokio::io::BufReader::with_capacity(64 * 1024, tcp);
        let stream = tls.connect(name, tcp).await.map_err(|e| format!("TLS handshake with {addr}: {e}"))?;
        Ok(Client::over(Box::new(stream), addr))
    }

    /// Connects plainly (`tls` is `None`) or over TLS.
    pub async fn connect_with(
        addr: SocketAddr,
        tls: Option<&tokio_rustls::TlsConnector>,
    ) -> Result<Client, String> {
        match tls {
            None => Client::connect(addr).await,
            Some(t) => Client::connect_tls(addr, t).await,
        }
    }

    fn over(tcp: Box<dyn Stream>, addr: SocketAddr) -> Client {
        Client { tcp, host: addr.to_string(), inbuf: BytesMut::with_capacity(64 * 1024), out: Vec::new() }
    }

    /// Sends a request and reads the whole response.
    pub async fn request(
        &mut self,
        method: http::Method,
        path: &str,
        headers: &[(&'static str, &str)],
        body: Bytes,
    ) -> Result<Resp, String> {
        use std::io::Write;
        let out = &mut self.out;
        out.clear();
        let _ = write!(out, "{method} {path} HTTP/1.1\r\nhost: {}\r\n", self.host);
        for (k, v) in headers {
            let _ = write!(out, "{k}: {v}\r\n");
        }
        if !body.is_empty() || method == http::Method::POST {
            let _ = write!(out, "content-length: {}\r\n", body.len());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&body);
        self.tcp.write_all(out).await.map_err(|e| format!("write: {e}"))?;
        self.read_response(method == http::Method::HEAD).await
    }

    /// Reads more bytes into `inbuf`; an error at the end of the stream.
    async fn fill(&mut self) -> Result<(), String> {
        if self.inbuf.capacity() - self.inbuf.len() < 16 * 1024 {
            self.inbuf.reserve(64 * 1024);
        }
        match self.tcp.read_buf(&mut self.inbuf).await {
            Ok(0) => Err("connection closed by the server".into()),
            Ok(_) => Ok(()),
            Err(e) => Err(format!("read: {e}")),
        }
    }

    async fn read_response(&mut self, head_only: bool) -> Result<Resp, String> {
        let head_len = loop {
            if let Some(at) = memchr::memmem::find(&self.inbuf, b"\r\n\r\n") {
                break at + 4;
            }
            if self.inbuf.len() > MAX_HEAD {
                return Err("response head too long".into());
            }
            self.fill().await?;
        };
        let head = self.inbuf.split_to(head_len).freeze();
        let text = std::str::from_utf8(&head).map_err(|_| "response head is not UTF-8".to_string())?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        if !version.starts_with("HTTP/1.") {
            return Err(format!("bad status line {status_line:?}"));
        }
        let status: u16 = parts
            .next()
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or("").to_owned();
        let mut length: Option<usize> = None;
        let mut chunked = false;
        for line in lines {
            let Some((k, v)) = line.split_once(':') else { continue };
            let v = v.trim();
            if k.eq_ignore_ascii_case("content-length") {
                length = Some(v.parse().map_err(|_| format!("bad content-length {v:?}"))?);
            } else if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
        let no_body = head_only || status == 204 || status == 304 || (100..200).contains(&status);
        let body = if no_body {
            Bytes::new()
        } else if chunked {
            self.read_chunked().await?
        } else {
            let n = length.ok_or("a response without content-length or chunked encoding")?;
            while self.inbuf.len() < n {
                self.inbuf.reserve(n - self.inbuf.len());
                self.fill().await?;
            }
            self.inbuf.split_to(n).freeze()
        };
        Ok(Resp { status, reason, body })
    }

    async fn read_chunked(&mut self) -> Result<Bytes, String> {
        let mut body = BytesMut::new();
        loop {
            let line_end = loop {
                if let Some(at) = memchr::memmem::find(&self.inbuf, b"\r\n") {
                    break at;
                }
                self.fill().await?;
            };
            let size_text = std::str::from_utf8(&self.inbuf[..line_end]).unwrap_or("");
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size =
                usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size {size_text:?}"))?;
            self.inbuf.advance(line_end + 2);
            while self.inbuf.len() < size + 2 {
                self.fill().await?;
            }
            body.extend_from_slice(&self.inbuf[..size]);
            self.inbuf.advance(size + 2);
            if size == 0 {
                return Ok(body.freeze());
            }
        }
    }

    /// Appends `events` to `stream` with `ES-ExpectedVersion: expected` (`None`: no header).
    pub async fn append(&mut self, stream: &str, expected: Option<i64>, body: Bytes) -> Result<(), String> {
        let ev = expected.map(|e| e.to_string());
        let mut h = vec![("content-type", "application/vnd.eventstore.events+json")];
        if let Some(e) = &ev {
            h.push(("es-expectedversion", e.as_str()));
        }
        let r = self.request(http::Method::POST, &format!("/streams/{stream}"), &h, body).await?;
        if r.status != 201 {
            return Err(format!("append to {stream}: {} {}", r.status, r.reason));
        }
        Ok(())
    }

    /// Reads a forward page of `stream`; returns the number of entries.
    pub async fn read_forward(
        &mut self,
        stream: &str,
        from: i64,
        count: usize,
        long_poll: Option<u64>,
    ) -> Result<(usize, Bytes), String> {
        self.read_forward_as(stream, from, count, long_poll, false).await
    }

    /// [`Client::read_forward`], asking for gzip when `gzip`: the page then comes compressed and
    /// is not parsed (a full page is counted as `count` entries), so the load generator spends
    /// nothing on decompressing and the process's CPU is the node's work.
    pub async fn read_forward_as(
        &mut self,
        stream: &str,
        from: i64,
        count: usize,
        long_poll: Option<u64>,
        gzip: bool,
    ) -> Result<(usize, Bytes), String> {
        let lp = long_poll.map(|s| s.to_string());
        let mut h = vec![("accept", "application/vnd.eventstore.atom+json")];
        if let Some(s) = &lp {
            h.push(("es-longpoll", s.as_str()));
        }
        if gzip {
            h.push(("accept-encoding", "gzip"));
        }
        let path = format!("/streams/{stream}/{from}/forward/{count}?embed=body");
        let r = self.request(http::Method::GET, &path, &h, Bytes::new()).await?;
        if r.status != 200 {
            return Err(format!("read {path}: {} {}", r.status, r.reason));
        }
        if gzip {
            // gzip's magic bytes: the node compressed it.
            if !r.body.starts_with(&[0x1f, 0x8b]) {
                return Err(format!("read {path}: asked for gzip, got {} plain bytes", r.body.len()));
            }
            return Ok((count, r.body));
        }
        Ok((count_entries(&r.body), r.body))
    }

    /// Reads a forward page of `$all` from `pos` (32 hex digits); returns the entries and the
    /// position of the next page (`None` at the end).
    pub async fn read_all_forward(
        &mut self,
        pos: &str,
        count: usize,
    ) -> Result<(usize, Option<String>), String> {
        let path = format!("/streams/$all/{pos}/forward/{count}?embed=body");
        let h = [("accept", "application/vnd.eventstore.atom+json"), ("authorization", ADMIN_AUTH)];
        let r = self.request(http::Method::GET, &path, &h, Bytes::new()).await?;
        if r.status != 200 {
            return Err(format!("read {path}: {} {}", r.status, r.reason));
        }
        // Entries are counted and the `previous` link found by scanning the bytes: the generator
        // must not spend more on a page than the server does.
        let n = count_entries(&r.body);
        let next = memchr::memmem::find(&r.body, b"\"relation\": \"previous\"").and_then(|at| {
            let head = &r.body[..at];
            let uri_at = memchr::memmem::rfind(head, b"/streams/%24all/")? + "/streams/%24all/".len();
            let tail = &head[uri_at..];
            let end = tail.iter().position(|&c| c == b'/')?;
            Some(String::from_utf8_lossy(&tail[..end]).into_owned())
        });
        let next = if n == 0 { None } else { next };
        Ok((n, next))
    }
}

/// Entries of a feed page: each entry of an `embed=body` page has one `positionEventNumber`.
pub fn count_entries(body: &[u8]) -> usize {
    positions(body, b"\"positionEventNumber\"").len()
}

/// Offsets just past each occurrence of `key` in `body`.
fn positions(body: &[u8], key: &[u8]) -> Vec<usize> {
    memchr::memmem::find_iter(body, key).map(|at| at + key.len()).collect()
}

/// A JSON batch of `n` events (`application/vnd.eventstore.events+json`) with ids unique to
/// (`conn`, `seq`..).
pub fn batch_body(conn: u64, seq: u64, n: usize, payload: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(n * (payload.len() + 96) + 2);
    b.push(b'[');
    for i in 0..n {
        if i > 0 {
            b.push(b',');
        }
        b.extend_from_slice(b"{\"eventId\":\"");
        b.extend_from_slice(gen::uuid_for(conn, seq + i as u64).as_bytes());
        b.extend_from_slice(b"\",\"eventType\":\"bench\",\"data\":");
        b.extend_from_slice(payload);
        b.push(b'}');
    }
    b.push(b']');
    b.into()
}

/// Appends batches of `batch` to a stream of its own, checking the expected version.
pub struct AppendOp {
    pub client: Client,
    pub conn: u64,
    pub streams: Vec<String>,
    pub versions: Vec<i64>,
    pub batch: usize,
    pub seq: u64,
    pub payload: Bytes,
    pub rng: gen::Rng,
}

impl Op for AppendOp {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let k = self.rng.pick(self.streams.len());
            let body = batch_body(self.conn, self.seq, self.batch, &self.payload);
            self.seq += self.batch as u64;
            self.client.append(&self.streams[k], Some(self.versions[k]), body).await?;
            self.versions[k] += self.batch as i64;
            Ok(self.batch as u64)
        })
    }
}

/// Reads pages of `count` from random places of a stream of `len` events.
pub struct FeedOp {
    pub client: Client,
    pub stream: String,
    pub len: i64,
    pub count: usize,
    pub rng: gen::Rng,
    /// Read the stream in order from 0 (wrapping) instead of at random places.
    pub sequential: bool,
    pub next: i64,
    /// Ask for gzip ([`Client::read_forward_as`]).
    pub gzip: bool,
}

impl Op for FeedOp {
    fn call(&mut self) -> BoxFut<'_, Result<u64, String>> {
        Box::pin(async move {
            let from = if self.sequential {
                let f = self.next;
                self.next = if f + self.count as i64 >= self.len { 0 } else { f + self.count as i64 };
                f
            } else {
                self.rng.below((self.len - self.count as i64 + 1).max(1) as u64) as i64
            };
            let (n, _) = self.client.read_forward_as(&self.stream, from, self.count, None, self.gzip).await?;
            if n == 0 {
                return Err(format!("empty page at {from} of {}", self.stream));
            }
            Ok(n as u64)
        })
    }
}

/// `conns` append connections, each with `streams_each` streams of its own named
/// `{prefix}-{conn}-{k}`.
pub async fn append_ops(
    addr: SocketAddr,
    prefix: &str,
    conns: usize,
    streams_each: usize,
    batch: usize,
    payload: &Bytes,
) -> Result<Vec<Box<dyn Op>>, String> {
    append_ops_with(addr, None, prefix, conns, streams_each, batch, payload).await
}

/// [`append_ops`], over TLS when `tls` is given.
pub async fn append_ops_with(
    addr: SocketAddr,
    tls: Option<&tokio_rustls::TlsConnector>,
    prefix: &str,
    conns: usize,
    streams_each: usize,
    batch: usize,
    payload: &Bytes,
) -> Result<Vec<Box<dyn Op>>, String> {
    let mut ops: Vec<Box<dyn Op>> = Vec::new();
    for c in 0..conns {
        let client = Client::connect_with(addr, tls).await?;
        ops.push(Box::new(AppendOp {
            client,
            conn: unique(),
            streams: gen::own_streams(prefix, c, streams_each),
            versions: vec![-1; streams_each],
            batch,
            seq: 0,
            payload: payload.clone(),
            rng: gen::Rng(0x9E37_79B9 + c as u64 * 7919),
        }));
    }
    Ok(ops)
}

/// A number unique to this process run (distinct event ids across runs of the same data dir).
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    t.unwrap_or(0).wrapping_mul(31) ^ N.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Writes `n` events to `stream` in batches of 1000 (for the read workloads).
pub async fn preload(addr: SocketAddr, stream: &str, n: u64, payload: &Bytes) -> Result<(), String> {
    preload_with(addr, None, stream, n, payload).await
}

/// [`preload`], over TLS when `tls` is given.
pub async fn preload_with(
    addr: SocketAddr,
    tls: Option<&tokio_rustls::TlsConnector>,
    stream: &str,
    n: u64,
    payload: &Bytes,
) -> Result<(), String> {
    let mut c = Client::connect_with(addr, tls).await?;
    let id = unique();
    let mut done = 0u64;
    while done < n {
        let k = (n - done).min(1000);
        let body = batch_body(id, done, k as usize, payload);
        c.append(stream, Some(done as i64 - 1), body).await?;
        done += k;
    }
    Ok(())
}

/// A node started in-process on its own runtime and thread.
pub struct LocalNode {
    pub addr: SocketAddr,
    pub node: Arc<annal::node::Node>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LocalNode {
    /// Starts a node with default settings (durable) on an ephemeral loopback port, data in `dir`.
    pub fn start(dir: &std::path::Path, port: u16) -> Result<LocalNode, String> {
        LocalNode::start_with(dir, port, |_| {})
    }

    /// [`LocalNode::start`] after `tweak` adjusted the configuration.
    pub fn start_with(
        dir: &std::path::Path,
        port: u16,
        tweak: impl FnOnce(&mut annal::config::Config) + Send + 'static,
    ) -> Result<LocalNode, String> {
        let dir = dir.to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("annal-node".into())
            .spawn(move || {
                let mut config = annal::config::Config::for_dir(&dir);
                config.http_port = port;
                tweak(&mut config);
                // The runtime `annal` itself builds.
                let rt = match annal::env::real::node_runtime(
                    config.worker_threads_for(annal::env::real::cores()),
                ) {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                };
                rt.block_on(async move {
                    let env = annal::env::real::env();
                    let opened = {
                        let e = env.clone();
                        env.blocking(move || annal::node::Node::open(e, config)).await
                    };
                    let node = match opened {
                        Ok(n) => n,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let (addr, serve) = match node.bind().await {
                        Ok(x) => x,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    let _ = tx.send(Ok((addr, node)));
                    if let Err(e) = serve.await {
                        eprintln!("annal-bench: node shut down with an error: {e}");
                    }
                });
            })
            .map_err(|e| e.to_string())?;
        let (addr, node) = rx.recv().map_err(|e| e.to_string())??;
        Ok(LocalNode { addr, node, thread: Some(thread) })
    }

    /// Shuts the node down (everything acknowledged is kept) and waits for it.
    pub fn stop(mut self) {
        self.node.request_shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Resolves `http://host:port` to an address.
pub fn addr_of(url: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs are supported")?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    let hostport = if hostport.contains(':') { hostport.to_owned() } else { format!("{hostport}:80") };
    hostport
        .to_socket_addrs()
        .map_err(|e| format!("{hostport}: {e}"))?
        .find(|a| a.ip().is_loopback())
        .ok_or_else(|| format!("{hostport} is not a loopback address (traffic stays on 127.0.0.1)"))
}

/// One printed row.
pub fn row(name: &str, unit: &str, m: &Measured) -> String {
    let err = match (&m.first_error, m.errors) {
        (Some(e), n) => format!(" {n} errors, first: {e}"),
        (None, 0) => String::new(),
        (None, n) => format!(" {n} errors"),
    };
    format!(
        "| {name} | {:.0} {unit} | {:.0} | {:.3} | {:.3} |{err}",
        if unit == "req/s" { m.requests_rate() } else { m.rate() },
        m.requests_rate(),
        m.pct_ms(0.5),
        m.pct_ms(0.99)
    )
}

/// Measures `ops` and prints a row with this process's CPU per request (node and generator when
/// the node runs in-process) and the node's events per group commit (in-process only).
pub async fn measured_row(
    name: &str,
    unit: &str,
    ops: Vec<Box<dyn Op>>,
    warm: Duration,
    window: Duration,
    node: Option<&annal::node::Node>,
) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let flushes = [AtomicU64::new(0), AtomicU64::new(0)];
    let calls = AtomicU64::new(0);
    let probe = || {
        let i = calls.fetch_add(1, Ordering::Relaxed).min(1) as usize;
        if let Some(n) = node {
            flushes[i].store(n.store().stats.flushes.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        gen::proc_cpu_secs(std::process::id()).unwrap_or(0.0)
    };
    let m = gen::closed_loop_cpu(ops, warm, window, Some(&probe)).await;
    let commits = flushes[1].load(Ordering::Relaxed).saturating_sub(flushes[0].load(Ordering::Relaxed));
    let cpu_us = m.server_cpu_secs.map(|c| c * 1e6 / m.requests.max(1) as f64).unwrap_or(0.0);
    let per_commit = if node.is_some() && commits > 0 && unit != "req/s" {
        format!("{:.1}", m.events as f64 / commits as f64)
    } else {
        "-".into()
    };
    println!("{} {cpu_us:.0} | {per_commit} |", row(name, unit, &m));
}

/// The node a mode measures: the one at `--url`, or else a node started in-process in a fresh
/// directory named after `mode` (returned with it, to be stopped and removed by the caller).
/// Exits with a message when neither can be had.
pub fn target_node(args: &Args, mode: &str) -> (Option<(LocalNode, std::path::PathBuf)>, SocketAddr) {
    if let Some(u) = &args.url {
        let addr = addr_of(u).unwrap_or_else(|e| {
            eprintln!("annal-bench: {e}");
            std::process::exit(2)
        });
        return (None, addr);
    }
    let dir = args.dir.join(format!("{mode}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    match LocalNode::start(&dir, 0) {
        Ok(n) => {
            let addr = n.addr;
            (Some((n, dir)), addr)
        }
        Err(e) => {
            eprintln!("annal-bench: cannot start a node: {e}");
            std::process::exit(1);
        }
    }
}

/// `annal-bench http`.
pub fn http_mode(args: &Args) {
    let secs = args.seconds.unwrap_or(5.0);
    let (local, addr) = target_node(args, "http");
    // The load generator: one thread, one task per connection.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    println!(
        "# annal-bench http: {} ({}), 1 KiB JSON events, durable appends (the node fsyncs before acknowledging), {secs} s per row after 1 s warm-up",
        args.url.as_deref().unwrap_or("in-process node"),
        addr
    );
    println!("# machine: {} cores; load average before: {}", annal::env::real::cores(), gen::load_avg());
    println!(
        "| workload | throughput | requests/s | p50 ms | p99 ms | CPU µs/request (process) | events/commit |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let payload = gen::payload(1024);
    let warm = Duration::from_secs(1);
    let window = Duration::from_secs_f64(secs);
    let run = unique() % 1_000_000;
    // `--only c1,c16,c64,b1,b4,r1,r16,z1,z16` picks rows (for profiling one of them).
    let node = local.as_ref().map(|(n, _)| &*n.node);
    let want = |k: &str| args.only.as_ref().is_none_or(|l| l.iter().any(|x| x == k));
    let result: Result<(), String> = rt.block_on(async {
        for conns in [1usize, 16, 64] {
            if !want(&format!("c{conns}")) {
                continue;
            }
            let ops = append_ops(addr, &format!("bench-{run}-c{conns}"), conns, 1, 1, &payload).await?;
            let name = format!("append 1 event, {conns} connection(s), own stream, expected version");
            measured_row(&name, "events/s", ops, warm, window, node).await;
        }
        for conns in [1usize, 4] {
            if !want(&format!("b{conns}")) {
                continue;
            }
            let ops = append_ops(addr, &format!("bench-{run}-b{conns}"), conns, 1, 100, &payload).await?;
            let name = format!("append batches of 100, {conns} connection(s)");
            measured_row(&name, "events/s", ops, warm, window, node).await;
        }
        if !["r1", "r16", "z1", "z16"].iter().any(|k| want(k)) {
            return Ok(());
        }
        let stream = format!("bench-{run}-read");
        let len = 10_000;
        preload(addr, &stream, len, &payload).await?;
        // `r`: plain pages; `z`: the same pages gzipped (`Accept-Encoding: gzip`).
        for (key, gzip) in [("r", false), ("z", true)] {
            for conns in [1usize, 16] {
                if !want(&format!("{key}{conns}")) {
                    continue;
                }
                let mut ops: Vec<Box<dyn Op>> = Vec::new();
                for c in 0..conns {
                    ops.push(Box::new(FeedOp {
                        client: Client::connect(addr).await?,
                        stream: stream.clone(),
                        len: len as i64,
                        count: 20,
                        rng: gen::Rng(0xABCD + c as u64),
                        sequential: false,
                        next: 0,
                        gzip,
                    }));
                }
                let how = if gzip { ", gzip" } else { "" };
                let name = format!("read feed pages of 20 (embed=body){how}, {conns} connection(s)");
                measured_row(&name, "req/s", ops, warm, window, node).await;
            }
        }
        let mut c = Client::connect(addr).await?;
        let (_, plain) = c.read_forward_as(&stream, 0, 20, None, false).await?;
        let (_, packed) = c.read_forward_as(&stream, 0, 20, None, true).await?;
        println!("# a feed page of 20: {} bytes plain, {} bytes gzipped", plain.len(), packed.len());
        Ok(())
    });
    println!("# load average after: {}", gen::load_avg());
    if let Err(e) = result {
        eprintln!("annal-bench: {e}");
    }
    drop(rt);
    if let Some((n, dir)) = local {
        n.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// `annal-bench node --dir D --port P`: a node with default settings until SIGTERM/SIGINT (the
/// separate server process of `annal-bench peers`).
pub fn node_mode(args: &Args) {
    let node = match LocalNode::start(&args.dir, args.port) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("annal-bench node: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("annal-bench node: serving on {}", node.addr);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            return;
        };
        tokio::select! {
            biased;
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    });
    node.stop();
}
