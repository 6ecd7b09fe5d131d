//! The checkers of a finished run, one function per invariant, each returning the anomalies it
//! found as self-contained explanations:
//!
//! - [`linearizable`]: every stream is linearizable (the simulator's checker, which splits a
//!   stream's history at quiescent points); a history it cannot decide counts as an anomaly.
//! - [`durable`]: every acknowledged append is, after healing, on every node, at the event
//!   numbers it was acknowledged with. An append acknowledged without a quorum is lost when the
//!   nemesis kills or isolates the node that acknowledged it, and shows here.
//! - [`converged`]: after healing, every node's committed log (`$all`) is the same.
//! - [`committed_prefixes`]: every read of `$all` during the run, on any node, is a prefix of the
//!   final log: no node ever served a record that did not stay committed (a divergent tail kept,
//!   a follower publishing what was not committed).
//! - [`delivered`]: the persistent subscription delivered every event of its stream at least once.
//! - [`no_panics`]: no node panicked.
//!
//! Invariant: each check is a pure function of the record (no clock, no network).

use std::collections::{BTreeMap, HashMap};

use annal_sim::history::{History, OpKind, Outcome, ReadEv};

use crate::workload::AllRead;

/// Steps the linearizability search may take per stream (or per segment of one).
pub const LINEARIZABILITY_BUDGET: u64 = 2_000_000;
/// Anomalies a check lists before it only counts the rest.
const LISTED: usize = 10;

/// One node's view after healing.
#[derive(Clone, Debug, Default)]
pub struct FinalView {
    /// The node's HTTP address.
    pub node: String,
    /// Each stream read in full from this node.
    pub streams: BTreeMap<String, Vec<ReadEv>>,
    /// `$all` from the start: (stream, number, id).
    pub all: Vec<(String, i64, String)>,
}

fn cap(mut v: Vec<String>, what: &str) -> Vec<String> {
    if v.len() > LISTED {
        let more = v.len() - LISTED;
        v.truncate(LISTED);
        v.push(format!("… and {more} more {what}"));
    }
    v
}

/// Every stream is linearizable.
pub fn linearizable(h: &History, final_reads: &[usize]) -> Vec<String> {
    let f = annal_sim::checker::linearizability::check(h, final_reads, LINEARIZABILITY_BUDGET);
    let mut out = f.failures;
    for s in f.inconclusive {
        out.push(format!(
            "stream {s}: the linearizability search could not decide its history (counted as a failure)"
        ));
    }
    out
}

/// Every acknowledged append is on every node, at its numbers.
pub fn durable(h: &History, views: &[FinalView]) -> Vec<String> {
    let mut out = Vec::new();
    for op in &h.ops {
        let (OpKind::Append { events, .. }, Outcome::Appended { first: Some(first) }) =
            (&op.kind, &op.outcome)
        else {
            continue;
        };
        for v in views {
            let got = v.streams.get(&op.stream).map(Vec::as_slice).unwrap_or_default();
            for (i, e) in events.iter().enumerate() {
                let n = first + i as i64;
                let found = got.iter().find(|r| r.number == n);
                if found.is_none_or(|r| r.id != e.id) {
                    out.push(format!(
                        "node {}: acknowledged append #{} ({} event {n}, id {}) is {}",
                        v.node,
                        op.id,
                        op.stream,
                        uuid::Uuid::from_bytes(e.id),
                        match found {
                            None => "missing".to_owned(),
                            Some(r) => format!("replaced by id {}", uuid::Uuid::from_bytes(r.id)),
                        }
                    ));
                }
            }
        }
    }
    cap(out, "lost events")
}

/// Every node's committed log is the same.
pub fn converged(views: &[FinalView]) -> Vec<String> {
    let Some(first) = views.first() else { return Vec::new() };
    let mut out = Vec::new();
    for v in &views[1..] {
        if v.all != first.all {
            let at = v
                .all
                .iter()
                .zip(&first.all)
                .position(|(a, b)| a != b)
                .unwrap_or(v.all.len().min(first.all.len()));
            out.push(format!(
                "node {} and node {} differ at record {at} of $all ({} and {} records): {:?} vs {:?}",
                first.node,
                v.node,
                first.all.len(),
                v.all.len(),
                first.all.get(at),
                v.all.get(at)
            ));
        }
    }
    out
}

/// Every `$all` read during the run is a prefix of the final log.
pub fn committed_prefixes(reads: &[AllRead], views: &[FinalView]) -> Vec<String> {
    let Some(fin) = views.first().map(|v| &v.all) else { return Vec::new() };
    let mut out = Vec::new();
    for r in reads {
        if r.events.len() > fin.len() {
            out.push(format!(
                "node {} served {} records of $all at {:.2} s; the final log has {}",
                r.node,
                r.events.len(),
                r.at as f64 / 1e6,
                fin.len()
            ));
            continue;
        }
        if let Some(at) = r.events.iter().zip(fin).position(|(a, b)| a != b) {
            out.push(format!(
                "node {} served {:?} as record {at} of $all at {:.2} s; the final log has {:?} there",
                r.node,
                r.events[at],
                r.at as f64 / 1e6,
                fin[at]
            ));
        }
    }
    cap(out, "reads that were not prefixes of the final log")
}

/// The subscription delivered every event of `stream` at least once.
pub fn delivered(stream: &str, views: &[FinalView], delivered: &[i64]) -> Vec<String> {
    let Some(events) = views.first().and_then(|v| v.streams.get(stream)) else { return Vec::new() };
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for n in delivered {
        *seen.entry(*n).or_default() += 1;
    }
    let missing: Vec<i64> = events.iter().map(|e| e.number).filter(|n| !seen.contains_key(n)).collect();
    if missing.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "the subscription never delivered {} of the {} events of {stream}: {:?}{}",
        missing.len(),
        events.len(),
        &missing[..missing.len().min(20)],
        if missing.len() > 20 { " …" } else { "" }
    )]
}

/// No node panicked (its log says so).
pub fn no_panics(logs: &[(String, String)]) -> Vec<String> {
    logs.iter()
        .filter_map(|(node, log)| {
            let at = log.find("panicked at")?;
            let line = log[at..].lines().next().unwrap_or_default();
            Some(format!("node {node} panicked: {line}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use annal_sim::history::Ev;

    fn ev(n: i64, id: u8) -> ReadEv {
        ReadEv { number: n, id: [id; 16], data: String::new() }
    }

    fn view(node: &str, s0: Vec<ReadEv>, all: &[(&str, i64, &str)]) -> FinalView {
        FinalView {
            node: node.into(),
            streams: [("s0".to_owned(), s0)].into_iter().collect(),
            all: all.iter().map(|(s, n, i)| (s.to_string(), *n, i.to_string())).collect(),
        }
    }

    #[test]
    fn a_lost_or_replaced_acknowledged_event_is_found_on_the_node_that_lacks_it() {
        let mut h = History::default();
        let kind = OpKind::Append {
            expected: -1,
            events: vec![
                Ev { id: [1; 16], ty: "t".into(), data: "{}".into() },
                Ev { id: [2; 16], ty: "t".into(), data: "{}".into() },
            ],
            retry_of: None,
        };
        let id = h.invoke(0, "s0", kind, 1);
        h.complete(id, Outcome::Appended { first: Some(0) }, 2);
        let good = view("a", vec![ev(0, 1), ev(1, 2)], &[]);
        assert!(durable(&h, std::slice::from_ref(&good)).is_empty());
        let lost = view("b", vec![ev(0, 1)], &[]);
        let replaced = view("c", vec![ev(0, 1), ev(1, 9)], &[]);
        let found = durable(&h, &[good, lost, replaced]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("node b") && found[0].contains("missing"), "{found:?}");
        assert!(found[1].contains("node c") && found[1].contains("replaced"), "{found:?}");
    }

    #[test]
    fn logs_that_differ_and_reads_that_are_not_prefixes_are_reported() {
        let a = view("a", vec![], &[("s0", 0, "x"), ("s0", 1, "y")]);
        let b = view("b", vec![], &[("s0", 0, "x"), ("s0", 1, "z")]);
        assert!(converged(&[a.clone(), a.clone()]).is_empty());
        assert_eq!(converged(&[a.clone(), b]).len(), 1);
        let read = |evs: &[(&str, i64, &str)]| AllRead {
            node: "n".into(),
            at: 5,
            events: evs.iter().map(|(s, n, i)| (s.to_string(), *n, i.to_string())).collect(),
        };
        let views = [a];
        assert!(committed_prefixes(&[read(&[("s0", 0, "x")]), read(&[])], &views).is_empty());
        assert_eq!(committed_prefixes(&[read(&[("s0", 0, "q")])], &views).len(), 1, "a divergent record");
        let longer = read(&[("s0", 0, "x"), ("s0", 1, "y"), ("s0", 2, "w")]);
        assert_eq!(committed_prefixes(&[longer], &views).len(), 1, "a record that did not stay");
    }

    #[test]
    fn undelivered_events_and_panics_are_reported() {
        let v = view("a", vec![ev(0, 1), ev(1, 2), ev(2, 3)], &[]);
        assert!(delivered("s0", std::slice::from_ref(&v), &[0, 1, 1, 2]).is_empty());
        let d = delivered("s0", &[v], &[0, 2]);
        assert!(d.len() == 1 && d[0].contains("[1]"), "{d:?}");
        let logs = vec![("a".to_owned(), "ok\nthread 'x' panicked at src/a.rs:1:2:\nboom".to_owned())];
        assert_eq!(no_panics(&logs), vec!["node a panicked: panicked at src/a.rs:1:2:".to_owned()]);
    }
}
