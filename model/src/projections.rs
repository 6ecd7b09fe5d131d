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

/// Two JavaScript projections the simulator runs beside the system projections, with the fold
/// each must equal. The queries are kept here, next to their folds, so one can be read against
/// the other.
pub mod js {
    use std::collections::BTreeMap;

    use super::{category, Source, LINK};
    use crate::json::{self, Value};

    /// The partitioned projection: per stream of the named categories (links resolved to the
    /// event they point at, which then counts in its own stream's partition), the number of
    /// events, a weighted sum of their `i`, how many were placed and the last event number; each
    /// `p-closed` emits the partition's totals to `simclosed-{stream}`.
    pub const BY_STREAM_QUERY: &str = r#"fromCategories('order', 'cart', 'user', 'mix')
  .partitionBy(function (e) { return e.streamId; })
  .when({
    $init: function () { return { n: 0, sum: 0, placed: 0, last: -1 }; },
    'p-placed': function (s, e) { s.n += 1; s.placed += 1; s.sum += e.body.i; s.last = e.sequenceNumber; return s; },
    'p-changed': function (s, e) { s.n += 1; s.sum += 10 * e.body.i; s.last = e.sequenceNumber; return s; },
    'p-closed': function (s, e) {
      s.n += 1; s.last = e.sequenceNumber;
      emit('simclosed-' + e.streamId, 'closed', { n: s.n, sum: s.sum });
      return s;
    }
  })"#;

    /// The categories [`BY_STREAM_QUERY`] reads.
    pub const BY_STREAM_CATEGORIES: [&str; 4] = ["order", "cart", "user", "mix"];

    /// The prefix of the streams [`BY_STREAM_QUERY`] emits to.
    pub const CLOSED_PREFIX: &str = "simclosed-";

    /// The whole-log projection: over `fromAll` (links passed over), the number of events of
    /// each type starting with `p-`.
    pub const TYPES_QUERY: &str = r#"fromAll()
  .when({
    $init: function () { return {}; },
    $any: function (s, e) {
      if (e.eventType.indexOf('p-') === 0) { s[e.eventType] = (s[e.eventType] || 0) + 1; }
      return s;
    }
  })"#;

    /// A partition's state under [`BY_STREAM_QUERY`].
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Totals {
        /// Events handled.
        pub n: i64,
        /// `i` of each `p-placed` plus ten times `i` of each `p-changed`.
        pub sum: i64,
        /// `p-placed` events handled.
        pub placed: i64,
        /// The event number of the last event handled (`-1`: none).
        pub last: i64,
    }

    /// What the two queries must hold after reading the whole log.
    #[derive(Clone, Debug, Default, PartialEq, Eq)]
    pub struct Folded {
        /// [`BY_STREAM_QUERY`]'s state of each partition (a stream's name).
        pub partitions: BTreeMap<String, Totals>,
        /// [`BY_STREAM_QUERY`]'s emitted events, per stream: `(n, sum)` of each.
        pub emitted: BTreeMap<String, Vec<(i64, i64)>>,
        /// [`TYPES_QUERY`]'s state: events per `p-` type.
        pub types: BTreeMap<String, i64>,
    }

    /// The integer member `i` of a JSON object (`None`: not such an object).
    fn member_i(data: &[u8]) -> Option<i64> {
        let Value::Object(members) = json::parse(data)? else { return None };
        members.into_iter().rev().find(|m| m.key == "i").and_then(|m| match m.value {
            Value::Number(n) => n.parse().ok(),
            _ => None,
        })
    }

    /// Folds `log` (every record, in log order) through the two queries. A record the
    /// producer's shape does not allow (a handled event whose data has no integer `i`, a link
    /// whose target is not in the log) is an `Err` naming it.
    pub fn fold(log: &[Source]) -> Result<Folded, String> {
        let mut out = Folded::default();
        let mut by_id: BTreeMap<(&str, i64), &Source> = BTreeMap::new();
        for s in log {
            by_id.insert((s.stream.as_str(), s.number), s);
        }
        for s in log {
            if s.stream.starts_with('$') {
                continue;
            }
            if s.event_type != LINK && s.event_type.starts_with("p-") {
                *out.types.entry(s.event_type.clone()).or_default() += 1;
            }
            if !category(&s.stream).is_some_and(|c| BY_STREAM_CATEGORIES.contains(&c)) {
                continue;
            }
            let e = if s.event_type == LINK {
                let text = String::from_utf8_lossy(&s.data);
                let target = text
                    .split_once('@')
                    .and_then(|(n, stream)| Some((n.parse::<i64>().ok()?, stream.to_owned())))
                    .and_then(|(n, stream)| by_id.get(&(stream.as_str(), n)).copied());
                match target {
                    Some(t) => t,
                    None => return Err(format!("link {}@{} to {text}: not in the log", s.number, s.stream)),
                }
            } else {
                s
            };
            let weight = match e.event_type.as_str() {
                "p-placed" => 1,
                "p-changed" => 10,
                "p-closed" => 0,
                _ => continue,
            };
            let t =
                out.partitions.entry(e.stream.clone()).or_insert(Totals { last: -1, ..Totals::default() });
            t.n += 1;
            t.last = e.number;
            if weight > 0 {
                let i =
                    member_i(&e.data).ok_or_else(|| format!("{}@{} has no integer i", e.number, e.stream))?;
                t.sum += weight * i;
                t.placed += i64::from(weight == 1);
            } else {
                let (n, sum) = (t.n, t.sum);
                out.emitted.entry(format!("{CLOSED_PREFIX}{}", e.stream)).or_default().push((n, sum));
            }
        }
        Ok(out)
    }
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

    #[test]
    fn the_javascript_folds_resolve_links_into_their_targets_partition() {
        let log = [
            src("order-1", 0, "p-placed", r#"{"i":2}"#, ""),
            src("order-1", 1, "p-changed", r#"{"i":1}"#, ""),
            src("mix-0", 0, LINK, "0@order-1", ""),
            src("cart-2", 0, "p-closed", r#"{"i":0}"#, ""),
            src("plain", 0, "p-placed", r#"{"i":5}"#, ""),
            src("$ce-order", 0, LINK, "0@order-1", ""),
            src("mix-1", 0, LINK, "0@cart-2", ""),
        ];
        let f = js::fold(&log).unwrap();
        let t = |n, sum, placed, last| js::Totals { n, sum, placed, last };
        assert_eq!(f.partitions["order-1"], t(3, 14, 2, 0));
        assert_eq!(f.partitions["cart-2"], t(2, 0, 0, 0));
        assert_eq!(f.partitions.len(), 2);
        assert_eq!(f.emitted["simclosed-cart-2"], vec![(1, 0), (2, 0)]);
        assert_eq!(f.types.get("p-placed"), Some(&2));
        assert_eq!(f.types.get("p-changed"), Some(&1));
        assert_eq!(f.types.get("p-closed"), Some(&1));
        let broken = [src("mix-0", 0, LINK, "4@order-9", "")];
        assert!(js::fold(&broken).is_err());
    }
}
