//! The users API and authentication: default users, create/update/delete, enable/disable,
//! password reset and change (with immediate effect on cached credentials), users stored as
//! events, and 401s.

#[path = "http_support/mod.rs"]
mod support;

use serde_json::json;
use support::{start, ADMIN, OPS};

const BOB: (&str, &str) = ("authorization", "Basic Ym9iOnNlY3JldA==");
const BOB_NEW: (&str, &str) = ("authorization", "Basic Ym9iOmZyZXNo");
const ATOM: (&str, &str) = ("accept", "application/vnd.eventstore.atom+json");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_users_and_levels() {
    let s = start().await;
    let r = s.get("/users", &[ADMIN]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json; charset=utf-8"));
    insta::assert_json_snapshot!("default_users", r.json(), { ".msgTypeId" => "[n]" });
    assert_eq!(s.get("/users/", &[ADMIN]).await.status, 200);
    let r = s.get("/users", &[]).await;
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("BasicCustom realm=\"ES\"")));
    assert_eq!(s.get("/users", &[OPS]).await.status, 401);
    // Wrong credentials are refused on every URL.
    let bad = ("authorization", "Basic YWRtaW46d3Jvbmc=");
    for path in ["/ping", "/info", "/streams/x"] {
        assert_eq!(s.get(path, &[bad]).await.status, 401, "{path}");
    }
    assert_eq!(s.request("OPTIONS", "/ping", &[bad], b"").await.status, 401);
    assert_eq!(s.get("/ping", &[("authorization", "Basic !!!")]).await.status, 401);
    let r = s.get("/users/$current", &[OPS]).await;
    assert_eq!(r.json()["data"]["loginName"], "ops");
    assert_eq!(r.json()["data"]["groups"], json!(["$ops"]));
    assert!(r.json()["data"]["dateLastUpdated"].as_str().unwrap().ends_with("+00:00"));
    assert_eq!(s.get("/users/$current", &[]).await.status, 401);
    let r = s.get("/users/nobody", &[ADMIN]).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"], "NotFound");
    assert_eq!(r.json()["success"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_lifecycle() {
    let s = start().await;
    let create =
        json!({"loginName": "bob", "fullName": "Bob", "groups": ["dev"], "password": "secret"}).to_string();
    let r = s.post("/users", "application/json", &[], create.as_bytes()).await;
    assert_eq!(r.status, 401);
    let r = s.post("/users", "application/json", &[ADMIN], create.as_bytes()).await;
    assert_eq!((r.status, r.header("location")), (201, Some("http://h:2113/users/bob")));
    assert_eq!(r.json()["loginName"], "bob");
    assert_eq!(r.json()["success"], true);
    // Creating again with the same password succeeds; with another, it conflicts.
    assert_eq!(s.post("/users", "application/json", &[ADMIN], create.as_bytes()).await.status, 201);
    let other = json!({"loginName": "bob", "fullName": "B", "groups": [], "password": "x"}).to_string();
    let r = s.post("/users", "application/json", &[ADMIN], other.as_bytes()).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (409, Some("Conflict")));
    assert_eq!(s.post("/users", "application/json", &[ADMIN], b"{nope").await.status, 400);
    assert_eq!(s.post("/users", "text/plain", &[ADMIN], b"{}").await.status, 415);

    let r = s.get("/users/bob", &[ADMIN]).await;
    insta::assert_json_snapshot!("user_bob", r.json(), { ".msgTypeId" => "[n]" });
    assert_eq!(s.get("/users/$current", &[BOB]).await.json()["data"]["fullName"], "Bob");

    // Disable takes effect at once, even though bob's credentials were cached.
    assert_eq!(s.post("/users/bob/command/disable", "application/json", &[ADMIN], b"").await.status, 200);
    assert_eq!(s.get("/ping", &[BOB]).await.status, 401);
    assert_eq!(s.get("/users/bob", &[ADMIN]).await.json()["data"]["links"][4]["rel"], "enable");
    assert_eq!(s.request("PUT", "/users/bob/command/enable", &[ADMIN], b"").await.status, 200);
    assert_eq!(s.get("/ping", &[BOB]).await.status, 200);

    // Reset and change password.
    let r = s
        .post(
            "/users/bob/command/reset-password",
            "application/json",
            &[ADMIN],
            br#"{"newPassword":"fresh"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.get("/ping", &[BOB]).await.status, 401);
    assert_eq!(s.get("/ping", &[BOB_NEW]).await.status, 200);
    let r = s
        .post(
            "/users/bob/command/change-password",
            "application/json",
            &[BOB_NEW],
            br#"{"currentPassword":"wrong","newPassword":"secret"}"#,
        )
        .await;
    assert_eq!((r.status, r.json()["error"].as_str()), (401, Some("Unauthorized")));
    let r = s
        .post(
            "/users/bob/command/change-password",
            "application/json",
            &[BOB_NEW],
            br#"{"CurrentPassword":"fresh","NewPassword":"secret"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.get("/ping", &[BOB]).await.status, 200);
    assert_eq!(
        s.post(
            "/users/nobody/command/reset-password",
            "application/json",
            &[ADMIN],
            br#"{"newPassword":"x"}"#
        )
        .await
        .status,
        404
    );

    // Update groups: bob becomes an admin and may read $all.
    assert_eq!(s.get("/streams/$all", &[ATOM, BOB]).await.status, 401);
    let r = s
        .request(
            "PUT",
            "/users/bob",
            &[ADMIN, ("content-type", "application/json")],
            br#"{"fullName":"Bob B","groups":["$admins"]}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(s.get("/streams/$all", &[ATOM, BOB]).await.status, 200);
    assert_eq!(
        s.request("PUT", "/users/nobody", &[ADMIN, ("content-type", "application/json")], b"{}").await.status,
        404
    );

    // Users live in streams; the password is stored hashed.
    let page = s.get("/streams/$user-bob?embed=body", &[ATOM, ADMIN]).await.json();
    let types: Vec<&str> =
        page["entries"].as_array().unwrap().iter().map(|e| e["eventType"].as_str().unwrap()).collect();
    assert_eq!(types.last(), Some(&"$UserCreated"));
    assert!(types.iter().all(|t| *t == "$UserCreated" || *t == "$UserUpdated"));
    assert!(!page.to_string().contains("secret") && !page.to_string().contains("fresh"));
    let users = s.get("/streams/$users?embed=body", &[ATOM, ADMIN]).await.json();
    assert!(users["entries"].as_array().unwrap().iter().any(|e| e["eventType"] == "$User"));
    let notes = s.get("/streams/$users-password-notifications?embed=body", &[ATOM, ADMIN]).await.json();
    assert_eq!(notes["entries"][0]["eventType"], "$PasswordChanged");

    // Delete.
    assert_eq!(s.request("DELETE", "/users/bob", &[ADMIN], b"").await.status, 200);
    assert_eq!(s.get("/ping", &[BOB]).await.status, 401);
    assert_eq!(s.get("/users/bob", &[ADMIN]).await.status, 404);
    assert_eq!(s.request("DELETE", "/users/bob", &[ADMIN], b"").await.status, 404);
    let list = s.get("/users", &[ADMIN]).await.json();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);

    // XML bodies and replies.
    let xml = b"<user><loginName>carol</loginName><fullName>Carol</fullName><password>pw</password><groups><g>a</g><g>b</g></groups></user>";
    let r = s.post("/users", "text/xml", &[ADMIN, ("accept", "text/xml")], xml).await;
    assert_eq!(r.status, 201, "{r:?}");
    assert!(r.text().contains("<loginName>carol</loginName>"));
    assert_eq!(s.get("/users/carol", &[ADMIN]).await.json()["data"]["groups"], json!(["a", "b"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let open = |p: std::path::PathBuf| async move {
        let mut c = annal::config::Config::for_dir(p);
        c.chunk_size = 4 * 1024 * 1024;
        c.password_iterations = 16;
        let node = annal::node::Node::open(annal::env::real::env(), c).unwrap();
        let (addr, serve) = node.bind().await.unwrap();
        (node, addr, tokio::spawn(serve))
    };
    let (node, addr, serving) = open(path.clone()).await;
    let s = support::Client { addr };
    let r = s
        .post(
            "/users/admin/command/reset-password",
            "application/json",
            &[ADMIN],
            br#"{"newPassword":"other"}"#,
        )
        .await;
    assert_eq!(r.status, 200);
    node.request_shutdown();
    serving.await.unwrap().unwrap();
    let (node, addr, serving) = open(path).await;
    let s = support::Client { addr };
    // The admin was not re-created with the default password.
    assert_eq!(s.get("/ping", &[ADMIN]).await.status, 401);
    assert_eq!(s.get("/users", &[("authorization", "Basic YWRtaW46b3RoZXI=")]).await.status, 200);
    node.request_shutdown();
    serving.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_changes_written_outside_the_users_api_take_effect_at_once() {
    // A user event that reaches the store another way (a follower applying the leader's
    // records, a restore, a direct write) clears cached credentials: the user cache watches the
    // committed records itself instead of relying on the API that wrote them.
    use annal::store::{NewEvent, ANY};
    let s = start().await;
    assert_eq!(s.get("/users/$current", &[OPS]).await.status, 200, "the verdict is now cached");
    let latest = s.node.store().read_event("$user-ops", -1, false, 0).unwrap().unwrap();
    let mut record: serde_json::Value = serde_json::from_slice(&latest.event.data).unwrap();
    assert_eq!(record["loginName"], "ops");
    record["disabled"] = json!(true);
    let ev = NewEvent {
        id: *uuid::Uuid::parse_str(&support::new_id()).unwrap().as_bytes(),
        event_type: "$UserUpdated".into(),
        data: serde_json::to_vec(&record).unwrap().into(),
        metadata: Default::default(),
        is_json: true,
    };
    s.node.store().append_async("$user-ops", ANY, vec![ev]).await.unwrap();
    assert_eq!(s.get("/users/$current", &[OPS]).await.status, 401, "the disabled user is refused");
    // And through the streams API, as an admin: enabled again.
    record["disabled"] = json!(false);
    let body = json!([{ "eventId": support::new_id(), "eventType": "$UserUpdated", "data": record }]);
    let r = s
        .post(
            "/streams/$user-ops",
            "application/vnd.eventstore.events+json",
            &[ADMIN],
            body.to_string().as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(s.get("/users/$current", &[OPS]).await.status, 200);
}
