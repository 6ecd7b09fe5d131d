//! The system projections, free of I/O: one committed record in, the events to emit out.
//!
//! | Projection | Reads | Emits |
//! |---|---|---|
//! | `$streams` | every record, links included | a `$>` link to event 0 of each stream, in `$streams` |
//! | `$stream_by_category` | every record, links included | a `$@` event naming each stream, at its event 0, in `$category-{category}` |
//! | `$by_category` | every record, links included | a `$>` link per event in `$ce-{category}` (a link is linked to its target again), with `$o` (the stream) in the metadata |
//! | `$by_event_type` | every record but links | a `$>` link per event in `$et-{type}` |
//! | `$by_correlation_id` | every record but links | a `$>` link per event whose metadata has the correlation property, in `$bc-{id}`, with `$eventTimestamp` |
//!
//! A deletion (a hard delete's tombstone, or a soft delete: metadata of `$$s` with
//! `$tb` = `i64::MAX`) is linked by `$by_category` with `"$deleted":-1` beside `$o`, and by
//! `$by_event_type` into `$et-$deleted` the same way. The category rule
//! ([`CategoryRule`]) is the query text of `$stream_by_category` and `$by_category`; the
//! correlation property (`{"correlationIdProperty":"…"}`, default `$correlationId`) that of
//! `$by_correlation_id`; `$streams` and `$by_event_type` take an empty query.
//!
//! The handler only decides; the caller tags each [`Emit`] with the projection's version and the
//! source position, gives it an id and writes it ([`Emit::metadata`]).

use std::borrow::Cow;

use serde_json::Value;

use super::category::{CategoryRule, DEFAULT_RULE};
use super::checkpoint::{tag_prefix, ProjectionVersion};
use crate::log::record::EventRecord;
use crate::store::engine::TOMBSTONE;

/// The default query of `$by_correlation_id`.
pub const DEFAULT_CORRELATION_QUERY: &str = r#"{"correlationIdProperty":"$correlationId"}"#;
/// The event type of a link to an event.
pub const LINK_TYPE: &str = "$>";
/// The event type of a link to a stream.
pub const STREAM_LINK_TYPE: &str = "$@";

/// The five system projections, in the order they are created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SystemKind {
    /// `$streams`.
    Streams,
    /// `$stream_by_category`.
    StreamByCategory,
    /// `$by_category`.
    ByCategory,
    /// `$by_event_type`.
    ByEventType,
    /// `$by_correlation_id`.
    ByCorrelationId,
}

impl SystemKind {
    /// Every system projection, in creation order.
    pub const ALL: [SystemKind; 5] = [
        SystemKind::Streams,
        SystemKind::StreamByCategory,
        SystemKind::ByCategory,
        SystemKind::ByEventType,
        SystemKind::ByCorrelationId,
    ];

    /// The projection's name.
    pub fn name(self) -> &'static str {
        match self {
            SystemKind::Streams => "$streams",
            SystemKind::StreamByCategory => "$stream_by_category",
            SystemKind::ByCategory => "$by_category",
            SystemKind::ByEventType => "$by_event_type",
            SystemKind::ByCorrelationId => "$by_correlation_id",
        }
    }

    /// The system projection of a name.
    pub fn from_name(name: &str) -> Option<SystemKind> {
        SystemKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The query it is created with.
    pub fn default_query(self) -> &'static str {
        match self {
            SystemKind::Streams | SystemKind::ByEventType => "",
            SystemKind::StreamByCategory | SystemKind::ByCategory => DEFAULT_RULE,
            SystemKind::ByCorrelationId => DEFAULT_CORRELATION_QUERY,
        }
    }

    /// The handler type shown in its definition (v5's names of its native handlers).
    pub fn handler_type(self) -> &'static str {
        match self {
            SystemKind::Streams => "native:EventStore.Projections.Core.Standard.IndexStreams",
            SystemKind::StreamByCategory => {
                "native:EventStore.Projections.Core.Standard.CategorizeStreamByPath"
            }
            SystemKind::ByCategory => {
                "native:EventStore.Projections.Core.Standard.CategorizeEventsByStreamPath"
            }
            SystemKind::ByEventType => "native:EventStore.Projections.Core.Standard.IndexEventsByEventType",
            SystemKind::ByCorrelationId => "native:EventStore.Projections.Core.Standard.ByCorrelationId",
        }
    }

    /// Whether it reads link events.
    pub fn includes_links(self) -> bool {
        matches!(self, SystemKind::Streams | SystemKind::StreamByCategory | SystemKind::ByCategory)
    }
}

/// One event to emit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emit {
    /// The stream it goes to.
    pub stream: String,
    /// Its type (`$>` or `$@` for the system projections; a JavaScript projection's own).
    pub event_type: Cow<'static, str>,
    /// Whether its data is JSON.
    pub is_json: bool,
    /// Its data (`{n}@{stream}` for a link, a stream name for `$@`).
    pub data: String,
    /// Members of its metadata after the tag, already JSON (`"$o":"a-1"`), or empty.
    pub extra: String,
    /// The source event's log position (the tag's position).
    pub position: u64,
    /// The source event's id (`$causedBy`).
    pub caused_by: [u8; 16],
}

impl Emit {
    /// The event's metadata for a projection of version `v`: the tag, the extra members, then
    /// `$causedBy`.
    pub fn metadata(&self, v: &ProjectionVersion) -> String {
        let mut m = tag_prefix(v, self.position);
        if !self.extra.is_empty() {
            m.push(',');
            m.push_str(&self.extra);
        }
        m.push_str(",\"$causedBy\":\"");
        m.push_str(&uuid::Uuid::from_bytes(self.caused_by).hyphenated().to_string());
        m.push_str("\"}");
        m
    }
}

/// A JSON string literal.
fn quoted(s: &str) -> String {
    Value::from(s).to_string()
}

/// What a system projection's query says.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    None,
    Category(CategoryRule),
    Correlation(String),
}

/// A system projection's handler (see the module doc).
#[derive(Clone, Debug)]
pub struct SystemHandler {
    kind: SystemKind,
    rule: Rule,
}

/// The stream a deletion record deletes, if `ev` is one.
pub(crate) fn deleted_stream(ev: &EventRecord) -> Option<&str> {
    if ev.is_tombstone() {
        return Some(&ev.stream);
    }
    let target = ev.stream.strip_prefix("$$")?;
    if ev.event_type != "$metadata" {
        return None;
    }
    let meta: Value = serde_json::from_slice(&ev.data).ok()?;
    (meta.get("$tb")?.as_i64()? == TOMBSTONE).then_some(target)
}

impl SystemHandler {
    /// The handler of `kind` with query text `query`; the error says what is wrong with it.
    pub fn new(kind: SystemKind, query: &str) -> Result<SystemHandler, String> {
        let rule = match kind {
            SystemKind::Streams | SystemKind::ByEventType => {
                if !query.trim().is_empty() {
                    return Err(format!("{} takes no query", kind.name()));
                }
                Rule::None
            }
            SystemKind::StreamByCategory | SystemKind::ByCategory => {
                Rule::Category(CategoryRule::parse(query)?)
            }
            SystemKind::ByCorrelationId => {
                let property = if query.trim().is_empty() {
                    "$correlationId".to_owned()
                } else {
                    let v: Value = serde_json::from_str(query)
                        .map_err(|e| format!("the query must be a JSON object: {e}"))?;
                    match v.get("correlationIdProperty") {
                        None => "$correlationId".to_owned(),
                        Some(Value::String(s)) if !s.is_empty() => s.clone(),
                        Some(_) => return Err("correlationIdProperty must be a non-empty string".into()),
                    }
                };
                Rule::Correlation(property)
            }
        };
        Ok(SystemHandler { kind, rule })
    }

    /// Which projection.
    pub fn kind(&self) -> SystemKind {
        self.kind
    }

    fn category<'a>(&self, stream: &'a str) -> Option<&'a str> {
        match &self.rule {
            Rule::Category(r) => r.category(stream),
            Rule::None | Rule::Correlation(_) => None,
        }
    }

    /// Handles one committed event: pushes what to emit onto `out`; true when the event passed
    /// the projection's filter (it counts towards the checkpoint threshold).
    pub fn handle(&self, ev: &EventRecord, out: &mut Vec<Emit>) -> bool {
        let is_link = ev.event_type == LINK_TYPE;
        if is_link && !self.kind.includes_links() {
            return false;
        }
        let emit = |stream: String, event_type: &'static str, data: String, extra: String| Emit {
            stream,
            event_type: Cow::Borrowed(event_type),
            is_json: false,
            data,
            extra,
            position: ev.log_position,
            caused_by: ev.event_id,
        };
        let own = || format!("{}@{}", ev.event_number, ev.stream);
        match self.kind {
            SystemKind::Streams => {
                if ev.event_number == 0 {
                    out.push(emit("$streams".into(), LINK_TYPE, own(), String::new()));
                }
            }
            SystemKind::StreamByCategory => {
                if ev.event_number == 0 {
                    if let Some(c) = self.category(&ev.stream) {
                        out.push(emit(
                            format!("$category-{c}"),
                            STREAM_LINK_TYPE,
                            ev.stream.clone(),
                            String::new(),
                        ));
                    }
                }
            }
            SystemKind::ByCategory => {
                let deleted = deleted_stream(ev);
                let of = deleted.unwrap_or(&ev.stream);
                if let Some(c) = self.category(of) {
                    let data = if is_link { String::from_utf8_lossy(&ev.data).into_owned() } else { own() };
                    let mut extra = format!("\"$o\":{}", quoted(of));
                    if deleted.is_some() {
                        extra.push_str(",\"$deleted\":-1");
                    }
                    out.push(emit(format!("$ce-{c}"), LINK_TYPE, data, extra));
                }
            }
            SystemKind::ByEventType => match deleted_stream(ev) {
                Some(of) => {
                    let extra = format!("\"$o\":{},\"$deleted\":-1", quoted(of));
                    out.push(emit("$et-$deleted".into(), LINK_TYPE, own(), extra));
                }
                None => out.push(emit(format!("$et-{}", ev.event_type), LINK_TYPE, own(), String::new())),
            },
            SystemKind::ByCorrelationId => {
                let Rule::Correlation(property) = &self.rule else { return true };
                if ev.metadata.is_empty() || ev.metadata.first() != Some(&b'{') {
                    return true;
                }
                let Ok(Value::Object(meta)) = serde_json::from_slice::<Value>(&ev.metadata) else {
                    return true;
                };
                let id = match meta.get(property.as_str()) {
                    Some(Value::String(s)) if !s.is_empty() => s.clone(),
                    _ => return true,
                };
                let stamp = crate::http::text::iso8601(ev.timestamp_us);
                let extra = format!("\"$eventTimestamp\":{}", quoted(&stamp));
                out.push(emit(format!("$bc-{id}"), LINK_TYPE, own(), extra));
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::log::record::flags;

    fn ev(stream: &str, n: i64, ty: &str, data: &str, meta: &str, pos: u64) -> EventRecord {
        EventRecord {
            log_position: pos,
            flags: flags::IS_JSON,
            transaction_position: pos,
            transaction_offset: 0,
            event_number: n,
            event_id: [pos as u8; 16],
            timestamp_us: 1_700_000_000_000_000,
            stream: stream.into(),
            event_type: ty.into(),
            data: Bytes::from(data.to_owned()),
            metadata: Bytes::from(meta.to_owned()),
        }
    }

    fn run(kind: SystemKind, query: &str, events: &[EventRecord]) -> Vec<(String, String, String, String)> {
        let h = SystemHandler::new(kind, query).unwrap();
        let v = ProjectionVersion { id: 3, epoch: -1, version: 1 };
        let mut out = Vec::new();
        for e in events {
            h.handle(e, &mut out);
        }
        out.into_iter()
            .map(|e| (e.stream.clone(), e.event_type.to_string(), e.data.clone(), e.metadata(&v)))
            .collect()
    }

    fn history() -> Vec<EventRecord> {
        let mut tomb = ev("order-2", TOMBSTONE, "$streamDeleted", "", "", 600);
        tomb.flags |= flags::STREAM_DELETE;
        vec![
            ev("order-1", 0, "Placed", "{}", r#"{"$correlationId":"c1"}"#, 100),
            ev("order-1", 1, "Paid", "{}", "", 200),
            ev("order-2", 0, "Placed", "{}", r#"{"$correlationId":"c1"}"#, 300),
            ev("nodash", 0, "Placed", "{}", "", 400),
            ev("$$order-1", 0, "$metadata", r#"{"$tb":9223372036854775807}"#, "", 500),
            tomb,
            ev("$ce-order", 0, "$>", "0@order-1", "{}", 700),
            ev("copy-1", 0, "$>", "1@order-1", "{}", 800),
            ev("$$other-1", 0, "$metadata", r#"{"$maxCount":2}"#, "", 900),
        ]
    }

    #[test]
    fn by_category() {
        let out = run(SystemKind::ByCategory, DEFAULT_RULE, &history());
        let id = |b: u8| uuid::Uuid::from_bytes([b; 16]).to_string();
        assert_eq!(
            out,
            vec![
                (
                    "$ce-order".into(),
                    "$>".into(),
                    "0@order-1".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":100,"$p":100,"$o":"order-1","$causedBy":"{}"}}"#,
                        id(100)
                    )
                ),
                (
                    "$ce-order".into(),
                    "$>".into(),
                    "1@order-1".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":200,"$p":200,"$o":"order-1","$causedBy":"{}"}}"#,
                        id(200)
                    )
                ),
                (
                    "$ce-order".into(),
                    "$>".into(),
                    "0@order-2".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":300,"$p":300,"$o":"order-2","$causedBy":"{}"}}"#,
                        id(44)
                    )
                ),
                (
                    "$ce-order".into(),
                    "$>".into(),
                    "0@$$order-1".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":500,"$p":500,"$o":"order-1","$deleted":-1,"$causedBy":"{}"}}"#,
                        id(244)
                    )
                ),
                (
                    "$ce-order".into(),
                    "$>".into(),
                    "9223372036854775807@order-2".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":600,"$p":600,"$o":"order-2","$deleted":-1,"$causedBy":"{}"}}"#,
                        id(88)
                    )
                ),
                (
                    "$ce-copy".into(),
                    "$>".into(),
                    "1@order-1".into(),
                    format!(
                        r#"{{"$v":"3:-1:1:4","$c":800,"$p":800,"$o":"copy-1","$causedBy":"{}"}}"#,
                        id(32)
                    )
                ),
            ]
        );
        let last = run(SystemKind::ByCategory, "last\n-", &[ev("a-b-c", 0, "T", "{}", "", 8)]);
        assert_eq!(last[0].0, "$ce-a-b");
    }

    #[test]
    fn streams_and_stream_by_category() {
        let out = run(SystemKind::Streams, "", &history());
        let links: Vec<&str> = out.iter().map(|e| e.2.as_str()).collect();
        assert_eq!(
            links,
            ["0@order-1", "0@order-2", "0@nodash", "0@$$order-1", "0@$ce-order", "0@copy-1", "0@$$other-1"]
        );
        assert!(out.iter().all(|e| e.0 == "$streams" && e.1 == "$>"));
        let out = run(SystemKind::StreamByCategory, DEFAULT_RULE, &history());
        let got: Vec<(&str, &str, &str)> =
            out.iter().map(|e| (e.0.as_str(), e.1.as_str(), e.2.as_str())).collect();
        assert_eq!(
            got,
            [
                ("$category-order", "$@", "order-1"),
                ("$category-order", "$@", "order-2"),
                ("$category-copy", "$@", "copy-1")
            ]
        );
    }

    #[test]
    fn by_event_type() {
        let out = run(SystemKind::ByEventType, "", &history());
        let got: Vec<(&str, &str)> = out.iter().map(|e| (e.0.as_str(), e.2.as_str())).collect();
        assert_eq!(
            got,
            [
                ("$et-Placed", "0@order-1"),
                ("$et-Paid", "1@order-1"),
                ("$et-Placed", "0@order-2"),
                ("$et-Placed", "0@nodash"),
                ("$et-$deleted", "0@$$order-1"),
                ("$et-$deleted", "9223372036854775807@order-2"),
                ("$et-$metadata", "0@$$other-1"),
            ]
        );
        assert!(out[4].3.contains(r#""$o":"order-1","$deleted":-1"#), "{}", out[4].3);
        let h = SystemHandler::new(SystemKind::ByEventType, "").unwrap();
        assert!(!h.handle(&ev("x-1", 0, "$>", "0@y", "", 1), &mut Vec::new()), "links are not handled");
    }

    #[test]
    fn by_correlation_id() {
        let out = run(SystemKind::ByCorrelationId, DEFAULT_CORRELATION_QUERY, &history());
        let got: Vec<(&str, &str)> = out.iter().map(|e| (e.0.as_str(), e.2.as_str())).collect();
        assert_eq!(got, [("$bc-c1", "0@order-1"), ("$bc-c1", "0@order-2")]);
        assert!(out[0].3.contains(r#""$eventTimestamp":"2023-11-14T22:13:20"#), "{}", out[0].3);
        let out = run(
            SystemKind::ByCorrelationId,
            r#"{"correlationIdProperty":"cid"}"#,
            &[ev("a-1", 0, "T", "{}", r#"{"cid":"x","$correlationId":"y"}"#, 1)],
        );
        assert_eq!(out[0].0, "$bc-x");
    }

    #[test]
    fn queries() {
        for k in SystemKind::ALL {
            assert!(SystemHandler::new(k, k.default_query()).is_ok(), "{k:?}");
            assert_eq!(SystemKind::from_name(k.name()), Some(k));
        }
        assert!(SystemHandler::new(SystemKind::ByEventType, "x").is_err());
        assert!(SystemHandler::new(SystemKind::ByCategory, "middle\n-").is_err());
        assert!(SystemHandler::new(SystemKind::ByCorrelationId, "{").is_err());
        assert!(SystemHandler::new(SystemKind::ByCorrelationId, r#"{"correlationIdProperty":1}"#).is_err());
        assert_eq!(SystemKind::from_name("$nope"), None);
    }
}
