//! The subscriptions area: `/subscriptions[/{stream}[/{group}[/…]]]`, the persistent
//! subscription routes (create, update, delete, lists, info, reading messages, ack, nack and
//! replaying parked messages).
//!
//! Literal segments beat placeholders: `/{group}/info` is the info document, not a read of
//! `info` messages; `ack`, `nack` and `replayParked` take only `POST`.
//!
//! The router carries these routes inside the node area's variant
//! ([`NodeRoute::Subscriptions`](super::node::NodeRoute::Subscriptions)): a cluster node answers
//! them itself (the service runs on the leader only; elsewhere it answers 503).

use std::sync::Arc;

use http::Method;

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{name_ok, Level, Spec};
use super::super::{media, subscriptions, Api};

/// Largest create or update body.
pub const SETTINGS_BODY_MAX: usize = 64 * 1024;

/// A route of the subscriptions area (path parameters as decoded text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubRoute {
    /// `GET /subscriptions`.
    List,
    /// `GET /subscriptions/{stream}`.
    ListStream(String),
    /// `PUT /subscriptions/{stream}/{group}`.
    Create(String, String),
    /// `POST /subscriptions/{stream}/{group}`.
    Update(String, String),
    /// `DELETE /subscriptions/{stream}/{group}`.
    Delete(String, String),
    /// `GET /subscriptions/{stream}/{group}/info`.
    Info(String, String),
    /// `GET /subscriptions/{stream}/{group}[/{count}]`.
    Read(String, String, Option<String>),
    /// `POST /subscriptions/{stream}/{group}/ack[/{id}]`.
    Ack(String, String, Option<String>),
    /// `POST /subscriptions/{stream}/{group}/nack[/{id}]`.
    Nack(String, String, Option<String>),
    /// `POST /subscriptions/{stream}/{group}/replayParked`.
    ReplayParked(String, String),
}

/// The subscriptions area's routes of a path, as `(method, route)`.
pub fn routes(segs: &[&str]) -> Vec<(Method, SubRoute)> {
    let o = |x: &str| x.to_owned();
    match segs {
        ["subscriptions"] => vec![(Method::GET, SubRoute::List)],
        ["subscriptions", s] => vec![(Method::GET, SubRoute::ListStream(o(s)))],
        ["subscriptions", s, g] => vec![
            (Method::GET, SubRoute::Read(o(s), o(g), None)),
            (Method::PUT, SubRoute::Create(o(s), o(g))),
            (Method::POST, SubRoute::Update(o(s), o(g))),
            (Method::DELETE, SubRoute::Delete(o(s), o(g))),
        ],
        ["subscriptions", s, g, "info"] => vec![(Method::GET, SubRoute::Info(o(s), o(g)))],
        ["subscriptions", s, g, "ack"] => vec![(Method::POST, SubRoute::Ack(o(s), o(g), None))],
        ["subscriptions", s, g, "nack"] => vec![(Method::POST, SubRoute::Nack(o(s), o(g), None))],
        ["subscriptions", s, g, "replayParked"] => vec![(Method::POST, SubRoute::ReplayParked(o(s), o(g)))],
        ["subscriptions", s, g, count] => vec![(Method::GET, SubRoute::Read(o(s), o(g), Some(o(count))))],
        ["subscriptions", s, g, "ack", id] => vec![(Method::POST, SubRoute::Ack(o(s), o(g), Some(o(id))))],
        ["subscriptions", s, g, "nack", id] => vec![(Method::POST, SubRoute::Nack(o(s), o(g), Some(o(id))))],
        _ => Vec::new(),
    }
}

impl SubRoute {
    /// The route's requirements: reads, acks and nacks for any user; changes and replays for
    /// `$ops` or `$admins`.
    pub fn spec(&self) -> Spec {
        match self {
            SubRoute::List | SubRoute::ListStream(_) | SubRoute::Info(..) => {
                Spec::new(Level::User, &[], media::DEFAULT)
            }
            SubRoute::Read(..) => Spec::new(Level::User, &[], media::COMPETING),
            SubRoute::Ack(..) | SubRoute::Nack(..) => Spec::new(Level::User, &[], &[]),
            SubRoute::Create(..)
            | SubRoute::Update(..)
            | SubRoute::Delete(..)
            | SubRoute::ReplayParked(..) => Spec::new(Level::Ops, &[], &[]),
        }
    }

    /// The stream and group the route names, if any.
    pub fn names(&self) -> Option<(&str, Option<&str>)> {
        match self {
            SubRoute::List => None,
            SubRoute::ListStream(s) => Some((s, None)),
            SubRoute::Create(s, g)
            | SubRoute::Update(s, g)
            | SubRoute::Delete(s, g)
            | SubRoute::Info(s, g)
            | SubRoute::Read(s, g, _)
            | SubRoute::Ack(s, g, _)
            | SubRoute::Nack(s, g, _)
            | SubRoute::ReplayParked(s, g) => Some((s, Some(g))),
        }
    }

    /// The largest body the route reads.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            SubRoute::Create(..) | SubRoute::Update(..) => Some(SETTINGS_BODY_MAX),
            _ => None,
        }
    }
}

/// Answers a subscriptions-area request.
pub async fn dispatch(api: &Arc<Api>, route: SubRoute, req: &mut Req) -> Reply {
    let subs = api.node.subscriptions();
    if let Some((s, g)) = route.names() {
        if !name_ok(s) {
            return Reply::bad_request("Invalid stream name");
        }
        if g.is_some_and(|g| !name_ok(g)) {
            return Reply::bad_request("Invalid group name");
        }
    }
    match route {
        SubRoute::List => subscriptions::list(subs, req, None),
        SubRoute::ListStream(s) => subscriptions::list(subs, req, Some(&s)),
        SubRoute::Create(s, g) => subscriptions::create(subs, req, &s, &g).await,
        SubRoute::Update(s, g) => subscriptions::update(subs, req, &s, &g).await,
        SubRoute::Delete(s, g) => subscriptions::delete(subs, req, &s, &g).await,
        SubRoute::Info(s, g) => subscriptions::info(subs, req, &s, &g).await,
        SubRoute::Read(s, g, count) => subscriptions::read(subs, req, &s, &g, count.as_deref()).await,
        SubRoute::Ack(s, g, id) => subscriptions::ack(subs, req, &s, &g, id.as_deref()),
        SubRoute::Nack(s, g, id) => subscriptions::nack(subs, req, &s, &g, id.as_deref()),
        SubRoute::ReplayParked(s, g) => subscriptions::replay_parked(subs, &s, &g).await,
    }
}
