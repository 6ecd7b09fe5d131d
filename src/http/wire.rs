//! HTTP/1.1 on one client connection (RFC 9112): request heads parsed with `httparse` straight
//! out of the connection's read buffer, bodies read whole before the request is handled, replies
//! encoded into one buffer and written with one call.
//!
//! It replaces hyper's server connection, whose per-request machinery (a dispatcher, header maps
//! in both directions, a body channel, a timer per request) cost more CPU than the append it
//! carried (issue 6's peer benchmark).
//!
//! Rules:
//! - Requests on a connection are answered one at a time, in order; pipelined requests wait in
//!   the read buffer.
//! - A head must be complete within [`HEADER_READ_TIMEOUT`] of its first byte (of the
//!   connection's start, for its first request), or the connection gets 408 and closes. A
//!   keep-alive connection waiting for its next request has no timer.
//! - A head longer than [`MAX_HEAD`] bytes or with more than [`MAX_HEADERS`] headers gets 431;
//!   a malformed head or ambiguous framing (`Content-Length` with `Transfer-Encoding`, differing
//!   lengths, a final coding other than `chunked`) gets 400, another coding before `chunked` 501.
//!   Each closes the connection: the next request's start is unknown.
//! - A body (`Content-Length` or chunked) is read whole, up to its route's limit
//!   ([`Api::body_limit`]), within [`BODY_TIMEOUT`] (else 408 and close). A longer body is not
//!   read: the request is handled with [`Body::TooLarge`] (handlers that read it answer 413) and
//!   the connection closes after the reply.
//! - `Expect: 100-continue` gets an interim `100 Continue` before the body is waited for.
//! - HTTP/1.0 closes after the reply unless it asked for keep-alive; `Connection: close` closes
//!   after the reply.
//! - Shutdown: a connection waiting for a request closes at once; one in the middle of a request
//!   answers it first.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::headers::Headers;
use super::reply::Reply;
use super::{stopped, Api, HEADER_READ_TIMEOUT};
use crate::env::{BoxFuture, Conn};

/// Largest request head (request line and headers), bytes.
pub const MAX_HEAD: usize = 64 * 1024;
/// Most headers in one request head.
pub const MAX_HEADERS: usize = 100;
/// Longest a client may take to send a request body.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Once shutdown is requested, how long a client that started a request head has to finish it
/// (a request whose head arrived is answered; its body has [`BODY_TIMEOUT`]).
pub const SHUTDOWN_HEAD_GRACE: Duration = Duration::from_secs(1);
/// Longest chunk-size line of a chunked body (size and extensions), bytes.
const MAX_CHUNK_LINE: usize = 4096;
/// Longest trailer section of a chunked body, bytes.
const MAX_TRAILERS: usize = 16 * 1024;
/// Room made in the read buffer before each read.
const READ_BYTES: usize = 8 * 1024;
/// After a reply that leaves request bytes unread, what the connection still reads and drops
/// before it closes ([`Wire::linger`]): at most this many bytes…
const LINGER_BYTES: usize = 1 << 20;
/// …for at most this long.
const LINGER_TIME: Duration = Duration::from_secs(2);
/// Reply bodies up to this size are copied behind the head and written with it in one call;
/// longer ones (feed pages) are written from their own buffer, vectored with the head.
const INLINE_BODY: usize = 16 * 1024;

/// A request body as the connection read it.
#[derive(Debug)]
pub enum Body {
    /// The whole body (empty when the request had none).
    Full(Bytes),
    /// Longer than its route's limit (the field); not read.
    TooLarge(usize),
}

/// One request, head and body.
pub struct Request {
    /// Method.
    pub method: Method,
    /// Raw path (percent-encoded, as sent).
    pub path: String,
    /// Raw query string, without the `?`.
    pub query: Option<String>,
    /// Headers.
    pub headers: Headers,
    /// Body.
    pub body: Body,
}

/// How a request's body is framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
}

/// A parsed head and what the connection needs to know about it.
struct Head {
    method: Method,
    path: String,
    query: Option<String>,
    headers: Headers,
    framing: Framing,
    keep_alive: bool,
    /// HTTP/1.0 asking for keep-alive: the reply says so.
    keep_alive_10: bool,
    expect_continue: bool,
}

/// Why no request could be read.
enum Refused {
    /// The client closed the connection, or shutdown came while it was idle.
    Closed,
    /// Answer with this and close.
    Reply(Reply),
}

impl From<io::Error> for Refused {
    fn from(_: io::Error) -> Refused {
        Refused::Closed
    }
}

/// `HTTP-date` (IMF-fixdate) of the `Date` header, cached for the second it names.
struct DateCache {
    secs: i64,
    text: [u8; 29],
}

impl DateCache {
    fn get(&mut self, wall_micros: i64) -> &[u8; 29] {
        let secs = wall_micros.div_euclid(1_000_000);
        if secs != self.secs {
            self.secs = secs;
            self.text = super::text::http_date(secs);
        }
        &self.text
    }
}

/// Serves one connection until the client closes it, a reply closes it, or shutdown.
pub async fn serve(api: &Arc<Api>, conn: Box<dyn Conn>, stop: &mut tokio::sync::watch::Receiver<bool>) {
    let mut wire = Wire {
        conn,
        buf: BytesMut::with_capacity(READ_BYTES),
        out: Vec::with_capacity(1024),
        date: DateCache { secs: i64::MIN, text: [0; 29] },
    };
    let mut first = true;
    loop {
        let head = match wire.read_head(api, first, stop).await {
            Ok(h) => h,
            Err(Refused::Closed) => break,
            Err(Refused::Reply(r)) => {
                wire.close_with(api, r).await;
                return;
            }
        };
        first = false;
        let routed = api.route(&head.path);
        let limit = api.body_limit(&routed, &head.method);
        let body = match wire.read_body(api, &head, limit).await {
            Ok(b) => b,
            Err(Refused::Closed) => break,
            Err(Refused::Reply(r)) => {
                wire.close_with(api, r).await;
                return;
            }
        };
        // A body over the limit was left unread: the next request's start is unknown.
        let unread = matches!(body, Body::TooLarge(_));
        let close = !head.keep_alive || unread;
        let head_only = head.method == Method::HEAD;
        let req =
            Request { method: head.method, path: head.path, query: head.query, headers: head.headers, body };
        let (reply, allow) = api.clone().handle(req, routed).await;
        let stopping = *stop.borrow();
        let close = close || stopping;
        let wall = api.node.env().clock.wall_micros();
        let tail =
            encode(&mut wire.out, &reply, &allow, wire.date.get(wall), head_only, close, head.keep_alive_10);
        if wire.send(tail).await.is_err() {
            break;
        }
        if unread {
            wire.linger(api).await;
            return;
        }
        if close {
            break;
        }
    }
    let _ = wire.conn.shutdown().await;
}

struct Wire {
    conn: Box<dyn Conn>,
    /// Bytes read and not yet consumed (the rest of a head, a body, pipelined requests).
    buf: BytesMut,
    /// The reply being written.
    out: Vec<u8>,
    date: DateCache,
}

impl Wire {
    /// Reads into `buf`; `Closed` at the end of the stream.
    async fn read_more(&mut self) -> Result<(), Refused> {
        self.buf.reserve(READ_BYTES);
        match self.conn.read_buf(&mut self.buf).await? {
            0 => Err(Refused::Closed),
            _ => Ok(()),
        }
    }

    /// [`Self::read_more`] within `deadline` (created on first need), else `timeout`.
    async fn read_more_until(
        &mut self,
        env: &crate::env::Env,
        deadline: &mut Option<BoxFuture<'static, ()>>,
        limit: Duration,
        timeout: &'static str,
    ) -> Result<(), Refused> {
        let d = deadline.get_or_insert_with(|| env.rt.sleep(limit));
        tokio::select! {
            biased;
            r = self.read_more() => r,
            _ = d => Err(Refused::Reply(Reply::status(StatusCode::REQUEST_TIMEOUT, timeout))),
        }
    }

    async fn read_head(
        &mut self,
        api: &Arc<Api>,
        first: bool,
        stop: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<Head, Refused> {
        let mut deadline = None;
        loop {
            if !self.buf.is_empty() {
                if let Some(head) = parse_head(&mut self.buf)? {
                    return Ok(head);
                }
                if self.buf.len() > MAX_HEAD {
                    return Err(Refused::Reply(too_large_head()));
                }
            }
            if self.buf.is_empty() && !first {
                // Idle between requests: no timer, but shutdown closes the connection.
                tokio::select! {
                    biased;
                    _ = stopped(stop) => return Err(Refused::Closed),
                    r = self.read_more() => r?,
                }
            } else {
                if *stop.borrow() && self.buf.is_empty() {
                    return Err(Refused::Closed);
                }
                let timeout = "Request header not received in time";
                let env = api.node.env();
                if *stop.borrow() {
                    self.read_more_until(env, &mut deadline, SHUTDOWN_HEAD_GRACE, timeout).await?;
                    continue;
                }
                let mut stopping = false;
                {
                    let d = deadline.get_or_insert_with(|| env.rt.sleep(HEADER_READ_TIMEOUT));
                    tokio::select! {
                        biased;
                        r = self.read_more() => r?,
                        _ = d => return Err(Refused::Reply(Reply::status(StatusCode::REQUEST_TIMEOUT, timeout))),
                        _ = stopped(stop) => stopping = true,
                    }
                }
                if stopping {
                    // Shutdown: a client that has not sent its whole request head has a short
                    // grace to finish it, not the full header timeout.
                    deadline = Some(env.rt.sleep(SHUTDOWN_HEAD_GRACE));
                }
            }
        }
    }

    async fn read_body(&mut self, api: &Arc<Api>, head: &Head, limit: usize) -> Result<Body, Refused> {
        let env = &api.node.env();
        let mut deadline = None;
        const LATE: &str = "Request body not received in time";
        if head.expect_continue && self.buf.is_empty() && head.framing != Framing::Length(0) {
            if matches!(head.framing, Framing::Length(n) if n > limit as u64) {
                return Ok(Body::TooLarge(limit));
            }
            self.conn.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            self.conn.flush().await?;
        }
        match head.framing {
            Framing::Length(n) => {
                if n > limit as u64 {
                    return Ok(Body::TooLarge(limit));
                }
                let n = n as usize;
                while self.buf.len() < n {
                    self.buf.reserve(n - self.buf.len());
                    self.read_more_until(env, &mut deadline, BODY_TIMEOUT, LATE).await?;
                }
                Ok(Body::Full(self.buf.split_to(n).freeze()))
            }
            Framing::Chunked => {
                let mut body = BytesMut::new();
                loop {
                    let line = loop {
                        if let Some(at) = memchr::memmem::find(&self.buf, b"\r\n") {
                            break at;
                        }
                        if self.buf.len() > MAX_CHUNK_LINE {
                            return Err(Refused::Reply(Reply::bad_request("Chunk size line too long")));
                        }
                        self.read_more_until(env, &mut deadline, BODY_TIMEOUT, LATE).await?;
                    };
                    let size = chunk_size(&self.buf[..line])
                        .ok_or_else(|| Refused::Reply(Reply::bad_request("Invalid chunk size")))?;
                    self.buf.advance(line + 2);
                    if size == 0 {
                        self.skip_trailers(env, &mut deadline).await?;
                        return Ok(Body::Full(body.freeze()));
                    }
                    if body.len() as u64 + size > limit as u64 {
                        return Ok(Body::TooLarge(limit));
                    }
                    let size = size as usize;
                    while self.buf.len() < size + 2 {
                        self.read_more_until(env, &mut deadline, BODY_TIMEOUT, LATE).await?;
                    }
                    if &self.buf[size..size + 2] != b"\r\n" {
                        return Err(Refused::Reply(Reply::bad_request("Chunk not followed by CRLF")));
                    }
                    body.extend_from_slice(&self.buf[..size]);
                    self.buf.advance(size + 2);
                }
            }
        }
    }

    /// Consumes the trailer section after the last chunk, up to its empty line.
    async fn skip_trailers(
        &mut self,
        env: &crate::env::Env,
        deadline: &mut Option<BoxFuture<'static, ()>>,
    ) -> Result<(), Refused> {
        let mut seen = 0usize;
        loop {
            if let Some(at) = memchr::memmem::find(&self.buf, b"\r\n") {
                self.buf.advance(at + 2);
                if at == 0 {
                    return Ok(());
                }
                seen += at + 2;
                if seen > MAX_TRAILERS {
                    return Err(Refused::Reply(Reply::bad_request("Trailers too long")));
                }
                continue;
            }
            if seen + self.buf.len() > MAX_TRAILERS {
                return Err(Refused::Reply(Reply::bad_request("Trailers too long")));
            }
            self.read_more_until(env, deadline, BODY_TIMEOUT, "Request body not received in time").await?;
        }
    }

    /// Writes `out`, then `tail` (see [`encode`]).
    async fn send(&mut self, tail: Option<Bytes>) -> io::Result<()> {
        match tail {
            None => self.conn.write_all(&self.out).await?,
            Some(body) => self.conn.write_all_buf(&mut Buf::chain(&self.out[..], body)).await?,
        }
        self.conn.flush().await
    }

    /// Answers a request that could not be read, then closes.
    async fn close_with(&mut self, api: &Arc<Api>, reply: Reply) {
        let wall = api.node.env().clock.wall_micros();
        let tail = encode(&mut self.out, &reply, "", self.date.get(wall), false, true, false);
        // While the node stops, it does not linger for a client's unread bytes.
        let stopping = *api.node.shutdown_requested().borrow();
        if self.send(tail).await.is_ok() && !stopping {
            self.linger(api).await;
        }
    }

    /// Closes after a reply that left request bytes unread: stops writing, then reads and drops
    /// what the client still sends (at most [`LINGER_BYTES`], for at most [`LINGER_TIME`]).
    /// Closing a socket with unread input resets the connection, and a reset can destroy the
    /// reply before the client has read it.
    async fn linger(&mut self, api: &Arc<Api>) {
        let _ = self.conn.shutdown().await;
        let mut deadline = api.node.env().rt.sleep(LINGER_TIME);
        let mut dropped = 0usize;
        while dropped <= LINGER_BYTES {
            self.buf.clear();
            tokio::select! {
                biased;
                r = self.read_more() => match r {
                    Ok(()) => dropped += self.buf.len(),
                    Err(_) => return,
                },
                _ = &mut deadline => return,
            }
        }
    }
}

fn too_large_head() -> Reply {
    Reply::status(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "Request Header Fields Too Large")
}

/// Parses a complete head off the front of `buf`; `None` while it is incomplete.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, Refused> {
    // Uninitialised slots: httparse writes the ones it uses (no 3 KiB of zeros per request).
    let mut slots = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD => len,
        Ok(httparse::Status::Complete(_)) => return Err(Refused::Reply(too_large_head())),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Refused::Reply(too_large_head())),
        Err(e) => return Err(Refused::Reply(Reply::bad_request(format!("Bad request: {e}")))),
    };
    let bad = |why: &'static str| Refused::Reply(Reply::bad_request(why));
    let method =
        Method::from_bytes(req.method.unwrap_or("").as_bytes()).map_err(|_| bad("Bad request method"))?;
    let v11 = req.version == Some(1);
    let (path, query) = split_target(req.path.unwrap_or("")).ok_or_else(|| bad("Bad request target"))?;
    let base = buf.as_ptr() as usize;
    let at = |part: &[u8]| part.as_ptr() as usize - base;
    // Header names and values are kept as spans of the head (see `Headers`).
    let mut spans = Vec::with_capacity(req.headers.len());
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut codings = 0usize;
    let mut close = false;
    let mut keep_alive = false;
    let mut expect_continue = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        let v = trim(h.value);
        if is("content-length") {
            for part in v.split(|&b| b == b',') {
                let n = parse_digits(trim(part)).ok_or_else(|| bad("Bad Content-Length"))?;
                if length.is_some_and(|l| l != n) {
                    return Err(bad("Conflicting Content-Length values"));
                }
                length = Some(n);
            }
        } else if is("transfer-encoding") {
            for part in v.split(|&b| b == b',').map(trim).filter(|p| !p.is_empty()) {
                if chunked {
                    return Err(bad("Transfer-Encoding after chunked"));
                }
                codings += 1;
                chunked = part.eq_ignore_ascii_case(b"chunked");
            }
        } else if is("connection") {
            for token in v.split(|&b| b == b',').map(trim) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if is("expect") {
            expect_continue |= v.eq_ignore_ascii_case(b"100-continue");
        }
        let (n, v) = (at(name), at(h.value));
        spans.push(((n, n + name.len()), (v, v + h.value.len())));
    }
    let framing = match (codings, chunked, length) {
        (0, _, None) => Framing::Length(0),
        (0, _, Some(n)) => Framing::Length(n),
        (_, _, Some(_)) => return Err(bad("Both Content-Length and Transfer-Encoding")),
        (_, false, None) => return Err(bad("Transfer-Encoding must end with chunked")),
        (1, true, None) => Framing::Chunked,
        (_, true, None) => {
            return Err(Refused::Reply(Reply::status(
                StatusCode::NOT_IMPLEMENTED,
                "Only the chunked transfer coding is supported",
            )))
        }
    };
    let (path, query) = (path.to_owned(), query.map(str::to_owned));
    let headers = Headers::new(buf.split_to(len).freeze(), spans);
    Ok(Some(Head {
        method,
        path,
        query,
        headers,
        framing,
        keep_alive: if v11 { !close } else { keep_alive && !close },
        keep_alive_10: !v11 && keep_alive && !close,
        expect_continue: v11 && expect_continue,
    }))
}

/// Path and query of a request target: origin form (`/p?q`), or absolute form
/// (`http://host/p?q`), whose path starts at the first `/` after the authority. `*` stays `*`.
fn split_target(target: &str) -> Option<(&str, Option<&str>)> {
    let target = target.split('#').next().unwrap_or("");
    let path_and_query = if target.starts_with('/') || target == "*" {
        target
    } else {
        let (scheme, rest) = target.split_once("://")?;
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return None;
        }
        match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => &rest[i..],
            _ => "/",
        }
    };
    Some(match path_and_query.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path_and_query, None),
    })
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &b[start..end]
}

/// A decimal number of at most 19 digits (no sign, no spaces).
fn parse_digits(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')))
}

/// The size of a chunk-size line (hex digits, then optional `;extensions`).
fn chunk_size(line: &[u8]) -> Option<u64> {
    let hex = trim(line.split(|&b| b == b';').next().unwrap_or(b""));
    if hex.is_empty() || hex.len() > 15 {
        return None;
    }
    hex.iter().try_fold(0u64, |n, &d| Some(n * 16 + u64::from((d as char).to_digit(16)? as u8)))
}

/// Encodes `reply` (status line, headers, body) into `out`, replacing what was there; a body
/// longer than [`INLINE_BODY`] is not copied but returned, to be written after `out`.
/// `allow` is the `Access-Control-Allow-Methods` value; `head_only` leaves the body out (HEAD);
/// `close` says the connection closes after it; `keep_alive_10` answers an HTTP/1.0 keep-alive.
#[must_use]
pub fn encode(
    out: &mut Vec<u8>,
    reply: &Reply,
    allow: &str,
    date: &[u8],
    head_only: bool,
    close: bool,
    keep_alive_10: bool,
) -> Option<Bytes> {
    out.clear();
    let code = reply.status.as_u16();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(&[
        b'0' + (code / 100) as u8,
        b'0' + (code / 10 % 10) as u8,
        b'0' + (code % 10) as u8,
    ]);
    out.push(b' ');
    reply.write_reason(out);
    out.extend_from_slice(b"\r\n");
    reply.write_fields(allow, out);
    let bodiless = reply.status.is_informational()
        || reply.status == StatusCode::NO_CONTENT
        || reply.status == StatusCode::NOT_MODIFIED;
    if !bodiless {
        out.extend_from_slice(b"content-length: ");
        super::text::push_decimal(out, reply.body.len() as u64);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"date: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if keep_alive_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if bodiless || head_only || reply.body.is_empty() {
        None
    } else if reply.body.len() <= INLINE_BODY {
        out.extend_from_slice(&reply.body);
        None
    } else {
        Some(reply.body.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, String> {
        let mut b = BytesMut::from(text.as_bytes());
        parse_head(&mut b).map_err(|e| match e {
            Refused::Closed => "closed".into(),
            Refused::Reply(r) => format!("{} {}", r.status.as_u16(), r.reason.unwrap_or_default()),
        })
    }

    #[test]
    fn heads_frame_their_bodies_and_say_whether_the_connection_stays() {
        let h = head("POST /streams/s?embed=body#x HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\nES-ExpectedVersion: 3\r\n\r\nhello")
            .unwrap()
            .unwrap();
        assert_eq!((h.path.as_str(), h.query.as_deref()), ("/streams/s", Some("embed=body")));
        assert_eq!(h.framing, Framing::Length(5));
        assert!(h.keep_alive && !h.keep_alive_10 && !h.expect_continue);
        assert_eq!(h.headers.get_str("es-expectedversion"), Some("3"));
        let h =
            head("GET http://h:2113/ping?x=1 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert_eq!((h.path.as_str(), h.query.as_deref()), ("/ping", Some("x=1")));
        assert!(h.keep_alive && h.keep_alive_10);
        let h = head("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!h.keep_alive);
        let h = head("POST /s HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\nExpect: 100-continue\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        assert!(!h.keep_alive && h.expect_continue);
        assert!(head("GET /ping HTTP/1.1\r\nHost: h\r\n").unwrap().is_none(), "partial");
    }

    #[test]
    fn ambiguous_or_malformed_heads_are_refused() {
        let cases = [
            ("POST /s HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", "400 Both"),
            ("POST /s HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "400 Conflicting"),
            ("POST /s HTTP/1.1\r\nContent-Length: -5\r\n\r\n", "400 Bad Content-Length"),
            ("POST /s HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", "400 Bad Content-Length"),
            ("POST /s HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "400 Transfer-Encoding must"),
            ("POST /s HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "501 Only"),
            ("POST /s HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "400 Transfer-Encoding after"),
            ("GET ftp://h/x HTTP/1.1\r\n\r\n", "400 Bad request target"),
            ("GET /x HTTP/1.1\r\nBad Header: 1\r\n\r\n", "400 Bad request"),
            ("GE\0T /x HTTP/1.1\r\n\r\n", "400 Bad request"),
        ];
        for (text, want) in cases {
            let got = head(text).err().unwrap_or_else(|| panic!("{text:?} was accepted"));
            assert!(got.starts_with(want), "{text:?}: {got}");
        }
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: v\r\n")).collect();
        let got = head(&format!("GET / HTTP/1.1\r\n{many}\r\n")).err().unwrap();
        assert!(got.starts_with("431"), "{got}");
        let long = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "v".repeat(MAX_HEAD));
        assert!(head(&long).err().unwrap().starts_with("431"), "a complete head counts too");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1000, ..Default::default() })]

        /// Every field of an accepted head reads back through `Headers` exactly as sent (minus
        /// the whitespace around the value), in order, and in any letter case of its name; the
        /// spans survive the head being split off the read buffer, whatever follows it.
        #[test]
        fn header_fields_read_back_as_sent(
            fields in proptest::collection::vec((
                // Some names repeat in another letter case, to check which field a lookup answers.
                proptest::prop_oneof!["[xX]-[dD][uU][pP]", "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,20}"],
                "[ -~]{0,40}",
            ), 0..12),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut text = b"POST /streams/s HTTP/1.1\r\n".to_vec();
            for (name, value) in &fields {
                text.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
            }
            text.extend_from_slice(b"\r\n");
            text.extend_from_slice(&tail);
            let mut buf = BytesMut::from(&text[..]);
            let parsed = parse_head(&mut buf);
            // A field that is a framing header may refuse the head with a reason; none panics.
            let Ok(Some(h)) = parsed else { return Ok(()) };
            proptest::prop_assert_eq!(&buf[..], &tail[..]);
            let got: Vec<(&[u8], &[u8])> = h.headers.iter().collect();
            proptest::prop_assert_eq!(got.len(), fields.len());
            for ((name, value), (n, v)) in fields.iter().zip(got) {
                proptest::prop_assert_eq!(n, name.as_bytes());
                proptest::prop_assert_eq!(v, value.trim_matches(|c| c == ' ' || c == '\t').as_bytes());
            }
            // A lookup in another letter case answers the first field of that name.
            for (name, _) in &fields {
                let first = fields.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v);
                let want = first.map(|v| v.trim_matches(|c| c == ' ' || c == '\t'));
                proptest::prop_assert_eq!(h.headers.get_str(&name.to_ascii_uppercase()), want);
            }
        }

        /// Any bytes at all: a head, a refusal or "need more", never a panic.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let mut buf = BytesMut::from(&bytes[..]);
            let _ = parse_head(&mut buf);
        }
    }

    #[test]
    fn empty_header_values_are_present_and_empty() {
        let h = head("GET / HTTP/1.1\r\nX-A:\r\nX-B:   \r\nHost: h\r\n\r\n").unwrap().unwrap();
        assert_eq!(h.headers.get_str("x-a"), Some(""));
        assert_eq!(h.headers.get_str("x-b"), Some(""));
        assert_eq!(h.headers.get_str("host"), Some("h"));
    }

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"1a"), Some(26));
        assert_eq!(chunk_size(b"0;name=value"), Some(0));
        assert_eq!(chunk_size(b"FF "), Some(255));
        assert_eq!(chunk_size(b""), None);
        assert_eq!(chunk_size(b"x1"), None);
        assert_eq!(chunk_size(b"1000000000000000"), None, "too many digits");
    }

    #[test]
    fn replies_are_encoded_with_length_date_and_connection() {
        let mut out = Vec::new();
        let date = b"Sun, 22 Nov 2026 10:00:00 GMT";
        let r = Reply::plain(StatusCode::CREATED, "Created").header("location", "http://h/streams/s/0");
        assert!(encode(&mut out, &r, "POST, OPTIONS", date, false, false, false).is_none());
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with("HTTP/1.1 201 Created\r\nlocation: http://h/streams/s/0\r\n"), "{text}");
        assert!(
            text.contains("\r\ncontent-length: 0\r\ndate: Sun, 22 Nov 2026 10:00:00 GMT\r\n\r\n"),
            "{text}"
        );
        assert!(text.contains("access-control-allow-methods: POST, OPTIONS\r\n"), "{text}");
        assert!(!text.contains("connection:"), "{text}");
        let r = Reply::body(StatusCode::OK, super::super::media::Media::Json, "{}");
        assert!(encode(&mut out, &r, "", date, true, true, false).is_none(), "HEAD");
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(
            text.contains("content-length: 2\r\n") && text.ends_with("connection: close\r\n\r\n"),
            "{text}"
        );
        assert!(encode(&mut out, &r, "", date, false, false, false).is_none());
        assert!(out.ends_with(b"\r\n\r\n{}"), "a small body follows the head in the same buffer");
        let big = Reply::body(StatusCode::OK, super::super::media::Media::Json, vec![b' '; INLINE_BODY + 1]);
        let tail = encode(&mut out, &big, "", date, false, false, false).expect("a large body is not copied");
        assert_eq!(tail.len(), INLINE_BODY + 1);
        assert!(out.ends_with(b"\r\n\r\n"));
        assert!(String::from_utf8_lossy(&out).contains("content-length: 16385\r\n"));
        let r = Reply::status(StatusCode::NOT_MODIFIED, "Not Modified");
        assert!(encode(&mut out, &r, "", date, false, false, true).is_none());
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("content-length") && text.ends_with("connection: keep-alive\r\n\r\n"),
            "{text}"
        );
    }
}
