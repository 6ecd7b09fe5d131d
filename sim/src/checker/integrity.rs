//! Integrity: **nothing corrupt is served**. Every event a read returned carries an id that some
//! append sent to that stream, with exactly the data sent with it, and a read's events come in
//! strictly increasing event-number order.
//!
//! A bit flip, a torn record or a misdirected write that the node failed to detect (by its record
//! checksums) shows up here; an undetected corruption of an event number or id shows up in
//! [`linearizability`](super::linearizability) instead.

use std::collections::BTreeMap;

use crate::history::{History, OpKind, Outcome};

/// The violations in `h`.
pub fn check(h: &History) -> Vec<String> {
    let mut failures = Vec::new();
    let mut sent: BTreeMap<[u8; 16], (&str, &str)> = BTreeMap::new();
    for op in &h.ops {
        if let OpKind::Append { events, .. } = &op.kind {
            for e in events {
                sent.insert(e.id, (op.stream.as_str(), e.data.as_str()));
            }
        }
    }
    for op in &h.ops {
        let Outcome::Read { events } = &op.outcome else { continue };
        for (i, e) in events.iter().enumerate() {
            let bad = match sent.get(&e.id) {
                None => Some("an event id no client ever sent".to_owned()),
                Some((s, _)) if *s != op.stream => Some(format!("an event sent to stream {s}")),
                Some((_, d)) if *d != e.data => Some(format!("data {:?}, but {:?} was written", e.data, d)),
                _ => None,
            };
            if let Some(why) = bad {
                failures.push(format!("corrupted data served: {op}: event {} is {why}", e.number));
            }
            if i > 0 && events[i - 1].number >= e.number {
                failures.push(format!("read returned event numbers out of order or repeated: {op}"));
            }
        }
    }
    failures
}
