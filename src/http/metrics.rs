//! `GET /metrics`: the node's metrics for Prometheus ([`crate::metrics`]), anonymous like
//! `/stats`. Prometheus text by default; OpenMetrics when the `Accept` header asks for
//! `application/openmetrics-text` (under KurrentDB's names only, as KurrentDB does).

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
    let doc = api.node.env().blocking(move || scrape::document(&node, format)).await;
    let mut reply = Reply::body(StatusCode::OK, super::media::Media::TextPlain, doc);
    reply.content_type = None;
    reply.header("content-type", format.content_type()).header("cache-control", "no-cache")
}
