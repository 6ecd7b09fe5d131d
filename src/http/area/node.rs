//! The node area: `/ping`, `/info`, `/info/options`, `/gossip`, `/stats[/…]` and
//! `/admin/shutdown`.

use std::sync::Arc;

use http::Method;

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Level, Spec};
use super::super::{media, node_info, stats, Api};

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
    /// `GET /stats[/path…]`.
    Stats(Vec<String>),
    /// `POST /admin/shutdown`.
    Shutdown,
}

/// The node area's routes of a path.
pub fn routes(segs: &[&str]) -> Vec<(Method, NodeRoute)> {
    match segs {
        ["ping"] => vec![(Method::GET, NodeRoute::Ping)],
        ["info"] => vec![(Method::GET, NodeRoute::Info)],
        ["info", "options"] => vec![(Method::GET, NodeRoute::InfoOptions)],
        ["gossip"] => vec![(Method::GET, NodeRoute::Gossip)],
        ["stats", rest @ ..] => vec![(
            Method::GET,
            NodeRoute::Stats(rest.iter().filter(|s| !s.is_empty()).map(|s| (*s).to_owned()).collect()),
        )],
        ["admin", "shutdown"] => vec![(Method::POST, NodeRoute::Shutdown)],
        _ => Vec::new(),
    }
}

impl NodeRoute {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        match self {
            NodeRoute::Ping | NodeRoute::Info | NodeRoute::Gossip | NodeRoute::Stats(_) => {
                Spec::new(Level::None, &[], media::DEFAULT)
            }
            NodeRoute::InfoOptions => Spec::new(Level::Ops, &[], media::DEFAULT),
            NodeRoute::Shutdown => Spec::new(Level::Ops, &[], &[]),
        }
    }
}

/// Answers a node-area request.
pub async fn dispatch(api: &Arc<Api>, route: NodeRoute, req: &mut Req) -> Reply {
    match route {
        NodeRoute::Ping => node_info::ping(req),
        NodeRoute::Info => node_info::info(api, req),
        NodeRoute::InfoOptions => node_info::options(api, req),
        NodeRoute::Gossip => node_info::gossip(api, req).await,
        NodeRoute::Stats(path) => stats::stats(api, req, &path).await,
        NodeRoute::Shutdown => node_info::shutdown(api),
    }
}
