//! The projection routes' handlers: the list and statistics documents, state and result with
//! `ES-Position`, the query and configuration documents, commands and delete, and
//! `read-events` (a page of the events a query source selects, from a log position).
//!
//! Every document is built from a [`View`] of the service; links are absolute, built from the
//! request's base URL. Creating a projection and changing one (commands, query, configuration,
//! delete) need `$admins` or `$ops`, whatever `enableRunAs` says; reads need any user.

use std::sync::Arc;

use annal_js::Source;
use http::StatusCode;
use serde_json::{json, Map, Value};

use super::area::projections::ListKind;
use super::errors;
use super::media::Media;
use super::node_info::document;
use super::reply::Reply;
use super::request::Req;
use super::router::name_ok;
use super::Api;
use crate::auth::{Operation, Principal};
use crate::projections::definition::{Mode, RunAs};
use crate::projections::feed::{self, FeedError, FeedPage, READ_EVENTS_DEFAULT, READ_EVENTS_MAX};
use crate::projections::js::Selector;
use crate::projections::{Command, Create, Projections, View};

fn projection_url(base: &str, name: &str) -> String {
    format!("{base}/projection/{name}")
}

/// A yes/no query parameter (`yes`/`true`/`1`, `no`/`false`/`0`), `default` when absent.
fn flag(req: &Req, key: &str, default: bool) -> Result<bool, Reply> {
    match req.query(key).map(str::to_ascii_lowercase).as_deref() {
        None | Some("") => Ok(default),
        Some("yes" | "true" | "1") => Ok(true),
        Some("no" | "false" | "0") => Ok(false),
        Some(other) => Err(Reply::bad_request(format!("Invalid value for {key}: {other}"))),
    }
}

/// The statistics object of one projection, fields in v5's order.
pub fn stat(base: &str, v: &View) -> Value {
    let name = &v.def.name;
    let url = projection_url(base, name);
    let mut doc = json!({
        "coreProcessingTime": 0,
        "version": v.def.version,
        "epoch": v.def.epoch,
        "effectiveName": name,
        "writesInProgress": 0,
        "readsInProgress": 0,
        "partitionsCached": v.partitions,
        "status": v.status(),
        "stateReason": v.reason,
        "name": name,
        "mode": v.def.mode.name(),
        "position": v.position_text(),
        "progress": v.progress(),
        "lastCheckpoint": v.last_checkpoint_text(),
        "eventsProcessedAfterRestart": v.processed,
        "statusUrl": url,
        "stateUrl": format!("{url}/state"),
        "resultUrl": format!("{url}/result"),
        "queryUrl": format!("{url}/query?config=yes"),
        "enableCommandUrl": format!("{url}/command/enable"),
        "disableCommandUrl": format!("{url}/command/disable"),
        "checkpointStatus": if v.checkpoint_writing { "Writing (1)" } else { "" },
        "bufferedEvents": v.buffered,
        "writePendingEventsBeforeCheckpoint": 0,
        "writePendingEventsAfterCheckpoint": 0,
    });
    if let Some(q) = v.query_definition.as_ref().filter(|q| q.produces_results) {
        let stream = q.result_stream.clone().unwrap_or_else(|| format!("$projections-{name}-result"));
        if let Some(m) = doc.as_object_mut() {
            m.insert(
                "resultStreamUrl".into(),
                json!(format!("{base}/streams/{}", super::text::escape(&stream))),
            );
        }
    }
    doc
}

/// `GET /projections/{kind}`: `{"projections":[…]}`.
pub fn list(p: &Projections, req: &Req, kind: ListKind) -> Reply {
    match p.list() {
        Ok(views) => {
            let items: Vec<Value> =
                views.iter().filter(|v| kind.shows(v.def.mode)).map(|v| stat(&req.base, v)).collect();
            document(req, "projections", &json!({ "projections": items }))
        }
        Err(e) => errors::projection(&e),
    }
}

/// `POST /projections/{mode}?name=&type=&enabled=&emit=&checkpoints=&trackemittedstreams=`: the
/// body is the query. 201 with `Location`; a bad query is a 400 with its message and line.
pub async fn create(p: &Projections, req: &mut Req, kind: ListKind) -> Reply {
    let mode = match kind {
        ListKind::Transient => Mode::Transient,
        ListKind::OneTime => Mode::OneTime,
        ListKind::Continuous => Mode::Continuous,
        ListKind::Any | ListKind::NonTransient => return Reply::bad_request("Not a mode projections run in"),
    };
    let flags = (|| {
        Ok::<_, Reply>((
            flag(req, "enabled", true)?,
            flag(req, "emit", false)?,
            flag(req, "checkpoints", false)?,
            flag(req, "trackemittedstreams", false)?,
        ))
    })();
    let (enabled, emit, checkpoints, track) = match flags {
        Ok(f) => f,
        Err(r) => return r,
    };
    match req.query("type").map(str::to_ascii_uppercase).as_deref() {
        None | Some("" | "JS") => {}
        Some(other) => return Reply::bad_request(format!("Unknown projection type: {other}")),
    }
    let name = match req.query("name").filter(|n| !n.is_empty()) {
        Some(n) if name_ok(n) => n.to_owned(),
        Some(_) => return Reply::bad_request("Invalid projection name"),
        None => p.new_name(),
    };
    let Some(principal) = req.principal.clone() else { return Reply::unauthorized() };
    if mode != Mode::Transient && !principal.is_ops() {
        return Reply::unauthorized();
    }
    let body = match req.take_body() {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Ok(query) = String::from_utf8(body.to_vec()) else {
        return Reply::bad_request("The query must be UTF-8 text");
    };
    let run_as = RunAs { name: principal.login.clone(), roles: principal.groups.clone() };
    let c = Create {
        name: name.clone(),
        mode,
        query,
        enabled,
        emit,
        checkpoints,
        track_emitted_streams: track,
        run_as,
    };
    match p.create(c).await {
        Ok(()) => {
            let mut r = document(req, "projection", &json!({ "name": name }));
            r.status = StatusCode::CREATED;
            r.reason("Created").header("location", projection_url(&req.base, &super::text::escape(&name)))
        }
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}`: the statistics object.
pub fn get(p: &Projections, req: &Req, name: &str) -> Reply {
    match p.get(name) {
        Ok(v) => document(req, "projection", &stat(&req.base, &v)),
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}/statistics`: `{"projections":[stat]}`.
pub fn statistics(p: &Projections, req: &Req, name: &str) -> Reply {
    match p.get(name) {
        Ok(v) => document(req, "projections", &json!({ "projections": [stat(&req.base, &v)] })),
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}/state[?partition=]` and `/result`: a JavaScript projection's state
/// or result as JSON (empty when it has none, and for a system projection, which keeps none);
/// `ES-Position` carries the position's tag.
pub async fn state(p: &Projections, req: &Req, name: &str, result: bool) -> Reply {
    let partition = req.query("partition").unwrap_or("").to_owned();
    let v = match p.get(name) {
        Ok(v) => v,
        Err(e) => return errors::projection(&e),
    };
    match p.state(name, &partition, result).await {
        Ok(body) => Reply::body(StatusCode::OK, Media::Json, body.unwrap_or_default())
            .header("es-position", v.position_tag()),
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}/query[?config=yes]`: the query text, or its definition document.
pub fn query(p: &Projections, req: &Req, name: &str) -> Reply {
    let config = match flag(req, "config", false) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let v = match p.access(name) {
        Ok(v) => v,
        Err(e) => return errors::projection(&e),
    };
    if !config {
        return Reply::body(StatusCode::OK, Media::TextPlain, v.def.query.clone());
    }
    let mut options = Map::new();
    let mut definition = Map::new();
    let mut result_stream = format!("$projections-{}-result", v.def.name);
    match (v.def.system(), &v.query_definition) {
        (Some(kind), _) => {
            if kind.includes_links() {
                options.insert("includeLinks".into(), json!(true));
            }
            definition.insert("allEvents".into(), json!(true));
            definition.insert("allStreams".into(), json!(true));
        }
        (None, Some(q)) => {
            if let Some(r) = &q.result_stream {
                result_stream = r.clone();
            }
            let (all_streams, categories, streams) = match &q.source {
                Source::All | Source::Matching => (true, Vec::new(), Vec::new()),
                Source::Categories(c) => (false, c.clone(), Vec::new()),
                Source::Streams(s) => (false, Vec::new(), s.clone()),
                Source::Catalog { .. } => (false, Vec::new(), Vec::new()),
            };
            if let Source::Catalog { stream, transform } = &q.source {
                definition.insert("catalogStream".into(), json!(stream));
                if *transform {
                    options.insert("definesCatalogTransform".into(), json!(true));
                }
            }
            let members = [
                ("allEvents", json!(q.events.is_none())),
                ("allStreams", json!(all_streams)),
                ("byStream", json!(q.by_stream)),
                ("byCustomPartitions", json!(q.by_custom_partitions)),
                ("categories", json!(categories)),
                ("events", json!(q.events.clone().unwrap_or_default())),
                ("streams", json!(streams)),
            ];
            for (k, x) in members {
                if !matches!(&x, Value::Bool(false)) && x.as_array().is_none_or(|a| !a.is_empty()) {
                    definition.insert(k.into(), x);
                }
            }
            let opts = [
                ("resultStreamName", json!(q.result_stream)),
                ("partitionResultStreamNamePattern", json!(q.partition_result_pattern)),
                ("reorderEvents", json!(q.reorder_events)),
                ("processingLag", json!(q.processing_lag)),
                ("isBiState", json!(q.bi_state)),
                ("definesStateTransform", json!(q.defines_state_transform)),
                ("producesResults", json!(q.produces_results)),
                ("definesFold", json!(q.defines_fold)),
                ("handlesDeletedNotifications", json!(q.handles_deleted)),
                ("includeLinks", json!(q.include_links)),
            ];
            for (k, x) in opts {
                if !matches!(&x, Value::Bool(false) | Value::Null) && x.as_u64() != Some(0) {
                    options.insert(k.into(), x);
                }
            }
        }
        (None, None) => {}
    }
    definition.insert("options".into(), Value::Object(options));
    let doc = json!({
        "name": v.def.name,
        "query": v.def.query,
        "emitEnabled": v.def.config.emit_enabled,
        "trackEmittedStreams": v.def.config.track_emitted_streams,
        "checkpointsEnabled": v.def.checkpoints_enabled,
        "type": v.def.kind.handler_type(),
        "definition": definition,
        "outputConfig": {"resultStreamName": result_stream},
    });
    let mut doc = doc;
    if let Some(m) = doc.as_object_mut() {
        m.retain(|_, x| !matches!(x, Value::Bool(false) | Value::Null));
    }
    document(req, "query", &doc)
}

fn may_change(req: &Req) -> Result<(), Reply> {
    if req.principal.as_ref().is_some_and(|p| p.is_ops()) {
        Ok(())
    } else {
        Err(Reply::unauthorized())
    }
}

/// `PUT /projection/{name}/query[?emit=]`: the body is the new query text.
pub async fn query_put(p: &Projections, req: &mut Req, name: &str) -> Reply {
    let emit = match req.query("emit").filter(|e| !e.is_empty()) {
        None => None,
        Some(_) => match flag(req, "emit", true) {
            Ok(e) => Some(e),
            Err(r) => return r,
        },
    };
    let system = match p.get(name) {
        Ok(v) => v.def.system().is_some(),
        Err(e) => return errors::projection(&e),
    };
    if let Some(t) = req.query("type").filter(|t| !t.is_empty()) {
        let native = t.eq_ignore_ascii_case("native") || t.to_ascii_lowercase().starts_with("native:");
        if system && !native {
            return Reply::bad_request(format!("The type of a system projection cannot change to {t}"));
        }
        if !system && !t.eq_ignore_ascii_case("js") {
            return Reply::bad_request(format!("The type of a JavaScript projection cannot change to {t}"));
        }
    }
    if let Err(r) = may_change(req) {
        return r;
    }
    let body = match req.take_body() {
        Ok(b) => b,
        Err(r) => return r,
    };
    let Ok(text) = std::str::from_utf8(&body) else {
        return Reply::bad_request("The query must be UTF-8 text");
    };
    match p.update_query(name, text, emit).await {
        Ok(()) => named(req, name),
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}/config`.
pub fn config(p: &Projections, req: &Req, name: &str) -> Reply {
    match p.config(name) {
        Ok(c) => document(req, "config", &c.document(name)),
        Err(e) => errors::projection(&e),
    }
}

/// `PUT /projection/{name}/config`: a JSON object of the fields to change.
pub async fn config_put(p: &Projections, req: &mut Req, name: &str) -> Reply {
    let body = match req.take_body() {
        Ok(b) => b,
        Err(r) => return r,
    };
    let doc = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Reply::bad_request("The configuration must be a JSON object"),
        Err(e) => return Reply::bad_request(format!("Invalid JSON: {e}")),
    };
    match p.update_config(name, &doc).await {
        Ok(()) => match p.config(name) {
            Ok(c) => document(req, "config", &c.document(name)),
            Err(e) => errors::projection(&e),
        },
        Err(e) => errors::projection(&e),
    }
}

fn named(req: &Req, name: &str) -> Reply {
    document(req, "projection", &json!({ "name": name }))
}

/// `POST /projection/{name}/command/{command}[?enableRunAs=]`.
pub async fn command(p: &Projections, req: &Req, name: &str, command: Command) -> Reply {
    if let Err(r) = flag(req, "enableRunAs", false) {
        return r;
    }
    if let Err(e) = p.get(name) {
        return errors::projection(&e);
    }
    if let Err(r) = may_change(req) {
        return r;
    }
    match p.command(name, command).await {
        Ok(()) => named(req, name),
        Err(e) => errors::projection(&e),
    }
}

/// `DELETE /projection/{name}?deleteStateStream=&deleteCheckpointStream=&deleteEmittedStreams=`:
/// only a stopped or faulted projection (a transient one is stopped); the system projections
/// cannot be deleted. 200 with `{"name":…}`, as v5 answers.
pub async fn delete(p: &Projections, req: &Req, name: &str) -> Reply {
    let flags = (|| {
        Ok::<_, Reply>((
            flag(req, "deleteStateStream", false)?,
            flag(req, "deleteCheckpointStream", false)?,
            flag(req, "deleteEmittedStreams", false)?,
        ))
    })();
    let (state, checkpoint, emitted) = match flags {
        Ok(f) => f,
        Err(r) => return r,
    };
    if let Err(e) = p.get(name) {
        return errors::projection(&e);
    }
    if let Err(r) = may_change(req) {
        return r;
    }
    match p.delete(name, state, checkpoint, emitted).await {
        Ok(()) => named(req, name),
        Err(e) => errors::projection(&e),
    }
}

/// A member of a JSON object, its name matched regardless of case as v5 reads bodies (`null`
/// counts as absent).
fn member<'a>(m: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    m.get(name)
        .or_else(|| m.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
        .filter(|v| !v.is_null())
}

/// A query definition's flag.
fn def_flag(q: &Map<String, Value>, name: &str) -> Result<bool, String> {
    match member(q, name) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(format!("query.{name} must be true or false")),
    }
}

/// A query definition's list of names.
fn def_names(q: &Map<String, Value>, name: &str) -> Result<Vec<String>, String> {
    let bad = || format!("query.{name} must be an array of non-empty names");
    match member(q, name) {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().filter(|s| !s.is_empty()).map(str::to_owned).ok_or_else(bad))
            .collect(),
        Some(_) => Err(bad()),
    }
}

/// The source of a `read-events` query definition (v5's source document, the `definition` of
/// `query?config=yes`): what it selects, and whether it reads every stream (`allStreams`).
fn read_events_source(q: &Map<String, Value>) -> Result<(Selector, bool), String> {
    let all_streams = def_flag(q, "allStreams")?;
    let all_events = def_flag(q, "allEvents")?;
    let by_streams = def_flag(q, "byStreams")?;
    let categories = def_names(q, "categories")?;
    let streams = def_names(q, "streams")?;
    let events = def_names(q, "events")?;
    match member(q, "catalogStream") {
        None => {}
        Some(Value::String(s)) if s.is_empty() => {}
        Some(_) => {
            return Err("query.catalogStream is not supported: name the streams in query.streams".into())
        }
    }
    if !all_streams && categories.is_empty() && streams.is_empty() {
        return Err(
            "The query selects no events: set query.allStreams, query.categories or query.streams".into()
        );
    }
    if all_streams && !(categories.is_empty() && streams.is_empty()) {
        return Err("query.allStreams cannot be set with query.categories or query.streams".into());
    }
    if !categories.is_empty() && !streams.is_empty() {
        return Err("query.categories and query.streams cannot both be set".into());
    }
    if !all_events && events.is_empty() {
        return Err("The query selects no event types: set query.allEvents or query.events".into());
    }
    if all_events && !events.is_empty() {
        return Err("query.allEvents cannot be set with query.events".into());
    }
    if by_streams && !streams.is_empty() {
        return Err("query.byStreams (foreachStream) does not apply to query.streams".into());
    }
    let include_links = match member(q, "options") {
        None => false,
        Some(Value::Object(o)) => match member(o, "$includeLinks").or_else(|| member(o, "includeLinks")) {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err("query.options.$includeLinks must be true or false".into()),
        },
        Some(_) => return Err("query.options must be an object".into()),
    };
    let source = if all_streams {
        Source::All
    } else if !categories.is_empty() {
        Source::Categories(categories)
    } else {
        Source::Streams(streams)
    };
    let events = (!all_events).then_some(events);
    Ok((Selector::new(source, events, include_links), all_streams))
}

/// A `read-events` position: a log position tag, `{"$c":p,"$p":p}` (also `c`/`p` and
/// `commitPosition`/`preparePosition`; v5's start of the log `{"$c":0,"$p":-1}` is 0); absent:
/// the start.
fn read_events_position(v: Option<&Value>) -> Result<u64, String> {
    let Some(v) = v else { return Ok(0) };
    let Value::Object(m) = v else {
        return Err("position must be an object such as {\"$c\":0,\"$p\":0}".into());
    };
    let (mut commit, mut prepare) = (None, None);
    for (k, x) in m {
        let slot = match k.as_str() {
            "$c" | "c" | "commitPosition" => &mut commit,
            "$p" | "p" | "preparePosition" => &mut prepare,
            "$s" | "s" | "streams" | "$m" => {
                return Err(
                    "position: stream positions are not used here: positions are log positions, {\"$c\":…,\"$p\":…}"
                        .into(),
                )
            }
            _ => continue,
        };
        *slot = Some(x.as_i64().ok_or_else(|| format!("position.{k} must be an integer"))?);
    }
    let (c, p) = match (commit, prepare) {
        (None, None) => return Err("position has neither $c nor $p".into()),
        (c, p) => (c.or(p).unwrap_or_default(), p.or(c).unwrap_or_default()),
    };
    match (c, p) {
        (0, -1) => Ok(0),
        (c, p) if c != p => {
            Err(format!("position: $c ({c}) and $p ({p}) differ; this node's positions have them equal"))
        }
        (c, _) => u64::try_from(c).map_err(|_| format!("position: {c} is negative")),
    }
}

/// A log position as a tag.
fn position_tag(p: u64) -> Value {
    json!({"$c": p, "$p": p})
}

/// An event's data or metadata: a JSON object when it is one and the event is JSON, else text.
fn payload(bytes: &[u8], json: bool) -> Value {
    if json {
        if let Ok(v @ Value::Object(_)) = serde_json::from_slice::<Value>(bytes) {
            return v;
        }
    }
    Value::String(String::from_utf8_lossy(bytes).into_owned())
}

/// What a `read-events` read gave.
enum ReadOutcome {
    Page(FeedPage),
    Denied,
    Failed(FeedError),
}

/// One `read-events` page for `principal`: every stream it returns events of (and `$all` for
/// an `allStreams` source) must be readable by them, as the reader runs as the caller.
fn read_events_page(
    api: &Api,
    principal: Option<&Principal>,
    selector: &Selector,
    all_streams: bool,
    from: u64,
    max: usize,
) -> ReadOutcome {
    let store = api.node.store();
    let auth = api.node.auth();
    let now = api.node.env().clock.wall_micros();
    let readable = |stream: &str| auth.check(principal, stream, Operation::Read).map(|a| a.allowed);
    let run = || -> Result<ReadOutcome, FeedError> {
        if all_streams && !readable("$all")? {
            return Ok(ReadOutcome::Denied);
        }
        let page = feed::read_page(store, selector, from, max, now)?;
        let mut seen: Vec<&str> = Vec::new();
        for e in &page.events {
            for s in std::iter::once(&e.event.stream).chain(e.link.as_ref().map(|l| &l.stream)) {
                if !seen.contains(&s.as_str()) {
                    seen.push(s);
                    if !readable(s)? {
                        return Ok(ReadOutcome::Denied);
                    }
                }
            }
        }
        Ok(ReadOutcome::Page(page))
    };
    run().unwrap_or_else(ReadOutcome::Failed)
}

/// `POST /projections/read-events`: the body is `{"query": {source definition}, "position":
/// {"$c":p,"$p":p}, "maxEvents": n}`; the reply is the events the source selects from the
/// position, each with the position to read on from after it, and the position to read the
/// next page from ([`crate::projections::feed`]).
pub async fn read_events(api: &Arc<Api>, req: &mut Req) -> Reply {
    let body = match req.take_body() {
        Ok(b) => b,
        Err(r) => return r,
    };
    let doc = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => m,
        Ok(_) => {
            return Reply::bad_request(
                "The body must be a JSON object: {\"query\":…,\"position\":…,\"maxEvents\":…}",
            )
        }
        Err(e) => return Reply::bad_request(format!("Invalid JSON: {e}")),
    };
    let parsed = (|| {
        let q = match member(&doc, "query") {
            Some(Value::Object(q)) => q,
            Some(_) => return Err("query must be an object (a query's source definition)".to_owned()),
            None => return Err("The body has no query (a query's source definition)".to_owned()),
        };
        let (selector, all_streams) = read_events_source(q)?;
        let from = read_events_position(member(&doc, "position"))?;
        let max = match member(&doc, "maxEvents") {
            None => READ_EVENTS_DEFAULT,
            Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n @ 1..=READ_EVENTS_MAX) => n,
                _ => return Err(format!("maxEvents must be an integer from 1 to {READ_EVENTS_MAX}")),
            },
        };
        Ok((selector, all_streams, from, max))
    })();
    let (selector, all_streams, from, max) = match parsed {
        Ok(x) => x,
        Err(why) => return Reply::bad_request(why),
    };
    let (a, p) = (api.clone(), req.principal.clone());
    let env = api.node.env().clone();
    let outcome =
        env.read_job(move || read_events_page(&a, p.as_ref(), &selector, all_streams, from, max)).await;
    let page = match outcome {
        ReadOutcome::Page(page) => page,
        ReadOutcome::Denied => return Reply::unauthorized(),
        ReadOutcome::Failed(e) => return errors::feed(&e),
    };
    let events: Vec<Value> = page
        .events
        .iter()
        .map(|f| {
            let e = &f.event;
            let json = e.is_json();
            let mut v = json!({
                "eventStreamId": e.stream,
                "eventNumber": e.event_number,
                "eventType": e.event_type,
                "data": payload(&e.data, json),
                "metadata": payload(&e.metadata, json),
            });
            if let (Some(link), Some(m)) = (&f.link, v.as_object_mut()) {
                m.insert("linkMetadata".into(), payload(&link.metadata, true));
            }
            if let Some(m) = v.as_object_mut() {
                m.insert("isJson".into(), json!(json));
                m.insert("readerPosition".into(), position_tag(f.next));
            }
            v
        })
        .collect();
    let doc = json!({
        "correlationId": api.node.env().new_uuid().hyphenated().to_string(),
        "readerPosition": position_tag(page.next),
        "events": events,
    });
    document(req, "feed", &doc)
}
