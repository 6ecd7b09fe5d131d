//! One scrape of `/metrics`: every figure of the groups switched on, read from the services
//! and written as one document.
//!
//! A scrape runs as blocking work (it may read stream states for parked counts). It takes each
//! service's lock once and briefly; it never waits for a commit. Documents are kept for
//! [`CACHE_FOR`] (as KurrentDB does), so many scrapers cost one. The scrape-time memory holds
//! what a gauge needs across scrapes: when each status was last seen, the CPU time of the last
//! sample, and the leader's positions over time (for the lag in seconds).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::groups::CHECKPOINTS;
use super::text::{Exposition, Format, Type};
use super::{Activity, Outcome};
use crate::cluster::core::VNodeState;
use crate::env::OsStats;
use crate::node::Node;

/// How long a document is served again before a new scrape.
pub const CACHE_FOR: Duration = Duration::from_secs(1);
/// Leader positions remembered for the lag in seconds (one per scrape).
const POSITIONS_KEPT: usize = 4096;

/// Every state a node can be in, for `node_state` (each has a series, 1 for the current).
pub const STATES: [VNodeState; 12] = [
    VNodeState::Initializing,
    VNodeState::Unknown,
    VNodeState::PreReplica,
    VNodeState::CatchingUp,
    VNodeState::Slave,
    VNodeState::PreMaster,
    VNodeState::Master,
    VNodeState::ResigningLeader,
    VNodeState::ReadOnlyLeaderless,
    VNodeState::PreReadOnlyReplica,
    VNodeState::ReadOnlyReplica,
    VNodeState::ShuttingDown,
];

/// What scrapes remember (see the module doc).
#[derive(Default)]
pub struct Memory {
    /// Per status name ("Node", "Index", "Scavenge"): each status with the wall-clock second it
    /// was last seen.
    statuses: BTreeMap<&'static str, BTreeMap<&'static str, i64>>,
    /// (monotonic time, CPU seconds) at the last scrape.
    cpu: Option<(Duration, f64)>,
    /// (monotonic time, the leader's log end) at each scrape, oldest first.
    positions: VecDeque<(Duration, u64)>,
    /// The last document.
    cached: Option<Cached>,
}

/// What a scrape reads from the operating system (zeros in simulation).
pub struct Sample {
    /// Process and system figures.
    pub os: OsStats,
    /// Total and available bytes of the database's drive.
    pub space: Option<(u64, u64)>,
}

/// The document for `format` (gzip-compressed when `gzip`): the cached one when it is fresh,
/// else a new scrape. Each is compressed at most once per scrape.
pub fn document(node: &Node, format: Format, gzip: bool) -> bytes::Bytes {
    let m = node.metrics();
    let now = node.env().clock.monotonic();
    let fresh = {
        let memory = lock(&m.memory);
        memory.cached.as_ref().filter(|c| c.format == format && now.saturating_sub(c.at) < CACHE_FOR).cloned()
    };
    let mut doc = match fresh {
        Some(doc) => doc,
        None => {
            let sample =
                Sample { os: node.env().rt.os_stats(), space: node.env().disk.space(&node.config().db) };
            let text = bytes::Bytes::from(scrape(node, format, &sample, now));
            Cached { at: now, format, text, gzipped: None }
        }
    };
    let out = if gzip {
        match &doc.gzipped {
            Some(z) => z.clone(),
            None => {
                let z = compress(&doc.text);
                doc.gzipped = Some(z.clone());
                z
            }
        }
    } else {
        doc.text.clone()
    };
    lock(&m.memory).cached = Some(doc);
    out
}

/// `text` compressed with gzip at the fastest level (a metrics document is repetitive: about a
/// tenth of its size).
fn compress(text: &[u8]) -> bytes::Bytes {
    use std::io::Write;
    let mut z =
        flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 8), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = z.write_all(text);
    bytes::Bytes::from(z.finish().unwrap_or_default())
}

/// A scraped document, kept for [`CACHE_FOR`].
#[derive(Clone)]
pub(crate) struct Cached {
    at: Duration,
    format: Format,
    text: bytes::Bytes,
    gzipped: Option<bytes::Bytes>,
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn get(a: &AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Writes every group switched on.
pub fn scrape(node: &Node, format: Format, sample: &Sample, now: Duration) -> String {
    let m = node.metrics();
    let g = &m.groups;
    let room = lock(&m.memory).cached.as_ref().map_or(16 << 10, |c| c.text.len() + c.text.len() / 8);
    let mut d = Exposition::with_capacity(m.naming, format, room);
    let wall = node.env().clock.wall_micros().div_euclid(1_000_000);
    let state = crate::http::cluster::node_state(node);
    let status = node.cluster().map(|c| c.status());
    let store = node.store();
    let log = store.log();
    let stats = &store.stats;

    // Statuses: the current one is stamped now; the others keep when they were last seen.
    {
        let mut memory = lock(&m.memory);
        let mut current: Vec<(&'static str, &'static str)> = Vec::new();
        if g.node_status {
            current.push(("Node", state.name()));
        }
        if g.index_status {
            current.push(("Index", "Idle"));
        }
        if g.scavenge_status {
            current.push(("Scavenge", node.scavenger().phase()));
        }
        for (name, st) in current {
            memory.statuses.entry(name).or_default().insert(st, wall);
        }
        if !memory.statuses.is_empty() {
            let mut f = d.family(
                "statuses",
                None,
                Type::Gauge,
                "When (unix seconds) each part of the node was last seen in each status; the newest is its status now",
            );
            for (name, all) in &memory.statuses {
                for (st, at) in all {
                    f.sample(&[("name", name), ("status", st)], *at);
                }
            }
        }
    }
    if g.node_status {
        let mut f = d.family(
            "node_state",
            None,
            Type::Gauge,
            "1 for the state this node is in (v5 names), 0 for the others",
        );
        for s in STATES {
            f.sample(&[("state", s.name())], s == state);
        }
        let (ready, _) = crate::http::node_info::readiness(node);
        d.family(
            "node_ready",
            None,
            Type::Gauge,
            "1 when the node serves its role (as /health/ready answers 200)",
        )
        .sample(&[], ready);
        let term = status.as_ref().map_or(0, |s| s.term);
        d.family(
            "cluster_term",
            None,
            Type::Gauge,
            "The cluster term (election round) this node is in (0 on a single node)",
        )
        .sample(&[], term);
    }
    if g.elections {
        let e = status.as_ref().map(|s| s.elections).unwrap_or_default();
        d.family(
            "elections_count",
            None,
            Type::Counter,
            "Elections this node saw completed: a leader became known for a newer term",
        )
        .sample(&[], e.completed);
        d.family("elections_started", None, Type::Counter, "Times this node stood as a candidate")
            .sample(&[], e.started);
        d.family("elections_won", None, Type::Counter, "Times this node was elected leader")
            .sample(&[], e.won);
    }

    // Checkpoints and replication.
    let cp = &log.checkpoints;
    let values: [i64; 7] = [
        cp.writer.read(),
        cp.chaser.read(),
        cp.epoch.read(),
        store.index().stats().checkpoint as i64,
        cp.proposal.read(),
        cp.truncate.read(),
        log.committed() as i64,
    ];
    if g.checkpoints.iter().any(|on| *on) {
        let mut f = d.family(
            "checkpoints",
            None,
            Type::Gauge,
            "Log positions (bytes): writer (durable end), chaser, epoch (last epoch record), index, proposal (last election proposal), truncate (-1 unless a restore asks), replication (committed: held by a quorum)",
        );
        for (i, name) in CHECKPOINTS.iter().enumerate() {
            if g.checkpoints[i] {
                f.sample(&[("name", name), ("read", "non-flushed")], values[i]);
            }
        }
    }
    if g.replication {
        replication_lag(node, &mut d, status.as_ref(), now);
    }

    // Events and bytes.
    if g.events.iter().any(|on| *on) {
        let replica = node.cluster().map(|c| c.replica().clone());
        // (on, activity, source, [events, bytes])
        type Row<'a> = (bool, &'a str, &'a str, [Option<&'a AtomicU64>; 2]);
        let http = |a: Activity| [Some(&m.http_events[a as usize]), Some(&m.http_bytes[a as usize])];
        let replicated = replica.as_ref().map(|r| &r.events_written);
        let rows: [Row; 3] = [
            (g.events[0], "read", "http", http(Activity::Read)),
            (g.events[1], "written", "http", http(Activity::Append)),
            (g.events[1], "written", "replication", [0, 1].map(|i| replicated.map(|w| &w[i]))),
        ];
        let families = [
            (
                "io_events",
                "Events read and written, by source: http (client requests), replication (the leader's events a follower wrote)",
            ),
            ("io_bytes", "Bytes of event data and metadata read and written, by source"),
        ];
        for (k, (name, help)) in families.into_iter().enumerate() {
            let mut f = d.family(name, None, Type::Counter, help);
            for (on, activity, source, counters) in &rows {
                if *on {
                    f.sample(&[("activity", activity), ("source", source)], counters[k].map_or(0, get));
                }
            }
        }
    }
    if g.http {
        let mut f = d.family(
            "http_method_duration_seconds",
            None,
            Type::Histogram,
            "Duration of HTTP reads (stream and $all pages, single events) and appends, by outcome",
        );
        for (a, activity) in [(Activity::Read, "read"), (Activity::Append, "append")] {
            for (o, outcome) in [(Outcome::Successful, "successful"), (Outcome::Failed, "failed")] {
                let h = m.http[a as usize][o as usize].snapshot();
                f.histogram(&[("activity", activity), ("status", outcome)], &h);
            }
        }
    }

    // The writer.
    if g.writer[0] {
        let s = &stats.flush_size_max;
        d.family(
            "writer_flush_size_max",
            None,
            Type::Gauge,
            "Most operations in one group commit over the recent window",
        )
        .sample(&[("range", &s.range())], s.max(now));
        d.family(
            "writer_group_commit_events",
            None,
            Type::Histogram,
            "Operations (appends, deletes) per group commit",
        )
        .histogram(&[], &stats.group_size.snapshot());
    }
    if g.writer[1] {
        let s = &stats.flush_duration_max;
        d.family(
            "writer_flush_duration_max_seconds",
            None,
            Type::Gauge,
            "Longest group commit over the recent window",
        )
        .sample(&[("range", &s.range())], secs(s.max(now)));
        d.family(
            "writer_flush_duration_seconds",
            None,
            Type::Histogram,
            "Duration of a group commit: staging, writing and syncing the records, moving writer.chk",
        )
        .histogram(&[], &stats.flush_duration.snapshot());
        d.family(
            "writer_fsync_duration_seconds",
            None,
            Type::Histogram,
            "Duration of a group commit's data phase: writing its records out and syncing them to disk",
        )
        .histogram(&[], &log.data_phase.snapshot());
    }

    // Queues.
    let mut lanes: Vec<Arc<super::lane::LaneStats>> = store.lanes.to_vec();
    if let Some(c) = node.cluster() {
        lanes.push(c.release_stats.clone());
        lanes.push(c.replica().write_stats.clone());
    }
    if g.queues[0] {
        let mut f = d.family("queue_length", None, Type::Gauge, "Jobs waiting in each of the node's queues");
        for l in &lanes {
            f.sample(&[("queue", l.name)], get(&l.queued));
        }
    }
    if g.queues[1] {
        let mut f = d.family("queue_busy_seconds", None, Type::Counter, "Time each queue spent running jobs");
        for l in &lanes {
            f.sample(&[("queue", l.name)], secs(get(&l.busy_ns)));
        }
    }
    if g.queues[2] {
        let mut f = d.family(
            "queue_queueing_duration_max_seconds",
            None,
            Type::Gauge,
            "Longest wait of a job in each queue before it started, over the recent window",
        );
        for l in &lanes {
            f.sample(&[("name", l.name), ("range", &l.wait_max.range())], secs(l.wait_max.max(now)));
        }
    }

    // Caches and the index.
    if g.stream_info_cache {
        d.family(
            "cache_hits_misses",
            None,
            Type::Counter,
            "Lookups of the stream-info cache (stream states: last event number, metadata) that hit and missed",
        )
        .sample(&[("cache", "stream-info"), ("kind", "hits")], get(&stats.cache_hits))
        .sample(&[("cache", "stream-info"), ("kind", "misses")], get(&stats.cache_misses));
    }
    if g.cache_resources {
        let (entries, capacity) = store.stream_cache_usage();
        d.family(
            "cache_resources_entries",
            None,
            Type::Gauge,
            "Entries held by the stream-info cache, and its capacity",
        )
        .sample(&[("cache", "stream-info"), ("kind", "count")], entries as u64)
        .sample(&[("cache", "stream-info"), ("kind", "capacity")], capacity as u64);
    }
    if g.index {
        let idx = store.index().stats();
        d.family(
            "index_entries",
            None,
            Type::Gauge,
            "Index entries in memory (memtable) and in tables on disk",
        )
        .sample(&[("kind", "memtable")], idx.memtable_entries as u64)
        .sample(&[("kind", "tables")], idx.table_entries);
        d.family("index_tables", None, Type::Gauge, "Index tables on disk").sample(&[], idx.tables as u64);
    }
    if g.connections {
        d.family("kestrel_connections", None, Type::Gauge, "Open HTTP connections")
            .sample(&[], get(&m.connections));
    }

    if g.subscriptions {
        subscriptions(node, &mut d);
    }
    if g.projections {
        projections(node, &mut d);
    }
    if g.scavenges {
        let sc = node.scavenger();
        let p = &sc.progress;
        d.family("scavenge_running", None, Type::Gauge, "1 while a scavenge runs on this node")
            .sample(&[], sc.current().is_some());
        let mut f =
            d.family("scavenge_runs", None, Type::Counter, "Scavenges that ended on this node, by result");
        for (i, r) in ["success", "stopped", "failed"].iter().enumerate() {
            f.sample(&[("result", r)], get(&p.results[i]));
        }
        d.family("scavenge_chunks_scavenged", None, Type::Counter, "Chunks rewritten by scavenges")
            .sample(&[], get(&p.chunks_scavenged));
        d.family("scavenge_chunks_merged", None, Type::Counter, "Chunk files merged away by scavenges")
            .sample(&[], get(&p.chunks_merged));
        d.family("scavenge_reclaimed_bytes", None, Type::Counter, "Disk space reclaimed by scavenges")
            .sample(&[], get(&p.space_saved));
        d.family("scavenge_index_entries_removed", None, Type::Counter, "Index entries scavenges removed")
            .sample(&[], get(&p.index_entries_removed));
    }
    if g.redactions {
        d.family("redactions", None, Type::Counter, "Chunk switches the redaction tool asked for, by result")
            .sample(&[("result", "success")], get(&m.redactions[0]))
            .sample(&[("result", "failed")], get(&m.redactions[1]));
    }
    if g.tls {
        // Declared without TLS too (no samples), so dashboards and rules find the family.
        let tls = node.tls();
        let mut f = d.family(
            "tls_certificate_expiry_timestamp_seconds",
            None,
            Type::Gauge,
            "When (unix seconds) the node certificate in force expires (no sample without TLS)",
        );
        if let Some(t) = tls {
            f.sample(&[], t.current().set.about.not_after);
        }
        let mut f = d.family(
            "tls_last_reload_success",
            None,
            Type::Gauge,
            "1 when the last certificate reload succeeded or none ran, 0 when it failed (no sample without TLS)",
        );
        if let Some(t) = tls {
            f.sample(&[], t.last_reload_ok.load(Ordering::Relaxed));
        }
        let mut f = d.family(
            "tls_reloads",
            None,
            Type::Counter,
            "Certificate reloads, by result (no sample without TLS)",
        );
        if let Some(t) = tls {
            f.sample(&[("result", "success")], get(&t.reloads[0]))
                .sample(&[("result", "failed")], get(&t.reloads[1]));
        }
    }
    if g.process {
        process(node, &mut d, sample, now);
    }
    if g.system {
        let os = &sample.os;
        let mut f = d.family("sys_load_avg", None, Type::Gauge, "The system's load average");
        for (i, p) in ["1m", "5m", "15m"].iter().enumerate() {
            f.sample(&[("period", p)], os.load_avg[i]);
        }
        d.family("sys_mem_bytes", None, Type::Gauge, "The system's available and total memory")
            .sample(&[("kind", "free")], os.sys_free_bytes)
            .sample(&[("kind", "total")], os.sys_total_bytes);
        if let Some((total, avail)) = sample.space {
            let disk = node.config().db.display().to_string();
            d.family(
                "sys_disk_bytes",
                None,
                Type::Gauge,
                "Used, available and total bytes of the database's drive",
            )
            .sample(&[("disk", &disk), ("kind", "used")], total.saturating_sub(avail))
            .sample(&[("disk", &disk), ("kind", "available")], avail)
            .sample(&[("disk", &disk), ("kind", "total")], total);
        }
    }
    d.finish()
}

/// Each member's lag behind the leader's log end, in bytes and in seconds (how long ago the
/// leader's end was where the member is now, at the resolution of the scrapes).
fn replication_lag(
    node: &Node,
    d: &mut Exposition,
    status: Option<&crate::cluster::shell::Status>,
    now: Duration,
) {
    let (bytes, seconds) = status.map(|st| lags(node, st, now)).unwrap_or_default();
    let mut f = d.family(
        "replication_lag_bytes",
        None,
        Type::Gauge,
        "How far each cluster member's durable log end is behind the leader's, in bytes (no sample on a single node or without a leader)",
    );
    for (name, b) in &bytes {
        f.sample(&[("member", name)], *b);
    }
    let mut f = d.family(
        "replication_lag_seconds",
        None,
        Type::Gauge,
        "How long ago the leader's log end was where each member's is now (0 when caught up; resolution: the scrape interval)",
    );
    for (name, s) in &seconds {
        f.sample(&[("member", name)], *s);
    }
}

/// Each member's lag in bytes and in seconds, when a leader is known.
#[allow(clippy::type_complexity)]
fn lags(
    node: &Node,
    st: &crate::cluster::shell::Status,
    now: Duration,
) -> (Vec<(String, u64)>, Vec<(String, f64)>) {
    let leader_end = if st.state == VNodeState::Master {
        Some(node.store().log().durable())
    } else {
        st.members.iter().find_map(|(_, v, alive)| {
            v.as_ref().filter(|v| *alive && v.state == VNodeState::Master).map(|v| v.durable)
        })
    };
    let Some(end) = leader_end else { return Default::default() };
    let mut memory = lock(&node.metrics().memory);
    let positions = &mut memory.positions;
    if positions.back().is_none_or(|(_, p)| *p != end) {
        positions.push_back((now, end));
    }
    while positions.len() > POSITIONS_KEPT {
        positions.pop_front();
    }
    let mut bytes = Vec::new();
    let mut seconds = Vec::new();
    for (id, view, _) in &st.members {
        let Some(v) = view else { continue };
        let name = v.http.map_or_else(|| id.to_string(), |h| h.to_string());
        let behind = end.saturating_sub(v.durable);
        // The first time the leader's end passed the member's position: the member lacks what
        // was written since then.
        let since = positions.iter().find(|(_, p)| *p > v.durable).map(|(t, _)| *t);
        let lag = if behind == 0 { 0.0 } else { since.map_or(0.0, |t| now.saturating_sub(t).as_secs_f64()) };
        bytes.push((name.clone(), behind));
        seconds.push((name, lag));
    }
    (bytes, seconds)
}

fn subscriptions(node: &Node, d: &mut Exposition) {
    let subs = node.subscriptions();
    // Groups are served where writes are taken; elsewhere the families are declared empty.
    let groups = subs.groups(None, false).unwrap_or_default();
    let rows: Vec<_> = groups
        .iter()
        .map(|g| {
            let parked = subs.parked_now(&g.stream, &g.group).unwrap_or(0);
            (g, parked)
        })
        .collect();
    type Pick = fn(&crate::subscriptions::GroupView, i64) -> crate::metrics::text::Num;
    let families: [(&str, Type, &str, Pick); 8] = [
        ("persistent_sub_connections", Type::Gauge, "Consumers connected to the group", |g, _| {
            (g.snapshot.consumers.len() as u64).into()
        }),
        (
            "persistent_sub_in_flight_messages",
            Type::Gauge,
            "Messages sent to consumers and not yet acknowledged",
            |g, _| (g.snapshot.in_flight as u64).into(),
        ),
        (
            "persistent_sub_parked_messages",
            Type::Gauge,
            "Messages in the group's parked stream, not yet replayed",
            |_, p| p.into(),
        ),
        (
            "persistent_sub_last_known_event_number",
            Type::Gauge,
            "The last event number of the stream the group knows",
            |g, _| g.snapshot.last_known.into(),
        ),
        (
            "persistent_sub_checkpointed_event_number",
            Type::Gauge,
            "The event number of the group's last checkpoint (lag = last known - checkpointed)",
            |g, _| g.snapshot.last_processed.into(),
        ),
        ("persistent_sub_items_processed", Type::Counter, "Messages acknowledged or skipped", |g, _| {
            g.snapshot.figures.processed.into()
        }),
        (
            "persistent_sub_retried_messages",
            Type::Counter,
            "Messages sent again (nack with retry, time-out, consumer gone)",
            |g, _| g.snapshot.figures.retried.into(),
        ),
        (
            "persistent_sub_park_message_requests",
            Type::Counter,
            "Messages parked (nack with park, or retries exhausted)",
            |g, _| g.snapshot.figures.parked.into(),
        ),
    ];
    for (name, ty, help, pick) in families {
        let mut f = d.family(name, None, ty, help);
        for (g, parked) in &rows {
            f.sample(&[("event_stream_id", &g.stream), ("group_name", &g.group)], pick(g, *parked));
        }
    }
}

fn projections(node: &Node, d: &mut Exposition) {
    // Projections run where writes are taken; elsewhere the families are declared empty.
    let list = node.projections().list().unwrap_or_default();
    use crate::projections::RunState;
    let mut f = d.family(
        "projection_events_processed_after_restart",
        None,
        Type::Counter,
        "Events a projection processed since it last started",
    );
    for p in &list {
        f.sample(&[("projection", &p.def.name)], p.processed);
    }
    let mut f = d.family(
        "projection_progress",
        None,
        Type::Gauge,
        "How far through the log a projection is (0 to 1)",
    );
    for p in &list {
        f.sample(&[("projection", &p.def.name)], (p.progress().max(0.0) / 100.0).min(1.0));
    }
    let mut f = d.family("projection_running", None, Type::Gauge, "1 while a projection runs");
    for p in &list {
        f.sample(&[("projection", &p.def.name)], p.state == RunState::Running);
    }
    let mut f =
        d.family("projection_status", None, Type::Gauge, "1 for a projection's status, 0 for the others");
    for p in &list {
        for (st, name) in [
            (RunState::Running, "Running"),
            (RunState::Stopped, "Stopped"),
            (RunState::Faulted, "Faulted"),
            (RunState::Completed, "Completed"),
            (RunState::Aborted, "Aborted"),
        ] {
            f.sample(&[("projection", &p.def.name), ("status", name)], p.state == st);
        }
    }
    let mut f = d.family(
        "projection_position_lag_bytes",
        None,
        Type::Gauge,
        "How far a projection's position is behind the committed log end, in bytes",
    );
    for p in &list {
        f.sample(&[("projection", &p.def.name)], p.committed.saturating_sub(p.position.unwrap_or(0)));
    }
    let mut f = d.family(
        "projection_state_size_bytes",
        None,
        Type::Gauge,
        "Bytes of a projection's state (its root partition) at its last checkpoint",
    );
    for p in &list {
        f.sample(&[("projection", &p.def.name)], p.state_bytes);
    }
}

fn process(node: &Node, d: &mut Exposition, sample: &Sample, now: Duration) {
    let os = &sample.os;
    let cpu_pct = {
        let mut memory = lock(&node.metrics().memory);
        let pct = match memory.cpu {
            Some((at, cpu)) if now > at => {
                ((os.cpu_seconds - cpu) / (now - at).as_secs_f64() * 100.0).max(0.0)
            }
            _ => 0.0,
        };
        memory.cpu = Some((now, os.cpu_seconds));
        pct
    };
    let up = now.as_secs_f64();
    let pid = os.pid.to_string();
    d.family("proc_up_time_seconds", Some("proc_up_time"), Type::Counter, "Seconds since the node started")
        .sample(&[("pid", &pid)], up);
    d.family(
        "proc_cpu",
        None,
        Type::Gauge,
        "CPU used by the process since the previous scrape, in percent of one core",
    )
    .sample(&[], cpu_pct);
    d.family("proc_threads", None, Type::Gauge, "Threads of the process").sample(&[], os.threads);
    d.family(
        "proc_mem_bytes",
        None,
        Type::Gauge,
        "Memory of the process: resident (working set) and virtual",
    )
    .sample(&[("kind", "working-set")], os.rss_bytes)
    .sample(&[("kind", "virtual-bytes")], os.virtual_bytes);
    d.family("disk_io_bytes", None, Type::Counter, "Bytes the process read from and wrote to storage")
        .sample(&[("activity", "read")], os.io_read_bytes)
        .sample(&[("activity", "written")], os.io_write_bytes);
    d.family("disk_io_operations", None, Type::Counter, "Read and write calls of the process")
        .sample(&[("activity", "read")], os.io_read_ops)
        .sample(&[("activity", "written")], os.io_write_ops);
    d.family("process_cpu_seconds", None, Type::Counter, "User and system CPU time of the process")
        .sample(&[], os.cpu_seconds);
    d.family("process_resident_memory_bytes", None, Type::Gauge, "Resident memory of the process")
        .sample(&[], os.rss_bytes);
    d.family("process_open_fds", None, Type::Gauge, "Open file descriptors of the process")
        .sample(&[], os.open_fds);
}
