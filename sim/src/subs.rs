//! The persistent subscription scenario ([`crate::scenario::Scenario::Subs`]): a producer and
//! competing HTTP consumers of one subscription group, beside the usual clients, under the node's
//! fault plan (crashes, disk faults; in a cluster, failovers too).
//!
//! A *subscriber* host runs:
//! - the **producer**, which appends an event to one of [`SOURCES`] source streams `sp-{k}` and
//!   then a link to it (`$>`, `{n}@sp-{k}`) to [`STREAM`], so the group (which resolves links)
//!   sees events of several streams and Pinned has something to pin;
//! - [`CONSUMERS`] **consumers**, which create the group ([`Plan`]: strategy, `maxRetryCount`
//!   and `messageTimeoutMilliseconds` picked by the seed; small checkpoint counts), poll pages
//!   (`GET /subscriptions/{stream}/{group}/{count}?consumer=…`), and answer each message as the
//!   seed says: acknowledge (one `ack?ids=` per page), nack with Park, Retry, Skip or Stop, or
//!   leave it to time out; now and then a consumer vanishes for seconds and comes back under a
//!   new name (the old one lapses), and consumer 0 asks for `replayParked`.
//!
//! After the workload phase (and the healing restart) the consumers go on acknowledging
//! everything for [`DRAIN`], with one last `replayParked` in the middle, so that every message
//! is done by the end.
//!
//! The harness observes the node between simulation steps ([`observe`]): each new checkpoint
//! event and each new parked link, with the time it was first seen. What the consumers saw and
//! sent, and those observations, are the [`Record`] that [`crate::checker::subscriptions`]
//! checks.
//!
//! Invariant: every choice comes from the run's seed; the consumers act only through the node's
//! HTTP API, and the harness only reads the node's store.

// The subscriber runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Resp};
use crate::rig::Rig;
use crate::shared::{now_us, Shared};
use crate::workload::PORT;

/// The subscribed stream.
pub const STREAM: &str = "subs";
/// The group.
pub const GROUP: &str = "g";
/// Source streams the links point into.
pub const SOURCES: usize = 6;
/// Consumers.
pub const CONSUMERS: usize = 4;
/// How long the consumers go on after the workload phase.
pub const DRAIN: Duration = Duration::from_secs(25);
/// When, after the workload phase, the last `replayParked` is asked for.
const LAST_REPLAY: Duration = Duration::from_secs(14);
/// The subscriber host's name.
pub const SUBSCRIBER: &str = "subscriber";
const AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";
const TIMEOUT: Duration = Duration::from_secs(2);

/// A message id (the link's event id).
pub type Id = [u8; 16];

/// The group's settings for a run, picked by the seed.
#[derive(Clone, Debug)]
pub struct Plan {
    /// `namedConsumerStrategy`.
    pub strategy: &'static str,
    /// `maxRetryCount`.
    pub max_retry: u32,
    /// `messageTimeoutMilliseconds`.
    pub timeout_ms: u64,
}

impl Plan {
    /// The plan of `seed`.
    pub fn of(seed: u64) -> Plan {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5ab5_0000_0000_000b);
        Plan {
            strategy: ["RoundRobin", "DispatchToSingle", "Pinned"][rng.gen_range(0..3)],
            max_retry: rng.gen_range(1..=3),
            timeout_ms: rng.gen_range(4..=20) * 100,
        }
    }

    fn body(&self) -> String {
        format!(
            "{{\"resolveLinktos\":true,\"startFrom\":0,\"messageTimeoutMilliseconds\":{},\"maxRetryCount\":{},\
             \"namedConsumerStrategy\":\"{}\",\"minCheckPointCount\":1,\"maxCheckPointCount\":4,\
             \"checkPointAfterMilliseconds\":300,\"liveBufferSize\":50,\"bufferSize\":40,\"readBatchSize\":20}}",
            self.timeout_ms, self.max_retry, self.strategy
        )
    }
}

/// A page a consumer received: one delivery of each message on it.
#[derive(Clone, Debug)]
pub struct Delivery {
    /// The consumer's name.
    pub consumer: String,
    /// The message.
    pub id: Id,
    /// When the poll was sent (µs).
    pub sent: u64,
    /// When its answer arrived (µs).
    pub recv: u64,
}

/// How a consumer answered a message (in the order a consumer sends its answers to one page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Answer {
    /// `ack`.
    Ack,
    /// `nack?action=Park`.
    Park,
    /// `nack?action=Retry`.
    Retry,
    /// `nack?action=Skip`.
    Skip,
    /// `nack?action=Stop`.
    Stop,
}

impl Answer {
    fn action(self) -> &'static str {
        match self {
            Answer::Ack => "Ack",
            Answer::Park => "Park",
            Answer::Retry => "Retry",
            Answer::Skip => "Skip",
            Answer::Stop => "Stop",
        }
    }
}

/// An answer a consumer sent (whatever became of the request).
#[derive(Clone, Debug)]
pub struct Answered {
    /// The consumer's name.
    pub consumer: String,
    /// The message.
    pub id: Id,
    /// The answer.
    pub what: Answer,
    /// When it was sent (µs).
    pub sent: u64,
}

/// A `replayParked` request.
#[derive(Clone, Debug)]
pub struct Replay {
    /// When it was sent (µs).
    pub sent: u64,
    /// Whether it was answered 200.
    pub ok: bool,
}

/// What the run recorded for the checker.
#[derive(Debug, Default)]
pub struct Record {
    /// The plan.
    pub plan: Option<Plan>,
    /// Every link the producer tried to append: its id and the source stream it points into.
    pub produced: BTreeMap<Id, String>,
    /// Every delivery the consumers saw, in the order they saw them.
    pub deliveries: Vec<Delivery>,
    /// Every answer the consumers sent.
    pub answers: Vec<Answered>,
    /// Every `replayParked` asked for.
    pub replays: Vec<Replay>,
    /// Checkpoints seen in the checkpoint stream: (first seen, µs; value), in the order seen.
    pub checkpoints: Vec<(u64, i64)>,
    /// Parked links seen in the parked stream: (first seen, µs; event number in [`STREAM`]).
    pub parked: Vec<(u64, i64)>,
    /// Per node host: the next event of the checkpoint and parked streams to look at.
    cursors: BTreeMap<String, (i64, i64)>,
    /// Event numbers of the checkpoint and parked streams already recorded (a cluster's members
    /// hold the same committed events).
    seen: std::collections::BTreeSet<(bool, i64)>,
    /// Whether the group was created (or found existing).
    pub created: bool,
}

/// The record of a run, shared by the subscriber host and the harness.
pub type Recorded = Rc<RefCell<Record>>;

pub(crate) fn request(
    method: &str,
    path: &str,
    accept: Option<&str>,
    body: Option<(&str, String)>,
) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::builder().method(method).uri(path).header("authorization", AUTH);
    if let Some(a) = accept {
        b = b.header("accept", a);
    }
    let body = match body {
        Some((ct, text)) => {
            b = b.header("content-type", ct);
            text
        }
        None => String::new(),
    };
    b = b.header("content-length", body.len().to_string());
    b.body(Full::new(Bytes::from(body))).unwrap_or_else(|e| unreachable!("static request parts: {e}"))
}

/// Clients of every member; requests go to the current one, and move on after a failure or a
/// refusal (a follower answers 503 for subscriptions).
pub(crate) struct Members {
    clients: Vec<Client>,
    at: usize,
}

impl Members {
    pub(crate) fn new(members: &[String]) -> Members {
        Members { clients: members.iter().map(|m| Client::new(m, PORT, TIMEOUT)).collect(), at: 0 }
    }

    pub(crate) async fn send(&mut self, req: http::Request<Full<Bytes>>) -> Option<Resp> {
        let k = self.at;
        match self.clients[k].send(req).await {
            Ok(r) if r.status == 503 || r.status == 307 => {
                self.at = (k + 1) % self.clients.len();
                Some(r)
            }
            Ok(r) => Some(r),
            Err(_) => {
                self.at = (k + 1) % self.clients.len();
                None
            }
        }
    }
}

pub(crate) fn random_id(rng: &mut ChaCha8Rng) -> Id {
    let mut id = [0u8; 16];
    rng.fill(&mut id[..]);
    id[6] = (id[6] & 0x0f) | 0x40;
    id[8] = (id[8] & 0x3f) | 0x80;
    id
}

/// Starts the subscriber host for `rigs` (its members: one node, or a cluster's members); returns
/// the record it fills.
pub fn start(sim: &mut turmoil::Sim, rigs: &[Rig], duration: Duration) -> Recorded {
    let record: Recorded = Rc::default();
    let plan = Plan::of(rigs[0].seed);
    record.borrow_mut().plan = Some(plan.clone());
    let members: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    let (shared, seed, rec) = (rigs[0].shared.clone(), rigs[0].seed, record.clone());
    sim.client(SUBSCRIBER, async move {
        shared.note_now("subs", format!("plan {plan:?}"));
        let end = duration.as_micros() as u64;
        let mut tasks =
            vec![tokio::task::spawn_local(producer(seed, members.clone(), shared.clone(), rec.clone(), end))];
        for k in 0..CONSUMERS {
            let (m, s, r, p) = (members.clone(), shared.clone(), rec.clone(), plan.clone());
            tasks.push(tokio::task::spawn_local(consumer(k, seed, m, s, r, p, end)));
        }
        for t in tasks {
            t.await?;
        }
        Ok(())
    });
    record
}

async fn producer(seed: u64, members: Vec<String>, shared: Rc<Shared>, rec: Recorded, end: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5ab5_0000_0000_0001);
    let mut http = Members::new(&members);
    let events = "application/vnd.eventstore.events+json";
    while now_us() < end {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..80))).await;
        let source = format!("sp-{}", rng.gen_range(0..SOURCES));
        let id = random_id(&mut rng);
        let body = format!(
            "[{{\"eventId\":\"{}\",\"eventType\":\"job\",\"data\":{{\"n\":{}}}}}]",
            uuid::Uuid::from_bytes(id),
            rng.gen::<u32>()
        );
        let Some(r) =
            http.send(request("POST", &format!("/streams/{source}"), None, Some((events, body)))).await
        else {
            continue;
        };
        let Some(n) = (r.status == 201)
            .then(|| {
                r.header("location").and_then(|l| l.rsplit('/').next()).and_then(|n| n.parse::<i64>().ok())
            })
            .flatten()
        else {
            continue;
        };
        // The link; an append whose outcome is unknown is not retried (one id, one message).
        let link = random_id(&mut rng);
        rec.borrow_mut().produced.insert(link, source.clone());
        let body = format!(
            "[{{\"eventId\":\"{}\",\"eventType\":\"$>\",\"data\":\"{n}@{source}\"}}]",
            uuid::Uuid::from_bytes(link)
        );
        let r = http.send(request("POST", &format!("/streams/{STREAM}"), None, Some((events, body)))).await;
        if r.as_ref().is_none_or(|r| r.status != 201) {
            shared.note_now("subs", format!("producer: link to {n}@{source}: {:?}", r.map(|r| r.status)));
        }
    }
}

fn group_path() -> String {
    format!("/subscriptions/{STREAM}/{GROUP}")
}

/// The message ids of a competing feed, from each entry's `ack` link.
fn page_ids(body: &[u8]) -> Option<Vec<Id>> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let mut out = Vec::new();
    for e in v.get("entries")?.as_array()? {
        let ack = e.get("links")?.as_array()?.iter().find(|l| l.get("relation") == Some(&"ack".into()))?;
        let id = ack.get("uri")?.as_str()?.rsplit('/').next()?;
        out.push(*uuid::Uuid::parse_str(id).ok()?.as_bytes());
    }
    Some(out)
}

async fn consumer(
    k: usize,
    seed: u64,
    members: Vec<String>,
    shared: Rc<Shared>,
    rec: Recorded,
    plan: Plan,
    end: u64,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5ab5_0000_0000_0100 ^ k as u64);
    let mut http = Members::new(&members);
    let who = format!("sub{k}");
    let mut name = format!("c{k}");
    let mut incarnation = 0u32;
    let stop = end + DRAIN.as_micros() as u64;
    let last_replay = end + LAST_REPLAY.as_micros() as u64;
    let mut replayed_last = false;
    let mut next_replay = rng.gen_range(1_000_000..3_000_000u64);
    tokio::time::sleep(Duration::from_millis(rng.gen_range(0..300))).await;
    while now_us() < stop {
        let now = now_us();
        let draining = now >= end;
        if !rec.borrow().created {
            let r =
                http.send(request("PUT", &group_path(), None, Some(("application/json", plan.body())))).await;
            match r.map(|r| r.status) {
                Some(201 | 409) => {
                    rec.borrow_mut().created = true;
                    shared.note_now(&who, "the group exists");
                }
                s => {
                    shared.note_now(&who, format!("create the group: {s:?}"));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
            continue;
        }
        // Consumer 0 asks for replays now and then, and once more while draining.
        if k == 0 && ((!draining && now >= next_replay) || (!replayed_last && now >= last_replay)) {
            replayed_last |= now >= last_replay;
            next_replay = now + rng.gen_range(1_500_000..4_000_000);
            let r = http.send(request("POST", &format!("{}/replayParked", group_path()), None, None)).await;
            let ok = r.as_ref().is_some_and(|r| r.status == 200);
            rec.borrow_mut().replays.push(Replay { sent: now, ok });
            shared.note_now(&who, format!("replayParked: {:?}", r.map(|r| r.status)));
        }
        // Now and then a consumer vanishes for a while and comes back as a new consumer.
        if !draining && rng.gen_ratio(1, 60) {
            let away = Duration::from_millis(rng.gen_range(1_000..8_000));
            shared.note_now(&who, format!("{name} vanishes for {away:?}"));
            tokio::time::sleep(away).await;
            incarnation += 1;
            name = format!("c{k}.{incarnation}");
            continue;
        }
        let count = rng.gen_range(1..=10);
        let sent = now_us();
        let path = format!("{}/{count}?consumer={name}", group_path());
        let r = http
            .send(request("GET", &path, Some("application/vnd.eventstore.competingatom+json"), None))
            .await;
        let recv = now_us();
        let ids = match r {
            Some(r) if r.status == 200 => match page_ids(&r.body) {
                Some(ids) => ids,
                None => {
                    shared.note_now(&who, "poll: a feed without ack links");
                    Vec::new()
                }
            },
            _ => {
                tokio::time::sleep(Duration::from_millis(rng.gen_range(50..250))).await;
                continue;
            }
        };
        {
            let mut r = rec.borrow_mut();
            for id in &ids {
                r.deliveries.push(Delivery { consumer: name.clone(), id: *id, sent, recv });
            }
        }
        if !ids.is_empty() {
            let short: Vec<String> = ids.iter().map(crate::history::short_id).collect();
            shared.note_now(&who, format!("{name} got [{}]", short.join(" ")));
        }
        if ids.is_empty() {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(20..150))).await;
            continue;
        }
        let mut by: BTreeMap<Answer, Vec<Id>> = BTreeMap::new();
        for id in &ids {
            let what = if draining {
                Some(Answer::Ack)
            } else {
                match rng.gen_range(0..100) {
                    0..=54 => Some(Answer::Ack),
                    55..=66 => Some(Answer::Retry),
                    67..=72 => Some(Answer::Park),
                    73..=78 => Some(Answer::Skip),
                    79..=83 => Some(Answer::Stop),
                    _ => None, // left to time out
                }
            };
            if let Some(w) = what {
                by.entry(w).or_default().push(*id);
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..60))).await;
        for (what, ids) in by {
            let action = what.action();
            let list =
                ids.iter().map(|i| uuid::Uuid::from_bytes(*i).to_string()).collect::<Vec<_>>().join(",");
            let path = match what {
                Answer::Ack => format!("{}/ack?ids={list}", group_path()),
                _ => format!("{}/nack?ids={list}&action={action}", group_path()),
            };
            let sent = now_us();
            {
                let mut r = rec.borrow_mut();
                for id in &ids {
                    r.answers.push(Answered { consumer: name.clone(), id: *id, what, sent });
                }
            }
            let r = http.send(request("POST", &path, None, None)).await;
            let short: Vec<String> = ids.iter().map(crate::history::short_id).collect();
            shared
                .note_now(&who, format!("{name} {action} [{}]: {:?}", short.join(" "), r.map(|r| r.status)));
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..100))).await;
    }
}

/// Looks at what each running node of `rigs` committed to the group's checkpoint and parked
/// streams since the last look, and records what is new (called by the harness between steps).
pub fn observe(rigs: &[Rig], rec: &Recorded, now: u64) {
    let checkpoints = annal::subscriptions::checkpoint_stream(STREAM, GROUP);
    let parked = annal::subscriptions::parked_stream(STREAM, GROUP);
    for r in rigs {
        let Some(node) = r.shared.node.borrow().clone() else { continue };
        let store = node.store();
        let wall = annal::env::Clock::wall_micros(&*r.clock);
        let mut rec = rec.borrow_mut();
        let (mut next_cp, mut next_parked) = rec.cursors.get(&r.name).copied().unwrap_or((0, 0));
        if let Ok(slice) = store.read_forward(&parked, next_parked, 100, false, wall) {
            for e in &slice.events {
                // The link names the event delivered (a link's target); its metadata, the message.
                let meta: serde_json::Value = serde_json::from_slice(&e.event.metadata).unwrap_or_default();
                if let Some(n) = meta.get("subscriptionEventNumber").and_then(serde_json::Value::as_i64) {
                    if rec.seen.insert((false, e.event.event_number)) {
                        rec.parked.push((now, n));
                    }
                }
                next_parked = next_parked.max(e.event.event_number + 1);
            }
        }
        if let Ok(slice) = store.read_forward(&checkpoints, next_cp, 100, false, wall) {
            for e in &slice.events {
                if let Ok(c) = String::from_utf8_lossy(&e.event.data).trim().parse::<i64>() {
                    if rec.seen.insert((true, e.event.event_number)) {
                        rec.checkpoints.push((now, c));
                    }
                }
                next_cp = next_cp.max(e.event.event_number + 1);
            }
        }
        rec.cursors.insert(r.name.clone(), (next_cp, next_parked));
    }
}

/// The events of [`STREAM`] a node holds at the end: event number and (link) id, in order.
pub fn final_stream(rigs: &[Rig]) -> Option<Vec<(i64, Id)>> {
    let node = rigs
        .iter()
        .filter_map(|r| r.shared.node.borrow().clone())
        .max_by_key(|n| n.store().log().committed())?;
    let wall = annal::env::Clock::wall_micros(&*rigs[0].clock);
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let slice = match node.store().read_forward(STREAM, from, 500, false, wall) {
            Ok(s) => s,
            // Nothing was ever linked (a cluster that elected no leader during the workload).
            Err(annal::store::ReadError::NoStream) => return Some(out),
            Err(_) => return None,
        };
        out.extend(slice.events.iter().map(|e| (e.event.event_number, e.event.id)));
        if slice.is_end_of_stream || slice.next_event_number <= from {
            return Some(out);
        }
        from = slice.next_event_number;
    }
}
