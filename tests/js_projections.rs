//! JavaScript projections over HTTP: the documented examples (counting by event type,
//! partitioned totals with `foreachStream` and `partitionBy`, emitting to new streams, `linkTo`,
//! `copyTo`, biState, results with `transformBy`/`filterBy`), creation and its errors (a syntax
//! error's message and line), the modes (continuous, one-time, transient), the commands, query
//! and configuration updates, delete with its flags, restarts that write no emitted event twice
//! and resume partition states from the checkpoint, and the sandbox (a loop, a memory bomb and a
//! throw fault only their projection).

#[path = "http_support/mod.rs"]
mod support;

use std::time::Duration;

use annal::config::RunProjections;
use serde_json::{json, Value};
use support::{new_id, start_with, Server, ADMIN, OPS};

const EVENTS: &str = "application/vnd.eventstore.events+json";
/// `bob:secret`, a user in no group.
const BOB: (&str, &str) = ("authorization", "Basic Ym9iOnNlY3JldA==");

async fn start_js() -> Server {
    start_with(|c| c.run_projections = RunProjections::All).await
}

async fn append(s: &Server, stream: &str, events: Value) {
    let r = s.post(&format!("/streams/{stream}"), EVENTS, &[ADMIN], events.to_string().as_bytes()).await;
    assert_eq!(r.status, 201, "{r:?}");
}

fn event(ty: &str, data: Value) -> Value {
    json!({"eventId": new_id(), "eventType": ty, "data": data, "metadata": {"source": "test"}})
}

async fn caught_up(s: &Server) {
    assert!(s.node.projections().wait_caught_up(Duration::from_secs(30)).await, "projections caught up");
}

/// Creates a projection; the reply.
async fn create(s: &Server, mode: &str, params: &str, query: &str) -> support::Resp {
    s.request("POST", &format!("/projections/{mode}?{params}"), &[ADMIN], query.as_bytes()).await
}

async fn created(s: &Server, mode: &str, params: &str, query: &str) {
    let r = create(s, mode, params, query).await;
    assert_eq!(r.status, 201, "{r:?}");
}

async fn state(s: &Server, name: &str, partition: Option<&str>) -> Value {
    let q = partition.map(|p| format!("?partition={p}")).unwrap_or_default();
    let r = s.get(&format!("/projection/{name}/state{q}"), &[ADMIN]).await;
    assert_eq!(r.status, 200, "{r:?}");
    if r.body.is_empty() {
        Value::Null
    } else {
        r.json()
    }
}

async fn stat(s: &Server, name: &str) -> Value {
    let r = s.get(&format!("/projection/{name}"), &[ADMIN]).await;
    assert_eq!(r.status, 200, "{r:?}");
    r.json()
}

/// Waits until the projection's status is `want` (a fault is not caught up with, it stops).
async fn status_becomes(s: &Server, name: &str, want: &str) -> Value {
    for _ in 0..600 {
        let st = stat(s, name).await;
        if st["status"] == want {
            return st;
        }
        s.node.env().rt.sleep(Duration::from_millis(20)).await;
    }
    panic!("{name} never became {want}: {}", stat(s, name).await);
}

/// A stream's events as `(type, data, metadata)`.
fn read_stream(s: &Server, stream: &str) -> Vec<(String, String, Value)> {
    support::stream_rows(s, stream)
}

/// Orders for the examples: three streams of `order`, amounts 1..=9 (order-1: 1,4,7 …).
async fn orders(s: &Server) {
    for i in 1..=9u64 {
        let stream = format!("order-{}", (i - 1) % 3 + 1);
        let ty = if i % 2 == 0 { "Paid" } else { "Placed" };
        append(s, &stream, json!([event(ty, json!({"amount": i, "user": format!("u{}", i % 2)}))])).await;
    }
    append(s, "account-1", json!([event("Opened", json!({}))])).await;
}

const COUNT_BY_TYPE: &str = r#"
fromAll().when({
    $init: function () { return { count: 0, types: {} }; },
    $any: function (s, e) {
        s.count += 1;
        s.types[e.eventType] = (s.types[e.eventType] || 0) + 1;
    }
})"#;

const TOTALS_BY_STREAM: &str = r#"
fromCategory('order').foreachStream().when({
    $init: function () { return { total: 0, n: 0 }; },
    Placed: function (s, e) { s.total += e.body.amount; s.n += 1; },
    Paid: function (s, e) { s.total += e.data.amount; s.n += 1; }
}).transformBy(function (s) { return { total: s.total }; })"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documented_examples_and_documents() {
    let s = start_js().await;
    orders(&s).await;
    created(&s, "continuous", "name=counter&type=JS", COUNT_BY_TYPE).await;
    created(&s, "continuous", "name=totals&type=js&emit=no", TOTALS_BY_STREAM).await;
    let by_user = r#"
        fromStreams(['order-1', 'order-2']).partitionBy(function (e) { return e.body.user; }).when({
            $init: function () { return { sum: 0 }; },
            $any: function (s, e) { s.sum += e.body.amount; return s; }
        }).outputState()"#;
    created(&s, "continuous", "name=by-user", by_user).await;
    caught_up(&s).await;
    assert_eq!(
        state(&s, "counter", None).await,
        json!({"count": 10, "types": {"Placed": 5, "Paid": 4, "Opened": 1}})
    );
    // Per-partition state and result; the root of a partitioned projection stays as `$init` made it.
    assert_eq!(state(&s, "totals", Some("order-1")).await, json!({"total": 12, "n": 3}));
    assert_eq!(state(&s, "totals", Some("order-3")).await, json!({"total": 18, "n": 3}));
    let r = s.get("/projection/totals/result?partition=order-2", &[ADMIN]).await;
    assert_eq!(r.json(), json!({"total": 15}));
    assert!(r.header("es-position").unwrap().starts_with("{\"$c\":"), "{r:?}");
    assert_eq!(state(&s, "totals", Some("order-9")).await, Value::Null, "never seen");
    // order-1: 1, 4 (u1, u0), 7; order-2: 2, 5, 8 → u1: 1+7+5 = 13, u0: 4+2+8 = 14.
    assert_eq!(state(&s, "by-user", Some("u1")).await, json!({"sum": 13}));
    assert_eq!(state(&s, "by-user", Some("u0")).await, json!({"sum": 14}));
    // Results: a `Result` per change in the partition's result stream; a catalog of partitions.
    let results = read_stream(&s, "$projections-totals-order-1-result");
    let totals: Vec<&str> = results.iter().map(|(_, d, _)| d.as_str()).collect();
    assert_eq!(totals, [r#"{"total":1}"#, r#"{"total":5}"#, r#"{"total":12}"#]);
    assert_eq!(results[0].0, "Result");
    // Ids count in the registry: the five system projections, `counter`, then `totals`.
    assert_eq!(results[2].2["$v"], "7:-1:1:4");
    let catalog: Vec<String> =
        read_stream(&s, "$projections-totals-partitions").into_iter().map(|(_, d, _)| d).collect();
    assert_eq!(catalog, ["order-1", "order-2", "order-3"]);
    // Statistics, lists, the query and its definition.
    let st = stat(&s, "totals").await;
    assert_eq!((st["mode"].as_str(), st["status"].as_str()), (Some("Continuous"), Some("Running")), "{st}");
    assert_eq!(st["partitionsCached"], 4, "three streams and the root");
    assert!(
        st["resultStreamUrl"].as_str().unwrap().ends_with("/streams/%24projections-totals-result"),
        "{st}"
    );
    let r = s.get("/projection/totals/statistics", &[OPS]).await;
    assert_eq!(r.json()["projections"][0]["name"], "totals");
    for (kind, n) in
        [("any", 8), ("continuous", 8), ("all-non-transient", 8), ("onetime", 0), ("transient", 0)]
    {
        let r = s.get(&format!("/projections/{kind}"), &[ADMIN]).await;
        assert_eq!(r.json()["projections"].as_array().unwrap().len(), n, "{kind}");
    }
    let r = s.get("/projection/totals/query", &[ADMIN]).await;
    assert_eq!(r.text(), TOTALS_BY_STREAM);
    let r = s.get("/projection/totals/query?config=yes", &[ADMIN]).await;
    assert_eq!(
        r.json(),
        json!({
            "name": "totals", "query": TOTALS_BY_STREAM, "checkpointsEnabled": true, "type": "JS",
            "definition": {"byStream": true, "categories": ["order"], "events": ["Placed", "Paid"],
                "options": {"definesStateTransform": true, "producesResults": true, "definesFold": true}},
            "outputConfig": {"resultStreamName": "$projections-totals-result"}
        })
    );
    let r = s.get("/projection/by-user/query?config=yes", &[ADMIN]).await;
    let d = r.json();
    assert_eq!(
        (d["definition"]["byCustomPartitions"].as_bool(), d["definition"]["allEvents"].as_bool()),
        (Some(true), Some(true)),
        "{d}"
    );
    assert_eq!(d["definition"]["streams"], json!(["order-1", "order-2"]));
    // New events keep flowing in.
    append(&s, "order-1", json!([event("Paid", json!({"amount": 100, "user": "u0"}))])).await;
    caught_up(&s).await;
    assert_eq!(state(&s, "totals", Some("order-1")).await, json!({"total": 112, "n": 4}));
    assert_eq!(state(&s, "counter", None).await["count"], 11);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn emits_links_copies_and_bi_state() {
    let s = start_js().await;
    let query = r#"
        fromCategory('order').when({
            Placed: function (s, e) {
                emit('placed-' + e.body.user, 'OrderPlaced', { order: e.streamId, amount: e.body.amount }, { why: 'test' });
                linkTo('all-placed', e);
                linkStreamTo('streams-of-orders', e.streamId);
                copyTo('copies', e);
            }
        })"#;
    created(&s, "continuous", "name=fanout&emit=yes", query).await;
    let bi = r#"
        options({ biState: true });
        fromCategory('order').foreachStream().when({
            $init: function () { return { n: 0 }; },
            $initShared: function () { return { all: 0 }; },
            $any: function (s, e) { s[0].n += 1; s[1].all += e.body.amount; return s; }
        })"#;
    created(&s, "continuous", "name=bi", bi).await;
    orders(&s).await;
    caught_up(&s).await;
    let placed = read_stream(&s, "placed-u1");
    assert_eq!(placed.len(), 5, "{placed:?}");
    assert_eq!(placed[0].0, "OrderPlaced");
    assert_eq!(
        serde_json::from_str::<Value>(&placed[0].1).unwrap(),
        json!({"order": "order-1", "amount": 1})
    );
    let meta = &placed[0].2;
    assert_eq!(meta["why"], "test");
    assert!(meta["$v"].as_str().unwrap().ends_with(":-1:1:4"), "{meta}");
    assert!(meta["$p"].is_u64() && meta["$causedBy"].is_string(), "{meta}");
    let links: Vec<String> =
        read_stream(&s, "all-placed").into_iter().map(|(t, d, _)| format!("{t} {d}")).collect();
    assert_eq!(links[..2], ["$> 0@order-1".to_string(), "$> 0@order-3".to_string()]);
    let streams: Vec<String> = read_stream(&s, "streams-of-orders").into_iter().map(|(_, d, _)| d).collect();
    assert_eq!(streams.len(), 5);
    let copies = read_stream(&s, "copies");
    assert_eq!(copies[0].0, "Placed");
    assert_eq!(copies[0].2["source"], "test", "copyTo keeps the source's own metadata");
    // biState: each partition's state and the shared state.
    assert_eq!(state(&s, "bi", Some("order-2")).await, json!({"n": 3}), "{}", stat(&s, "bi").await);
    assert_eq!(state(&s, "bi", None).await, json!([{"n": 0}, {"all": 45}]));
    // With trackemittedstreams, the streams emitted to are tracked, and deleted with the
    // projection on request.
    let q = "fromCategory('order').when({ Paid: function (s, e) { emit('paid-' + e.streamId, 'P', {}); } })";
    created(&s, "continuous", "name=tracked&emit=yes&trackemittedstreams=yes", q).await;
    caught_up(&s).await;
    let tracked: Vec<String> =
        read_stream(&s, "$projections-tracked-emittedstreams").into_iter().map(|(_, d, _)| d).collect();
    assert_eq!(tracked, ["paid-order-2", "paid-order-1", "paid-order-3"]);
    assert_eq!(read_stream(&s, "paid-order-2").len(), 2);
    assert_eq!(s.request("POST", "/projection/tracked/command/disable", &[ADMIN], b"").await.status, 200);
    let r = s.request("DELETE", "/projection/tracked?deleteEmittedStreams=yes", &[ADMIN], b"").await;
    assert_eq!((r.status, r.json()), (200, json!({"name": "tracked"})), "{r:?}");
    for stream in ["paid-order-1", "paid-order-2", "paid-order-3", "$projections-tracked-emittedstreams"] {
        assert!(read_stream(&s, stream).is_empty(), "{stream} deleted");
    }
    // Emitting without emit=yes faults that projection, with the reason and the line.
    created(
        &s,
        "continuous",
        "name=silent",
        "fromAll().when({\n  $any: function (s, e) {\n    emit('x', 'y', {});\n  }\n})",
    )
    .await;
    let st = status_becomes(&s, "silent", "Faulted (Enabled)").await;
    let reason = st["stateReason"].as_str().unwrap();
    assert!(reason.contains("'emit' is not allowed") && reason.contains("(line 3)"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queries_and_credentials_are_refused() {
    let s = start_js().await;
    let r = create(
        &s,
        "continuous",
        "name=broken",
        "fromAll()\n.when({\n  $any: function (s, e) { return s +; }\n})",
    )
    .await;
    assert_eq!(r.status, 400, "{r:?}");
    assert!(r.reason.starts_with("SyntaxError") && r.reason.ends_with("(line 3)"), "{r:?}");
    assert_eq!(s.get("/projection/broken", &[ADMIN]).await.status, 404, "nothing was created");
    let r = create(&s, "continuous", "name=opts", "options({ colour: 'red' });\nfromAll();").await;
    assert_eq!(r.status, 400);
    assert!(r.reason.contains("Unrecognized option: colour") && r.reason.contains("(line 1)"), "{r:?}");
    let r = create(&s, "continuous", "name=opts", "options({ $includeLinks: 1 }); fromAll();").await;
    assert!(r.reason.contains("must be a boolean"), "{r:?}");
    let r = create(&s, "continuous", "name=none", "var x = 1;").await;
    assert!(r.reason.contains("no source"), "{r:?}");
    assert_eq!(create(&s, "continuous", "name=x&type=SQL", "fromAll()").await.status, 400);
    assert_eq!(create(&s, "continuous", "name=x&emit=maybe", "fromAll()").await.status, 400);
    // Only $ops and $admins create and change projections.
    let bob = json!({"loginName": "bob", "fullName": "Bob", "groups": [], "password": "secret"}).to_string();
    assert_eq!(s.post("/users", "application/json", &[ADMIN], bob.as_bytes()).await.status, 201);
    let r = s.request("POST", "/projections/continuous?name=b", &[BOB], b"fromAll()").await;
    assert_eq!(r.status, 401);
    let r = s.request("POST", "/projections/continuous?name=o", &[OPS], b"fromAll()").await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(r.header("location").unwrap(), "http://h:2113/projection/o");
    assert_eq!(r.json(), json!({"name": "o"}));
    let r = s.request("POST", "/projections/continuous?name=o", &[OPS], b"fromAll()").await;
    assert_eq!((r.status, r.reason.as_str()), (409, "Duplicate projection names : o"));
    assert_eq!(s.request("POST", "/projection/o/command/disable", &[BOB], b"").await.status, 401);
    assert_eq!(s.request("PUT", "/projection/o/query", &[BOB], b"fromAll()").await.status, 401);
    assert_eq!(s.request("DELETE", "/projection/o", &[BOB], b"").await.status, 401);
    assert_eq!(s.get("/projection/o/state", &[BOB]).await.status, 200, "any user reads");
    // A bad update is refused and changes nothing.
    let r = s.request("PUT", "/projection/o/query", &[ADMIN], b"fromAll(").await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(s.get("/projection/o/query", &[ADMIN]).await.text(), "fromAll()");
    // Without a name, one-time projections get a generated one.
    let r = create(&s, "onetime", "", "fromAll()").await;
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["name"].as_str().unwrap().len(), 36);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sandbox_faults_only_the_projection() {
    let s = start_js().await;
    orders(&s).await;
    created(&s, "continuous", "name=counter", COUNT_BY_TYPE).await;
    let scripts = [
        ("looper", "fromAll().when({\n  Paid: function (s, e) {\n    while (true) { s.x = 1; }\n  }\n})", "ran longer than its limit"),
        ("bomb", "fromAll().when({ Paid: function (s, e) { var a = []; for (;;) { a.push(new Array(100000).fill(e)); } } })", "ran out of memory"),
        ("thrower", "fromAll().when({\n  Paid: function (s, e) {\n    throw new RangeError('no ' + e.streamId);\n  }\n})", "RangeError: no order-2 (line 3)"),
        ("clock", "fromAll().when({ $any: function (s, e) { if (Date.now() < 1e12) { throw new Error('the clock is not the event time'); } } })", ""),
    ];
    for (name, q, _) in scripts {
        created(&s, "continuous", &format!("name={name}"), q).await;
    }
    for (name, _, reason) in scripts {
        if reason.is_empty() {
            continue;
        }
        let st = status_becomes(&s, name, "Faulted (Enabled)").await;
        assert!(st["stateReason"].as_str().unwrap().contains(reason), "{name}: {st}");
    }
    // The node and the other projections go on.
    append(&s, "order-4", json!([event("Paid", json!({"amount": 1}))])).await;
    caught_up(&s).await;
    assert_eq!(state(&s, "counter", None).await["count"], 11);
    assert_eq!(stat(&s, "clock").await["status"], "Running");
    // A faulted projection can be reset and disabled like any other.
    assert_eq!(s.request("POST", "/projection/thrower/command/disable", &[ADMIN], b"").await.status, 200);
    assert_eq!(stat(&s, "thrower").await["status"], "Faulted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_commands_updates_and_delete() {
    let s = start_js().await;
    orders(&s).await;
    // One-time: runs to the end of the log, then completes.
    created(&s, "onetime", "name=once&checkpoints=yes", COUNT_BY_TYPE).await;
    status_becomes(&s, "once", "Completed").await;
    assert_eq!(state(&s, "once", None).await["count"], 10);
    assert_eq!(stat(&s, "once").await["mode"], "OneTime");
    assert_eq!(read_stream(&s, "$projections-once-checkpoint").len(), 1);
    // Transient: the same, stored nowhere.
    created(&s, "transient", "name=peek", COUNT_BY_TYPE).await;
    status_becomes(&s, "peek", "Completed").await;
    assert_eq!(state(&s, "peek", None).await["count"], 10);
    assert!(read_stream(&s, "$projections-peek").is_empty());
    assert_eq!(
        s.get("/projections/transient", &[ADMIN]).await.json()["projections"].as_array().unwrap().len(),
        1
    );
    // Continuous, created disabled: nothing runs until enabled.
    created(&s, "continuous", "name=totals&enabled=no", TOTALS_BY_STREAM).await;
    assert_eq!(stat(&s, "totals").await["status"], "Stopped");
    let r =
        s.request("PUT", "/projection/totals/config", &[ADMIN], br#"{"checkpointHandledThreshold":2}"#).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(s.request("POST", "/projection/totals/command/enable", &[ADMIN], b"").await.status, 200);
    caught_up(&s).await;
    assert_eq!(state(&s, "totals", Some("order-3")).await, json!({"total": 18, "n": 3}));
    // Disable writes a final checkpoint with the partitions' states.
    assert_eq!(s.request("POST", "/projection/totals/command/disable", &[ADMIN], b"").await.status, 200);
    assert_eq!(stat(&s, "totals").await["status"], "Stopped");
    let cp = read_stream(&s, "$projections-order-3-checkpoint");
    assert!(cp.is_empty());
    let cp = read_stream(&s, "$projections-totals-order-3-checkpoint");
    assert_eq!(serde_json::from_str::<Value>(&cp.last().unwrap().1).unwrap(), json!({"total": 18, "n": 3}));
    // Reset: a new epoch, the log processed again from the start.
    assert_eq!(s.request("POST", "/projection/totals/command/reset", &[ADMIN], b"").await.status, 200);
    assert_eq!(s.request("POST", "/projection/totals/command/enable", &[ADMIN], b"").await.status, 200);
    caught_up(&s).await;
    let st = stat(&s, "totals").await;
    assert_eq!((st["epoch"].as_i64(), st["version"].as_i64()), (Some(3), Some(3)), "{st}");
    assert_eq!(state(&s, "totals", Some("order-3")).await, json!({"total": 18, "n": 3}));
    // An update of the query restarts it with the new version.
    let q = "fromCategory('order').foreachStream().when({ $init: function () { return { c: 0 }; }, $any: function (s) { s.c += 1; } })";
    let r = s.request("PUT", "/projection/totals/query?emit=no", &[ADMIN], q.as_bytes()).await;
    assert_eq!(r.status, 200, "{r:?}");
    caught_up(&s).await;
    assert_eq!(stat(&s, "totals").await["version"], 4);
    // Abort: stopped at once.
    assert_eq!(s.request("POST", "/projection/totals/command/abort", &[ADMIN], b"").await.status, 200);
    assert_eq!(stat(&s, "totals").await["status"], "Aborted");
    // Delete: refused while running, then with the flags the streams go too.
    created(&s, "continuous", "name=busy", COUNT_BY_TYPE).await;
    let r = s.request("DELETE", "/projection/busy", &[ADMIN], b"").await;
    assert_eq!(r.status, 500, "{r:?}");
    assert!(!read_stream(&s, "$projections-totals-checkpoint").is_empty());
    let r = s
        .request(
            "DELETE",
            "/projection/totals?deleteCheckpointStream=yes&deleteStateStream=yes",
            &[ADMIN],
            b"",
        )
        .await;
    assert_eq!((r.status, r.json()), (200, json!({"name": "totals"})), "{r:?}");
    assert_eq!(s.get("/projection/totals", &[ADMIN]).await.status, 404);
    for stream in [
        "$projections-totals",
        "$projections-totals-checkpoint",
        "$projections-totals-order-3-checkpoint",
        "$projections-totals-order-3-result",
        "$projections-totals-partitions",
    ] {
        assert!(read_stream(&s, stream).is_empty(), "{stream} deleted");
    }
    let registry = read_stream(&s, "$projections-$all");
    assert_eq!(registry.last().unwrap().0, "$ProjectionDeleted");
    // The name can be used again; the transient one is deleted while it exists.
    created(&s, "continuous", "name=totals", COUNT_BY_TYPE).await;
    assert_eq!(s.request("DELETE", "/projection/peek", &[ADMIN], b"").await.status, 200);
    let s = s.restart().await;
    caught_up(&s).await;
    assert_eq!(s.get("/projection/peek", &[ADMIN]).await.status, 404);
    assert_eq!(state(&s, "totals", None).await["count"], 10);
    status_becomes(&s, "once", "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_write_no_emitted_event_twice() {
    let s = start_js().await;
    let q = r#"
        fromCategory('order').foreachStream().when({
            $init: function () { return { total: 0 }; },
            $any: function (s, e) {
                s.total += e.body.amount;
                emit('audit-' + e.streamId, 'Seen', { n: e.sequenceNumber, total: s.total });
                linkTo('audit-all', e);
            }
        })"#;
    created(&s, "continuous", "name=audit&emit=yes&enabled=no", q).await;
    let r =
        s.request("PUT", "/projection/audit/config", &[ADMIN], br#"{"checkpointHandledThreshold":4}"#).await;
    assert_eq!(r.status, 200);
    assert_eq!(s.request("POST", "/projection/audit/command/enable", &[ADMIN], b"").await.status, 200);
    for i in 0..30u64 {
        append(&s, &format!("order-{}", i % 3), json!([event("Paid", json!({"amount": i}))])).await;
    }
    caught_up(&s).await;
    let totals = |s: &Server| {
        (0..3)
            .map(|k| {
                let evs = read_stream(s, &format!("audit-order-{k}"));
                (
                    evs.len(),
                    evs.last().map(|(_, d, _)| serde_json::from_str::<Value>(d).unwrap()["total"].clone()),
                )
            })
            .collect::<Vec<_>>()
    };
    let want: Vec<(usize, Option<Value>)> =
        (0..3u64).map(|k| (10, Some(json!((0..30).filter(|i| i % 3 == k).sum::<u64>())))).collect();
    assert_eq!(totals(&s), want);
    // A restart stops the task without a checkpoint: emits past the last checkpoint were
    // written; processed again, none is written twice and the states come out the same.
    let s = s.restart().await;
    caught_up(&s).await;
    assert_eq!(totals(&s), want);
    assert_eq!(read_stream(&s, "audit-all").len(), 30);
    // A partition checkpoint past the root checkpoint (a checkpoint cut short by a crash) is not
    // loaded: the partition's events after the root checkpoint are processed again from the
    // state before them.
    assert_eq!(s.request("POST", "/projection/audit/command/disable", &[ADMIN], b"").await.status, 200);
    let st = stat(&s, "audit").await;
    let v = format!("{}:{}:{}:4", 6, st["epoch"], st["version"]);
    let bogus = json!([{"eventId": new_id(), "eventType": "$Checkpoint", "data": {"total": 1_000_000},
        "metadata": {"$v": v, "$c": u64::MAX / 4, "$p": u64::MAX / 4}}]);
    append(&s, "$projections-audit-order-1-checkpoint", bogus).await;
    assert_eq!(s.request("POST", "/projection/audit/command/enable", &[ADMIN], b"").await.status, 200);
    append(&s, "order-1", json!([event("Paid", json!({"amount": 1}))])).await;
    caught_up(&s).await;
    let total_1: u64 = (0..30).filter(|i| i % 3 == 1).sum::<u64>() + 1;
    assert_eq!(state(&s, "audit", Some("order-1")).await, json!({"total": total_1}));
    assert_eq!(read_stream(&s, "audit-order-1").len(), 11);
    assert_eq!(read_stream(&s, "audit-all").len(), 31);
    // Every emitted event is tagged, in source order.
    let positions: Vec<u64> =
        read_stream(&s, "audit-all").iter().map(|(_, _, m)| m["$p"].as_u64().unwrap()).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_event_on_any_and_on_raw_over_http() {
    let s = start_js().await;
    orders(&s).await;
    // The lower-level functions add to `when`'s handlers: the raw handler sees each event
    // unparsed, then `$any`, then the handler named for the type.
    let q = r#"
fromCategory('order').foreachStream().when({
    $init: function () { return { raw: 0, any: 0, paid: 0, jsonSeenRaw: false }; },
    $any: function (s, e) { s.any += 1; }
});
on_raw(function (s, e) { s.raw += 1; s.jsonSeenRaw = s.jsonSeenRaw || e.isJson || e.body !== null; });
on_event('Paid', function (s, e) { s.paid += e.body.amount; });"#;
    created(&s, "continuous", "name=lower", q).await;
    // `on_event` alone selects its types.
    let q = "fromAll(); on_event('Opened', function (s, e) { return { opened: (s.opened || 0) + 1 }; });";
    created(&s, "continuous", "name=opened", q).await;
    caught_up(&s).await;
    // order-2 holds amounts 2 (Paid), 5 (Placed), 8 (Paid).
    assert_eq!(
        state(&s, "lower", Some("order-2")).await,
        json!({"raw": 3, "any": 3, "paid": 10, "jsonSeenRaw": false})
    );
    assert_eq!(state(&s, "opened", None).await, json!({"opened": 1}));
    let r = s.get("/projection/opened/query?config=yes", &[ADMIN]).await;
    let d = r.json();
    assert_eq!(d["definition"]["events"], json!(["Opened"]), "{d}");
    assert_eq!(d["definition"]["options"]["definesFold"], true, "{d}");
    let r = s.get("/projection/lower/query?config=yes", &[ADMIN]).await;
    assert_eq!(r.json()["definition"]["allEvents"], true);
    // A bad use is a clear error at creation.
    let r = create(&s, "continuous", "name=bad", "fromAll();\non_any(42);").await;
    assert_eq!(r.status, 400, "{r:?}");
    assert_eq!(r.reason, "on_any needs a function (line 2)", "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_projections_expire_after_their_last_access() {
    const EXPIRY: Duration = Duration::from_millis(1500);
    let s = start_with(|c| {
        c.run_projections = RunProjections::All;
        c.projections_query_expiry = EXPIRY;
    })
    .await;
    let opts = s.get("/info/options", &[OPS]).await.json();
    let opt = opts.as_array().unwrap().iter().find(|o| o["name"] == "ProjectionsQueryExpiry").unwrap();
    assert_eq!((opt["group"].as_str(), opt["value"].as_str()), (Some("Projections"), Some("5")), "{opt}");
    orders(&s).await;
    let clock = || s.node.env().clock.monotonic();
    let sleep = |ms: u64| s.node.env().rt.sleep(Duration::from_millis(ms));
    created(&s, "transient", "name=kept", COUNT_BY_TYPE).await;
    created(&s, "transient", "name=dropped", COUNT_BY_TYPE).await;
    created(&s, "onetime", "name=stays", COUNT_BY_TYPE).await;
    // Polling the statistics is no access: `dropped` expires while its status is watched.
    status_becomes(&s, "dropped", "Completed").await;
    // `kept` is read (state, result, query, config, in turn) for twice the expiry.
    let start = clock();
    let mut i = 0;
    while clock() - start < EXPIRY * 2 {
        let path = ["state", "result", "query", "config"][i % 4];
        let r = s.get(&format!("/projection/kept/{path}"), &[ADMIN]).await;
        assert_eq!(r.status, 200, "{path}: {r:?}");
        i += 1;
        sleep(100).await;
    }
    assert_eq!(state(&s, "kept", None).await["count"], 10);
    assert_eq!(s.get("/projection/dropped", &[ADMIN]).await.status, 404, "not accessed: expired");
    assert_eq!(s.get("/projection/dropped/state", &[ADMIN]).await.status, 404);
    let transient = s.get("/projections/transient", &[ADMIN]).await.json();
    let names: Vec<&str> =
        transient["projections"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["kept"]);
    // Left alone, `kept` goes too: not before the expiry has passed since its last access.
    let last_access = clock();
    let gone = loop {
        let r = s.get("/projection/kept", &[ADMIN]).await;
        if r.status == 404 {
            break clock() - last_access;
        }
        assert_eq!(r.status, 200, "{r:?}");
        assert!(clock() - last_access < EXPIRY * 10, "kept never expired");
        sleep(50).await;
    };
    assert!(gone >= EXPIRY, "expired {gone:?} after its last access");
    // Only transient projections expire; the name can be used again.
    assert_eq!(stat(&s, "stays").await["mode"], "OneTime");
    created(&s, "transient", "name=kept", COUNT_BY_TYPE).await;
    status_becomes(&s, "kept", "Completed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_stream_catalog_reads_the_streams_it_names() {
    let s = start_js().await;
    orders(&s).await;
    let reference = |ty: &str, data: &str| json!({"eventId": new_id(), "eventType": ty, "data": data});
    // Stream references, a link (its target's stream counts) and a repeat.
    append(
        &s,
        "catalog-1",
        json!([
            reference("$@", "order-3"),
            reference("$>", "0@order-1"),
            reference("$@", "order-3"),
            reference("$@", "account-1"),
        ]),
    )
    .await;
    let q = r#"
fromStreamCatalog('catalog-1').foreachStream().when({
    $init: function () { return { n: 0, total: 0 }; },
    $any: function (s, e) { s.n += 1; s.total += e.body.amount || 0; }
})"#;
    created(&s, "onetime", "name=listed", q).await;
    status_becomes(&s, "listed", "Completed").await;
    // order-1: 1, 4, 7; order-3: 3, 6, 9; order-2 is not in the catalog.
    assert_eq!(state(&s, "listed", Some("order-1")).await, json!({"n": 3, "total": 12}));
    assert_eq!(state(&s, "listed", Some("order-3")).await, json!({"n": 3, "total": 18}));
    assert_eq!(state(&s, "listed", Some("account-1")).await, json!({"n": 1, "total": 0}));
    assert_eq!(state(&s, "listed", Some("order-2")).await, Value::Null);
    let d = s.get("/projection/listed/query?config=yes", &[ADMIN]).await.json();
    assert_eq!(
        (&d["definition"]["catalogStream"], &d["definition"]["byStream"]),
        (&json!("catalog-1"), &json!(true))
    );
    // With a function, each catalog event's stream is what it answers (null: none).
    append(
        &s,
        "catalog-2",
        json!([
            event("Listed", json!({"s": "order-2"})),
            event("Listed", json!({})),
            event("Listed", json!({"s": "order-2"}))
        ]),
    )
    .await;
    let q = r#"
fromStreamCatalog('catalog-2', function (e) { return e.body.s; }).foreachStream().when({
    $any: function (s, e) { return { last: e.body.amount }; }
})"#;
    created(&s, "transient", "name=named", q).await;
    status_becomes(&s, "named", "Completed").await;
    assert_eq!(state(&s, "named", Some("order-2")).await, json!({"last": 8}));
    assert_eq!(state(&s, "named", Some("order-1")).await, Value::Null);
    // Only one-time and transient projections read catalogs; a catalog event that names no stream
    // faults the projection.
    let r = create(&s, "continuous", "name=forever", q).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (400, "fromStreamCatalog is supported only by one-time and transient projections"),
        "{r:?}"
    );
    let q = "fromStreamCatalog('catalog-2').foreachStream().when({ $any: function (s, e) {} })";
    created(&s, "onetime", "name=untyped", q).await;
    let st = status_becomes(&s, "untyped", "Faulted (Enabled)").await;
    assert!(st["stateReason"].as_str().unwrap().contains("\"Listed\""), "{st}");
}
