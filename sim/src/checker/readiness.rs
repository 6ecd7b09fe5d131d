//! Readiness (what `/health/ready` answers, as a load balancer or Kubernetes sees it):
//! - **at most one member is ready as the leader at any instant**: a probe that sends writes to
//!   the ready leader never has two to choose from (a leader is ready only while its lease
//!   holds, and a new leader is elected only after the old lease ran out);
//! - **after healing, every member is ready again within [`BOUND`]** (when a quorum kept its
//!   data): a follower that was cut off catches up and says so. The harness lets the cluster
//!   settle until then. Exempt are a member that stopped taking part after a local disk
//!   failure it cannot vouch past, and one that is not running at the end (it refused to start
//!   on a disk it cannot read): both rightly wait for an operator.
//!
//! A member that is down is recorded as not ready (it answers no probe).
//!
//! The harness observes every member after each simulation step ([`Observation`]), recording a
//! member again only when something changed; a member's readiness at an instant is its last
//! observation at or before it.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Observation;

/// How long after the healing every member must be ready: a leader within the election bound,
/// then the followers' catch-up.
pub const BOUND: Duration = Duration::from_secs(30);

/// The instants at which more than one member was ready as the leader.
pub fn check_one_ready_leader(seen: &[Observation]) -> Vec<String> {
    let mut state: BTreeMap<&str, bool> = BTreeMap::new();
    let mut out = Vec::new();
    let mut i = 0;
    while i < seen.len() {
        let at = seen[i].at;
        while i < seen.len() && seen[i].at == at {
            state.insert(seen[i].node.as_str(), seen[i].ready_leader);
            i += 1;
        }
        let leaders: Vec<&str> = state.iter().filter(|(_, r)| **r).map(|(n, _)| *n).collect();
        if leaders.len() > 1 {
            out.push(format!(
                "two members ready as the leader at {:.3} s: {}",
                at as f64 / 1e6,
                leaders.join(" and ")
            ));
            // One report per overlap: wait for it to end.
            while i < seen.len() && state.values().filter(|r| **r).count() > 1 {
                state.insert(seen[i].node.as_str(), seen[i].ready_leader);
                i += 1;
            }
        }
    }
    out
}

/// The members not seen ready within [`BOUND`] of `healed_at` (µs): each must be observed ready
/// at an instant in `[healed_at, healed_at + BOUND]`, or have stayed ready since before the
/// healing (observed ready last, and not observed again), or have stopped after a disk failure.
/// Only members in `running` (up at the end) are judged.
pub fn check_ready_after_healing(
    seen: &[Observation],
    healed_at: u64,
    running: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let deadline = healed_at + BOUND.as_micros() as u64;
    // Per member: (ready in the window, last observation before the healing was ready, seen
    // since, stopped since).
    let mut nodes: BTreeMap<&str, (bool, bool, bool, bool)> = BTreeMap::new();
    for o in seen.iter().filter(|o| running.contains(&o.node)) {
        let e = nodes.entry(o.node.as_str()).or_insert((false, false, false, false));
        if o.at < healed_at {
            e.1 = o.ready;
        } else {
            e.2 = true;
            e.0 |= o.ready && o.at <= deadline;
            e.3 |= o.stopped;
        }
    }
    nodes
        .into_iter()
        .filter(|(_, (in_window, before, since, stopped))| !(*in_window || *stopped || (*before && !*since)))
        .map(|(n, _)| {
            format!("{n} was not ready within {BOUND:?} of the healing at {:.3} s", healed_at as f64 / 1e6)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(at: u64, node: &str, ready: bool, leader: bool) -> Observation {
        Observation {
            at,
            node: node.into(),
            master: leader,
            leading: leader,
            term: 1,
            published: 0,
            commit: 0,
            ready,
            ready_leader: ready && leader,
            stopped: false,
        }
    }

    #[test]
    fn two_ready_leaders_at_one_instant_are_found_once() {
        let handover = [obs(1, "a", true, true), obs(5, "a", false, false), obs(5, "b", true, true)];
        assert!(check_one_ready_leader(&handover).is_empty());
        let both = [
            obs(1, "a", true, true),
            obs(3, "b", true, true),
            obs(4, "c", true, false),
            obs(9, "a", false, false),
        ];
        assert_eq!(check_one_ready_leader(&both).len(), 1);
    }

    #[test]
    fn every_member_must_be_ready_soon_after_healing() {
        let s = 1_000_000;
        let all: std::collections::BTreeSet<String> = ["a", "b"].map(String::from).into();
        let check_ready_after_healing = |seen: &[Observation], at| check_ready_after_healing(seen, at, &all);
        let ok = [obs(1, "a", true, true), obs(2, "b", false, false), obs(3 * s, "b", true, false)];
        assert!(check_ready_after_healing(&ok, 2 * s).is_empty());
        let late = [obs(1, "a", true, true), obs(2, "b", false, false), obs(40 * s, "b", true, false)];
        assert_eq!(check_ready_after_healing(&late, 2 * s).len(), 1);
        let lost = [obs(1, "a", true, true), obs(3 * s, "a", false, false)];
        assert_eq!(check_ready_after_healing(&lost, 2 * s).len(), 1, "not ready after the healing");
        let stayed = [obs(1, "a", true, true)];
        assert!(check_ready_after_healing(&stayed, 2 * s).is_empty());
        let stopped =
            [obs(1, "a", true, true), Observation { stopped: true, ..obs(3 * s, "a", false, false) }];
        assert!(check_ready_after_healing(&stopped, 2 * s).is_empty());
        let down = std::collections::BTreeSet::from(["b".to_owned()]);
        assert!(super::check_ready_after_healing(&lost, 2 * s, &down).is_empty(), "a is not running");
    }
}
