//! The client workload: each client loops over random operations on a few streams, through the
//! node's HTTP API (EventStoreDB v5 dialect), records each in the history and the trace, and
//! classifies every answer. Appends use every expected-version kind (any, no stream, stream
//! exists, an exact version the client believes current, and stale ones); an append whose outcome
//! is unknown is usually retried with the same event ids and expected version (a duplicate
//! request, which the node must answer idempotently or refuse). After the workload phase, client
//! 0 reads every stream in full once the harness reports all faults healed (the final reads).
//!
//! Invariant: all randomness comes from the client's own seeded stream; the only other inputs are
//! the node's answers, which are themselves a function of the seed.

// The clients run on turmoil's client hosts, whose tokio clock is the simulation's paused clock:
// `tokio::time::sleep` is simulated time here, not the OS clock the lint guards against.
#![allow(clippy::disallowed_methods)]

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Failure, Resp};
use crate::history::{Ev, OpKind, Outcome, ReadEv};
use crate::shared::{now_us, Shared};

/// The node's HTTP port (on every node host).
pub const PORT: u16 = 2113;
const AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";
/// Page size of the final reads (the whole stream, in the workload's sizes).
pub const FULL_READ: usize = 4096;

/// What the workload does.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// The node host the clients talk to.
    pub node: String,
    /// Streams `s0 .. s{n-1}`; the last one may be hard-deleted when there are three or more.
    pub streams: usize,
    /// Length of the workload phase.
    pub duration: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Largest pause between two operations of a client.
    pub think_max: Duration,
    /// Largest padding of an event's data, bytes.
    pub pad_max: usize,
    /// Per-mille of operations that are deletes.
    pub delete_permille: u32,
    /// The node is a cluster member: reads ask for the leader (`ES-RequireMaster: True`, so they
    /// are linearizable), and a `307` is followed to the leader it names.
    pub cluster: bool,
    /// A cluster's node hosts: after a failure a client moves on to the next one.
    pub members: Vec<String>,
    /// TLS, when the nodes serve it (the certificate rollover scenario).
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

/// Redirects a request follows before it is given up (and recorded as refused: a `307` means the
/// node did not carry it out).
const MAX_REDIRECTS: usize = 3;

/// Stream name `i`.
pub fn stream_name(i: usize) -> String {
    format!("s{i}")
}

struct ClientState {
    me: usize,
    rng: ChaCha8Rng,
    http: Client,
    known: Vec<i64>,
    dead: Vec<bool>,
    seq: u64,
    /// Index in `members` of the node a cluster client goes to first (after a failure, the next).
    home: usize,
}

/// Runs client `me` until the workload phase is over (and client 0's final reads).
pub async fn client(me: usize, seed: u64, cfg: WorkloadConfig, shared: Rc<Shared>) {
    let mut st = ClientState {
        me,
        rng: ChaCha8Rng::seed_from_u64(seed ^ 0xc11e_0000 ^ ((me as u64) << 20)),
        http: Client::new(&cfg.node, PORT, cfg.timeout).with_tls(cfg.tls.clone()),
        known: vec![-1; cfg.streams],
        dead: vec![false; cfg.streams],
        seq: 0,
        home: cfg.members.iter().position(|m| *m == cfg.node).unwrap_or(0),
    };
    let end = cfg.duration.as_micros() as u64;
    let mut retry: Option<(usize, usize, OpKind, u32)> = None;
    while now_us() < end {
        let (s, kind, attempt) = match retry.take() {
            Some((s, id, OpKind::Append { expected, events, retry_of }, n)) if st.rng.gen_ratio(4, 5) => {
                (s, OpKind::Append { expected, events, retry_of: Some(retry_of.unwrap_or(id)) }, n + 1)
            }
            _ => {
                let s = st.rng.gen_range(0..cfg.streams);
                (s, next_op(&mut st, &cfg, s), 0)
            }
        };
        let (id, out) = run_op(&mut st, &cfg, &shared, s, kind.clone()).await;
        if matches!(out, Outcome::Unknown(_) | Outcome::Refused(_)) && attempt < 3 {
            if let OpKind::Append { .. } = kind {
                retry = Some((s, id, kind, attempt));
            }
        }
        let think = st.rng.gen_range(0..=cfg.think_max.as_micros() as u64);
        tokio::time::sleep(Duration::from_micros(think)).await;
    }
    if me == 0 {
        final_reads(&mut st, &cfg, &shared).await;
    }
}

fn next_op(st: &mut ClientState, cfg: &WorkloadConfig, s: usize) -> OpKind {
    let r = st.rng.gen_range(0..1000u32);
    if r < cfg.delete_permille {
        let hard = cfg.streams >= 3 && s == cfg.streams - 1 && st.rng.gen_ratio(1, 3);
        let expected = match st.rng.gen_range(0..3) {
            0 => -2,
            1 => st.known[s],
            _ => -4,
        };
        return OpKind::Delete { expected, hard };
    }
    if r < 600 && !(st.dead[s] && st.rng.gen_ratio(9, 10)) {
        let expected = match st.rng.gen_range(0..100) {
            0..=34 => -2,
            35..=44 => -1,
            45..=54 => -4,
            55..=94 => st.known[s],
            _ => st.known[s] - st.rng.gen_range(1..4),
        };
        let n = match st.rng.gen_range(0..10) {
            0..=5 => 1,
            6..=8 => 2,
            _ => 3,
        };
        let events = (0..n).map(|i| event(st, i, cfg.pad_max)).collect();
        return OpKind::Append { expected, events, retry_of: None };
    }
    if r < 850 {
        if st.rng.gen_ratio(1, 8) {
            OpKind::ReadForward { from: 0, count: 200 }
        } else {
            let from = (st.known[s] - st.rng.gen_range(-2..20)).max(0);
            OpKind::ReadForward { from, count: st.rng.gen_range(1..20) }
        }
    } else {
        OpKind::ReadBackward { count: st.rng.gen_range(1..6) }
    }
}

fn event(st: &mut ClientState, i: usize, pad_max: usize) -> Ev {
    let mut id = [0u8; 16];
    st.rng.fill(&mut id[..]);
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    st.seq += 1;
    let pad_len =
        if st.rng.gen_ratio(1, 20) { st.rng.gen_range(0..=pad_max) } else { st.rng.gen_range(0..64) };
    let pad: String = (0..pad_len).map(|k| (b'a' + ((k + st.seq as usize) % 26) as u8) as char).collect();
    Ev {
        id,
        ty: format!("t{}", st.rng.gen_range(0..4)),
        data: format!("{{\"c\":{},\"k\":{},\"i\":{i},\"p\":\"{pad}\"}}", st.me, st.seq),
    }
}

fn request(
    node: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: String,
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", format!("{node}:{PORT}"))
        .header("authorization", AUTH);
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    b.body(Full::new(Bytes::from(body))).unwrap_or_else(|e| unreachable!("static request parts: {e}"))
}

fn build(node: &str, stream: &str, kind: &OpKind, cluster: bool) -> http::Request<Full<Bytes>> {
    let mut req = build_plain(node, stream, kind);
    // Reads ask for the leader, so they are linearizable; writes on a follower are forwarded to it
    // (a `307` is still followed, for a leader that redirects).
    if cluster && !kind.is_write() {
        req.headers_mut().insert("es-requiremaster", http::HeaderValue::from_static("True"));
    }
    req
}

fn build_plain(node: &str, stream: &str, kind: &OpKind) -> http::Request<Full<Bytes>> {
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
            request(
                node,
                "POST",
                &format!("/streams/{stream}"),
                &[
                    ("content-type", "application/vnd.eventstore.events+json".into()),
                    ("es-expectedversion", expected.to_string()),
                ],
                format!("[{}]", items.join(",")),
            )
        }
        OpKind::Delete { expected, hard } => request(
            node,
            "DELETE",
            &format!("/streams/{stream}"),
            &[("es-expectedversion", expected.to_string()), ("es-harddelete", hard.to_string())],
            String::new(),
        ),
        OpKind::ReadForward { from, count } => request(
            node,
            "GET",
            &format!("/streams/{stream}/{from}/forward/{count}?embed=body"),
            &[("accept", "application/vnd.eventstore.atom+json".into())],
            String::new(),
        ),
        OpKind::ReadBackward { count } => request(
            node,
            "GET",
            &format!("/streams/{stream}/head/backward/{count}?embed=body"),
            &[("accept", "application/vnd.eventstore.atom+json".into())],
            String::new(),
        ),
        OpKind::Restart => unreachable!("restarts are not sent"),
    }
}

/// The events of an Atom feed page (`?embed=body`), in event-number order.
pub fn parse_feed(body: &[u8]) -> Result<Vec<ReadEv>, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("feed is not JSON: {e}"))?;
    let entries = v.get("entries").and_then(|e| e.as_array()).ok_or("feed without entries")?;
    let mut out = Vec::new();
    for e in entries {
        let number = e.get("eventNumber").and_then(|n| n.as_i64()).ok_or("entry without eventNumber")?;
        let id = e
            .get("eventId")
            .and_then(|n| n.as_str())
            .and_then(|s| uuid::Uuid::parse_str(s).ok())
            .ok_or("entry without a valid eventId")?;
        let data = e.get("data").and_then(|d| d.as_str()).unwrap_or_default().to_owned();
        out.push(ReadEv { number, id: *id.as_bytes(), data });
    }
    out.sort_by_key(|e| e.number);
    Ok(out)
}

/// What an answer to `kind` means for the checkers (shared with the real-process harness).
pub fn classify(kind: &OpKind, r: Result<Resp, Failure>) -> Outcome {
    let resp = match r {
        Ok(r) => r,
        Err(Failure::NotSent(w)) => return Outcome::Refused(w),
        Err(Failure::Unknown(w)) if kind.is_write() => return Outcome::Unknown(w),
        Err(Failure::Unknown(w)) => return Outcome::Refused(w),
    };
    let text = || {
        format!(
            "{} {}",
            resp.reason,
            String::from_utf8_lossy(&resp.body).chars().take(200).collect::<String>()
        )
    };
    match (kind, resp.status) {
        (OpKind::Append { .. }, 201) => Outcome::Appended {
            first: resp.header("location").and_then(|l| l.rsplit('/').next()).and_then(|n| n.parse().ok()),
        },
        (OpKind::Append { .. } | OpKind::Delete { .. }, 400)
            if resp.reason.contains("Wrong expected EventNumber")
                || text().contains("Wrong expected EventNumber") =>
        {
            Outcome::WrongVersion { current: resp.header("es-currentversion").and_then(|c| c.parse().ok()) }
        }
        (OpKind::Append { .. } | OpKind::Delete { .. }, 410) => Outcome::Deleted,
        (OpKind::Delete { .. }, 204) => Outcome::DeleteDone,
        // The node's contract: "read-only after a storage failure" is answered before anything of
        // the write is staged, so the write certainly did not happen (the checker relies on it).
        // A cluster node's "Server Is Not Ready" is taken as unknown: a forwarded write whose
        // relay failed is answered so although the leader may have written it.
        (OpKind::Append { .. } | OpKind::Delete { .. }, 503) if resp.reason.starts_with("Read-only") => {
            Outcome::Refused(format!("{} {}", resp.status, text()))
        }
        (OpKind::Append { .. } | OpKind::Delete { .. }, 408 | 500..=599) => {
            Outcome::Unknown(format!("{} {}", resp.status, text()))
        }
        (OpKind::ReadForward { .. } | OpKind::ReadBackward { .. }, 200) => match parse_feed(&resp.body) {
            Ok(events) => Outcome::Read { events },
            Err(e) => Outcome::Unexpected(e),
        },
        (OpKind::ReadForward { .. } | OpKind::ReadBackward { .. }, 404) => Outcome::NoStream,
        // Redirected more than `MAX_REDIRECTS` times: no node carried it out.
        (_, 307) => Outcome::Refused(format!("307 {}", resp.header("location").unwrap_or_default())),
        (OpKind::ReadForward { .. } | OpKind::ReadBackward { .. }, 410) => Outcome::Deleted,
        (OpKind::ReadForward { .. } | OpKind::ReadBackward { .. }, 408 | 500..=599) => {
            Outcome::Refused(format!("{} {}", resp.status, text()))
        }
        (_, status) => Outcome::Unexpected(format!("status {status}: {}", text())),
    }
}

/// The address of a redirect's `Location` (`http://ip:port/path`, or `https://` with TLS).
fn redirect_target(location: &str) -> Option<std::net::SocketAddr> {
    let rest = location.strip_prefix("http://").or_else(|| location.strip_prefix("https://"))?;
    rest.split('/').next()?.parse().ok()
}

async fn run_op(
    st: &mut ClientState,
    cfg: &WorkloadConfig,
    shared: &Shared,
    s: usize,
    kind: OpKind,
) -> (usize, Outcome) {
    let stream = stream_name(s);
    let id = shared.history.borrow_mut().invoke(st.me, &stream, kind.clone(), now_us());
    let mut r = st.http.send(build(&cfg.node, &stream, &kind, cfg.cluster)).await;
    let mut served_by = st.http.target();
    let mut hops = 0;
    while let Ok(resp) = &r {
        let to = (resp.status == 307).then(|| resp.header("location").and_then(redirect_target)).flatten();
        let Some(to) = to.filter(|_| hops < MAX_REDIRECTS) else { break };
        hops += 1;
        st.http.retarget(Some(to));
        r = st.http.send(build(&cfg.node, &stream, &kind, cfg.cluster)).await;
        served_by = st.http.target();
    }
    if !matches!(&r, Ok(resp) if resp.status < 500) {
        // The node it went to may no longer lead, or be down: a cluster client starts the next
        // request at the next member, a single node's client at its node.
        if cfg.members.is_empty() {
            st.http.retarget(None);
        } else {
            st.home = (st.home + 1) % cfg.members.len();
            let next = turmoil::lookup(cfg.members[st.home].as_str());
            st.http.retarget(Some(std::net::SocketAddr::new(next, PORT)));
        }
    }
    let out = classify(&kind, r);
    match (&kind, &out) {
        (OpKind::Append { events, .. }, Outcome::Appended { first: Some(f) }) => {
            st.known[s] = f + events.len() as i64 - 1;
        }
        (_, Outcome::WrongVersion { current: Some(c) }) => st.known[s] = *c,
        (OpKind::ReadForward { .. }, Outcome::Read { events }) => {
            if let Some(l) = events.last() {
                st.known[s] = st.known[s].max(l.number);
            }
        }
        (_, Outcome::Deleted) => st.dead[s] = true,
        _ => {}
    }
    let at = now_us();
    if cfg.cluster {
        // Which member answered (a cluster run's trace; single-node traces stay as they were).
        shared.note(at, &format!("c{}", st.me), format!("#{id} {stream} {kind} -> {out} (by {served_by})"));
    } else {
        shared.note(at, &format!("c{}", st.me), format!("#{id} {stream} {kind} -> {out}"));
    }
    shared.history.borrow_mut().complete(id, out.clone(), at);
    shared.ops_done.set(shared.ops_done.get() + 1);
    (id, out)
}

async fn final_reads(st: &mut ClientState, cfg: &WorkloadConfig, shared: &Shared) {
    while !shared.healed.get() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // One deadline for all streams: a node that rightly refuses to start (destroyed data) must
    // not keep the run going; each stream still gets at least one attempt.
    let deadline = now_us() + 20_000_000;
    for s in 0..cfg.streams {
        loop {
            let (id, out) =
                run_op(st, cfg, shared, s, OpKind::ReadForward { from: 0, count: FULL_READ }).await;
            if matches!(out, Outcome::Read { .. } | Outcome::NoStream | Outcome::Deleted)
                || now_us() > deadline
            {
                shared.final_reads.borrow_mut().push(id);
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}
