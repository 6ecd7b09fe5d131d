//! The admin area: scavenges (`/admin/scavenge[/{id}]`), index merges (`/admin/mergeindexes`)
//! shutdown (`/admin/shutdown`), a cluster node's leadership (`/admin/node/resign`,
//! `/admin/node/priority/{n}`) and the reload of certificates (`/admin/reloadconfig`).

use std::sync::Arc;

use http::Method;

use super::super::media::Media;
use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Level, Route, Spec};
use super::super::{admin, node_info, Api};

/// A route of the admin area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdminRoute {
    /// `POST /admin/scavenge`.
    ScavengeStart,
    /// `GET /admin/scavenge/current`.
    ScavengeCurrent,
    /// `DELETE /admin/scavenge/{id}` (or `current`).
    ScavengeStop(String),
    /// `POST /admin/scavenge/shared`: a member's scavenge asks the leader to write one of its
    /// shared records (history, a new point). Annal's own; v5 members use their internal protocol.
    ScavengeShared,
    /// `POST /admin/mergeindexes`.
    MergeIndexes,
    /// `POST /admin/shutdown`.
    Shutdown,
    /// `POST /admin/node/resign`.
    Resign,
    /// `POST /admin/node/priority/{n}` (the raw segment; parsed by the handler).
    Priority(String),
    /// `POST /admin/reloadconfig`.
    ReloadConfig,
    /// `GET /admin/loglevel`.
    LogLevelGet,
    /// `POST /admin/loglevel?level=…`.
    LogLevelSet,
}

/// Adds the admin area's routes of a path to `out`.
pub fn routes(segs: &[&str], out: &mut Vec<(Method, Route)>) {
    let mut add = |m, r| out.push((m, Route::Admin(r)));
    match segs {
        ["admin", "scavenge"] => add(Method::POST, AdminRoute::ScavengeStart),
        ["admin", "scavenge", id] => {
            if *id == "current" {
                add(Method::GET, AdminRoute::ScavengeCurrent);
            }
            if *id == "shared" {
                add(Method::POST, AdminRoute::ScavengeShared);
            }
            add(Method::DELETE, AdminRoute::ScavengeStop((*id).to_owned()));
        }
        ["admin", "mergeindexes"] => add(Method::POST, AdminRoute::MergeIndexes),
        ["admin", "shutdown"] => add(Method::POST, AdminRoute::Shutdown),
        ["admin", "node", "resign"] => add(Method::POST, AdminRoute::Resign),
        ["admin", "node", "priority", n] => add(Method::POST, AdminRoute::Priority((*n).to_owned())),
        ["admin", "reloadconfig"] => add(Method::POST, AdminRoute::ReloadConfig),
        ["admin", "loglevel"] => {
            add(Method::GET, AdminRoute::LogLevelGet);
            add(Method::POST, AdminRoute::LogLevelSet);
        }
        _ => {}
    }
}

impl AdminRoute {
    /// The route's requirements: every admin route is for `$ops`; all but a shared write of a
    /// scavenge (JSON) take no body.
    pub fn spec(&self) -> Spec {
        match self {
            AdminRoute::ScavengeShared => Spec::new(Level::Ops, &[Media::Json], &[]),
            _ => Spec::new(Level::Ops, &[], &[]),
        }
    }

    /// The largest body the route reads, `None` for a route that takes none.
    pub fn body_limit(&self) -> Option<usize> {
        match self {
            AdminRoute::ScavengeShared => Some(admin::SHARED_WRITE_BODY_MAX),
            _ => None,
        }
    }
}

/// Answers an admin-area request.
pub async fn dispatch(api: &Arc<Api>, route: AdminRoute, req: &mut Req) -> Reply {
    match route {
        AdminRoute::ScavengeStart => admin::start(api, req).await,
        AdminRoute::ScavengeCurrent => admin::current(api),
        AdminRoute::ScavengeStop(id) => admin::stop(api, &id).await,
        AdminRoute::ScavengeShared => admin::shared_write(api, req).await,
        AdminRoute::MergeIndexes => admin::merge_indexes(api),
        AdminRoute::Shutdown => node_info::shutdown(api),
        AdminRoute::Resign => node_info::resign(api),
        AdminRoute::Priority(n) => node_info::set_priority(api, &n),
        AdminRoute::ReloadConfig => admin::reload_config(api).await,
        AdminRoute::LogLevelGet => admin::log_level(api),
        AdminRoute::LogLevelSet => admin::set_log_level(api, req),
    }
}
