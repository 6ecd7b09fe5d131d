//! The Admin UI, served by the node itself: its files (`src/http/ui/`, embedded into the binary
//! when it is built) at `/web/…`, and `GET /` and `GET /web` answered `302` to the UI's page, as
//! v5 answers them. The UI is a static single-page application that calls the node's public HTTP
//! API, with the credentials the API needs, so it can do nothing a client cannot.
//!
//! Invariants: every redirect is relative (a reverse proxy that serves the node under a path
//! prefix keeps working); every UI reply carries the security headers ([`SECURITY_HEADERS`]: a
//! Content-Security-Policy that allows no inline script, no framing); a file's `ETag` is the hash
//! of its bytes, and a request naming it gets `304`; a file is compressed at most once per
//! process (gzip at the best level, kept), and only sent so to a client that accepts gzip;
//! `--disable-admin-ui` makes all of it `404`.

use std::sync::OnceLock;

use http::StatusCode;

use super::reply::Reply;
use super::request::Req;

include!(concat!(env!("OUT_DIR"), "/ui_assets.rs"));

/// Headers on every UI reply: the page may load only its own scripts, styles and API, and may not
/// be framed or sniffed.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
];

/// A UI route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebRoute {
    /// `GET /`, `GET /web`, `GET /web/`: to the UI's page.
    Home(&'static str),
    /// `GET|HEAD /web/{path}`: a file of the UI.
    File(String),
}

/// The UI route of a path's segments, if it is one.
pub fn route(segs: &[&str]) -> Option<WebRoute> {
    match segs {
        // Relative to the URL asked for: `/` and `/web` resolve `web/index.html` to
        // `/web/index.html`, `/web/` resolves `index.html` to it, under any prefix.
        [""] | ["web"] => Some(WebRoute::Home("web/index.html")),
        ["web", ""] => Some(WebRoute::Home("index.html")),
        ["web", rest @ ..] => Some(WebRoute::File(rest.join("/"))),
        _ => None,
    }
}

/// One embedded file: its bytes, content type, ETag, and its gzip form once asked for.
struct Asset {
    path: &'static str,
    bytes: &'static [u8],
    content_type: &'static str,
    etag: String,
    gzip: OnceLock<Option<bytes::Bytes>>,
}

fn assets() -> &'static [Asset] {
    static ASSETS: OnceLock<Vec<Asset>> = OnceLock::new();
    ASSETS.get_or_init(|| {
        UI_ASSETS
            .iter()
            .map(|(path, bytes)| Asset {
                path,
                bytes,
                content_type: content_type(path),
                etag: format!("\"{:08x}-{:x}\"", crc32fast::hash(bytes), bytes.len()),
                gzip: OnceLock::new(),
            })
            .collect()
    })
}

/// The content type of a file, from its extension.
pub fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("").to_ascii_lowercase().as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "application/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "md" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn secured(mut reply: Reply) -> Reply {
    for (k, v) in SECURITY_HEADERS {
        reply = reply.header(k, v);
    }
    reply
}

/// Answers a UI request.
pub fn serve(route: WebRoute, req: &Req) -> Reply {
    let path = match route {
        WebRoute::Home(to) => {
            let mut r = Reply::body(StatusCode::FOUND, super::media::Media::TextPlain, "Moved");
            r.reason = None;
            return secured(r.header("location", to).header("cache-control", "no-cache"));
        }
        WebRoute::File(path) => path,
    };
    let Some(asset) = assets().iter().find(|a| a.path == path) else {
        return secured(Reply::status(StatusCode::NOT_FOUND, "Not Found"));
    };
    let fresh = req
        .headers
        .get_str("if-none-match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == asset.etag || t.trim() == "*"));
    let base = |r: Reply| {
        secured(
            r.header("etag", &asset.etag)
                .header("cache-control", "no-cache")
                .header("vary", "Accept-Encoding"),
        )
    };
    if fresh {
        return base(Reply::status(StatusCode::NOT_MODIFIED, "Not Modified"));
    }
    let gzip = req.headers.get_str("accept-encoding").is_some_and(super::compress::accepts_gzip);
    let packed = if gzip && super::compress::compressible(asset.content_type) {
        asset
            .gzip
            .get_or_init(|| {
                let z = super::compress::gzip(asset.bytes, 9);
                (z.len() < asset.bytes.len()).then(|| bytes::Bytes::from(z))
            })
            .clone()
    } else {
        None
    };
    let mut reply = Reply::status(StatusCode::OK, "OK");
    reply.reason = None;
    let reply = match packed {
        Some(z) => {
            reply.body = z;
            reply.header("content-encoding", "gzip")
        }
        None => {
            reply.body = bytes::Bytes::from_static(asset.bytes);
            reply
        }
    };
    base(reply.header("content-type", asset.content_type))
}

/// The paths of the embedded files (for tests and `/info`).
pub fn files() -> impl Iterator<Item = &'static str> {
    UI_ASSETS.iter().map(|(p, _)| *p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_routes_redirect_relatively_and_files_are_under_web() {
        assert_eq!(route(&[""]), Some(WebRoute::Home("web/index.html")));
        assert_eq!(route(&["web"]), Some(WebRoute::Home("web/index.html")));
        assert_eq!(route(&["web", ""]), Some(WebRoute::Home("index.html")));
        assert_eq!(route(&["web", "pages", "a.js"]), Some(WebRoute::File("pages/a.js".into())));
        assert_eq!(route(&["streams", "web"]), None);
    }

    #[test]
    fn content_types_come_from_extensions() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("a/b.MJS"), "application/javascript; charset=utf-8");
        assert_eq!(content_type("logo.svg"), "image/svg+xml");
        assert_eq!(content_type("x"), "application/octet-stream");
    }
}
