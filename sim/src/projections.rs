//! The projections scenario ([`crate::scenario::Scenario::Projections`]): the node runs the five
//! system projections and two JavaScript projections (`--run-projections All
//! --start-standard-projections`) while a producer writes streams of a few categories, beside the
//! usual clients, under the node's fault plan (crashes, power losses, disk faults).
//!
//! The producer first creates the JavaScript projections of [`annal_model::projections::js`]
//! (stopped, then given a low `checkpointHandledThreshold` so that they checkpoint often, then
//! enabled; each step retried until it is answered, for at most [`SETUP_GRACE`] past the
//! workload phase), alongside its appends.
//!
//! The **producer** host appends, every 20 to 80 ms of simulated time, one to three events to a
//! stream `{category}-{k}` ([`CATEGORIES`], [`STREAMS_PER_CATEGORY`]) with types from [`TYPES`],
//! a third of them with a `$correlationId` of [`CORRELATIONS`] in their metadata; or a link
//! (`$>`) to an event it wrote before into a stream of category [`MIX`]. An append whose outcome
//! is unknown is not retried: what counts is what the log holds.
//!
//! After the workload phase (and the healing restart) the producer stops and the projections get
//! [`DRAIN`] to catch up. The producer then asks the node for the JavaScript projections' states
//! over HTTP ([`JsSeen`]); the harness reads the node's whole log and the projections' output
//! streams from its store ([`Outcome::read`]); [`crate::checker::projections`] compares them with
//! the reference folds of the `model` crate.
//!
//! Invariant: every choice comes from the run's seed; the producer acts only through the node's
//! HTTP API, and the harness only reads the node's store once the run is over.

// The producer runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use annal_model::projections::{js, Source};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::rig::Rig;
use crate::shared::now_us;
use crate::subs::{random_id, request, Members};

/// The categories the producer writes.
pub const CATEGORIES: [&str; 3] = ["order", "cart", "user"];
/// Streams per category.
pub const STREAMS_PER_CATEGORY: usize = 3;
/// The category of the producer's streams of links.
pub const MIX: &str = "mix";
/// Event types the producer writes (no other writer uses them).
pub const TYPES: [&str; 3] = ["p-placed", "p-changed", "p-closed"];
/// Correlation ids the producer puts in metadata: `pc0` .. `pc{n-1}`.
pub const CORRELATIONS: usize = 3;
/// How long the projections get to catch up after the workload phase.
pub const DRAIN: Duration = Duration::from_secs(20);
/// The producer host's name.
pub const PRODUCER: &str = "producer";
/// Events per page when the harness reads the log and the output streams.
const PAGE: usize = 500;
/// The partitioned JavaScript projection ([`js::BY_STREAM_QUERY`]).
pub const BY_STREAM: &str = "sim-by-stream";
/// The whole-log JavaScript projection ([`js::TYPES_QUERY`]).
pub const TYPES_PROJECTION: &str = "sim-types";
/// The JavaScript projections' `checkpointHandledThreshold`: low, so that crashes fall between
/// checkpoints of every kind (partitions written, root not yet) and restarts resume from them.
const JS_CHECKPOINT_EVERY: u64 = 8;
/// How long after the workload phase (on the healed node or cluster) the producer goes on
/// trying to set up the JavaScript projections.
const SETUP_GRACE: Duration = Duration::from_secs(10);
/// Pause between tries of a request to the JavaScript projections.
const RETRY: Duration = Duration::from_millis(250);
/// Tries of each final state request.
const STATE_TRIES: usize = 40;

/// What the producer learnt of the JavaScript projections over HTTP.
#[derive(Debug, Default)]
pub struct JsSeen {
    /// Projections created, configured and enabled (all three steps answered).
    pub ready: Vec<String>,
    /// [`BY_STREAM`]'s state of each producer stream's partition, as the node answered it
    /// (empty: no state); a stream missing here got no answer.
    pub states: BTreeMap<String, String>,
    /// [`TYPES_PROJECTION`]'s state as answered.
    pub types: Option<String>,
    /// The projections' statuses at the end, as answered (for the report).
    pub statuses: Vec<String>,
}

/// The record of the JavaScript projections, shared by the producer host and the harness.
pub type Seen = Rc<RefCell<JsSeen>>;

/// Every stream the producer writes events to (not links): the partitions of [`BY_STREAM`].
pub fn producer_streams() -> Vec<String> {
    CATEGORIES.iter().flat_map(|c| (0..STREAMS_PER_CATEGORY).map(move |k| format!("{c}-{k}"))).collect()
}

/// Whether `stream` is one of the producer's.
pub fn ours(stream: &str) -> bool {
    annal_model::projections::category(stream).is_some_and(|c| c == MIX || CATEGORIES.contains(&c))
}

/// The output streams the check compares: `$streams`, and for the producer's categories, types
/// and correlation ids their `$category-`, `$ce-`, `$et-` and `$bc-` streams.
pub fn outputs() -> Vec<String> {
    let mut v = vec!["$streams".to_string()];
    for c in CATEGORIES.iter().chain([&MIX]) {
        v.push(format!("$category-{c}"));
        v.push(format!("$ce-{c}"));
    }
    v.extend(TYPES.iter().map(|t| format!("$et-{t}")));
    v.extend((0..CORRELATIONS).map(|k| format!("$bc-pc{k}")));
    v
}

/// Starts the producer host for the node of `rigs[0]`; returns what it learns of the
/// JavaScript projections.
pub fn start(sim: &mut turmoil::Sim, rigs: &[Rig], duration: Duration) -> Seen {
    let members: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    let (shared, seed) = (rigs[0].shared.clone(), rigs[0].seed);
    let end = duration.as_micros() as u64;
    let seen: Seen = Rc::default();
    let record = seen.clone();
    sim.client(PRODUCER, async move {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e0_0000_0000_0007);
        let mut http = Members::new(&members);
        let setup = {
            let (members, record, shared) = (members.clone(), record.clone(), shared.clone());
            tokio::task::spawn_local(async move {
                for (name, query, emit) in
                    [(BY_STREAM, js::BY_STREAM_QUERY, true), (TYPES_PROJECTION, js::TYPES_QUERY, false)]
                {
                    let deadline = end + SETUP_GRACE.as_micros() as u64;
                    match set_up(&members, name, query, emit, deadline).await {
                        Ok(()) => record.borrow_mut().ready.push(name.to_owned()),
                        Err(e) => shared.note_now("projections", format!("{name}: not set up in time ({e})")),
                    }
                }
            })
        };
        // Events whose append was acknowledged, for links to point at.
        let mut written: Vec<(i64, String)> = Vec::new();
        let (mut appended, mut linked) = (0u64, 0u64);
        while now_us() < end {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(20..80))).await;
            if rng.gen_ratio(1, 5) && !written.is_empty() {
                let (n, target) = written[rng.gen_range(0..written.len())].clone();
                let stream = format!("{MIX}-{}", rng.gen_range(0..2));
                let body = format!(
                    "[{{\"eventId\":\"{}\",\"eventType\":\"$>\",\"data\":\"{n}@{target}\"}}]",
                    uuid::Uuid::from_bytes(random_id(&mut rng))
                );
                let r = append(&mut http, &stream, body, members.len()).await;
                linked += u64::from(r.is_some_and(|r| r.status == 201));
                continue;
            }
            let c = CATEGORIES[rng.gen_range(0..CATEGORIES.len())];
            let stream = format!("{c}-{}", rng.gen_range(0..STREAMS_PER_CATEGORY));
            let count = rng.gen_range(1..4);
            let items: Vec<String> = (0..count)
                .map(|i| {
                    let meta = if rng.gen_ratio(1, 3) {
                        format!(
                            ",\"metadata\":{{\"$correlationId\":\"pc{}\"}}",
                            rng.gen_range(0..CORRELATIONS)
                        )
                    } else {
                        String::new()
                    };
                    format!(
                        "{{\"eventId\":\"{}\",\"eventType\":\"{}\",\"data\":{{\"i\":{i}}}{meta}}}",
                        uuid::Uuid::from_bytes(random_id(&mut rng)),
                        TYPES[rng.gen_range(0..TYPES.len())]
                    )
                })
                .collect();
            let body = format!("[{}]", items.join(","));
            let Some(r) = append(&mut http, &stream, body, members.len()).await else { continue };
            // The location names the first event of the write.
            let first = (r.status == 201)
                .then(|| r.header("location").and_then(|l| l.rsplit('/').next()?.parse::<i64>().ok()))
                .flatten();
            if let Some(first) = first {
                appended += count as u64;
                written.extend((first..first + count as i64).map(|n| (n, stream.clone())));
            }
        }
        shared.note_now("projections", format!("producer: {appended} events appended, {linked} links"));
        let _ = setup.await;
        // The projections catch up while this host waits (the run lasts as long as its hosts).
        tokio::time::sleep(DRAIN).await;
        let seen = final_states(&members).await;
        shared.note_now(
            "projections",
            format!(
                "JavaScript projections: {} partition states read; {}",
                seen.states.len(),
                seen.statuses.join("; ")
            ),
        );
        let ready = std::mem::take(&mut record.borrow_mut().ready);
        *record.borrow_mut() = JsSeen { ready, ..seen };
        Ok(())
    });
    seen
}

/// Sends `req()` to the members (moving on after a failure, a redirect or "not ready") until the
/// answer's status is one of `done` or the simulated clock passes `deadline` µs (`Err`: the last
/// answer).
async fn until(
    http: &mut Members,
    req: impl Fn() -> http::Request<http_body_util::Full<bytes::Bytes>>,
    done: &[u16],
    deadline: u64,
) -> Result<crate::client::Resp, String> {
    let mut last = "no answer".to_string();
    while now_us() < deadline {
        match http.send(req()).await {
            Some(r) if done.contains(&r.status) => return Ok(r),
            Some(r) => last = format!("{} {}: {}", r.status, r.reason, String::from_utf8_lossy(&r.body)),
            None => last = "no answer".into(),
        }
        tokio::time::sleep(RETRY).await;
    }
    Err(last)
}

/// Creates the continuous projection `name` stopped, sets its checkpoint threshold and enables
/// it; `Ok` when all three were answered before `deadline` µs, else the step that was not and
/// its last answer. (An answer lost to a fault shows on the next try: `409` for a projection
/// created before.)
async fn set_up(
    members: &[String],
    name: &str,
    query: &str,
    emit: bool,
    deadline: u64,
) -> Result<(), String> {
    let mut http = Members::new(members);
    let create =
        format!("/projections/continuous?name={name}&type=JS&enabled=no&emit={emit}&checkpoints=yes");
    let json = "application/json";
    until(
        &mut http,
        || request("POST", &create, Some(json), Some((json, query.to_owned()))),
        &[201, 409],
        deadline,
    )
    .await
    .map_err(|e| format!("create: {e}"))?;
    let config = format!("/projection/{name}/config");
    let body = format!("{{\"checkpointHandledThreshold\":{JS_CHECKPOINT_EVERY}}}");
    until(&mut http, || request("PUT", &config, Some(json), Some((json, body.clone()))), &[200], deadline)
        .await
        .map_err(|e| format!("config: {e}"))?;
    let enable = format!("/projection/{name}/command/enable");
    until(&mut http, || request("POST", &enable, Some(json), Some((json, String::new()))), &[200], deadline)
        .await
        .map_err(|e| format!("enable: {e}"))?;
    Ok(())
}

/// The JavaScript projections' states (each read from whichever member answers it) and statuses.
async fn final_states(members: &[String]) -> JsSeen {
    let mut http = Members::new(members);
    let mut seen = JsSeen::default();
    let json = Some("application/json");
    let deadline = now_us() + (STATE_TRIES as u64) * RETRY.as_micros() as u64;
    let text = |r: crate::client::Resp| String::from_utf8_lossy(&r.body).into_owned();
    for stream in producer_streams() {
        let path = format!("/projection/{BY_STREAM}/state?partition={stream}");
        if let Ok(r) = until(&mut http, || request("GET", &path, json, None), &[200], deadline).await {
            seen.states.insert(stream, text(r));
        }
    }
    let path = format!("/projection/{TYPES_PROJECTION}/state");
    seen.types =
        until(&mut http, || request("GET", &path, json, None), &[200], deadline).await.ok().map(text);
    for name in [BY_STREAM, TYPES_PROJECTION] {
        let path = format!("/projection/{name}");
        let status = until(&mut http, || request("GET", &path, json, None), &[200], deadline)
            .await
            .ok()
            .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
            .map(|v| {
                format!("{} {}", v["status"].as_str().unwrap_or("?"), v["stateReason"].as_str().unwrap_or(""))
            });
        seen.statuses.push(format!("{name}: {}", status.as_deref().unwrap_or("no answer").trim()));
    }
    seen
}

/// Appends `body` to `stream` at the current member, moving on to the next one (at most
/// `members` tries) while the answer is a redirect to the leader or "not ready" (a cluster's
/// follower or a member in an election).
async fn append(
    http: &mut Members,
    stream: &str,
    body: String,
    members: usize,
) -> Option<crate::client::Resp> {
    let events = "application/vnd.eventstore.events+json";
    let mut last = None;
    for _ in 0..members {
        let r = http
            .send(request("POST", &format!("/streams/{stream}"), None, Some((events, body.clone()))))
            .await;
        match r {
            Some(r) if r.status == 307 || r.status == 503 => last = Some(r),
            other => return other,
        }
    }
    last
}

/// What the node holds at the end of a run: its log (every record, in log order) and the output
/// streams of [`outputs`] (their events' texts).
pub struct Outcome {
    /// The log as the projections read it.
    pub log: Vec<Source>,
    /// The output streams.
    pub outputs: BTreeMap<String, Vec<String>>,
    /// The streams [`BY_STREAM`] emits to (`simclosed-{stream}`), by name.
    pub emitted: BTreeMap<String, Vec<String>>,
}

impl Outcome {
    /// Reads the node (of a cluster, the running member with the longest committed log, where
    /// the last leader's projections wrote); `Err` when none runs or a read fails.
    pub fn read(rigs: &[Rig]) -> Result<Outcome, String> {
        let node = rigs
            .iter()
            .filter_map(|r| r.shared.node.borrow().clone())
            .max_by_key(|n| n.store().log().committed())
            .ok_or("no node is running at the end")?;
        let store = node.store();
        let wall = annal::env::Clock::wall_micros(&*rigs[0].clock);
        let mut log = Vec::new();
        let mut at = 0;
        loop {
            let slice =
                store.read_all_forward(at, PAGE, false, wall).map_err(|e| format!("read $all: {e}"))?;
            log.extend(slice.events.into_iter().map(|e| {
                let e = e.event;
                Source {
                    stream: e.stream,
                    number: e.event_number,
                    event_type: e.event_type,
                    data: e.data.to_vec(),
                    metadata: e.metadata.to_vec(),
                }
            }));
            if slice.is_end || slice.next_position <= at {
                break;
            }
            at = slice.next_position;
        }
        let mut read = BTreeMap::new();
        let emitted: Vec<String> =
            producer_streams().into_iter().map(|s| format!("{}{s}", js::CLOSED_PREFIX)).collect();
        for name in outputs().into_iter().chain(emitted.iter().cloned()) {
            let mut texts = Vec::new();
            let mut from = 0;
            loop {
                let slice = match store.read_forward(&name, from, PAGE, false, wall) {
                    Ok(s) => s,
                    Err(annal::store::ReadError::NoStream) => break,
                    Err(e) => return Err(format!("read {name}: {e}")),
                };
                texts
                    .extend(slice.events.iter().map(|e| String::from_utf8_lossy(&e.event.data).into_owned()));
                if slice.is_end_of_stream || slice.next_event_number <= from {
                    break;
                }
                from = slice.next_event_number;
            }
            read.insert(name, texts);
        }
        let emitted = emitted.iter().filter_map(|n| Some((n.clone(), read.remove(n)?))).collect();
        Ok(Outcome { log, outputs: read, emitted })
    }
}
