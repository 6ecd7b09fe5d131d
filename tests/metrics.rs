//! `GET /metrics` on a real node: every group the node serves is present with its labels and
//! moves with the workload that should move it (appends, reads, a scavenge, a nack, a
//! projection); the output passes `promtool check metrics` under both namings (CI installs
//! Debian's `prometheus` package for it), OpenMetrics is served when asked for, and the Grafana
//! dashboard and alerting rules in `deploy/` name only metrics the node serves.

// Test code reads the deployed files and writes a metrics file directly.
#![allow(clippy::disallowed_methods)]

mod http_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use annal::config::RunProjections;
use http_support as support;
use support::{ADMIN, OPS};

const JSON: &str = "application/json";
const COMPETING: (&str, &str) = ("accept", "application/vnd.eventstore.competingatom+json");

/// A series' labels and value.
type Series = (BTreeMap<String, String>, f64);

/// A scrape: samples by name, each with its labels; the families' declared types.
#[derive(Debug, Default)]
struct Scrape {
    samples: BTreeMap<String, Vec<Series>>,
    types: BTreeMap<String, String>,
    text: String,
}

impl Scrape {
    /// Parses Prometheus text, checking that each sample belongs to a family declared (with
    /// help and type) before it.
    fn parse(text: &str) -> Scrape {
        let mut s = Scrape { text: text.to_owned(), ..Scrape::default() };
        let mut helped = BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap();
                assert!(!help.trim().is_empty(), "{name} has an empty help text");
                helped.insert(name.to_owned());
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').unwrap();
                assert!(helped.contains(name), "{name}: TYPE before HELP");
                assert!(s.types.insert(name.to_owned(), ty.to_owned()).is_none(), "{name} declared twice");
            } else if line.starts_with('#') || line.is_empty() {
                continue;
            } else {
                let (series, value) = line.rsplit_once(' ').unwrap();
                let (name, labels) = match series.split_once('{') {
                    Some((n, l)) => (n, l.strip_suffix('}').unwrap()),
                    None => (series, ""),
                };
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|x| {
                        name.strip_suffix(x).filter(|f| s.types.get(*f).is_some_and(|t| t == "histogram"))
                    })
                    .unwrap_or(name);
                assert!(s.types.contains_key(family), "sample {name} has no declared family");
                let mut map = BTreeMap::new();
                let mut rest = labels;
                while !rest.is_empty() {
                    let (k, after) = rest.split_once("=\"").unwrap();
                    let end = after.find("\",").map(|i| (i, i + 2)).unwrap_or((after.len() - 1, after.len()));
                    map.insert(k.to_owned(), after[..end.0].to_owned());
                    rest = &after[end.1..];
                }
                let v = match value {
                    "+Inf" => f64::INFINITY,
                    "-Inf" => f64::NEG_INFINITY,
                    v => v.parse().unwrap_or_else(|_| panic!("{line}: not a number")),
                };
                s.samples.entry(name.to_owned()).or_default().push((map, v));
            }
        }
        s
    }

    /// [`Scrape::value`], `None` when no series matches.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let series = self.samples.get(name)?;
        let matching = series
            .iter()
            .filter(|(l, _)| labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)));
        matching.map(|(_, v)| *v).reduce(|a, b| a + b)
    }

    /// The sum of `name`'s samples whose labels include `labels` (panics when none matches).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let series = self.samples.get(name).unwrap_or_else(|| panic!("no samples of {name}"));
        let matching: Vec<f64> = series
            .iter()
            .filter(|(l, _)| labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)))
            .map(|(_, v)| *v)
            .collect();
        assert!(!matching.is_empty(), "no {name} series with {labels:?}: {series:?}");
        matching.iter().sum()
    }

    /// Every name a query may use: families and sample names.
    fn names(&self) -> BTreeSet<String> {
        self.types.keys().chain(self.samples.keys()).cloned().collect()
    }
}

async fn scrape(s: &support::Server) -> Scrape {
    let r = s.get("/metrics", &[]).await;
    assert_eq!(r.status, 200, "{}", r.reason);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    Scrape::parse(&r.text())
}

/// Scrapes until `check` holds (documents are cached for a second; figures land shortly after
/// the requests that move them).
async fn scrape_until(s: &support::Server, what: &str, check: impl Fn(&Scrape) -> bool) -> Scrape {
    for _ in 0..240 {
        let m = scrape(s).await;
        if check(&m) {
            return m;
        }
        s.node.env().rt.sleep(Duration::from_millis(250)).await;
    }
    panic!("metrics never showed {what}");
}

async fn wait_scavenged(s: &support::Server) {
    for _ in 0..1200 {
        let r = s.get("/admin/scavenge/current", &[OPS]).await;
        if r.json()["scavengeId"] == "" {
            return;
        }
        s.node.env().rt.sleep(Duration::from_millis(50)).await;
    }
    panic!("the scavenge did not finish");
}

/// A node with projections, a small chunk size (so a scavenge has completed chunks to rewrite),
/// after a workload that touches every group.
async fn busy_node(tweak: impl FnOnce(&mut annal::config::Config)) -> (support::Server, Scrape) {
    let s = support::start_with(|c| {
        c.chunk_size = 64 * 1024;
        c.run_projections = RunProjections::All;
        tweak(c);
    })
    .await;
    let before = scrape(&s).await;
    for k in 0..4 {
        s.append_n(&format!("s{k}"), 0, 60).await;
    }
    assert_eq!(s.get("/streams/s2/0/forward/20", &[("accept", JSON)]).await.status, 200);
    assert_eq!(s.get("/streams/s2/3", &[("accept", JSON)]).await.status, 200);
    assert_eq!(s.get("/streams/nope/3", &[("accept", JSON)]).await.status, 404);
    let del = s.request("DELETE", "/streams/s1", &[("es-harddelete", "true")], b"").await;
    assert_eq!(del.status, 204);
    // A group, a message nacked for retry and one parked.
    let r = s.request("PUT", "/subscriptions/orders/g1", &[ADMIN, ("content-type", JSON)], b"{}").await;
    assert_eq!(r.status, 201, "{}", r.reason);
    s.append_n("orders", 0, 5).await;
    let page = s.get("/subscriptions/orders/g1/2", &[ADMIN, COMPETING]).await;
    assert_eq!(page.status, 200);
    let feed = page.json();
    let nack = |i: usize| {
        let links = feed["entries"][i]["links"].as_array().unwrap();
        let uri = links.iter().find(|l| l["relation"] == "nack").unwrap()["uri"].as_str().unwrap().to_owned();
        uri[uri.find("/subscriptions").unwrap()..].to_owned()
    };
    for (i, action) in [(0, "retry"), (1, "park")] {
        let r = s.request("POST", &format!("{}?action={action}", nack(i)), &[ADMIN], b"").await;
        assert_eq!(r.status, 202);
    }
    // A projection.
    let body = b"fromAll().when({$any: function(s, e) { s.n = (s.n || 0) + 1; return s; }, $init: function() { return {n: 0}; }})";
    let r =
        s.request("POST", "/projections/continuous?name=counter&type=JS&enabled=true", &[ADMIN], body).await;
    assert_eq!(r.status, 201, "{}", r.reason);
    // A scavenge.
    let r = s.post("/admin/scavenge", JSON, &[OPS], b"{}").await;
    assert_eq!(r.status, 200, "{}", r.reason);
    wait_scavenged(&s).await;
    (s, before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_group_is_served_and_moves_with_the_workload() {
    let (s, before) = busy_node(|_| {}).await;
    let m = scrape_until(&s, "the projection running and the retried message", |m| {
        m.get("kurrentdb_projection_running", &[("projection", "counter")]) == Some(1.0)
            && m.get("kurrentdb_persistent_sub_retried_messages_total", &[("group_name", "g1")]) >= Some(1.0)
            && m.get("kurrentdb_persistent_sub_parked_messages", &[("group_name", "g1")]) >= Some(1.0)
    })
    .await;
    let grew = |name: &str, labels: &[(&str, &str)]| {
        let (a, b) = (before.value(name, labels), m.value(name, labels));
        assert!(b > a, "{name}{labels:?} did not grow: {a} -> {b}");
    };
    // Events and bytes: 245 appended over HTTP, 21 read.
    let written = [("activity", "written"), ("source", "http")];
    assert_eq!(
        m.value("kurrentdb_io_events_total", &written) - before.value("kurrentdb_io_events_total", &written),
        245.0
    );
    assert!(m.value("kurrentdb_io_events_total", &[("activity", "read"), ("source", "http")]) >= 21.0);
    grew("kurrentdb_io_bytes_total", &written);
    assert_eq!(m.value("kurrentdb_io_events_total", &[("source", "replication")]), 0.0);
    // Request durations by outcome (the read of a missing stream failed).
    grew("kurrentdb_http_method_duration_seconds_count", &[("activity", "append"), ("status", "successful")]);
    assert!(
        m.value(
            "kurrentdb_http_method_duration_seconds_count",
            &[("activity", "read"), ("status", "failed")]
        ) >= 1.0
    );
    let buckets = &m.samples["kurrentdb_http_method_duration_seconds_bucket"];
    assert!(buckets.iter().any(|(l, _)| l.get("le").map(String::as_str) == Some("+Inf")));
    // The writer, its queues, the caches, the index.
    grew("kurrentdb_writer_group_commit_events_count", &[]);
    grew("kurrentdb_writer_flush_duration_seconds_count", &[]);
    grew("kurrentdb_writer_fsync_duration_seconds_count", &[]);
    assert!(m.value("kurrentdb_writer_flush_size_max", &[("range", "16-20 seconds")]) >= 1.0);
    grew("kurrentdb_queue_busy_seconds_total", &[("queue", "writer")]);
    assert_eq!(m.value("kurrentdb_queue_length", &[("queue", "writer")]), 0.0);
    m.value("kurrentdb_queue_queueing_duration_max_seconds", &[("name", "checkpoint")]);
    grew("kurrentdb_cache_hits_misses_total", &[("cache", "stream-info"), ("kind", "hits")]);
    assert!(m.value("kurrentdb_cache_resources_entries", &[("kind", "count")]) >= 1.0);
    assert!(
        m.value("kurrentdb_index_entries", &[]) >= 180.0,
        "the hard-deleted stream's 60 entries may be scavenged"
    );
    // Checkpoints and statuses.
    grew("kurrentdb_checkpoints", &[("name", "writer")]);
    assert_eq!(
        m.value("kurrentdb_checkpoints", &[("name", "writer")]),
        s.node.store().log().checkpoints.writer.read() as f64
    );
    assert_eq!(m.value("kurrentdb_checkpoints", &[("name", "truncate")]), -1.0);
    assert!(m.value("kurrentdb_statuses", &[("name", "Node"), ("status", "Master")]) > 1.7e9);
    assert!(m.value("kurrentdb_statuses", &[("name", "Scavenge"), ("status", "Idle")]) > 1.7e9);
    assert_eq!(m.value("kurrentdb_node_state", &[("state", "Master")]), 1.0);
    assert_eq!(m.value("kurrentdb_node_state", &[]), 1.0, "exactly one state is current");
    assert_eq!(m.value("kurrentdb_node_ready", &[]), 1.0);
    // The scavenge.
    assert_eq!(m.value("kurrentdb_scavenge_runs_total", &[("result", "success")]), 1.0);
    assert_eq!(m.value("kurrentdb_scavenge_runs_total", &[("result", "failed")]), 0.0);
    grew("kurrentdb_scavenge_reclaimed_bytes_total", &[]);
    grew("kurrentdb_scavenge_chunks_scavenged_total", &[]);
    assert_eq!(m.value("kurrentdb_scavenge_running", &[]), 0.0);
    // The persistent subscription group.
    let g1 = [("event_stream_id", "orders"), ("group_name", "g1")];
    assert_eq!(m.value("kurrentdb_persistent_sub_last_known_event_number", &g1), 4.0);
    assert!(m.value("kurrentdb_persistent_sub_park_message_requests_total", &g1) >= 1.0);
    m.value("kurrentdb_persistent_sub_in_flight_messages", &g1);
    m.value("kurrentdb_persistent_sub_connections", &g1);
    m.value("kurrentdb_persistent_sub_checkpointed_event_number", &g1);
    m.value("kurrentdb_persistent_sub_items_processed_total", &g1);
    // The projection.
    let p = [("projection", "counter")];
    assert_eq!(
        m.value("kurrentdb_projection_status", &[("projection", "counter"), ("status", "Running")]),
        1.0
    );
    assert_eq!(m.value("kurrentdb_projection_status", &p), 1.0);
    let progress = m.value("kurrentdb_projection_progress", &p);
    assert!((0.0..=1.0).contains(&progress), "{progress}");
    m.value("kurrentdb_projection_events_processed_after_restart_total", &p);
    m.value("kurrentdb_projection_position_lag_bytes", &p);
    m.value("kurrentdb_projection_state_size_bytes", &p);
    // Connections, the process, the system.
    assert!(m.value("kurrentdb_kestrel_connections", &[]) >= 1.0);
    assert!(m.value("process_open_fds", &[]) > 0.0);
    assert!(m.value("process_resident_memory_bytes", &[]) > 0.0);
    assert!(m.value("kurrentdb_proc_threads", &[]) >= 1.0);
    assert!(m.value("kurrentdb_proc_up_time_seconds_total", &[]) > 0.0);
    m.value("process_cpu_seconds_total", &[]);
    assert!(m.value("kurrentdb_sys_mem_bytes", &[("kind", "total")]) > 0.0);
    assert!(m.value("kurrentdb_sys_disk_bytes", &[("kind", "total")]) > 0.0);
    m.value("kurrentdb_sys_load_avg", &[("period", "1m")]);
    // Families declared without samples on a single node without TLS.
    for family in ["kurrentdb_replication_lag_bytes", "kurrentdb_tls_certificate_expiry_timestamp_seconds"] {
        assert_eq!(m.types.get(family).map(String::as_str), Some("gauge"), "{family}");
    }
    // Counters end in _total under KurrentDB's names; no label names a stream other than the
    // groups' (bounded by what operators define).
    for (name, ty) in &m.types {
        assert_eq!(ty == "counter", name.ends_with("_total"), "{name} is a {ty}");
    }
    for (name, series) in &m.samples {
        for (labels, _) in series {
            assert!(
                !labels.contains_key("stream") && !labels.contains_key("event_type"),
                "{name} has a per-stream label"
            );
        }
    }
    // Elections: a single node holds none.
    assert_eq!(m.value("kurrentdb_elections_count_total", &[]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openmetrics_is_served_when_asked_for_and_legacy_names_are_eventstores() {
    let s = support::start().await;
    s.append_n("a", 0, 3).await;
    let accept = ("accept", "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5");
    let r = s.get("/metrics", &[accept]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    let text = r.text();
    assert!(text.ends_with("# EOF\n"));
    assert!(text.contains("# TYPE kurrentdb_io_events counter\n"), "counter families lose _total");
    assert!(text.contains("kurrentdb_io_events_total{activity=\"written\",source=\"http\"} 3\n"), "{text}");
    drop(s);

    let s = support::start_with(|c| c.metrics_naming = annal::metrics::Naming::Legacy).await;
    s.append_n("a", 0, 3).await;
    let r = s.get("/metrics", &[accept]).await;
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8"),
        "legacy is plain text"
    );
    let m = Scrape::parse(&r.text());
    assert_eq!(m.value("eventstore_io_events", &[("activity", "written"), ("source", "http")]), 3.0);
    assert!(m.value("eventstore_proc_up_time", &[]) > 0.0);
    assert!(m.types.keys().all(|n| n.starts_with("eventstore_") || n.starts_with("process_")));
    assert!(!m.types.keys().any(|n| n.ends_with("_total") && n.starts_with("eventstore_")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_file_switches_groups_off() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("metricsconfig.json");
    std::fs::write(&file, r#"{"Meters": ["EventStore.Core"], "ProjectionStats": false, "Process": false}"#)
        .unwrap();
    let args = vec!["--metrics-config".to_owned(), file.display().to_string()];
    let parsed = annal::config::Config::parse(&args, &[], annal::env::real::read_text_file).unwrap();
    let s = support::start_with(|c| {
        c.metrics_naming = parsed.metrics_naming;
        c.metrics_groups = parsed.metrics_groups.clone();
    })
    .await;
    let m = scrape(&s).await;
    assert!(m.types.contains_key("eventstore_io_events"), "EventStore meters give the legacy names");
    assert!(!m.types.keys().any(|n| n.contains("projection") || n.contains("proc_")), "{:?}", m.types.keys());
    assert!(m.types.contains_key("eventstore_checkpoints"));
    std::fs::write(&file, r#"{"Projections": true}"#).unwrap();
    let e = annal::config::Config::parse(&args, &[], annal::env::real::read_text_file).unwrap_err();
    assert!(e.to_string().contains("Projections is not a known key"), "{e}");
}

/// `promtool` from `PROMTOOL`, else from `PATH`.
fn promtool() -> PathBuf {
    let tool = std::env::var_os("PROMTOOL").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("promtool"));
    let ok = std::process::Command::new(&tool).arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(ok, "needs promtool (Debian package prometheus; or PROMTOOL=/path/to/promtool)");
    tool
}

/// Runs `promtool check {what}` on `input` (a file, or standard input when `None`).
fn promtool_check(what: &str, input: Option<&std::path::Path>, stdin: &str) -> (bool, String) {
    use std::io::Write;
    let mut cmd = std::process::Command::new(promtool());
    cmd.arg("check").arg(what);
    if let Some(p) = input {
        cmd.arg(p);
    }
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(annal_ci),
    ignore = "needs promtool (Debian package prometheus; .ci/run installs it; CI=true runs this)"
)]
async fn promtool_accepts_the_real_output_and_the_deployed_dashboard_and_rules_name_only_served_metrics() {
    promtool();
    let (s, _) = busy_node(|_| {}).await;
    let m = scrape_until(&s, "the subscription group and the projection", |m| {
        m.get("kurrentdb_persistent_sub_connections", &[("group_name", "g1")]).is_some()
            && m.get("kurrentdb_projection_running", &[("projection", "counter")]).is_some()
    })
    .await;
    let (ok, out) = promtool_check("metrics", None, &m.text);
    assert!(ok, "promtool check metrics:\n{out}");
    drop(s);

    // Legacy names draw only the warnings their upstream names draw, by design: counters
    // without _total, and EventStoreDB's own `eventstore_elections_count`.
    let (s, _) = busy_node(|c| c.metrics_naming = annal::metrics::Naming::Legacy).await;
    let legacy = s.get("/metrics", &[]).await.text();
    let (_, out) = promtool_check("metrics", None, &legacy);
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let upstream = line.contains("counter metrics should have \"_total\" suffix")
            || line.starts_with("eventstore_elections_count non-histogram");
        assert!(upstream, "promtool on legacy names: {line}");
    }

    // The dashboard and the rules.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let rules = root.join("deploy/prometheus/alerts.yml");
    let (ok, out) = promtool_check("rules", Some(&rules), "");
    assert!(ok, "promtool check rules:\n{out}");
    let served = m.names();
    let dashboard = std::fs::read_to_string(root.join("deploy/grafana/annal-dashboard.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    assert!(doc["panels"].as_array().is_some_and(|p| p.len() >= 20));
    let rules_text = std::fs::read_to_string(&rules).unwrap();
    for (file, text) in [("dashboard", dashboard.as_str()), ("alerts.yml", rules_text.as_str())] {
        let named = metric_names(text);
        assert!(named.len() >= 10, "{file} names {named:?}");
        for name in named {
            assert!(served.contains(&name), "{file} uses {name}, which /metrics does not serve");
        }
    }
}

/// The metric names a dashboard or rules file uses (`kurrentdb_…`, `process_…`).
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in ["kurrentdb_", "process_"] {
        let mut rest = text;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                out.insert(tail[..end].to_owned());
            }
            rest = &tail[end..];
        }
    }
    out
}
