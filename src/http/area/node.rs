//! The node area: `/ping`, `/info`, `/info/options`, `/gossip` (`GET`, and `POST` from members),
//! `/stats[/…]`, `/metrics` and the health routes `/health/live` and `/health/ready` (`GET` and `HEAD`); it also carries the subscriptions area's routes
//! ([`NodeRoute::Subscriptions`]) and the projections area's ([`NodeRoute::Projections`]), which
//! run on the leader only.

use std::sync::Arc;

use http::Method;

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Level, Route, Spec};
use super::super::{media, metrics, node_info, stats, web, Api};
use super::projections::{self, ProjRoute};
use super::subscriptions::{self, SubRoute};

/// A route of the node area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRoute {
    /// `GET /ping`.
    Ping,
    /// `GET /info`.
    Info,
    /// `GET /info/options`.
    InfoOptions,
    /// `GET /gossip`.
    Gossip,
    /// `POST /gossip`: a member's view, answered with this node's.
    GossipPost,
    /// `GET /stats[/path…]`.
    Stats(Vec<String>),
    /// `GET /metrics`.
    Metrics,
    /// `GET /sys/subsystems`: the subsystems that run (`["Projections"]` when they do).
    Subsystems,
    /// `GET|HEAD /health/live`.
    HealthLive,
    /// `GET|HEAD /health/ready`.
    HealthReady,
    /// A persistent subscription route.
    Subscriptions(SubRoute),
    /// A projection route.
    Projections(ProjRoute),
    /// The Admin UI: its files and the redirects to its page.
    Web(web::WebRoute),
}

/// Adds the node area's routes of a path to `out`.
pub fn routes(segs: &[&str], out: &mut Vec<(Method, Route)>) {
    if let Some(w) = web::route(segs) {
        out.push((Method::HEAD, Route::Node(NodeRoute::Web(w.clone()))));
        out.push((Method::GET, Route::Node(NodeRoute::Web(w))));
        return;
    }
    if segs == ["gossip"] {
        out.push((Method::POST, Route::Node(NodeRoute::GossipPost)));
    }
    if segs.first() == Some(&"subscriptions") {
        for (m, r) in subscriptions::routes(segs) {
            out.push((m, Route::Node(NodeRoute::Subscriptions(r))));
        }
        return;
    }
    if matches!(segs.first(), Some(&"projections" | &"projection")) {
        for (m, r) in projections::routes(segs) {
            out.push((m, Route::Node(NodeRoute::Projections(r))));
        }
        return;
    }
    let health = match segs {
        ["health", "live"] => Some(NodeRoute::HealthLive),
        ["health", "ready"] => Some(NodeRoute::HealthReady),
        _ => None,
    };
    if let Some(h) = health {
        // Probes and load balancers ask with HEAD as often as with GET.
        out.push((Method::HEAD, Route::Node(h.clone())));
        out.push((Method::GET, Route::Node(h)));
        return;
    }
    let route = match segs {
        ["ping"] => NodeRoute::Ping,
        ["info"] => NodeRoute::Info,
        ["info", "options"] => NodeRoute::InfoOptions,
        ["gossip"] => NodeRoute::Gossip,
        ["metrics"] => NodeRoute::Metrics,
        ["sys", "subsystems"] => NodeRoute::Subsystems,
        ["stats", rest @ ..] => {
            NodeRoute::Stats(rest.iter().filter(|s| !s.is_empty()).map(|s| (*s).to_owned()).collect())
        }
        _ => return,
    };
    out.push((Method::GET, Route::Node(route)));
}

impl NodeRoute {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        match self {
            NodeRoute::Ping | NodeRoute::Info | NodeRoute::Gossip | NodeRoute::Stats(_) => {
                Spec::new(Level::None, &[], media::DEFAULT)
            }
            NodeRoute::InfoOptions | NodeRoute::Subsystems => Spec::new(Level::Ops, &[], media::DEFAULT),
            NodeRoute::HealthLive | NodeRoute::HealthReady | NodeRoute::Metrics | NodeRoute::Web(_) => {
                Spec::new(Level::None, &[], &[])
            }
            NodeRoute::GossipPost => Spec::new(Level::None, &[media::Media::Json], media::DEFAULT),
            NodeRoute::Subscriptions(r) => r.spec(),
            NodeRoute::Projections(r) => r.spec(),
        }
    }

    /// The largest body the route reads.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            NodeRoute::Subscriptions(r) => r.body_limit(),
            NodeRoute::Projections(r) => r.body_limit(),
            _ => None,
        }
    }
}

/// Answers a node-area request.
pub async fn dispatch(api: &Arc<Api>, route: NodeRoute, req: &mut Req) -> Reply {
    match route {
        NodeRoute::Ping => node_info::ping(req),
        NodeRoute::Info => node_info::info(api, req),
        NodeRoute::InfoOptions => node_info::options(api, req),
        NodeRoute::Subsystems => node_info::subsystems(api, req),
        NodeRoute::Gossip => node_info::gossip(api, req).await,
        NodeRoute::GossipPost => node_info::gossip_post(api, req).await,
        NodeRoute::Stats(path) => stats::stats(api, req, &path).await,
        NodeRoute::Metrics => metrics::metrics(api, req).await,
        NodeRoute::HealthLive => node_info::live(api, req),
        NodeRoute::HealthReady => node_info::ready(api),
        NodeRoute::Subscriptions(r) => subscriptions::dispatch(api, r, req).await,
        NodeRoute::Projections(r) => projections::dispatch(api, r, req).await,
        NodeRoute::Web(r) => web::serve(r, req),
    }
}
