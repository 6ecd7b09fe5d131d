//! The node as an operating-system process: how it ends. A node whose log output is a pipe
//! whose reader went away (`annal … 2>&1 | head -3`) must still shut down on SIGTERM and
//! SIGINT, promptly and with success.
//!
//! This test drives a process from outside the node, so it uses the OS directly (clocks,
//! sockets, processes, signals); the node itself only sees its `Env`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod ports;
use ports::free_port;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may take to exit after the signal (a debug build on a busy machine).
const EXIT_WITHIN: Duration = Duration::from_secs(20);

/// Starts a node logging into a pipe, reads its log until it serves, closes the pipe, then
/// sends `signal`: the node must exit with success within [`EXIT_WITHIN`].
fn exits_on(signal: i32) {
    let root = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args([
            "--db",
            &root.path().join("db").display().to_string(),
            "--http-port",
            &free_port().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut line = String::new();
    while !line.contains("annal is serving HTTP") {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the node ended before it served");
        assert!(start.elapsed() < Duration::from_secs(60), "the node did not serve");
    }
    // The reader goes away: every later log line meets a closed pipe.
    drop(log);
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let sent = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the node exited with {status} after signal {signal}");
            return;
        }
        if sent.elapsed() > EXIT_WITHIN {
            let _ = child.kill();
            panic!("the node ignored signal {signal} for {EXIT_WITHIN:?} once its log pipe was closed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_node_whose_log_pipe_closed_still_ends_on_sigterm() {
    exits_on(libc::SIGTERM);
}

#[test]
fn a_node_whose_log_pipe_closed_still_ends_on_sigint() {
    exits_on(libc::SIGINT);
}

/// One HTTP/1.1 request as `admin`: the status code and the body.
fn request(port: u16, method: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic YWRtaW46Y2hhbmdlaXQ=\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let status = raw.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

/// Reads log lines until one whose message contains `what`; every line must be one JSON object
/// with the fixed keys.
fn json_line_until(
    log: &mut impl BufRead,
    what: &str,
    seen: &mut Vec<serde_json::Value>,
) -> serde_json::Value {
    let start = Instant::now();
    loop {
        let mut line = String::new();
        assert!(log.read_line(&mut line).unwrap() > 0, "the log ended before {what:?}");
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        for key in ["timestamp", "level", "module", "node", "message"] {
            assert!(v.get(key).is_some(), "{key} missing: {line}");
        }
        seen.push(v.clone());
        if v["message"].as_str().unwrap().contains(what) {
            return v;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "no log line saying {what:?}");
    }
}

#[test]
fn the_json_log_has_one_object_per_line_and_its_level_changes_at_runtime() {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["--mem-db", "--log-format", "json", "--http-port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut seen = Vec::new();
    let serving = json_line_until(&mut log, "annal is serving HTTP", &mut seen);
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["node"], format!("127.0.0.1:{port}"));
    assert_eq!(serving["module"], "annal");
    assert!(serving["fields"]["addr"].as_str().unwrap().ends_with(&port.to_string()));
    assert!(serving["timestamp"].as_str().unwrap().ends_with('Z'));

    assert_eq!(request(port, "GET", "/admin/loglevel"), (200, r#"{"level":"Info","format":"Json"}"#.into()));
    let (status, _) = request(port, "POST", "/admin/loglevel?level=loud");
    assert_eq!(status, 400);
    // At Error, the info line of a reload is not written; back at Info, it is.
    assert_eq!(request(port, "POST", "/admin/loglevel?level=error").0, 200);
    assert_eq!(request(port, "POST", "/admin/reloadconfig").0, 200);
    assert_eq!(request(port, "POST", "/admin/loglevel?level=Info").0, 200);
    let changed = json_line_until(&mut log, "log level changed", &mut seen);
    assert_eq!(
        (changed["fields"]["from"].as_str(), changed["fields"]["to"].as_str()),
        (Some("Error"), Some("Info"))
    );
    assert!(
        !seen.iter().any(|v| v["message"].as_str().unwrap().contains("reloading the node's configuration")),
        "an info line was written at level Error"
    );
    assert_eq!(request(port, "POST", "/admin/reloadconfig").0, 200);
    json_line_until(&mut log, "reloading the node's configuration", &mut seen);
    let _ = child.kill();
    let _ = child.wait();
}

/// Starts a node with `--shutdown-timeout {bound}`, has a client send `held` and wait, sends
/// SIGTERM: the exit status, how long the node took to end, and the rest of its log.
fn stop_with_a_client_holding(held: &[u8], bound: u64) -> (std::process::ExitStatus, Duration, String) {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["--mem-db", "--http-port", &port.to_string(), "--shutdown-timeout", &bound.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("annal is serving HTTP") {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the node ended before it served");
    }
    let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    std::io::Write::write_all(&mut client, held).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(sent.elapsed() < EXIT_WITHIN, "the node did not end within {EXIT_WITHIN:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = sent.elapsed();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut log, &mut rest);
    drop(client);
    (status, took, rest)
}

#[test]
fn a_stop_ends_the_process_within_the_shutdown_timeout_whatever_holds_it() {
    // A request whose head arrived is waited for; its body never comes: the bound ends it.
    let head = "POST /streams/s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nES-EventType: t\r\n\
                ES-EventId: 3b0c5a4e-7a51-4b0e-9d3e-5b8f1c2d4e6f\r\nContent-Length: 100\r\n\r\n{";
    let (status, took, log) = stop_with_a_client_holding(head.as_bytes(), 2);
    assert!(took >= Duration::from_millis(1500), "it ended after {took:?}, before the bound");
    assert_eq!(status.code(), Some(1), "a stop cut short by the bound is a failure");
    assert!(log.contains("did not finish within 2s"), "{log}");
}

#[test]
fn a_client_that_never_finishes_its_request_head_does_not_hold_a_stop() {
    // Half a request head: the client has a second's grace, then the node ends cleanly, long
    // before the bound (the header timeout is 30 s).
    let (status, took, log) = stop_with_a_client_holding(b"GET /ping HTTP/1.1\r\nHost: x\r\n", 15);
    assert!(status.success(), "exit {status} after {took:?}: {log}");
    assert!(took < Duration::from_secs(10), "the half-sent head held the stop for {took:?}");
}

/// `annal healthcheck` (a container's probe, where no curl exists): exit 0 while its node
/// serves, 1 when no node answers, 2 for a bad command line.
#[test]
fn the_healthcheck_exits_zero_only_while_its_node_lives() {
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_annal"))
        .args(["--mem-db"])
        .env("ANNAL_HTTP_PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("annal is serving HTTP") {
        line.clear();
        assert!(log.read_line(&mut line).unwrap() > 0, "the node ended before it served");
    }
    let check = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_annal"))
            .arg("healthcheck")
            .args(args)
            .env("ANNAL_HTTP_PORT", port.to_string())
            .output()
            .unwrap()
    };
    assert_eq!(check(&[]).status.code(), Some(0));
    assert_eq!(check(&["--url", &format!("http://127.0.0.1:{port}/")]).status.code(), Some(0));
    let gone = check(&["--url", &format!("http://127.0.0.1:{}", free_port())]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("cannot reach the node"));
    assert_eq!(check(&["--timeout", "soon"]).status.code(), Some(2));
    assert_eq!(check(&["--url", "ftp://x"]).status.code(), Some(2));
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(check(&[]).status.code(), Some(1), "a stopped node is not live");
}
