//! Replies: status, custom reason phrase, headers and body, and the headers every reply carries
//! (CORS, `WWW-Authenticate` on 401), as v5 sends them.
//!
//! Errors travel in the reason phrase with an empty body, as v5 clients expect. Reason phrases are
//! reduced to visible ASCII so no input can break the status line.

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;

use super::media::Media;

/// `Access-Control-Allow-Headers` on every reply.
pub const ALLOW_HEADERS: &str = "Content-Type, X-Requested-With, X-Forwarded-Host, X-Forwarded-Prefix, X-PINGOTHER, \
     Authorization, ES-LongPoll, ES-ExpectedVersion, ES-EventId, ES-EventType, ES-RequiresMaster, ES-RequireMaster, \
     ES-HardDelete, ES-ResolveLinkTos";
/// `Access-Control-Expose-Headers` on every reply.
pub const EXPOSE_HEADERS: &str = "Location, ES-Position, ES-CurrentVersion";
/// The challenge sent with every 401 (the v5.0.2+ scheme, which keeps browsers from prompting).
pub const WWW_AUTHENTICATE: &str = "BasicCustom realm=\"ES\"";
/// Cache policy of mutable documents (head pages).
pub const NO_CACHE: &str = "max-age=0, no-cache, must-revalidate";

/// A reply under construction.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Status code.
    pub status: StatusCode,
    /// Reason phrase, when not the canonical one.
    pub reason: Option<Cow<'static, str>>,
    /// `Content-Type`, if any.
    pub content_type: Option<Media>,
    /// Extra headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Body.
    pub body: Bytes,
}

impl Reply {
    /// A status-only reply: empty body, no `Content-Type`.
    pub fn status(status: StatusCode, reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply {
            status,
            reason: Some(reason.into()),
            content_type: None,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    /// A reply with a body of `media`.
    pub fn body(status: StatusCode, media: Media, body: impl Into<Bytes>) -> Reply {
        Reply { status, reason: None, content_type: Some(media), headers: Vec::new(), body: body.into() }
    }

    /// An empty `text/plain` reply (storage results: write outcomes, read failures of feeds).
    pub fn plain(status: StatusCode, reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply::status(status, reason).with_type(Media::TextPlain)
    }

    /// `401 Unauthorized` with the challenge.
    pub fn unauthorized() -> Reply {
        Reply::status(StatusCode::UNAUTHORIZED, "Unauthorized")
    }

    /// `400` with a reason.
    pub fn bad_request(reason: impl Into<Cow<'static, str>>) -> Reply {
        Reply::status(StatusCode::BAD_REQUEST, reason)
    }

    /// Sets the reason phrase.
    pub fn reason(mut self, reason: impl Into<Cow<'static, str>>) -> Reply {
        self.reason = Some(reason.into());
        self
    }

    /// Sets the `Content-Type` to `media`.
    pub fn with_type(mut self, media: Media) -> Reply {
        self.content_type = Some(media);
        self
    }

    /// Adds a header; a value that is not a valid header value is dropped.
    pub fn header(mut self, name: &'static str, value: impl AsRef<str>) -> Reply {
        if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    /// The reason phrase: the reply's own reduced to visible ASCII (at most 512 bytes, anything
    /// else becomes `?`, so no input can break the status line), else the canonical one.
    pub fn write_reason(&self, out: &mut Vec<u8>) {
        match &self.reason {
            Some(r) => {
                out.extend(r.bytes().take(512).map(|b| if (0x20..0x7f).contains(&b) { b } else { b'?' }))
            }
            None => out.extend_from_slice(self.status.canonical_reason().unwrap_or("Unknown").as_bytes()),
        }
    }

    /// The header lines (`name: value\r\n`) of the reply: its own headers, then `Content-Type`
    /// and the headers every reply carries. `allow` is the `Access-Control-Allow-Methods` value
    /// (empty for unrouted URLs).
    pub fn write_fields(&self, allow: &str, out: &mut Vec<u8>) {
        let mut field = |name: &[u8], value: &[u8]| {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        };
        for (k, v) in &self.headers {
            field(k.as_str().as_bytes(), v.as_bytes());
        }
        if let Some(media) = self.content_type {
            field(b"content-type", media.content_type().as_bytes());
        }
        // Allow lists are built from method names; anything else would not be a valid value.
        let allow = if allow.bytes().all(|b| (0x20..0x7f).contains(&b)) { allow } else { "" };
        field(b"access-control-allow-methods", allow.as_bytes());
        field(b"access-control-allow-headers", ALLOW_HEADERS.as_bytes());
        field(b"access-control-allow-origin", b"*");
        field(b"access-control-expose-headers", EXPOSE_HEADERS.as_bytes());
        if self.status == StatusCode::UNAUTHORIZED {
            field(b"www-authenticate", WWW_AUTHENTICATE.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_sanitised_and_cors_always_present() {
        let text = |r: &Reply, allow: &str| {
            let mut out = Vec::new();
            r.write_reason(&mut out);
            out.extend_from_slice(b"|");
            r.write_fields(allow, &mut out);
            String::from_utf8(out).unwrap()
        };
        let t = text(&Reply::bad_request("bad\r\nX-Evil: 1 é"), "GET, OPTIONS");
        assert!(t.starts_with("bad??X-Evil: 1 ??|"), "{t}");
        assert!(t.contains("access-control-allow-origin: *\r\n"), "{t}");
        assert!(t.contains("access-control-allow-methods: GET, OPTIONS\r\n"), "{t}");
        assert!(!t.contains("content-type") && !t.contains("www-authenticate"), "{t}");
        let t = text(&Reply::unauthorized(), "");
        assert!(t.starts_with("Unauthorized|"), "{t}");
        assert!(t.contains(&format!("www-authenticate: {WWW_AUTHENTICATE}\r\n")), "{t}");
        let t = text(&Reply::body(StatusCode::OK, Media::Json, "{}"), "");
        assert!(t.starts_with("OK|") && t.contains("content-type: application/json"), "{t}");
    }
}
