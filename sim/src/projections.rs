//! The projections scenario ([`crate::scenario::Scenario::Projections`]): the node runs the five
//! system projections (`--run-projections System --start-standard-projections`) while a producer
//! writes streams of a few categories, beside the usual clients, under the node's fault plan
//! (crashes, power losses, disk faults).
//!
//! The **producer** host appends, every 20 to 80 ms of simulated time, one to three events to a
//! stream `{category}-{k}` ([`CATEGORIES`], [`STREAMS_PER_CATEGORY`]) with types from [`TYPES`],
//! a third of them with a `$correlationId` of [`CORRELATIONS`] in their metadata; or a link
//! (`$>`) to an event it wrote before into a stream of category [`MIX`]. An append whose outcome
//! is unknown is not retried: what counts is what the log holds.
//!
//! After the workload phase (and the healing restart) the producer stops and the projections get
//! [`DRAIN`] to catch up. Then the harness reads the node's whole log and the projections' output
//! streams from its store ([`Outcome::read`]); [`crate::checker::projections`] compares them with
//! the reference fold of the `model` crate.
//!
//! Invariant: every choice comes from the run's seed; the producer acts only through the node's
//! HTTP API, and the harness only reads the node's store once the run is over.

// The producer runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::time::Duration;

use annal_model::projections::Source;
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

/// Starts the producer host for the node of `rigs[0]`.
pub fn start(sim: &mut turmoil::Sim, rigs: &[Rig], duration: Duration) {
    let members: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    let (shared, seed) = (rigs[0].shared.clone(), rigs[0].seed);
    let end = duration.as_micros() as u64;
    sim.client(PRODUCER, async move {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x9e0_0000_0000_0007);
        let mut http = Members::new(&members);
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
        // The projections catch up while this host waits (the run lasts as long as its hosts).
        tokio::time::sleep(DRAIN).await;
        Ok(())
    });
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
        for name in outputs() {
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
        Ok(Outcome { log, outputs: read })
    }
}
