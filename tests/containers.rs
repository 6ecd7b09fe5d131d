//! Real containers (podman): Annal's image, and a three-node cluster on a container network that
//! finds its members through DNS only (a network alias that resolves to every member stands in
//! for a Kubernetes headless Service), written to all along while its leader is stopped with
//! `podman stop` (it hands over), every member is restarted by `annal cluster rolling-restart`
//! (the containers' restart policy starts them again), and a member is replaced by a new
//! container with a new address and an empty volume. No acknowledged write may be lost and the
//! client may see no refusal but retryable ones.
//!
//! Needs podman (with runc and the DNS plugin) and the image named by `IMAGE_UNDER_TEST`, which
//! `deploy/build-image.sh` builds (`.ci/run` builds it and sets the variable). Under CI a missing
//! prerequisite fails the test; elsewhere it is ignored.
//!
//! This test drives containers from outside the node, so it uses the OS directly (clocks,
//! sockets, processes); the node itself only sees its `Env`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod ports;
use ports::free_port;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the cluster may take to do each thing (a debug build of the tests on a busy 2-core
/// machine drives release-built containers).
const LIMIT: Duration = Duration::from_secs(120);

fn podman(args: &[&str]) -> Output {
    Command::new("podman")
        .arg("--runtime")
        .arg("runc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("podman {args:?}: {e} (install podman, runc and the dnsname plugin)"))
}

fn podman_ok(args: &[&str]) -> String {
    let out = podman(args);
    assert!(out.status.success(), "podman {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn image() -> String {
    std::env::var("IMAGE_UNDER_TEST")
        .expect("IMAGE_UNDER_TEST names no image: build one with deploy/build-image.sh and set it")
}

/// A container network, removed (with whatever still runs on it) when dropped.
struct Network {
    name: String,
    members: Mutex<Vec<String>>,
}

impl Drop for Network {
    fn drop(&mut self) {
        for m in self.members.lock().unwrap().iter() {
            // A failing test keeps the member's log in its output.
            if std::thread::panicking() {
                let out = podman(&["logs", "--tail", "60", m]);
                eprintln!("--- {m}:\n{}", String::from_utf8_lossy(&out.stderr));
            }
            let _ = podman(&["rm", "-f", "-v", "-t", "0", m]);
        }
        let _ = podman(&["network", "rm", "-f", &self.name]);
    }
}

/// The network alias every member answers to: `ClusterDns`.
const ALIAS: &str = "annal-cluster";

impl Network {
    fn new() -> Network {
        let name = format!("annal-test-{}", std::process::id());
        let _ = podman(&["network", "rm", "-f", &name]);
        podman_ok(&["network", "create", &name]);
        Network { name, members: Mutex::new(Vec::new()) }
    }

    /// Starts member `name` of a cluster of three, its HTTP port published on `port`.
    fn start(&self, name: &str, port: u16) {
        self.members.lock().unwrap().push(name.to_string());
        let publish = format!("127.0.0.1:{port}:2113");
        let advertise = format!("ANNAL_REPLICATION_HOST_ADVERTISE_AS={name}");
        let dns = format!("ANNAL_CLUSTER_DNS={ALIAS}");
        let image = image();
        podman_ok(&[
            "run",
            "-d",
            "--name",
            name,
            "--hostname",
            name,
            "--network",
            &self.name,
            "--network-alias",
            ALIAS,
            "--restart",
            "always",
            "--stop-timeout",
            "30",
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
            "--read-only",
            "-p",
            &publish,
            "-e",
            "ANNAL_INSECURE=true",
            "-e",
            "ANNAL_CLUSTER_SIZE=3",
            "-e",
            "ANNAL_DISCOVER_VIA_DNS=true",
            "-e",
            &dns,
            "-e",
            &advertise,
            &image,
        ]);
    }
}

struct Resp {
    status: u16,
    reason: String,
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
    let reason = head.lines().next()?.splitn(3, ' ').nth(2).unwrap_or("").to_owned();
    Some(Resp { status, reason, body: body.to_owned() })
}

fn wait<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(start.elapsed() < LIMIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn state(port: u16) -> Option<String> {
    let r = request(port, "GET", "/info", &[], "")?;
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    Some(v["state"].as_str()?.to_owned())
}

fn ready(port: u16) -> bool {
    request(port, "GET", "/health/ready", &[], "").is_some_and(|r| r.status == 200)
}

/// Waits until every member in `ports` is ready and one of them leads; returns its index.
fn healthy(ports: &[u16]) -> usize {
    wait("a leader and every member ready", || {
        let leaders: Vec<usize> =
            (0..ports.len()).filter(|&i| state(ports[i]).as_deref() == Some("master")).collect();
        let users =
            |i: usize| request(ports[i], "GET", "/users/admin", &[], "").is_some_and(|r| r.status == 200);
        (leaders.len() == 1 && ports.iter().all(|&p| ready(p)) && users(leaders[0])).then(|| leaders[0])
    })
}

/// Says what the test does now, with the wall clock (a refusal's time says in which phase).
fn phase(what: &str) {
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    println!("{at:?}: {what}");
}

fn new_id() -> String {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(1);
    let n = N.fetch_add(1, Ordering::Relaxed) as u128;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    uuid::Uuid::from_u128((nanos << 20) ^ n).to_string()
}

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

/// What the client saw: acknowledged ids, refusals it cannot retry, retries.
#[derive(Default)]
struct Seen {
    acked: Vec<String>,
    refused: Vec<String>,
    retried: u64,
}

/// A client appending to `rolling` until `done`, each event retried with its id until
/// acknowledged, on the next member each time.
fn client(ports: Arc<Mutex<Vec<u16>>>, done: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let mut attempt = 0usize;
    while !done.load(Ordering::Relaxed) {
        let id = new_id();
        while !done.load(Ordering::Relaxed) {
            let port = {
                let ports = ports.lock().unwrap();
                ports[attempt % ports.len()]
            };
            let headers =
                [("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-EventId", id.as_str())];
            match request(port, "POST", "/streams/rolling", &headers, "{}") {
                Some(r) if r.status == 201 => {
                    seen.lock().unwrap().acked.push(id.clone());
                    break;
                }
                Some(Resp { status: 503 | 504, .. }) | None => {
                    seen.lock().unwrap().retried += 1;
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Some(r) => {
                    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
                    seen.lock()
                        .unwrap()
                        .refused
                        .push(format!("{} {} on :{port} at {at:?}", r.status, r.reason));
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
#[cfg_attr(
    not(annal_ci),
    ignore = "needs podman, runc, the dnsname plugin and IMAGE_UNDER_TEST (run under CI)"
)]
fn a_cluster_of_containers_found_through_dns_hands_over_rolls_and_replaces_a_member() {
    let size = podman_ok(&["image", "inspect", "--format", "{{.Size}}", &image()]);
    println!("image {}: {} bytes", image(), size);
    let net = Network::new();
    let tag = format!("annal-t{}", std::process::id());
    let mut names: Vec<String> = (1..=3).map(|i| format!("{tag}-n{i}")).collect();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    for (name, port) in names.iter().zip(&ports) {
        net.start(name, *port);
    }
    let leader = healthy(&ports);
    println!("{} leads", names[leader]);

    let shared_ports = Arc::new(Mutex::new(ports.clone()));
    let done = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let writer = {
        let (p, d, s) = (shared_ports.clone(), done.clone(), seen.clone());
        std::thread::spawn(move || client(p, d, s))
    };
    wait("the first writes", || (seen.lock().unwrap().acked.len() > 20).then_some(()));

    // `podman stop` of the leader: SIGTERM, the leader hands over, the others take writes.
    let before = seen.lock().unwrap().acked.len();
    phase("podman stop of the leader");
    let stopping = Instant::now();
    podman_ok(&["stop", "-t", "30", &names[leader]]);
    let stopped_in = stopping.elapsed();
    let others: Vec<u16> = (0..3).filter(|&i| i != leader).map(|i| ports[i]).collect();
    let took = wait("a write after the leader's stop", || {
        let id = new_id();
        let headers =
            [("Content-Type", "application/json"), ("ES-EventType", "t"), ("ES-EventId", id.as_str())];
        others
            .iter()
            .any(|&p| request(p, "POST", "/streams/probe", &headers, "{}").is_some_and(|r| r.status == 201))
            .then(|| stopping.elapsed())
    });
    println!("podman stop of the leader: the container ended in {stopped_in:?}, writes resumed {took:?} after the stop began");
    let logs = podman(&["logs", &names[leader]]);
    let log = String::from_utf8_lossy(&logs.stderr);
    assert!(log.contains("leadership handed over"), "the stopped leader did not hand over:\n{log}");
    assert!(seen.lock().unwrap().acked.len() > before || took < LIMIT);
    podman_ok(&["start", &names[leader]]);
    healthy(&ports);
    phase("the rolling restart");

    // The rolling restart: each member stopped gracefully, started again by its restart policy.
    let members: Vec<String> = ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["cluster", "rolling-restart", "--members", &members.join(","), "--timeout", "120"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    println!("{said}");
    assert!(out.status.success(), "the rolling restart failed:\n{said}");
    for n in &names {
        let restarts = podman_ok(&["inspect", "--format", "{{.RestartCount}}", n]);
        assert!(restarts.parse::<u32>().unwrap_or(0) >= 1, "{n} was not restarted ({restarts})");
    }

    // A member replaced: its container and volume gone, a new one with a new address joins.
    let leader = healthy(&ports);
    let gone = (leader + 1) % 3;
    phase("a member replaced");
    podman_ok(&["rm", "-f", "-v", "-t", "30", &names[gone]]);
    let newcomer = format!("{tag}-n4");
    let port = free_port();
    net.start(&newcomer, port);
    names[gone] = newcomer.clone();
    let mut now = ports.clone();
    now[gone] = port;
    *shared_ports.lock().unwrap() = now.clone();
    healthy(&now);
    phase("healthy again");
    std::thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let seen = seen.lock().unwrap();
    assert!(seen.refused.is_empty(), "refusals a client cannot retry: {:?}", seen.refused);
    let leader = healthy(&now);
    let stored = wait("the stream on the leader", || event_ids(now[leader], "rolling"));
    let lost: Vec<&String> = seen.acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(lost.is_empty(), "{} acknowledged writes lost, e.g. {:?}", lost.len(), lost.first());
    // The newcomer holds them too.
    let on_newcomer = wait("the newcomer to catch up", || {
        event_ids(port, "rolling").filter(|ids| seen.acked.iter().all(|id| ids.contains(id)))
    });
    println!(
        "containers: {} writes acknowledged ({} retried), none lost; the new member {newcomer} holds {} events",
        seen.acked.len(),
        seen.retried,
        on_newcomer.len()
    );
}
