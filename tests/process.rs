//! The node as an operating-system process: how it ends. A node whose log output is a pipe
//! whose reader went away (`annal … 2>&1 | head -3`) must still shut down on SIGTERM and
//! SIGINT, promptly and with success.
//!
//! This test drives a process from outside the node, so it uses the OS directly (clocks,
//! sockets, processes, signals); the node itself only sees its `Env`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a node may take to exit after the signal (a debug build on a busy machine).
const EXIT_WITHIN: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

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
