//! Durability: **nothing acknowledged is lost**. In a stream that is never deleted, a full read
//! (from event 0, reaching the end of the stream) that starts after an append was acknowledged
//! contains that append's events, whatever crashes, power losses and disk faults came between.
//!
//! Deleted streams are left to [`linearizability`](super::linearizability), which knows what a
//! delete hides.

use std::collections::HashSet;

use crate::history::{short_id, History, OpKind, Outcome};
use crate::workload::FULL_READ;

/// The violations in `h` (at most one per read: the first lost append it misses).
pub fn check(h: &History) -> Vec<String> {
    let mut failures = Vec::new();
    let deleted: HashSet<&str> =
        h.ops.iter().filter(|o| matches!(o.kind, OpKind::Delete { .. })).map(|o| o.stream.as_str()).collect();
    for read in &h.ops {
        if deleted.contains(read.stream.as_str())
            || read.kind != (OpKind::ReadForward { from: 0, count: FULL_READ })
        {
            continue;
        }
        let got: HashSet<[u8; 16]> = match &read.outcome {
            Outcome::Read { events } if events.len() < FULL_READ => events.iter().map(|e| e.id).collect(),
            Outcome::NoStream => HashSet::new(),
            _ => continue,
        };
        for ack in h.ops.iter().filter(|o| o.stream == read.stream && o.complete < read.invoke) {
            if let (OpKind::Append { events, .. }, Outcome::Appended { .. }) = (&ack.kind, &ack.outcome) {
                if let Some(e) = events.iter().find(|e| !got.contains(&e.id)) {
                    failures.push(format!(
                        "acknowledged append lost: {ack} (event {}) is missing from later read {read}",
                        short_id(&e.id)
                    ));
                    return failures;
                }
            }
        }
    }
    failures
}
