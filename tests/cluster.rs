//! Real processes: three `annal` nodes (and a read-only replica) on loopback ports, driven over
//! HTTP. Replication, `kill -9` of the leader during appends, a wiped follower catching up, a
//! replica that serves reads and never leads.
//!
//! This test drives processes from outside the node, so it uses the OS directly (clocks,
//! sockets, processes); the node itself only sees its `Env`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod ports;
use ports::free_port;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Proc {
    child: Option<Child>,
    http: u16,
    repl: u16,
    dir: PathBuf,
    args: Vec<String>,
}

impl Proc {
    fn spawn(&mut self) {
        // Appended to, so the log (and the elections counted from it) spans every restart.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_annal"))
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Lines of each node's log a failed test prints.
const LOG_TAIL_LINES: usize = 40;

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        // The suite reports every election a node won (past the harness's capture), so a run on
        // a busy machine shows whether load caused elections a quiet one does not have.
        let won = std::fs::read_to_string(self.dir.with_extension("log"))
            .map(|log| {
                log.lines()
                    .filter(|l| {
                        l.contains("node state changed")
                            && (l.contains("to=\"Master\"") || l.contains("to=Master"))
                    })
                    .count()
            })
            .unwrap_or(0);
        use std::io::Write;
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        if won > 0 {
            let _ = writeln!(std::io::stderr(), "elections: node :{} won {won} in {test}", self.http);
        }
        // A failed test shows how each node's log ends (the directory goes with the test).
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            let _ = writeln!(std::io::stderr(), "--- the end of node :{}'s log in {test}\n{tail}", self.http);
        }
    }
}

fn new_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(1);
    let n = N.fetch_add(1, Ordering::Relaxed) as u128;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    uuid::Uuid::from_u128((nanos << 20) ^ n).to_string()
}

/// The nodes' election timeout when `CLUSTER_ELECTION_TIMEOUT_MS` sets one (else the node's
/// default): for a machine slower than any the defaults were chosen for.
fn election_timeout_ms() -> Option<u64> {
    std::env::var("CLUSTER_ELECTION_TIMEOUT_MS").ok().and_then(|v| v.parse().ok())
}

/// Starts `n` voting nodes (plus `replicas` read-only replicas) in `root`.
fn cluster(root: &Path, n: usize, replicas: usize) -> Vec<Proc> {
    let ports: Vec<(u16, u16)> = (0..n + replicas).map(|_| (free_port(), free_port())).collect();
    let mut procs = Vec::new();
    for (i, (http, repl)) in ports.iter().enumerate() {
        let seeds: Vec<String> =
            ports[..n].iter().filter(|(_, r)| r != repl).map(|(_, r)| format!("127.0.0.1:{r}")).collect();
        let dir = root.join(format!("node{i}"));
        let mut args = vec![
            "--db".into(),
            dir.display().to_string(),
            "--http-port".into(),
            http.to_string(),
            "--replication-port".into(),
            repl.to_string(),
            "--cluster-size".into(),
            n.to_string(),
            "--gossip-seed".into(),
            seeds.join(","),
            "--chunk-size".into(),
            (1 << 20).to_string(),
        ];
        if i >= n {
            args.push("--read-only-replica".into());
        }
        if let Some(ms) = election_timeout_ms() {
            args.extend(["--leader-election-timeout-ms".into(), ms.to_string()]);
        }
        let mut p = Proc { child: None, http: *http, repl: *repl, dir, args };
        p.spawn();
        procs.push(p);
    }
    procs
}

struct Resp {
    status: u16,
    headers: String,
    body: String,
}

fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Option<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    req.push_str("Authorization: Basic YWRtaW46Y2hhbmdlaXQ=\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some(Resp { status, headers: head.to_ascii_lowercase(), body: body.to_owned() })
}

fn state(port: u16) -> Option<String> {
    let r = request(port, "GET", "/info", &[], "")?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some(v["state"].as_str()?.to_owned())
}

fn wait<T>(what: &str, limit: Duration, f: impl FnMut() -> Option<T>) -> T {
    poll(limit, f).unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// Polls `f` until it gives a value, for at most `limit`.
fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(x) = f() {
            return Some(x);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The index (in `procs`) of the single master among the live nodes.
fn master(procs: &[Proc]) -> usize {
    find_master(procs, Duration::from_secs(20)).expect("timed out waiting for a leader")
}

/// The index (in `procs`) of the single master among the live nodes, once there is one (and it
/// wrote the default users), within `limit`.
fn find_master(procs: &[Proc], limit: Duration) -> Option<usize> {
    poll(limit, || {
        let masters: Vec<usize> = procs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.child.is_some() && state(p.http).as_deref() == Some("master"))
            .map(|(i, _)| i)
            .collect();
        // A new cluster's leader writes the default users first: wait for them.
        let ready = |i: usize| {
            request(procs[i].http, "GET", "/users/admin", &[], "").is_some_and(|r| r.status == 200)
        };
        (masters.len() == 1 && ready(masters[0])).then(|| masters[0])
    })
}

fn append(port: u16, stream: &str, n: usize) -> Option<u16> {
    append_full(port, stream, n).map(|r| {
        if r.status >= 500 {
            eprintln!("append {n} on :{port}: {} {}", r.status, r.headers.lines().next().unwrap_or(""));
        }
        r.status
    })
}

fn append_full(port: u16, stream: &str, n: usize) -> Option<Resp> {
    let id = new_id();
    let body = format!("{{\"n\":{n}}}");
    request(
        port,
        "POST",
        &format!("/streams/{stream}"),
        &[("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-EventId", &id)],
        &body,
    )
}

/// The event numbers of `stream` a node serves (from its committed records).
fn events(port: u16, stream: &str) -> Option<Vec<u64>> {
    let r = request(
        port,
        "GET",
        &format!("/streams/{stream}/0/forward/4096?embed=body"),
        &[("Accept", "application/json")],
        "",
    )?;
    if r.status == 404 {
        return Some(Vec::new());
    }
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    let mut out: Vec<u64> =
        v["entries"].as_array()?.iter().filter_map(|e| e["eventNumber"].as_u64()).collect();
    out.sort_unstable();
    Some(out)
}

fn until_count(port: u16, stream: &str, n: usize) -> Vec<u64> {
    wait(&format!("{n} events on :{port}"), Duration::from_secs(20), || {
        events(port, stream).filter(|e| e.len() >= n)
    })
}

#[test]
fn three_nodes_replicate_fail_over_and_rejoin() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    for n in 0..20 {
        assert_eq!(append(procs[leader].http, "orders", n), Some(201));
    }
    for p in &procs {
        assert_eq!(until_count(p.http, "orders", 20), (0..20).collect::<Vec<_>>());
    }
    // A write on a follower is forwarded to the leader (v5 proxies it), or redirected with
    // ES-RequireMaster: True.
    let follower = (leader + 1) % 3;
    assert_eq!(append(procs[follower].http, "orders", 20), Some(201));
    let id = new_id();
    let r = request(
        procs[follower].http,
        "POST",
        "/streams/orders",
        &[
            ("Content-Type", "application/json"),
            ("ES-EventType", "t"),
            ("ES-EventId", &id),
            ("ES-RequireMaster", "True"),
        ],
        "{}",
    )
    .unwrap();
    assert_eq!(r.status, 307);
    assert!(r.headers.contains(&format!("location: http://127.0.0.1:{}/streams/orders", procs[leader].http)));
    for p in &procs {
        assert_eq!(until_count(p.http, "orders", 21).len(), 21);
    }

    // Users replicate like any record and take effect on every node.
    let body = r#"{"loginName":"carol","fullName":"Carol","password":"pw1","groups":[]}"#;
    let r = request(procs[follower].http, "POST", "/users/", &[("Content-Type", "application/json")], body)
        .unwrap();
    assert_eq!(r.status, 201, "a user created through a follower (forwarded): {}", r.body);
    for p in &procs {
        wait("carol on every node", Duration::from_secs(20), || {
            let mut s = TcpStream::connect(("127.0.0.1", p.http)).ok()?;
            let req = "GET /users/$current HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic Y2Fyb2w6cHcx\r\n\r\n";
            s.write_all(req.as_bytes()).ok()?;
            let mut raw = String::new();
            s.read_to_string(&mut raw).ok()?;
            raw.starts_with("HTTP/1.1 200").then_some(())
        });
    }

    // An operator makes the leader resign: it hands over to a follower, which takes writes at
    // once; a follower cannot resign.
    let r = request(procs[follower].http, "POST", "/admin/node/resign", &[], "").unwrap();
    assert_eq!(r.status, 400, "a follower resigning: {}", r.headers);
    let r = request(procs[leader].http, "POST", "/admin/node/resign", &[], "").unwrap();
    assert_eq!(r.status, 200);
    let resigned = Instant::now();
    let successor = wait("a new leader after the resignation", Duration::from_secs(20), || {
        let m = master(&procs);
        (m != leader).then_some(m)
    });
    assert_eq!(append(procs[successor].http, "orders", 21), Some(201));
    println!("resignation: a write acknowledged by the successor {:?} after the request", resigned.elapsed());
    wait("the resigned leader following", Duration::from_secs(20), || {
        matches!(state(procs[leader].http).as_deref(), Some("slave")).then_some(())
    });
    for p in &procs {
        assert_eq!(until_count(p.http, "orders", 22).len(), 22);
    }
    let leader = successor;

    // kill -9 the leader during appends: everything acknowledged survives on the new leader.
    let mut acked = 22;
    for n in 22..30 {
        if append(procs[leader].http, "orders", n) == Some(201) {
            acked += 1;
        }
    }
    procs[leader].kill();
    let killed = Instant::now();
    let next = master(&procs);
    assert_ne!(next, leader);
    wait("a write on the new leader", Duration::from_secs(20), || {
        (append(procs[next].http, "orders", 999) == Some(201)).then_some(())
    });
    println!("failover: a write acknowledged {:?} after kill -9", killed.elapsed());
    let after = until_count(procs[next].http, "orders", acked + 1);
    assert!(after.len() > acked, "acknowledged events lost: {} of {acked}", after.len() - 1);

    // The old leader rejoins as a follower and serves the same events.
    procs[leader].spawn();
    let total = after.len();
    assert_eq!(until_count(procs[leader].http, "orders", total).len(), total);
    wait("the old leader following", Duration::from_secs(20), || {
        matches!(state(procs[leader].http).as_deref(), Some("slave")).then_some(())
    });
}

#[test]
fn a_wiped_follower_catches_up_and_a_replica_serves_reads() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 1);
    let leader = master(&procs);
    for n in 0..50 {
        assert_eq!(append(procs[leader].http, "items", n), Some(201), "append {n}");
    }
    // The replica receives everything, serves reads, never leads and redirects writes.
    let replica = 3;
    assert_eq!(until_count(procs[replica].http, "items", 50).len(), 50);
    assert_eq!(state(procs[replica].http).as_deref(), Some("readonlyreplica"));
    assert_eq!(append(procs[replica].http, "items", 50), Some(201), "forwarded to the leader");
    let r = request(
        procs[replica].http,
        "POST",
        "/streams/items",
        &[("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-RequireMaster", "True")],
        "{}",
    )
    .unwrap();
    assert_eq!(r.status, 307, "{} {}", r.headers, r.body);

    // Wipe a follower: it starts empty and catches up from the leader.
    let victim = (leader + 1) % 3;
    procs[victim].kill();
    std::fs::remove_dir_all(&procs[victim].dir).unwrap();
    for n in 51..60 {
        assert_eq!(append(procs[leader].http, "items", n), Some(201));
    }
    procs[victim].spawn();
    assert_eq!(until_count(procs[victim].http, "items", 60).len(), 60);
    // Its log is the leader's, byte for byte, up to the shorter durable end.
    let chunk = |p: &Proc| std::fs::read(p.dir.join("chunk-000000.000000")).unwrap();
    wait("the same chunk on the wiped follower", Duration::from_secs(20), || {
        (chunk(&procs[victim]) == chunk(&procs[leader])).then_some(())
    });
    // Gossip names every member, the replica included, each alive.
    wait("four live members in gossip", Duration::from_secs(20), || {
        let gossip = request(procs[victim].http, "GET", "/gossip", &[], "")?;
        let v: serde_json::Value = serde_json::from_str(&gossip.body).ok()?;
        let members = v["members"].as_array()?;
        let live = members.iter().filter(|m| m["isAlive"] == true).count();
        let ports: Vec<u64> = members.iter().filter_map(|m| m["internalTcpPort"].as_u64()).collect();
        (live == 4 && ports.contains(&(procs[replica].repl as u64))).then_some(())
    });
}

/// Appends `n` events of about `size` bytes to `stream` in one batch (the v5 events media type).
fn append_batch(port: u16, stream: &str, n: usize, size: usize) -> Option<u16> {
    let pad = "x".repeat(size);
    let events: Vec<String> = (0..n)
        .map(|k| format!(r#"{{"eventId":"{}","eventType":"t","data":{{"k":{k},"pad":"{pad}"}}}}"#, new_id()))
        .collect();
    let body = format!("[{}]", events.join(","));
    let r = request(
        port,
        "POST",
        &format!("/streams/{stream}"),
        &[("Content-Type", "application/vnd.eventstore.events+json")],
        &body,
    )?;
    Some(r.status)
}

/// About 3 MiB over 1 MiB chunks through node `port`: streams `gone` and `kept`, 1,500 events
/// each, then `gone` deleted and one more event in `kept` (1,501).
fn half_deleted(port: u16) {
    for _ in 0..15 {
        assert_eq!(append_batch(port, "gone", 100, 1000), Some(201));
        assert_eq!(append_batch(port, "kept", 100, 1000), Some(201));
    }
    assert_eq!(request(port, "DELETE", "/streams/gone", &[], "").map(|r| r.status), Some(204));
    assert_eq!(append(port, "kept", 1500), Some(201));
}

#[test]
fn a_wiped_follower_catches_up_through_chunks_the_leader_scavenged() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    let port = procs[leader].http;
    // Half of it deleted, then scavenged away on the leader.
    half_deleted(port);
    let r = request(port, "POST", "/admin/scavenge?threshold=-1", &[], "").unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    wait("the scavenge to finish", Duration::from_secs(60), || {
        let r = request(port, "GET", "/admin/scavenge/current", &[], "")?;
        r.body.contains(r#""scavengeId":"""#).then_some(())
    });
    assert!(scavenged_chunks(&procs[leader].dir) > 0, "the leader rewrote chunks");

    let victim = (leader + 1) % 3;
    procs[victim].kill();
    std::fs::remove_dir_all(&procs[victim].dir).unwrap();
    assert_eq!(append(port, "kept", 1501), Some(201));
    procs[victim].spawn();
    assert_eq!(until_count(procs[victim].http, "kept", 1502).len(), 1502);
    let gone =
        request(procs[victim].http, "GET", "/streams/gone", &[("Accept", "application/json")], "").unwrap();
    assert_eq!(gone.status, 404, "the deleted stream stays deleted on the follower");
    // And it keeps following: a new write reaches it.
    assert_eq!(append(port, "kept", 1502), Some(201));
    assert_eq!(until_count(procs[victim].http, "kept", 1503).len(), 1503);
}

/// Sends `sig` to a node's process.
fn signal(p: &Proc, sig: i32) {
    if let Some(c) = &p.child {
        // SAFETY: kill(2) on our own child's pid has no memory-safety preconditions.
        unsafe { libc::kill(c.id() as i32, sig) };
    }
}

#[test]
fn a_leader_that_cannot_take_writes_does_not_say_it_is_master() {
    let root = tempfile::tempdir().unwrap();
    let procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    let port = procs[leader].http;
    assert_eq!(append(port, "s", 0), Some(201));
    // With both followers stopped, the leader's lease runs out: it may have been replaced
    // without knowing it, so it takes no write, and it must not say it is master either.
    for (i, p) in procs.iter().enumerate() {
        if i != leader {
            signal(p, libc::SIGSTOP);
        }
    }
    let refused = wait("a write refused by the leader", Duration::from_secs(30), || {
        append_full(port, "s", 1).filter(|r| r.status == 503)
    });
    let said = state(port);
    assert_ne!(said.as_deref(), Some("master"), "refused a write ({}) yet says master", refused.status);
    for (i, p) in procs.iter().enumerate() {
        if i != leader {
            signal(p, libc::SIGCONT);
        }
    }
    // Once a quorum answers again, whoever says master takes the write.
    let l = master(&procs);
    let r = wait("a write taken by the node that says master", Duration::from_secs(30), || {
        append_full(procs[l].http, "s", 1).filter(|r| r.status != 503)
    });
    assert_eq!(r.status, 201, "{} {}", r.headers, r.body);
}

/// Chunk files a scavenge rewrote (a version past `.000000`) in a node's directory.
fn scavenged_chunks(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.starts_with("chunk-") && !name.ends_with(".000000")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The event types and data of `$scavenges-{id}` as node `port` serves them.
fn scavenge_history(port: u16, id: &str) -> Option<Vec<(String, serde_json::Value)>> {
    let r = request(
        port,
        "GET",
        &format!("/streams/$scavenges-{id}/0/forward/100?embed=body"),
        &[("Accept", "application/json")],
        "",
    )?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    let mut out: Vec<(i64, String, serde_json::Value)> = v["entries"]
        .as_array()?
        .iter()
        .map(|e| {
            let data = e["data"].as_str().and_then(|d| serde_json::from_str(d).ok()).unwrap_or_default();
            (e["eventNumber"].as_i64().unwrap_or(-1), e["eventType"].as_str().unwrap_or("").to_owned(), data)
        })
        .collect();
    out.sort_by_key(|(n, _, _)| *n);
    Some(out.into_iter().map(|(_, t, d)| (t, d)).collect())
}

#[test]
fn every_member_scavenges_its_own_copy_and_records_its_history_through_the_leader() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 1);
    let leader = master(&procs);
    let port = procs[leader].http;
    half_deleted(port);
    // The followers and the read-only replica first, then the leader: each scavenges its copy.
    let mut order: Vec<usize> = (0..4).filter(|&i| i != leader).collect();
    order.push(leader);
    for &i in &order {
        let node = procs[i].http;
        until_count(node, "kept", 1501);
        // Throttled (a rest of at least a second after each chunk), so the run is still going
        // when `current` is asked.
        let r = wait("a scavenge to start", Duration::from_secs(30), || {
            request(node, "POST", "/admin/scavenge?threshold=-1&throttlePercent=50", &[], "")
                .filter(|r| r.status != 503)
        });
        assert_eq!(r.status, 200, "node {i}: {} {}", r.headers, r.body);
        let id = serde_json::from_str::<serde_json::Value>(&r.body).unwrap()["scavengeId"]
            .as_str()
            .unwrap()
            .to_owned();
        let current = request(node, "GET", "/admin/scavenge/current", &[], "").unwrap();
        assert!(current.body.contains(&id), "node {i} shows its running scavenge: {}", current.body);
        wait("the scavenge to finish", Duration::from_secs(120), || {
            let r = request(node, "GET", "/admin/scavenge/current", &[], "")?;
            r.body.contains(r#""scavengeId":"""#).then_some(())
        });
        assert!(scavenged_chunks(&procs[i].dir) > 0, "node {i} rewrote its chunks");
        // Its history, written through the leader, is on the node itself and on the leader.
        for at in [node, port] {
            let h = wait("the scavenge's history", Duration::from_secs(30), || {
                scavenge_history(at, &id).filter(|h| h.iter().any(|(t, _)| t == "$scavengeCompleted"))
            });
            assert_eq!(h.first().map(|(t, _)| t.as_str()), Some("$scavengeStarted"), "node {i}: {h:?}");
            let (_, done) = h.last().unwrap();
            assert_eq!(done["result"], "Success", "node {i}: {h:?}");
            let endpoint = done["nodeEndpoint"].as_str().unwrap_or("");
            assert!(endpoint.ends_with(&format!(":{node}")), "node {i} names itself: {h:?}");
            assert!(done["spaceSaved"].as_i64().unwrap_or(0) > 0, "node {i} reclaimed space: {h:?}");
        }
        let gone = request(node, "GET", "/streams/gone", &[("Accept", "application/json")], "").unwrap();
        assert_eq!(gone.status, 404, "node {i}");
        assert_eq!(events(node, "kept").map(|e| e.len()), Some(1501), "node {i} kept every live event");
    }
    // With no leader, a member's scavenge cannot record its history: a clear 503, nothing runs.
    let survivor = (leader + 1) % 3;
    for (i, p) in procs.iter_mut().enumerate() {
        if i != survivor {
            p.kill();
        }
    }
    let r = request(procs[survivor].http, "POST", "/admin/scavenge", &[], "").unwrap();
    assert_eq!(r.status, 503, "{} {}", r.headers, r.body);
    let status_line = r.headers.lines().next().unwrap_or("");
    assert!(status_line.contains("leader"), "the reason names the missing leader: {status_line}");
    let current = request(procs[survivor].http, "GET", "/admin/scavenge/current", &[], "").unwrap();
    assert!(current.body.contains(r#""scavengeId":"""#), "nothing runs: {}", current.body);
}

/// Runs the `annal` binary's maintenance command `args`; panics with its output on failure.
fn annal_tool(args: &[String]) {
    let out = Command::new(env!("CARGO_BIN_EXE_annal")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "annal {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn one_backup_restored_into_a_new_three_node_cluster() {
    let root = tempfile::tempdir().unwrap();
    // A single node, backed up while it runs.
    let src = root.path().join("single");
    let http = free_port();
    let mut single = Proc {
        child: None,
        http,
        repl: 0,
        dir: src.clone(),
        args: vec![
            "--db".into(),
            src.display().to_string(),
            "--http-port".into(),
            http.to_string(),
            "--chunk-size".into(),
            (1 << 20).to_string(),
        ],
    };
    single.spawn();
    wait("the single node", Duration::from_secs(20), || {
        request(http, "GET", "/users/admin", &[], "").is_some_and(|r| r.status == 200).then_some(())
    });
    for n in 0..30 {
        assert_eq!(append(http, "before", n), Some(201));
    }
    let backup = root.path().join("backup");
    let d = |p: &Path| p.display().to_string();
    annal_tool(&[
        "backup".into(),
        "--db".into(),
        d(&src),
        "--to".into(),
        d(&backup),
        "--url".into(),
        format!("http://127.0.0.1:{http}"),
        "--quiet".into(),
    ]);
    single.kill();
    annal_tool(&["backup".into(), "verify".into(), d(&backup)]);
    // Restored into the three directories of a new cluster, before its nodes start.
    for i in 0..3 {
        annal_tool(&[
            "restore".into(),
            "--from".into(),
            d(&backup),
            "--db".into(),
            d(&root.path().join(format!("node{i}"))),
            "--quiet".into(),
        ]);
    }
    let procs = cluster(root.path(), 3, 0);
    let m = master(&procs);
    for p in &procs {
        assert_eq!(until_count(p.http, "before", 30), (0..30).collect::<Vec<u64>>());
    }
    assert_eq!(append(procs[m].http, "after", 0), Some(201));
    for p in &procs {
        until_count(p.http, "after", 1);
    }
}

/// Redaction in a cluster: `annal redact` against each node's own socket redacts that node's
/// copy; every node then serves the event as redacted and every other event unchanged, and the
/// three redacted chunk files are the same bytes (each node computed the same redaction of the
/// same chunk).
#[test]
fn redaction_on_every_node_of_a_cluster() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    for p in procs.iter_mut() {
        p.kill();
        p.args.push("--enable-unix-socket".into());
        p.spawn();
    }
    let port = procs[master(&procs)].http;
    for n in 0..5 {
        assert_eq!(append(port, "secret", n), Some(201));
    }
    // Past the first chunk (1 MiB), so the events lie in a completed one.
    for _ in 0..12 {
        assert_eq!(append_batch(port, "filler", 10, 10_000), Some(201));
    }
    for p in &procs {
        until_count(p.http, "filler", 120);
    }
    for p in &procs {
        annal_tool(&[
            "redact".into(),
            "--db".into(),
            p.dir.display().to_string(),
            "--events".into(),
            "2@secret".into(),
        ]);
    }
    for p in &procs {
        let r = request(
            p.http,
            "GET",
            "/streams/secret/0/forward/10?embed=body",
            &[("Accept", "application/json")],
            "",
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        let entries = v["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 5, "node :{}: {v}", p.http);
        for e in entries {
            let n = e["eventNumber"].as_u64().unwrap();
            assert_eq!(e["isRedacted"] == true, n == 2, "node :{}: {e}", p.http);
            if n != 2 {
                let data = e["data"].as_str().map_or_else(|| e["data"].to_string(), str::to_owned);
                assert!(data.contains(&format!("\"n\":{n}")), "node :{}: {e}", p.http);
            }
        }
    }
    for p in procs.iter_mut() {
        p.kill();
    }
    let files: Vec<Vec<u8>> = procs
        .iter()
        .map(|p| {
            let name = std::fs::read_dir(&p.dir)
                .unwrap()
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .find(|n| n.starts_with("chunk-000000."))
                .unwrap();
            assert_eq!(
                name,
                "chunk-000000.000001",
                "{}: the redacted version is in service",
                p.dir.display()
            );
            std::fs::read(p.dir.join(name)).unwrap()
        })
        .collect();
    assert!(files.iter().all(|f| *f == files[0]), "the nodes' redacted chunks differ");
    let needle = b"\"n\":2}";
    assert!(!files[0].windows(needle.len()).any(|w| w == needle), "event 2's data is still in the chunk");
    for n in [0, 1, 3, 4] {
        let kept = format!("\"n\":{n}}}");
        assert!(files[0].windows(kept.len()).any(|w| w == kept.as_bytes()), "event {n}'s data is gone");
    }
}

/// The titles (`n@stream`) of a competing feed page taken on `port`, and its `ackAll` path.
fn take_page(port: u16, path: &str) -> Option<(Vec<String>, Option<String>)> {
    let r = request(port, "GET", path, &[("Accept", "application/vnd.eventstore.competingatom+json")], "")?;
    if r.status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    let titles =
        v["entries"].as_array()?.iter().filter_map(|e| e["title"].as_str().map(str::to_owned)).collect();
    let ack = v["links"].as_array()?.iter().find(|l| l["relation"] == "ackAll").and_then(|l| {
        let uri = l["uri"].as_str()?;
        Some(uri[uri.find("/subscriptions")?..].to_owned())
    });
    Some((titles, ack))
}

#[test]
fn persistent_subscriptions_run_on_the_leader_and_resume_on_the_next_one() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    for n in 0..6 {
        assert_eq!(append(procs[leader].http, "ps", n), Some(201));
    }
    // The leader's service loads the definitions once it leads; followers do not run it.
    let settings = r#"{"minCheckPointCount":0,"maxCheckPointCount":1}"#;
    wait("the group created on the leader", Duration::from_secs(20), || {
        let r = request(
            procs[leader].http,
            "PUT",
            "/subscriptions/ps/g",
            &[("Content-Type", "application/json")],
            settings,
        )?;
        (r.status == 201).then_some(())
    });
    let follower = (leader + 1) % 3;
    // A follower forwards subscription requests to the leader (or redirects with
    // ES-RequireMaster: True).
    let r = request(procs[follower].http, "GET", "/subscriptions", &[("Accept", "application/json")], "")
        .unwrap();
    assert_eq!(r.status, 200, "the list through a follower: {}", r.headers);
    let list: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(list[0]["groupName"], "g", "{list}");
    let r =
        request(procs[follower].http, "GET", "/subscriptions", &[("ES-RequireMaster", "True")], "").unwrap();
    assert_eq!(r.status, 307);
    let (titles, ack) = take_page(procs[leader].http, "/subscriptions/ps/g/3").unwrap();
    assert_eq!(titles, ["2@ps", "1@ps", "0@ps"]);
    assert_eq!(request(procs[leader].http, "POST", &ack.unwrap(), &[], "").unwrap().status, 202);
    // The checkpoint (2) is written on the leader and replicated like any event.
    for p in &procs {
        until_count(p.http, "$persistentsubscription-ps::g-checkpoint", 1);
    }
    // A new leader loads the replicated definition and checkpoint and resumes after it.
    procs[leader].kill();
    let next = master(&procs);
    let titles = wait("the group resumed on the new leader", Duration::from_secs(20), || {
        take_page(procs[next].http, "/subscriptions/ps/g/10").map(|(t, _)| t).filter(|t| !t.is_empty())
    });
    assert_eq!(titles, ["5@ps", "4@ps", "3@ps"]);
}

/// The faults [`writes_resume_after_every_recovery`] puts a cluster of three through, each
/// followed by a recovery (every node running again and a leader elected).
#[derive(Clone, Copy, Debug)]
enum Round {
    /// kill -9 of the leader, restarted after a pause.
    KillLeader,
    /// kill -9 of a follower, restarted after a pause.
    KillFollower,
    /// kill -9 of two nodes at once (the leader among them), restarted together: the survivor
    /// leads the next term; then a follower of it is killed and restarted.
    LoneSurvivor,
    /// kill -9 of all three, restarted together.
    KillAll,
    /// SIGSTOP of the leader; SIGCONT once the others elected a new one.
    PauseLeader,
}

/// Appends one probe event through the current leader until one is acknowledged (201), within
/// `limit`; the time it took.
fn probe_write(procs: &[Proc], n: usize, limit: Duration) -> Result<Duration, String> {
    let start = Instant::now();
    let mut last = String::from("no answer");
    while start.elapsed() < limit {
        let leader =
            procs.iter().position(|p| p.child.is_some() && state(p.http).as_deref() == Some("master"));
        if let Some(l) = leader {
            match append_full(procs[l].http, "probe", n) {
                Some(r) if r.status == 201 => return Ok(start.elapsed()),
                Some(r) => last = format!("{} from :{} ({})", r.status, procs[l].http, r.body.trim()),
                None => last = format!("no answer from :{}", procs[l].http),
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(last)
}

/// Seeded rounds of kills and pauses under eight writers; after each recovery a write must be
/// acknowledged within a few seconds (a cluster whose leader stops committing fails here, even
/// though it elects one). `CLUSTER_FAULT_ROUNDS` sets the rounds (20 by default) and
/// `CLUSTER_FAULT_SEED` the seed.
#[test]
fn writes_resume_after_every_recovery() {
    use rand::{Rng, SeedableRng};
    use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
    use std::sync::Arc;

    let rounds: usize = std::env::var("CLUSTER_FAULT_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let seed: u64 =
        std::env::var("CLUSTER_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
        });
    println!("fault rounds: seed {seed} (CLUSTER_FAULT_SEED={seed} replays the schedule), {rounds} rounds");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    let first = master(&procs);

    // Eight writers append to the node the driver names as leader, whatever happens to it, each
    // to a few streams with the exact expected version it believes current; one append in eight
    // is sent with a stale one. So refused writes are common, and a group of nothing but refused
    // writes often queues behind a group that waits for its quorum.
    let target = Arc::new(AtomicU16::new(procs[first].http));
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (target, stop, acked) = (target.clone(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let mut known = [-1i64; 4];
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let s = n % known.len();
                    let expected = if n % 8 == 0 { known[s] - 1 } else { known[s] };
                    let id = new_id();
                    let r = request(
                        target.load(Ordering::Relaxed),
                        "POST",
                        &format!("/streams/w{w}-{s}"),
                        &[
                            ("Content-Type", "application/json"),
                            ("ES-EventType", "t"),
                            ("ES-EventId", &id),
                            ("ES-ExpectedVersion", &expected.to_string()),
                        ],
                        &format!("{{\"n\":{n}}}"),
                    );
                    let header = |r: &Resp, name: &str| -> Option<i64> {
                        let line = r.headers.lines().find(|l| l.starts_with(name))?;
                        line.split(':').nth(1)?.trim().parse().ok()
                    };
                    match r {
                        Some(r) if r.status == 201 => {
                            acked.fetch_add(1, Ordering::Relaxed);
                            known[s] = expected + 1;
                        }
                        Some(r) if r.status == 400 => {
                            if let Some(current) = header(&r, "es-currentversion") {
                                known[s] = current;
                            }
                        }
                        Some(_) => std::thread::sleep(Duration::from_millis(20)),
                        None => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            })
        })
        .collect();
    let pause = |rng: &mut rand_chacha::ChaCha8Rng, lo: u64, hi: u64| {
        std::thread::sleep(Duration::from_millis(rng.gen_range(lo..hi)));
    };
    // A leader is elected within this after each recovery, and a write acknowledged within
    // `ACK_WITHIN` of that.
    const ELECTED_WITHIN: Duration = Duration::from_secs(30);
    const ACK_WITHIN: Duration = Duration::from_secs(15);
    let mut failure = None;
    for round in 0..rounds {
        let kinds =
            [Round::KillLeader, Round::KillFollower, Round::LoneSurvivor, Round::KillAll, Round::PauseLeader];
        let kind = kinds[rng.gen_range(0..kinds.len())];
        pause(&mut rng, 200, 1500);
        let Some(leader) = find_master(&procs, ELECTED_WITHIN) else {
            failure = Some(format!("round {round} ({kind:?}): no leader before the round"));
            break;
        };
        let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
        match kind {
            Round::KillLeader => {
                procs[leader].kill();
                pause(&mut rng, 100, 2000);
                procs[leader].spawn();
            }
            Round::KillFollower => {
                let f = others[rng.gen_range(0..2)];
                procs[f].kill();
                pause(&mut rng, 100, 2000);
                procs[f].spawn();
            }
            Round::LoneSurvivor => {
                let survivor = others[rng.gen_range(0..2)];
                for v in (0..3).filter(|&i| i != survivor) {
                    procs[v].kill();
                }
                pause(&mut rng, 100, 2500);
                for v in (0..3).filter(|&i| i != survivor) {
                    procs[v].spawn();
                }
                let Some(next) = find_master(&procs, ELECTED_WITHIN) else {
                    failure = Some(format!("round {round} ({kind:?}): no leader after the two restarted"));
                    break;
                };
                target.store(procs[next].http, Ordering::Relaxed);
                pause(&mut rng, 0, 1000);
                let f = (0..3).filter(|&i| i != next).nth(rng.gen_range(0..2)).unwrap_or(0);
                procs[f].kill();
                pause(&mut rng, 100, 1500);
                procs[f].spawn();
            }
            Round::KillAll => {
                for p in procs.iter_mut() {
                    p.kill();
                }
                pause(&mut rng, 100, 1500);
                for p in procs.iter_mut() {
                    p.spawn();
                }
            }
            Round::PauseLeader => {
                signal(&procs[leader], libc::SIGSTOP);
                let _ = poll(ELECTED_WITHIN, || {
                    others.iter().copied().find(|&i| state(procs[i].http).as_deref() == Some("master"))
                });
                pause(&mut rng, 0, 1500);
                signal(&procs[leader], libc::SIGCONT);
            }
        }
        let Some(next) = find_master(&procs, ELECTED_WITHIN) else {
            failure = Some(format!(
                "round {round} ({kind:?}): no leader within {ELECTED_WITHIN:?} of the recovery"
            ));
            break;
        };
        target.store(procs[next].http, Ordering::Relaxed);
        let before = acked.load(Ordering::Relaxed);
        match probe_write(&procs, round, ACK_WITHIN) {
            Ok(took) => println!("round {round}: {kind:?}; a write acknowledged {took:?} after the recovery"),
            Err(last) => {
                let gossip =
                    request(procs[next].http, "GET", "/gossip", &[("Accept", "application/json")], "")
                        .map(|r| r.body)
                        .unwrap_or_default();
                failure = Some(format!(
                    "round {round} ({kind:?}): no write acknowledged within {ACK_WITHIN:?} of the recovery \
                     (last answer: {last}; writers' acks {before} -> {}); gossip of the leader: {gossip}",
                    acked.load(Ordering::Relaxed)
                ));
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        let _ = w.join();
    }
    if let Some(f) = failure {
        // The nodes' logs stay for the report.
        drop(procs);
        let kept = root.keep();
        panic!("seed {seed}: {f}\nnode logs in {}", kept.display());
    }
    println!("fault rounds: {rounds} passed, {} writes acknowledged", acked.load(Ordering::Relaxed));
}

/// A gossip seed that names something other than a replication endpoint (here an HTTP server,
/// as when a seed gives a node's HTTP port) is reported at warning level, once per member and
/// cause, instead of leaving the node `unknown` without a word.
#[test]
fn a_gossip_seed_that_answers_http_is_reported() {
    let http = TcpListener::bind("127.0.0.1:0").unwrap();
    let fake = http.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in http.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ =
                conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("node0");
    let (port, repl, silent) = (free_port(), free_port(), free_port());
    let args = [
        "--db",
        &dir.display().to_string(),
        "--http-port",
        &port.to_string(),
        "--replication-port",
        &repl.to_string(),
        "--cluster-size",
        "3",
        "--gossip-seed",
        &format!("127.0.0.1:{fake},127.0.0.1:{silent}"),
    ]
    .map(String::from)
    .to_vec();
    let mut p = Proc { child: None, http: port, repl, dir: dir.clone(), args };
    p.spawn();
    let log = || std::fs::read_to_string(dir.with_extension("log")).unwrap_or_default();
    let warning = format!("the cluster member at 127.0.0.1:{fake} answered with HTTP");
    wait("the warning about the seed that answers HTTP", Duration::from_secs(30), || {
        log().contains(&warning).then_some(())
    });
    // It reconnects every half second; the warning is not repeated.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(log().matches(&warning).count(), 1, "{}", log());
    assert!(log().contains("WARN"), "at warning level: {}", log());
    p.kill();
}

/// `/health/ready` of node `port`: its status and the state it names.
fn readiness(port: u16) -> Option<(u16, String)> {
    let r = request(port, "GET", "/health/ready", &[], "")?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some((r.status, v["state"].as_str()?.to_owned()))
}

#[test]
fn readiness_follows_a_members_role_and_liveness_its_process() {
    let root = tempfile::tempdir().unwrap();
    let procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    let follower = (leader + 1) % 3;
    let port = procs[follower].http;
    assert_eq!(append(procs[leader].http, "s", 0), Some(201));
    wait("every member ready", Duration::from_secs(30), || {
        procs.iter().all(|p| readiness(p.http).is_some_and(|(s, _)| s == 200)).then_some(())
    });
    // Cut off from both others, the follower has no leader: not ready, though alive.
    for (i, p) in procs.iter().enumerate() {
        if i != follower {
            signal(p, libc::SIGSTOP);
        }
    }
    let (status, state) =
        wait("the cut-off follower to say it is not ready", Duration::from_secs(30), || {
            readiness(port).filter(|(s, _)| *s == 503)
        });
    assert_eq!(status, 503, "{state}");
    assert_ne!(state, "slave");
    assert_eq!(request(port, "GET", "/health/live", &[], "").map(|r| r.status), Some(204));
    for (i, p) in procs.iter().enumerate() {
        if i != follower {
            signal(p, libc::SIGCONT);
        }
    }
    // Once it follows a leader again and is caught up, it is ready again.
    let (_, state) = wait("the follower to be ready again", Duration::from_secs(60), || {
        readiness(port).filter(|(s, _)| *s == 200)
    });
    assert!(state == "slave" || state == "master", "{state}");
}

/// A metric's samples on a node: `name{labels}` → value, for the series whose labels contain
/// `with` (all of them when empty).
fn metric(port: u16, name: &str, with: &str) -> Vec<f64> {
    let Some(r) = request(port, "GET", "/metrics", &[], "") else { return Vec::new() };
    r.body
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            let n = series.split('{').next().unwrap_or("");
            n == name && series.contains(with)
        })
        .filter_map(|(_, v)| v.parse().ok())
        .collect()
}

fn metric_sum(port: u16, name: &str, with: &str) -> f64 {
    metric(port, name, with).iter().sum()
}

#[test]
fn metrics_count_elections_and_replication_on_a_cluster() {
    let root = tempfile::tempdir().unwrap();
    let procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    let follower = (leader + 1) % 3;
    for n in 0..5 {
        assert_eq!(append(procs[leader].http, "s", n), Some(201));
    }
    // Every member saw the election complete; one of them won it; all are in its term; one
    // leads; the others write the leader's events through replication.
    wait("every member to report the election and its role", Duration::from_secs(30), || {
        let ok = procs.iter().all(|p| {
            metric_sum(p.http, "kurrentdb_elections_count_total", "") >= 1.0
                && metric_sum(p.http, "kurrentdb_node_ready", "") == 1.0
        });
        ok.then_some(())
    });
    let won: f64 = procs.iter().map(|p| metric_sum(p.http, "kurrentdb_elections_won_total", "")).sum();
    assert!(won >= 1.0);
    let masters: f64 =
        procs.iter().map(|p| metric_sum(p.http, "kurrentdb_node_state", "state=\"Master\"")).sum();
    assert_eq!(masters, 1.0);
    let terms: Vec<f64> = procs.iter().map(|p| metric_sum(p.http, "kurrentdb_cluster_term", "")).collect();
    assert!(terms.iter().all(|t| *t >= 1.0 && *t == terms[0]), "{terms:?}");
    wait("the follower's replicated events", Duration::from_secs(30), || {
        (metric_sum(procs[follower].http, "kurrentdb_io_events_total", "source=\"replication\"") >= 5.0)
            .then_some(())
    });
    // The leader reports every member's lag; caught up, it is 0 bytes.
    wait("every member caught up in the leader's metrics", Duration::from_secs(30), || {
        let lags = metric(procs[leader].http, "kurrentdb_replication_lag_bytes", "");
        (lags.len() == 3 && lags.iter().all(|l| *l == 0.0)).then_some(())
    });
    // A resignation makes a new election: the followers' completed count goes up.
    let before = metric_sum(procs[follower].http, "kurrentdb_elections_count_total", "");
    let r = request(procs[leader].http, "POST", "/admin/node/resign", &[], "").unwrap();
    assert_eq!(r.status, 200);
    wait("a new leader after the resignation", Duration::from_secs(30), || {
        let m = master(&procs);
        (m != leader).then_some(())
    });
    wait("the follower counting the new election", Duration::from_secs(30), || {
        (metric_sum(procs[follower].http, "kurrentdb_elections_count_total", "") > before).then_some(())
    });
}

#[test]
fn a_leader_stopped_with_sigterm_hands_over_before_it_exits() {
    let root = tempfile::tempdir().unwrap();
    let mut procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    for n in 0..10 {
        assert_eq!(append(procs[leader].http, "s", n), Some(201));
    }
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    let stopped = Instant::now();
    signal(&procs[leader], libc::SIGTERM);
    // The survivors take writes again as soon as the hand-over is done: no election timeout.
    let took = wait("a write acknowledged after the leader's SIGTERM", Duration::from_secs(30), || {
        others.iter().any(|&i| append(procs[i].http, "s", 10) == Some(201)).then(|| stopped.elapsed())
    });
    println!("graceful stop of the leader: the next write acknowledged after {took:?}");
    // The old leader handed over, then exited with success.
    let status = wait("the stopped leader to exit", Duration::from_secs(30), || {
        procs[leader].child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    });
    assert!(status.success(), "the leader exited with {status}");
    procs[leader].child = None;
    let log = std::fs::read_to_string(procs[leader].dir.with_extension("log")).unwrap();
    assert!(log.contains("leadership handed over"), "no hand-over in the leader's log:\n{log}");
    // Nothing acknowledged was lost.
    for &i in &others {
        assert!(until_count(procs[i].http, "s", 11).len() >= 11);
    }
}

/// The event ids of `stream` a node serves.
fn event_ids(port: u16, stream: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut from = 0u64;
    loop {
        let path = format!("/streams/{stream}/{from}/forward/1000?embed=body");
        let r = request(port, "GET", &path, &[("Accept", "application/json")], "")?;
        if r.status == 404 {
            return Some(out);
        }
        let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
        let entries = v["entries"].as_array()?;
        out.extend(entries.iter().filter_map(|e| e["eventId"].as_str().map(str::to_owned)));
        if entries.len() < 1000 {
            return Some(out);
        }
        from += 1000;
    }
}

fn start_time(port: u16) -> Option<String> {
    let r = request(port, "GET", "/stats", &[], "")?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some(v["proc"]["startTime"].as_str()?.to_owned())
}

/// `annal cluster rolling-restart` on three members kept running by a supervisor that starts
/// each again when it exits (as Kubernetes or systemd do): followers first and the leader last,
/// every member restarted, and a client appending all along loses no acknowledged write and
/// sees no refusal but retryable ones (503 while no leader is known, a connection refused while
/// its member is down).
#[test]
fn a_rolling_restart_restarts_every_member_followers_first_and_loses_no_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    let root = tempfile::tempdir().unwrap();
    let procs = cluster(root.path(), 3, 0);
    let leader = master(&procs);
    let ports: Vec<u16> = procs.iter().map(|p| p.http).collect();
    for &p in &ports {
        wait("every member ready", Duration::from_secs(30), || {
            request(p, "GET", "/health/ready", &[], "").filter(|r| r.status == 200)
        });
    }
    let started: Vec<String> =
        ports.iter().map(|&p| wait("a start time", Duration::from_secs(10), || start_time(p))).collect();
    let procs = Arc::new(Mutex::new(procs));
    let done = Arc::new(AtomicBool::new(false));
    // The supervisor.
    let supervisor = {
        let (procs, done) = (procs.clone(), done.clone());
        std::thread::spawn(move || {
            let mut restarts = 0;
            while !done.load(Ordering::Relaxed) {
                for p in procs.lock().unwrap().iter_mut() {
                    if p.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_some()) {
                        p.spawn();
                        restarts += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            restarts
        })
    };
    // The client: each event retried with its id until acknowledged, on the next member each time.
    let writer = {
        let (ports, done) = (ports.clone(), done.clone());
        std::thread::spawn(move || {
            let (mut acked, mut refused, mut retried) = (Vec::new(), Vec::new(), 0u64);
            let mut attempt = 0usize;
            while !done.load(Ordering::Relaxed) {
                let id = new_id();
                loop {
                    let port = ports[attempt % ports.len()];
                    let r = request(
                        port,
                        "POST",
                        "/streams/rolling",
                        &[("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-EventId", &id)],
                        "{}",
                    );
                    match r.map(|r| r.status) {
                        Some(201) => {
                            acked.push(id);
                            break;
                        }
                        Some(503 | 504) | None => {
                            retried += 1;
                            attempt += 1;
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        Some(other) => {
                            refused.push(other);
                            break;
                        }
                    }
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            (acked, refused, retried)
        })
    };
    std::thread::sleep(Duration::from_millis(500));
    let members: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["cluster", "rolling-restart", "--members", &members.join(","), "--timeout", "120"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("{said}");
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::Relaxed);
    let (acked, refused, retried) = writer.join().unwrap();
    let restarts = supervisor.join().unwrap();
    assert!(out.status.success(), "the rolling restart failed:\n{said}");
    assert_eq!(restarts, 3, "every member restarted once:\n{said}");
    let last = format!("[3/3] stopping http://127.0.0.1:{} (the leader)", ports[leader]);
    assert!(said.contains(&last), "the leader is restarted last:\n{said}");
    for (i, &p) in ports.iter().enumerate() {
        let now = wait("a start time", Duration::from_secs(30), || start_time(p));
        assert_ne!(now, started[i], "member :{p} runs the same process as before");
    }
    assert!(refused.is_empty(), "refusals a client cannot retry: {refused:?}");
    assert!(acked.len() > 10, "the client was starved: {} acknowledged, {retried} retries", acked.len());
    let procs = procs.lock().unwrap();
    let now_leader = master(&procs);
    let stored =
        wait("the stream on the leader", Duration::from_secs(30), || event_ids(ports[now_leader], "rolling"));
    let lost: Vec<&String> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "{} acknowledged writes lost, e.g. {:?}", lost.len(), lost.first());
    println!("rolling restart under load: {} writes acknowledged, {retried} retried, none lost", acked.len());
}
