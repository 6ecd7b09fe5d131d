//! Persistent subscriptions over HTTP: every route and its statuses, the competing feed (JSON and
//! XML) with working ack/nack links, the info and list documents (snapshots), parking and
//! replaying, updates, deletes, resuming from the checkpoint after a restart, `/stats`, and the
//! timing rules on a manual clock (a node on the in-memory environment).

#[path = "http_support/mod.rs"]
mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{start, start_with, Client, Resp, ADMIN, HOST};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const COMPETING: (&str, &str) = ("accept", "application/vnd.eventstore.competingatom+json");
const JSON: &str = "application/json";

/// Replaces what changes between runs (ids, dates, rates) so documents can be snapshotted.
fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match k.as_str() {
                    "updated" => *x = json!("[date]"),
                    "averageItemsPerSecond" => *x = json!("[rate]"),
                    _ => scrub(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        Value::String(s) => *s = scrub_ids(s),
        _ => {}
    }
}

/// Every UUID in `s` as `[id]`.
fn scrub_ids(s: &str) -> String {
    let b = s.as_bytes();
    let is_uuid = |w: &[u8]| {
        w.len() == 36
            && w.iter().enumerate().all(|(i, c)| {
                if [8, 13, 18, 23].contains(&i) {
                    *c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            })
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if i + 36 <= b.len() && is_uuid(&b[i..i + 36]) {
            out.push_str("[id]");
            i += 36;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn rel<'a>(links: &'a Value, relation: &str) -> &'a str {
    links
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["relation"] == relation)
        .and_then(|l| l["uri"].as_str())
        .unwrap_or_else(|| panic!("no {relation} link in {links}"))
}

/// The path of an absolute link of these tests.
fn path(uri: &str) -> &str {
    uri.strip_prefix(&format!("http://{HOST}")).unwrap_or_else(|| panic!("not absolute: {uri}"))
}

async fn put(c: &Client, url: &str, body: &str) -> Resp {
    c.request("PUT", url, &[ADMIN, ("content-type", JSON)], body.as_bytes()).await
}

async fn post(c: &Client, url: &str) -> Resp {
    c.request("POST", url, &[ADMIN], b"").await
}

async fn read(c: &Client, url: &str) -> Value {
    let r = c.get(url, &[ADMIN, COMPETING]).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        r.header("content-type"),
        Some("application/vnd.eventstore.competingatom+json; charset=utf-8")
    );
    r.json()
}

fn titles(feed: &Value) -> Vec<String> {
    feed["entries"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap().to_owned()).collect()
}

/// Reads a stream's events (as admin), oldest first.
async fn events(c: &Client, stream: &str) -> Vec<Value> {
    let r = c
        .get(
            &format!("/streams/{}/0/forward/100?embed=tryharder", support_escape(stream)),
            &[ADMIN, ("accept", "application/vnd.eventstore.atom+json"), ("es-resolvelinktos", "false")],
        )
        .await;
    if r.status == 404 {
        return Vec::new();
    }
    assert_eq!(r.status, 200, "{r:?}");
    let mut v: Vec<Value> = r.json()["entries"].as_array().unwrap().clone();
    v.reverse();
    v
}

fn support_escape(s: &str) -> String {
    s.replace('$', "%24")
}

/// Sleeps on the real clock.
async fn nap(ms: u64) {
    annal::env::real::env().rt.sleep(Duration::from_millis(ms)).await;
}

/// Waits (up to 10 s) until `f` holds.
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if f().await {
            return;
        }
        nap(50).await;
    }
    panic!("{what}: not within 10 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_statuses_feed_and_documents() {
    let s = start().await;
    let r = s.get("/subscriptions", &[ADMIN]).await;
    assert_eq!((r.status, r.json()), (200, json!([])));
    // Creating needs ops or admins; a second create is a conflict.
    let r = s.request("PUT", "/subscriptions/orders/g1", &[("content-type", JSON)], b"{}").await;
    assert_eq!(r.status, 401);
    let r = put(&s, "/subscriptions/orders/g1", "").await;
    assert_eq!((r.status, r.header("location")), (201, Some("http://h:2113/subscriptions/orders/g1")));
    assert_eq!(put(&s, "/subscriptions/orders/g1", "{}").await.status, 409);
    // Invalid settings: 400 with the reason.
    for (body, why) in [
        (r#"{"bufferSize":-1}"#, "bufferSize must not be negative"),
        (r#"{"readBatchSize":0}"#, "readBatchSize must be positive"),
        (r#"{"namedConsumerStrategy":"Nope"}"#, "Unknown namedConsumerStrategy"),
        (r#"{"startFrom":5}"#, "startFrom 5 is beyond the end of the stream"),
        ("{not json", "Invalid settings body"),
    ] {
        let r = put(&s, "/subscriptions/orders/bad", body).await;
        assert_eq!(r.status, 400, "{body}");
        assert!(r.reason.contains(why), "{body}: {}", r.reason);
    }
    assert_eq!(put(&s, "/subscriptions/%24all/g", "{}").await.status, 400);

    s.append_n("orders", 0, 5).await;
    // Count bounds and the feed's only media types.
    for bad in ["0", "101", "x"] {
        assert_eq!(s.get(&format!("/subscriptions/orders/g1/{bad}"), &[ADMIN, COMPETING]).await.status, 400);
    }
    assert_eq!(s.get("/subscriptions/orders/g1/1", &[ADMIN, ("accept", JSON)]).await.status, 406);
    assert_eq!(s.get("/subscriptions/orders/g1/1", &[COMPETING]).await.status, 401);
    assert_eq!(s.get("/subscriptions/orders/nope/1", &[ADMIN, COMPETING]).await.status, 404);

    let mut feed = read(&s, "/subscriptions/orders/g1/2").await;
    assert_eq!(titles(&feed), ["1@orders", "0@orders"]);
    let ack_all = rel(&feed["links"], "ackAll").to_owned();
    let first_nack = rel(&feed["entries"][1]["links"], "nack").to_owned();
    scrub(&mut feed);
    insta::assert_json_snapshot!("competing_feed", feed);
    // The default count is 1; rich embedding works as on streams.
    let one = read(&s, "/subscriptions/orders/g1?embed=rich").await;
    assert_eq!(titles(&one), ["2@orders"]);
    assert_eq!(one["entries"][0]["eventType"], "type-2");
    // The links work as given: ack both of the first page, nack event 0 (already acked: ignored).
    assert_eq!(post(&s, path(&ack_all)).await.status, 202);
    assert_eq!(post(&s, &format!("{}?action=retry", path(&first_nack))).await.status, 202);
    assert_eq!(post(&s, "/subscriptions/orders/g1/ack/not-a-guid").await.status, 400);
    assert_eq!(post(&s, "/subscriptions/orders/g1/ack?ids=").await.status, 400);
    // Fire and forget: unknown groups and ids are fine.
    let unknown = "/subscriptions/orders/zzz/ack/00000000-0000-0000-0000-000000000001";
    assert_eq!(post(&s, unknown).await.status, 202);

    // XML feed with ack and nack links.
    let r = s
        .get(
            "/subscriptions/orders/g1/1",
            &[ADMIN, ("accept", "application/vnd.eventstore.competingatom+xml")],
        )
        .await;
    assert_eq!(r.status, 200);
    let xml = r.text();
    assert!(
        xml.contains("<title>3@orders</title>")
            && xml.contains("rel=\"ack\"")
            && xml.contains("rel=\"ackAll\""),
        "{xml}"
    );

    // Info and lists.
    let r = s.get("/subscriptions/orders/g1/info", &[ADMIN]).await;
    assert_eq!(r.status, 200);
    let mut info = r.json();
    assert_eq!(info["totalItemsProcessed"], 2);
    assert_eq!(info["totalInFlightMessages"], 2);
    assert_eq!(info["connections"][0]["username"], "admin");
    scrub(&mut info);
    insta::assert_json_snapshot!("info", info);
    let mut list = s.get("/subscriptions", &[ADMIN]).await.json();
    scrub(&mut list);
    insta::assert_json_snapshot!("list", list);
    assert_eq!(s.get("/subscriptions/orders", &[ADMIN]).await.json().as_array().unwrap().len(), 1);
    assert_eq!(s.get("/subscriptions/other", &[ADMIN]).await.status, 404);
    assert_eq!(s.get("/subscriptions/orders/nope/info", &[ADMIN]).await.status, 404);
    assert_eq!(s.get("/subscriptions", &[]).await.status, 401);

    // /stats has the totals.
    let stats = s.get("/stats", &[]).await.json();
    let ps = &stats["es"]["persistentSubscriptions"];
    assert_eq!((ps["groups"].as_u64(), ps["totalItemsProcessed"].as_u64()), (Some(1), Some(2)));

    // The definition is in the definitions stream.
    let defs = events(&s, "$persistentSubscriptionConfig").await;
    let data: Value = serde_json::from_str(defs.last().unwrap()["data"].as_str().unwrap()).unwrap();
    assert_eq!(data["entries"][0]["stream"], "orders");

    // Update: 200, 404 for a missing group; delete: 200, then 404 everywhere.
    let r = s
        .request(
            "POST",
            "/subscriptions/orders/g1",
            &[ADMIN, ("content-type", JSON)],
            br#"{"maxRetryCount":3}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = s.get("/subscriptions/orders/g1/info", &[ADMIN]).await.json();
    assert_eq!(
        (r["config"]["maxRetryCount"].as_u64(), r["connections"].as_array().unwrap().len()),
        (Some(3), 0)
    );
    let r = s.request("POST", "/subscriptions/orders/none", &[ADMIN, ("content-type", JSON)], b"{}").await;
    assert_eq!(r.status, 404);
    assert_eq!(s.request("DELETE", "/subscriptions/orders/g1", &[ADMIN], b"").await.status, 200);
    assert_eq!(s.request("DELETE", "/subscriptions/orders/g1", &[ADMIN], b"").await.status, 404);
    assert_eq!(s.get("/subscriptions/orders/g1/1", &[ADMIN, COMPETING]).await.status, 404);
    assert_eq!(s.get("/subscriptions", &[ADMIN]).await.json(), json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_group_reads_its_stream_at_once_and_the_stream_description_lists_it() {
    let s = start().await;
    s.append_n("ledger", 0, 5).await;
    // Before any consumer polls, the group knows the stream (as v5's, which reads at creation).
    assert_eq!(put(&s, "/subscriptions/ledger/audit", r#"{"startFrom":0}"#).await.status, 201);
    let info = s.get("/subscriptions/ledger/audit/info", &[ADMIN]).await.json();
    assert_eq!(info["lastKnownEventNumber"], 4, "{info}");
    let list = s.get("/subscriptions/ledger", &[ADMIN]).await.json();
    assert_eq!(list[0]["lastKnownEventNumber"], 4, "{list}");
    // The stream's description document links to each of its groups; a stream without groups
    // has no such link.
    let desc = [("accept", "application/vnd.eventstore.streamdesc+json")];
    let d = s.get("/streams/ledger", &desc).await.json();
    assert_eq!(
        d["_links"]["streamSubscription"],
        json!([{
            "href": "/subscriptions/ledger/audit",
            "supportedContentTypes": [
                "application/vnd.eventstore.competingatom+xml",
                "application/vnd.eventstore.competingatom+json"
            ]
        }]),
        "{d}"
    );
    let d = s.get("/streams/elsewhere", &desc).await.json();
    assert!(d["_links"].get("streamSubscription").is_none(), "{d}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn park_replay_and_resume_after_restart() {
    let s = start().await;
    s.append_n("s", 0, 6).await;
    let r = put(&s, "/subscriptions/s/g", r#"{"minCheckPointCount":0,"maxCheckPointCount":1}"#).await;
    assert_eq!(r.status, 201);
    let feed = read(&s, "/subscriptions/s/g/3").await;
    assert_eq!(titles(&feed), ["2@s", "1@s", "0@s"]);
    // Park event 0, skip event 1, ack event 2.
    let link = |i: usize, r: &str| path(rel(&feed["entries"][i]["links"], r)).to_owned();
    assert_eq!(post(&s, &format!("{}?action=Park", link(2, "nack"))).await.status, 202);
    assert_eq!(post(&s, &format!("{}?action=skip", link(1, "nack"))).await.status, 202);
    assert_eq!(post(&s, &link(0, "ack")).await.status, 202);
    let parked = "$persistentsubscription-s::g-parked";
    eventually("the parked link", || async { events(&s, parked).await.len() == 1 }).await;
    let link_event = &events(&s, parked).await[0];
    assert_eq!(link_event["eventType"], "$>");
    assert_eq!(link_event["data"], "0@s");
    // Everything up to 2 is done: the checkpoint is written at once (maxCheckPointCount 1).
    let checkpoint = "$persistentsubscription-s::g-checkpoint";
    eventually("checkpoint 2", || async {
        events(&s, checkpoint).await.last().is_some_and(|e| e["data"] == "2")
    })
    .await;
    let info = s.get("/subscriptions/s/g/info", &[ADMIN]).await.json();
    assert_eq!(
        (info["parkedMessageCount"].as_i64(), info["lastProcessedEventNumber"].as_i64()),
        (Some(1), Some(2))
    );

    // Replaying delivers the parked message again, before new events, with the same id.
    assert_eq!(post(&s, "/subscriptions/s/g/replayParked").await.status, 200);
    let again = read(&s, "/subscriptions/s/g/2").await;
    assert_eq!(titles(&again), ["3@s", "0@s"]);
    assert_eq!(rel(&again["entries"][1]["links"], "ack"), rel(&feed["entries"][2]["links"], "ack"));
    let info = s.get("/subscriptions/s/g/info", &[ADMIN]).await.json();
    assert_eq!(info["parkedMessageCount"], 0);
    assert_eq!(s.request("POST", "/subscriptions/s/nope/replayParked", &[ADMIN], b"").await.status, 404);

    // 3 is in flight, unacknowledged: after a restart the group resumes after checkpoint 2, so
    // 3 comes again (at-least-once) and nothing before it does.
    let s = s.restart().await;
    let resumed = read(&s, "/subscriptions/s/g/10").await;
    assert_eq!(titles(&resumed), ["5@s", "4@s", "3@s"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategies_and_consumers() {
    let s = start().await;
    s.append_n("d", 0, 4).await;
    assert_eq!(
        put(
            &s,
            "/subscriptions/d/g",
            r#"{"namedConsumerStrategy":"DispatchToSingle","maxSubscriberCount":2}"#
        )
        .await
        .status,
        201
    );
    let a = read(&s, "/subscriptions/d/g/2?consumer=a").await;
    assert_eq!(titles(&a), ["1@d", "0@d"]);
    assert_eq!(rel(&a["links"], "self"), "http://h:2113/subscriptions/d/g?consumer=a");
    // a holds its two slots, so b gets messages.
    assert_eq!(titles(&read(&s, "/subscriptions/d/g/1?consumer=b").await), ["2@d"]);
    // A third consumer is over maxSubscriberCount.
    let r = s.get("/subscriptions/d/g/1?consumer=c", &[ADMIN, COMPETING]).await;
    assert_eq!((r.status, r.reason.as_str()), (409, "Maximum subscriber count reached"));
    let info = s.get("/subscriptions/d/g/info", &[ADMIN]).await.json();
    let from: Vec<&str> =
        info["connections"].as_array().unwrap().iter().map(|c| c["from"].as_str().unwrap()).collect();
    assert_eq!(from, ["a", "b"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_streams_answer_clearly() {
    let s = start_with(|_| {}).await;
    s.append_n("gone", 0, 2).await;
    assert_eq!(put(&s, "/subscriptions/gone/g", "{}").await.status, 201);
    let r = s.request("DELETE", "/streams/gone", &[ADMIN, ("es-harddelete", "true")], b"").await;
    assert_eq!(r.status, 204);
    // The group read the stream when it was created; it learns of the deletion as it follows
    // the log.
    eventually("410 once the group learnt of the deletion", || async {
        let r = s.get("/subscriptions/gone/g/5", &[ADMIN, COMPETING]).await;
        (r.status, r.reason.as_str()) == (410, "Stream deleted")
    })
    .await;
    let info = s.get("/subscriptions/gone/g/info", &[ADMIN]).await.json();
    assert_eq!(info["status"], "NotReady");
    // A stream that does not exist yet: empty pages until it is written.
    assert_eq!(put(&s, "/subscriptions/later/g", "{}").await.status, 201);
    assert_eq!(titles(&read(&s, "/subscriptions/later/g/5").await), Vec::<String>::new());
    s.append_n("later", 0, 1).await;
    eventually("the new event", || async {
        titles(&read(&s, "/subscriptions/later/g/5").await) == ["0@later"]
    })
    .await;
}

// ---- timing rules on a manual clock ----

/// One request to a node on the in-memory network.
async fn mem_request(
    env: &annal::env::Env,
    addr: std::net::SocketAddr,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let mut c = env.net.connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {url} HTTP/1.1\r\nhost: {HOST}\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    c.write_all(req.as_bytes()).await.unwrap();
    c.write_all(body).await.unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    support::parse(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_retries_parking_and_timed_checkpoints_on_a_manual_clock() {
    let (env, _disk, clock) = annal::env::mem::env(7);
    let mut config = annal::config::Config::for_dir("/db");
    config.chunk_size = 1024 * 1024;
    config.password_iterations = 16;
    let node = annal::node::Node::open(env.clone(), config).unwrap();
    let (addr, serve) = node.bind().await.unwrap();
    tokio::spawn(async move {
        let _ = serve.await;
    });
    let req = |method: &'static str, url: String, body: &'static str| {
        let env = env.clone();
        async move {
            let h: &[(&str, &str)] = &[ADMIN, COMPETING, ("content-type", JSON)];
            mem_request(&env, addr, method, &url, h, body.as_bytes()).await
        }
    };
    let events =
        serde_json::to_string(&json!([{"eventId": support::new_id(), "eventType": "t", "data": {}}]))
            .unwrap();
    let events: &'static str = Box::leak(events.into_boxed_str());
    let r = mem_request(
        &env,
        addr,
        "POST",
        "/streams/m",
        &[ADMIN, ("content-type", "application/vnd.eventstore.events+json")],
        events.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 201);
    let body = r#"{"messageTimeoutMilliseconds":1000,"maxRetryCount":1,"minCheckPointCount":1,"maxCheckPointCount":100,"checkPointAfterMilliseconds":5000}"#;
    assert_eq!(req("PUT", "/subscriptions/m/g".into(), body).await.status, 201);
    let poll = || async {
        let r = req("GET", "/subscriptions/m/g/1".into(), "").await;
        assert_eq!(r.status, 200, "{r:?}");
        titles(&r.json())
    };
    assert_eq!(poll().await, ["0@m"]);
    clock.advance(Duration::from_millis(999));
    assert!(poll().await.is_empty(), "not late yet");
    clock.advance(Duration::from_millis(1));
    // Late: retried (second delivery, the last one maxRetryCount 1 allows).
    assert_eq!(poll().await, ["0@m"]);
    clock.advance(Duration::from_millis(1000));
    assert!(poll().await.is_empty(), "parked after maxRetryCount retries");
    let parked = "/streams/%24persistentsubscription-m::g-parked/0/forward/10";
    let mut found = false;
    for _ in 0..200 {
        let r = mem_request(
            &env,
            addr,
            "GET",
            parked,
            &[ADMIN, ("accept", "application/vnd.eventstore.atom+json")],
            b"",
        )
        .await;
        if r.status == 200 && r.json()["entries"].as_array().unwrap().len() == 1 {
            found = true;
            break;
        }
        env.rt.sleep(Duration::from_millis(10)).await;
    }
    assert!(found, "the parked link was written");
    // The parked message is done: a checkpoint is due on the timer once 5 s passed since the
    // group started (min count 1 reached), and not before.
    let info = || async {
        let r = mem_request(&env, addr, "GET", "/subscriptions/m/g/info", &[ADMIN], b"").await;
        r.json()["lastProcessedEventNumber"].as_i64()
    };
    env.rt.sleep(Duration::from_millis(1200)).await;
    assert_eq!(info().await, Some(-1), "the timer has not run out");
    clock.advance(Duration::from_millis(3000));
    let mut cp = None;
    for _ in 0..100 {
        cp = info().await;
        if cp == Some(0) {
            break;
        }
        env.rt.sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cp, Some(0));
    node.request_shutdown();
}
