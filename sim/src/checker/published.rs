//! Nothing uncommitted is published: **no node publishes (makes readable) a log position that no
//! leader has committed**. The harness observes every member's published position (the end of
//! what its readers see) and its core's commit position after each simulation step ([`Observation`]); a leader (`Master`, or
//! `PreMaster` committing its term's epoch record) publishes what a quorum holds, a follower at most what its leader told it is committed. So at every instant a
//! non-leader's published position is at most the highest position any leader had committed up
//! to then (the leader's core's commit position, which its store publishes once it has read the
//! records back: a read error may delay that, never the followers). A follower that publishes what it merely holds could serve a read of a record that a
//! new leader later truncates (what EventStoreDB v5 followers do, and Annal must not).
//!
//! Positions are comparable across nodes because followers write the leader's records at the
//! leader's positions.

use super::Observation;

/// The violations in `seen`, in the order observed (at most one per node).
pub fn check(seen: &[Observation]) -> Vec<String> {
    let mut committed = 0u64;
    let mut reported: Vec<&str> = Vec::new();
    let mut failures = Vec::new();
    let mut was_leading: Vec<&str> = Vec::new();
    for o in seen {
        // A leader that committed and stepped down between two observations is seen only after:
        // its core's commit is still the one it reached as leader.
        let stepped_down = !o.leading && was_leading.contains(&o.node.as_str());
        was_leading.retain(|n| *n != o.node);
        if o.leading {
            was_leading.push(&o.node);
        }
        if o.leading || stepped_down {
            committed = committed.max(o.commit);
        }
        if !o.leading && o.published > committed && !reported.contains(&o.node.as_str()) {
            reported.push(&o.node);
            failures.push(format!(
                "uncommitted records published: at {:.3} s {} (not leading, term {}) publishes up to log \
                 position {}, but no leader had committed past {committed}",
                o.at as f64 / 1e6,
                o.node,
                o.term,
                o.published
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(at: u64, node: &str, master: bool, published: u64) -> Observation {
        Observation {
            at,
            node: node.into(),
            master,
            leading: master,
            term: 1,
            published,
            commit: published,
            ready: master,
            ready_leader: master,
            stopped: false,
        }
    }

    #[test]
    fn a_follower_publishes_only_what_a_leader_committed() {
        let ok = [obs(1, "node1", true, 100), obs(2, "node2", false, 100), obs(3, "node3", false, 50)];
        assert!(check(&ok).is_empty());
        let bad = [obs(1, "node1", true, 100), obs(2, "node2", false, 180)];
        assert_eq!(check(&bad).len(), 1);
    }
}
