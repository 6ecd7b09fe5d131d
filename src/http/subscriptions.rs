//! The persistent subscription routes' handlers: settings bodies, the competing-consumer feed
//! (`application/vnd.eventstore.competingatom+json` and `+xml`, entries with `ack` and `nack`
//! links), the summary and info documents, acks and nacks.
//!
//! Links are absolute, built from the request's base URL, so clients post to them as given. A
//! poll names its consumer with `?consumer=` (by default the caller's login); the feed's `self`
//! and `previous` links keep it.

use std::sync::Arc;

use http::StatusCode;
use serde_json::{json, Value};

use super::errors;
use super::feed::{self, Embed, Feed, Link};
use super::media::Media;
use super::node_info::document;
use super::reply::Reply;
use super::request::Req;
use super::text::escape;
use crate::subscriptions::core::{MessageId, NackAction};
use crate::subscriptions::settings::Settings;
use crate::subscriptions::{parked_stream, GroupView, Subscriptions, POLL_COUNT_MAX};

fn group_url(base: &str, stream: &str, group: &str) -> String {
    format!("{base}/subscriptions/{}/{}", escape(stream), escape(group))
}

fn login(req: &Req) -> &str {
    req.principal.as_ref().map_or("anonymous", |p| p.login.as_str())
}

fn settings(req: &mut Req) -> Result<Settings, Reply> {
    let body = req.take_body()?;
    Settings::from_body(&body).map_err(Reply::bad_request)
}

/// `PUT /subscriptions/{stream}/{group}`: 201 with the group's URL.
pub async fn create(subs: &Subscriptions, req: &mut Req, stream: &str, group: &str) -> Reply {
    let s = match settings(req) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match subs.create(stream, group, s, login(req)).await {
        Ok(()) => Reply::status(StatusCode::CREATED, "Subscription group created")
            .header("location", group_url(&req.base, stream, group)),
        Err(e) => errors::subscription(&e),
    }
}

/// `POST /subscriptions/{stream}/{group}`: 200 with the group's URL.
pub async fn update(subs: &Subscriptions, req: &mut Req, stream: &str, group: &str) -> Reply {
    let s = match settings(req) {
        Ok(s) => s,
        Err(r) => return r,
    };
    match subs.update(stream, group, s, login(req)).await {
        Ok(()) => Reply::status(StatusCode::OK, "Subscription group updated")
            .header("location", group_url(&req.base, stream, group)),
        Err(e) => errors::subscription(&e),
    }
}

/// `DELETE /subscriptions/{stream}/{group}`.
pub async fn delete(subs: &Subscriptions, req: &Req, stream: &str, group: &str) -> Reply {
    match subs.delete(stream, group, login(req)).await {
        Ok(()) => Reply::status(StatusCode::OK, "Subscription group deleted"),
        Err(e) => errors::subscription(&e),
    }
}

fn parked_uri(base: &str, stream: &str, group: &str) -> String {
    format!("{base}/streams/{}", escape(&parked_stream(stream, group)))
}

fn summary(base: &str, v: &GroupView) -> Value {
    let url = group_url(base, &v.stream, &v.group);
    let s = &v.snapshot;
    json!({
        "links": [{"href": format!("{url}/info"), "rel": "detail"}],
        "eventStreamId": v.stream,
        "groupName": v.group,
        "parkedMessageUri": parked_uri(base, &v.stream, &v.group),
        "getMessagesUri": format!("{url}/1"),
        "status": s.status,
        "averageItemsPerSecond": s.average_per_second,
        "totalItemsProcessed": s.processed,
        "lastProcessedEventNumber": s.last_processed,
        "lastKnownEventNumber": s.last_known,
        "connectionCount": s.consumers.len(),
        "totalInFlightMessages": s.in_flight,
    })
}

/// `GET /subscriptions` and `GET /subscriptions/{stream}` (404 for a stream without groups).
pub fn list(subs: &Subscriptions, req: &Req, stream: Option<&str>) -> Reply {
    match subs.groups(stream, true) {
        Ok(groups) if groups.is_empty() && stream.is_some() => {
            Reply::status(StatusCode::NOT_FOUND, "Not Found")
        }
        Ok(groups) => {
            let items: Vec<Value> = groups.iter().map(|g| summary(&req.base, g)).collect();
            document(req, "subscriptions", &Value::Array(items))
        }
        Err(e) => errors::subscription(&e),
    }
}

/// `GET /subscriptions/{stream}/{group}/info`.
pub async fn info(subs: &Subscriptions, req: &Req, stream: &str, group: &str) -> Reply {
    let v = match subs.group(stream, group) {
        Ok(v) => v,
        Err(e) => return errors::subscription(&e),
    };
    let parked = match subs.parked_count(stream, group).await {
        Ok(n) => n,
        Err(e) => return errors::subscription(&e),
    };
    let url = group_url(&req.base, stream, group);
    let s = &v.snapshot;
    let connections: Vec<Value> = s
        .consumers
        .iter()
        .map(|c| {
            json!({
                "from": c.name,
                "username": c.user,
                "averageItemsPerSecond": c.average_per_second,
                "totalItemsProcessed": c.processed,
                "countSinceLastMeasurement": c.count_since,
                "extraStatistics": [],
                "availableSlots": c.available_slots,
                "inFlightMessages": c.in_flight,
            })
        })
        .collect();
    let (read_buffer, live_buffer) = if s.live { (0, s.buffered) } else { (s.buffered, 0) };
    let doc = json!({
        "links": [
            {"href": format!("{url}/info"), "rel": "detail"},
            {"href": format!("{url}/replayParked"), "rel": "replayParked"},
        ],
        "config": v.settings.info_json(),
        "eventStreamId": stream,
        "groupName": group,
        "status": s.status,
        "averageItemsPerSecond": s.average_per_second,
        "parkedMessageUri": parked_uri(&req.base, stream, group),
        "getMessagesUri": format!("{url}/1"),
        "totalItemsProcessed": s.processed,
        "countSinceLastMeasurement": s.count_since,
        "lastProcessedEventNumber": s.last_processed,
        "lastKnownEventNumber": s.last_known,
        "readBufferCount": read_buffer,
        "liveBufferCount": live_buffer,
        "retryBufferCount": s.retry,
        "totalInFlightMessages": s.in_flight,
        "outstandingMessagesCount": s.in_flight + s.parking,
        "parkedMessageCount": parked,
        "connections": connections,
    });
    document(req, "subscriptionInfo", &doc)
}

/// `GET /subscriptions/{stream}/{group}[/{count}]`: takes up to `count` (1 to 100, default 1)
/// messages for the polling consumer.
pub async fn read(subs: &Subscriptions, req: &Req, stream: &str, group: &str, count: Option<&str>) -> Reply {
    let count = match count.map(|c| c.parse::<i64>()) {
        None => 1,
        Some(Ok(n)) if (1..=POLL_COUNT_MAX as i64).contains(&n) => n as usize,
        Some(_) => return Reply::bad_request(format!("count must be an integer from 1 to {POLL_COUNT_MAX}")),
    };
    let consumer = req.query("consumer").filter(|c| !c.is_empty()).unwrap_or(login(req)).to_owned();
    let (msgs, resolve) = match subs.poll(stream, group, &consumer, login(req), count).await {
        Ok(x) => x,
        Err(e) => return errors::subscription(&e),
    };
    let url = group_url(&req.base, stream, group);
    let keep = req.query("consumer").map(|c| format!("?consumer={}", escape(c))).unwrap_or_default();
    let id_of = |id: &MessageId| uuid::Uuid::from_bytes(*id).to_string();
    // Newest first.
    let newest: Vec<_> = msgs.iter().rev().collect();
    let mut links = Vec::new();
    if !newest.is_empty() {
        let all = newest.iter().map(|m| id_of(&m.id)).collect::<Vec<_>>().join(",");
        links.push(Link { uri: format!("{url}/ack?ids={all}"), relation: "ackAll" });
        links.push(Link { uri: format!("{url}/nack?ids={all}"), relation: "nackAll" });
    }
    links.push(Link { uri: format!("{url}/{count}{keep}"), relation: "previous" });
    links.push(Link { uri: format!("{url}{keep}"), relation: "self" });
    let f = Feed {
        title: format!("Messages for '{stream}/{group}'"),
        id: format!("{url}{keep}"),
        updated_us: newest.iter().map(|m| m.event.original().timestamp_us).max(),
        stream_id: None,
        head_of_stream: false,
        self_url: None,
        etag: None,
        links,
        entries: newest.iter().map(|m| (*m.event).clone()).collect(),
        resolve,
    };
    let extra: Vec<Vec<Link>> = newest
        .iter()
        .map(|m| {
            let id = id_of(&m.id);
            vec![
                Link { uri: format!("{url}/ack/{id}"), relation: "ack" },
                Link { uri: format!("{url}/nack/{id}"), relation: "nack" },
            ]
        })
        .collect();
    let embed = Embed::parse(req.query("embed"));
    let body = match req.media {
        Media::CompetingXml => feed::feed_xml_with(&f, &req.base, embed, &extra).into_bytes(),
        _ => {
            let mut doc = feed::feed_json(&f, &req.base, embed);
            if let Some(entries) = doc.get_mut("entries").and_then(Value::as_array_mut) {
                for (entry, more) in entries.iter_mut().zip(&extra) {
                    if let Some(Value::Array(l)) = entry.get_mut("links") {
                        l.extend(feed::links_json(more).as_array().into_iter().flatten().cloned());
                    }
                }
            }
            serde_json::to_vec(&doc).unwrap_or_default()
        }
    };
    Reply::body(StatusCode::OK, req.media, body)
}

/// Message ids of an ack or nack: the path's one, or `?ids=` (comma-separated).
fn ids(req: &Req, id: Option<&str>) -> Result<Vec<MessageId>, Reply> {
    let list = match id {
        Some(id) => id.to_owned(),
        None => req.query("ids").unwrap_or("").to_owned(),
    };
    let parsed: Result<Vec<MessageId>, Reply> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            uuid::Uuid::parse_str(s)
                .map(|u| *u.as_bytes())
                .map_err(|_| Reply::bad_request(format!("Message id '{s}' is not a GUID")))
        })
        .collect();
    match parsed {
        Ok(v) if v.is_empty() => Err(Reply::bad_request("No message ids given")),
        r => r,
    }
}

fn accepted() -> Reply {
    Reply::status(StatusCode::ACCEPTED, "Accepted")
}

/// `POST …/ack[/{id}]`: 202 whether or not the group and ids are known (as v5).
pub fn ack(subs: &Subscriptions, req: &Req, stream: &str, group: &str, id: Option<&str>) -> Reply {
    match ids(req, id) {
        Ok(ids) => {
            subs.ack(stream, group, &ids);
            accepted()
        }
        Err(r) => r,
    }
}

/// `POST …/nack[/{id}]?action=park|retry|skip|stop`.
pub fn nack(subs: &Subscriptions, req: &Req, stream: &str, group: &str, id: Option<&str>) -> Reply {
    match ids(req, id) {
        Ok(ids) => {
            subs.nack(stream, group, &ids, NackAction::parse(req.query("action")));
            accepted()
        }
        Err(r) => r,
    }
}

/// `POST …/replayParked`.
pub async fn replay_parked(subs: &Arc<Subscriptions>, stream: &str, group: &str) -> Reply {
    match subs.replay_parked(stream, group).await {
        Ok(()) => Reply::status(StatusCode::OK, "Replaying parked messages"),
        Err(e) => errors::subscription(&e),
    }
}
