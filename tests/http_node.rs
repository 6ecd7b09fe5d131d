//! Node routes and the connection layer: `/ping`, `/info`, `/info/options`, `/gossip`, `/stats`,
//! CORS and `OPTIONS`, 404/405, slow and half-closed clients, and `POST /admin/shutdown`.

#[path = "http_support/mod.rs"]
mod support;

use std::time::Duration;

use serde_json::json;
use support::{start, start_with, ADMIN, OPS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_info_options() {
    let s = start().await;
    let r = s.get("/ping", &[]).await;
    assert_eq!(r.json()["text"], "Ping request successfully handled");
    let r = s.get("/ping", &[("accept", "text/plain")]).await;
    assert_eq!(r.text(), "Text: Ping request successfully handled");
    let r = s.get("/info", &[]).await;
    assert_eq!(r.json(), json!({"esVersion": "5.0.12.0", "state": "master", "projectionsMode": "None"}));
    let r = s.get("/info", &[("accept", "text/xml")]).await;
    assert_eq!(r.header("content-type"), Some("text/xml; charset=utf-8"));
    assert_eq!(r.json()["state"], "master");
    assert_eq!(s.get("/info/options", &[]).await.status, 401);
    let r = s.get("/info/options", &[OPS]).await;
    assert_eq!(r.status, 200);
    let opts = r.json();
    let find = |n: &str| opts.as_array().unwrap().iter().find(|o| o["name"] == n).unwrap().clone();
    assert_eq!(find("HttpPort")["group"], "Interface");
    assert_eq!(find("RunProjections")["possibleValues"], json!(["None", "System", "All"]));
    assert_eq!(find("Db").get("possibleValues"), None);
    assert!(find("Db")["description"].as_str().unwrap().len() > 10);
    let replication_ip = find("ReplicationIp");
    assert_eq!(replication_ip["group"], "Cluster");
    assert_eq!(replication_ip["value"], "127.0.0.1");
    assert!(replication_ip["description"]
        .as_str()
        .unwrap()
        .ends_with("Also accepted as IntIp (--int-ip, ANNAL_INT_IP)."));
    assert_eq!(find("ClusterSize")["value"], "1");
    assert!(
        opts.as_array().unwrap().iter().all(|o| o["name"] != "IntIp"),
        "aliases are not listed as options"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_options_never_shows_a_password() {
    let s = start_with(|c| {
        c.values.insert("CertificatePassword", ("bundle secret".into(), annal::config::Source::CommandLine));
        c.values.insert(
            "CertificatePrivateKeyPassword",
            ("key secret".into(), annal::config::Source::Environment),
        );
    })
    .await;
    let r = s.get("/info/options", &[OPS]).await;
    assert!(!r.text().contains("secret"), "{}", r.text());
    let opts = r.json();
    let find = |n: &str| opts.as_array().unwrap().iter().find(|o| o["name"] == n).unwrap().clone();
    assert_eq!(find("CertificatePassword")["value"], "****");
    assert_eq!(find("CertificatePrivateKeyPassword")["value"], "****");
    assert_eq!(find("CertificateFile")["value"], "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gossip_and_stats() {
    let s = start().await;
    s.append_n("st", 0, 3).await;
    let r = s.get("/gossip", &[]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=0, no-cache, must-revalidate"));
    let g = r.json();
    let m = &g["members"][0];
    assert_eq!(m["state"], "Master");
    assert_eq!(m["isAlive"], true);
    assert_eq!(m["externalHttpPort"], s.addr.port());
    assert_eq!(m["externalHttpIp"], "127.0.0.1");
    assert!(m["writerCheckpoint"].as_i64().unwrap() > 0);
    assert_eq!(m["epochNumber"], 0);
    assert_eq!(g["serverPort"], s.addr.port());

    // A member's posted view is checked and answered with this node's; a malformed one is a 400.
    let posted = serde_json::to_vec(&g).unwrap();
    let r = s.post("/gossip", "application/json", &[], &posted).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["members"][0]["state"], "Master");
    for (body, why) in [
        (&b"not json"[..], "not JSON"),
        (br#"{"members": 3}"#, "no 'members' array"),
        (br#"{"members": [{"internalTcpIp": "x", "internalTcpPort": 1, "state": "Slave"}]}"#, "not an IP"),
        (
            br#"{"members": [{"internalTcpIp": "10.0.0.1", "internalTcpPort": 70000, "state": "Slave"}]}"#,
            "out of range",
        ),
    ] {
        let r = s.post("/gossip", "application/json", &[], body).await;
        assert_eq!(r.status, 400, "{why}");
        assert!(r.reason.contains(why), "{} does not say {why}", r.reason);
    }

    let r = s.get("/stats", &[]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=1, public"));
    let st = r.json();
    assert_eq!(st["proc"]["id"], std::process::id());
    assert!(st["proc"]["mem"].as_u64().unwrap() > 0);
    assert!(st["proc"]["threadsCount"].as_u64().unwrap() > 0);
    assert!(st["sys"]["freeMem"].as_u64().unwrap() > 0);
    assert!(st["es"]["writer"]["meanFlushSize"].as_f64().unwrap() >= 1.0);
    // Every commit so far synced the chunk's data and writer.chk.
    assert!(st["es"]["writer"]["fsyncs"].as_u64().unwrap() >= 2);
    // ... and spent real time doing it (this node runs on the real disk and clock).
    let w = &st["es"]["writer"];
    assert!(w["totalFlushes"].as_u64().unwrap() >= 1);
    for phase in ["totalStageMs", "totalDataSyncMs", "totalCheckpointSyncMs", "totalPublishMs"] {
        assert!(w[phase].as_f64().unwrap() > 0.0, "{phase}: {w}");
    }
    assert!(st["es"]["readIndex"]["notCachedStreamInfo"].as_u64().is_some());
    let drives = st["sys"]["drive"].as_object().unwrap();
    assert_eq!(drives.len(), 1);
    assert!(drives.values().next().unwrap()["totalBytes"].as_u64().unwrap() > 0);
    let r = s.get("/stats/es/writer", &[]).await;
    assert!(r.json()["maxFlushSize"].as_u64().unwrap() >= 1);
    // Store figures are live (only the system's are sampled once a second): an append shows at
    // once.
    let flushes = |st: &serde_json::Value| st["es"]["writer"]["totalFlushes"].as_u64().unwrap();
    s.append_n("st", 3, 1).await;
    let again = s.get("/stats", &[]).await.json();
    assert_eq!(flushes(&again), flushes(&st) + 1);
    let r = s.get("/stats/nope", &[]).await;
    assert_eq!((r.status, r.body.len()), (404, 0));
    let r = s.get("/stats/proc?group=false", &[]).await;
    assert_eq!(r.status, 400);
    let r = s.get("/stats?group=false", &[]).await;
    assert!(r.json()["proc-diskIo-readBytes"].is_u64());
    let r = s.get("/stats/proc?metadata=true", &[]).await;
    assert_eq!(r.json()["mem"]["category"], "proc");
    let r = s.get("/stats/es/writer", &[("accept", "text/xml")]).await;
    assert!(r.text().contains("<stats><lastFlushSize>"), "{}", r.text());
    assert_eq!(s.get("/stats/tcp", &[]).await.json(), json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_options_and_unrouted() {
    let s = start().await;
    let r = s.request("OPTIONS", "/streams/x", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, POST, DELETE, OPTIONS"));
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-expose-headers"), Some("Location, ES-Position, ES-CurrentVersion"));
    assert!(r.header("access-control-allow-headers").unwrap().contains("ES-LongPoll"));
    let r = s.get("/nothing/here", &[]).await;
    assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"));
    assert_eq!(r.header("access-control-allow-methods"), Some(""));
    let r = s.request("PUT", "/streams/x", &[], b"").await;
    assert_eq!((r.status, r.reason.as_str()), (405, "Method Not Allowed"));
    assert_eq!(s.request("HEAD", "/ping", &[], b"").await.status, 405);
    let r = s.get("/streams/x/metadata/0/forward/5", &[]).await;
    assert_eq!(r.header("access-control-allow-methods"), Some("GET, OPTIONS"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_broken_clients_do_not_block_others() {
    let s = start().await;
    let env = annal::env::real::env();
    // A client that sends half a request line and then nothing.
    let mut slow = env.net.connect(s.addr).await.unwrap();
    slow.write_all(b"GET /streams/x HTTP/1.1\r\nhost: h").await.unwrap();
    // A client that sends half a body and closes its side.
    let mut half = env.net.connect(s.addr).await.unwrap();
    half.write_all(b"POST /streams/x HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\nes-eventtype: t\r\nes-eventid: fbf4a1a1-b4a3-4dfe-a01f-ec52c34e16e4\r\ncontent-length: 100\r\n\r\n{\"a\":").await.unwrap();
    half.shutdown().await.unwrap();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(10), half.read_to_end(&mut buf))
        .await
        .expect("closed in time");
    assert!(n.is_ok());
    if !buf.is_empty() {
        assert_eq!(support::parse(&buf).status, 400);
    }
    // Garbage is answered (or the connection closed), never a hang.
    let raw = s.raw(b"\x16\x03\x01garbage\r\n\r\n").await;
    assert!(raw.is_empty() || raw.starts_with(b"HTTP/1.1 400"), "{:?}", String::from_utf8_lossy(&raw));
    // Others are served meanwhile.
    let t = env.clock.monotonic();
    for _ in 0..5 {
        assert_eq!(s.get("/ping", &[]).await.status, 200);
    }
    assert!(env.clock.monotonic() - t < Duration::from_secs(5));
    // Nothing was written by the half-sent append.
    assert_eq!(s.get("/streams/x", &[("accept", "application/json")]).await.status, 404);
    drop(slow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_over_http() {
    let s = start().await;
    assert_eq!(s.post("/admin/shutdown", "application/json", &[], b"").await.status, 401);
    let r = s.post("/admin/shutdown", "application/json", &[ADMIN], b"").await;
    assert_eq!(r.status, 200);
    let support::Server { done, client, .. } = s;
    tokio::time::timeout(Duration::from_secs(10), done).await.expect("node stopped").unwrap();
    let env = annal::env::real::env();
    assert!(env.net.connect(client.addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let s = start().await;
    let env = annal::env::real::env();
    let mut c = env.net.connect(s.addr).await.unwrap();
    c.write_all(b"GET /ping HTTP/1.1\r\nhost: h\r\naccept: text/plain\r\n\r\nGET /info HTTP/1.1\r\nhost: h\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&buf);
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(text.contains("Text: Ping request successfully handled") && text.contains("esVersion"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_routes_answer_probes_without_credentials() {
    let s = start().await;
    let r = s.get("/health/live", &[]).await;
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    let r = s.request("HEAD", "/health/live", &[], b"").await;
    assert_eq!(r.status, 204);
    assert_eq!(s.get("/health/live?liveCode=200", &[]).await.status, 200);
    let r = s.get("/health/live?liveCode=abc", &[]).await;
    assert_eq!(r.status, 400, "{}", r.reason);
    assert!(r.reason.contains("liveCode"), "{}", r.reason);
    assert_eq!(s.get("/health/live?liveCode=99", &[]).await.status, 400);
    // A single node serves its role as soon as it serves.
    let r = s.get("/health/ready", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"ready": true, "state": "master"}));
    let r = s.request("HEAD", "/health/ready", &[], b"").await;
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty(), "HEAD carries no body");
    assert_eq!(s.request("POST", "/health/live", &[], b"").await.status, 405);
}

fn gunzip(body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body).read_to_end(&mut out).expect("a gzip body");
    out
}

/// `/` and `/web` send browsers to the Admin UI with relative redirects (so a reverse proxy may
/// serve the node under a path prefix), its files carry the security headers and an ETag, and
/// `--disable-admin-ui` takes all of it away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_ui_is_served_with_relative_redirects_and_security_headers() {
    let s = start().await;
    for (path, to) in [("/", "web/index.html"), ("/web", "web/index.html"), ("/web/", "index.html")] {
        let r = s.get(path, &[("accept", "text/html")]).await;
        assert_eq!(r.status, 302, "{path}");
        assert_eq!(r.header("location"), Some(to), "{path}");
        assert!(r.header("content-security-policy").is_some_and(|v| v.contains("frame-ancestors 'none'")));
        assert_eq!(r.header("x-frame-options"), Some("DENY"));
    }
    assert_eq!(s.get("/web/no-such-file.js", &[]).await.status, 404);
    // Every file the binary embeds is served with its type, its ETag and the headers.
    for file in annal::http::web::files() {
        let r = s.get(&format!("/web/{file}"), &[]).await;
        assert_eq!(r.status, 200, "{file}");
        assert_eq!(r.header("content-type"), Some(annal::http::web::content_type(file)), "{file}");
        assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
        let etag = r.header("etag").expect("an etag").to_string();
        let again = s.get(&format!("/web/{file}"), &[("if-none-match", &etag)]).await;
        assert_eq!(again.status, 304, "{file}");
        assert!(again.body.is_empty());
        let zipped = s.get(&format!("/web/{file}"), &[("accept-encoding", "gzip, deflate, br")]).await;
        if zipped.header("content-encoding") == Some("gzip") {
            assert_eq!(gunzip(&zipped.body), r.body, "{file}");
        }
    }
    let off = start_with(|c| c.disable_admin_ui = true).await;
    for path in ["/", "/web", "/web/index.html"] {
        assert_eq!(off.get(path, &[]).await.status, 404, "{path}");
    }
    assert_eq!(off.get("/ping", &[]).await.status, 200);
}

/// gzip for every client that asks, as browsers and `curl --compressed` ask (a list with
/// q-values), on feeds and documents of 1 KiB or more, with `Vary`; never for one that refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_gzipped_when_the_client_accepts_it() {
    let s = start().await;
    for i in 0..30 {
        let id = uuid::Uuid::from_u128(0x5a1d_0000_0000_0000_0000_0000_0000_0000 + i);
        let body = format!(
            r#"[{{"eventId":"{id}","eventType":"t","data":{{"n":{i},"pad":"{}"}}}}]"#,
            "x".repeat(100)
        );
        let r = s
            .post("/streams/zipped", "application/vnd.eventstore.events+json", &[ADMIN], body.as_bytes())
            .await;
        assert_eq!(r.status, 201);
    }
    let path = "/streams/zipped/0/forward/30?embed=body";
    let plain = s.get(path, &[("accept", "application/json")]).await;
    assert_eq!(plain.status, 200);
    assert!(plain.body.len() > 1024);
    assert_eq!(plain.header("content-encoding"), None);
    assert!(
        plain.header("vary").is_some_and(|v| v.contains("Accept-Encoding")),
        "{:?}",
        plain.header("vary")
    );
    for accept in ["gzip", "gzip, deflate, br", "br;q=1.0, gzip;q=0.5", "*"] {
        let r = s.get(path, &[("accept", "application/json"), ("accept-encoding", accept)]).await;
        assert_eq!(r.header("content-encoding"), Some("gzip"), "{accept}");
        assert!(r.header("vary").is_some_and(|v| v.contains("Accept-Encoding")));
        assert!(r.body.len() < plain.body.len() / 2, "{accept}: {} bytes", r.body.len());
        let json: serde_json::Value = serde_json::from_slice(&gunzip(&r.body)).unwrap();
        assert_eq!(json["entries"].as_array().unwrap().len(), 30);
    }
    for accept in ["identity", "gzip;q=0", "*;q=0", "br"] {
        let r = s.get(path, &[("accept", "application/json"), ("accept-encoding", accept)]).await;
        assert_eq!(r.header("content-encoding"), None, "{accept}");
        assert_eq!(r.body.len(), plain.body.len(), "{accept}");
    }
    // A write's small answer is never compressed, and says nothing about encodings.
    let id = uuid::Uuid::from_u128(0x5a1d_0000_0000_0000_0000_0000_0000_ffff);
    let body = format!(r#"[{{"eventId":"{id}","eventType":"t","data":{{}}}}]"#);
    let w = s
        .post(
            "/streams/zipped",
            "application/vnd.eventstore.events+json",
            &[ADMIN, ("accept-encoding", "gzip")],
            body.as_bytes(),
        )
        .await;
    assert_eq!(w.status, 201);
    assert_eq!(w.header("content-encoding"), None);
    // `/metrics` compresses its own document once, and is not compressed again.
    let m = s.get("/metrics", &[("accept-encoding", "gzip")]).await;
    assert_eq!(m.header("content-encoding"), Some("gzip"));
    assert!(String::from_utf8(gunzip(&m.body)).unwrap().contains("# TYPE"));
}
