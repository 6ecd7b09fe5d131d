//! Reading streams and `$all`: paged Atom feeds, single events, the stream description document,
//! ETag/304, cache policies and long polling, with v5's routes, statuses and paging.
//!
//! Each read runs as one job ([`crate::env::Env::read_job`]: on the request's task when the page
//! cache holds what it reads, else on the blocking pool): ACL check, read, the checks of link
//! targets. Feeds page by event number (a backward page from `F` of `C` covers `F−C+1..=F`), as v5
//! does, so the paging links of every page follow the reference's formulas exactly.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::errors;
use super::feed::{self, Embed, Feed, Link};
use super::media::{How, Media};
use super::reply::{Reply, NO_CACHE};
use super::request::Req;
use super::router::Dir;
use super::text::{escape, json_to_xml};
use super::Api;
use crate::auth::{Operation, Principal};
use crate::store::engine::{meta_target, Window};
use crate::store::{ReadError, ResolvedEvent};

/// Page size when the URL names none.
pub const PAGE_DEFAULT: usize = 20;
/// Largest page.
pub const PAGE_MAX: usize = 4096;
/// `Cache-Control` of immutable documents (`public` or `private` is appended).
const IMMUTABLE: &str = "max-age=31536000";

/// Parses a page size.
pub fn count(c: Option<&str>) -> Result<usize, Reply> {
    let Some(c) = c else { return Ok(PAGE_DEFAULT) };
    match c.parse::<i64>() {
        Ok(n) if n > PAGE_MAX as i64 => {
            Err(Reply::bad_request(format!("Read size too big, should be less than {PAGE_MAX} items")))
        }
        Ok(n) if n > 0 => Ok(n as usize),
        _ => Err(Reply::bad_request(format!("'{c}' is not valid count. Should be positive integer"))),
    }
}

/// Parses an event number; `head` (where allowed) is `None`.
pub fn event_number(e: Option<&str>, head_ok: bool) -> Result<Option<i64>, Reply> {
    match e {
        None => Ok(None),
        Some("head") if head_ok => Ok(None),
        Some(x) => match x.parse::<i64>() {
            Ok(n) if n >= 0 => Ok(Some(n)),
            _ => Err(Reply::bad_request(format!("'{x}' is not valid event number"))),
        },
    }
}

/// The version an `If-None-Match` names, when its hash is the one of `media`.
fn if_none_match(req: &Req, media: Media) -> Option<i64> {
    let v = req.header("if-none-match")?.trim();
    let v = v.strip_prefix("W/").unwrap_or(v).trim_matches('"');
    let (version, hash) = v.split_once(';')?;
    (hash.trim().parse::<i32>().ok()? == media.etag_hash()).then_some(())?;
    version.trim().parse().ok()
}

/// A read's outcome.
pub enum Outcome<T> {
    /// Read.
    Done(T),
    /// The ETag still matches.
    NotModified,
    /// The ACL refused the caller.
    Denied,
    /// The read failed.
    Failed(ReadError),
}

impl<T> From<ReadError> for Outcome<T> {
    fn from(e: ReadError) -> Self {
        Outcome::Failed(e)
    }
}

/// A page of a stream.
pub struct Page {
    events: Vec<ResolvedEvent>,
    last: i64,
    from: i64,
    is_end: bool,
    public: bool,
    cache_secs: Option<i64>,
}

fn cache_control(public: bool, head: bool, cache_secs: Option<i64>) -> String {
    let scope = if public { "public" } else { "private" };
    match (head, cache_secs) {
        (false, _) => format!("{IMMUTABLE}, {scope}"),
        (true, Some(s)) => format!("max-age={s}, {scope}"),
        (true, None) => NO_CACHE.to_owned(),
    }
}

/// Answers with `run`, and while `parkable` says the answer is still "nothing yet", waits up to
/// `secs` (`ES-LongPoll`) on the follow feed for a commit to a stream that `wakes` the poll (the
/// stream read, say), then answers with the latest run. The cursor starts before the first run,
/// so a commit between the run and the wait is not missed.
async fn long_poll<T, F, Fut>(
    api: &Api,
    secs: Option<u64>,
    mut run: F,
    parkable: impl Fn(&T) -> bool,
    wakes: impl Fn(&str) -> bool,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let env = &api.node.env();
    let Some(secs) = secs else { return run().await };
    let mut feed = api.node.store().follow_new();
    let mut stop = api.node.shutdown_requested();
    let deadline = env.clock.monotonic() + Duration::from_secs(secs);
    let mut out = run().await;
    loop {
        let now = env.clock.monotonic();
        if !parkable(&out) || now >= deadline {
            return out;
        }
        tokio::select! {
            biased;
            _ = super::stopped(&mut stop) => return out,
            r = feed.next_streams() => match r {
                Ok(streams) if !streams.iter().any(|s| wakes(s)) => continue,
                // A failed read of the feed: answer with a fresh run, which reports it if it lasts.
                Ok(_) | Err(_) => {}
            },
            _ = env.rt.sleep(deadline - now) => {}
        }
        out = run().await;
    }
}

/// Whether a write to `written` can change a read of `stream`: the stream itself or its
/// metastream (which can change what is visible).
fn touches_stream(written: &str, stream: &str) -> bool {
    written == stream || written.strip_prefix("$$") == Some(stream)
}

/// Checks read access to the targets of resolved links (a denied target denies the whole read).
fn targets_readable(api: &Api, p: Option<&Principal>, events: &[ResolvedEvent]) -> Result<bool, ReadError> {
    let mut seen: Vec<&str> = Vec::new();
    for e in events.iter().filter(|e| e.link.is_some()) {
        let s = e.event.stream.as_str();
        if !seen.contains(&s) {
            seen.push(s);
            if !api.node.auth().check(p, s, Operation::Read)?.allowed {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[allow(clippy::too_many_arguments)]
fn read_page(
    api: &Api,
    p: Option<&Principal>,
    stream: &str,
    dir: Dir,
    from: Option<i64>,
    count: usize,
    resolve: bool,
    inm: Option<i64>,
) -> Outcome<Page> {
    let now = api.node.env().clock.wall_micros();
    let store = &api.node.store();
    let run = || -> Result<Outcome<Page>, ReadError> {
        let access = api.node.auth().check(p, stream, Operation::Read)?;
        if !access.allowed {
            return Ok(Outcome::Denied);
        }
        let state = store.stream_state(stream)?;
        let cache_secs = state.meta.cache_control_secs;
        let c = count as i64;
        let (events, last, f, is_end) = match dir {
            Dir::Backward => {
                let slice = store.read_backward(stream, from.unwrap_or(-1), count, resolve, now)?;
                let last = slice.last_event_number;
                if inm == Some(last) {
                    return Ok(Outcome::NotModified);
                }
                let f = from.unwrap_or(last);
                let w = Window::of(&state, meta_target(stream).is_some(), now);
                let mut start = f.saturating_sub(c - 1).max(0);
                let mut is_end = false;
                if w.min > start {
                    start = w.min;
                    is_end = true;
                }
                let events: Vec<ResolvedEvent> = if f < start {
                    is_end = true;
                    Vec::new()
                } else {
                    slice.events.into_iter().filter(|e| e.original().event_number >= start).collect()
                };
                let oldest = events.last().map(|e| e.original().event_number);
                is_end |= start == 0 || (start <= last && oldest != Some(start));
                (events, last, f, is_end)
            }
            Dir::Forward => {
                let f = from.unwrap_or(0);
                let slice = store.read_forward(stream, f, count, resolve, now)?;
                let last = slice.last_event_number;
                if inm == Some(last) {
                    return Ok(Outcome::NotModified);
                }
                let hi = f.saturating_add(c - 1);
                let mut events: Vec<ResolvedEvent> =
                    slice.events.into_iter().filter(|e| e.original().event_number <= hi).collect();
                events.reverse();
                (events, last, f, hi >= last)
            }
        };
        if resolve && !targets_readable(api, p, &events)? {
            return Ok(Outcome::Denied);
        }
        Ok(Outcome::Done(Page { events, last, from: f, is_end, public: access.public, cache_secs }))
    };
    run().unwrap_or_else(Outcome::Failed)
}

/// The stream's description document: links to itself, to its feed and (as v5's) to each
/// persistent subscription group of the stream, a link left out when it has none (or when this
/// node does not run the subscription service: a follower).
fn description(api: &Api, req: &Req, stream: &str) -> Reply {
    let href = format!("/streams/{}", escape(stream));
    let mut links = json!({
        "self": { "href": href, "supportedContentTypes": [Media::StreamDesc.mime()] },
        "stream": { "href": href, "supportedContentTypes": [Media::AtomXml.mime(), Media::AtomJson.mime()] },
    });
    let groups = api.node.subscriptions().groups(Some(stream), false).unwrap_or_default();
    if !groups.is_empty() {
        let subs: Vec<serde_json::Value> = groups
            .iter()
            .map(|g| {
                json!({
                    "href": format!("/subscriptions/{}/{}", escape(stream), escape(&g.group)),
                    "supportedContentTypes": [Media::CompetingXml.mime(), Media::CompetingJson.mime()],
                })
            })
            .collect();
        links["streamSubscription"] = serde_json::Value::Array(subs);
    }
    let doc = json!({
        "title": format!("Description document for '{stream}'"),
        "description": "The description document will be presented when no accept header is present or it was requested",
        "_links": links,
    });
    let body = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    let r = Reply::body(StatusCode::OK, Media::StreamDesc, body);
    match req.how {
        How::Explicit => r.reason("Description Document"),
        How::Wildcard => Reply { status: StatusCode::NOT_ACCEPTABLE, ..r }.reason("Description Document"),
        How::Default => Reply { status: StatusCode::NOT_ACCEPTABLE, ..r }
            .reason("Stream cannot be represented in the requested format"),
    }
}

/// The feed document in the negotiated type.
fn feed_reply(req: &Req, f: &Feed) -> Reply {
    let embed = Embed::parse(req.query("embed"));
    let body = match req.media {
        Media::AtomXml
        | Media::TextXml
        | Media::AppXml
        | Media::EventXml
        | Media::EventsXml
        | Media::AtomSvcXml
        | Media::CompetingXml => feed::feed_xml(f, &req.base, embed).into_bytes(),
        Media::Html => feed::html(&f.title, &feed::feed_json(f, &req.base, Embed::PrettyBody)).into_bytes(),
        Media::StreamDesc
        | Media::AtomJson
        | Media::Json
        | Media::EventJson
        | Media::EventsJson
        | Media::AtomSvcJson
        | Media::CompetingJson
        | Media::OctetStream
        | Media::TextPlain => feed::feed_json_bytes(f, &req.base, embed),
    };
    Reply::body(StatusCode::OK, req.media, body).header("vary", "Accept")
}

fn failure<T>(o: Outcome<T>, single: Option<Media>) -> Result<T, Reply> {
    match o {
        Outcome::Done(t) => Ok(t),
        Outcome::NotModified => Err(Reply::plain(StatusCode::NOT_MODIFIED, "Not Modified")),
        Outcome::Denied => Err(Reply::unauthorized()),
        Outcome::Failed(e) => Err(errors::read(&e, single)),
    }
}

/// `GET /streams/{s}[/{event}[/{dir}]/{count}]` (and the metadata forms, on `$$s`).
pub async fn feed(
    api: &Arc<Api>,
    req: &mut Req,
    stream: String,
    from: Option<String>,
    dir: Dir,
    count_text: Option<String>,
) -> Reply {
    match feed_inner(api, req, stream, from, dir, count_text).await {
        Ok(r) | Err(r) => r,
    }
}

async fn feed_inner(
    api: &Arc<Api>,
    req: &mut Req,
    stream: String,
    from: Option<String>,
    dir: Dir,
    count_text: Option<String>,
) -> Result<Reply, Reply> {
    if req.media == Media::StreamDesc && dir == Dir::Backward {
        return Ok(description(api, req, &stream));
    }
    let head_url = dir == Dir::Backward && from.as_deref().is_none_or(|f| f == "head");
    let from = event_number(from.as_deref(), dir == Dir::Backward)?;
    let c = count(count_text.as_deref())?;
    let resolve = req.resolve_links()?;
    req.require_master()?;
    let poll = if dir == Dir::Forward { req.long_poll()? } else { None };
    let inm = if_none_match(req, req.media);
    let principal = req.principal.clone();
    let outcome = long_poll(
        api,
        poll,
        || {
            let (p, s, a) = (principal.clone(), stream.clone(), api.clone());
            async move {
                let env = a.node.env().clone();
                env.read_job(move || read_page(&a, p.as_ref(), &s, dir, from, c, resolve, inm)).await
            }
        },
        |o| match o {
            Outcome::Done(p) => p.events.is_empty(),
            Outcome::NotModified | Outcome::Failed(ReadError::NoStream) => true,
            Outcome::Denied
            | Outcome::Failed(
                ReadError::StreamDeleted | ReadError::InvalidPosition(_) | ReadError::Storage(_),
            ) => false,
        },
        |r| touches_stream(r, &stream),
    )
    .await;
    let page = failure(outcome, None)?;
    let base = &req.base;
    let url = |tail: String| format!("{base}/streams/{}{tail}", escape(&stream));
    let (f, l, cc) = (page.from, page.last, c as i64);
    let mut links = vec![
        Link { uri: url(String::new()), relation: "self" },
        Link { uri: url(format!("/head/backward/{c}")), relation: "first" },
    ];
    let head_policy = match dir {
        Dir::Backward => {
            if !page.is_end {
                links.push(Link { uri: url(format!("/0/forward/{c}")), relation: "last" });
                links.push(Link { uri: url(format!("/{}/backward/{c}", f - cc)), relation: "next" });
            }
            links.push(Link { uri: url(format!("/{}/forward/{c}", f.min(l) + 1)), relation: "previous" });
            head_url || f > l
        }
        Dir::Forward => {
            if f >= 1 {
                links.push(Link { uri: url(format!("/0/forward/{c}")), relation: "last" });
                links.push(Link { uri: url(format!("/{}/backward/{c}", f - 1)), relation: "next" });
            }
            if !page.is_end || !page.events.is_empty() {
                let next = f.saturating_add(cc - 1).min(l) + 1;
                links.push(Link { uri: url(format!("/{next}/forward/{c}")), relation: "previous" });
            }
            l.saturating_add(1) < f.saturating_add(cc)
        }
    };
    links.push(Link { uri: url("/metadata".into()), relation: "metadata" });
    let updated = match dir {
        Dir::Backward => page.events.first(),
        Dir::Forward => page.events.last(),
    }
    .map(|e| e.original().timestamp_us);
    let doc = Feed {
        title: format!("Event stream '{stream}'"),
        id: url(String::new()),
        updated_us: updated,
        stream_id: Some(stream.clone()),
        head_of_stream: if dir == Dir::Backward { head_url } else { page.is_end },
        self_url: (dir == Dir::Backward).then(|| url(String::new())),
        etag: head_url.then(|| format!("{l};{}", Media::AtomJson.etag_hash())),
        links,
        entries: page.events,
        resolve,
    };
    count_read(api, &doc.entries);
    let mut r = feed_reply(req, &doc)
        .header("cache-control", cache_control(page.public, head_policy, page.cache_secs));
    if head_policy {
        r = r.header("etag", format!("\"{l};{}\"", req.media.etag_hash()));
    }
    Ok(r)
}

/// A single event read.
pub struct One {
    event: ResolvedEvent,
    public: bool,
    cache_secs: Option<i64>,
}

/// Reads one event of `stream` (`n = -1`: the last), checking read access (blocking).
pub fn read_one(
    api: &Api,
    p: Option<&Principal>,
    stream: &str,
    n: i64,
    resolve: bool,
) -> Outcome<Option<One>> {
    let now = api.node.env().clock.wall_micros();
    let run = || -> Result<Outcome<Option<One>>, ReadError> {
        let access = api.node.auth().check(p, stream, Operation::Read)?;
        if !access.allowed {
            return Ok(Outcome::Denied);
        }
        let cache_secs = api.node.store().metadata(stream)?.cache_control_secs;
        let Some(ev) = api.node.store().read_event(stream, n, resolve, now)? else {
            return Ok(Outcome::Done(None));
        };
        if resolve && ev.link.is_none() && ev.event.event_type == feed::LINK_TYPE {
            // A link whose target is gone.
            return Ok(Outcome::Done(None));
        }
        if resolve && !targets_readable(api, p, std::slice::from_ref(&ev))? {
            return Ok(Outcome::Denied);
        }
        Ok(Outcome::Done(Some(One { event: ev, public: access.public, cache_secs })))
    };
    run().unwrap_or_else(Outcome::Failed)
}

/// The body of a single event in the negotiated type.
pub fn event_body(req: &Req, ev: &ResolvedEvent, resolve: bool) -> Vec<u8> {
    let e = &ev.event;
    let embed = Embed::parse(req.query("embed"));
    match req.media {
        Media::AtomXml | Media::AtomSvcXml | Media::CompetingXml => {
            feed::entry_xml(ev, &req.base, resolve).into_bytes()
        }
        Media::TextXml | Media::AppXml => {
            let mut out = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>");
            json_to_xml("data", &feed::value_of(&e.data, e.is_json), &mut out);
            out.into_bytes()
        }
        Media::EventXml => {
            let mut out = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>");
            json_to_xml("event", &feed::content(e), &mut out);
            out.into_bytes()
        }
        Media::Json => serde_json::to_vec_pretty(&feed::value_of(&e.data, e.is_json)).unwrap_or_default(),
        Media::EventJson => serde_json::to_vec_pretty(&feed::content(e)).unwrap_or_default(),
        Media::OctetStream => e.data.to_vec(),
        Media::Html => {
            let entry = feed::entry_json(ev, &req.base, Embed::TryHarder, resolve, true);
            feed::html(&format!("{}@{}", e.event_number, e.stream), &entry).into_bytes()
        }
        Media::AtomJson
        | Media::StreamDesc
        | Media::EventsJson
        | Media::EventsXml
        | Media::TextPlain
        | Media::AtomSvcJson
        | Media::CompetingJson => {
            serde_json::to_vec_pretty(&feed::entry_json(ev, &req.base, embed, resolve, true))
                .unwrap_or_default()
        }
    }
}

/// `GET /streams/{s}/{event}` (and `/streams/{s}/metadata/{event}` on `$$s`).
pub async fn event(api: &Arc<Api>, req: &mut Req, stream: String, event: String) -> Reply {
    let n = match event_number(Some(&event), true) {
        Ok(n) => n.unwrap_or(-1),
        Err(r) => return r,
    };
    let (resolve, master) = (req.resolve_links(), req.require_master());
    let resolve = match (resolve, master) {
        (Ok(r), Ok(_)) => r,
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (a, p) = (api.clone(), req.principal.clone());
    let env = api.node.env().clone();
    let outcome = env.read_job(move || read_one(&a, p.as_ref(), &stream, n, resolve)).await;
    let one = match failure(outcome, Some(req.media)) {
        Ok(Some(one)) => one,
        Ok(None) => return errors::read(&ReadError::NoStream, Some(req.media)),
        Err(r) => return r,
    };
    count_read(api, std::slice::from_ref(&one.event));
    single_reply(req, &one, n == -1, resolve)
}

/// Counts events served over HTTP (metrics): those a reply carries, with their data and
/// metadata bytes.
fn count_read(api: &Api, events: &[ResolvedEvent]) {
    let bytes = events.iter().map(|e| (e.event.data.len() + e.event.metadata.len()) as u64).sum();
    api.node.metrics().events(crate::metrics::Activity::Read, events.len() as u64, bytes);
}

/// The reply of a single-event read (`head` decides the cache policy).
pub fn single_reply(req: &Req, one: &One, head: bool, resolve: bool) -> Reply {
    let body = event_body(req, &one.event, resolve);
    let r = Reply::body(StatusCode::OK, req.media, body)
        .header("vary", "Accept")
        .header("cache-control", cache_control(one.public, head, one.cache_secs));
    if head {
        let n = one.event.original().event_number;
        r.header("etag", format!("\"{n};{}\"", req.media.etag_hash()))
    } else {
        r
    }
}

/// A `$all` position token: 32 hex digits, commit then prepare.
pub fn position(token: &str) -> Result<u64, Reply> {
    let bad = || Reply::bad_request(format!("Invalid position argument: {token}"));
    if token.len() != 32 || !token.is_ascii() {
        return Err(bad());
    }
    let part = |s: &str| i64::from_str_radix(s, 16).ok().filter(|v| *v >= 0).map(|v| v as u64);
    match (part(&token[..16]), part(&token[16..])) {
        (Some(_commit), Some(prepare)) => Ok(prepare),
        _ => Err(bad()),
    }
}

/// Formats a `$all` position token.
pub fn token(pos: u64) -> String {
    format!("{pos:016X}{pos:016X}")
}

struct AllPage {
    events: Vec<ResolvedEvent>,
    start: u64,
    next_position: u64,
    committed: u64,
    public: bool,
    cache_secs: Option<i64>,
}

fn read_all_page(
    api: &Api,
    p: Option<&Principal>,
    dir: Dir,
    from: Option<u64>,
    count: usize,
    inm: Option<i64>,
) -> Outcome<AllPage> {
    let now = api.node.env().clock.wall_micros();
    let store = &api.node.store();
    let run = || -> Result<Outcome<AllPage>, ReadError> {
        let access = api.node.auth().check(p, "$all", Operation::Read)?;
        if !access.allowed {
            return Ok(Outcome::Denied);
        }
        let cache_secs = store.metadata("$all")?.cache_control_secs;
        let committed = store.log().committed();
        if inm == Some(committed as i64) {
            return Ok(Outcome::NotModified);
        }
        let (events, start, next_position) = match dir {
            Dir::Backward => {
                let start = from.unwrap_or(committed);
                let s = store.read_all_backward(start, count, true, now)?;
                (s.events, start, s.next_position)
            }
            Dir::Forward => {
                let start = from.unwrap_or(0);
                let s = store.read_all_forward(start, count, true, now)?;
                let mut events = s.events;
                events.reverse();
                (events, start, s.next_position)
            }
        };
        Ok(Outcome::Done(AllPage {
            events,
            start,
            next_position,
            committed,
            public: access.public,
            cache_secs,
        }))
    };
    run().unwrap_or_else(Outcome::Failed)
}

/// `GET /streams/$all[/{position}[/{dir}]/{count}]`.
pub async fn all(
    api: &Arc<Api>,
    req: &mut Req,
    from: Option<String>,
    dir: Dir,
    count_text: Option<String>,
) -> Reply {
    match all_inner(api, req, from, dir, count_text).await {
        Ok(r) | Err(r) => r,
    }
}

async fn all_inner(
    api: &Arc<Api>,
    req: &mut Req,
    from: Option<String>,
    dir: Dir,
    count_text: Option<String>,
) -> Result<Reply, Reply> {
    let head_url = from.as_deref().is_none_or(|f| f == "head");
    let from = match from.as_deref() {
        None => None,
        Some("head") if dir == Dir::Backward => None,
        Some(t) => Some(position(t)?),
    };
    let c = count(count_text.as_deref())?;
    req.resolve_links()?;
    req.require_master()?;
    let poll = if dir == Dir::Forward { req.long_poll()? } else { None };
    let inm = if_none_match(req, req.media);
    let principal = req.principal.clone();
    let outcome = long_poll(
        api,
        poll,
        || {
            let (p, a) = (principal.clone(), api.clone());
            async move {
                let env = a.node.env().clone();
                env.read_job(move || read_all_page(&a, p.as_ref(), dir, from, c, inm)).await
            }
        },
        |o| matches!(o, Outcome::NotModified) || matches!(o, Outcome::Done(p) if p.events.is_empty()),
        |_| true,
    )
    .await;
    let page = failure(outcome, None)?;
    let url = |tail: String| format!("{}/streams/%24all{tail}", req.base);
    let mut links = vec![
        Link { uri: url(String::new()), relation: "self" },
        Link { uri: url(format!("/head/backward/{c}")), relation: "first" },
    ];
    let oldest = page.events.last().map(|e| e.original().position);
    let newest = page.events.first().map(|e| e.original().position);
    let head_policy = match dir {
        Dir::Backward => {
            if page.events.len() == c {
                links.push(Link { uri: url(format!("/{}/forward/{c}", token(0))), relation: "last" });
                let next = oldest.unwrap_or(page.next_position);
                links.push(Link { uri: url(format!("/{}/backward/{c}", token(next))), relation: "next" });
            }
            links
                .push(Link { uri: url(format!("/{}/forward/{c}", token(page.start))), relation: "previous" });
            head_url || page.start > page.committed
        }
        Dir::Forward => {
            if page.start != 0 {
                links.push(Link { uri: url(format!("/{}/forward/{c}", token(0))), relation: "last" });
                let first = page.events.last().map(|e| e.original().position).unwrap_or(page.start);
                links.push(Link { uri: url(format!("/{}/backward/{c}", token(first))), relation: "next" });
            }
            if newest.is_some() {
                links.push(Link {
                    uri: url(format!("/{}/forward/{c}", token(page.next_position))),
                    relation: "previous",
                });
            }
            page.events.len() < c
        }
    };
    links.push(Link { uri: url("/metadata".into()), relation: "metadata" });
    let doc = Feed {
        title: "All events".into(),
        id: url(String::new()),
        updated_us: page.events.first().map(|e| e.original().timestamp_us),
        stream_id: None,
        head_of_stream: false,
        self_url: None,
        etag: None,
        links,
        entries: page.events,
        resolve: true,
    };
    count_read(api, &doc.entries);
    let mut r = feed_reply(req, &doc)
        .header("cache-control", cache_control(page.public, head_policy, page.cache_secs));
    if head_policy {
        r = r.header("etag", format!("\"{};{}\"", page.committed, req.media.etag_hash()));
    }
    Ok(r)
}
