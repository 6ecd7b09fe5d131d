//! One run: a network of namespaces, a node per host, clients and a consumer on the clients'
//! host, the nemesis's schedule applied in real time, everything healed, the final views taken
//! and every checker run. The outcome is a [`RunReport`]; the nodes' logs are kept beside it.
//!
//! Invariants: the run removes its namespaces, mounts and processes whatever happens (the
//! [`Net`] and [`Nodes`] guards); the main thread joins the clients' namespace for the whole run,
//! so the harness talks to the nodes exactly as the clients do.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use annal_sim::history::{OpKind, Outcome};

use crate::checks::{self, FinalView};
use crate::hosts::{self, Net};
use crate::nemesis::{self, Kinds, Planned};
use crate::nodes::{self, Nodes};
use crate::workload::{self, lock, Config, Record};

/// What a run is asked to do.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Seed of the schedule and the clients.
    pub seed: u64,
    /// Nodes (3 or 5).
    pub nodes: usize,
    /// Length of the workload with faults.
    pub duration: Duration,
    /// Writer clients.
    pub clients: usize,
    /// The `annal` binary.
    pub binary: PathBuf,
    /// Extra node options.
    pub node_args: Vec<String>,
    /// Extra environment of the nodes (a broken build's switches).
    pub node_env: Vec<(String, String)>,
    /// Where the report and logs go.
    pub out: PathBuf,
    /// Only these kinds of faults (empty: all).
    pub faults: Vec<String>,
}

/// A fault as it happened.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The planned fault.
    pub planned: Planned,
    /// What was done (nodes resolved).
    pub description: String,
    /// Seconds since the start when it began and when it was healed.
    pub from_s: f64,
    /// When it was healed.
    pub to_s: f64,
}

/// The outcome of a run.
pub struct RunReport {
    /// The spec.
    pub spec: RunSpec,
    /// Faults applied.
    pub applied: Vec<Applied>,
    /// The record.
    pub record: Arc<Record>,
    /// Anomalies per checker (empty: passed).
    pub anomalies: Vec<(&'static str, Vec<String>)>,
    /// Whether `tc netem` was used.
    pub netem: bool,
    /// Seconds the cluster took to converge after the final heal.
    pub converged_after_s: f64,
    /// Node starts (restarts included).
    pub starts: u32,
}

impl RunReport {
    /// Whether every checker passed.
    pub fn passed(&self) -> bool {
        self.anomalies.iter().all(|(_, a)| a.is_empty())
    }
}

/// Deadline for a leader after the start and after the final heal.
const LEADER_WITHIN: Duration = Duration::from_secs(60);
/// Deadline for everything after the final heal: a leader, the final reads, every node holding
/// what the leader holds, and the subscription delivering its whole stream.
const AFTER_HEAL: Duration = Duration::from_secs(120);
/// Per-request deadline of the clients.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The clients' per-request deadline (an operation without an answer took this long).
pub fn request_timeout() -> Duration {
    REQUEST_TIMEOUT
}

/// The node `i` that node `asked` names as leader in its gossip, if any.
fn leader_of(cfg: &Config, asked: &str) -> Option<usize> {
    let r = crate::http::send(
        asked,
        "GET",
        "/gossip",
        &[("Accept", "application/json")],
        "",
        Duration::from_secs(2),
    )
    .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    let m = v["members"].as_array()?.iter().find(|m| {
        (m["state"] == "Master" || m["state"] == "Leader") && m["isAlive"].as_bool().unwrap_or(false)
    })?;
    let ip = m["externalHttpIp"].as_str().or_else(|| m["httpEndPointIp"].as_str())?;
    cfg.nodes.iter().position(|n| n.split(':').next() == Some(ip))
}

/// The leader, as the first node that names one sees it.
pub fn find_leader(cfg: &Config) -> Option<usize> {
    cfg.nodes.iter().find_map(|n| leader_of(cfg, n))
}

/// Polls `f` until it gives a value or `limit` passes.
fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(x) = f() {
            return Some(x);
        }
        if start.elapsed() >= limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Reads `stream` in full from `node` (its own view, without asking for the leader).
fn read_stream(node: &str, stream: &str) -> Option<Vec<annal_sim::history::ReadEv>> {
    let path = format!("/streams/{stream}/0/forward/{}?embed=body", annal_sim::workload::FULL_READ);
    let r = crate::http::send(
        node,
        "GET",
        &path,
        &[("Accept", "application/vnd.eventstore.atom+json")],
        "",
        REQUEST_TIMEOUT,
    )
    .ok()?;
    match r.status {
        200 => annal_sim::workload::parse_feed(&r.body).ok(),
        404 => Some(Vec::new()),
        _ => None,
    }
}

/// Runs `spec` and checks it.
pub fn run(spec: &RunSpec) -> Result<RunReport, String> {
    for removed in hosts::sweep() {
        eprintln!("removed what an earlier run left: {removed}");
    }
    std::fs::create_dir_all(&spec.out).map_err(|e| format!("{}: {e}", spec.out.display()))?;
    let tag = format!("s{}", spec.seed % 100_000);
    let mut net = Net::create(spec.nodes, &tag)?;
    hosts::enter(&format!("/run/netns/{}", net.clients))?;
    let mut nodes = Nodes::new(&net, &spec.binary, &spec.node_args, &spec.node_env);
    let netem = nemesis::netem_available(&net.hosts[0].ns);
    let result = drive(spec, &mut nodes, netem);
    for n in &mut nodes.nodes {
        n.kill();
    }
    // The logs stay with the report.
    for n in &nodes.nodes {
        let to = spec.out.join(format!("node{}.log", n.i));
        let _ = std::fs::copy(&n.log, &to);
    }
    let starts = nodes.nodes.iter().map(|n| n.starts).sum();
    drop(nodes);
    net.teardown();
    let _ = std::fs::remove_dir_all(&net.root);
    result.map(|mut r| {
        r.starts = starts;
        r
    })
}

fn drive(spec: &RunSpec, nodes: &mut Nodes, netem: bool) -> Result<RunReport, String> {
    let cfg = Config {
        nodes: nodes.nodes.iter().map(nodes::Node::http).collect(),
        streams: 4,
        timeout: REQUEST_TIMEOUT,
        think_max: Duration::from_millis(20),
        seed: spec.seed,
    };
    for n in &mut nodes.nodes {
        n.start()?;
    }
    let formed = poll(LEADER_WITHIN, || {
        if let Some(n) = nodes.nodes.iter_mut().find_map(|n| n.exited().map(|s| (n.i, s))) {
            return Some(Err(n));
        }
        find_leader(&cfg).map(Ok)
    });
    match formed {
        Some(Ok(_)) => {}
        Some(Err((i, status))) => {
            let log = std::fs::read_to_string(&nodes.nodes[i].log).unwrap_or_default();
            let last = log.lines().last().unwrap_or_default().to_owned();
            return Err(format!("node {i} exited at the start ({status}): {last}"));
        }
        None => return Err("no leader within 60 s of the start".into()),
    }
    workload::create_group(&cfg, LEADER_WITHIN)?;
    let record = Arc::new(Record::new());
    let stop = Arc::new(AtomicBool::new(false));
    let stop_consumer = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for me in 0..spec.clients {
        let (cfg, rec, stop) = (cfg.clone(), record.clone(), stop.clone());
        threads.push(std::thread::spawn(move || workload::client(me, &cfg, &rec, &stop)));
    }
    let consumer = {
        let (cfg, rec, stop) = (cfg.clone(), record.clone(), stop_consumer.clone());
        std::thread::spawn(move || workload::consumer(&cfg, &rec, &stop))
    };
    let schedule = nemesis::plan(
        spec.seed,
        spec.nodes,
        spec.duration,
        Kinds { clock: nodes::faketime_available(), only: spec.faults.clone() },
    );
    let mut applied = Vec::new();
    let secs = |rec: &Record| rec.now() as f64 / 1e6;
    let mut heal_error = None;
    for (k, p) in schedule.into_iter().enumerate() {
        let wait = p.start.saturating_sub(record.start.elapsed());
        std::thread::sleep(wait);
        let leader = find_leader(&cfg);
        let from_s = secs(&record);
        let active = nemesis::apply(&p.fault, nodes, leader, netem, spec.seed ^ k as u64)?;
        eprintln!("{from_s:7.2} s  {}", active.description);
        std::thread::sleep(p.duration);
        if let Err(e) = nemesis::heal(&active, nodes) {
            heal_error = Some(e);
        }
        let to_s = secs(&record);
        applied.push(Applied { planned: p, description: active.description.clone(), from_s, to_s });
        if heal_error.is_some() {
            break;
        }
    }
    std::thread::sleep(spec.duration.saturating_sub(record.start.elapsed()));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    if let Some(e) = heal_error {
        return Err(format!("a heal failed: {e}"));
    }
    // Whatever the last fault left: every node runs.
    for n in &mut nodes.nodes {
        if n.exited().is_some() || !n.running() {
            n.kill();
            n.start()?;
        }
    }
    let healed = Instant::now();
    let left = || (healed + AFTER_HEAL).saturating_duration_since(Instant::now());
    let mut anomalies: Vec<(&'static str, Vec<String>)> = Vec::new();
    let leader = poll(left(), || find_leader(&cfg));
    let final_client = spec.clients;
    let mut final_reads = Vec::new();
    let mut liveness = Vec::new();
    match leader {
        None => liveness.push(format!("no leader within {AFTER_HEAL:?} of the final heal")),
        Some(l) => {
            for s in 0..cfg.streams {
                let name = workload::stream(s);
                let read = OpKind::ReadForward { from: 0, count: annal_sim::workload::FULL_READ };
                let got = poll(left(), || {
                    let (id, out) = workload::run_op(
                        &record,
                        final_client,
                        &cfg.nodes[l],
                        &name,
                        read.clone(),
                        REQUEST_TIMEOUT,
                    );
                    matches!(out, Outcome::Read { .. } | Outcome::NoStream).then_some(id)
                });
                match got {
                    Some(id) => final_reads.push(id),
                    None => liveness
                        .push(format!("the leader did not serve a full read of {name} after the heal")),
                }
            }
        }
    }
    // Every node's own view, once it holds at least what the leader's final reads showed.
    let target: Vec<usize> = final_reads
        .iter()
        .map(|&id| match &lock(&record.history).ops[id].outcome {
            Outcome::Read { events } => events.len(),
            _ => 0,
        })
        .collect();
    let mut views = Vec::new();
    for node in &cfg.nodes {
        let view = poll(left(), || {
            let mut v = FinalView { node: node.clone(), ..FinalView::default() };
            for s in 0..cfg.streams {
                let name = workload::stream(s);
                let evs = read_stream(node, &name)?;
                if evs.len() < target.get(s).copied().unwrap_or(0) {
                    return None;
                }
                v.streams.insert(name, evs);
            }
            v.all = workload::read_all(node, REQUEST_TIMEOUT).ok()?;
            Some(v)
        });
        match view {
            Some(v) => views.push(v),
            None => liveness.push(format!("node {node} did not catch up within {AFTER_HEAL:?} of the heal")),
        }
    }
    // The logs of all nodes are compared once they are at the same length (replication of the
    // last records, and the subscription's checkpoints, may still be landing).
    let _ = poll(left(), || {
        let lens: Vec<usize> = cfg
            .nodes
            .iter()
            .filter_map(|n| workload::read_all(n, REQUEST_TIMEOUT).ok().map(|a| a.len()))
            .collect();
        (lens.len() == cfg.nodes.len() && lens.windows(2).all(|w| w[0] == w[1])).then_some(())
    });
    let want = views.first().and_then(|v| v.streams.get(workload::SUB_STREAM)).map_or(0, Vec::len);
    let _ = poll(left(), || {
        let got: std::collections::HashSet<i64> = lock(&record.delivered).iter().copied().collect();
        (got.len() >= want).then_some(())
    });
    stop_consumer.store(true, Ordering::Relaxed);
    let _ = consumer.join();
    for v in &mut views {
        if let Some(all) =
            workload::read_all(&v.node, REQUEST_TIMEOUT).ok().filter(|a| a.len() >= v.all.len())
        {
            v.all = all;
        }
    }
    let converged_after_s = healed.elapsed().as_secs_f64();
    let logs: Vec<(String, String)> =
        nodes.nodes.iter().map(|n| (n.http(), std::fs::read_to_string(&n.log).unwrap_or_default())).collect();
    {
        let h = lock(&record.history);
        anomalies.push(("liveness after the heal", liveness));
        anomalies.push(("linearizability of every stream", checks::linearizable(&h, &final_reads)));
        anomalies.push(("durability of acknowledged appends on every node", checks::durable(&h, &views)));
    }
    anomalies.push(("identical committed logs", checks::converged(&views)));
    anomalies.push((
        "$all reads are prefixes of the committed log",
        checks::committed_prefixes(&lock(&record.all_reads), &views),
    ));
    anomalies.push((
        "at-least-once delivery of the subscription",
        checks::delivered(workload::SUB_STREAM, &views, &lock(&record.delivered)),
    ));
    anomalies.push(("no node panicked", checks::no_panics(&logs)));
    Ok(RunReport { spec: spec.clone(), applied, record, anomalies, netem, converged_after_s, starts: 0 })
}

/// The run's directory under `root` for `seed`.
pub fn out_dir(root: &Path, seed: u64, nodes: usize) -> PathBuf {
    root.join(format!("seed-{seed}-n{nodes}"))
}
