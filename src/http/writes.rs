//! Appending and deleting, as EventStoreDB v5 does them: request bodies in every
//! accepted type, the 307 to an idempotent `/incoming/{guid}` URL, expected versions, atomic
//! batches (one store append) and the write outcomes.

use std::sync::Arc;

use bytes::Bytes;
use http::StatusCode;
use serde_json::Value;

use super::errors::{self, WriteKind};
use super::media::Media;
use super::reply::Reply;
use super::request::Req;
use super::text::event_uri;
use super::Api;
use crate::auth::Operation;
use crate::store::{NewEvent, WriteError, WriteOp, WriteResult};

const INVALID_BODY: &str = "Write request body invalid.";

/// How a body type carries events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A JSON array of `{eventId, eventType, data, metadata}`.
    JsonBatch,
    /// An XML element per event.
    XmlBatch,
    /// The body is one JSON event.
    Json,
    /// The body is one text event (XML).
    Text,
    /// The body is one binary event.
    Raw,
}

/// The shape of a body of type `m` (`incoming`: the `/incoming/{guid}` route, one event only).
pub fn shape(m: Media, incoming: bool) -> Shape {
    match m {
        Media::AtomJson if incoming => Shape::Json,
        Media::AtomXml if incoming => Shape::Text,
        Media::EventsJson | Media::EventJson | Media::AtomJson => Shape::JsonBatch,
        Media::EventsXml | Media::EventXml | Media::AtomXml => Shape::XmlBatch,
        Media::Json | Media::StreamDesc | Media::AtomSvcJson | Media::CompetingJson => Shape::Json,
        Media::AppXml
        | Media::TextXml
        | Media::AtomSvcXml
        | Media::CompetingXml
        | Media::Html
        | Media::TextPlain => Shape::Text,
        Media::OctetStream => Shape::Raw,
    }
}

/// Data or metadata of a batch item: JSON, text, or nothing.
enum Payload {
    Json(Bytes),
    Text(Bytes),
    Empty,
}

fn payload_of_string(s: String) -> Payload {
    let t = s.trim();
    if (t.starts_with('{') || t.starts_with('[')) && serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok()
    {
        Payload::Json(Bytes::from(s))
    } else {
        Payload::Text(Bytes::from(s))
    }
}

/// Data or metadata given as a raw JSON value of a batch: objects and arrays are kept as they
/// were sent (a slice of the request body, not a copy), strings are unquoted.
fn payload_raw(r: Option<&[u8]>, body: &Bytes) -> Payload {
    let Some(t) = r else { return Payload::Empty };
    match t.first() {
        Some(b'{' | b'[') => Payload::Json(slice_of(body, t)),
        Some(b'"') => {
            super::batch::string_of(t).map(|s| payload_of_string(s.into_owned())).unwrap_or(Payload::Empty)
        }
        _ => Payload::Empty,
    }
}

/// `part` as a slice of `body` when it lies inside it (always, for values parsed from it), else a
/// copy.
fn slice_of(body: &Bytes, part: &[u8]) -> Bytes {
    let (b, p) = (body.as_ptr() as usize, part.as_ptr() as usize);
    if p >= b && p + part.len() <= b + body.len() {
        body.slice_ref(part)
    } else {
        Bytes::copy_from_slice(part)
    }
}

fn payload_value(v: Option<&Value>) -> Payload {
    match v {
        Some(v @ (Value::Object(_) | Value::Array(_))) => {
            Payload::Json(Bytes::from(serde_json::to_vec(v).unwrap_or_default()))
        }
        Some(Value::String(s)) => payload_of_string(s.clone()),
        _ => Payload::Empty,
    }
}

fn build(
    id: Option<&str>,
    event_type: Option<String>,
    data: Payload,
    metadata: Payload,
) -> Result<NewEvent, Reply> {
    let id = match id.map(str::trim) {
        None | Some("") => return Err(Reply::bad_request("Empty eventId provided.")),
        Some(s) => uuid::Uuid::parse_str(s).map_err(|_| Reply::bad_request(INVALID_BODY))?,
    };
    if id.is_nil() {
        return Err(Reply::bad_request("Empty eventId provided."));
    }
    let event_type = event_type
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Reply::bad_request("Empty eventType provided."))?;
    let mut is_json = false;
    let mut bytes = |p: Payload| match p {
        Payload::Json(b) => {
            is_json = true;
            b
        }
        Payload::Text(b) => b,
        Payload::Empty => Bytes::new(),
    };
    let data = bytes(data);
    let metadata = bytes(metadata);
    Ok(NewEvent { id: *id.as_bytes(), event_type, data, metadata, is_json })
}

/// Parses a JSON batch (keys match case-insensitively).
pub fn json_batch(body: &[u8]) -> Result<Vec<NewEvent>, Reply> {
    json_batch_bytes(&Bytes::copy_from_slice(body))
}

/// Parses a JSON batch held in `body`; event bodies sent as JSON objects or arrays are slices of
/// `body`, not copies.
pub fn json_batch_bytes(body: &Bytes) -> Result<Vec<NewEvent>, Reply> {
    let items = super::batch::items(body).ok_or_else(|| Reply::bad_request(INVALID_BODY))?;
    items
        .iter()
        .map(|item| {
            let id = match item.id {
                None | Some(b"null") => None,
                Some(raw) => {
                    Some(super::batch::string_of(raw).ok_or_else(|| Reply::bad_request(INVALID_BODY))?)
                }
            };
            let event_type = item.event_type.and_then(super::batch::string_of).map(String::from);
            build(id.as_deref(), event_type, payload_raw(item.data, body), payload_raw(item.metadata, body))
        })
        .collect()
}

/// Parses an XML batch: a root element whose children are events.
pub fn xml_batch(body: &[u8]) -> Result<Vec<NewEvent>, Reply> {
    let text = std::str::from_utf8(body).map_err(|_| Reply::bad_request(INVALID_BODY))?;
    let (_, root) = super::xml::parse(text).map_err(|e| Reply::bad_request(format!("{INVALID_BODY} {e}")))?;
    let Value::Object(children) = root else { return Err(Reply::bad_request(INVALID_BODY)) };
    let mut items = Vec::new();
    for v in children.values() {
        match v {
            Value::Array(xs) => items.extend(xs.iter()),
            other => items.push(other),
        }
    }
    if items.is_empty() {
        return Err(Reply::bad_request(INVALID_BODY));
    }
    items
        .into_iter()
        .map(|item| {
            let Value::Object(m) = item else { return Err(Reply::bad_request(INVALID_BODY)) };
            let get = |k: &str| m.iter().find(|(key, _)| key.eq_ignore_ascii_case(k)).map(|(_, v)| v);
            let id = get("eventId").and_then(Value::as_str);
            let event_type = get("eventType").and_then(Value::as_str).map(str::to_owned);
            build(id, event_type, payload_value(get("data")), payload_value(get("metadata")))
        })
        .collect()
}

/// The events of a body of shape `shape`; single events take `id` and `event_type`.
pub fn events(
    shape: Shape,
    body: Bytes,
    id: Option<uuid::Uuid>,
    event_type: Option<String>,
) -> Result<Vec<NewEvent>, Reply> {
    let single = |is_json: bool| {
        let id = id.ok_or_else(|| Reply::bad_request("Empty eventId provided."))?;
        let event_type = event_type
            .clone()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| Reply::bad_request("Empty eventType provided."))?;
        Ok(vec![NewEvent {
            id: *id.as_bytes(),
            event_type,
            data: body.clone(),
            metadata: Bytes::new(),
            is_json,
        }])
    };
    match shape {
        Shape::JsonBatch => json_batch_bytes(&body),
        Shape::XmlBatch => xml_batch(&body),
        Shape::Json => {
            if !body.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
                return Err(Reply::bad_request(INVALID_BODY));
            }
            single(true)
        }
        Shape::Text | Shape::Raw => single(false),
    }
}

/// `ES-EventId`, validated even where it is not used.
pub fn header_event_id(req: &Req) -> Result<Option<uuid::Uuid>, Reply> {
    match req.es_header("eventid", None) {
        None => Ok(None),
        Some(v) => match uuid::Uuid::parse_str(v.trim()) {
            Ok(u) if !u.is_nil() => Ok(Some(u)),
            _ => Err(Reply::bad_request("ES-EventId header in wrong format.")),
        },
    }
}

/// Checks `Write` access to `stream` and appends atomically; 201 with `Location` of the first
/// event.
pub async fn write(api: &Arc<Api>, req: &Req, stream: String, expected: i64, events: Vec<NewEvent>) -> Reply {
    // The ACL check uses cached metadata and settings when it can (the usual case); otherwise it
    // reads them on the blocking pool. The append then joins the group commit from this task.
    let access = match api.node.auth().check_cached(req.principal.as_ref(), &stream, Operation::Write) {
        Some(access) => Ok(access),
        None => {
            let (a, p, s) = (api.clone(), req.principal.clone(), stream.clone());
            api.node.env().blocking(move || a.node.auth().check(p.as_ref(), &s, Operation::Write)).await
        }
    };
    let count = events.len() as u64;
    let bytes = events.iter().map(|e| (e.data.len() + e.metadata.len()) as u64).sum();
    let r: Result<Option<WriteResult>, WriteError> = match access {
        Ok(access) if access.allowed => {
            api.node.store().append_async(&stream, expected, events).await.map(Some)
        }
        Ok(_) => Ok(None),
        Err(e) => Err(e.into()),
    };
    if matches!(r, Ok(Some(_))) {
        api.node.metrics().events(crate::metrics::Activity::Append, count, bytes);
    }
    match r {
        Ok(Some(w)) => Reply::plain(StatusCode::CREATED, "Created")
            .header("location", event_uri(&req.base, &stream, w.first_event_number)),
        Ok(None) => Reply::unauthorized(),
        Err(e) => errors::write(&e, WriteKind::Append),
    }
}

/// `POST /streams/{s}` and `POST /streams/{s}/incoming/{guid}`.
pub async fn append(api: &Arc<Api>, req: &mut Req, stream: String, incoming: Option<String>) -> Reply {
    match append_inner(api, req, stream, incoming).await {
        Ok(r) | Err(r) => r,
    }
}

async fn append_inner(
    api: &Arc<Api>,
    req: &mut Req,
    stream: String,
    incoming: Option<String>,
) -> Result<Reply, Reply> {
    let shape = shape(req.body_media.unwrap_or(Media::Json), incoming.is_some());
    let single = !matches!(shape, Shape::JsonBatch | Shape::XmlBatch);
    let event_type = req.es_header("eventtype", None).map(str::to_owned);
    if single && event_type.as_deref().is_none_or(str::is_empty) {
        return Err(Reply::bad_request(
            "Must include an event type with the request either in body or as ES-EventType header.",
        ));
    }
    let header_id = header_event_id(req)?;
    let id = match &incoming {
        Some(g) => Some(
            uuid::Uuid::parse_str(g)
                .map_err(|_| Reply::bad_request(format!("'{g}' is not a valid event id")))?,
        ),
        None => header_id,
    };
    if single && id.is_none() {
        let target = format!("{}/incoming/{}", req.url(), api.node.env().new_uuid());
        return Ok(Reply::body(
            StatusCode::TEMPORARY_REDIRECT,
            Media::TextPlain,
            "Forwarding to idempotent URI",
        )
        .reason("Temporary Redirect")
        .header("location", target));
    }
    let expected = req.expected_version()?;
    req.require_master()?;
    let body = req.take_body()?;
    let events = events(shape, body, id, event_type)?;
    Ok(write(api, req, stream, expected, events).await)
}

/// `DELETE /streams/{s}`.
pub async fn delete(api: &Arc<Api>, req: &mut Req, stream: String) -> Reply {
    let parsed = (
        req.expected_version(),
        req.bool_header("harddelete", "ES-HardDelete", None, false),
        req.require_master(),
    );
    let (expected, hard) = match parsed {
        (Ok(e), Ok(h), Ok(_)) => (e, h),
        (Err(r), _, _) | (_, Err(r), _) | (_, _, Err(r)) => return r,
    };
    let (a, p, s) = (api.clone(), req.principal.clone(), stream.clone());
    let allowed =
        api.node.env().blocking(move || a.node.auth().check(p.as_ref(), &s, Operation::Delete)).await;
    // The delete waits without holding a thread: on a cluster leader it waits for a quorum (and
    // the simulator, running blocking work inline, could not wait for one on a thread).
    let r: Result<bool, WriteError> = match allowed {
        Ok(acc) if !acc.allowed => Ok(false),
        Ok(_) => api.node.store().write_async(WriteOp::Delete { stream, expected, hard }).await.map(|_| true),
        Err(e) => Err(e.into()),
    };
    match r {
        Ok(true) => Reply::plain(StatusCode::NO_CONTENT, "Stream deleted"),
        Ok(false) => Reply::unauthorized(),
        Err(e) => errors::write(&e, WriteKind::Delete),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_payloads_follow_v5() {
        let body = br#"[{"EventID":"fbf4a1a1-b4a3-4dfe-a01f-ec52c34e16e4","eventType":"a","data":{"x":1},"metadata":"text"},
            {"eventId":"0b7e8f0e-6b5b-4b8b-9b1a-1b9b6b1c2d3e","eventType":"b","data":"{\"y\":2}"},
            {"eventId":"1b7e8f0e-6b5b-4b8b-9b1a-1b9b6b1c2d3e","eventType":"c","data":5}]"#;
        let evs = json_batch(body).unwrap();
        assert_eq!(evs.len(), 3);
        assert!(evs[0].is_json && &evs[0].data[..] == br#"{"x":1}"# && &evs[0].metadata[..] == b"text");
        assert!(evs[1].is_json && &evs[1].data[..] == br#"{"y":2}"#);
        assert!(!evs[2].is_json && evs[2].data.is_empty());
        let r = json_batch(br#"[{"eventType":"a"}]"#).unwrap_err();
        assert_eq!(r.reason.as_deref(), Some("Empty eventId provided."));
        let r = json_batch(br#"[{"eventId":"fbf4a1a1-b4a3-4dfe-a01f-ec52c34e16e4"}]"#).unwrap_err();
        assert_eq!(r.reason.as_deref(), Some("Empty eventType provided."));
        assert_eq!(json_batch(b"{}").unwrap_err().reason.as_deref(), Some(INVALID_BODY));
        assert_eq!(
            json_batch(br#"[{"eventId":"zz","eventType":"a"}]"#).unwrap_err().reason.as_deref(),
            Some(INVALID_BODY)
        );
        let x = xml_batch(
            b"<Events><Event><EventId>fbf4a1a1-b4a3-4dfe-a01f-ec52c34e16e4</EventId><EventType>t</EventType>\
              <Data><a>1</a></Data></Event></Events>",
        )
        .unwrap();
        assert!(x[0].is_json && &x[0].data[..] == br#"{"a":"1"}"#);
    }
}
