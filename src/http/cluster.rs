//! What a cluster node answers that a single node does not: requests that need the leader on a
//! node that is not it, and requests that arrive while the node cannot serve.
//!
//! Rules (v5's, except that a write on a follower is redirected rather than proxied):
//! - a node that is starting, elected but not yet confirmed (`PreMaster`) or stopping, or a
//!   leader whose lease ran out (it may have been replaced without knowing it), answers reads and
//!   writes with `503 Server Is Not Ready`;
//! - a write (append, delete, metadata, users, scavenge) on a node that does not lead is answered
//!   `307 Temporary Redirect` to the same path on the leader when one is known, else `503`;
//! - a read with `ES-RequireMaster: True` on a node that does not lead is redirected the same
//!   way; other reads are served from the node's committed records (never uncommitted ones).

use http::{Method, StatusCode};

use super::area::admin::AdminRoute;
use super::area::streams::StreamRoute;
use super::reply::Reply;
use super::request::Req;
use super::router::Route;
use super::Api;
use crate::cluster::VNodeState;

/// Whether a route writes (and so needs the leader).
fn writes(route: &Route, method: &Method) -> bool {
    match route {
        Route::Node(_) => false,
        Route::Admin(r) => matches!(r, AdminRoute::ScavengeStart | AdminRoute::MergeIndexes),
        Route::Users(_) => *method != Method::GET,
        Route::Streams(r) => matches!(
            r,
            StreamRoute::Append(_)
                | StreamRoute::Incoming(..)
                | StreamRoute::Delete(_)
                | StreamRoute::MetadataPost(_)
        ),
    }
}

/// The answer a cluster node gives instead of handling the request, if any.
pub fn gate(api: &Api, route: &Route, req: &Req) -> Option<Reply> {
    let cluster = api.node.cluster()?;
    if matches!(route, Route::Node(_) | Route::Admin(AdminRoute::Shutdown)) {
        return None;
    }
    let st = cluster.status();
    let not_ready = || Some(Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready"));
    match st.state {
        // A leader whose lease ran out may have been replaced without knowing it yet: it
        // serves nothing until it hears from a quorum again (or steps down).
        VNodeState::Master if st.lease_until.is_some_and(|t| t > api.node.env().clock.monotonic()) => {
            return None
        }
        VNodeState::Master => return not_ready(),
        VNodeState::Initializing | VNodeState::PreMaster | VNodeState::ShuttingDown => return not_ready(),
        _ => {}
    }
    let needs_leader = writes(route, &req.method) || req.require_master().unwrap_or(false);
    if !needs_leader {
        return None;
    }
    let Some(leader) = st.leader_http else { return not_ready() };
    let mut location = format!("http://{leader}{}", req.path);
    if let Some(q) = &req.raw_query {
        location.push('?');
        location.push_str(q);
    }
    Some(Reply::status(StatusCode::TEMPORARY_REDIRECT, "Temporary Redirect").header("location", location))
}
