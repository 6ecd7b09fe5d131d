//! A blocking HTTP/1.1 client for the harness's clients: one connection per request, a deadline
//! for the whole exchange, answers in the simulator's [`Resp`] so the simulator's classification
//! of answers ([`annal_sim::workload::classify`]) is reused unchanged.
//!
//! Invariant: [`Failure::NotSent`] only when the connection could not be opened (no byte of the
//! request left); any later failure is [`Failure::Unknown`].

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use annal_sim::client::{Failure, Resp};

/// Basic credentials of the default admin.
pub const AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";
/// Largest answer read (a feed page of the workload's sizes is far smaller).
const MAX_ANSWER: usize = 16 << 20;

/// Sends one request to `addr` and reads the answer within `timeout`.
pub fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Result<Resp, Failure> {
    let sock: SocketAddr = addr.parse().map_err(|e| Failure::NotSent(format!("{addr}: {e}")))?;
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&sock, timeout).map_err(|e| Failure::NotSent(e.to_string()))?;
    let left = || timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
    let _ = s.set_nodelay(true);
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: {AUTH}\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    let unknown = |e: std::io::Error| Failure::Unknown(e.to_string());
    s.set_write_timeout(Some(left())).map_err(unknown)?;
    s.write_all(req.as_bytes()).map_err(unknown)?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 << 10];
    loop {
        s.set_read_timeout(Some(left())).map_err(unknown)?;
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Failure::Unknown(format!("reading the answer: {e}"))),
        }
        if raw.len() > MAX_ANSWER {
            return Err(Failure::Unknown("answer too large".into()));
        }
        if started.elapsed() >= timeout {
            return Err(Failure::Unknown("timed out".into()));
        }
    }
    parse(&raw).ok_or_else(|| Failure::Unknown(format!("a malformed answer of {} bytes", raw.len())))
}

/// Parses a whole HTTP/1.1 answer (the connection closed after it).
fn parse(raw: &[u8]) -> Option<Resp> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let mut parts = status_line.splitn(3, ' ');
    let _version = parts.next()?;
    let status: u16 = parts.next()?.parse().ok()?;
    let reason = parts.next().unwrap_or_default().to_owned();
    let mut headers = http::HeaderMap::new();
    let mut chunked = false;
    for l in lines {
        let (k, v) = l.split_once(':')?;
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        chunked |= k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked");
        if let (Ok(name), Ok(value)) =
            (http::header::HeaderName::from_bytes(k.as_bytes()), http::HeaderValue::from_str(v))
        {
            headers.append(name, value);
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked { dechunk(rest)? } else { rest.to_vec() };
    Some(Resp { status, headers, reason, body: body.into() })
}

/// The body of a chunked transfer.
fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_plain_and_chunked() {
        let r = parse(b"HTTP/1.1 201 Created\r\nLocation: http://x/streams/s/3\r\n\r\n").unwrap();
        assert_eq!((r.status, r.reason.as_str()), (201, "Created"));
        assert_eq!(r.header("location"), Some("http://x/streams/s/3"));
        let r =
            parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!(&r.body[..], b"abcde");
        assert!(parse(b"HTTP/1.1 200 OK\r\n").is_none(), "no end of the head");
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_none());
    }
}
