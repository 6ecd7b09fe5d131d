//! `annal-bench cluster [--seconds N] [--rounds N] [--trials N] [--only failover] [--dir PATH]`: a 3-node cluster of
//! `annal` processes on loopback ports against a single node, on this machine (all nodes share its
//! cores and its disk). It prints:
//! - appends/s at 16 and 64 connections (one event per request, own streams, expected versions)
//!   to the cluster's leader and to a single node, interleaved per round, with the ratio, each
//!   round's figures, and the CPU each append cost the node processes (all three for the cluster);
//! - how long after an append is acknowledged by the leader a follower serves it (p50/p99),
//!   measured while the 64-connection load runs;
//! - failover: `kill -9` of the leader under load, then SIGTERM (the leader hands over first),
//!   time until a write is acknowledged again, p50 and max over the trials each;
//! - catch-up: a follower wiped and restarted, bytes per second until it holds the leader's log.
//!
//! It needs the release `annal` binary beside `annal-bench` (`cargo build --release` first).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::gen;
use crate::http::{append_ops, unique};
use crate::Args;

struct Proc {
    child: Option<Child>,
    http: u16,
    dir: PathBuf,
    args: Vec<String>,
    bin: PathBuf,
}

impl Proc {
    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.with_extension("log")).expect("log file");
        let child = Command::new(&self.bin).args(&self.args).stdout(Stdio::null()).stderr(log).spawn();
        self.child = Some(child.expect("cannot start annal"));
    }
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.http))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0)
}

fn single(bin: &Path, root: &Path) -> Proc {
    let http = free_port();
    let dir = root.join("single");
    let args = vec!["--db".into(), dir.display().to_string(), "--http-port".into(), http.to_string()];
    let mut p = Proc { child: None, http, dir, args, bin: bin.to_path_buf() };
    p.spawn();
    p
}

fn three(bin: &Path, root: &Path) -> Vec<Proc> {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    ports
        .iter()
        .enumerate()
        .map(|(i, (http, repl))| {
            let seeds: Vec<String> =
                ports.iter().filter(|(_, r)| r != repl).map(|(_, r)| format!("127.0.0.1:{r}")).collect();
            let dir = root.join(format!("node{i}"));
            let args = vec![
                "--db".into(),
                dir.display().to_string(),
                "--http-port".into(),
                http.to_string(),
                "--replication-port".into(),
                repl.to_string(),
                "--cluster-size".into(),
                "3".into(),
                "--gossip-seed".into(),
                seeds.join(","),
            ];
            let mut p = Proc { child: None, http: *http, dir, args, bin: bin.to_path_buf() };
            p.spawn();
            p
        })
        .collect()
}

/// One blocking HTTP exchange (control traffic, not the measured load): status and body.
fn call(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nAuthorization: Basic YWRtaW46Y2hhbmdlaXQ=\r\n"
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.split(' ').nth(1)?.parse().ok()?, body.to_owned()))
}

fn state(port: u16) -> Option<String> {
    let (_, body) = call(port, "GET", "/info", &[], "")?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some(v["state"].as_str()?.to_owned())
}

fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(x) = f() {
            return Some(x);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn ready(port: u16) -> bool {
    call(port, "GET", "/users/admin", &[], "").is_some_and(|(s, _)| s == 200)
}

fn master(procs: &[Proc]) -> Option<usize> {
    wait(Duration::from_secs(30), || {
        let m: Vec<usize> = (0..procs.len())
            .filter(|&i| procs[i].child.is_some() && state(procs[i].http).as_deref() == Some("master"))
            .collect();
        (m.len() == 1 && ready(procs[m[0]].http)).then(|| m[0])
    })
}

fn append_one(port: u16, stream: &str) -> Option<u16> {
    let id = uuid::Uuid::from_u128(unique() as u128 | ((unique() as u128) << 64)).to_string();
    let h = [("Content-Type", "application/json"), ("ES-EventType", "probe"), ("ES-EventId", id.as_str())];
    call(port, "POST", &format!("/streams/{stream}"), &h, "{\"probe\":1}").map(|(s, _)| s)
}

/// One measured row: appends/s, and CPU µs per append of the node processes measured (every
/// process of the single node or of the cluster, from `/proc/<pid>/stat`, over the window).
#[derive(Clone, Copy, Default)]
struct Row {
    per_sec: f64,
    cpu_us: f64,
}

/// The PIDs of the running processes among `procs`.
fn pids<'a>(procs: impl IntoIterator<Item = &'a Proc>) -> Vec<u32> {
    procs.into_iter().filter_map(|p| p.child.as_ref().map(Child::id)).collect()
}

fn appends_per_sec(
    rt: &tokio::runtime::Runtime,
    addr: SocketAddr,
    pids: &[u32],
    conns: usize,
    secs: f64,
) -> Row {
    let payload = gen::payload(1024);
    let prefix = format!("cl-{}-{conns}", unique() % 1_000_000);
    let cpu = || gen::cpu_secs_of(pids);
    let m = rt.block_on(async {
        let ops = append_ops(addr, &prefix, conns, 1, 1, &payload).await?;
        Ok::<_, String>(
            gen::closed_loop_cpu(ops, Duration::from_secs(1), Duration::from_secs_f64(secs), Some(&cpu))
                .await,
        )
    });
    match m {
        Ok(m) => {
            if m.errors > 0 {
                eprintln!("annal-bench: {} errors ({:?})", m.errors, m.first_error);
            }
            let cpu_us = m.server_cpu_secs.map_or(0.0, |c| c * 1e6 / m.events.max(1) as f64);
            Row { per_sec: m.events as f64 / m.secs, cpu_us }
        }
        Err(e) => {
            eprintln!("annal-bench: {e}");
            Row::default()
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// The median of one field of `rows`.
fn median_of(rows: &[Row], field: impl Fn(&Row) -> f64) -> f64 {
    median(&mut rows.iter().map(field).collect::<Vec<_>>())
}

/// `annal-bench cluster`.
pub fn cluster_mode(args: &Args) {
    let bin = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("annal")));
    let Some(bin) = bin.filter(|b| b.exists()) else {
        eprintln!(
            "annal-bench: the annal binary is not beside annal-bench: run `cargo build --release` first"
        );
        std::process::exit(2);
    };
    let secs = args.seconds.unwrap_or(5.0);
    let root = args.dir.join(format!("cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("bench directory");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    if args.only.as_ref().is_some_and(|o| o.iter().all(|x| x == "failover")) {
        // Only the leader stopped both ways (`--only failover`).
        failover(&bin, &root.join("failover"), args.trials.max(1), &rt, Stop::Kill);
        failover(&bin, &root.join("handover"), args.trials.max(1), &rt, Stop::Term);
        let _ = std::fs::remove_dir_all(&root);
        return;
    }
    println!("# annal-bench cluster: 3 annal processes and 1 single node on this machine ({} cores, one disk), 1 KiB events, durable appends, {secs} s per row, {} round(s)", annal::env::real::cores(), args.rounds);
    // Rows per round: single node at 16 and 64 connections, then the cluster at 16 and 64.
    let mut rows: [Vec<Row>; 4] = Default::default();
    let mut visible_ms: Vec<f64> = Vec::new();
    for round in 0..args.rounds {
        let dir = root.join(format!("round{round}"));
        std::fs::create_dir_all(&dir).expect("round directory");
        {
            let s = single(&bin, &dir);
            if wait(Duration::from_secs(30), || ready(s.http).then_some(())).is_none() {
                eprintln!("annal-bench: the single node did not start (see {}.log)", s.dir.display());
                return;
            }
            let p = pids([&s]);
            rows[0].push(appends_per_sec(&rt, s.addr(), &p, 16, secs));
            rows[1].push(appends_per_sec(&rt, s.addr(), &p, 64, secs));
        }
        let procs = three(&bin, &dir);
        let Some(l) = master(&procs) else {
            eprintln!("annal-bench: no leader (see the logs in {})", dir.display());
            return;
        };
        let p = pids(&procs);
        rows[2].push(appends_per_sec(&rt, procs[l].addr(), &p, 16, secs));
        // The 64-connection load, with a probe measuring when a follower serves what the
        // leader acknowledged.
        let follower = procs[(l + 1) % 3].http;
        let leader = procs[l].http;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let probe = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut k = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    k += 1;
                    let stream = format!("probe-{}-{k}", unique() % 1_000_000);
                    if append_one(leader, &stream) != Some(201) {
                        continue;
                    }
                    let acked = Instant::now();
                    let path = format!("/streams/{stream}/0");
                    // Polled every millisecond: finer than the figure, light on the nodes.
                    let deadline = Instant::now() + Duration::from_secs(10);
                    let mut seen = None;
                    while seen.is_none() && Instant::now() < deadline {
                        seen = call(follower, "GET", &path, &[("Accept", "application/json")], "")
                            .filter(|(s, _)| *s == 200)
                            .map(|_| ());
                        if seen.is_none() {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                    if seen.is_some() {
                        out.push(acked.elapsed().as_secs_f64() * 1e3);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                out
            })
        };
        rows[3].push(appends_per_sec(&rt, procs[l].addr(), &p, 64, secs));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        visible_ms.extend(probe.join().unwrap_or_default());
        drop(procs);
        let r = rows.each_ref().map(|v| v.last().copied().unwrap_or_default());
        println!(
            "# round {}: single node {:.0}/s and {:.0}/s, cluster {:.0}/s and {:.0}/s (16 and 64 connections)",
            round + 1,
            r[0].per_sec,
            r[1].per_sec,
            r[2].per_sec,
            r[3].per_sec
        );
    }
    let [s16, s64, c16, c64] = rows.each_ref().map(|v| median_of(v, |r| r.per_sec));
    let [cpu_s16, cpu_s64, cpu_c16, cpu_c64] = rows.each_ref().map(|v| median_of(v, |r| r.cpu_us));
    println!("| workload | single node | 3-node cluster (leader) | ratio |");
    println!("|---|---:|---:|---:|");
    println!("| append 1 event, 16 connections | {s16:.0}/s | {c16:.0}/s | {:.2}× |", c16 / s16.max(1.0));
    println!("| append 1 event, 64 connections | {s64:.0}/s | {c64:.0}/s | {:.2}× |", c64 / s64.max(1.0));
    println!(
        "# node CPU per append (every node process, /proc, medians): single node {cpu_s16:.0} µs and {cpu_s64:.0} µs, cluster (three processes) {cpu_c16:.0} µs and {cpu_c64:.0} µs (16 and 64 connections)"
    );
    visible_ms.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        visible_ms
            .get(((visible_ms.len() as f64 * p) as usize).min(visible_ms.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    println!(
        "# follower serves what the leader acknowledged after: p50 {:.1} ms, p99 {:.1} ms ({} probes during the 64-connection load)",
        pct(0.5),
        pct(0.99),
        visible_ms.len()
    );
    failover(&bin, &root.join("failover"), args.trials.max(1), &rt, Stop::Kill);
    failover(&bin, &root.join("handover"), args.trials.max(1), &rt, Stop::Term);
    catch_up(&bin, &root.join("catchup"), &rt);
    let _ = std::fs::remove_dir_all(&root);
}

/// How the leader is stopped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// `kill -9`: the followers wait for the election timeout.
    Kill,
    /// SIGTERM: the leader hands over to a follower first.
    Term,
}

/// The leader stopped (`how`) while 4 connections append; time until a write is acknowledged
/// again by a survivor.
fn failover(bin: &Path, dir: &Path, trials: usize, rt: &tokio::runtime::Runtime, how: Stop) {
    std::fs::create_dir_all(dir).expect("failover directory");
    let mut procs = three(bin, dir);
    let mut times = Vec::new();
    for _ in 0..trials {
        let Some(l) = master(&procs) else {
            eprintln!("annal-bench: no leader (see the logs in {})", dir.display());
            return;
        };
        // Load on the leader for a moment, then the stop.
        let _ = appends_per_sec(rt, procs[l].addr(), &[], 4, 0.5);
        let stopped = Instant::now();
        match how {
            Stop::Kill => procs[l].kill(),
            Stop::Term => {
                if let Some(c) = &procs[l].child {
                    // SAFETY: kill(2) on a child this process started.
                    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                }
            }
        }
        let others: Vec<u16> = (0..3).filter(|&i| i != l).map(|i| procs[i].http).collect();
        let back = wait(Duration::from_secs(30), || {
            others.iter().any(|&p| append_one(p, "failover") == Some(201)).then_some(())
        });
        if back.is_some() {
            times.push(stopped.elapsed().as_secs_f64());
        }
        if let Some(mut c) = procs[l].child.take() {
            let _ = c.wait();
        }
        procs[l].spawn();
        let _ = wait(Duration::from_secs(30), || {
            (state(procs[l].http).as_deref() == Some("slave")).then_some(())
        });
    }
    let mut t = times.clone();
    let p50 = median(&mut t);
    let max = times.iter().cloned().fold(0.0, f64::max);
    let what = match how {
        Stop::Kill => "kill -9 of the leader",
        Stop::Term => "SIGTERM to the leader, which hands over first",
    };
    println!(
        "# failover ({what}, default timeouts): write acknowledged again after p50 {p50:.2} s, max {max:.2} s ({} of {trials} trials)",
        times.len()
    );
}

/// A follower wiped and restarted: how fast it copies the leader's log.
fn catch_up(bin: &Path, dir: &Path, rt: &tokio::runtime::Runtime) {
    std::fs::create_dir_all(dir).expect("catch-up directory");
    let mut procs = three(bin, dir);
    let Some(l) = master(&procs) else { return };
    let victim = (l + 1) % 3;
    procs[victim].kill();
    // Batches of 100 events of 1 KiB for a few seconds.
    let payload = gen::payload(1024);
    let m = rt.block_on(async {
        let ops = append_ops(procs[l].addr(), "catchup", 4, 1, 100, &payload).await?;
        Ok::<_, String>(
            gen::closed_loop_cpu(ops, Duration::from_millis(100), Duration::from_secs(4), None).await,
        )
    });
    if let Err(e) = m {
        eprintln!("annal-bench: {e}");
        return;
    }
    let writer = |port: u16| -> Option<u64> {
        let (_, body) = call(port, "GET", "/gossip", &[], "")?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["members"]
            .as_array()?
            .iter()
            .find(|m| m["externalHttpPort"] == port)
            .and_then(|m| m["writerCheckpoint"].as_u64())
    };
    let Some(target) = writer(procs[l].http) else { return };
    let _ = std::fs::remove_dir_all(&procs[victim].dir);
    let started = Instant::now();
    procs[victim].spawn();
    let done = wait(Duration::from_secs(120), || writer(procs[victim].http).filter(|&w| w >= target));
    match done {
        Some(_) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "# catch-up of a wiped follower: {:.1} MB in {secs:.2} s from process start = {:.0} MB/s",
                target as f64 / 1e6,
                target as f64 / 1e6 / secs
            );
        }
        None => println!("# catch-up of a wiped follower: not done within 120 s"),
    }
}
