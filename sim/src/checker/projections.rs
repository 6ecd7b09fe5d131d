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

use std::collections::BTreeMap;

use annal_model::projections::{fold, Source};

use crate::projections::{ours, outputs};

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
}
