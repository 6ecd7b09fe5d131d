//! The node's log as JSON lines (`--log-format json`) and the handle that changes its level
//! at runtime (`GET|POST /admin/loglevel`).
//!
//! [`JsonLines`] formats one event per line: a JSON object with `timestamp` (UTC, microseconds),
//! `level`, `module` (the event's target), `node` (the node's HTTP endpoint), `message`, and the
//! event's other fields under `fields` (numbers and booleans as JSON numbers and booleans,
//! anything else as text). Invariants: a line is always one valid JSON object (the message and
//! every field are escaped by the JSON writer); formatting never fails an event.
//! The subscriber itself is set up by the binary (it owns the process's standard error).

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::env::Clock;

/// The levels `--log-level` and `/admin/loglevel` take, lowest volume first.
pub const LEVELS: [&str; 5] = ["Error", "Warn", "Info", "Debug", "Trace"];

/// The level named by `s` (any case), as [`LEVELS`] spells it.
pub fn level(s: &str) -> Option<&'static str> {
    LEVELS.iter().copied().find(|l| l.eq_ignore_ascii_case(s.trim()))
}

/// Changes the level of the process's log (the binary implements it over its subscriber).
pub trait LogControl: Send + Sync {
    /// The level in force, as [`LEVELS`] spells it.
    fn level(&self) -> &'static str;
    /// Puts `level` (one of [`LEVELS`]) in force.
    fn set_level(&self, level: &'static str) -> Result<(), String>;
    /// `"Text"` or `"Json"`.
    fn format(&self) -> &'static str;
}

/// A shared [`LogControl`].
pub type SharedLogControl = Arc<dyn LogControl>;

/// The JSON lines format (see the module doc).
pub struct JsonLines {
    /// The node's name in every line (its HTTP endpoint).
    pub node: String,
    /// Where timestamps come from.
    pub clock: Arc<dyn Clock>,
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().to_owned(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

impl JsonLines {
    /// The line for an event with `level`, `target` and recorded `fields` (without the newline).
    pub fn line(&self, level: &str, target: &str, mut fields: Map<String, Value>) -> String {
        let message = match fields.remove("message") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let mut line = Map::new();
        line.insert("timestamp".into(), Value::from(crate::http::text::iso8601(self.clock.wall_micros())));
        line.insert("level".into(), Value::from(level));
        line.insert("module".into(), Value::from(target));
        line.insert("node".into(), Value::from(self.node.as_str()));
        line.insert("message".into(), Value::from(message));
        if !fields.is_empty() {
            line.insert("fields".into(), Value::Object(fields));
        }
        Value::Object(line).to_string()
    }
}

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Map::new();
        event.record(&mut Fields(&mut fields));
        let meta = event.metadata();
        writeln!(writer, "{}", self.line(meta.level().as_str(), meta.target(), fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct At(i64);
    impl Clock for At {
        fn monotonic(&self) -> std::time::Duration {
            std::time::Duration::ZERO
        }
        fn wall_micros(&self) -> i64 {
            self.0
        }
    }

    #[test]
    fn a_line_is_one_json_object_with_the_fixed_keys_and_the_fields() {
        let f = JsonLines { node: "127.0.0.1:2113".into(), clock: Arc::new(At(1_700_000_000_123_456)) };
        let mut fields = Map::new();
        fields.insert("message".into(), Value::from("scavenge \"finished\"\nok"));
        fields.insert("space_saved".into(), Value::from(42u64));
        let line = f.line("INFO", "annal::scavenge", fields);
        assert!(!line.contains('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["timestamp"], "2023-11-14T22:13:20.123456Z");
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["module"], "annal::scavenge");
        assert_eq!(v["node"], "127.0.0.1:2113");
        assert_eq!(v["message"], "scavenge \"finished\"\nok");
        assert_eq!(v["fields"]["space_saved"], 42);
        let bare = f.line("WARN", "annal", Map::new());
        assert!(serde_json::from_str::<Value>(&bare).unwrap().get("fields").is_none());
    }

    #[test]
    fn levels_are_named_in_any_case() {
        assert_eq!(level("debug"), Some("Debug"));
        assert_eq!(level(" TRACE "), Some("Trace"));
        assert_eq!(level("verbose"), None);
    }
}
