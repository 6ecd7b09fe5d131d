//! `GET /stats[/path]`: process, system, drive and store figures
//! under v5's key names, as nested objects by default. Store figures are read on every request (they are
//! counters in memory); process, system and drive figures cost system calls, so they are sampled
//! at most once a second, and rates (CPU) span the last two samples.
//!
//! Process and system figures come from the environment ([`crate::env::Runtime::os_stats`];
//! zeros in simulation), writer and read-index figures from the store, drive space from the disk,
//! persistent subscription totals (`es.persistentSubscriptions`) from the service.
//! `?group=false` flattens the tree into `a-b-c` keys; `?metadata=true` wraps each figure as
//! `{value, category, title, drawChart}`.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde_json::{json, Map, Value};

use super::node_info::document;
use super::reply::Reply;
use super::request::Req;
use super::text::iso8601;
use super::Api;
use crate::env::OsStats;

/// How long a sample of the system figures is served before it is taken again.
const REFRESH: Duration = Duration::from_secs(1);

/// The figures that cost system calls, taken together.
#[derive(Clone)]
struct Sample {
    /// When (monotonic).
    at: Duration,
    os: OsStats,
    /// Total and available bytes of the database's drive.
    space: Option<(u64, u64)>,
}

/// Samples of the system figures for `/stats`.
#[derive(Default)]
pub struct Stats {
    /// The latest sample and the one before it.
    last: Mutex<Option<(Sample, Option<Sample>)>>,
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        (part / whole * 100.0 * 100.0).round() / 100.0
    } else {
        0.0
    }
}

fn build(api: &Api, sample: &Sample, prev: Option<&Sample>) -> Value {
    let node = &api.node;
    let s = &node.store().stats;
    let (os, now) = (&sample.os, sample.at);
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let (since, cpu_before, busy_before, total_before) = match prev {
        Some(p) => (now.saturating_sub(p.at), p.os.cpu_seconds, p.os.sys_busy_ticks, p.os.sys_total_ticks),
        None => (now, 0.0, 0, 0),
    };
    let cpu = pct(os.cpu_seconds - cpu_before, since.as_secs_f64());
    let sys_cpu = pct(
        os.sys_busy_ticks.saturating_sub(busy_before) as f64,
        os.sys_total_ticks.saturating_sub(total_before) as f64,
    );
    let uptime = now.as_secs_f64().max(1e-3);
    let flushes_done = get(&s.flushes);
    let flushes = flushes_done.max(1);
    let ms = |ns: u64| ns as f64 / 1e6;
    let log = node.store().log();
    let commits = log.commit_stats();
    let idx = node.store().index().stats();
    let subs = node.subscriptions().totals();
    let mut drive = Map::new();
    if let Some((total, avail)) = sample.space {
        let used = total.saturating_sub(avail);
        drive.insert(
            node.config().db.display().to_string(),
            json!({
                "availableBytes": avail,
                "totalBytes": total,
                "usage": format!("{}%", (used * 100).checked_div(total).unwrap_or(0)),
                "usedBytes": used,
            }),
        );
    }
    json!({
        "proc": {
            "startTime": iso8601(node.started_wall_us()),
            "id": os.pid,
            "mem": os.rss_bytes,
            "cpu": cpu,
            "cpuScaled": (cpu / f64::from(os.cpus.max(1)) * 100.0).round() / 100.0,
            "threadsCount": os.threads,
            "contentionsRate": 0.0,
            "thrownExceptionsRate": 0.0,
            "gc": {
                "allocationSpeed": 0.0, "gen0ItemsCount": 0, "gen0Size": 0, "gen1ItemsCount": 0, "gen1Size": 0,
                "gen2ItemsCount": 0, "gen2Size": 0, "largeHeapSize": 0, "timeInGc": 0.0, "totalBytesInHeaps": 0
            },
            "diskIo": {
                "readBytes": os.io_read_bytes, "writtenBytes": os.io_write_bytes,
                "readOps": os.io_read_ops, "writeOps": os.io_write_ops
            },
            "tcp": {
                "connections": node.metrics().connections.load(Ordering::Relaxed),
                "receivingSpeed": "0B/s", "sendingSpeed": "0B/s", "inSend": 0, "measureTime": "00:00:01",
                "pendingReceived": 0, "pendingSend": 0, "receivedBytesSinceLastRun": 0, "receivedBytesTotal": 0,
                "sentBytesSinceLastRun": 0, "sentBytesTotal": 0
            }
        },
        "sys": { "cpu": sys_cpu, "freeMem": os.sys_free_bytes, "drive": drive },
        "es": {
            "checksum": log.checkpoints.writer.read(),
            "checksumNonFlushed": log.committed(),
            "queue": {
                "storageWriterQueue": {
                    "queueName": "StorageWriterQueue", "groupName": "",
                    "avgItemsPerSecond": (get(&s.total_flush_size) as f64 / uptime) as u64,
                    "avgProcessingTime": get(&s.total_flush_us) as f64 / flushes as f64 / 1000.0,
                    "currentIdleTime": "", "currentItemProcessingTime": "",
                    "idleTimePercent": pct(uptime - get(&s.total_flush_us) as f64 / 1e6, uptime).max(0.0),
                    "length": get(&s.queued), "lengthCurrentTryPeak": get(&s.queued),
                    "lengthLifetimePeak": get(&s.max_flush_size),
                    "totalItemsProcessed": get(&s.total_flush_size),
                    "inProgressMessage": "<none>", "lastProcessedMessage": "WriteOp"
                }
            },
            "writer": {
                "lastFlushSize": get(&s.last_flush_size),
                "lastFlushDelayMs": get(&s.last_flush_us) as f64 / 1000.0,
                "meanFlushSize": get(&s.total_flush_size) as f64 / flushes as f64,
                "meanFlushDelayMs": get(&s.total_flush_us) as f64 / flushes as f64 / 1000.0,
                "maxFlushSize": get(&s.max_flush_size),
                "maxFlushDelayMs": get(&s.max_flush_us) as f64 / 1000.0,
                "queuedFlushMessages": get(&s.queued),
                "fsyncs": commits.syncs,
                // Where the group commits' time went, summed over all of them: staging, the data
                // and its sync, writer.chk and its sync, publishing (index, caches, answers).
                "totalFlushes": flushes_done,
                "totalStageMs": ms(get(&s.total_stage_ns)),
                "totalDataSyncMs": commits.data.as_secs_f64() * 1000.0,
                "totalCheckpointSyncMs": commits.checkpoint.as_secs_f64() * 1000.0,
                "totalPublishMs": ms(get(&s.total_publish_ns))
            },
            "readIndex": {
                "cachedRecord": 0,
                "notCachedRecord": get(&s.records_read),
                "cachedStreamInfo": get(&s.cache_hits),
                "notCachedStreamInfo": get(&s.cache_misses),
                "cachedTransInfo": 0,
                "notCachedTransInfo": 0,
                "hashCollisions": get(&s.hash_collisions),
                "memTableEntries": idx.memtable_entries,
                "tables": idx.tables,
                "tableEntries": idx.table_entries,
                "memoryBytes": idx.memory_bytes
            },
            "persistentSubscriptions": {
                "running": node.subscriptions().running(),
                "groups": subs.groups,
                "connections": subs.consumers,
                "inFlightMessages": subs.in_flight,
                "totalItemsProcessed": subs.processed,
                "totalDelivered": subs.delivered,
                "totalRetried": subs.retried,
                "totalTimedOut": subs.timed_out,
                "totalParked": subs.parked
            }
        }
    })
}

fn flatten(prefix: &str, v: &Value, out: &mut Map<String, Value>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}-{k}") };
                flatten(&key, x, out);
            }
        }
        other => {
            out.insert(prefix.to_owned(), other.clone());
        }
    }
}

fn with_metadata(category: &str, key: &str, v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| {
                    (k.clone(), with_metadata(if category.is_empty() { k } else { category }, k, x))
                })
                .collect(),
        ),
        leaf => json!({"value": leaf, "category": category, "title": key, "drawChart": leaf.is_number()}),
    }
}

impl Stats {
    async fn current(&self, api: &Arc<Api>) -> Value {
        let env = &api.node.env();
        let now = env.clock.monotonic();
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (sample, prev) = match last {
            Some((latest, prev)) if now.saturating_sub(latest.at) < REFRESH => (latest, prev),
            last => {
                let a = api.clone();
                let sample = env
                    .blocking(move || {
                        let node = &a.node;
                        let os = node.env().rt.os_stats();
                        Sample { at: now, os, space: node.env().disk.space(&node.config().db) }
                    })
                    .await;
                let prev = last.map(|(latest, _)| latest);
                *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((sample.clone(), prev.clone()));
                (sample, prev)
            }
        };
        build(api, &sample, prev.as_ref())
    }
}

/// `GET /stats` and `GET /stats/{path…}`.
pub async fn stats(api: &Arc<Api>, req: &Req, path: &[String]) -> Reply {
    let group = req.query("group").is_none_or(|g| !g.eq_ignore_ascii_case("false"));
    let meta = req.query("metadata").is_some_and(|m| m.eq_ignore_ascii_case("true"));
    if !path.is_empty() && !group {
        return Reply::bad_request("A stats path cannot be combined with group=false");
    }
    if matches!(path, [p] if p == "replication" || p == "tcp") {
        return document(req, "stats", &json!([])).header("cache-control", "max-age=1, public");
    }
    let tree = api.stats.current(api).await;
    let mut v: &Value = &tree;
    for seg in path {
        match v.get(seg.as_str()) {
            Some(x) => v = x,
            None => return Reply::status(StatusCode::NOT_FOUND, "Not Found"),
        }
    }
    let mut out =
        if meta { with_metadata(path.first().map(String::as_str).unwrap_or(""), "", v) } else { v.clone() };
    if !group {
        let mut flat = Map::new();
        flatten("", &out, &mut flat);
        out = Value::Object(flat);
    }
    document(req, "stats", &out).header("cache-control", "max-age=1, public")
}
