//! The streams area: `/streams/{stream}` pages, events, metadata, appends (also through
//! `incoming/{guid}`) and deletes, `/streams/$all`, and the redirects of trailing-slash URLs.
//!
//! Literal segments beat placeholders (`/streams/$all/…` before `/streams/{stream}/…`,
//! `/streams/{s}/metadata` before `/streams/{s}/{event}`).

use std::sync::Arc;

use http::{Method, StatusCode};

use super::super::reply::Reply;
use super::super::request::Req;
use super::super::router::{Dir, Level, Route, Spec};
use super::super::{media, metadata, streams, text, writes, Api};
use super::Adder;

/// A route of the streams area, with its path parameters (raw text; handlers validate numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamRoute {
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

fn dir_of(word: &str) -> Option<Dir> {
    match word {
        "backward" => Some(Dir::Backward),
        "forward" => Some(Dir::Forward),
        _ => None,
    }
}

/// Adds the streams area's routes of a path to `out`.
pub fn routes(segs: &[&str], out: &mut Vec<(Method, Route)>) {
    let ["streams", s, rest @ ..] = segs else { return };
    if s.is_empty() {
        return;
    }
    let mut out = Adder::new(out, Route::Streams);
    let o = |x: &str| Some(x.to_owned());
    let meta = || format!("$${s}");
    if *s == "$all" {
        match rest {
            [] => out.push((Method::GET, StreamRoute::All { from: None, dir: Dir::Backward, count: None })),
            [from, count] => out
                .push((Method::GET, StreamRoute::All { from: o(from), dir: Dir::Backward, count: o(count) })),
            [from, d, count] if dir_of(d).is_some() => out.push((
                Method::GET,
                StreamRoute::All { from: o(from), dir: dir_of(d).unwrap_or(Dir::Backward), count: o(count) },
            )),
            _ => {}
        }
    }
    let s = *s;
    match rest {
        [] => {
            out.push((
                Method::GET,
                StreamRoute::Feed { stream: s.into(), from: None, dir: Dir::Backward, count: None },
            ));
            out.push((Method::POST, StreamRoute::Append(s.into())));
            out.push((Method::DELETE, StreamRoute::Delete(s.into())));
        }
        [""] => {
            for m in [Method::GET, Method::POST, Method::DELETE] {
                out.push((m, StreamRoute::Redirect(format!("/streams/{}", text::escape(s)))));
            }
        }
        ["metadata"] => {
            out.push((Method::GET, StreamRoute::MetadataGet(s.into())));
            out.push((Method::POST, StreamRoute::MetadataPost(s.into())));
        }
        ["metadata", ""] => {
            for m in [Method::GET, Method::POST] {
                out.push((m, StreamRoute::Redirect(format!("/streams/{}/metadata", text::escape(s)))));
            }
        }
        ["metadata", e] => out.push((Method::GET, StreamRoute::Event { stream: meta(), event: (*e).into() })),
        ["metadata", e, c] => out.push((
            Method::GET,
            StreamRoute::Feed { stream: meta(), from: o(e), dir: Dir::Backward, count: o(c) },
        )),
        ["metadata", e, d, c] if dir_of(d).is_some() => out.push((
            Method::GET,
            StreamRoute::Feed {
                stream: meta(),
                from: o(e),
                dir: dir_of(d).unwrap_or(Dir::Backward),
                count: o(c),
            },
        )),
        [e] => out.push((Method::GET, StreamRoute::Event { stream: s.into(), event: (*e).into() })),
        ["incoming", id] => out.push((Method::POST, StreamRoute::Incoming(s.into(), (*id).into()))),
        [e, c] => out.push((
            Method::GET,
            StreamRoute::Feed { stream: s.into(), from: o(e), dir: Dir::Backward, count: o(c) },
        )),
        [e, d, c] if dir_of(d).is_some() => out.push((
            Method::GET,
            StreamRoute::Feed {
                stream: s.into(),
                from: o(e),
                dir: dir_of(d).unwrap_or(Dir::Backward),
                count: o(c),
            },
        )),
        _ => {}
    }
}

impl StreamRoute {
    /// The route's requirements.
    pub fn spec(&self) -> Spec {
        match self {
            StreamRoute::Redirect(_) | StreamRoute::Delete(_) => Spec::new(Level::None, &[], &[]),
            StreamRoute::Feed { dir, .. } | StreamRoute::All { dir, .. } => Spec {
                level: Level::None,
                accepts: &[],
                produces: media::FEED,
                forward: *dir == Dir::Forward,
            },
            StreamRoute::Event { .. } | StreamRoute::MetadataGet(_) => {
                Spec::new(Level::None, &[], media::EVENT)
            }
            StreamRoute::MetadataPost(_) | StreamRoute::Append(_) => {
                Spec::new(Level::None, media::WRITE, &[])
            }
            StreamRoute::Incoming(..) => Spec::new(Level::None, media::INCOMING, &[]),
        }
    }

    /// The stream the route names, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            StreamRoute::MetadataGet(s)
            | StreamRoute::MetadataPost(s)
            | StreamRoute::Append(s)
            | StreamRoute::Incoming(s, _)
            | StreamRoute::Delete(s)
            | StreamRoute::Feed { stream: s, .. }
            | StreamRoute::Event { stream: s, .. } => Some(s),
            StreamRoute::Redirect(_) | StreamRoute::All { .. } => None,
        }
    }

    /// The largest body the route reads (`max_append`: the node's `MaxAppendSize`).
    pub fn body_limit(&self, max_append: usize) -> Option<usize> {
        match self {
            StreamRoute::Append(_) | StreamRoute::Incoming(..) | StreamRoute::MetadataPost(_) => {
                Some(max_append)
            }
            _ => None,
        }
    }
}

/// Answers a streams-area request; reads and appends are timed for metrics.
pub async fn dispatch(api: &Arc<Api>, route: StreamRoute, req: &mut Req) -> Reply {
    use crate::metrics::{Activity, Outcome};
    let activity = match route {
        StreamRoute::Feed { .. } | StreamRoute::Event { .. } | StreamRoute::All { .. } => Activity::Read,
        StreamRoute::Append(_) | StreamRoute::Incoming(..) => Activity::Append,
        _ => return answer(api, route, req).await,
    };
    let clock = &api.node.env().clock;
    let started = clock.monotonic();
    let reply = answer(api, route, req).await;
    let ok = reply.status.is_success() || reply.status.is_redirection();
    let outcome = if ok { Outcome::Successful } else { Outcome::Failed };
    api.node.metrics().request(activity, outcome, clock.monotonic().saturating_sub(started));
    reply
}

async fn answer(api: &Arc<Api>, route: StreamRoute, req: &mut Req) -> Reply {
    match route {
        StreamRoute::Redirect(path) => {
            let q = req.raw_query.as_ref().map(|q| format!("?{q}")).unwrap_or_default();
            Reply::status(StatusCode::TEMPORARY_REDIRECT, "Temporary Redirect")
                .header("location", format!("{}{path}{q}", req.base))
                .header("cache-control", "max-age=31536000, public")
        }
        StreamRoute::Feed { stream, from, dir, count } => {
            streams::feed(api, req, stream, from, dir, count).await
        }
        StreamRoute::Event { stream, event } => streams::event(api, req, stream, event).await,
        StreamRoute::All { from, dir, count } => streams::all(api, req, from, dir, count).await,
        StreamRoute::MetadataGet(s) => metadata::get(api, req, s).await,
        StreamRoute::MetadataPost(s) => metadata::post(api, req, s).await,
        StreamRoute::Append(s) => writes::append(api, req, s, None).await,
        StreamRoute::Incoming(s, id) => writes::append(api, req, s, Some(id)).await,
        StreamRoute::Delete(s) => writes::delete(api, req, s).await,
    }
}
