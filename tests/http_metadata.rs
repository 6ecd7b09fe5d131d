//! Stream metadata and access control over HTTP: reading and writing `$$s`, the reserved keys'
//! effect on reads and caching, `$acl` per operation, `$settings` defaults and 401s.

#[path = "http_support/mod.rs"]
mod support;

use serde_json::json;
use support::{new_id, start, ADMIN};

const ATOM: (&str, &str) = ("accept", "application/vnd.eventstore.atom+json");
const JSON: (&str, &str) = ("accept", "application/json");
const EVENTS_JSON: &str = "application/vnd.eventstore.events+json";

async fn set_meta(
    s: &support::Server,
    stream: &str,
    meta: serde_json::Value,
    auth: &[(&str, &str)],
) -> support::Resp {
    let id = new_id();
    let mut h = vec![("es-eventid", id.as_str())];
    h.extend_from_slice(auth);
    s.post(&format!("/streams/{stream}/metadata"), "application/json", &h, meta.to_string().as_bytes()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_read_and_write() {
    let s = start().await;
    let r = s.get("/streams/m/metadata", &[JSON]).await;
    assert_eq!(r.status, 404);
    s.append_n("m", 0, 5).await;
    let r = s.get("/streams/m/metadata", &[JSON]).await;
    assert_eq!((r.status, r.text().as_str(), r.header("etag")), (200, "{}", None));
    let r = s.get("/streams/m/metadata", &[]).await;
    assert_eq!((r.status, r.body.len()), (200, 0));

    let r = set_meta(&s, "m", json!({"$maxCount": 2, "custom": "kept"}), &[]).await;
    assert_eq!((r.status, r.header("location")), (201, Some("http://h:2113/streams/%24%24m/0")));
    let r = s.get("/streams/m/metadata", &[JSON]).await;
    assert_eq!(r.json(), json!({"$maxCount": 2, "custom": "kept"}));
    let r = s.get("/streams/m/metadata", &[ATOM]).await;
    assert_eq!(r.json()["summary"], "$metadata");
    assert_eq!(r.json()["title"], "0@$$m");
    let r = s.get("/streams/%24%24m", &[ATOM]).await;
    assert_eq!(r.json()["entries"].as_array().unwrap().len(), 1);
    let r = s.get("/streams/m/metadata/0/forward/5", &[ATOM]).await;
    assert_eq!(r.json()["title"], "Event stream '$$m'");
    assert_eq!(r.json()["id"], "http://h:2113/streams/%24%24m");
    assert_eq!(r.json()["entries"][0]["summary"], "$metadata");
    assert_eq!(s.get("/streams/m/metadata/0", &[ATOM]).await.status, 200);
    let r = s.get("/streams/m/metadata/", &[ATOM]).await;
    assert_eq!((r.status, r.header("location")), (307, Some("http://h:2113/streams/m/metadata")));

    // $maxCount hides all but the last two events; the page is the end of the stream.
    let page = s.get("/streams/m", &[ATOM]).await.json();
    let titles: Vec<&str> =
        page["entries"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["4@m", "3@m"]);
    assert!(!page["links"].as_array().unwrap().iter().any(|l| l["relation"] == "next"));
    assert_eq!(s.get("/streams/m/1", &[ATOM]).await.status, 404);

    // $tb and $cacheControl.
    let r = set_meta(&s, "m", json!({"$tb": 4, "$cacheControl": 30}), &[]).await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/%24%24m/1"));
    let r = s.get("/streams/m", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=30, public"));
    assert_eq!(r.json()["entries"].as_array().unwrap().len(), 1);

    // Event type and id rules of the metadata route.
    let r = s.post("/streams/m/metadata", "application/json", &[], b"{}").await;
    assert_eq!((r.status, r.reason.as_str()), (400, "Empty eventId provided."));
    let id = new_id();
    let r = s
        .post(
            "/streams/m/metadata",
            "application/json",
            &[("es-eventid", &id), ("es-eventtype", "other")],
            b"{}",
        )
        .await;
    assert_eq!(r.status, 400);
    let batch = json!([{"eventId": new_id(), "eventType": "$user-updated", "data": {"$maxCount": 3}}]);
    let r = s.post("/streams/m/metadata", EVENTS_JSON, &[], batch.to_string().as_bytes()).await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/%24%24m/2"));
    let r = s.get("/streams/%24%24m/metadata", &[JSON]).await;
    assert_eq!(r.status, 400);
    let r = set_meta(&s, "m", json!({"$maxCount": 3}), &[("es-expectedversion", "0")]).await;
    assert_eq!((r.status, r.header("es-currentversion")), (400, Some("2")));

    // Soft delete replaces the metadata; it stays readable.
    assert_eq!(s.request("DELETE", "/streams/m", &[], b"").await.status, 204);
    let r = s.get("/streams/m/metadata", &[JSON]).await;
    assert_eq!(r.json(), json!({"$tb": 9223372036854775807i64}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_decide_per_operation() {
    let s = start().await;
    let bob = ("authorization", "Basic Ym9iOnNlY3JldA==");
    let r = s
        .post(
            "/users",
            "application/json",
            &[ADMIN],
            json!({"loginName": "bob", "fullName": "Bob", "groups": ["dev"], "password": "secret"})
                .to_string()
                .as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201);
    s.append_n("secret", 0, 2).await;
    let r = set_meta(&s, "secret", json!({"$acl": {"$r": "dev", "$w": ["$admins"], "$mr": "$admins"}}), &[])
        .await;
    assert_eq!(r.status, 201);

    let r = s.get("/streams/secret", &[ATOM]).await;
    assert_eq!((r.status, r.reason.as_str()), (401, "Unauthorized"));
    assert_eq!(r.header("www-authenticate"), Some("BasicCustom realm=\"ES\""));
    let r = s.get("/streams/secret/0/forward/5", &[ATOM]).await;
    assert_eq!(r.status, 401);
    let r = s.get("/streams/secret", &[ATOM, bob]).await;
    assert_eq!((r.status, r.header("cache-control")), (200, Some("max-age=0, no-cache, must-revalidate")));
    let r = s.get("/streams/secret/0", &[ATOM, bob]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=31536000, private"));
    let one = json!([{"eventId": new_id(), "eventType": "x", "data": {}}]).to_string();
    assert_eq!(s.post("/streams/secret", EVENTS_JSON, &[bob], one.as_bytes()).await.status, 401);
    assert_eq!(s.post("/streams/secret", EVENTS_JSON, &[ADMIN], one.as_bytes()).await.status, 201);
    // Metadata read needs $mr; metadata write falls back to the default ($all for user streams).
    assert_eq!(s.get("/streams/secret/metadata", &[JSON, bob]).await.status, 401);
    assert_eq!(s.get("/streams/secret/metadata", &[JSON, ADMIN]).await.status, 200);
    // $d falls back to the default too; deleting a metastream is never allowed.
    assert_eq!(s.request("DELETE", "/streams/%24%24secret", &[ADMIN], b"").await.status, 401);

    // System streams are for admins; $settings changes the defaults of user streams.
    assert_eq!(s.get("/streams/$users", &[ATOM, bob]).await.status, 401);
    assert_eq!(s.get("/streams/$users", &[ATOM, ADMIN]).await.status, 200);
    s.append_n("open", 0, 1).await;
    assert_eq!(s.get("/streams/open", &[ATOM]).await.status, 200);
    let settings = json!([{"eventId": new_id(), "eventType": "settings", "data": {"$userStreamAcl": {"$r": "$admins", "$w": "$all"}}}]);
    let r = s.post("/streams/$settings", EVENTS_JSON, &[bob], settings.to_string().as_bytes()).await;
    assert_eq!(r.status, 401);
    let r = s.post("/streams/$settings", EVENTS_JSON, &[ADMIN], settings.to_string().as_bytes()).await;
    assert_eq!(r.status, 201);
    assert_eq!(s.get("/streams/open", &[ATOM]).await.status, 401);
    assert_eq!(s.get("/streams/open", &[ATOM, ADMIN]).await.status, 200);
    assert_eq!(s.post("/streams/open", EVENTS_JSON, &[], one.as_bytes()).await.status, 201);
    // The stream's own ACL still wins over the defaults.
    assert_eq!(s.get("/streams/secret", &[ATOM, bob]).await.status, 200);
}
