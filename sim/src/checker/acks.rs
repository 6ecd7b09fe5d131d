//! Acknowledged groups: **a single node acknowledges groups of writes in log order, and each one
//! only once it is durable**. The node reports every group it acknowledges (its log positions,
//! through `annal::buggify::acknowledged`); at that instant the harness looks at what a power
//! loss would leave on the simulated disk ([`Ack`]): `writer.chk` must already name the group's end
//! and the group's bytes in its chunk file must already be durable as written. Within one run of
//! the node (between restarts) each group must start at or after the end of the group
//! acknowledged before it.
//!
//! This sees what the history checks can only infer: with the commit pipeline, a group's
//! acknowledgement waits for its own data flush and for the `writer.chk` flush that names it; a
//! group acknowledged before either (or after a failed flush) is caught here at once, even when
//! no later crash happens to lose it.

/// One acknowledged group, and what the disk held durably when it was acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ack {
    /// Simulated time, µs.
    pub at: u64,
    /// Which run of the node (its boot count).
    pub boot: u64,
    /// The group's first log position.
    pub start: u64,
    /// The log position after it.
    pub end: u64,
    /// The durable value of `writer.chk` (`None`: no durable `writer.chk`).
    pub checkpoint: Option<i64>,
    /// Whether every byte of the group in its chunk files was durable as written (`None`: a
    /// chunk file no longer under its first name, so not checked).
    pub data_durable: Option<bool>,
}

/// The violations in `acks` (in the order acknowledged).
pub fn check(acks: &[Ack]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut prev: Option<&Ack> = None;
    for a in acks {
        let when = a.at as f64 / 1e6;
        if a.checkpoint.is_none_or(|c| c < a.end as i64) {
            failures.push(format!(
                "acknowledged before durable: at {when:.3} s the group {}..{} was acknowledged while \
                 a power loss would have left writer.chk at {}",
                a.start,
                a.end,
                a.checkpoint.map_or("nothing".into(), |c| c.to_string())
            ));
        }
        if a.data_durable == Some(false) {
            failures.push(format!(
                "acknowledged before durable: at {when:.3} s the group {}..{} was acknowledged while \
                 its bytes in the chunk file were not durable",
                a.start, a.end
            ));
        }
        if let Some(p) = prev.filter(|p| p.boot == a.boot && a.start < p.end) {
            failures.push(format!(
                "acknowledged out of log order: at {when:.3} s the group {}..{} was acknowledged \
                 after the group {}..{} (at {:.3} s)",
                a.start,
                a.end,
                p.start,
                p.end,
                p.at as f64 / 1e6
            ));
        }
        prev = Some(a);
        if failures.len() >= 5 {
            break;
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(at: u64, boot: u64, start: u64, end: u64, checkpoint: i64, data: bool) -> Ack {
        Ack { at, boot, start, end, checkpoint: Some(checkpoint), data_durable: Some(data) }
    }

    #[test]
    fn groups_in_order_and_durable_pass() {
        let ok =
            [ack(1, 1, 0, 100, 100, true), ack(2, 1, 100, 150, 300, true), ack(3, 2, 150, 200, 200, true)];
        assert!(check(&ok).is_empty());
    }

    #[test]
    fn an_early_or_unordered_acknowledgement_fails() {
        let chk = [ack(1, 1, 0, 100, 40, true)];
        assert!(check(&chk)[0].contains("writer.chk at 40"));
        let data = [ack(1, 1, 0, 100, 100, false)];
        assert!(check(&data)[0].contains("not durable"));
        let order = [ack(1, 1, 100, 200, 200, true), ack(2, 1, 0, 100, 200, true)];
        assert!(check(&order)[0].contains("out of log order"));
        // A new run of the node starts its own order.
        let restarted = [ack(1, 1, 100, 200, 200, true), ack(2, 2, 150, 180, 200, true)];
        assert!(check(&restarted).is_empty());
    }
}
