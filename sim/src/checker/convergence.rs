//! Convergence: **after healing, every node's committed log is the same, byte for byte**. At the
//! end of a cluster run the harness reads each member's log from position 0 to its published
//! (committed) position, record frames back to back ([`Committed`]); followers write the
//! leader's records at the leader's positions, so for any two members the shorter committed log
//! must be a prefix of the longer one. A divergent tail kept below the committed position, or a
//! record written at the wrong position, shows up here. A member that still lags is not a
//! failure of this check (only a shorter prefix to compare).

/// One member's committed log, as the harness read it.
#[derive(Debug)]
pub struct Committed {
    /// The node host.
    pub node: String,
    /// Its published position.
    pub published: u64,
    /// The frames of its records from 0 up to `published`, or why they could not be read.
    pub frames: Result<Vec<u8>, String>,
}

/// The violations among `logs` (one per pair of members that disagree).
pub fn check(logs: &[Committed]) -> Vec<String> {
    let mut failures = Vec::new();
    let readable: Vec<(&Committed, &Vec<u8>)> =
        logs.iter().filter_map(|c| c.frames.as_ref().ok().map(|f| (c, f))).collect();
    for (i, (a, fa)) in readable.iter().enumerate() {
        for (b, fb) in &readable[i + 1..] {
            let n = fa.len().min(fb.len());
            if let Some(at) = (0..n).find(|&k| fa[k] != fb[k]) {
                failures.push(format!(
                    "committed logs differ: {} (published {}) and {} (published {}) first differ at byte {at} \
                     of their committed records",
                    a.node, a.published, b.node, b.published
                ));
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shorter_log_must_be_a_prefix() {
        let c = |node: &str, f: &[u8]| Committed {
            node: node.into(),
            published: f.len() as u64,
            frames: Ok(f.to_vec()),
        };
        assert!(check(&[c("a", b"abcdef"), c("b", b"abc"), c("c", b"")]).is_empty());
        assert_eq!(check(&[c("a", b"abcdef"), c("b", b"abd")]).len(), 1);
    }
}
