//! The scavenge scenario ([`crate::scenario::Scenario::Scavenge`], a cluster of three): while the
//! clients write and delete under the cluster's faults, an *operator* host asks members for
//! scavenges now and then (`POST /admin/scavenge`, every chunk; sometimes `syncOnly=true`), the
//! followers as often as the leader, as an operator scavenges every node in turn. Each member
//! scavenges its own copy; the history and new scavenge points go through the leader.
//!
//! Every answer is recorded ([`Asked`]); after healing, the harness reads each started run's
//! history from the members' committed logs ([`Outcome::read`]) and
//! [`crate::checker::scavenges`] checks them. Meanwhile the usual checkers judge the clients'
//! history (a scavenge must never change what readers see) and the members' committed logs past
//! the newest scavenge point ([`frontier`]), where no scavenge has touched them.
//!
//! Invariant: every choice comes from the run's seed; the operator acts only through the nodes'
//! HTTP API, and the harness only reads their stores.

// The operator runs on a turmoil client host, whose tokio clock is the simulation's paused clock.
#![allow(clippy::disallowed_methods)]

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::client::{Client, Failure};
use crate::rig::Rig;
use crate::shared::now_us;
use crate::workload::PORT;

/// The operator host's name.
pub const OPERATOR: &str = "operator";
/// How long the operator waits for an answer (a start waits for its history's quorum).
const TIMEOUT: Duration = Duration::from_secs(10);
const AUTH: &str = "Basic YWRtaW46Y2hhbmdlaXQ=";

/// One scavenge the operator asked for.
#[derive(Clone, Debug)]
pub struct Asked {
    /// Simulated time of the request, µs.
    pub at: u64,
    /// The member asked (index among the rigs).
    pub member: usize,
    /// `syncOnly=true`.
    pub sync_only: bool,
    /// The answer: status, and the run's id for a 200; `None` when there was none (unknown).
    pub answer: Option<(u16, Option<String>)>,
}

/// How long the round after healing may take.
const FINAL_ROUND: Duration = Duration::from_secs(30);

/// Asks `member` for a scavenge and records the answer.
async fn ask(
    client: &mut Client,
    member: usize,
    name: &str,
    sync_only: bool,
    shared: &crate::shared::Shared,
    rec: &Recorded,
) -> Result<Option<(u16, Option<String>)>, Box<dyn std::error::Error>> {
    let path = if sync_only { "/admin/scavenge?syncOnly=true" } else { "/admin/scavenge?threshold=-1" };
    let req = http::Request::post(path)
        .header("authorization", AUTH)
        .header("content-length", "0")
        .body(Full::new(Bytes::new()))?;
    let at = now_us();
    let (answer, why) = match client.send(req).await {
        Ok(r) => {
            let id = (r.status == 200)
                .then(|| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
                .flatten()
                .and_then(|v| v["scavengeId"].as_str().map(str::to_owned));
            (Some((r.status, id)), r.reason.clone())
        }
        Err(Failure::NotSent(e)) => (Some((0, None)), e),
        Err(Failure::Unknown(e)) => (None, e),
    };
    shared.note_now("operator", format!("scavenge on {name} (syncOnly {sync_only}): {answer:?} {why}"));
    rec.borrow_mut().push(Asked { at, member, sync_only, answer: answer.clone() });
    Ok(answer)
}

/// Whether a scavenge runs on the member (`GET /admin/scavenge/current`); `None`: no answer.
async fn running(client: &mut Client) -> Option<bool> {
    let req = http::Request::get("/admin/scavenge/current")
        .header("authorization", AUTH)
        .body(Full::new(Bytes::new()))
        .ok()?;
    let r = client.send(req).await.ok().filter(|r| r.status == 200)?;
    let v: serde_json::Value = serde_json::from_slice(&r.body).ok()?;
    Some(v["scavengeId"].as_str().is_some_and(|id| !id.is_empty()))
}

/// What the operator asked, shared with the harness.
pub type Recorded = Rc<RefCell<Vec<Asked>>>;

/// Starts the operator: from a seeded moment, every 0.5 to 2.5 s a scavenge on a seeded member;
/// after healing, one round over every member.
pub fn start(sim: &mut turmoil::Sim, rigs: &[Rig], duration: Duration) -> Recorded {
    let record: Recorded = Rc::default();
    let members: Vec<String> = rigs.iter().map(|r| r.name.clone()).collect();
    let (shared, seed, rec) = (rigs[0].shared.clone(), rigs[0].seed, record.clone());
    sim.client(OPERATOR, async move {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5ca7_0000_0000_000c);
        let mut clients: Vec<Client> = members.iter().map(|m| Client::new(m, PORT, TIMEOUT)).collect();
        let end = duration.as_micros() as u64;
        tokio::time::sleep(Duration::from_millis(rng.gen_range(500..2000))).await;
        while now_us() < end {
            let member = rng.gen_range(0..members.len());
            let sync_only = rng.gen_ratio(1, 4);
            ask(&mut clients[member], member, &members[member], sync_only, &shared, &rec).await?;
            tokio::time::sleep(Duration::from_millis(rng.gen_range(500..2500))).await;
        }
        // After healing, as after an incident: every member in turn, followers and leader alike,
        // until it has started one (or one runs there), within FINAL_ROUND.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let deadline = now_us() + FINAL_ROUND.as_micros() as u64;
        let mut order: Vec<usize> = (0..members.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.gen_range(0..=i));
        }
        for member in order {
            while now_us() < deadline {
                let answer =
                    ask(&mut clients[member], member, &members[member], false, &shared, &rec).await?;
                if matches!(answer, Some((200 | 400, _))) {
                    // One member at a time: its run ends before the next member is asked.
                    while now_us() < deadline && running(&mut clients[member]).await != Some(false) {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        Ok(())
    });
    record
}

/// What the members' committed logs hold of one started run's history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// The run's id.
    pub id: String,
    /// The event types of `$scavenges-{id}`, in order, on the member that has the most of it.
    pub types: Vec<String>,
}

/// The histories of the started runs, read after healing.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// One per run answered 200 (with its id).
    pub histories: Vec<History>,
}

impl Outcome {
    /// Reads, from every running member's committed records, the history of each run in
    /// `asked` that was answered 200.
    pub fn read(rigs: &[Rig], asked: &[Asked]) -> Outcome {
        let nodes: Vec<_> = rigs.iter().filter_map(|r| r.shared.node.borrow().clone()).collect();
        let histories = asked
            .iter()
            .filter_map(|a| match &a.answer {
                Some((200, Some(id))) => Some(id.clone()),
                _ => None,
            })
            .map(|id| {
                let stream = format!("$scavenges-{id}");
                let types = nodes
                    .iter()
                    .filter_map(|n| {
                        n.store().read_forward(&stream, 0, 100, false, n.env().clock.wall_micros()).ok()
                    })
                    .map(|page| {
                        page.events.iter().map(|e| e.event.event_type.to_string()).collect::<Vec<_>>()
                    })
                    .max_by_key(Vec::len)
                    .unwrap_or_default();
                History { id, types }
            })
            .collect();
        Outcome { histories }
    }
}

/// Where the members' committed logs are untouched by any scavenge: the start of the chunk after
/// the newest scavenge point any running member has (0 with none). A point completes its chunk,
/// so this is a record boundary on every member.
pub fn frontier(rigs: &[Rig]) -> u64 {
    rigs.iter()
        .filter_map(|r| r.shared.node.borrow().clone())
        .filter_map(|n| {
            let now = n.env().clock.wall_micros();
            let e = n.store().read_event(annal::store::SCAVENGE_POINTS, -1, false, now).ok()??;
            let size = n.store().log().chunk_size();
            Some((e.event.position / size + 1) * size)
        })
        .max()
        .unwrap_or(0)
}
