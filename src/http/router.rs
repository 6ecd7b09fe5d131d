//! Routing: a path's decoded segments to the routes that match it, with each route's method,
//! authorization level and media types: the inputs of v5's pipeline steps after authentication
//! (no route 404, `OPTIONS`, method 405, body type 415, reply type 406, route level 401).
//!
//! Literal segments beat placeholders (`/streams/$all/…` before `/streams/{stream}/…`,
//! `/streams/{s}/metadata` before `/streams/{s}/{event}`); the first route of the list whose
//! method matches is taken.

use std::borrow::Cow;

use http::Method;

use super::media::{self, Media};

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

/// A matched route with its path parameters (raw text; handlers validate numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
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
    /// `POST /admin/scavenge`.
    ScavengeStart,
    /// `GET /admin/scavenge/current`.
    ScavengeCurrent,
    /// `DELETE /admin/scavenge/{id}` (or `current`).
    ScavengeStop(String),
    /// `POST /admin/mergeindexes`.
    MergeIndexes,
    /// `GET /users`.
    Users,
    /// `POST /users`.
    UserCreate,
    /// `GET /users/$current`.
    UserCurrent,
    /// `GET /users/{login}`.
    UserGet(String),
    /// `PUT /users/{login}`.
    UserUpdate(String),
    /// `DELETE /users/{login}`.
    UserDelete(String),
    /// `POST|PUT /users/{login}/command/enable`.
    UserEnable(String),
    /// `POST|PUT /users/{login}/command/disable`.
    UserDisable(String),
    /// `POST /users/{login}/command/reset-password`.
    UserResetPassword(String),
    /// `POST /users/{login}/command/change-password`.
    UserChangePassword(String),
    /// A trailing-slash URL: 307 to the path without it.
    Redirect(String),
    /// A page of a stream; `from` `None` or `head` means the head URL.
    Feed {
        /// Stream (already `$$s` for metadata routes).
        stream: String,
        /// Start.
        from: Option<String>,
        /// Direction.
        dir: Dir,
        /// Page size (`None`: 20).
        count: Option<String>,
    },
    /// One event.
    Event {
        /// Stream (already `$$s` for metadata routes).
        stream: String,
        /// Number or `head`.
        event: String,
    },
    /// `GET /streams/{s}/metadata`.
    MetadataGet(String),
    /// `POST /streams/{s}/metadata`.
    MetadataPost(String),
    /// `POST /streams/{s}`.
    Append(String),
    /// `POST /streams/{s}/incoming/{guid}`.
    Incoming(String, String),
    /// `DELETE /streams/{s}`.
    Delete(String),
    /// A page of `$all`.
    All {
        /// Position token or `head` (`None`: head).
        from: Option<String>,
        /// Direction.
        dir: Dir,
        /// Page size.
        count: Option<String>,
    },
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

impl Route {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        let s = |level, accepts, produces| Spec { level, accepts, produces, forward: false };
        match self {
            Route::Ping | Route::Info | Route::Gossip | Route::Stats(_) => {
                s(Level::None, &[], media::DEFAULT)
            }
            Route::InfoOptions => s(Level::Ops, &[], media::DEFAULT),
            Route::Shutdown
            | Route::ScavengeStart
            | Route::ScavengeCurrent
            | Route::ScavengeStop(_)
            | Route::MergeIndexes => s(Level::Ops, &[], &[]),
            Route::Users
            | Route::UserGet(_)
            | Route::UserDelete(_)
            | Route::UserEnable(_)
            | Route::UserDisable(_) => s(Level::Admin, &[], media::USERS),
            Route::UserCreate | Route::UserUpdate(_) | Route::UserResetPassword(_) => {
                s(Level::Admin, media::USERS, media::USERS)
            }
            Route::UserCurrent => s(Level::User, &[], media::USERS),
            Route::UserChangePassword(_) => s(Level::User, media::USERS, media::USERS),
            Route::Redirect(_) | Route::Delete(_) => s(Level::None, &[], &[]),
            Route::Feed { dir, .. } | Route::All { dir, .. } => Spec {
                level: Level::None,
                accepts: &[],
                produces: media::FEED,
                forward: *dir == Dir::Forward,
            },
            Route::Event { .. } | Route::MetadataGet(_) => s(Level::None, &[], media::EVENT),
            Route::MetadataPost(_) | Route::Append(_) => s(Level::None, media::WRITE, &[]),
            Route::Incoming(..) => s(Level::None, media::INCOMING, &[]),
        }
    }

    /// The stream or login named in the path, for validation.
    pub fn name(&self) -> Option<&str> {
        match self {
            Route::UserGet(l)
            | Route::UserUpdate(l)
            | Route::UserDelete(l)
            | Route::UserEnable(l)
            | Route::UserDisable(l)
            | Route::UserResetPassword(l)
            | Route::UserChangePassword(l)
            | Route::MetadataGet(l)
            | Route::MetadataPost(l)
            | Route::Append(l)
            | Route::Incoming(l, _)
            | Route::Delete(l)
            | Route::Feed { stream: l, .. }
            | Route::Event { stream: l, .. } => Some(l),
            Route::Ping
            | Route::Info
            | Route::InfoOptions
            | Route::Gossip
            | Route::Stats(_)
            | Route::Shutdown
            | Route::ScavengeStart
            | Route::ScavengeCurrent
            | Route::ScavengeStop(_)
            | Route::MergeIndexes
            | Route::Users
            | Route::UserCreate
            | Route::UserCurrent
            | Route::Redirect(_)
            | Route::All { .. } => None,
        }
    }
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

fn dir_of(word: &str) -> Option<Dir> {
    match word {
        "backward" => Some(Dir::Backward),
        "forward" => Some(Dir::Forward),
        _ => None,
    }
}

fn stream_routes(s: &str, rest: &[&str], out: &mut Vec<(Method, Route)>) {
    let o = |x: &str| Some(x.to_owned());
    let meta = || format!("$${s}");
    if s == "$all" {
        match rest {
            [] => out.push((Method::GET, Route::All { from: None, dir: Dir::Backward, count: None })),
            [from, count] => {
                out.push((Method::GET, Route::All { from: o(from), dir: Dir::Backward, count: o(count) }))
            }
            [from, d, count] if dir_of(d).is_some() => out.push((
                Method::GET,
                Route::All { from: o(from), dir: dir_of(d).unwrap_or(Dir::Backward), count: o(count) },
            )),
            _ => {}
        }
    }
    match rest {
        [] => {
            out.push((
                Method::GET,
                Route::Feed { stream: s.into(), from: None, dir: Dir::Backward, count: None },
            ));
            out.push((Method::POST, Route::Append(s.into())));
            out.push((Method::DELETE, Route::Delete(s.into())));
        }
        [""] => {
            for m in [Method::GET, Method::POST, Method::DELETE] {
                out.push((m, Route::Redirect(format!("/streams/{}", super::text::escape(s)))));
            }
        }
        ["metadata"] => {
            out.push((Method::GET, Route::MetadataGet(s.into())));
            out.push((Method::POST, Route::MetadataPost(s.into())));
        }
        ["metadata", ""] => {
            for m in [Method::GET, Method::POST] {
                out.push((m, Route::Redirect(format!("/streams/{}/metadata", super::text::escape(s)))));
            }
        }
        ["metadata", e] => out.push((Method::GET, Route::Event { stream: meta(), event: (*e).into() })),
        ["metadata", e, c] => out
            .push((Method::GET, Route::Feed { stream: meta(), from: o(e), dir: Dir::Backward, count: o(c) })),
        ["metadata", e, d, c] if dir_of(d).is_some() => out.push((
            Method::GET,
            Route::Feed { stream: meta(), from: o(e), dir: dir_of(d).unwrap_or(Dir::Backward), count: o(c) },
        )),
        [e] => out.push((Method::GET, Route::Event { stream: s.into(), event: (*e).into() })),
        ["incoming", id] => out.push((Method::POST, Route::Incoming(s.into(), (*id).into()))),
        [e, c] => out.push((
            Method::GET,
            Route::Feed { stream: s.into(), from: o(e), dir: Dir::Backward, count: o(c) },
        )),
        [e, d, c] if dir_of(d).is_some() => out.push((
            Method::GET,
            Route::Feed {
                stream: s.into(),
                from: o(e),
                dir: dir_of(d).unwrap_or(Dir::Backward),
                count: o(c),
            },
        )),
        _ => {}
    }
}

/// Every route matching `segs`, most specific first.
pub fn routes(segs: &[String]) -> Vec<(Method, Route)> {
    let v: Vec<&str> = segs.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    let l = |x: &&str| (*x).to_owned();
    match v.as_slice() {
        ["ping"] => out.push((Method::GET, Route::Ping)),
        ["info"] => out.push((Method::GET, Route::Info)),
        ["info", "options"] => out.push((Method::GET, Route::InfoOptions)),
        ["gossip"] => out.push((Method::GET, Route::Gossip)),
        ["stats", rest @ ..] => {
            out.push((Method::GET, Route::Stats(rest.iter().filter(|s| !s.is_empty()).map(l).collect())))
        }
        ["admin", "shutdown"] => out.push((Method::POST, Route::Shutdown)),
        ["admin", "scavenge"] => out.push((Method::POST, Route::ScavengeStart)),
        ["admin", "scavenge", id] => {
            if *id == "current" {
                out.push((Method::GET, Route::ScavengeCurrent));
            }
            out.push((Method::DELETE, Route::ScavengeStop(l(id))));
        }
        ["admin", "mergeindexes"] => out.push((Method::POST, Route::MergeIndexes)),
        ["users"] | ["users", ""] => {
            out.push((Method::GET, Route::Users));
            out.push((Method::POST, Route::UserCreate));
        }
        ["users", login] => {
            if *login == "$current" {
                out.push((Method::GET, Route::UserCurrent));
            }
            out.push((Method::GET, Route::UserGet(l(login))));
            out.push((Method::PUT, Route::UserUpdate(l(login))));
            out.push((Method::DELETE, Route::UserDelete(l(login))));
        }
        ["users", login, "command", cmd] => match *cmd {
            "enable" => {
                out.push((Method::POST, Route::UserEnable(l(login))));
                out.push((Method::PUT, Route::UserEnable(l(login))));
            }
            "disable" => {
                out.push((Method::POST, Route::UserDisable(l(login))));
                out.push((Method::PUT, Route::UserDisable(l(login))));
            }
            "reset-password" => out.push((Method::POST, Route::UserResetPassword(l(login)))),
            "change-password" => out.push((Method::POST, Route::UserChangePassword(l(login)))),
            _ => {}
        },
        ["streams", s, rest @ ..] if !s.is_empty() => stream_routes(s, rest, &mut out),
        _ => {}
    }
    out
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
            Some(Route::All { from: None, dir: Dir::Backward, count: None })
        );
        assert_eq!(first("/streams/$all", Method::POST), Some(Route::Append("$all".into())));
        assert_eq!(first("/streams/s/metadata", Method::GET), Some(Route::MetadataGet("s".into())));
        assert_eq!(
            first("/streams/s/3/forward/20", Method::GET),
            Some(Route::Feed {
                stream: "s".into(),
                from: Some("3".into()),
                dir: Dir::Forward,
                count: Some("20".into())
            })
        );
        assert_eq!(
            first("/streams/s/metadata/head", Method::GET),
            Some(Route::Event { stream: "$$s".into(), event: "head".into() })
        );
        assert_eq!(first("/streams/s/", Method::GET), Some(Route::Redirect("/streams/s".into())));
        assert_eq!(first("/users/$current", Method::GET), Some(Route::UserCurrent));
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
                .map(|m| (m, Route::Ping))
                .into();
        assert_eq!(allow_header(&many), "GET, PUT, POST, DELETE, PATCH, OPTIONS");
        assert!(segments("/streams/%FF").is_none());
        assert!(!name_ok("..") && !name_ok("a/b") && !name_ok("a\u{1}") && name_ok("$all"));
    }
}
