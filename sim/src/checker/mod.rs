//! The invariant checkers: each runs over what a finished run recorded (its history, its final
//! reads, the panics caught) and reports every violation of one invariant, as a self-contained
//! explanation. One file per invariant, so a new scenario (a cluster, say) adds checks by calling
//! these on what it recorded, and a new invariant is a new file:
//!
//! - [`no_panic`]: the node never panics, whatever the faults.
//! - [`integrity`]: nothing corrupt is served (every event read is one that was written, intact,
//!   in order).
//! - [`durability`]: nothing acknowledged is lost (a full read after an acknowledged append holds
//!   its events).
//! - [`linearizability`]: every stream is linearizable against `annal_model::Model`.
//! - [`liveness`]: the node serves again once every fault is healed.
//! - [`protocol`]: nothing unexpected is answered (an answer outside the protocol is a harness or
//!   protocol bug).
//! - [`acks`]: a single node acknowledges groups in log order, each only once it is durable
//!   (reported by the node as it acknowledges, compared with the simulated disk at that instant).
//!
//! A cluster run checks its one shared history with all of these (reads go to the leader, so
//! linearizability covers the whole cluster), and adds, from what the harness observed of the
//! members ([`Observation`]) and read of their logs at the end:
//!
//! - [`one_leader`]: at most one leader per term.
//! - [`published`]: no node publishes a position no leader committed.
//! - [`election`]: after healing, a leader within a bound of simulated time.
//! - [`convergence`]: after healing, every member's committed log is the same, byte for byte.
//!
//! The recovery scenario adds:
//!
//! - [`writes_resume`]: after each recovery (every member running, a leader elected), a write
//!   is acknowledged within a bound; an election alone does not satisfy it.
//!
//! The maintenance scenarios add:
//!
//! - [`backup`]: every completed backup restores into a node that starts, serves nothing
//!   corrupt and holds a prefix of the log with every append acknowledged before it began.
//! - [`redaction`]: after a crash at any step of a redaction the chunk is the old or the new one,
//!   every other event reads unchanged, and only the exact redaction is switched in.
//!
//! The persistent subscription scenario adds:
//!
//! - [`subscriptions`]: every message is acknowledged, skipped or parked by the end; no more
//!   than `maxRetryCount + 1` deliveries per incarnation; parked messages come back on
//!   `replayParked`; the checkpoint never passes a message that is not done; Pinned never gives
//!   one stream to two consumers at once.
//!
//! [`reopen`] (opening a database held as files in a fresh node) is not an invariant, nor is
//! [`stream_model`]: it is the model of one stream that the linearizability
//! search runs on.
//!
//! [`check`] runs all the history checks of one node. A linearizability search that runs out of
//! its step budget is *inconclusive*: neither a pass nor a failure, reported in
//! [`Report::inconclusive`] so that runs and campaigns can show it.
//!
//! Invariant: every check is a pure function of its inputs (no clock, no randomness, budgets in
//! steps, not time), so a seed's verdict replays exactly.

pub mod acks;
pub mod backup;
pub mod convergence;
pub mod durability;
pub mod election;
pub mod integrity;
pub mod linearizability;
pub mod liveness;
pub mod no_panic;
pub mod one_leader;
pub mod projections;
pub mod protocol;
pub mod published;
pub mod readiness;
pub mod redaction;
pub mod reopen;
pub mod scavenges;
pub mod stream_model;
pub mod subscriptions;
pub mod writes_resume;

use crate::history::History;

/// What the checks found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations, each a self-contained explanation.
    pub failures: Vec<String>,
    /// Streams whose linearizability search ran out of budget (neither passed nor failed).
    pub inconclusive: Vec<String>,
    /// Search steps taken (model evaluations), over all streams.
    pub steps: u64,
}

/// What the harness saw of one cluster member after a simulation step (recorded when it changed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// Simulated time, µs.
    pub at: u64,
    /// The node host.
    pub node: String,
    /// Whether it was `Master`.
    pub master: bool,
    /// Whether it was in a leader's role (`Master`, or `PreMaster`: elected, committing its
    /// term's epoch record): it publishes only what a quorum holds.
    pub leading: bool,
    /// Its term (epoch number).
    pub term: u64,
    /// Its published log position (the end of what its readers see).
    pub published: u64,
    /// The commit position its cluster core knows (a leader's: what a quorum holds).
    pub commit: u64,
    /// Whether `/health/ready` would answer 200 (it serves its role).
    pub ready: bool,
    /// Whether it would answer 200 as the leader (`Master` with a valid lease).
    pub ready_leader: bool,
    /// Whether it stopped taking part after a local failure it cannot vouch past (its disk
    /// failed): it is rightly not ready until an operator restarts it.
    pub stopped: bool,
}

/// Runs the cluster checks on what the harness `seen` of the members, the members' committed
/// `logs` at the end, and the healing instant; `electable` says whether a quorum kept its data
/// (only then is a leader after healing required, and, with `ready_after`, every member
/// running at the end ready: given when no member's data was destroyed).
pub fn check_cluster(
    seen: &[Observation],
    logs: &[convergence::Committed],
    healed_at: u64,
    electable: bool,
    ready_after: Option<&std::collections::BTreeSet<String>>,
) -> Vec<String> {
    let mut f = one_leader::check(seen);
    f.extend(published::check(seen));
    f.extend(readiness::check_one_ready_leader(seen));
    if electable {
        f.extend(election::check(seen, healed_at));
        if let Some(running) = ready_after {
            f.extend(readiness::check_ready_after_healing(seen, healed_at, running));
        }
    }
    f.extend(convergence::check(logs));
    f
}

/// Runs every history check on one node's `history`. `final_reads` are the ids of the final reads
/// (one per stream of `streams`); `liveness` requires them to have been answered. `budget` bounds
/// the linearizability search's steps per stream.
pub fn check(
    history: &History,
    final_reads: &[usize],
    streams: usize,
    liveness: bool,
    budget: u64,
) -> Report {
    let mut r = Report::default();
    r.failures.extend(integrity::check(history));
    r.failures.extend(durability::check(history));
    r.failures.extend(protocol::check(history));
    if liveness {
        r.failures.extend(liveness::check(history, final_reads, streams));
    }
    let lin = linearizability::check(history, final_reads, budget);
    r.failures.extend(lin.failures);
    r.inconclusive = lin.inconclusive;
    r.steps = lin.steps;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Ev, OpKind, Outcome, ReadEv};
    use crate::workload::FULL_READ;

    fn ev(b: u8) -> Ev {
        Ev { id: [b; 16], ty: "t".into(), data: format!("{{\"b\":{b}}}") }
    }

    fn read(h: &History, id: usize) -> Vec<ReadEv> {
        let OpKind::Append { events, .. } = &h.ops[id].kind else { unreachable!() };
        events
            .iter()
            .enumerate()
            .map(|(i, e)| ReadEv { number: i as i64, id: e.id, data: e.data.clone() })
            .collect()
    }

    #[test]
    fn accepts_a_linearizable_history_with_an_unknown_write() {
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -1, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Unknown("timeout".into()), 50);
        let b = h.invoke(1, "s", OpKind::Append { expected: -1, events: vec![ev(2)], retry_of: None }, 10);
        h.complete(b, Outcome::WrongVersion { current: Some(0) }, 40);
        let evs = read(&h, a);
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 60);
        h.complete(r, Outcome::Read { events: evs }, 70);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.is_empty(), "{:?}", rep.failures);
    }

    #[test]
    fn finds_a_lost_ack_a_stale_read_and_corruption() {
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        h.restart(15);
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 20);
        h.complete(r, Outcome::NoStream, 30);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.iter().any(|f| f.contains("acknowledged append lost")), "{:?}", rep.failures);
        assert!(rep.failures.iter().any(|f| f.contains("not linearizable")), "{:?}", rep.failures);

        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let mut evs = read(&h, a);
        evs[0].data = "{\"b\":3}".into();
        let r = h.invoke(1, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 20);
        h.complete(r, Outcome::Read { events: evs }, 30);
        let rep = check(&h, &[], 1, false, 100_000);
        assert!(rep.failures.iter().any(|f| f.contains("corrupted data served")), "{:?}", rep.failures);
    }

    #[test]
    fn restarts_make_any_retries_write_again() {
        // Before a restart a retry with `any` is idempotent; after one it writes a duplicate.
        let mut h = History::default();
        let a = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h.complete(a, Outcome::Appended { first: Some(0) }, 10);
        h.restart(20);
        let b = h.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: Some(a) }, 30);
        h.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(check(&h, &[], 1, false, 100_000).failures.is_empty());
        let mut h2 = History::default();
        let a = h2.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: None }, 0);
        h2.complete(a, Outcome::Appended { first: Some(0) }, 10);
        let b =
            h2.invoke(0, "s", OpKind::Append { expected: -2, events: vec![ev(1)], retry_of: Some(a) }, 30);
        h2.complete(b, Outcome::Appended { first: Some(1) }, 40);
        assert!(!check(&h2, &[], 1, false, 100_000).failures.is_empty());
    }

    #[test]
    fn liveness_requires_answered_final_reads() {
        let mut h = History::default();
        let r = h.invoke(0, "s", OpKind::ReadForward { from: 0, count: FULL_READ }, 0);
        h.complete(r, Outcome::Refused("503".into()), 10);
        assert!(check(&h, &[r], 1, true, 1000).failures.iter().any(|f| f.contains("liveness")));
        assert!(check(&h, &[r], 1, false, 1000).failures.is_empty());
    }
}
