//! The projections area: `/projections/{list or mode}` and `/projection/{name}[/…]`, the
//! projection routes (lists, a projection's statistics, state, result, query and configuration,
//! the commands enable, disable, reset and abort, and delete) and `POST /projections/read-events`.
//!
//! The router carries these routes inside the node area's variant
//! ([`NodeRoute::Projections`](super::node::NodeRoute::Projections)): they run on the leader
//! only, so a cluster's other nodes hand them to it. With `RunProjections None` they are not
//! routed at all (404), as v5 registers no projection routes then.

use std::sync::Arc;

use http::Method;

use super::super::media::{self, Media};
use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{name_ok, Level, Spec};
use super::super::{projections, Api};
use crate::projections::definition::Mode;
use crate::projections::Command;

/// Largest query, configuration or `read-events` body.
pub const PROJECTION_BODY_MAX: usize = 256 * 1024;

/// `read-events` takes and answers JSON only, as v5.
const READ_EVENTS_MEDIA: &[Media] = &[Media::Json];

/// Which projections a list shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// `any`.
    Any,
    /// `all-non-transient`.
    NonTransient,
    /// `transient`.
    Transient,
    /// `onetime`.
    OneTime,
    /// `continuous`.
    Continuous,
}

impl ListKind {
    fn of(seg: &str) -> Option<ListKind> {
        Some(match seg {
            "any" => ListKind::Any,
            "all-non-transient" => ListKind::NonTransient,
            "transient" => ListKind::Transient,
            "onetime" => ListKind::OneTime,
            "continuous" => ListKind::Continuous,
            _ => return None,
        })
    }

    /// Whether a projection of `mode` is in the list.
    pub fn shows(self, mode: Mode) -> bool {
        match self {
            ListKind::Any => true,
            ListKind::NonTransient => mode != Mode::Transient,
            ListKind::Transient => mode == Mode::Transient,
            ListKind::OneTime => mode == Mode::OneTime,
            ListKind::Continuous => mode == Mode::Continuous,
        }
    }

    /// A mode projections can be created in.
    fn creatable(self) -> bool {
        matches!(self, ListKind::Transient | ListKind::OneTime | ListKind::Continuous)
    }
}

/// A route of the projections area (names as decoded text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProjRoute {
    /// `GET /projections/{kind}`.
    List(ListKind),
    /// `POST /projections/{mode}`.
    Create(ListKind),
    /// `POST /projections/read-events`.
    ReadEvents,
    /// `GET /projection/{name}`.
    Get(String),
    /// `DELETE /projection/{name}`.
    Delete(String),
    /// `GET /projection/{name}/statistics`.
    Statistics(String),
    /// `GET /projection/{name}/state`.
    State(String),
    /// `GET /projection/{name}/result`.
    Result(String),
    /// `GET /projection/{name}/query`.
    Query(String),
    /// `PUT /projection/{name}/query`.
    QueryPut(String),
    /// `GET /projection/{name}/config`.
    Config(String),
    /// `PUT /projection/{name}/config`.
    ConfigPut(String),
    /// `POST /projection/{name}/command/{command}`.
    Command(String, Command),
}

/// The projections area's routes of a path, as `(method, route)`.
pub fn routes(segs: &[&str]) -> Vec<(Method, ProjRoute)> {
    let o = |x: &str| x.to_owned();
    match segs {
        ["projections", "read-events"] => vec![(Method::POST, ProjRoute::ReadEvents)],
        ["projections", kind] => match ListKind::of(kind) {
            Some(k) if k.creatable() => {
                vec![(Method::GET, ProjRoute::List(k)), (Method::POST, ProjRoute::Create(k))]
            }
            Some(k) => vec![(Method::GET, ProjRoute::List(k))],
            None => Vec::new(),
        },
        ["projection", n] => {
            vec![(Method::GET, ProjRoute::Get(o(n))), (Method::DELETE, ProjRoute::Delete(o(n)))]
        }
        ["projection", n, "statistics"] => vec![(Method::GET, ProjRoute::Statistics(o(n)))],
        ["projection", n, "state"] => vec![(Method::GET, ProjRoute::State(o(n)))],
        ["projection", n, "result"] => vec![(Method::GET, ProjRoute::Result(o(n)))],
        ["projection", n, "query"] => {
            vec![(Method::GET, ProjRoute::Query(o(n))), (Method::PUT, ProjRoute::QueryPut(o(n)))]
        }
        ["projection", n, "config"] => {
            vec![(Method::GET, ProjRoute::Config(o(n))), (Method::PUT, ProjRoute::ConfigPut(o(n)))]
        }
        ["projection", n, "command", c] => {
            let command = match *c {
                "enable" => Command::Enable,
                "disable" => Command::Disable,
                "reset" => Command::Reset,
                "abort" => Command::Abort,
                _ => return Vec::new(),
            };
            vec![(Method::POST, ProjRoute::Command(o(n), command))]
        }
        _ => Vec::new(),
    }
}

impl ProjRoute {
    /// The route's requirements: reads and commands for any user (commands then check who may
    /// run them); creating continuous and one-time projections, configuration changes and
    /// deletes for `$ops` or `$admins`.
    pub fn spec(&self) -> Spec {
        match self {
            ProjRoute::List(_)
            | ProjRoute::Get(_)
            | ProjRoute::Statistics(_)
            | ProjRoute::Config(_)
            | ProjRoute::Query(_) => Spec::new(Level::User, &[], media::DEFAULT),
            ProjRoute::State(_) | ProjRoute::Result(_) => Spec::new(Level::User, &[], &[]),
            ProjRoute::ReadEvents => Spec::new(Level::User, READ_EVENTS_MEDIA, READ_EVENTS_MEDIA),
            ProjRoute::Create(ListKind::Transient) | ProjRoute::QueryPut(_) | ProjRoute::Command(..) => {
                Spec::new(Level::User, &[], media::DEFAULT)
            }
            ProjRoute::Create(_) | ProjRoute::ConfigPut(_) | ProjRoute::Delete(_) => {
                Spec::new(Level::Ops, &[], media::DEFAULT)
            }
        }
    }

    /// The projection the route names, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            ProjRoute::List(_) | ProjRoute::Create(_) | ProjRoute::ReadEvents => None,
            ProjRoute::Get(n)
            | ProjRoute::Delete(n)
            | ProjRoute::Statistics(n)
            | ProjRoute::State(n)
            | ProjRoute::Result(n)
            | ProjRoute::Query(n)
            | ProjRoute::QueryPut(n)
            | ProjRoute::Config(n)
            | ProjRoute::ConfigPut(n)
            | ProjRoute::Command(n, _) => Some(n),
        }
    }

    /// The largest body the route reads.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            ProjRoute::Create(_)
            | ProjRoute::QueryPut(_)
            | ProjRoute::ConfigPut(_)
            | ProjRoute::ReadEvents => Some(PROJECTION_BODY_MAX),
            _ => None,
        }
    }
}

/// Answers a projections-area request.
pub async fn dispatch(api: &Arc<Api>, route: ProjRoute, req: &mut Req) -> Reply {
    let p = api.node.projections();
    if route.name().is_some_and(|n| !name_ok(n)) {
        return Reply::bad_request("Invalid projection name");
    }
    match route {
        ProjRoute::List(kind) => projections::list(p, req, kind),
        ProjRoute::Create(kind) => projections::create(p, req, kind).await,
        ProjRoute::ReadEvents => projections::read_events(api, req).await,
        ProjRoute::Get(n) => projections::get(p, req, &n),
        ProjRoute::Delete(n) => projections::delete(p, req, &n).await,
        ProjRoute::Statistics(n) => projections::statistics(p, req, &n),
        ProjRoute::State(n) => projections::state(p, req, &n, false).await,
        ProjRoute::Result(n) => projections::state(p, req, &n, true).await,
        ProjRoute::Query(n) => projections::query(p, req, &n),
        ProjRoute::QueryPut(n) => projections::query_put(p, req, &n).await,
        ProjRoute::Config(n) => projections::config(p, req, &n),
        ProjRoute::ConfigPut(n) => projections::config_put(p, req, &n).await,
        ProjRoute::Command(n, c) => projections::command(p, req, &n, c).await,
    }
}
