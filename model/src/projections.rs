//! Reference fold of the system projections: what `$streams`, `$stream_by_category`,
//! `$by_category`, `$by_event_type` and `$by_correlation_id` must have written, computed from the
//! log alone.
//!
//! The fold is written from the rules as stated, for obviousness: it walks the log once, in log
//! order, and for each record appends the output each projection owes it to the output stream's
//! list. Each output is written as the text the projection's event carries: `{n}@{stream}` for a
//! link (`$>`), the stream's name for a stream reference (`$@`).
//!
//! # Rules
//!
//! * **Category** (the default rule, `first` and `-`): the text before the first `-`, when that
//!   `-` is not the name's first character. A stream whose name starts with `$` has none.
//! * `$streams` reads every record, links too: each record with event number 0 gives `0@{stream}`
//!   in `$streams`.
//! * `$stream_by_category` reads every record, links too: each record with event number 0 of a
//!   stream with a category gives the stream's name in `$category-{category}`.
//! * `$by_category` reads every record, links too: each record of a stream with a category gives
//!   a link in `$ce-{category}` to the record itself, or, for a link, to the link's target (its
//!   data, unchanged).
//! * `$by_event_type` reads every record but links: each gives a link to itself in
//!   `$et-{type}`.
//! * `$by_correlation_id` reads every record but links: each whose metadata is a JSON object with
//!   a string member `$correlationId` gives a link to itself in `$bc-{that string}`.
//!
//! # Outside the fold
//!
//! Deletions (tombstones, soft-delete metadata) and correlation ids on links: the fold leaves
//! them out, and a caller comparing with it compares only streams no deletion touches.

use std::collections::BTreeMap;

use crate::json::{self, Value};

/// One record of the log as the projections read it (links not resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Its stream.
    pub stream: String,
    /// Its event number.
    pub number: i64,
    /// Its event type (`$>` for a link).
    pub event_type: String,
    /// Its data (for a link, `{n}@{stream}`).
    pub data: Vec<u8>,
    /// Its metadata.
    pub metadata: Vec<u8>,
}

/// The event type of a link.
pub const LINK: &str = "$>";

/// What the system projections must have written: for each output stream, its events' texts in
/// order.
pub type Outputs = BTreeMap<String, Vec<String>>;

/// The category of `stream` under the default rule, if it has one.
pub fn category(stream: &str) -> Option<&str> {
    if stream.starts_with('$') {
        return None;
    }
    match stream.find('-') {
        Some(i) if i > 0 => Some(&stream[..i]),
        _ => None,
    }
}

/// The correlation id in `metadata`, if it is a JSON object with a string `$correlationId`.
pub fn correlation_id(metadata: &[u8]) -> Option<String> {
    let Value::Object(members) = json::parse(metadata)? else { return None };
    members.into_iter().rev().find(|m| m.key == "$correlationId").and_then(|m| match m.value {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// Folds `log` (every record, in log order) into the outputs of the five system projections.
pub fn fold<'a>(log: impl IntoIterator<Item = &'a Source>) -> Outputs {
    let mut out = Outputs::new();
    let mut put = |stream: String, text: String| out.entry(stream).or_default().push(text);
    for s in log {
        let itself = format!("{}@{}", s.number, s.stream);
        let is_link = s.event_type == LINK;
        if s.number == 0 {
            put("$streams".into(), itself.clone());
        }
        if let Some(c) = category(&s.stream) {
            if s.number == 0 {
                put(format!("$category-{c}"), s.stream.clone());
            }
            let target = if is_link { String::from_utf8_lossy(&s.data).into_owned() } else { itself.clone() };
            put(format!("$ce-{c}"), target);
        }
        if !is_link {
            put(format!("$et-{}", s.event_type), itself.clone());
            if let Some(id) = correlation_id(&s.metadata) {
                put(format!("$bc-{id}"), itself);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(stream: &str, number: i64, ty: &str, data: &str, meta: &str) -> Source {
        Source {
            stream: stream.into(),
            number,
            event_type: ty.into(),
            data: data.as_bytes().to_vec(),
            metadata: meta.as_bytes().to_vec(),
        }
    }

    #[test]
    fn categories_follow_the_first_separator() {
        assert_eq!(category("order-1"), Some("order"));
        assert_eq!(category("order-1-x"), Some("order"));
        assert_eq!(category("-1"), None);
        assert_eq!(category("plain"), None);
        assert_eq!(category("$ce-order"), None);
    }

    #[test]
    fn each_projection_gets_what_it_reads() {
        let log = [
            src("order-1", 0, "placed", "{}", r#"{"$correlationId":"c1"}"#),
            src("order-1", 1, "paid", "{}", ""),
            src("plain", 0, "placed", "{}", r#"{"$correlationId":7}"#),
            src("mix-1", 0, LINK, "1@order-1", r#"{"$correlationId":"c1"}"#),
            src("$ce-order", 0, LINK, "0@order-1", ""),
        ];
        let out = fold(&log);
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(out["$streams"], v(&["0@order-1", "0@plain", "0@mix-1", "0@$ce-order"]));
        assert_eq!(out["$category-order"], v(&["order-1"]));
        assert_eq!(out["$category-mix"], v(&["mix-1"]));
        assert_eq!(out["$ce-order"], v(&["0@order-1", "1@order-1"]));
        assert_eq!(out["$ce-mix"], v(&["1@order-1"]));
        assert_eq!(out["$et-placed"], v(&["0@order-1", "0@plain"]));
        assert_eq!(out["$et-paid"], v(&["1@order-1"]));
        assert!(!out.contains_key("$et-$>"));
        assert_eq!(out["$bc-c1"], v(&["0@order-1"]));
        assert_eq!(out.len(), 8, "{out:?}");
    }
}
