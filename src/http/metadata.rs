//! Stream metadata over HTTP, as EventStoreDB v5 serves it: `GET` reads the latest
//! `$$s` event as a single event, `POST` appends to `$$s` with the type forced to `$metadata`.
//! Access goes through `$mr`/`$mw` of `s` (see [`crate::auth::acl`]).

use std::sync::Arc;

use http::StatusCode;

use super::errors;
use super::reply::Reply;
use super::request::Req;
use super::streams::{self, Outcome};
use super::writes::{self, Shape};
use super::Api;
use crate::store::ReadError;

fn meta_of_meta() -> Reply {
    Reply::bad_request("Metadata of a metadata stream cannot be addressed with /metadata")
}

/// `GET /streams/{s}/metadata`.
pub async fn get(api: &Arc<Api>, req: &mut Req, stream: String) -> Reply {
    if stream.starts_with("$$") {
        return meta_of_meta();
    }
    let resolve = match (req.resolve_links(), req.require_master()) {
        (Ok(r), Ok(_)) => r,
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let (a, p) = (api.clone(), req.principal.clone());
    let env = api.node.env().clone();
    let outcome = env
        .blocking(move || {
            let meta = format!("$${stream}");
            match streams::read_one(&a, p.as_ref(), &meta, -1, resolve) {
                Outcome::Done(None) | Outcome::Failed(ReadError::NoStream) => {
                    // No metadata: an existing stream answers an empty document.
                    match a.node.store().stream_state(&stream) {
                        Ok(st) if st.is_tombstoned() => Outcome::Failed(ReadError::StreamDeleted),
                        Ok(st) if st.last >= 0 => Outcome::Done(None),
                        Ok(_) => Outcome::Failed(ReadError::NoStream),
                        Err(e) => Outcome::Failed(ReadError::Storage(e)),
                    }
                }
                Outcome::Done(Some(one)) => Outcome::Done(Some(one)),
                Outcome::NotModified => Outcome::NotModified,
                Outcome::Denied => Outcome::Denied,
                Outcome::Failed(e) => Outcome::Failed(e),
            }
        })
        .await;
    match outcome {
        Outcome::Done(Some(one)) => streams::single_reply(req, &one, true, resolve),
        Outcome::Done(None) => {
            let body: &'static [u8] = if req.media.is_json() { b"{}" } else { b"" };
            Reply::body(StatusCode::OK, req.media, body).header("vary", "Accept")
        }
        Outcome::NotModified => Reply::plain(StatusCode::NOT_MODIFIED, "Not Modified"),
        Outcome::Denied => Reply::unauthorized(),
        Outcome::Failed(e) => errors::read(&e, Some(req.media)),
    }
}

/// `POST /streams/{s}/metadata`.
pub async fn post(api: &Arc<Api>, req: &mut Req, stream: String) -> Reply {
    match post_inner(api, req, stream).await {
        Ok(r) | Err(r) => r,
    }
}

async fn post_inner(api: &Arc<Api>, req: &mut Req, stream: String) -> Result<Reply, Reply> {
    if stream.starts_with("$$") {
        return Err(meta_of_meta());
    }
    let shape = writes::shape(req.body_media.unwrap_or(super::media::Media::Json), false);
    if req.es_header("eventtype", None).is_some_and(|t| t != "$metadata") {
        return Err(Reply::bad_request("ES-EventType header in wrong format."));
    }
    let id = writes::header_event_id(req)?;
    let expected = req.expected_version()?;
    req.require_master()?;
    let body = req.take_body()?;
    let events = writes::events(shape, body, id, Some("$metadata".into()))?;
    if matches!(shape, Shape::JsonBatch | Shape::XmlBatch) && events.is_empty() {
        return Err(Reply::bad_request("Write request body invalid."));
    }
    Ok(writes::write(api, req, format!("$${stream}"), expected, events).await)
}
