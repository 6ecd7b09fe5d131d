//! The admin area: scavenges (`/admin/scavenge[/{id}]`) and index merges
//! (`/admin/mergeindexes`).

use std::sync::Arc;

use http::Method;

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Level, Spec};
use super::super::{admin, Api};

/// A route of the admin area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminRoute {
    /// `POST /admin/scavenge`.
    ScavengeStart,
    /// `GET /admin/scavenge/current`.
    ScavengeCurrent,
    /// `DELETE /admin/scavenge/{id}` (or `current`).
    ScavengeStop(String),
    /// `POST /admin/mergeindexes`.
    MergeIndexes,
}

/// The admin area's routes of a path.
pub fn routes(segs: &[&str]) -> Vec<(Method, AdminRoute)> {
    match segs {
        ["admin", "scavenge"] => vec![(Method::POST, AdminRoute::ScavengeStart)],
        ["admin", "scavenge", id] => {
            let mut out = Vec::new();
            if *id == "current" {
                out.push((Method::GET, AdminRoute::ScavengeCurrent));
            }
            out.push((Method::DELETE, AdminRoute::ScavengeStop((*id).to_owned())));
            out
        }
        ["admin", "mergeindexes"] => vec![(Method::POST, AdminRoute::MergeIndexes)],
        _ => Vec::new(),
    }
}

impl AdminRoute {
    /// The route's requirements: every admin route is for `$ops` and takes and gives no body.
    pub fn spec(&self) -> Spec {
        Spec::new(Level::Ops, &[], &[])
    }
}

/// Answers an admin-area request.
pub async fn dispatch(api: &Arc<Api>, route: AdminRoute, req: &mut Req) -> Reply {
    match route {
        AdminRoute::ScavengeStart => admin::start(api, req).await,
        AdminRoute::ScavengeCurrent => admin::current(api),
        AdminRoute::ScavengeStop(id) => admin::stop(api, &id).await,
        AdminRoute::MergeIndexes => admin::merge_indexes(api),
    }
}
