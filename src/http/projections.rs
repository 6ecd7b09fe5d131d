//! The projection routes' handlers: the list and statistics documents, state and result with
//! `ES-Position`, the query and configuration documents, commands and delete.
//!
//! Every document is built from a [`View`] of the service; links are absolute, built from the
//! request's base URL. Commands on the system projections (they run as `$system`) need `$admins`
//! or `$ops`, whatever `enableRunAs` says.

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::area::projections::ListKind;
use super::errors;
use super::media::Media;
use super::node_info::document;
use super::reply::Reply;
use super::request::Req;
use crate::projections::{Command, ProjError, Projections, View};

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
    json!({
        "coreProcessingTime": 0,
        "version": v.def.version,
        "epoch": v.def.epoch,
        "effectiveName": name,
        "writesInProgress": 0,
        "readsInProgress": 0,
        "partitionsCached": 1,
        "status": v.status(),
        "stateReason": v.reason,
        "name": name,
        "mode": "Continuous",
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
    })
}

/// `GET /projections/{kind}`: `{"projections":[…]}`.
pub fn list(p: &Projections, req: &Req, kind: ListKind) -> Reply {
    match p.list() {
        Ok(views) => {
            let items: Vec<Value> = if kind.shows_continuous() {
                views.iter().map(|v| stat(&req.base, v)).collect()
            } else {
                Vec::new()
            };
            document(req, "projections", &json!({ "projections": items }))
        }
        Err(e) => errors::projection(&e),
    }
}

/// `POST /projections/{mode}`: only the native system projections exist on this node.
pub fn create(req: &Req, kind: ListKind) -> Reply {
    if let Err(r) = ["enabled", "emit", "checkpoints", "trackemittedstreams"]
        .into_iter()
        .try_for_each(|k| flag(req, k, false).map(drop))
    {
        return r;
    }
    match req.query("type").map(str::to_ascii_uppercase).as_deref() {
        None | Some("JS") => Reply::bad_request(format!(
            "JavaScript projections ({kind:?}) are not supported by this node: only the system projections run"
        )),
        Some(other) => Reply::bad_request(format!("Unknown projection type: {other}")),
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

/// `GET /projection/{name}/state` and `/result`: a system projection keeps no state, so the body
/// is empty; `ES-Position` carries the position's tag.
pub fn state(p: &Projections, req: &Req, name: &str) -> Reply {
    let _partition = req.query("partition");
    match p.get(name) {
        Ok(v) => Reply::body(StatusCode::OK, Media::Json, Vec::new()).header("es-position", v.position_tag()),
        Err(e) => errors::projection(&e),
    }
}

/// `GET /projection/{name}/query[?config=yes]`: the query text, or its definition document.
pub fn query(p: &Projections, req: &Req, name: &str) -> Reply {
    let config = match flag(req, "config", false) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let v = match p.get(name) {
        Ok(v) => v,
        Err(e) => return errors::projection(&e),
    };
    if !config {
        return Reply::body(StatusCode::OK, Media::TextPlain, v.def.query.clone());
    }
    let mut options = Map::new();
    if v.def.kind.includes_links() {
        options.insert("includeLinks".into(), json!(true));
    }
    let doc = json!({
        "name": v.def.name,
        "query": v.def.query,
        "emitEnabled": v.def.config.emit_enabled,
        "checkpointsEnabled": true,
        "type": v.def.kind.handler_type(),
        "definition": {"allEvents": true, "allStreams": true, "options": options},
        "outputConfig": {"resultStreamName": format!("$projections-{}-result", v.def.name)},
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
    if let Err(r) = flag(req, "emit", true).and_then(|emit| {
        if emit {
            Ok(())
        } else {
            Err(Reply::bad_request("The system projections emit; emit=no is not allowed for them"))
        }
    }) {
        return r;
    }
    if let Some(t) = req.query("type") {
        if !t.eq_ignore_ascii_case("native") && !t.to_ascii_lowercase().starts_with("native:") {
            return Reply::bad_request(format!("The type of a system projection cannot change to {t}"));
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
    match p.update_query(name, text).await {
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

/// `DELETE /projection/{name}`: the system projections cannot be deleted.
pub fn delete(p: &Projections, name: &str) -> Reply {
    match p.get(name) {
        Ok(_) => {
            errors::projection(&ProjError::OperationFailed("System projections cannot be deleted".into()))
        }
        Err(e) => errors::projection(&e),
    }
}
