//! A request as handlers see it: the caller, the negotiated reply type, the `ES-` headers parsed
//! with v5's reason phrases, a bounded body, and the base URL links are built from.

use bytes::Bytes;
use http::{Method, StatusCode};

use super::headers::Headers;
use super::media::{How, Media};
use super::reply::Reply;
use super::wire::Body;
use crate::auth::Principal;

/// A request in flight.
pub struct Req {
    /// Method.
    pub method: Method,
    /// Raw path.
    pub path: String,
    /// Raw query string.
    pub raw_query: Option<String>,
    /// Decoded query pairs.
    pub query: Vec<(String, String)>,
    /// Headers.
    pub headers: Headers,
    /// The body, until taken.
    pub body: Option<Body>,
    /// The authenticated caller (`None`: anonymous).
    pub principal: Option<Principal>,
    /// `scheme://host[:port][/prefix]` of links.
    pub base: String,
    /// Negotiated reply type.
    pub media: Media,
    /// How it was chosen.
    pub how: How,
    /// Type of the request body, for routes that take one.
    pub body_media: Option<Media>,
}

/// Parses the query string into decoded pairs.
pub fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((super::text::unescape(k, true)?, super::text::unescape(v, true)?))
        })
        .collect()
}

fn host_ok(h: &str) -> bool {
    !h.is_empty() && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
}

/// The base URL of links, from `Host` and the `X-Forwarded-*` headers (§1); `scheme` is the
/// node's own (`https` with TLS) unless `X-Forwarded-Proto` names another. One pass over the
/// headers (the first value of each name counts, blank values are absent): every request needs it.
pub fn base_url(headers: &Headers, local: std::net::SocketAddr, scheme: &'static str) -> String {
    // host, x-forwarded-proto, -host, -port, -prefix
    let mut got: [Option<&str>; 5] = [None; 5];
    for (k, v) in headers.iter() {
        let slot = if k.eq_ignore_ascii_case(b"host") {
            0
        } else {
            match strip_prefix_ci(k, b"x-forwarded-") {
                Some(n) if n.eq_ignore_ascii_case(b"proto") => 1,
                Some(n) if n.eq_ignore_ascii_case(b"host") => 2,
                Some(n) if n.eq_ignore_ascii_case(b"port") => 3,
                Some(n) if n.eq_ignore_ascii_case(b"prefix") => 4,
                _ => continue,
            }
        };
        if got[slot].is_none() {
            got[slot] = Some(std::str::from_utf8(v).map(str::trim).unwrap_or(""));
        }
    }
    let got = got.map(|v| v.filter(|v| !v.is_empty()));
    let scheme = match got[1] {
        Some(p) if p.eq_ignore_ascii_case("https") => "https",
        Some(p) if p.eq_ignore_ascii_case("http") => "http",
        _ => scheme,
    };
    let named = got[2].and_then(|h| h.split(',').next()).map(str::trim).filter(|h| host_ok(h));
    let local_text;
    let mut host = match named.or(got[0].filter(|h| host_ok(h))) {
        Some(h) => h,
        None => {
            local_text = local.to_string();
            &local_text
        }
    };
    let port = got[3].and_then(|p| p.parse::<u16>().ok());
    if port.is_some() {
        if let Some(i) = host.rfind(':').filter(|&i| !host[i..].contains(']')) {
            host = &host[..i];
        }
    }
    let prefix = got[4]
        .map(|p| p.trim_matches('/'))
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/".contains(&b)));
    let mut out =
        String::with_capacity(scheme.len() + 3 + host.len() + 6 + prefix.map_or(0, |p| p.len() + 1));
    out.push_str(scheme);
    out.push_str("://");
    out.push_str(host);
    if let Some(port) = port {
        use std::fmt::Write;
        let _ = write!(out, ":{port}");
    }
    if let Some(p) = prefix {
        out.push('/');
        out.push_str(p);
    }
    out
}

/// `name` without `prefix`, matched in any letter case.
fn strip_prefix_ci<'a>(name: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    match name.split_at_checked(prefix.len()) {
        Some((head, rest)) if head.eq_ignore_ascii_case(prefix) => Some(rest),
        _ => None,
    }
}

impl Req {
    /// A header as text (`None` when absent or not UTF-8).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get_str(name)
    }

    /// An `ES-` header, falling back to its `Kurrent-` twin; `alt` is an accepted misspelling.
    /// `name` and `alt` are matched in any letter case. One pass over the headers: it runs
    /// several times for every request.
    pub fn es_header(&self, name: &str, alt: Option<&str>) -> Option<&str> {
        // The first value of each accepted name, in order of preference: es-name, es-alt, kurrent-name.
        let mut first: [Option<&[u8]>; 3] = [None; 3];
        // Lengths first: most fields (Host, Content-Type, …) are ruled out without a comparison.
        let wanted = [("es-", name), ("es-", alt.unwrap_or("")), ("kurrent-", name)];
        for (k, v) in self.headers.iter() {
            let rank = wanted.iter().position(|(prefix, want)| {
                !want.is_empty()
                    && k.len() == prefix.len() + want.len()
                    && strip_prefix_ci(k, prefix.as_bytes())
                        .is_some_and(|rest| rest.eq_ignore_ascii_case(want.as_bytes()))
            });
            if let Some(rank) = rank {
                first[rank].get_or_insert(v);
            }
        }
        first.into_iter().flatten().next().and_then(|v| std::str::from_utf8(v).ok())
    }

    /// A `True`/`False` header (case-insensitive); anything else is 400 `<Name> header in wrong format.`.
    pub fn bool_header(
        &self,
        name: &str,
        display: &str,
        alt: Option<&str>,
        default: bool,
    ) -> Result<bool, Reply> {
        match self.es_header(name, alt).map(str::trim) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(_) => Err(Reply::bad_request(format!("{display} header in wrong format."))),
        }
    }

    /// `ES-ExpectedVersion` (default any, -2): an integer ≥ -4.
    pub fn expected_version(&self) -> Result<i64, Reply> {
        match self.es_header("expectedversion", None) {
            None => Ok(crate::store::ANY),
            Some(v) => match v.trim().parse::<i64>() {
                Ok(n) if n >= -4 => Ok(n),
                _ => Err(Reply::bad_request("ES-ExpectedVersion header in wrong format.")),
            },
        }
    }

    /// `ES-RequireMaster` (also `ES-RequiresMaster`). A single node is always master, so the value
    /// only needs to be well formed.
    pub fn require_master(&self) -> Result<bool, Reply> {
        self.bool_header("requiremaster", "ES-RequireMaster", Some("requiresmaster"), false)
    }

    /// `ES-ResolveLinkTos` (default true).
    pub fn resolve_links(&self) -> Result<bool, Reply> {
        self.bool_header("resolvelinktos", "ES-ResolveLinkTos", Some("resolvelinkto"), true)
    }

    /// `ES-LongPoll`: a positive number of seconds.
    pub fn long_poll(&self) -> Result<Option<u64>, Reply> {
        match self.es_header("longpoll", None) {
            None => Ok(None),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n.min(3600))),
                _ => Err(Reply::bad_request("ES-LongPoll header in wrong format.")),
            },
        }
    }

    /// A query parameter (name case-insensitive).
    pub fn query(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The request URL as the client sees it (base plus path, no query).
    pub fn url(&self) -> String {
        format!("{}{}", self.base, self.path)
    }

    /// Takes the body. The connection read it before the request was handled, up to the route's
    /// limit ([`super::Api::body_limit`]) and within its timeout; a longer body is 413.
    pub fn take_body(&mut self) -> Result<Bytes, Reply> {
        match self.body.take() {
            None => Ok(Bytes::new()),
            Some(Body::Full(b)) => Ok(b),
            Some(Body::TooLarge(limit)) => Err(Reply::status(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("Request body larger than {limit} bytes"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req_with(headers: &[(&str, &str)]) -> Req {
        let h = Headers::from_pairs(headers);
        Req {
            method: Method::POST,
            path: "/streams/s".into(),
            raw_query: None,
            query: Vec::new(),
            headers: h,
            body: None,
            principal: None,
            base: String::new(),
            media: Media::Json,
            how: How::Default,
            body_media: None,
        }
    }

    #[test]
    fn es_headers_prefer_es_then_the_misspelling_then_kurrent() {
        let r = req_with(&[
            ("Kurrent-RequireMaster", "k"),
            ("ES-RequiresMaster", "alt"),
            ("es-requiremaster", "es"),
        ]);
        assert_eq!(r.es_header("requiremaster", Some("requiresmaster")), Some("es"));
        let r = req_with(&[("kurrent-requiremaster", "k"), ("ES-RequiresMaster", "alt")]);
        assert_eq!(r.es_header("requiremaster", Some("requiresmaster")), Some("alt"));
        assert_eq!(r.es_header("requiremaster", None), Some("k"));
        // The first value of a repeated header wins.
        let r = req_with(&[("ES-ExpectedVersion", "1"), ("ES-ExpectedVersion", "2"), ("ES-Other", "x")]);
        assert_eq!(r.es_header("expectedversion", None), Some("1"));
        assert_eq!(r.expected_version().ok(), Some(1));
        assert_eq!(r.es_header("longpoll", None), None);
        let r = req_with(&[("ES-RequireMaster", " TRUE ")]);
        assert_eq!(r.require_master().ok(), Some(true));
        let r = req_with(&[("ES-RequireMaster", "yes")]);
        assert!(r.require_master().is_err());
    }

    #[test]
    fn base_urls() {
        let local: std::net::SocketAddr = "127.0.0.1:2113".parse().unwrap();
        let url = |pairs: &[(&str, &str)]| base_url(&Headers::from_pairs(pairs), local, "http");
        assert_eq!(url(&[]), "http://127.0.0.1:2113");
        assert_eq!(url(&[("Host", "h:2113")]), "http://h:2113");
        let fwd =
            [("x-forwarded-port", "8080"), ("X-Forwarded-Proto", "https"), ("x-forwarded-prefix", "/es/")];
        assert_eq!(url(&[&[("host", "h:2113")][..], &fwd].concat()), "https://h:8080/es");
        assert_eq!(url(&[("host", "evil\"<>"), fwd[1], fwd[2]]), "https://127.0.0.1:2113/es");
        // The first of repeated headers counts; the forwarded host wins over Host; a forwarded
        // port replaces the host's own, brackets of an IPv6 host kept.
        let h = [
            ("x-forwarded-host", "[::1]:9, other"),
            ("X-Forwarded-Host", "second"),
            ("host", "h"),
            ("x-forwarded-proto", "HTTPS"),
        ];
        assert_eq!(url(&h), "https://[::1]:9");
        let more = [("x-forwarded-port", "7"), ("x-forwarded-prefix", " ")];
        assert_eq!(url(&[&h[..], &more].concat()), "https://[::1]:7");
        assert_eq!(url(&[("x-forwarded-host", "[::1]"), h[2], h[3], more[0], more[1]]), "https://[::1]:7");
        // A node with TLS links with https unless a proxy says the client spoke plain HTTP.
        let tls = |pairs: &[(&str, &str)]| base_url(&Headers::from_pairs(pairs), local, "https");
        assert_eq!(tls(&[("Host", "h:2113")]), "https://h:2113");
        assert_eq!(tls(&[("Host", "h:2113"), ("X-Forwarded-Proto", "http")]), "http://h:2113");
    }
}
