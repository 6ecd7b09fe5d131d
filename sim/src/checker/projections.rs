//! The system projections (the `projections` scenario, [`crate::projections`]): after the
//! projections had time to catch up, each output stream the check covers holds exactly what the
//! reference fold ([`annal_model::projections::fold`]) computes from the node's log:
//!
//! - **nothing lost**: every output the log calls for is there (a projection that restarted from
//!   an older checkpoint wrote what it had not written yet);
//! - **nothing twice**: no output is written again (it skipped what it had written);
//! - **log order**: outputs stand in the order of the records they come from.
//!
//! Only the producer's part of each output stream is compared (entries about its streams): the
//! usual clients delete and recreate their streams, which the fold leaves out.
//!
//! The JavaScript projections ([`check_js`]): their states, as the node answers them over HTTP
//! after the drain, equal the fold of their queries over the same log
//! ([`annal_model::projections::js::fold`]): every partition's, a partition the log gives no
//! event has no state, and the whole-log one; and each stream the partitioned query emits to
//! holds exactly the events the fold emits, in order, none twice.

use std::collections::BTreeMap;

use annal_model::projections::{fold, js, Source};
use serde_json::{json, Value};

use crate::projections::{ours, outputs, producer_streams, JsSeen, BY_STREAM, TYPES_PROJECTION};

/// What the check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Violations.
    pub failures: Vec<String>,
    /// One line on what was checked.
    pub summary: String,
}

/// The stream an output's text is about: a link's target stream, or the named stream.
fn about(text: &str) -> &str {
    match text.split_once('@') {
        Some((n, s)) if n.parse::<i64>().is_ok() => s,
        _ => text,
    }
}

/// Checks the outputs read at the end against the fold of `log`.
pub fn check(log: &[Source], actual: &BTreeMap<String, Vec<String>>) -> Report {
    let expected = fold(log);
    let mut report = Report::default();
    let empty = Vec::new();
    let mut compared = 0usize;
    for name in outputs() {
        let keep =
            |v: &Vec<String>| -> Vec<String> { v.iter().filter(|t| ours(about(t))).cloned().collect() };
        let want = keep(expected.get(&name).unwrap_or(&empty));
        let got = keep(actual.get(&name).unwrap_or(&empty));
        compared += want.len();
        if want == got {
            continue;
        }
        let at = want.iter().zip(&got).position(|(w, g)| w != g).unwrap_or(want.len().min(got.len()));
        let twice = got.iter().enumerate().find(|(i, t)| got[..*i].contains(t)).map(|(_, t)| t.clone());
        let what = match (want.get(at), got.get(at)) {
            _ if twice.is_some() => format!("{} is written twice", twice.unwrap_or_default()),
            (Some(w), Some(g)) => format!("entry {at} is {g}, the log calls for {w}"),
            (Some(w), None) => {
                format!("it ends after {at} entries; the log calls for {} more, from {w}", want.len() - at)
            }
            (None, Some(g)) => format!("entry {at}, {g}, is more than the log calls for"),
            (None, None) => "differs".into(),
        };
        report.failures.push(format!(
            "projections: {name}: {what} ({} entries, {} expected)",
            got.len(),
            want.len()
        ));
    }
    let streams =
        log.iter().filter(|s| ours(&s.stream)).map(|s| &s.stream).collect::<std::collections::BTreeSet<_>>();
    report.summary = format!(
        "projections: {} records in the log, {} of the producer's in {} streams; {} outputs compared in {} output streams, {} differing",
        log.len(),
        log.iter().filter(|s| ours(&s.stream)).count(),
        streams.len(),
        compared,
        outputs().len(),
        report.failures.len()
    );
    report
}

/// Checks the JavaScript projections' states and emitted streams against the fold of `log`.
pub fn check_js(log: &[Source], seen: &JsSeen, emitted: &BTreeMap<String, Vec<String>>) -> Report {
    let mut report = Report::default();
    let expected = match js::fold(log) {
        Ok(f) => f,
        Err(e) => {
            report.failures.push(format!("projections: the log is not the producer's shape: {e}"));
            return report;
        }
    };
    for name in [BY_STREAM, TYPES_PROJECTION] {
        if !seen.ready.iter().any(|r| r == name) {
            report.failures.push(format!("projections: {name} was never created, configured and enabled"));
        }
    }
    if !report.failures.is_empty() {
        return report;
    }
    let parse = |text: &str| -> Result<Value, String> {
        if text.is_empty() {
            Ok(Value::Null)
        } else {
            serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"))
        }
    };
    let mut compared = 0usize;
    for stream in producer_streams() {
        let want = expected
            .partitions
            .get(&stream)
            .map_or(Value::Null, |t| json!({ "n": t.n, "sum": t.sum, "placed": t.placed, "last": t.last }));
        let Some(text) = seen.states.get(&stream) else {
            report.failures.push(format!("projections: {BY_STREAM}: no answer for partition {stream}"));
            continue;
        };
        compared += 1;
        match parse(text) {
            Ok(got) if got == want => {}
            Ok(got) => report.failures.push(format!(
                "projections: {BY_STREAM}: partition {stream} is {got}, the log calls for {want}"
            )),
            Err(e) => report.failures.push(format!("projections: {BY_STREAM}: partition {stream}: {e}")),
        }
    }
    let want = Value::Object(expected.types.iter().map(|(k, v)| (k.clone(), json!(v))).collect());
    match seen.types.as_deref().map(parse) {
        None => report.failures.push(format!("projections: {TYPES_PROJECTION}: no answer for its state")),
        Some(Ok(got)) if got == want => compared += 1,
        Some(Ok(got)) => report
            .failures
            .push(format!("projections: {TYPES_PROJECTION}: the state is {got}, the log calls for {want}")),
        Some(Err(e)) => report.failures.push(format!("projections: {TYPES_PROJECTION}: {e}")),
    }
    let mut emits = 0usize;
    let none = Vec::new();
    for (stream, texts) in emitted {
        let want: Vec<Value> = expected
            .emitted
            .get(stream)
            .unwrap_or(&none)
            .iter()
            .map(|(n, sum)| json!({ "n": n, "sum": sum }))
            .collect();
        let got: Vec<Value> = texts.iter().map(|t| parse(t).unwrap_or_else(Value::String)).collect();
        emits += want.len();
        if got != want {
            let at = want.iter().zip(&got).position(|(w, g)| w != g).unwrap_or(want.len().min(got.len()));
            report.failures.push(format!(
                "projections: {BY_STREAM}: {stream} holds {} events, the log calls for {}; first difference at {at}: {} against {}",
                got.len(),
                want.len(),
                got.get(at).map_or("nothing".into(), Value::to_string),
                want.get(at).map_or("nothing".into(), Value::to_string),
            ));
        }
    }
    report.summary = format!(
        "projections: JavaScript: {compared} states compared ({} partitions with events), {emits} emitted events in {} streams; {}",
        expected.partitions.len(),
        emitted.len(),
        if report.failures.is_empty() { "all as the fold".to_string() } else { format!("{} differing", report.failures.len()) },
    );
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(stream: &str, number: i64, ty: &str) -> Source {
        Source {
            stream: stream.into(),
            number,
            event_type: ty.into(),
            data: b"{}".to_vec(),
            metadata: Vec::new(),
        }
    }

    #[test]
    fn duplicates_losses_and_order_are_caught() {
        let log = [src("order-1", 0, "p-placed"), src("order-1", 1, "p-closed"), src("s1", 0, "p-placed")];
        let mut actual = fold(&log);
        assert!(check(&log, &actual).failures.is_empty());
        // Entries about other streams are not compared.
        actual.get_mut("$et-p-placed").unwrap().push("9@s2".into());
        assert!(check(&log, &actual).failures.is_empty());
        let mut twice = actual.clone();
        twice.get_mut("$ce-order").unwrap().push("0@order-1".into());
        let f = check(&log, &twice).failures;
        assert!(f.len() == 1 && f[0].contains("twice"), "{f:?}");
        let mut lost = actual.clone();
        lost.get_mut("$ce-order").unwrap().pop();
        let f = check(&log, &lost).failures;
        assert!(f.len() == 1 && f[0].contains("1 more"), "{f:?}");
        let mut order = actual.clone();
        order.get_mut("$ce-order").unwrap().reverse();
        let f = check(&log, &order).failures;
        assert!(f.len() == 1 && f[0].contains("entry 0"), "{f:?}");
        let mut category = actual;
        category.get_mut("$category-order").unwrap().clear();
        assert_eq!(check(&log, &category).failures.len(), 1);
    }

    #[test]
    fn javascript_states_and_emits_are_compared_with_the_fold() {
        let data = |i: i64| format!("{{\"i\":{i}}}");
        let ev = |stream: &str, n: i64, ty: &str, d: &str| Source {
            stream: stream.into(),
            number: n,
            event_type: ty.into(),
            data: d.as_bytes().to_vec(),
            metadata: Vec::new(),
        };
        let log = [ev("order-0", 0, "p-placed", &data(2)), ev("order-0", 1, "p-closed", &data(0))];
        let mut seen = JsSeen {
            ready: vec![BY_STREAM.into(), TYPES_PROJECTION.into()],
            types: Some(r#"{"p-placed":1,"p-closed":1}"#.into()),
            ..JsSeen::default()
        };
        for s in producer_streams() {
            seen.states.insert(s, String::new());
        }
        seen.states.insert("order-0".into(), r#"{"n":2,"sum":2,"placed":1,"last":1}"#.into());
        let mut emitted = BTreeMap::new();
        emitted.insert("simclosed-order-0".to_string(), vec![r#"{"n":2,"sum":2}"#.to_string()]);
        emitted.insert("simclosed-cart-0".to_string(), Vec::new());
        let r = check_js(&log, &seen, &emitted);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        let mut twice = emitted.clone();
        twice.get_mut("simclosed-order-0").unwrap().push(r#"{"n":2,"sum":2}"#.into());
        assert_eq!(check_js(&log, &seen, &twice).failures.len(), 1);
        let mut stale = JsSeen { states: seen.states.clone(), ..JsSeen::default() };
        stale.ready = seen.ready.clone();
        stale.types = seen.types.clone();
        stale.states.insert("order-0".into(), r#"{"n":1,"sum":2,"placed":1,"last":0}"#.into());
        assert_eq!(check_js(&log, &stale, &emitted).failures.len(), 1);
        stale.states.insert("order-0".into(), seen.states["order-0"].clone());
        stale.states.insert("cart-1".into(), r#"{"n":1,"sum":0,"placed":0,"last":0}"#.into());
        assert_eq!(check_js(&log, &stale, &emitted).failures.len(), 1);
        let not_ready = JsSeen { ready: Vec::new(), ..JsSeen::default() };
        assert_eq!(check_js(&log, &not_ready, &emitted).failures.len(), 2);
    }
}
