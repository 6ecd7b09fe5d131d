//! Projections over HTTP: the routes off with `RunProjections None`, the system projections'
//! exact output (snapshots of the streams they write), the list and statistics documents,
//! commands and their credentials, configuration and query updates, and a restart that
//! processes the log again from the last checkpoint without writing any link twice.

#[path = "http_support/mod.rs"]
mod support;

use std::time::Duration;

use annal::config::RunProjections;
use serde_json::{json, Value};
use support::{new_id, start, start_with, Server, ADMIN, OPS};

const EVENTS: &str = "application/vnd.eventstore.events+json";
/// `bob:secret`, a user in no group.
const BOB: (&str, &str) = ("authorization", "Basic Ym9iOnNlY3JldA==");

async fn start_all() -> Server {
    start_with(|c| {
        c.run_projections = RunProjections::All;
        c.start_standard_projections = true;
    })
    .await
}

async fn append(s: &Server, stream: &str, events: Value) {
    let r = s.post(&format!("/streams/{stream}"), EVENTS, &[ADMIN], events.to_string().as_bytes()).await;
    assert_eq!(r.status, 201, "{r:?}");
}

fn event(ty: &str, meta: Value) -> Value {
    json!({"eventId": new_id(), "eventType": ty, "data": {"a": 1}, "metadata": meta})
}

async fn caught_up(s: &Server) {
    assert!(s.node.projections().wait_caught_up(Duration::from_secs(30)).await, "projections caught up");
}

/// A stream as `[type, data, metadata]` rows, ids and times replaced.
fn read_stream(s: &Server, stream: &str) -> Vec<Value> {
    support::stream_rows(s, stream)
        .into_iter()
        .map(|(event_type, data, mut meta)| {
            if let Some(m) = meta.as_object_mut() {
                for k in ["$causedBy", "$eventTimestamp"] {
                    if m.contains_key(k) {
                        m.insert(k.into(), json!(format!("[{k}]")));
                    }
                }
                for k in ["$c", "$p"] {
                    if m.contains_key(k) {
                        m.insert(k.into(), json!("[position]"));
                    }
                }
            }
            json!([event_type, data, meta])
        })
        .collect()
}

/// Writes the history every output test starts from.
async fn history(s: &Server) {
    append(
        s,
        "order-1",
        json!([event("Placed", json!({"$correlationId": "c-1"})), event("Paid", json!({}))]),
    )
    .await;
    append(s, "order-2", json!([event("Placed", json!({"$correlationId": "c-1"}))])).await;
    append(s, "account-1", json!([event("Opened", json!({}))])).await;
    append(s, "nodash", json!([event("Placed", json!({}))])).await;
    // A link written by a user is categorised by its own stream and points at its target.
    let link = json!([{"eventId": new_id(), "eventType": "$>", "data": "1@order-1"}]);
    append(s, "copy-1", link).await;
    // A soft delete and a hard delete.
    let r = s.request("DELETE", "/streams/order-2", &[ADMIN], b"").await;
    assert_eq!(r.status, 204, "{r:?}");
    let r = s.request("DELETE", "/streams/account-1", &[ADMIN, ("es-harddelete", "true")], b"").await;
    assert_eq!(r.status, 204, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_do_not_exist_without_projections() {
    let s = start().await;
    for path in ["/projections/any", "/projection/$by_category", "/projection/$by_category/statistics"] {
        let r = s.get(path, &[ADMIN]).await;
        assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"), "{path}");
    }
    let r = s.request("POST", "/projection/$by_category/command/enable", &[ADMIN], b"").await;
    assert_eq!(r.status, 404);
    let body = br#"{"query": {"allStreams": true, "allEvents": true}}"#;
    let r = s.post("/projections/read-events", "application/json", &[ADMIN], body).await;
    assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"));
    assert_eq!(s.get("/info", &[]).await.json()["projectionsMode"], "None");
    // Nothing of projections is written either.
    assert!(read_stream(&s, "$projections-$all").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_projections_write_their_streams() {
    let s = start_all().await;
    history(&s).await;
    caught_up(&s).await;
    let mut out = serde_json::Map::new();
    for stream in [
        "$ce-order",
        "$ce-copy",
        "$ce-account",
        "$category-order",
        "$category-account",
        "$et-Placed",
        "$et-Paid",
        "$et-$deleted",
        "$bc-c-1",
    ] {
        out.insert(stream.into(), Value::Array(read_stream(&s, stream)));
    }
    insta::assert_json_snapshot!("system_projection_streams", out);
    // `$streams` links event 0 of every stream, its own and the projections' included.
    let streams: Vec<String> =
        read_stream(&s, "$streams").iter().map(|e| e[1].as_str().unwrap().to_owned()).collect();
    for user in
        ["0@order-1", "0@order-2", "0@account-1", "0@nodash", "0@copy-1", "0@$ce-order", "0@$$order-2"]
    {
        assert!(streams.contains(&user.to_string()), "{user} in {streams:?}");
    }
    let mut seen = streams.clone();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), streams.len(), "no stream twice");
    // The registry and the definitions.
    let registry = read_stream(&s, "$projections-$all");
    let created: Vec<&str> = registry.iter().skip(1).map(|e| e[1].as_str().unwrap()).collect();
    assert_eq!(registry[0][0], "$ProjectionsInitialized");
    assert_eq!(
        created,
        ["$streams", "$stream_by_category", "$by_category", "$by_event_type", "$by_correlation_id"]
    );
}

/// Replaces what moves with timing (positions, progress, counts) in statistics documents.
fn scrub_stats(v: &mut Value) {
    if let Some(items) = v["projections"].as_array_mut() {
        items.iter_mut().for_each(scrub_stat);
    }
}

fn scrub_stat(v: &mut Value) {
    for k in [
        "position",
        "lastCheckpoint",
        "progress",
        "eventsProcessedAfterRestart",
        "bufferedEvents",
        "checkpointStatus",
    ] {
        v[k] = json!(format!("[{k}]"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_statistics_documents() {
    let s = start_all().await;
    history(&s).await;
    caught_up(&s).await;
    let r = s.get("/projections/any", &[ADMIN]).await;
    assert_eq!(r.status, 200);
    let mut any = r.json();
    assert_eq!(any["projections"].as_array().unwrap().len(), 5);
    assert!(any["projections"].as_array().unwrap().iter().all(|p| p["status"] == "Running"));
    scrub_stats(&mut any);
    insta::assert_json_snapshot!("list_any", any);
    for (kind, n) in [("all-non-transient", 5), ("continuous", 5), ("onetime", 0), ("transient", 0)] {
        let r = s.get(&format!("/projections/{kind}"), &[ADMIN]).await;
        assert_eq!(r.json()["projections"].as_array().unwrap().len(), n, "{kind}");
    }
    let r = s.get("/projection/$by_category/statistics", &[OPS]).await;
    assert_eq!(r.json()["projections"][0]["name"], "$by_category");
    let r = s.get("/projection/$by_category", &[ADMIN]).await;
    let stat = r.json();
    assert_eq!(
        (stat["name"].as_str(), stat["epoch"].as_i64(), stat["version"].as_i64()),
        (Some("$by_category"), Some(-1), Some(1))
    );
    assert!(stat["position"].as_str().unwrap().starts_with("C:"), "{stat}");
    let r = s.get("/projection/$by_category/state", &[ADMIN]).await;
    assert_eq!((r.status, r.body.len()), (200, 0));
    assert!(r.header("es-position").unwrap().starts_with("{\"$c\":"), "{r:?}");
    assert_eq!(s.get("/projection/$by_category/result?partition=x", &[ADMIN]).await.status, 200);
    let r = s.get("/projection/$by_category/query?config=yes", &[ADMIN]).await;
    insta::assert_json_snapshot!("query_config", r.json());
    let r = s.get("/projection/$by_category/query", &[ADMIN]).await;
    assert_eq!(r.text(), "first\r\n-");
    let r = s.get("/projection/$by_category/config", &[ADMIN]).await;
    insta::assert_json_snapshot!("config", r.json());
    // Credentials and unknown names.
    assert_eq!(s.get("/projections/any", &[]).await.status, 401);
    assert_eq!(s.get("/projection/nope", &[ADMIN]).await.status, 404);
    assert_eq!(s.get("/projection/nope/state", &[ADMIN]).await.status, 404);
    assert_eq!(s.get("/projections/nope", &[ADMIN]).await.status, 404);
    // JavaScript projections are created (tests/js_projections.rs covers them); a bad type is not.
    let r = s.request("POST", "/projections/continuous?name=x&type=JS", &[ADMIN], b"fromAll()").await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = s.request("POST", "/projections/continuous?name=y&type=native", &[ADMIN], b"").await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(s.request("POST", "/projections/continuous", &[], b"fromAll()").await.status, 401);
    assert_eq!(s.request("POST", "/projections/onetime?emit=maybe", &[ADMIN], b"").await.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_configuration_and_credentials() {
    let s = start_all().await;
    let bob = json!({"loginName": "bob", "fullName": "Bob", "groups": [], "password": "secret"}).to_string();
    assert_eq!(s.post("/users", "application/json", &[ADMIN], bob.as_bytes()).await.status, 201);
    append(&s, "order-1", json!([event("Placed", json!({})), event("Paid", json!({}))])).await;
    caught_up(&s).await;
    let cmd = |c: &'static str| format!("/projection/$by_category/command/{c}");
    let status = |s: &Server| {
        let c = s.client;
        async move {
            c.get("/projection/$by_category", &[ADMIN]).await.json()["status"].as_str().unwrap().to_owned()
        }
    };
    // Any user reads; only $ops and $admins command a system projection or change it.
    assert_eq!(s.get("/projection/$by_category", &[BOB]).await.status, 200);
    assert_eq!(s.request("POST", &cmd("disable"), &[BOB], b"").await.status, 401);
    assert_eq!(s.request("POST", &cmd("disable"), &[], b"").await.status, 401);
    assert_eq!(s.request("PUT", "/projection/$by_category/config", &[BOB], b"{}").await.status, 401);
    assert_eq!(s.request("PUT", "/projection/$by_category/query", &[BOB], b"last\n-").await.status, 401);
    assert_eq!(
        s.request("POST", &format!("{}?enableRunAs=perhaps", cmd("enable")), &[ADMIN], b"").await.status,
        400
    );
    // The configuration changes only while stopped.
    let r = s
        .request("PUT", "/projection/$by_category/config", &[ADMIN], br#"{"checkpointHandledThreshold":2}"#)
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "Cannot update the config of a projection that hasn't been stopped or faulted.")
    );
    let r = s.request("POST", &cmd("disable"), &[OPS], b"").await;
    assert_eq!((r.status, r.json()), (200, json!({"name": "$by_category"})));
    assert_eq!(status(&s).await, "Stopped");
    // Disable wrote a final checkpoint.
    let cp = read_stream(&s, "$projections-$by_category-checkpoint");
    assert_eq!(cp.last().unwrap()[0], "$ProjectionCheckpoint");
    assert_eq!(cp.last().unwrap()[2]["$v"], "3:-1:1:4");
    let r = s
        .request(
            "PUT",
            "/projection/$by_category/config",
            &[ADMIN],
            br#"{"checkpointHandledThreshold":2,"maxWriteBatchLength":"x"}"#,
        )
        .await;
    assert_eq!(r.status, 400);
    let r = s
        .request("PUT", "/projection/$by_category/config", &[ADMIN], br#"{"checkpointHandledThreshold":2}"#)
        .await;
    assert_eq!((r.status, r.json()["checkpointHandledThreshold"].as_u64()), (200, Some(2)));
    assert_eq!(s.request("PUT", "/projection/$by_category/config", &[ADMIN], b"[1]").await.status, 400);
    // Events appended while disabled are linked once enabled again.
    append(&s, "order-2", json!([event("Placed", json!({}))])).await;
    assert_eq!(read_stream(&s, "$ce-order").len(), 2);
    assert_eq!(s.request("POST", &cmd("enable"), &[ADMIN], b"").await.status, 200);
    assert_eq!(s.request("POST", &cmd("enable"), &[ADMIN], b"").await.status, 200, "enable is idempotent");
    caught_up(&s).await;
    assert_eq!(status(&s).await, "Running");
    assert_eq!(read_stream(&s, "$ce-order").len(), 3);
    // A bad query is refused with its reason; a good one applies from the checkpoint on.
    let r = s.request("PUT", "/projection/$by_category/query", &[ADMIN], b"middle\n-").await;
    assert_eq!(r.status, 400);
    assert!(r.reason.contains("middle"), "{r:?}");
    let r = s.request("PUT", "/projection/$by_category/query?emit=yes", &[ADMIN], b"last\n-").await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(s.get("/projection/$by_category/query", &[ADMIN]).await.text(), "last\n-");
    append(&s, "a-b-1", json!([event("T", json!({}))])).await;
    caught_up(&s).await;
    assert_eq!(read_stream(&s, "$ce-a-b").len(), 1);
    // Reset: a new epoch; the log is processed again and the new links carry it.
    assert_eq!(s.request("PUT", "/projection/$by_category/query", &[ADMIN], b"first\r\n-").await.status, 200);
    let r = s.request("POST", &cmd("reset"), &[ADMIN], b"").await;
    assert_eq!(r.status, 200);
    caught_up(&s).await;
    let stat = s.get("/projection/$by_category", &[ADMIN]).await.json();
    assert_eq!((stat["epoch"].as_i64(), stat["version"].as_i64()), (Some(5), Some(5)), "{stat}");
    let ce = read_stream(&s, "$ce-order");
    assert_eq!(ce.len(), 6, "three links of the first epoch, three of the new one");
    assert_eq!(ce[5][2]["$v"], "3:5:5:4");
    // Abort stops without a checkpoint.
    let before = read_stream(&s, "$projections-$by_category-checkpoint").len();
    assert_eq!(s.request("POST", &cmd("abort"), &[ADMIN], b"").await.status, 200);
    assert_eq!(status(&s).await, "Aborted");
    assert_eq!(read_stream(&s, "$projections-$by_category-checkpoint").len(), before);
    // Delete: system projections stay; unknown ones are not found.
    let r = s.request("DELETE", "/projection/$by_category", &[ADMIN], b"").await;
    assert_eq!(r.status, 500);
    assert_eq!(s.request("DELETE", "/projection/nope", &[ADMIN], b"").await.status, 404);
    assert_eq!(s.request("DELETE", "/projection/$by_category", &[BOB], b"").await.status, 401);
    assert_eq!(s.request("POST", "/projection/nope/command/enable", &[ADMIN], b"").await.status, 404);
    // The definition persisted every change.
    let defs = read_stream(&s, "$projections-$by_category");
    let last: Value = serde_json::from_str(defs.last().unwrap()[1].as_str().unwrap()).unwrap();
    assert_eq!((last.get("enabled"), last["epoch"].as_i64()), (None, Some(5)), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_writes_no_link_twice() {
    let s = start_all().await;
    for i in 0..30 {
        append(
            &s,
            &format!("order-{}", i % 3),
            json!([event("Placed", json!({})), event("Paid", json!({}))]),
        )
        .await;
    }
    caught_up(&s).await;
    let count = |s: &Server, stream: &str| read_stream(s, stream).len();
    assert_eq!((count(&s, "$ce-order"), count(&s, "$et-Placed")), (60, 30));
    // No checkpoint yet (fewer than 4000 events): the restart processes everything again.
    assert!(read_stream(&s, "$projections-$by_category-checkpoint").is_empty());
    let s = s.restart().await;
    caught_up(&s).await;
    assert_eq!(
        (count(&s, "$ce-order"), count(&s, "$et-Placed"), count(&s, "$streams")),
        (60, 30, count(&s, "$streams"))
    );
    let streams: Vec<Value> = read_stream(&s, "$streams");
    let mut names: Vec<&str> = streams.iter().map(|e| e[1].as_str().unwrap()).collect();
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "no stream linked twice in $streams");
    append(&s, "order-9", json!([event("Placed", json!({}))])).await;
    caught_up(&s).await;
    assert_eq!((count(&s, "$ce-order"), count(&s, "$et-Placed")), (61, 31));
    // The links are in source order.
    let ce = read_stream(&s, "$ce-order");
    assert_eq!(ce.last().unwrap()[1], "0@order-9");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_write_batches_chain_within_one_round() {
    let s = start_all().await;
    let events: Vec<Value> = (0..20).map(|_| event("Placed", json!({}))).collect();
    append(&s, "order-1", Value::Array(events)).await;
    caught_up(&s).await;
    let cmd = |c: &str| format!("/projection/$by_category/command/{c}");
    assert_eq!(s.request("POST", &cmd("disable"), &[ADMIN], b"").await.status, 200);
    let r =
        s.request("PUT", "/projection/$by_category/config", &[ADMIN], br#"{"maxWriteBatchLength":3}"#).await;
    assert_eq!(r.json()["maxWriteBatchLength"], 3);
    // A reset processes the whole log again: its 20 links to `$ce-order` go as seven writes of
    // at most three, each expecting the version the one before leaves.
    assert_eq!(s.request("POST", &cmd("reset"), &[ADMIN], b"").await.status, 200);
    assert_eq!(s.request("POST", &cmd("enable"), &[ADMIN], b"").await.status, 200);
    caught_up(&s).await;
    let ce = read_stream(&s, "$ce-order");
    assert_eq!(ce.len(), 40);
    let again: Vec<&str> = ce[20..].iter().map(|e| e[1].as_str().unwrap()).collect();
    let want: Vec<String> = (0..20).map(|n| format!("{n}@order-1")).collect();
    assert_eq!(again, want);
    assert!(ce[20..].iter().all(|e| e[2]["$v"] == "3:3:3:4"), "{:?}", ce[20]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_resumes_from_the_checkpoint() {
    let s = start_with(|c| {
        c.run_projections = RunProjections::System;
        c.start_standard_projections = true;
    })
    .await;
    let cmd = |c: &str| format!("/projection/$by_event_type/command/{c}");
    assert_eq!(s.request("POST", &cmd("disable"), &[ADMIN], b"").await.status, 200);
    let r = s
        .request("PUT", "/projection/$by_event_type/config", &[ADMIN], br#"{"checkpointHandledThreshold":5}"#)
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.request("POST", &cmd("enable"), &[ADMIN], b"").await.status, 200);
    for i in 0..12 {
        append(&s, &format!("item-{i}"), json!([event("Added", json!({}))])).await;
        caught_up(&s).await;
    }
    let checkpoints = read_stream(&s, "$projections-$by_event_type-checkpoint");
    assert!(!checkpoints.is_empty(), "checkpoints every five handled events");
    assert_eq!(read_stream(&s, "$et")[0][0], "$Checkpoint");
    let mut stat = s.get("/projection/$by_event_type", &[ADMIN]).await.json();
    let mut appended = 12;
    if stat["lastCheckpoint"] == stat["position"] {
        // On a loaded machine the last checkpoint can cover every event appended (it is written
        // while the next batch is read); one more event, below the threshold, lies past it.
        append(&s, "item-12", json!([event("Added", json!({}))])).await;
        caught_up(&s).await;
        appended = 13;
        stat = s.get("/projection/$by_event_type", &[ADMIN]).await.json();
    }
    assert_ne!(stat["lastCheckpoint"], stat["position"], "events after the last checkpoint: {stat}");
    // Processed again from the last checkpoint after the restart: nothing twice.
    let s = s.restart().await;
    caught_up(&s).await;
    let added: Vec<String> =
        read_stream(&s, "$et-Added").iter().map(|e| e[1].as_str().unwrap().to_owned()).collect();
    let want: Vec<String> = (0..appended).map(|i| format!("0@item-{i}")).collect();
    assert_eq!(added, want);
    let stat = s.get("/projection/$by_event_type", &[ADMIN]).await.json();
    assert_eq!((stat["status"].as_str(), stat["epoch"].as_i64()), (Some("Running"), Some(-1)), "{stat}");
    // read-events needs no JavaScript: it answers with the system projections only too.
    let q = json!({"query": {"categories": ["item"], "events": ["Added"]}, "maxEvents": 3});
    let r = read_events(&s, &[ADMIN], &q).await;
    assert_eq!(
        (r.status, page_events(&r.json())),
        (200, vec!["item-0/0/Added".to_owned(), "item-1/0/Added".into(), "item-2/0/Added".into()])
    );
}

/// `POST /projections/read-events` with `body` as `auth`.
async fn read_events(s: &Server, auth: &[(&str, &str)], body: &Value) -> support::Resp {
    s.post("/projections/read-events", "application/json", auth, body.to_string().as_bytes()).await
}

/// A page's events as `stream/number/type`.
fn page_events(page: &Value) -> Vec<String> {
    page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}/{}/{}",
                e["eventStreamId"].as_str().unwrap(),
                e["eventNumber"],
                e["eventType"].as_str().unwrap()
            )
        })
        .collect()
}

/// Every event `query` selects, read `max` at a time from the start, each page going on from the
/// one before; the events and the last page's position.
async fn read_events_through(s: &Server, query: Value, max: u64) -> (Vec<String>, Value) {
    let mut position = json!({"$c": 0, "$p": -1});
    let mut out = Vec::new();
    for _ in 0..100 {
        let r =
            read_events(s, &[ADMIN], &json!({"query": query, "position": position, "maxEvents": max})).await;
        assert_eq!(r.status, 200, "{r:?}");
        let page = r.json();
        let events = page_events(&page);
        assert!(events.len() as u64 <= max, "{page}");
        // Each event's position reads on right after it.
        if let Some(e) = page["events"].as_array().unwrap().first() {
            let r = read_events(
                s,
                &[ADMIN],
                &json!({"query": query, "position": e["readerPosition"], "maxEvents": max}),
            )
            .await;
            let again = page_events(&r.json());
            if events.len() > 1 {
                assert_eq!(again.first(), events.get(1), "after {e}");
            } else {
                assert_ne!(again.first(), events.first(), "after {e}");
            }
        }
        position = page["readerPosition"].clone();
        if events.is_empty() {
            return (out, position);
        }
        out.extend(events);
    }
    panic!("read-events never reached the end");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_events_pages_a_query_source() {
    let s = start_all().await;
    history(&s).await;
    append(&s, "order-1", json!([event("Shipped", json!({}))])).await;
    caught_up(&s).await;
    let all = json!({"allStreams": true, "allEvents": true});
    let (events, end) = read_events_through(&s, all.clone(), 2).await;
    // The log's events of streams not starting with `$` (a link is passed over, a hard delete is
    // the stream's last event), as a `fromAll()` projection is handed them.
    assert_eq!(
        events,
        [
            "order-1/0/Placed",
            "order-1/1/Paid",
            "order-2/0/Placed",
            "account-1/0/Opened",
            "nodash/0/Placed",
            "account-1/9223372036854775807/$streamDeleted",
            "order-1/2/Shipped"
        ]
    );
    // The end is a log position ($c and $p alike) at most the committed end: the system
    // projections may commit their own records (in `$` streams, passed over) at any time, so
    // the reader may stop at, or after, the committed end read here.
    let at = |p: &Value| (p["$c"].as_u64().unwrap_or(u64::MAX), p["$p"].as_u64());
    let (end_c, end_p) = at(&end);
    assert_eq!(Some(end_c), end_p, "{end}");
    assert!(end_c <= s.node.store().log().committed(), "{end}");
    // From the end: nothing yet, a position no earlier; a new event comes on the next call.
    let r = read_events(&s, &[ADMIN], &json!({"query": all, "position": end})).await;
    assert_eq!((r.status, page_events(&r.json())), (200, vec![]));
    assert!(at(&r.json()["readerPosition"]).0 >= end_c, "{}", r.json());
    append(&s, "nodash", json!([event("Again", json!({}))])).await;
    let page = read_events(&s, &[ADMIN], &json!({"query": all, "position": end})).await.json();
    assert_eq!(page_events(&page), ["nodash/1/Again"]);
    let e = &page["events"][0];
    assert_eq!((&e["data"], &e["isJson"], e.get("linkMetadata")), (&json!({"a": 1}), &json!(true), None));
    // The page ends after its one event, or further on past system records behind it.
    assert!(at(&page["readerPosition"]).0 >= at(&e["readerPosition"]).0, "{page}");
    assert!(page["correlationId"].as_str().is_some_and(|c| c.len() == 36), "{page}");

    // One stream; a link in it is resolved, with its own metadata as linkMetadata.
    let (events, _) = read_events_through(&s, json!({"streams": ["order-1"], "allEvents": true}), 10).await;
    assert_eq!(events, ["order-1/0/Placed", "order-1/1/Paid", "order-1/2/Shipped"]);
    let page =
        read_events(&s, &[ADMIN], &json!({"query": {"streams": ["copy-1"], "allEvents": true}})).await.json();
    assert_eq!(page_events(&page), ["order-1/1/Paid"]);
    assert_eq!(page["events"][0]["linkMetadata"], json!(""));
    // With $includeLinks the link itself comes.
    let q = json!({"streams": ["copy-1"], "allEvents": true, "options": {"$includeLinks": true}});
    let page = read_events(&s, &[ADMIN], &json!({"query": q})).await.json();
    assert_eq!(page_events(&page), ["copy-1/0/$>"]);
    assert_eq!(page["events"][0]["data"], "1@order-1");
    // Several streams, in log order; a category; an event type filter.
    let q = json!({"streams": ["nodash", "order-2", "order-1"], "allEvents": true});
    let (events, _) = read_events_through(&s, q, 3).await;
    assert_eq!(
        events,
        [
            "order-1/0/Placed",
            "order-1/1/Paid",
            "order-2/0/Placed",
            "nodash/0/Placed",
            "order-1/2/Shipped",
            "nodash/1/Again"
        ]
    );
    let (events, _) = read_events_through(&s, json!({"categories": ["order"], "allEvents": true}), 1).await;
    assert_eq!(events, ["order-1/0/Placed", "order-1/1/Paid", "order-2/0/Placed", "order-1/2/Shipped"]);
    let q = json!({"allStreams": true, "events": ["Placed", "Again"], "byStreams": true});
    let (events, _) = read_events_through(&s, q, 2).await;
    assert_eq!(events, ["order-1/0/Placed", "order-2/0/Placed", "nodash/0/Placed", "nodash/1/Again"]);

    // v5's debugging flow: a projection's definition and its ES-Position, then what comes next.
    let r = s
        .request(
            "POST",
            "/projections/continuous?name=placed",
            &[ADMIN],
            b"fromCategory('order').when({Placed: function (s, e) { return s; }})",
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    caught_up(&s).await;
    let definition =
        s.get("/projection/placed/query?config=yes", &[ADMIN]).await.json()["definition"].clone();
    let r = s.get("/projection/placed/state", &[ADMIN]).await;
    let position: Value = serde_json::from_str(r.header("es-position").unwrap()).unwrap();
    let body = json!({"query": definition, "position": position, "maxEvents": 5});
    assert_eq!(page_events(&read_events(&s, &[ADMIN], &body).await.json()), Vec::<String>::new());
    append(&s, "order-3", json!([event("Paid", json!({})), event("Placed", json!({}))])).await;
    assert_eq!(page_events(&read_events(&s, &[ADMIN], &body).await.json()), ["order-3/1/Placed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_events_refuses_bad_requests() {
    let s = start_all().await;
    append(&s, "order-1", json!([event("Placed", json!({})), event("Paid", json!({}))])).await;
    let bob = json!({"loginName": "bob", "fullName": "Bob", "groups": [], "password": "secret"}).to_string();
    assert_eq!(s.post("/users", "application/json", &[ADMIN], bob.as_bytes()).await.status, 201);
    let all = json!({"allStreams": true, "allEvents": true});
    let bad = |body: &'static str| {
        let c = s.client;
        async move {
            let r = c.post("/projections/read-events", "application/json", &[ADMIN], body.as_bytes()).await;
            assert_eq!(r.status, 400, "{body}: {r:?}");
            r.reason
        }
    };
    assert!(bad("not json").await.starts_with("Invalid JSON"));
    assert!(bad("[1]").await.contains("JSON object"));
    assert!(bad("{}").await.contains("no query"));
    assert!(bad(r#"{"query": {"allEvents": true}}"#).await.contains("selects no events"));
    assert!(bad(r#"{"query": {"streams": ["a"]}}"#).await.contains("no event types"));
    assert!(bad(r#"{"query": {"allStreams": true, "streams": ["a"], "allEvents": true}}"#)
        .await
        .contains("cannot be set"));
    assert!(bad(r#"{"query": {"streams": ["a"], "categories": ["b"], "allEvents": true}}"#)
        .await
        .contains("cannot both"));
    assert!(bad(r#"{"query": {"allStreams": true, "allEvents": true, "events": ["x"]}}"#)
        .await
        .contains("allEvents"));
    assert!(bad(r#"{"query": {"streams": [""], "allEvents": true}}"#).await.contains("non-empty names"));
    assert!(bad(r#"{"query": {"streams": "a", "allEvents": true}}"#).await.contains("array"));
    assert!(bad(r#"{"query": {"allStreams": "yes", "allEvents": true}}"#).await.contains("true or false"));
    assert!(bad(r#"{"query": {"categories": ["a"], "allEvents": true, "catalogStream": "c"}}"#)
        .await
        .contains("catalogStream"));
    // Positions that are not one.
    for (position, reason) in [
        (r#""C:0/P:0""#, "object"),
        ("{}", "neither"),
        (r#"{"$s": {"a": 1}}"#, "log positions"),
        (r#"{"$c": 5, "$p": 7}"#, "differ"),
        (r#"{"$c": -5, "$p": -5}"#, "negative"),
        (r#"{"$c": 1.5, "$p": 1.5}"#, "integer"),
        (r#"{"$c": 1, "$p": 1}"#, "not the start of a record"),
        (r#"{"$c": 999999999, "$p": 999999999}"#, "past the end"),
    ] {
        let body =
            format!(r#"{{"query": {{"allStreams": true, "allEvents": true}}, "position": {position}}}"#);
        let r = s.post("/projections/read-events", "application/json", &[ADMIN], body.as_bytes()).await;
        assert!(r.status == 400 && r.reason.contains(reason), "{body}: {r:?}");
    }
    for max in ["0", "4097", "-1", "\"ten\""] {
        let body = format!(r#"{{"query": {{"allStreams": true, "allEvents": true}}, "maxEvents": {max}}}"#);
        let r = s.post("/projections/read-events", "application/json", &[ADMIN], body.as_bytes()).await;
        assert_eq!(
            (r.status, r.reason.as_str()),
            (400, "maxEvents must be an integer from 1 to 4096"),
            "{max}"
        );
    }
    let r = read_events(&s, &[ADMIN], &json!({"query": all, "maxEvents": 4096})).await;
    assert_eq!(page_events(&r.json()), ["order-1/0/Placed", "order-1/1/Paid"]);
    // Credentials: a user, who must be able to read what the page returns.
    assert_eq!(read_events(&s, &[], &json!({"query": all})).await.status, 401);
    assert_eq!(read_events(&s, &[BOB], &json!({"query": all})).await.status, 401, "$all is for admins");
    let one = json!({"query": {"streams": ["order-1"], "allEvents": true}});
    assert_eq!(read_events(&s, &[BOB], &one).await.status, 200);
    let acl = json!({"$acl": {"$r": "$admins"}}).to_string();
    let r = s
        .post(
            "/streams/order-1/metadata",
            "application/json",
            &[ADMIN, ("es-eventid", &new_id())],
            acl.as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(read_events(&s, &[BOB], &one).await.status, 401);
    assert_eq!(read_events(&s, &[ADMIN], &one).await.status, 200);
    // JSON only, both ways; only POST.
    let r = s.post("/projections/read-events", "text/plain", &[ADMIN], one.to_string().as_bytes()).await;
    assert_eq!(r.status, 415, "{r:?}");
    let r = s
        .post(
            "/projections/read-events",
            "application/json",
            &[ADMIN, ("accept", "text/xml")],
            one.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 406, "{r:?}");
    assert_eq!(s.get("/projections/read-events", &[ADMIN]).await.status, 405);
}
