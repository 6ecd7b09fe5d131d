//! `annal-bench instructions [--appends N]`: user-space instructions the node executes per
//! single-event append and per event read over HTTP, counted by valgrind's callgrind. Unlike
//! times, the counts do not move with the machine's load or its disk, so two builds can be
//! compared on one run each: this is how request-path changes are measured (docs/performance.md).
//!
//! The node (this binary's `node` mode, the same node as `annal`) runs under callgrind three
//! times: serving only start-up and `/ping`; also serving `N` appends (1 KiB JSON events,
//! expected version, 16 keep-alive connections, each to its own stream); and serving the same
//! appends followed by [`READ_PAGES`] forward pages of [`PAGE`] events with `embed=body` (the
//! peers benchmark's workload 4), read over one connection. Differences of the totals give the
//! figures per append and per event read; they cover every node thread (HTTP, group commit,
//! index), not the kernel.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::gen;
use crate::http::{batch_body, Client};
use crate::Args;

const CONNS: usize = 16;
/// Events per page read.
const PAGE: usize = 100;
/// Pages read in the third run.
const READ_PAGES: u64 = 64;

pub fn instructions(args: &Args) {
    let appends = args.appends.max(CONNS as u64);
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("annal-bench instructions: valgrind is not installed (Debian: apt-get install valgrind)");
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let dir = args.dir.join(format!("instructions-{}", std::process::id()));
    // The appends run's profile stays for `callgrind_annotate` (where a change's cost went).
    let profile = args.dir.join("instructions-appends.callgrind.out");
    let run = |n: u64, pages: u64| -> Result<u64, String> {
        let keep = (n > 0 && pages == 0).then_some(profile.as_path());
        count(&rt, &dir, n, pages, keep)
    };
    match run(0, 0).and_then(|base| Ok((base, run(appends, 0)?, run(appends, READ_PAGES)?))) {
        Ok((base, with, read)) => {
            let per = with.saturating_sub(base) as f64 / appends as f64;
            let events = READ_PAGES * PAGE as u64;
            let per_read = read.saturating_sub(with) as f64 / events as f64;
            println!(
                "# annal-bench instructions: node under valgrind --tool=callgrind, user space, all threads"
            );
            println!(
                "start-up and /ping: {base} instructions; with {appends} appends: {with}; \
                 and {READ_PAGES} pages read: {read}"
            );
            println!("instructions per append (1 KiB JSON event, {CONNS} connections): {per:.0}");
            println!(
                "instructions per event read (pages of {PAGE}, embed=body, 1 connection): {per_read:.0}"
            );
            println!("profile of the appends run: callgrind_annotate --inclusive=yes {}", profile.display());
        }
        Err(e) => {
            eprintln!("annal-bench instructions: {e}");
            std::process::exit(1);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Total instructions of one node run under callgrind that serves `appends` appends, then
/// `pages` page reads; the profile is copied to `keep` when given.
fn count(
    rt: &tokio::runtime::Runtime,
    dir: &Path,
    appends: u64,
    pages: u64,
    keep: Option<&Path>,
) -> Result<u64, String> {
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
    let driven = rt.block_on(drive(addr, appends, pages));
    // SAFETY: kill(2) on the child this function started; SIGINT asks the node to shut down.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    driven?;
    let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    if let Some(keep) = keep {
        std::fs::write(keep, &text).map_err(|e| format!("{}: {e}", keep.display()))?;
    }
    text.lines()
        .find_map(|l| l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", out.display()))
}

/// Waits for the node (slow under valgrind), appends `appends` events over 16 connections, then
/// reads `pages` pages of the first connection's stream over one connection (wrapping around).
async fn drive(addr: SocketAddr, appends: u64, pages: u64) -> Result<(), String> {
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
    let in_stream = appends / CONNS as u64 + u64::from(appends % CONNS as u64 > 0);
    let full_pages = in_stream / PAGE as u64;
    if pages > 0 && full_pages == 0 {
        return Err(format!("{appends} appends leave fewer than {PAGE} events in a stream to read"));
    }
    let mut reader = Client::connect(addr).await?;
    for p in 0..pages {
        let from = (p % full_pages.max(1)) as i64 * PAGE as i64;
        let (n, _) = reader.read_forward("instr-0", from, PAGE, None).await?;
        if n != PAGE {
            return Err(format!("page from {from} of instr-0 held {n} events, not {PAGE}"));
        }
    }
    Ok(())
}
