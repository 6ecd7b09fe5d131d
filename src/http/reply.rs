//! Replies: status, custom reason phrase, headers and body, and the headers every reply carries
//! (CORS, `WWW-Authenticate` on 401) (`shared/reference/http-streams.md` §0.2, §7).
//!
//! Errors travel in the reason phrase with an empty body, as v5 clients expect. Reason phrases are
//! reduced to visible ASCII so no input can break the status line.

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;
use http_body_util::Full;

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

    /// The hyper response, with the headers every reply carries. `allow` is the
    /// `Access-Control-Allow-Methods` value (empty for unrouted URLs).
    pub fn into_response(self, allow: &str) -> http::Response<Full<Bytes>> {
        let mut resp = http::Response::new(Full::new(self.body));
        *resp.status_mut() = self.status;
        // Room for the extra headers and the six every reply carries, without regrowing.
        *resp.headers_mut() = http::HeaderMap::with_capacity(self.headers.len() + 6);
        let h = resp.headers_mut();
        for (k, v) in self.headers {
            h.append(k, v);
        }
        if let Some(media) = self.content_type {
            h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(media.content_type()));
        }
        h.insert(
            http::header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_str(allow).unwrap_or(HeaderValue::from_static("")),
        );
        h.insert(http::header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
        h.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        h.insert(http::header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSE_HEADERS));
        if self.status == StatusCode::UNAUTHORIZED {
            h.insert(http::header::WWW_AUTHENTICATE, HeaderValue::from_static(WWW_AUTHENTICATE));
        }
        if let Some(reason) = self.reason.filter(|r| self.status.canonical_reason() != Some(r)) {
            let clean: Vec<u8> =
                reason.bytes().take(512).map(|b| if (0x20..0x7f).contains(&b) { b } else { b'?' }).collect();
            if let Ok(r) = hyper::ext::ReasonPhrase::try_from(clean) {
                resp.extensions_mut().insert(r);
            }
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_sanitised_and_cors_always_present() {
        let r = Reply::bad_request("bad\r\nX-Evil: 1 é").into_response("GET, OPTIONS");
        let phrase = r.extensions().get::<hyper::ext::ReasonPhrase>().unwrap();
        assert_eq!(phrase.as_bytes(), b"bad??X-Evil: 1 ??");
        assert_eq!(r.headers()["access-control-allow-origin"], "*");
        assert!(r.headers().get("content-type").is_none());
        let r = Reply::unauthorized().into_response("");
        assert_eq!(r.headers()["www-authenticate"], WWW_AUTHENTICATE);
        assert!(r.extensions().get::<hyper::ext::ReasonPhrase>().is_none());
    }
}
