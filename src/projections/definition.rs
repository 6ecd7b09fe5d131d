//! A projection's definition: what it runs (a system projection's handler or a JavaScript query),
//! its mode, whether it is enabled, its epoch and version, who it runs as, and its configuration; stored as `$ProjectionUpdated` events in `$projections-{name}`
//! (the last one counts), and the configuration document of `/projection/{name}/config`.
//!
//! Documents leave out fields that hold 0, `false` or nothing, as v5 writes them; reading one, a
//! field left out keeps its default.

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::checkpoint::{
    ProjectionVersion, Thresholds, CHECKPOINT_HANDLED_THRESHOLD, CHECKPOINT_UNHANDLED_BYTES_THRESHOLD,
    MAX_WRITE_BATCH_LENGTH, PENDING_EVENTS_THRESHOLD,
};
use super::system::SystemKind;

/// The event type of a definition.
pub const UPDATED_EVENT_TYPE: &str = "$ProjectionUpdated";
/// The version a definition starts at.
pub const FIRST_VERSION: i64 = 1;
/// The epoch a definition starts at (no reset yet).
pub const FIRST_EPOCH: i64 = -1;

/// A projection's configuration (`/projection/{name}/config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProjectionConfig {
    /// `emitEnabled`.
    pub emit_enabled: bool,
    /// `trackEmittedStreams`.
    pub track_emitted_streams: bool,
    /// `checkpointAfterMs`.
    pub checkpoint_after_ms: u64,
    /// `checkpointHandledThreshold`.
    pub checkpoint_handled_threshold: u64,
    /// `checkpointUnhandledBytesThreshold`.
    pub checkpoint_unhandled_bytes_threshold: u64,
    /// `pendingEventsThreshold`.
    pub pending_events_threshold: u64,
    /// `maxWriteBatchLength`.
    pub max_write_batch_length: u64,
    /// `maxAllowedWritesInFlight` (0: unbounded).
    pub max_allowed_writes_in_flight: u64,
}

impl ProjectionConfig {
    /// A system projection's: emitting, the default thresholds.
    pub fn system() -> ProjectionConfig {
        ProjectionConfig {
            emit_enabled: true,
            track_emitted_streams: false,
            checkpoint_after_ms: 0,
            checkpoint_handled_threshold: CHECKPOINT_HANDLED_THRESHOLD,
            checkpoint_unhandled_bytes_threshold: CHECKPOINT_UNHANDLED_BYTES_THRESHOLD,
            pending_events_threshold: PENDING_EVENTS_THRESHOLD,
            max_write_batch_length: MAX_WRITE_BATCH_LENGTH,
            max_allowed_writes_in_flight: 0,
        }
    }

    /// The checkpoint rule's thresholds.
    pub fn thresholds(&self) -> Thresholds {
        Thresholds {
            after: Duration::from_millis(self.checkpoint_after_ms),
            handled: self.checkpoint_handled_threshold.max(1),
            unhandled_bytes: self.checkpoint_unhandled_bytes_threshold,
        }
    }

    fn members(&self) -> [(&'static str, Value); 8] {
        [
            ("emitEnabled", json!(self.emit_enabled)),
            ("trackEmittedStreams", json!(self.track_emitted_streams)),
            ("checkpointAfterMs", json!(self.checkpoint_after_ms)),
            ("checkpointHandledThreshold", json!(self.checkpoint_handled_threshold)),
            ("checkpointUnhandledBytesThreshold", json!(self.checkpoint_unhandled_bytes_threshold)),
            ("pendingEventsThreshold", json!(self.pending_events_threshold)),
            ("maxWriteBatchLength", json!(self.max_write_batch_length)),
            ("maxAllowedWritesInFlight", json!(self.max_allowed_writes_in_flight)),
        ]
    }

    /// Applies the fields of a `PUT …/config` body (or a stored definition) over these: a field
    /// left out, or a number given as 0, keeps its value. The error names a field of the wrong
    /// type.
    pub fn apply(&mut self, doc: &Map<String, Value>) -> Result<(), String> {
        fn flag(doc: &Map<String, Value>, k: &str, into: &mut bool) -> Result<(), String> {
            match doc.get(k) {
                None | Some(Value::Null) => Ok(()),
                Some(Value::Bool(b)) => {
                    *into = *b;
                    Ok(())
                }
                Some(_) => Err(format!("{k} must be true or false")),
            }
        }
        fn num(doc: &Map<String, Value>, k: &str, into: &mut u64) -> Result<(), String> {
            match doc.get(k) {
                None | Some(Value::Null) => Ok(()),
                Some(v) => match v.as_u64() {
                    Some(0) => Ok(()),
                    Some(n) => {
                        *into = n;
                        Ok(())
                    }
                    None => Err(format!("{k} must be a non-negative integer")),
                },
            }
        }
        let mut next = *self;
        flag(doc, "emitEnabled", &mut next.emit_enabled)?;
        flag(doc, "trackEmittedStreams", &mut next.track_emitted_streams)?;
        num(doc, "checkpointAfterMs", &mut next.checkpoint_after_ms)?;
        num(doc, "checkpointHandledThreshold", &mut next.checkpoint_handled_threshold)?;
        num(doc, "checkpointUnhandledBytesThreshold", &mut next.checkpoint_unhandled_bytes_threshold)?;
        num(doc, "pendingEventsThreshold", &mut next.pending_events_threshold)?;
        num(doc, "maxWriteBatchLength", &mut next.max_write_batch_length)?;
        num(doc, "maxAllowedWritesInFlight", &mut next.max_allowed_writes_in_flight)?;
        if !next.emit_enabled && next.track_emitted_streams {
            next.track_emitted_streams = false;
        }
        *self = next;
        Ok(())
    }

    /// The `/projection/{name}/config` document (zero and false fields left out), with the
    /// `msgTypeId` v5's replies carry (clients read it; its value means nothing).
    pub fn document(&self, name: &str) -> Value {
        let mut m = Map::new();
        m.insert("msgTypeId".into(), json!(CONFIG_MSG_TYPE_ID));
        m.insert("name".into(), json!(name));
        put_members(&mut m, self.members());
        Value::Object(m)
    }
}

/// The `msgTypeId` of the config document (v5 puts an internal message number there).
const CONFIG_MSG_TYPE_ID: i64 = 1301;

fn is_default(v: &Value) -> bool {
    matches!(v, Value::Null | Value::Bool(false)) || v.as_u64() == Some(0) || v.as_str() == Some("")
}

fn put_members<const N: usize>(m: &mut Map<String, Value>, members: [(&'static str, Value); N]) {
    for (k, v) in members {
        if !is_default(&v) {
            m.insert(k.into(), v);
        }
    }
}

/// The handler type of a JavaScript projection.
pub const JS_HANDLER_TYPE: &str = "JS";

/// What runs a projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A system projection (native code).
    System(SystemKind),
    /// A JavaScript query.
    Js,
}

impl Kind {
    /// The `handlerType` of the definition (v5's names).
    pub fn handler_type(self) -> &'static str {
        match self {
            Kind::System(k) => k.handler_type(),
            Kind::Js => JS_HANDLER_TYPE,
        }
    }

    /// The system projection, if it is one.
    pub fn system(self) -> Option<SystemKind> {
        match self {
            Kind::System(k) => Some(k),
            Kind::Js => None,
        }
    }
}

/// A projection's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Runs to the end of the log, keeps nothing (never stored; no checkpoints, no output).
    Transient,
    /// Runs to the end of the log as it was when it started, then completes.
    OneTime,
    /// Runs for ever.
    Continuous,
}

impl Mode {
    /// The name in documents.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Transient => "Transient",
            Mode::OneTime => "OneTime",
            Mode::Continuous => "Continuous",
        }
    }

    /// The mode of a name.
    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Transient, Mode::OneTime, Mode::Continuous].into_iter().find(|m| m.name() == s)
    }

    /// Whether it stops at the end of the log.
    pub fn completes(self) -> bool {
        !matches!(self, Mode::Continuous)
    }
}

/// Who a projection runs as: the user who created or last changed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    /// Login.
    pub name: String,
    /// Groups.
    pub roles: Vec<String>,
}

impl RunAs {
    /// The system's identity (the system projections).
    pub fn system() -> RunAs {
        RunAs { name: "$system".into(), roles: vec!["$admins".into()] }
    }
}

/// A projection's definition (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// Name.
    pub name: String,
    /// What runs it.
    pub kind: Kind,
    /// Mode.
    pub mode: Mode,
    /// Whether it writes checkpoints (always for a continuous projection).
    pub checkpoints_enabled: bool,
    /// Who it runs as.
    pub run_as: RunAs,
    /// Id: the event number of its `$ProjectionCreated` in the registry.
    pub id: i64,
    /// Query text.
    pub query: String,
    /// Enabled (runs whenever projections run on this node).
    pub enabled: bool,
    /// Epoch (set to the version by a reset).
    pub epoch: i64,
    /// Version (raised by each change of the query or configuration, and by a reset).
    pub version: i64,
    /// Configuration.
    pub config: ProjectionConfig,
}

impl Definition {
    /// A system projection as it is created: its default query, disabled.
    pub fn new_system(kind: SystemKind, id: i64) -> Definition {
        Definition {
            name: kind.name().to_owned(),
            kind: Kind::System(kind),
            mode: Mode::Continuous,
            checkpoints_enabled: true,
            run_as: RunAs::system(),
            id,
            query: kind.default_query().to_owned(),
            enabled: false,
            epoch: FIRST_EPOCH,
            version: FIRST_VERSION,
            config: ProjectionConfig::system(),
        }
    }

    /// A JavaScript projection as it is created (its query checked by the caller); its
    /// configuration has the defaults but for `emitEnabled` and `trackEmittedStreams`.
    pub fn new_js(name: &str, id: i64, query: &str, mode: Mode, run_as: RunAs) -> Definition {
        Definition {
            name: name.to_owned(),
            kind: Kind::Js,
            mode,
            checkpoints_enabled: mode == Mode::Continuous,
            run_as,
            id,
            query: query.to_owned(),
            enabled: true,
            epoch: FIRST_EPOCH,
            version: FIRST_VERSION,
            config: ProjectionConfig { emit_enabled: false, ..ProjectionConfig::system() },
        }
    }

    /// The system projection, if it is one.
    pub fn system(&self) -> Option<SystemKind> {
        self.kind.system()
    }

    /// The version output is tagged with.
    pub fn projection_version(&self) -> ProjectionVersion {
        ProjectionVersion { id: self.id, epoch: self.epoch, version: self.version }
    }

    /// The stored form (data of a `$ProjectionUpdated` event).
    pub fn to_json(&self) -> Vec<u8> {
        let mut m = Map::new();
        put_members(
            &mut m,
            [
                ("handlerType", json!(self.kind.handler_type())),
                ("query", json!(self.query)),
                ("mode", json!(self.mode.name())),
                ("enabled", json!(self.enabled)),
                ("checkpointsDisabled", json!(!self.checkpoints_enabled)),
                ("epoch", json!(self.epoch)),
                ("version", json!(self.version)),
                ("runAs", json!({"name": self.run_as.name, "roles": self.run_as.roles})),
            ],
        );
        put_members(&mut m, self.config.members());
        serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
    }

    /// Reads the stored definition of projection `name` with id `id`; `None` when the data is
    /// not a definition (the caller keeps what it had).
    pub fn from_json(name: &str, id: i64, data: &[u8]) -> Option<Definition> {
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(data) else { return None };
        let mut d = match m.get("handlerType").and_then(Value::as_str) {
            Some(JS_HANDLER_TYPE) => Definition::new_js(name, id, "", Mode::Continuous, RunAs::system()),
            _ => Definition::new_system(SystemKind::from_name(name)?, id),
        };
        if let Some(mode) = m.get("mode").and_then(Value::as_str) {
            d.mode = Mode::parse(mode)?;
        }
        d.checkpoints_enabled = !m.get("checkpointsDisabled").and_then(Value::as_bool).unwrap_or(false);
        if let Some(Value::Object(r)) = m.get("runAs") {
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let roles = r
                .get("roles")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            d.run_as = RunAs { name, roles };
        }
        d.query = match m.get("query") {
            Some(Value::String(q)) => q.clone(),
            None => String::new(),
            Some(_) => return None,
        };
        d.enabled = m.get("enabled").and_then(Value::as_bool).unwrap_or(false);
        d.epoch = m.get("epoch").and_then(Value::as_i64).unwrap_or(0);
        d.version = m.get("version").and_then(Value::as_i64).unwrap_or(0);
        let mut config = ProjectionConfig { emit_enabled: false, ..ProjectionConfig::system() };
        config.apply(&m).ok()?;
        d.config = config;
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_round_trip_without_default_fields() {
        let mut d = Definition::new_system(SystemKind::ByCategory, 3);
        let json: Value = serde_json::from_slice(&d.to_json()).unwrap();
        assert_eq!(
            json,
            json!({
                "handlerType": "native:EventStore.Projections.Core.Standard.CategorizeEventsByStreamPath",
                "query": "first\r\n-", "mode": "Continuous", "epoch": -1, "version": 1,
                "runAs": {"name": "$system", "roles": ["$admins"]},
                "emitEnabled": true, "checkpointHandledThreshold": 4000,
                "checkpointUnhandledBytesThreshold": 10000000, "pendingEventsThreshold": 5000,
                "maxWriteBatchLength": 500
            })
        );
        assert_eq!(Definition::from_json("$by_category", 3, &d.to_json()), Some(d.clone()));
        d.enabled = true;
        d.epoch = 4;
        d.version = 4;
        d.config.checkpoint_after_ms = 250;
        d.query = String::new();
        assert_eq!(Definition::from_json("$by_category", 3, &d.to_json()), Some(d));
        assert_eq!(Definition::from_json("$by_category", 3, b"[]"), None);
    }

    #[test]
    fn config_updates() {
        let mut c = ProjectionConfig::system();
        assert_eq!(
            c.document("$streams"),
            json!({"msgTypeId": CONFIG_MSG_TYPE_ID, "name": "$streams", "emitEnabled": true, "checkpointHandledThreshold": 4000,
                   "checkpointUnhandledBytesThreshold": 10000000, "pendingEventsThreshold": 5000,
                   "maxWriteBatchLength": 500})
        );
        let body =
            json!({"checkpointHandledThreshold": 10, "checkpointAfterMs": 0, "maxWriteBatchLength": 7});
        c.apply(body.as_object().unwrap()).unwrap();
        assert_eq!((c.checkpoint_handled_threshold, c.max_write_batch_length), (10, 7));
        let bad = json!({"pendingEventsThreshold": "x"});
        assert!(c.apply(bad.as_object().unwrap()).is_err());
        let bad = json!({"emitEnabled": 1});
        assert!(c.apply(bad.as_object().unwrap()).is_err());
        assert_eq!(c.checkpoint_handled_threshold, 10, "a refused body changes nothing");
        let off = json!({"emitEnabled": false, "trackEmittedStreams": true});
        c.apply(off.as_object().unwrap()).unwrap();
        assert!(!c.emit_enabled && !c.track_emitted_streams, "tracking needs emitting");
    }
}
