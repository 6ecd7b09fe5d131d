//! One leader per term: **at most one node is elected in any term (epoch number)**. The harness
//! observes every cluster member's state and term after each simulation step ([`Observation`]);
//! two different nodes seen leading (`PreMaster`: elected, committing its term's epoch record, or
//! `Master`) with the same term is a split brain: both could write records the other never sees.
//!
//! A vote that is not durable (a node that votes, loses the vote in a power loss, and votes again
//! in the same term for another candidate) is the classic way to break this.

use std::collections::BTreeMap;

use super::Observation;

/// The violations in `seen` (one per term with more than one leader).
pub fn check(seen: &[Observation]) -> Vec<String> {
    let mut leaders: BTreeMap<u64, BTreeMap<&str, u64>> = BTreeMap::new();
    for o in seen.iter().filter(|o| o.leading) {
        leaders.entry(o.term).or_default().entry(o.node.as_str()).or_insert(o.at);
    }
    leaders
        .into_iter()
        .filter(|(_, nodes)| nodes.len() > 1)
        .map(|(term, nodes)| {
            let who: Vec<String> =
                nodes.iter().map(|(n, at)| format!("{n} (from {:.3} s)", *at as f64 / 1e6)).collect();
            format!("two leaders in one term: term {term} was led by {}", who.join(" and "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(at: u64, node: &str, master: bool, term: u64) -> Observation {
        Observation {
            at,
            node: node.into(),
            master,
            leading: master,
            term,
            published: 0,
            commit: 0,
            ready: master,
            ready_leader: master,
            stopped: false,
        }
    }

    #[test]
    fn finds_two_leaders_of_one_term() {
        let ok = [obs(1, "node1", true, 2), obs(2, "node2", false, 2), obs(3, "node2", true, 3)];
        assert!(check(&ok).is_empty());
        let bad = [obs(1, "node1", true, 2), obs(5, "node2", true, 2)];
        assert_eq!(check(&bad).len(), 1);
    }
}
