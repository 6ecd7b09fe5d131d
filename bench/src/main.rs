//! `annal-bench`: the benchmark harness of Annal, a workspace member of its own (`bench/`) so the
//! node's package carries none of its dependencies. It owns every benchmark command, each printing
//! figures (never timed tests); run them with `cargo run --release -p annal-bench -- <command>`:
//!
//! - `annal-bench storage [--seconds N] [--dir PATH] [--streams N]` measures the storage engine
//!   directly (no HTTP) on the real disk: durable 1 KiB appends with 1 writer and 64 concurrent
//!   writers (group commit), batches of 100, read-forward throughput from the page cache, and
//!   index memory for many streams; it prints a table and peak RSS.
//! - `annal-bench scavenge [--gib G] [--dir PATH]` measures a scavenge of a log of `G` GiB.
//! - `annal-bench backup [--gib G] [--dir PATH] [--seconds N]` measures backup, restore and verify
//!   of a `G` GiB database beside `cp -r` of the same files, and the throughput of 16 HTTP
//!   connections appending alone and while backups run back to back.
//! - `annal-bench redact [--dir PATH]` times `annal redact` of 100 events over 10 chunks.
//! - `annal-bench disk [--seconds N] [--dir PATH]` measures what one 1 KiB append plus `fdatasync`
//!   costs on this disk, by how the file's space was prepared and whether the write ends a page,
//!   and what two flushes cost issued concurrently from two threads against one after the other.
//! - `annal-bench http [--url URL] [--seconds N] [--only ROWS]` drives a node over HTTP
//!   (keep-alive connections, one task per connection): single-event appends at 1/16/64
//!   connections, batches of 100, reads of 20-event feed pages. Without `--url` it starts a node
//!   in-process on an ephemeral loopback port with a fresh data directory under
//!   `target/bench-data`.
//! - `annal-bench subs [--url URL] [--events N]` measures persistent subscriptions over HTTP:
//!   events taken and acknowledged per second with 1 and 4 consumers (pages of 100, one
//!   `ack?ids=` per page), and the redelivery latency after a nack.
//! - `annal-bench projections [--events N]` writes a log of N events (default 1,000,000) and
//!   prints the events per second `$by_category` and `$by_event_type` process together, then
//!   those a JavaScript projection summing a field by stream processes over a log of the same
//!   shape, and the engine memory of 10,000 of its partitions.
//! - `annal-bench projections-lag [--seconds N]` appends over 16 connections to a node running
//!   the system projections and prints how far `$ce-` trails the appends (p50, p99, max).
//! - `annal-bench cluster [--seconds N] [--rounds N] [--trials N]` starts a 3-node cluster of
//!   `annal` processes and a single node on loopback and prints appends/s of both at 16 and 64
//!   connections, when followers serve what the leader acknowledged, failover time after
//!   `kill -9` of the leader, and the catch-up speed of a wiped follower.
//! - `annal-bench tls [--seconds N] [--rounds N] [--only c16,c64,feed,connect]` runs a plain and a TLS node in-process side by side and
//!   prints appends/s at 16 and 64 connections, feed pages/s and new connections/s (TLS
//!   handshakes) over TLS as ratios to plain HTTP in the same run, and the time a certificate
//!   reload takes.
//! - `annal-bench instructions [--appends N]` counts the user-space instructions the node executes
//!   per single-event HTTP append and per event read, under valgrind's callgrind (repeatable,
//!   unlike times).
//! - `annal-bench metrics [--groups N] [--projections N]` measures the size and the time of one
//!   `/metrics` scrape on a node with that many subscription groups and projections.
//! - `annal-bench peers [--smoke] [--seconds N] [--rounds N] [--out DIR] [--only a,b]` (needs this
//!   crate's `peers` feature, which owns the peer client crates; `bench/peers/run.sh` builds with
//!   it and installs what is missing with `bench/peers/install.sh`) runs the same workloads against
//!   Annal and the peers a user would pick instead (PostgreSQL, Redis Streams, NATS JetStream,
//!   SierraDB, UmaDB), each installed and started on 127.0.0.1 by this command, and prints a table
//!   with Annal's ratio to each peer.
//! - `annal-bench node [--dir PATH] [--port N]` (internal) serves a node with default settings
//!   until SIGTERM/SIGINT: the separate Annal process that `peers` and `instructions` measure.
//!
//! It uses only the `annal` library's public API (store, scavenge, node, config, `env::real`).

// A measurement tool, not node code: it uses OS time, threads, sockets and /proc directly.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod backup;
mod cluster;
mod disk;
mod gen;
mod http;
mod instructions;
mod lag;
mod metrics;
#[cfg(feature = "peers")]
mod peers;
mod projections;
mod scavenge;
mod storage;
mod subs;
mod tls;

use annal::store::NewEvent;

/// The same allocator as the `annal` binary, so the in-process and `node`-mode servers measured
/// here are the node users run.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Command-line arguments of every mode.
pub struct Args {
    pub mode: String,
    pub seconds: Option<f64>,
    pub dir: std::path::PathBuf,
    pub streams: usize,
    pub gib: f64,
    pub url: Option<String>,
    pub smoke: bool,
    pub out: Option<std::path::PathBuf>,
    pub only: Option<Vec<String>>,
    pub port: u16,
    /// `peers`: rounds over all systems, interleaved; each row reports the median round.
    pub rounds: usize,
    /// `instructions`: appends to count.
    pub appends: u64,
    /// `cluster`: failover trials.
    pub trials: usize,
    /// `subs`: events the consumers take and acknowledge per row; `projections`: events of the
    /// log the projections process.
    pub events: u64,
    /// `--events` was given.
    pub events_given: bool,
    /// `metrics`: persistent subscription groups.
    pub groups: usize,
    /// `metrics`: projections.
    pub projections: usize,
}

const USAGE: &str = "usage: annal-bench storage [--seconds N] [--dir PATH] [--streams N]
       annal-bench scavenge [--gib G] [--dir PATH]
       annal-bench backup [--gib G] [--dir PATH] [--seconds N]
       annal-bench redact [--dir PATH]
       annal-bench disk [--seconds N] [--dir PATH]
       annal-bench http [--url http://127.0.0.1:2113] [--seconds N] [--only c1,c16,c64,b1,b4,r1,r16,z1,z16]
       annal-bench tls [--seconds N] [--rounds N] [--only c16,c64,feed,connect]
       annal-bench subs [--url http://127.0.0.1:2113] [--events N]
       annal-bench projections [--events N] [--dir PATH]
       annal-bench projections-lag [--seconds N] [--dir PATH]
       annal-bench instructions [--appends N]   (needs valgrind)
       annal-bench metrics [--groups N] [--projections N]
       annal-bench cluster [--seconds N] [--rounds N] [--trials N] [--only failover]   (needs target/release/annal)
       annal-bench peers [--smoke] [--seconds N] [--rounds N] [--out DIR] [--only annal,postgres,redis,nats,nats-sync,sierradb,umadb]
                   (peers needs the peers feature: bench/peers/run.sh)";

fn parse() -> Result<Args, String> {
    let mut a = Args {
        mode: String::new(),
        seconds: None,
        dir: "target/bench-data".into(),
        streams: 1_000_000,
        gib: 2.0,
        url: None,
        smoke: false,
        out: None,
        only: None,
        port: 2113,
        rounds: 1,
        appends: 6400,
        trials: 10,
        events: 200_000,
        events_given: false,
        groups: 1000,
        projections: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--seconds" => {
                a.seconds = Some(it.next().and_then(|v| v.parse().ok()).ok_or("--seconds needs a number")?)
            }
            "--dir" => a.dir = it.next().ok_or("--dir needs a path")?.into(),
            "--streams" => {
                a.streams = it.next().and_then(|v| v.parse().ok()).ok_or("--streams needs a number")?
            }
            "--gib" => a.gib = it.next().and_then(|v| v.parse().ok()).ok_or("--gib needs a number")?,
            "--url" => a.url = Some(it.next().ok_or("--url needs a URL")?),
            "--smoke" => a.smoke = true,
            "--port" => a.port = it.next().and_then(|v| v.parse().ok()).ok_or("--port needs a number")?,
            "--rounds" => {
                a.rounds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n >= 1)
                    .ok_or("--rounds needs a number of at least 1")?
            }
            "--appends" => {
                a.appends = it.next().and_then(|v| v.parse().ok()).ok_or("--appends needs a number")?
            }
            "--events" => {
                a.events = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n >= 1)
                    .ok_or("--events needs a number of at least 1")?;
                a.events_given = true;
            }
            "--groups" => {
                a.groups = it.next().and_then(|v| v.parse().ok()).ok_or("--groups needs a number")?
            }
            "--projections" => {
                a.projections =
                    it.next().and_then(|v| v.parse().ok()).ok_or("--projections needs a number")?
            }
            "--trials" => {
                a.trials = it.next().and_then(|v| v.parse().ok()).ok_or("--trials needs a number")?
            }
            "--out" => a.out = Some(it.next().ok_or("--out needs a directory")?.into()),
            "--only" => {
                a.only = Some(
                    it.next()
                        .ok_or("--only needs a list")?
                        .split(',')
                        .map(|s| s.trim().to_ascii_lowercase())
                        .collect(),
                )
            }
            "--help" | "-h" => return Err("help".into()),
            m if !m.starts_with('-') && a.mode.is_empty() => a.mode = m.to_string(),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.mode.is_empty() {
        a.mode = "storage".into();
    }
    Ok(a)
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            if e == "help" {
                println!("{USAGE}");
                return;
            }
            eprintln!("annal-bench: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    match args.mode.as_str() {
        "storage" => storage::storage(&args),
        "disk" => disk::disk(&args),
        "scavenge" => scavenge::scavenge(&args),
        "backup" => backup::backup_bench(&args),
        "redact" => backup::redact_bench(&args),
        "http" => http::http_mode(&args),
        "subs" => subs::subs_mode(&args),
        "projections" => projections::projections_mode(&args),
        "projections-lag" => lag::lag_mode(&args),
        "cluster" => cluster::cluster_mode(&args),
        "tls" => tls::tls_mode(&args),
        "instructions" => instructions::instructions(&args),
        "metrics" => metrics::metrics_mode(&args),
        "peers" => peers_mode(&args),
        // The node as `annal peers` starts it: default settings, data in --dir, on --port.
        "node" => http::node_mode(&args),
        other => {
            eprintln!("annal-bench: unknown mode {other} (known: storage, scavenge, backup, redact, http, subs, projections, projections-lag, cluster, instructions, metrics, peers, disk)");
            std::process::exit(2);
        }
    }
}

#[cfg(feature = "peers")]
fn peers_mode(args: &Args) {
    peers::run(args)
}

#[cfg(not(feature = "peers"))]
fn peers_mode(_: &Args) {
    eprintln!("annal-bench: this build has no peer drivers; run\n  bench/peers/run.sh");
    std::process::exit(2);
}

/// A JSON event of `size` bytes with a unique id. Payloads of one size share one buffer, so the
/// load generator spends its CPU on requests, not on building them.
pub fn event(i: u64, size: usize) -> NewEvent {
    use std::sync::OnceLock;
    static PAYLOADS: OnceLock<std::sync::Mutex<std::collections::HashMap<usize, bytes::Bytes>>> =
        OnceLock::new();
    let data = PAYLOADS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(size)
        .or_insert_with(|| {
            let mut d = b"{\"pad\":\"".to_vec();
            d.resize(size - 2, b'x');
            d.extend_from_slice(b"\"}");
            d.into()
        })
        .clone();
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&i.to_le_bytes());
    id[8] = 0xbe;
    NewEvent { id, event_type: "bench".into(), data, metadata: Default::default(), is_json: true }
}

/// Peak resident set size of this process (VmHWM), in bytes.
pub fn peak_rss() -> u64 {
    read_status_kb("VmHWM:") * 1024
}

/// A `kB` field of `/proc/self/status`.
pub fn read_status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// One measured run: events, wall time and per-request latencies.
pub struct Run {
    pub events: u64,
    pub secs: f64,
    pub lat_us: Vec<u32>,
}

impl Run {
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }
    pub fn pct(&mut self, p: f64) -> u32 {
        if self.lat_us.is_empty() {
            return 0;
        }
        self.lat_us.sort_unstable();
        self.lat_us[((self.lat_us.len() - 1) as f64 * p) as usize]
    }
}
