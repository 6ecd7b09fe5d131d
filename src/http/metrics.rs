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
    // Compressed here, once per cached document, rather than per reply ([`super::compress`]
    // leaves a reply that names its encoding alone).
    let gzip = req.headers.get_str("accept-encoding").is_some_and(super::compress::accepts_gzip);
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
