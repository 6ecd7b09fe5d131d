//! Liveness: **the node serves again once every fault is healed**. After the healing (every
//! fault window closed, disk faults off, a last power loss and restart), the final full read of
//! every stream is answered (200, 404 or 410), within the final phase's deadline.
//!
//! Asked for only when the fault plan leaves the data recoverable: a plan that destroys committed
//! data (`FaultPlan::destructive`) may rightly leave a node that refuses to start.

use crate::history::{History, Outcome};

/// The violations in `h`, given the ids of its final reads and the number of streams.
pub fn check(h: &History, final_reads: &[usize], streams: usize) -> Vec<String> {
    let mut failures = Vec::new();
    if final_reads.len() < streams {
        failures.push(format!(
            "liveness: only {} of {streams} final reads ran after every fault was healed",
            final_reads.len()
        ));
    }
    for &id in final_reads {
        let op = &h.ops[id];
        if !matches!(op.outcome, Outcome::Read { .. } | Outcome::NoStream | Outcome::Deleted) {
            failures.push(format!("liveness: the node did not serve after every fault was healed: {op}"));
        }
    }
    failures
}
