//! The HTTP API, wire-compatible with EventStoreDB v5 HTTP clients
//! (the routes, statuses, reason phrases, headers and documents a v5 node sends).
//!
//! One HTTP/1.1 connection task per client ([`wire`]), over the [`Conn`]s of the Env
//! seam. Every request goes through the v5 pipeline in [`Api::handle`]: authentication, routing,
//! `OPTIONS`, method, body type (415), reply type (406), route level (401), then the handler,
//! bounded by a request timeout (408). Store calls block, so handlers run them through
//! [`Env::blocking`](crate::env::Env::blocking), ACL check and read together.
//!
//! Modules: [`area`] (the routes of each area — node, admin, users, streams — and their
//! dispatch), [`router`] (what routing shares: levels, specs, segments), [`media`] (negotiation, ETag hashes), [`request`] and
//! [`reply`] (headers in, status lines out), [`errors`] (error → status, exhaustively), [`feed`]
//! (Atom JSON/XML), [`streams`] (reads, long poll), [`writes`] (appends, deletes), [`metadata`],
//! [`users`], [`subscriptions`] (persistent subscriptions), [`node_info`] (`/ping`, `/info`, `/gossip`, shutdown), [`stats`], [`authn`]
//! (credentials and levels), [`text`] and [`xml`] (formats).
//!
//! Deliberate differences from v5 (quirks no client depends on) are listed in
//! `docs/compatibility.md`.
//!
//! Shutdown: the listener stops accepting as soon as shutdown is requested; open connections
//! finish the request in flight and long polls return early.

pub mod admin;
pub mod area;
pub mod authn;
pub mod batch;
pub mod cluster;
pub mod compress;
pub mod errors;
pub mod feed;
pub mod headers;
pub mod media;
pub mod metadata;
pub mod metrics;
pub mod node_info;
pub mod projections;
pub mod reply;
pub mod request;
pub mod router;
pub mod stats;
pub mod streams;
pub mod subscriptions;
pub mod text;
pub mod users;
pub mod web;
pub mod wire;
pub mod writes;
pub mod xml;

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};

use self::media::NegotiationError;
use self::reply::Reply;
use self::request::Req;
use self::router::Route;
use crate::env::{Conn, Listener};
use crate::node::Node;

/// A request that has not been answered after this long gets 408 (plus any long-poll time).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A client must send a request's headers within this long.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for open connections.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The HTTP API's shared state.
pub struct Api {
    /// The node.
    pub node: Arc<Node>,
    /// The listening address.
    pub local: SocketAddr,
    /// `/stats` snapshots.
    pub stats: stats::Stats,
}

/// Serves connections from `listener` until the node's shutdown is requested, then lets the
/// requests in flight finish (for at most [`DRAIN_TIMEOUT`]).
pub async fn serve(node: Arc<Node>, mut listener: Box<dyn Listener>) {
    let env = node.env().clone();
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::new(node.config().http_ip, node.config().http_port));
    let api = Arc::new(Api { node: node.clone(), local, stats: stats::Stats::default() });
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut stop = node.shutdown_requested();
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            r = listener.accept() => match r {
                Ok((conn, peer)) => {
                    let api = api.clone();
                    let done = done_tx.clone();
                    env.rt.spawn(Box::pin(async move {
                        connection(api, conn, peer).await;
                        drop(done);
                    }));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    env.rt.sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    drop(done_tx);
    tokio::select! {
        biased;
        _ = done_rx.recv() => {}
        _ = env.rt.sleep(DRAIN_TIMEOUT) => tracing::warn!("connections still open after the drain timeout"),
    }
}

/// Completes when shutdown is requested (or the node is gone).
pub async fn stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn connection(api: Arc<Api>, conn: Box<dyn Conn>, peer: SocketAddr) {
    let conn = match api.node.tls() {
        None => conn,
        Some(tls) => match crate::tls::accept::accept(api.node.env(), tls, conn).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%peer, error = %e, "client connection refused");
                return;
            }
        },
    };
    let connections = &api.node.metrics().connections;
    connections.fetch_add(1, Ordering::Relaxed);
    let mut stop = api.node.shutdown_requested();
    wire::serve(&api, conn, &mut stop).await;
    tracing::trace!(%peer, "connection closed");
    connections.fetch_sub(1, Ordering::Relaxed);
}

/// Bodies of routes that take none are read (and dropped) up to this size, so the connection
/// stays in step; a longer one is left unread and the connection closes after the reply.
pub const IGNORED_BODY_MAX: usize = 64 * 1024;

/// A request's path resolved to its routes, before its body is read.
pub struct Routed {
    /// The routes of the path, by method; `None` when the path is not valid percent-encoding.
    routes: Option<Vec<(Method, Route)>>,
    /// The path's `Access-Control-Allow-Methods` value.
    allow: Cow<'static, str>,
}

impl Api {
    /// Resolves `path` to its routes.
    pub fn route(&self, path: &str) -> Routed {
        match router::segments(path) {
            None => Routed { routes: None, allow: Cow::Borrowed("") },
            Some(segs) => {
                let mut routes = router::routes(&segs);
                if self.node.config().run_projections == crate::config::RunProjections::None {
                    // Without projections v5 registers none of their routes: 404.
                    routes.retain(|(_, r)| !matches!(r, Route::Node(area::node::NodeRoute::Projections(_))));
                }
                if self.node.config().disable_admin_ui {
                    routes.retain(|(_, r)| !matches!(r, Route::Node(area::node::NodeRoute::Web(_))));
                }
                Routed { allow: router::allow_header(&routes), routes: Some(routes) }
            }
        }
    }

    /// The largest body the route of `method` takes: the connection reads a body up to this
    /// before the request is handled, and leaves a longer one unread ([`wire::Body::TooLarge`]:
    /// 413 from the route, then the connection closes).
    pub fn body_limit(&self, routed: &Routed, method: &Method) -> usize {
        let route = routed.routes.iter().flatten().find(|(m, _)| m == method).map(|(_, r)| r);
        route.and_then(|r| r.body_limit(self.node.config().max_append_bytes)).unwrap_or(IGNORED_BODY_MAX)
    }

    /// Answers one request of a path resolved by [`Api::route`]: the reply and the
    /// `Access-Control-Allow-Methods` value of its URL.
    pub async fn handle(self: Arc<Self>, req: wire::Request, routed: Routed) -> (Reply, Cow<'static, str>) {
        let Routed { routes, allow } = routed;
        let Some(routes) = routes else {
            return (Reply::bad_request("Invalid URL encoding"), allow);
        };
        // Read once, as a flag: no copy of the header on the request's path.
        let gzip = req.headers.get_str("accept-encoding").is_some_and(compress::accepts_gzip);
        let head_only = req.method == Method::HEAD;
        let reply = self.pipeline(req, routes).await;
        (compress::negotiate(reply, gzip, head_only), allow)
    }

    /// The v5 pipeline after routing: authentication, `OPTIONS`, method, body type, reply type,
    /// route level, then the handler within the request timeout.
    async fn pipeline(self: Arc<Self>, req: wire::Request, routes: Vec<(Method, Route)>) -> Reply {
        let wire::Request { method, path, query: raw_query, headers, body } = req;
        let principal = match headers.get("authorization") {
            None => None,
            Some(v) => {
                let judged_before = cluster::judges_credentials(&self);
                match authn::authenticate(&self, v).await {
                    Ok(p) => Some(p),
                    Err(reply) => return cluster::refused_credentials(&self, judged_before, reply),
                }
            }
        };
        if routes.is_empty() {
            return Reply::status(StatusCode::NOT_FOUND, "Not Found");
        }
        if method == Method::OPTIONS {
            return Reply::status(StatusCode::OK, "OK");
        }
        let Some((_, route)) = routes.into_iter().find(|(m, _)| *m == method) else {
            return Reply::status(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        };
        if route.name().is_some_and(|n| !router::name_ok(n)) {
            return Reply::bad_request("Invalid stream name");
        }
        let spec = route.spec();
        let ct = headers.get_str("content-type");
        let body_media = if spec.accepts.is_empty() {
            None
        } else {
            match media::request_media(ct, spec.accepts) {
                Some(m) => Some(m),
                None => {
                    return Reply::status(
                        StatusCode::UNSUPPORTED_MEDIA_TYPE,
                        "Invalid or missing Content-Type",
                    )
                }
            }
        };
        let query = request::parse_query(raw_query.as_deref());
        let format = query.iter().find(|(k, _)| k.eq_ignore_ascii_case("format")).map(|(_, v)| v.as_str());
        let accept = headers.get_str("accept");
        let (media, how) = if spec.produces.is_empty() {
            (media::Media::TextPlain, media::How::Default)
        } else {
            match media::negotiate(accept, format, spec.produces) {
                Ok(x) => x,
                Err(NegotiationError::NotAcceptable) => {
                    return Reply::status(
                        StatusCode::NOT_ACCEPTABLE,
                        "Requested URI is not available in requested format",
                    )
                }
                Err(NegotiationError::UnknownFormat(f)) => {
                    return Reply::bad_request(format!("Unknown format: {f}"))
                }
            }
        };
        if !authn::level_ok(principal.as_ref(), spec.level) {
            return Reply::unauthorized();
        }
        let mut req = Req {
            base: request::base_url(&headers, self.local, self.node.scheme()),
            method,
            path,
            raw_query,
            query,
            headers,
            body: Some(body),
            principal,
            media,
            how,
            body_media,
        };
        match cluster::gate(&self, &route, &req) {
            None => {}
            Some(cluster::Gate::Answer(reply)) => return reply,
            Some(cluster::Gate::Forward(leader)) => return cluster::forward(&self, &req, leader).await,
        }
        let long_poll = if spec.forward { req.long_poll().ok().flatten().unwrap_or(0) } else { 0 };
        let limit = REQUEST_TIMEOUT + Duration::from_secs(long_poll);
        let deadline = self.node.env().rt.sleep(limit);
        tokio::select! {
            biased;
            r = self.dispatch(route, &mut req) => r,
            _ = deadline => Reply::status(StatusCode::REQUEST_TIMEOUT, "Server was unable to handle request in time"),
        }
    }

    async fn dispatch(self: &Arc<Self>, route: Route, req: &mut Req) -> Reply {
        match route {
            Route::Node(r) => area::node::dispatch(self, r, req).await,
            Route::Admin(r) => area::admin::dispatch(self, r, req).await,
            Route::Users(r) => area::users::dispatch(self, r, req).await,
            Route::Streams(r) => area::streams::dispatch(self, r, req).await,
        }
    }
}
