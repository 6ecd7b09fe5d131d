//! `GET /metrics`: the node's metrics for Prometheus ([`crate::metrics`]), anonymous like
//! `/stats`. Prometheus text by default; OpenMetrics when the `Accept` header asks for
//! `application/openmetrics-text` (under KurrentDB's names only, as KurrentDB does);
//! gzip-compressed when the scraper accepts it (Prometheus does).

use std::sync::Arc;

use http::StatusCode;

use super::reply::Reply;
use super::request::Req;
use super::Api;
use crate::metrics::{scrape, Format};

/// `GET /metrics`.
pub async fn metrics(api: &Arc<Api>, req: &Req) -> Reply {
    let node = api.node.clone();
    let format = Format::negotiate(req.headers.get_str("accept"), node.metrics().naming);
    let gzip = req.headers.get_str("accept-encoding").is_some_and(accepts_gzip);
    let doc = api.node.env().blocking(move || scrape::document(&node, format, gzip)).await;
    let mut reply = Reply::body(StatusCode::OK, super::media::Media::TextPlain, doc);
    reply.content_type = None;
    let reply = reply.header("content-type", format.content_type()).header("cache-control", "no-cache");
    let reply = reply.header("vary", "Accept-Encoding");
    if gzip {
        reply.header("content-encoding", "gzip")
    } else {
        reply
    }
}

/// Whether an `Accept-Encoding` value accepts gzip (listed without `q=0`, or `*` so).
fn accepts_gzip(value: &str) -> bool {
    value.split(',').any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        let refused = parts.any(|p| {
            p.trim().strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !refused
    })
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_is_used_when_the_scraper_accepts_it() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("identity, GZIP;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip("br, deflate"));
    }
}
