//! Scavenging over HTTP: `POST /admin/scavenge` (parameters, credentials, one at a time),
//! `GET /admin/scavenge/current`, `DELETE /admin/scavenge/{id}` (answers after the run stopped,
//! resumable), the `$scavenges` history, `POST /admin/mergeindexes`.

mod http_support;

use std::time::Duration;

use http_support as support;
use support::{ADMIN, OPS};

async fn wait_idle(s: &support::Server) {
    for _ in 0..600 {
        let r = s.get("/admin/scavenge/current", &[OPS]).await;
        assert_eq!(r.status, 200);
        if r.json()["scavengeId"] == "" {
            return;
        }
        s.node.env().rt.sleep(Duration::from_millis(50)).await;
    }
    panic!("the scavenge did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scavenge_over_http() {
    let s = support::start_with(|c| c.chunk_size = 64 * 1024).await;
    for k in 0..4 {
        s.append_n(&format!("s{k}"), 0, 60).await;
    }
    let del = s.request("DELETE", "/streams/s1", &[("es-harddelete", "true")], b"").await;
    assert_eq!(del.status, 204, "{}", del.reason);
    let before = s.get("/streams/s2/0/forward/100", &[("accept", "application/json")]).await;

    // Credentials and parameters.
    assert_eq!(s.post("/admin/scavenge", "application/json", &[], b"{}").await.status, 401);
    for bad in [
        "threads=5",
        "threads=0",
        "throttlePercent=0",
        "throttlePercent=101",
        "threads=2&throttlePercent=50",
        "threshold=x",
        "syncOnly=maybe",
    ] {
        let r = s.post(&format!("/admin/scavenge?{bad}"), "application/json", &[OPS], b"{}").await;
        assert_eq!(r.status, 400, "{bad}: {}", r.reason);
    }
    let r = s.post("/admin/scavenge?startFromChunk=3", "application/json", &[ADMIN], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.reason);
    let id = r.json()["scavengeId"].as_str().unwrap().to_string();
    wait_idle(&s).await;

    // Reads unchanged, the deleted stream's events gone from $all, history written.
    let after = s.get("/streams/s2/0/forward/100", &[("accept", "application/json")]).await;
    assert_eq!(before.json()["entries"], after.json()["entries"]);
    let hist = s
        .get(
            &format!("/streams/$scavenges-{id}/0/forward/50?embed=body"),
            &[OPS, ("accept", "application/json")],
        )
        .await;
    assert_eq!(hist.status, 200, "{}", hist.reason);
    let types: Vec<String> = hist.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["eventType"].as_str().unwrap().to_string())
        .collect();
    // Feed entries are newest first.
    assert_eq!(types.first().map(String::as_str), Some("$scavengeCompleted"));
    assert_eq!(types.last().map(String::as_str), Some("$scavengeStarted"));
    assert_eq!(
        s.get(&format!("/streams/$scavenges-{id}/0/forward/50"), &[("accept", "application/json")])
            .await
            .status,
        401
    );
    let all =
        s.get("/streams/$all/head/backward/4096?embed=body", &[ADMIN, ("accept", "application/json")]).await;
    let s1_left = all.json()["entries"].as_array().unwrap().iter().filter(|e| e["streamId"] == "s1").count();
    assert_eq!(s1_left, 1, "only the tombstone of s1 stays");

    assert_eq!(s.request("DELETE", "/admin/scavenge/nope", &[OPS], b"").await.status, 404);
    assert_eq!(s.post("/admin/mergeindexes", "application/json", &[OPS], b"{}").await.status, 200);
    assert_eq!(s.post("/admin/mergeindexes", "application/json", &[], b"{}").await.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_answers_after_the_run_stopped_and_a_new_start_resumes() {
    let s = support::start_with(|c| c.chunk_size = 16 * 1024).await;
    for k in 0..6 {
        s.append_n(&format!("t{k}"), 0, 40).await;
        let r = s.request("DELETE", &format!("/streams/t{k}"), &[("es-harddelete", "true")], b"").await;
        assert_eq!(r.status, 204);
    }
    // A throttled run rests at least a second between chunks, so it is still running below.
    let r = s.post("/admin/scavenge?throttlePercent=1", "application/json", &[OPS], b"").await;
    assert_eq!(r.status, 200, "{}", r.reason);
    let id = r.json()["scavengeId"].as_str().unwrap().to_string();
    let again = s.post("/admin/scavenge", "application/json", &[OPS], b"").await;
    assert_eq!(again.status, 400);
    assert_eq!(again.reason, "Scavenge is already running");
    let cur = s.get("/admin/scavenge/current", &[OPS]).await.json();
    assert_eq!(cur["scavengeId"], id.as_str());
    assert_eq!(cur["scavengeLink"], format!("/admin/scavenge/{id}"));
    let stopped = s.request("DELETE", "/admin/scavenge/current", &[OPS], b"").await;
    assert_eq!(stopped.status, 200);
    assert_eq!(stopped.json(), serde_json::json!(id));
    assert_eq!(s.get("/admin/scavenge/current", &[OPS]).await.json()["scavengeId"], "");
    let hist = s
        .get(&format!("/streams/$scavenges-{id}/head?embed=body"), &[OPS, ("accept", "application/json")])
        .await;
    assert_eq!(hist.json()["result"], "Stopped", "{}", hist.text());
    // The next start resumes the stopped run and finishes it.
    let r = s.post("/admin/scavenge", "application/json", &[OPS], b"").await;
    assert_eq!(r.status, 200);
    wait_idle(&s).await;
    let id2 = r.json()["scavengeId"].as_str().unwrap().to_string();
    let hist = s
        .get(&format!("/streams/$scavenges-{id2}/head?embed=body"), &[OPS, ("accept", "application/json")])
        .await;
    let all = s
        .get(
            &format!("/streams/$scavenges-{id2}/0/forward/50?embed=body"),
            &[OPS, ("accept", "application/json")],
        )
        .await;
    assert_eq!(hist.json()["result"], "Success", "{}", all.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_level_route_answers_only_where_the_process_owns_the_log() {
    let s = support::start().await;
    assert_eq!(s.get("/admin/loglevel", &[]).await.status, 401);
    // An embedded node (no log control set by the process): refused with the reason.
    let r = s.get("/admin/loglevel", &[OPS]).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (501, "The log level is set by the process that embeds this node")
    );
    assert_eq!(s.post("/admin/loglevel?level=Debug", "application/json", &[OPS], b"").await.status, 501);
}
