//! Writes resume: **after a recovery (every member running, the links between them healthy, a
//! leader elected), a write is acknowledged within [`BOUND`] of simulated time**. An election
//! alone does not satisfy it: a leader that stops committing (its groups written, shipped and
//! held by the followers, but never counted durable by itself) is elected, answers reads and
//! refuses nothing, and yet acknowledges no write again.
//!
//! The recoveries are the instants the harness recorded ([`crate::survivor`]); the clients keep
//! appending throughout, so an acknowledged append (`201`) completing in `(r, r + BOUND]` is
//! what each recovery `r` needs. A recovery too close to the end of the workload phase for the
//! clients to have had [`BOUND`] is not judged.

use std::time::Duration;

use crate::history::{History, OpKind, Outcome};

/// How long after a recovery an append must be acknowledged.
pub const BOUND: Duration = Duration::from_secs(5);

/// The violations: each recovery in `recoveries` (µs) that ends before `end` (µs, when the
/// clients stop) by [`BOUND`] or more, with no append acknowledged within [`BOUND`] after it.
pub fn check(h: &History, recoveries: &[u64], end: u64) -> Vec<String> {
    let bound = BOUND.as_micros() as u64;
    let mut acked: Vec<u64> = h
        .ops
        .iter()
        .filter(|o| matches!(o.kind, OpKind::Append { .. }) && matches!(o.outcome, Outcome::Appended { .. }))
        .map(|o| o.complete)
        .collect();
    acked.sort_unstable();
    let mut failures = Vec::new();
    for &r in recoveries.iter().filter(|&&r| r + bound <= end) {
        let next = acked.get(acked.partition_point(|&t| t <= r)).copied();
        if next.is_none_or(|t| t > r + bound) {
            let then = match next {
                Some(t) => format!("the next at {:.3} s", t as f64 / 1e6),
                None => "none for the rest of the run".into(),
            };
            let failed = h
                .ops
                .iter()
                .filter(|o| matches!(o.kind, OpKind::Append { .. }) && o.invoke > r && o.invoke <= r + bound)
                .count();
            failures.push(format!(
                "writes resume: the cluster recovered at {:.3} s (every member running, a leader elected) \
                 but no append was acknowledged within {BOUND:?} ({then}; {failed} appends were sent meanwhile)",
                r as f64 / 1e6
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Ev;

    fn append(h: &mut History, at: u64, done: u64, ok: bool) {
        let ev = Ev { id: [at as u8; 16], ty: "t".into(), data: "{}".into() };
        let id = h.invoke(0, "s0", OpKind::Append { expected: -2, events: vec![ev], retry_of: None }, at);
        let outcome = if ok { Outcome::Appended { first: Some(0) } } else { Outcome::Unknown("500".into()) };
        h.complete(id, outcome, done);
    }

    #[test]
    fn an_acknowledged_append_after_each_recovery_is_required() {
        let mut h = History::default();
        append(&mut h, 1_000_000, 1_100_000, true);
        append(&mut h, 3_000_000, 3_200_000, false);
        append(&mut h, 9_000_000, 9_100_000, true);
        // Recovered at 2 s: nothing acknowledged until 9.1 s.
        let f = check(&h, &[500_000, 2_000_000], 20_000_000);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("at 2.000 s") && f[0].contains("1 appends were sent"), "{f:?}");
        // Recovered at 5 s: 9.1 s is within the bound.
        assert!(check(&h, &[5_000_000], 20_000_000).is_empty());
        // A recovery the run ended too soon after is not judged.
        assert!(check(&h, &[16_000_000], 20_000_000).is_empty());
        // An acknowledgement before the recovery does not count for it.
        assert_eq!(check(&h, &[9_200_000], 20_000_000).len(), 1);
    }
}
