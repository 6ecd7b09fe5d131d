//! The Admin UI in a real browser: Debian's headless Chromium, driven by `tests/ui/browser.mjs`
//! (playwright-core, pointed at the Debian binary), against `annal` processes that serve the UI
//! from the binary itself. On a single node: sign-in (and a wrong password), the dashboard, the
//! stream browser and an event added through the form, a projection whose state follows new
//! events, a persistent subscription's counters, a user without the admin menus, a scavenge
//! started, watched and found in the history. On a 3-node cluster: the same admin page on a
//! follower, then the cluster page as the leader stops and another takes over. A screenshot of
//! every page goes under `target/ui-screenshots/`.
//!
//! Needs Node.js, Chromium (`/usr/bin/chromium`) and playwright-core
//! (`npm install --prefix target/ui-tools playwright-core@1`; `.ci/run` installs all three).
//! Under CI a missing prerequisite fails these tests; elsewhere they are ignored.
//!
//! This test drives processes from outside the node, so it uses the OS directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod ports;
use ports::free_port;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may take to serve, and a cluster to elect (a debug build on a busy machine).
const LIMIT: Duration = Duration::from_secs(60);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A node process, killed when dropped.
struct Node {
    child: Child,
    http: u16,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn(args: &[String], http: u16, log: &Path) -> Node {
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(args)
        .args(["--http-port", &http.to_string(), "--run-projections", "All", "--start-standard-projections"])
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .unwrap();
    Node { child, http }
}

fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic YWRtaW46Y2hhbmdlaXQ=\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
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
    let (_, body) = get(port, "/info")?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some(v["state"].as_str()?.to_owned())
}

/// Runs one scenario of `tests/ui/browser.mjs`; fails with its output when it fails.
fn browse(scenario: &str, args: &[String]) {
    let shots = repo().join("target/ui-screenshots").join(scenario);
    let _ = std::fs::remove_dir_all(&shots);
    let out = Command::new("node")
        .current_dir(repo())
        .arg("tests/ui/browser.mjs")
        .args(["--scenario", scenario, "--screenshots", &shots.display().to_string()])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("node: {e} (install Node.js)"));
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    println!("{said}");
    assert!(out.status.success(), "the {scenario} scenario failed:\n{said}");
    let pngs = std::fs::read_dir(&shots).map(|d| d.count()).unwrap_or(0);
    assert!(pngs > 0, "no screenshots under {}", shots.display());
}

#[test]
#[cfg_attr(not(annal_ci), ignore = "needs Node.js, Chromium and playwright-core (run under CI)")]
fn every_page_of_the_admin_ui_works_on_a_single_node() {
    let root = tempfile::tempdir().unwrap();
    let http = free_port();
    let db = root.path().join("db").display().to_string();
    let _node = spawn(&["--db".into(), db], http, &root.path().join("node.log"));
    wait("the node to serve", || get(http, "/users/admin").filter(|(s, _)| *s == 200));
    browse("single", &["--url".into(), format!("http://127.0.0.1:{http}/")]);
}

#[test]
#[cfg_attr(not(annal_ci), ignore = "needs Node.js, Chromium and playwright-core (run under CI)")]
fn the_admin_ui_works_on_a_follower_and_follows_the_cluster_as_its_leader_stops() {
    let root = tempfile::tempdir().unwrap();
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, (http, repl))| {
            let seeds: Vec<String> =
                ports.iter().filter(|(_, r)| r != repl).map(|(_, r)| format!("127.0.0.1:{r}")).collect();
            let args = vec![
                "--db".into(),
                root.path().join(format!("n{i}")).display().to_string(),
                "--replication-port".into(),
                repl.to_string(),
                "--cluster-size".into(),
                "3".into(),
                "--gossip-seed".into(),
                seeds.join(","),
            ];
            spawn(&args, *http, &root.path().join(format!("n{i}.log")))
        })
        .collect();
    let follower = wait("a leader, its users and a follower", || {
        let states: Vec<Option<String>> = nodes.iter().map(|n| state(n.http)).collect();
        let leaders: Vec<usize> = (0..3).filter(|&i| states[i].as_deref() == Some("master")).collect();
        let follower = (0..3).find(|&i| states[i].as_deref() == Some("slave"))?;
        let users = get(nodes[*leaders.first()?].http, "/users/admin").is_some_and(|(s, _)| s == 200);
        (leaders.len() == 1 && users).then_some(follower)
    });
    browse("follower", &["--url".into(), format!("http://127.0.0.1:{}/", nodes[follower].http)]);
    let members: Vec<String> = nodes.iter().map(|n| format!("http://127.0.0.1:{}/", n.http)).collect();
    browse("cluster", &["--members".into(), members.join(",")]);
}
