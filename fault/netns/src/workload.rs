//! The clients: threads on the clients' host, each looping over appends with the exact expected
//! version it believes current (re-sent with the same event ids after an unknown outcome), reads
//! of streams through the leader, and reads of `$all` from whichever node it talks to; and one
//! consumer of a persistent subscription. Every operation goes into one [`History`] (the
//! simulator's, so its checkers apply) with invocation and completion times in µs since the run
//! began; `$all` reads and deliveries go to lists of their own.
//!
//! Invariants: all randomness comes from the client's seeded stream; an outcome is classified by
//! the simulator's rules ([`annal_sim::workload::classify`]): a write whose effect is unknown is
//! never recorded as failed.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use annal_sim::client::{Failure, Resp};
use annal_sim::history::{Ev, History, OpKind, Outcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::http;

/// The stream the persistent subscription reads (one of the workload's streams).
pub const SUB_STREAM: &str = "s0";
/// The subscription group.
pub const SUB_GROUP: &str = "g";
/// Page size of a full read of a stream or of `$all`.
pub const FULL_READ: usize = 4096;
/// Times an append with an unknown outcome is sent again (same ids, same expected version).
const RESENDS: u32 = 3;

/// What the clients do.
#[derive(Clone, Debug)]
pub struct Config {
    /// The nodes' HTTP addresses (`ip:port`).
    pub nodes: Vec<String>,
    /// Streams `s0 .. s{n-1}`, shared by all clients.
    pub streams: usize,
    /// Per-request deadline.
    pub timeout: Duration,
    /// Largest pause between two operations of a client.
    pub think_max: Duration,
    /// The run's seed.
    pub seed: u64,
}

/// A read of `$all` from the start: what one node showed at one moment.
#[derive(Clone, Debug)]
pub struct AllRead {
    /// The node asked.
    pub node: String,
    /// µs since the start, when it was answered.
    pub at: u64,
    /// The events, in log order: (stream, event number, event id).
    pub events: Vec<(String, i64, String)>,
}

/// What the run recorded.
pub struct Record {
    /// Every client operation.
    pub history: Mutex<History>,
    /// Reads of `$all`.
    pub all_reads: Mutex<Vec<AllRead>>,
    /// Event numbers of [`SUB_STREAM`] the consumer processed (with repeats): pages it took and
    /// acknowledged, not the ones it left unacknowledged on purpose.
    pub delivered: Mutex<Vec<i64>>,
    /// Errors of the consumer (not failures by themselves: the checker decides).
    pub consumer_log: Mutex<Vec<String>>,
    /// When the run began.
    pub start: Instant,
}

impl Record {
    /// An empty record starting now.
    pub fn new() -> Record {
        Record {
            history: Mutex::new(History::default()),
            all_reads: Mutex::new(Vec::new()),
            delivered: Mutex::new(Vec::new()),
            consumer_log: Mutex::new(Vec::new()),
            start: Instant::now(),
        }
    }

    /// µs since the start.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}

impl Default for Record {
    fn default() -> Record {
        Record::new()
    }
}

/// Locks a mutex, also after a panic elsewhere (the record stays usable for the report).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stream `i`'s name.
pub fn stream(i: usize) -> String {
    format!("s{i}")
}

/// One request and its answer, following up to three redirects to the leader; returns the
/// answer and the node that gave it.
pub fn exchange(
    node: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> (Result<Resp, Failure>, String) {
    let mut at = node.to_owned();
    let mut path = path.to_owned();
    for _ in 0..3 {
        let r = http::send(&at, method, &path, headers, body, timeout);
        match &r {
            Ok(resp) if resp.status == 307 => match resp.header("location").and_then(split_url) {
                Some((host, p)) => {
                    at = host;
                    path = p;
                }
                None => return (r, at),
            },
            _ => return (r, at),
        }
    }
    (http::send(&at, method, &path, headers, body, timeout), at)
}

/// `http://host:port/path` as (`host:port`, `/path`).
pub fn split_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let slash = rest.find('/').unwrap_or(rest.len());
    let path = if slash == rest.len() { "/".to_owned() } else { rest[slash..].to_owned() };
    Some((rest[..slash].to_owned(), path))
}

/// The request an operation sends.
fn request(stream: &str, kind: &OpKind) -> (&'static str, String, Vec<(&'static str, String)>, String) {
    match kind {
        OpKind::Append { expected, events, .. } => {
            let items: Vec<String> = events
                .iter()
                .map(|e| {
                    format!(
                        "{{\"eventId\":\"{}\",\"eventType\":\"{}\",\"data\":{}}}",
                        uuid::Uuid::from_bytes(e.id),
                        e.ty,
                        e.data
                    )
                })
                .collect();
            (
                "POST",
                format!("/streams/{stream}"),
                vec![
                    ("Content-Type", "application/vnd.eventstore.events+json".into()),
                    ("ES-ExpectedVersion", expected.to_string()),
                ],
                format!("[{}]", items.join(",")),
            )
        }
        OpKind::ReadForward { from, count } => (
            "GET",
            format!("/streams/{stream}/{from}/forward/{count}?embed=body"),
            vec![
                ("Accept", "application/vnd.eventstore.atom+json".into()),
                ("ES-RequireMaster", "True".into()),
            ],
            String::new(),
        ),
        OpKind::ReadBackward { count } => (
            "GET",
            format!("/streams/{stream}/head/backward/{count}?embed=body"),
            vec![
                ("Accept", "application/vnd.eventstore.atom+json".into()),
                ("ES-RequireMaster", "True".into()),
            ],
            String::new(),
        ),
        OpKind::Delete { expected, hard } => (
            "DELETE",
            format!("/streams/{stream}"),
            vec![("ES-ExpectedVersion", expected.to_string()), ("ES-HardDelete", hard.to_string())],
            String::new(),
        ),
        OpKind::Restart => ("GET", "/ping".into(), Vec::new(), String::new()),
    }
}

/// Runs one operation against `node`, recorded in the history; returns its id, outcome and the
/// node that answered.
pub fn run_op(
    rec: &Record,
    client: usize,
    node: &str,
    stream: &str,
    kind: OpKind,
    timeout: Duration,
) -> (usize, Outcome) {
    let id = lock(&rec.history).invoke(client, stream, kind.clone(), rec.now());
    let (method, path, headers, body) = request(stream, &kind);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, _) = exchange(node, method, &path, &headers, &body, timeout);
    let out = annal_sim::workload::classify(&kind, r);
    lock(&rec.history).complete(id, out.clone(), rec.now());
    (id, out)
}

/// Reads `$all` from the start on `node` (every page, without asking for the leader).
pub fn read_all(node: &str, timeout: Duration) -> Result<Vec<(String, i64, String)>, String> {
    let mut out = Vec::new();
    let mut path = format!("/streams/$all/{}/forward/{FULL_READ}?embed=body", "0".repeat(32));
    for _ in 0..1000 {
        let r = http::send(
            node,
            "GET",
            &path,
            &[("Accept", "application/vnd.eventstore.atom+json")],
            "",
            timeout,
        )
        .map_err(|e| format!("{e:?}"))?;
        if r.status != 200 {
            return Err(format!("{} {}", r.status, r.reason));
        }
        let v: serde_json::Value = serde_json::from_slice(&r.body).map_err(|e| e.to_string())?;
        let entries = v["entries"].as_array().cloned().unwrap_or_default();
        if entries.is_empty() {
            return Ok(out);
        }
        // A forward page lists its newest event first.
        for e in entries.iter().rev() {
            out.push((
                e["streamId"].as_str().unwrap_or_default().to_owned(),
                e["eventNumber"].as_i64().unwrap_or(-1),
                e["eventId"].as_str().unwrap_or_default().to_owned(),
            ));
        }
        let next = v["links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["relation"] == "previous"))
            .and_then(|l| l["uri"].as_str())
            .and_then(split_url);
        match next {
            Some((_, p)) => path = format!("{p}?embed=body"),
            None => return Ok(out),
        }
    }
    Err("more than 1000 pages of $all".into())
}

/// One writer client, until `stop`.
pub fn client(me: usize, cfg: &Config, rec: &Record, stop: &AtomicBool) {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x6e65_7400 ^ ((me as u64) << 24));
    let mut known = vec![-1i64; cfg.streams];
    let mut home = me % cfg.nodes.len();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let s = rng.gen_range(0..cfg.streams);
        let name = stream(s);
        let node = cfg.nodes[home].clone();
        let roll = rng.gen_range(0..100);
        if roll < 60 {
            let events: Vec<Ev> = (0..rng.gen_range(1..=2))
                .map(|i| {
                    seq += 1;
                    let mut id = [0u8; 16];
                    rng.fill(&mut id[..]);
                    id[6] = (id[6] & 0x0f) | 0x40;
                    id[8] = (id[8] & 0x3f) | 0x80;
                    Ev { id, ty: "t".into(), data: format!("{{\"c\":{me},\"k\":{seq},\"i\":{i}}}") }
                })
                .collect();
            let n = events.len() as i64;
            let expected = known[s];
            let mut kind = OpKind::Append { expected, events, retry_of: None };
            let mut first = None;
            for attempt in 0..=RESENDS {
                let at = cfg.nodes[home].clone();
                let (id, out) = run_op(rec, me, &at, &name, kind.clone(), cfg.timeout);
                first.get_or_insert(id);
                match out {
                    Outcome::Appended { .. } => known[s] = expected + n,
                    Outcome::WrongVersion { current: Some(c) } => known[s] = c,
                    Outcome::Unknown(_) | Outcome::Refused(_) => {
                        home = (home + 1) % cfg.nodes.len();
                        if attempt < RESENDS && !stop.load(Ordering::Relaxed) {
                            std::thread::sleep(Duration::from_millis(200));
                            if let OpKind::Append { retry_of, .. } = &mut kind {
                                *retry_of = first;
                            }
                            continue;
                        }
                    }
                    _ => {}
                }
                break;
            }
        } else if roll < 85 {
            let from = (known[s] - rng.gen_range(0..10)).max(0);
            let (_, out) =
                run_op(rec, me, &node, &name, OpKind::ReadForward { from, count: 20 }, cfg.timeout);
            if matches!(out, Outcome::Refused(_) | Outcome::Unknown(_)) {
                home = (home + 1) % cfg.nodes.len();
            }
        } else if roll < 95 {
            let (_, out) = run_op(rec, me, &node, &name, OpKind::ReadBackward { count: 5 }, cfg.timeout);
            if matches!(out, Outcome::Refused(_) | Outcome::Unknown(_)) {
                home = (home + 1) % cfg.nodes.len();
            }
        } else if let Ok(events) = read_all(&node, cfg.timeout) {
            lock(&rec.all_reads).push(AllRead { node: node.clone(), at: rec.now(), events });
        } else {
            home = (home + 1) % cfg.nodes.len();
        }
        let think = rng.gen_range(0..=cfg.think_max.as_micros() as u64);
        std::thread::sleep(Duration::from_micros(think));
    }
}

/// Creates the subscription group on [`SUB_STREAM`] (from its first event), trying every node
/// until one takes it.
pub fn create_group(cfg: &Config, deadline: Duration) -> Result<(), String> {
    let settings = r#"{"startFrom":0,"messageTimeoutMilliseconds":3000,"maxRetryCount":100,"minCheckPointCount":1,"maxCheckPointCount":1}"#;
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < deadline {
        for node in &cfg.nodes {
            let path = format!("/subscriptions/{SUB_STREAM}/{SUB_GROUP}");
            let (r, _) =
                exchange(node, "PUT", &path, &[("Content-Type", "application/json")], settings, cfg.timeout);
            match r {
                Ok(r) if r.status == 201 || r.status == 409 => return Ok(()),
                Ok(r) => last = format!("{} {}", r.status, r.reason),
                Err(e) => last = format!("{e:?}"),
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Err(format!("the subscription group was not created: {last}"))
}

/// Pages in a thousand the consumer takes and never acknowledges, as a consumer that crashed
/// after receiving them would: the group must deliver them again once their time-out passes.
const UNACKED_PERMILLE: u32 = 100;

/// The consumer: takes pages of the group from any node and acknowledges them (all but a seeded
/// few, see [`UNACKED_PERMILLE`]), until `stop`.
pub fn consumer(cfg: &Config, rec: &Record, stop: &AtomicBool) {
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x636f_6e73);
    let mut home = 0;
    while !stop.load(Ordering::Relaxed) {
        let node = cfg.nodes[home].clone();
        let path = format!("/subscriptions/{SUB_STREAM}/{SUB_GROUP}/20");
        let (r, at) = exchange(
            &node,
            "GET",
            &path,
            &[("Accept", "application/vnd.eventstore.competingatom+json")],
            "",
            cfg.timeout,
        );
        let page = match r {
            Ok(r) if r.status == 200 => r,
            other => {
                let what = match other {
                    Ok(r) => format!("{} {}", r.status, r.reason),
                    Err(e) => format!("{e:?}"),
                };
                lock(&rec.consumer_log).push(format!("{:.1}s {node}: {what}", rec.now() as f64 / 1e6));
                home = (home + 1) % cfg.nodes.len();
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
        };
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&page.body) else { continue };
        let entries = v["entries"].as_array().cloned().unwrap_or_default();
        if entries.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        let numbers: Vec<i64> =
            entries.iter().filter_map(|e| e["title"].as_str()?.split('@').next()?.parse().ok()).collect();
        let ack = v["links"]
            .as_array()
            .and_then(|l| l.iter().find(|l| l["relation"] == "ackAll"))
            .and_then(|l| l["uri"].as_str())
            .and_then(split_url);
        if rng.gen_range(0..1000) < UNACKED_PERMILLE {
            lock(&rec.consumer_log).push(format!(
                "{:.1}s: a page of {} left unacknowledged",
                rec.now() as f64 / 1e6,
                entries.len()
            ));
            continue;
        }
        // Processed: counted as delivered whatever becomes of the acknowledgement (one that is
        // lost brings the page again, which at-least-once allows).
        lock(&rec.delivered).extend(numbers);
        if let Some((_, p)) = ack {
            let _ = http::send(&at, "POST", &p, &[], "", cfg.timeout);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_address_and_path() {
        assert_eq!(
            split_url("http://10.213.0.11:2113/streams/s0"),
            Some(("10.213.0.11:2113".into(), "/streams/s0".into()))
        );
        assert_eq!(split_url("http://a:1"), Some(("a:1".into(), "/".into())));
        assert_eq!(split_url("ftp://a"), None);
    }
}
