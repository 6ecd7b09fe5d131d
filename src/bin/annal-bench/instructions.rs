//! `annal-bench instructions [--appends N]`: user-space instructions the node executes per
//! single-event append over HTTP, counted by valgrind's callgrind. Unlike times, the count does
//! not move with the machine's load or its disk, so two builds can be compared on one run each:
//! this is how request-path changes are measured (README, performance).
//!
//! The node (this binary's `node` mode, the same node as `annal`) runs under callgrind twice:
//! once serving only start-up and `/ping`, once also serving `N` appends (1 KiB JSON events,
//! expected version, 16 keep-alive connections, each to its own stream). The difference of the
//! two totals, divided by `N`, is the figure; it covers every node thread (HTTP, group commit,
//! index), not the kernel.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::gen;
use crate::http::{batch_body, Client};
use crate::Args;

const CONNS: usize = 16;

pub fn instructions(args: &Args) {
    let appends = args.appends.max(CONNS as u64);
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("annal-bench instructions: valgrind is not installed (Debian: apt-get install valgrind)");
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = args.dir.join(format!("instructions-{}", std::process::id()));
    let run = |n: u64| -> Result<u64, String> { count(&rt, &dir, n) };
    match run(0).and_then(|base| Ok((base, run(appends)?))) {
        Ok((base, with)) => {
            let per = with.saturating_sub(base) as f64 / appends as f64;
            println!(
                "# annal-bench instructions: node under valgrind --tool=callgrind, user space, all threads"
            );
            println!("start-up and /ping: {base} instructions; with {appends} appends: {with}");
            println!("instructions per append (1 KiB JSON event, {CONNS} connections): {per:.0}");
        }
        Err(e) => {
            eprintln!("annal-bench instructions: {e}");
            std::process::exit(1);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Total instructions of one node run under callgrind that serves `appends` appends.
fn count(rt: &tokio::runtime::Runtime, dir: &Path, appends: u64) -> Result<u64, String> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let port = gen::free_port()?;
    let out = dir.join("callgrind.out");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["node", "--dir"])
        .arg(dir.join("data"))
        .args(["--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("valgrind: {e}"))?;
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let driven = rt.block_on(drive(addr, appends));
    // SAFETY: kill(2) on the child this function started; SIGINT asks the node to shut down.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    driven?;
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", out.display()))
}

/// Waits for the node (slow under valgrind), then appends `appends` events over 16 connections.
async fn drive(addr: SocketAddr, appends: u64) -> Result<(), String> {
    let t = Instant::now();
    let mut first = loop {
        if let Ok(mut c) = Client::connect(addr).await {
            if c.request(::http::Method::GET, "/ping", &[], Default::default()).await.is_ok() {
                break c;
            }
        }
        if t.elapsed() > Duration::from_secs(300) {
            return Err("the node did not start in 300 s".into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    if appends == 0 {
        return first.request(::http::Method::GET, "/ping", &[], Default::default()).await.map(drop);
    }
    let payload = gen::payload(1024);
    let mut clients = vec![first];
    for _ in 1..CONNS {
        clients.push(Client::connect(addr).await?);
    }
    let mut tasks = Vec::new();
    for (c, mut client) in (0u64..).zip(clients) {
        let n = appends / CONNS as u64 + u64::from(c < appends % CONNS as u64);
        let payload = payload.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..n {
                client
                    .append(&format!("instr-{c}"), Some(i as i64 - 1), batch_body(c, i, 1, &payload))
                    .await?;
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}
