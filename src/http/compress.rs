//! gzip on every reply that gains from it: the client's `Accept-Encoding` is negotiated as
//! RFC 9110 says (a list of codings with q-values; `q=0` refuses one; `*` stands for the codings
//! not listed; `identity` is always acceptable unless refused), and a textual reply body of at
//! least [`MIN_BYTES`] is compressed when gzip is accepted. v5 compressed only when the header
//! was exactly `gzip`; browsers and `curl --compressed` send lists.
//!
//! Invariants: a body is never compressed twice (a reply that already names its
//! `Content-Encoding` is left alone); every reply whose form depends on `Accept-Encoding` (a
//! compressible one of at least [`MIN_BYTES`]) says `Vary: Accept-Encoding`, compressed or not,
//! so caches keep both; a compressed body always decompresses to the original; statuses without
//! a body (204, 304) are left alone. Small replies (every write's answer) cost one comparison.

use std::io::Write;

use bytes::Bytes;
use http::StatusCode;

use super::reply::Reply;

/// Bodies shorter than this stay as they are: gzip's header and trailer (18 bytes) and the
/// work outweigh what small documents save.
pub const MIN_BYTES: usize = 1024;

/// Whether `accept_encoding` (the header's value) accepts gzip: listed as `gzip` (or `x-gzip`)
/// with a q-value above 0, or not listed while `*` is, with a q-value above 0.
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    let mut star = None;
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if coding.is_empty() {
            continue;
        }
        let q = parts
            .filter_map(|p| {
                let (k, v) = p.split_once('=')?;
                k.trim().eq_ignore_ascii_case("q").then(|| v.trim().parse::<f32>().unwrap_or(0.0))
            })
            .next()
            .unwrap_or(1.0);
        if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
            return q > 0.0;
        }
        if coding == "*" {
            star = Some(q > 0.0);
        }
    }
    star.unwrap_or(false)
}

/// Whether a reply of this `Content-Type` is text that compresses (JSON, XML, Atom, HTML,
/// JavaScript, CSS, SVG, plain text).
pub fn compressible(content_type: &str) -> bool {
    let t = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    t.starts_with("text/")
        || t.ends_with("+json")
        || t.ends_with("+xml")
        || matches!(
            t.as_str(),
            "application/json" | "application/xml" | "application/javascript" | "image/svg+xml"
        )
}

/// gzip of `body` at `level` (0–9).
pub fn gzip(body: &[u8], level: u32) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 32),
        flate2::Compression::new(level),
    );
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

/// The reply as it goes to a client that accepts gzip or not ([`accepts_gzip`] of its
/// `Accept-Encoding`): compressed with gzip when that pays and is accepted.
pub fn negotiate(mut reply: Reply, gzip_accepted: bool, head_only: bool) -> Reply {
    if reply.body.len() < MIN_BYTES
        || matches!(reply.status, StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED)
    {
        return reply;
    }
    let textual = match (reply.content_type, reply.headers.iter().find(|(k, _)| k == "content-type")) {
        (Some(media), _) => media != super::media::Media::OctetStream,
        (None, Some((_, v))) => compressible(v.to_str().unwrap_or("")),
        (None, None) => false,
    };
    if !textual || reply.headers.iter().any(|(k, _)| k == "content-encoding") {
        return reply;
    }
    match reply.headers.iter().position(|(k, _)| k == "vary") {
        None => reply = reply.header("vary", "Accept-Encoding"),
        Some(i) => {
            let v = reply.headers[i].1.to_str().unwrap_or("").to_string();
            if !v.to_ascii_lowercase().contains("accept-encoding") {
                if let Ok(joined) = http::HeaderValue::from_str(&format!("{v}, Accept-Encoding")) {
                    reply.headers[i].1 = joined;
                }
            }
        }
    }
    if head_only || !gzip_accepted {
        return reply;
    }
    // Level 1: most of the size saved for a fraction of the default level's time, on the
    // request's own task (feed pages are tens of kilobytes at most).
    reply.body = Bytes::from(gzip(&reply.body, 1));
    reply.header("content-encoding", "gzip")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::media::Media;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b).read_to_end(&mut out).unwrap();
        out
    }

    #[test]
    fn accept_encoding_is_a_list_with_q_values() {
        for yes in [
            "gzip",
            "GZIP",
            "gzip, deflate, br",
            "br;q=1.0, gzip;q=0.8, *;q=0.1",
            "*",
            "x-gzip",
            "deflate, *;q=0.5",
        ] {
            assert!(accepts_gzip(yes), "{yes}");
        }
        for no in ["", "identity", "gzip;q=0", "gzip; q=0.0, *", "*;q=0", "br, deflate", "deflate, *;q=0"] {
            assert!(!accepts_gzip(no), "{no}");
        }
        // An explicit gzip entry wins over `*`.
        assert!(!accepts_gzip("*, gzip;q=0"));
        assert!(accepts_gzip("*;q=0, gzip"));
    }

    #[test]
    fn text_above_the_threshold_is_compressed_once_with_vary() {
        let big = "{\"a\":\"".to_string() + &"x".repeat(4000) + "\"}";
        let reply = Reply::body(StatusCode::OK, Media::Json, big.clone());
        let r = negotiate(reply.clone(), accepts_gzip("gzip, deflate"), false);
        assert!(r.headers.iter().any(|(k, v)| k == "content-encoding" && v == "gzip"));
        assert!(r.headers.iter().any(|(k, v)| k == "vary" && v == "Accept-Encoding"));
        assert!(r.body.len() < big.len() / 10);
        assert_eq!(gunzip(&r.body), big.as_bytes());
        // A reply that already varies on something else varies on both.
        let accept = negotiate(reply.clone().header("vary", "Accept"), false, false);
        assert!(accept.headers.iter().any(|(k, v)| k == "vary" && v == "Accept, Accept-Encoding"));
        // Not twice.
        let again = negotiate(r.clone(), true, false);
        assert_eq!(again.body, r.body);
        assert_eq!(again.headers.iter().filter(|(k, _)| k == "content-encoding").count(), 1);
        // Refused, absent, HEAD: as it was, but still varying.
        for (accept, head) in [("gzip;q=0", false), ("", false), ("identity", false), ("gzip", true)] {
            let r = negotiate(reply.clone(), accepts_gzip(accept), head);
            assert_eq!(r.body, big.as_bytes(), "{accept:?}");
            assert!(r.headers.iter().any(|(k, _)| k == "vary"));
            assert!(!r.headers.iter().any(|(k, _)| k == "content-encoding"));
        }
        let small = negotiate(Reply::body(StatusCode::OK, Media::Json, "{}"), true, false);
        assert_eq!(small.body, "{}".as_bytes());
        assert!(small.headers.is_empty(), "a small reply does not depend on Accept-Encoding");
        // Binary and bodiless replies are left alone.
        let bin = negotiate(Reply::body(StatusCode::OK, Media::OctetStream, vec![7u8; 5000]), true, false);
        assert!(bin.headers.is_empty());
        let none = negotiate(Reply::status(StatusCode::NO_CONTENT, "No Content"), true, false);
        assert!(none.headers.is_empty());
    }

    #[test]
    fn textual_types_compress() {
        for t in [
            "text/html; charset=utf-8",
            "application/vnd.eventstore.atom+json",
            "application/atom+xml",
            "image/svg+xml",
            "application/javascript",
        ] {
            assert!(compressible(t), "{t}");
        }
        for t in ["application/octet-stream", "image/png", ""] {
            assert!(!compressible(t), "{t}");
        }
    }
}
