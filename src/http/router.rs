//! Routing: a path's decoded segments to the routes that match it, with each route's method,
//! authorization level and media types: the inputs of v5's pipeline steps after authentication
//! (no route 404, `OPTIONS`, method 405, body type 415, reply type 406, route level 401).
//!
//! The routes themselves belong to the API's areas ([`super::area`]); this module asks each for
//! the routes of a path and holds what is common to all: levels, specs, path segments, name
//! checks and `Allow` lists. The first route of the list whose method matches is taken.

use std::borrow::Cow;

use http::Method;

use super::area::admin::{self, AdminRoute};
use super::area::node::{self, NodeRoute};
use super::area::streams::{self, StreamRoute};
use super::area::users::{self, UserRoute};
use super::media::Media;

/// Who may call a route (before any stream ACL).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Anyone.
    None,
    /// Any authenticated user.
    User,
    /// `$ops` or `$admins`.
    Ops,
    /// `$admins`.
    Admin,
}

/// Paging direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Newest first from the start.
    Backward,
    /// Oldest first from the start.
    Forward,
}

/// A matched route: the area that answers it, with the area's route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Ping, info, gossip, stats.
    Node(NodeRoute),
    /// Scavenges, index merges, shutdown.
    Admin(AdminRoute),
    /// Users.
    Users(UserRoute),
    /// Streams and `$all`.
    Streams(StreamRoute),
}

/// What a route requires and produces.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Authorization level.
    pub level: Level,
    /// Body types accepted (empty: the route reads no body and checks no `Content-Type`).
    pub accepts: &'static [Media],
    /// Reply types, default first (empty: any `Accept` is fine).
    pub produces: &'static [Media],
    /// Whether the route may long-poll (its timeout is extended).
    pub forward: bool,
}

impl Spec {
    /// A route that does not long-poll.
    pub fn new(level: Level, accepts: &'static [Media], produces: &'static [Media]) -> Spec {
        Spec { level, accepts, produces, forward: false }
    }
}

impl Route {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        match self {
            Route::Node(r) => r.spec(),
            Route::Admin(r) => r.spec(),
            Route::Users(r) => r.spec(),
            Route::Streams(r) => r.spec(),
        }
    }

    /// The stream or login the route names (checked by [`name_ok`]), if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            Route::Node(_) | Route::Admin(_) => None,
            Route::Users(r) => r.name(),
            Route::Streams(r) => r.name(),
        }
    }

    /// The largest body the route reads, `None` for a route that takes no body
    /// (`max_append`: the node's `MaxAppendSize`).
    pub fn body_limit(&self, max_append: usize) -> Option<usize> {
        match self {
            Route::Node(NodeRoute::GossipPost) => Some(super::node_info::GOSSIP_BODY_MAX),
            Route::Node(r) => r.body_limit(),
            Route::Admin(r) => r.body_limit(),
            Route::Users(r) => r.body_limit(),
            Route::Streams(r) => r.body_limit(max_append),
        }
    }
}

/// The routes of a path's decoded segments, from the area its first segment names.
pub fn routes(segs: &[String]) -> Vec<(Method, Route)> {
    let v: Vec<&str> = segs.iter().map(String::as_str).collect();
    let mut out: Vec<(Method, Route)> = Vec::with_capacity(4);
    match v.first().copied() {
        Some("streams") => streams::routes(&v, &mut out),
        Some("users") => users::routes(&v, &mut out),
        Some("admin") => admin::routes(&v, &mut out),
        _ => node::routes(&v, &mut out),
    }
    out
}

/// Whether a decoded stream name or login is acceptable in a path: not empty, not `.`/`..`, no
/// slashes or control characters (nothing that could be read as a path elsewhere).
pub fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Splits and percent-decodes a path; `None` when a segment is not UTF-8 once decoded.
pub fn segments(path: &str) -> Option<Vec<String>> {
    path.strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|s| if s.contains('%') { super::text::unescape(s, false) } else { Some(s.to_owned()) })
        .collect()
}

/// `Access-Control-Allow-Methods` for a URL: its routes' methods without repeats, then `OPTIONS`
/// (empty when nothing is routed). Every request needs it, so the method lists the routes
/// produce come as static strings; any other list is joined.
pub fn allow_header(routes: &[(Method, Route)]) -> Cow<'static, str> {
    let mut few = [""; 4];
    let mut n = 0;
    for (m, _) in routes {
        let m = m.as_str();
        if few[..n].contains(&m) {
            continue;
        }
        if n == few.len() {
            return Cow::Owned(joined_methods(routes));
        }
        few[n] = m;
        n += 1;
    }
    Cow::Borrowed(match &few[..n] {
        [] => "",
        ["GET"] => "GET, OPTIONS",
        ["POST"] => "POST, OPTIONS",
        ["DELETE"] => "DELETE, OPTIONS",
        ["GET", "POST"] => "GET, POST, OPTIONS",
        ["POST", "PUT"] => "POST, PUT, OPTIONS",
        ["GET", "DELETE"] => "GET, DELETE, OPTIONS",
        ["GET", "PUT", "DELETE"] => "GET, PUT, DELETE, OPTIONS",
        ["GET", "POST", "DELETE"] => "GET, POST, DELETE, OPTIONS",
        _ => return Cow::Owned(joined_methods(routes)),
    })
}

/// The routes' methods without repeats, then `OPTIONS`, comma-separated.
fn joined_methods(routes: &[(Method, Route)]) -> String {
    let mut methods: Vec<&str> = Vec::new();
    for (m, _) in routes {
        if !methods.contains(&m.as_str()) {
            methods.push(m.as_str());
        }
    }
    methods.push("OPTIONS");
    methods.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(path: &str, m: Method) -> Option<Route> {
        routes(&segments(path).unwrap()).into_iter().find(|(x, _)| *x == m).map(|(_, r)| r)
    }

    #[test]
    fn matches_literals_first() {
        assert_eq!(
            first("/streams/%24all", Method::GET),
            Some(Route::Streams(StreamRoute::All { from: None, dir: Dir::Backward, count: None }))
        );
        assert_eq!(
            first("/streams/$all", Method::POST),
            Some(Route::Streams(StreamRoute::Append("$all".into())))
        );
        assert_eq!(
            first("/streams/s/metadata", Method::GET),
            Some(Route::Streams(StreamRoute::MetadataGet("s".into())))
        );
        assert_eq!(
            first("/streams/s/3/forward/20", Method::GET),
            Some(Route::Streams(StreamRoute::Feed {
                stream: "s".into(),
                from: Some("3".into()),
                dir: Dir::Forward,
                count: Some("20".into())
            }))
        );
        assert_eq!(
            first("/streams/s/metadata/head", Method::GET),
            Some(Route::Streams(StreamRoute::Event { stream: "$$s".into(), event: "head".into() }))
        );
        assert_eq!(
            first("/streams/s/", Method::GET),
            Some(Route::Streams(StreamRoute::Redirect("/streams/s".into())))
        );
        assert_eq!(first("/users/$current", Method::GET), Some(Route::Users(UserRoute::Current)));
        assert_eq!(first("/nope", Method::GET), None);
        assert_eq!(allow_header(&routes(&segments("/streams/s").unwrap())), "GET, POST, DELETE, OPTIONS");
        assert_eq!(allow_header(&[]), "");
        // The static lists agree with joining the routes' methods, for every routed URL shape.
        for path in [
            "/ping",
            "/users",
            "/users/x",
            "/users/$current",
            "/users/x/command/enable",
            "/admin/scavenge/current",
            "/admin/scavenge/x",
            "/streams/s",
            "/streams/s/",
            "/streams/s/metadata",
            "/streams/s/metadata/",
            "/streams/s/1",
            "/streams/s/incoming/x",
            "/streams/$all",
            "/admin/shutdown",
        ] {
            let r = routes(&segments(path).unwrap());
            assert!(matches!(allow_header(&r), Cow::Borrowed(_)), "{path}");
            assert_eq!(allow_header(&r), joined_methods(&r), "{path}");
        }
        let many: Vec<(Method, Route)> =
            [Method::GET, Method::PUT, Method::POST, Method::DELETE, Method::PATCH]
                .map(|m| (m, Route::Node(NodeRoute::Ping)))
                .into();
        assert_eq!(allow_header(&many), "GET, PUT, POST, DELETE, PATCH, OPTIONS");
        assert!(segments("/streams/%FF").is_none());
        assert!(!name_ok("..") && !name_ok("a/b") && !name_ok("a\u{1}") && name_ok("$all"));
    }
}
