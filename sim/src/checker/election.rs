//! A leader after healing: **once every fault is healed, the cluster elects a leader within a
//! bound of simulated time** ([`BOUND`]). After the healing every node restarts at once, so a
//! leader observed after the healing instant is one elected then. Required only when a quorum of
//! members kept its data (a plan that destroys committed data may leave a node that rightly
//! refuses to start).

use std::time::Duration;

use super::Observation;

/// How long after the healing a leader must exist: a few election timeouts.
pub const BOUND: Duration = Duration::from_secs(15);

/// The violation, if no node was seen as `Master` within [`BOUND`] of `healed_at` (µs).
pub fn check(seen: &[Observation], healed_at: u64) -> Vec<String> {
    let deadline = healed_at + BOUND.as_micros() as u64;
    match seen.iter().find(|o| o.master && o.at >= healed_at) {
        Some(o) if o.at <= deadline => Vec::new(),
        Some(o) => vec![format!(
            "no leader within {BOUND:?} of the healing at {:.3} s: the first was {} at {:.3} s",
            healed_at as f64 / 1e6,
            o.node,
            o.at as f64 / 1e6
        )],
        None => vec![format!(
            "no leader after the healing at {:.3} s (none by the end of the run)",
            healed_at as f64 / 1e6
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_a_leader_soon_after_healing() {
        let o = |at: u64, master: bool| Observation {
            at,
            node: "node1".into(),
            master,
            leading: master,
            term: 1,
            published: 0,
            commit: 0,
            ready: master,
            ready_leader: master,
            stopped: false,
        };
        assert!(check(&[o(10, true), o(2_000_000, true)], 1_000_000).is_empty());
        assert_eq!(check(&[o(10, true)], 1_000_000).len(), 1);
        assert_eq!(check(&[o(100_000_000, true)], 1_000_000).len(), 1);
    }
}
