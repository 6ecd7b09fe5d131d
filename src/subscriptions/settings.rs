//! A subscription group's settings: the HTTP body of create and update (camelCase fields, every
//! one optional, v5's HTTP defaults), their validation, and the entry each group has in the
//! definitions stream (`$persistentSubscriptionConfig`).
//!
//! Invariants: a [`Settings`] value has passed [`Settings::validate`] (positive buffer sizes,
//! `bufferSize` above `readBatchSize`, no negative count or duration, every size within its named
//! bound), so the core can rely on it.

use serde_json::{json, Map, Value};

/// Default `messageTimeoutMilliseconds` of HTTP creates.
pub const DEFAULT_MESSAGE_TIMEOUT_MS: u64 = 10_000;
/// Default `maxRetryCount`.
pub const DEFAULT_MAX_RETRY_COUNT: u32 = 10;
/// Default `liveBufferSize`.
pub const DEFAULT_LIVE_BUFFER_SIZE: usize = 500;
/// Default `bufferSize`.
pub const DEFAULT_BUFFER_SIZE: usize = 500;
/// Default `readBatchSize`.
pub const DEFAULT_READ_BATCH_SIZE: usize = 20;
/// Default `checkPointAfterMilliseconds`.
pub const DEFAULT_CHECKPOINT_AFTER_MS: u64 = 1_000;
/// Default `minCheckPointCount`.
pub const DEFAULT_MIN_CHECKPOINT_COUNT: i64 = 10;
/// Default `maxCheckPointCount`.
pub const DEFAULT_MAX_CHECKPOINT_COUNT: i64 = 500;
/// Default `maxSubscriberCount`.
pub const DEFAULT_MAX_SUBSCRIBER_COUNT: u32 = 10;
/// Largest `bufferSize`, `liveBufferSize` and `readBatchSize` accepted (messages a group holds
/// in memory).
pub const BUFFER_SIZE_MAX: usize = 100_000;
/// Largest `maxRetryCount` accepted.
pub const MAX_RETRY_COUNT_MAX: u32 = 1_000_000;
/// Largest `messageTimeoutMilliseconds` and `checkPointAfterMilliseconds` accepted (one day).
pub const MILLISECONDS_MAX: u64 = 86_400_000;
/// Largest `maxSubscriberCount` accepted.
pub const MAX_SUBSCRIBER_COUNT_MAX: u32 = 10_000;
/// Largest checkpoint counts accepted.
pub const CHECKPOINT_COUNT_MAX: i64 = 1_000_000_000;

/// How messages are shared among a group's consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Each poll takes the next messages, whoever polls.
    RoundRobin,
    /// The consumer that joined first takes messages until it holds as many unacknowledged
    /// messages as its last poll asked for; only then does the next one get any.
    DispatchToSingle,
    /// Each source stream's events go to one consumer (by a hash of the stream name).
    Pinned,
}

impl Strategy {
    /// The name in documents.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::RoundRobin => "RoundRobin",
            Strategy::DispatchToSingle => "DispatchToSingle",
            Strategy::Pinned => "Pinned",
        }
    }

    /// Parses a name (case-insensitive).
    pub fn parse(s: &str) -> Option<Strategy> {
        [Strategy::RoundRobin, Strategy::DispatchToSingle, Strategy::Pinned]
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

/// A group's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Resolve `$>` links.
    pub resolve_link_tos: bool,
    /// First event number when there is no checkpoint (`< 0`: only events written from now on).
    pub start_from: i64,
    /// In-flight time before a message is retried (0: never).
    pub message_timeout_ms: u64,
    /// Per-consumer latency figures (accepted and reported; no extra figures are kept).
    pub extra_statistics: bool,
    /// Retries before a message is parked.
    pub max_retry_count: u32,
    /// Messages buffered while the group is live (caught up with the stream).
    pub live_buffer_size: usize,
    /// Messages buffered while the group catches up.
    pub buffer_size: usize,
    /// Events read per page.
    pub read_batch_size: usize,
    /// Time between checkpoints written on the timer (0: never on time).
    pub check_point_after_ms: u64,
    /// Processed events before a checkpoint is written on the timer.
    pub min_check_point_count: i64,
    /// Processed events after which a checkpoint is written at once.
    pub max_check_point_count: i64,
    /// Live consumers at most (0: no limit).
    pub max_subscriber_count: u32,
    /// Consumer strategy.
    pub strategy: Strategy,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            resolve_link_tos: false,
            start_from: 0,
            message_timeout_ms: DEFAULT_MESSAGE_TIMEOUT_MS,
            extra_statistics: false,
            max_retry_count: DEFAULT_MAX_RETRY_COUNT,
            live_buffer_size: DEFAULT_LIVE_BUFFER_SIZE,
            buffer_size: DEFAULT_BUFFER_SIZE,
            read_batch_size: DEFAULT_READ_BATCH_SIZE,
            check_point_after_ms: DEFAULT_CHECKPOINT_AFTER_MS,
            min_check_point_count: DEFAULT_MIN_CHECKPOINT_COUNT,
            max_check_point_count: DEFAULT_MAX_CHECKPOINT_COUNT,
            max_subscriber_count: DEFAULT_MAX_SUBSCRIBER_COUNT,
            strategy: Strategy::RoundRobin,
        }
    }
}

/// A field of a body, as a number within `0..=max`.
fn count(m: &Map<String, Value>, key: &str, max: u64) -> Result<Option<u64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if n < 0 => Err(format!("{key} must not be negative")),
            Some(n) if n as u64 > max => Err(format!("{key} must be at most {max}")),
            Some(n) => Ok(Some(n as u64)),
            None => Err(format!("{key} must be an integer")),
        },
    }
}

/// A positive size field.
fn size(m: &Map<String, Value>, key: &str) -> Result<Option<usize>, String> {
    match count(m, key, BUFFER_SIZE_MAX as u64)? {
        Some(0) => Err(format!("{key} must be positive")),
        n => Ok(n.map(|n| n as usize)),
    }
}

fn flag(m: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("{key} must be true or false")),
    }
}

impl Settings {
    /// Settings from a create or update body: an empty body means every default; fields absent
    /// take their defaults; anything malformed or out of range is an error with its reason.
    pub fn from_body(body: &[u8]) -> Result<Settings, String> {
        let mut s = Settings::default();
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(s);
        }
        let v: Value = serde_json::from_slice(body).map_err(|e| format!("Invalid settings body: {e}"))?;
        let Value::Object(m) = v else { return Err("Invalid settings body: not a JSON object".into()) };
        if let Some(b) = flag(&m, "resolveLinktos")?.or(flag(&m, "resolveLinkTos")?) {
            s.resolve_link_tos = b;
        }
        match m.get("startFrom") {
            None | Some(Value::Null) => {}
            Some(v) => s.start_from = v.as_i64().ok_or("startFrom must be an integer")?,
        }
        if let Some(n) = count(&m, "messageTimeoutMilliseconds", MILLISECONDS_MAX)? {
            s.message_timeout_ms = n;
        }
        if let Some(b) = flag(&m, "extraStatistics")? {
            s.extra_statistics = b;
        }
        if let Some(n) = count(&m, "maxRetryCount", u64::from(MAX_RETRY_COUNT_MAX))? {
            s.max_retry_count = n as u32;
        }
        if let Some(n) = size(&m, "liveBufferSize")? {
            s.live_buffer_size = n;
        }
        if let Some(n) = size(&m, "bufferSize")? {
            s.buffer_size = n;
        }
        if let Some(n) = size(&m, "readBatchSize")? {
            s.read_batch_size = n;
        }
        if let Some(n) = count(&m, "checkPointAfterMilliseconds", MILLISECONDS_MAX)? {
            s.check_point_after_ms = n;
        }
        if let Some(n) = count(&m, "minCheckPointCount", CHECKPOINT_COUNT_MAX as u64)? {
            s.min_check_point_count = n as i64;
        }
        if let Some(n) = count(&m, "maxCheckPointCount", CHECKPOINT_COUNT_MAX as u64)? {
            s.max_check_point_count = n as i64;
        }
        if let Some(n) = count(&m, "maxSubscriberCount", u64::from(MAX_SUBSCRIBER_COUNT_MAX))? {
            s.max_subscriber_count = n as u32;
        }
        let prefer_rr = flag(&m, "preferRoundRobin")?;
        match m.get("namedConsumerStrategy") {
            None | Some(Value::Null) => {
                if prefer_rr == Some(false) {
                    s.strategy = Strategy::DispatchToSingle;
                }
            }
            Some(Value::String(name)) if name.is_empty() => {
                if prefer_rr == Some(false) {
                    s.strategy = Strategy::DispatchToSingle;
                }
            }
            Some(Value::String(name)) => {
                s.strategy = Strategy::parse(name).ok_or_else(|| {
                    format!("Unknown namedConsumerStrategy '{name}' (RoundRobin, DispatchToSingle or Pinned)")
                })?;
            }
            Some(_) => return Err("namedConsumerStrategy must be a string".into()),
        }
        s.validate()?;
        Ok(s)
    }

    /// The rules every group's settings keep (see the module doc).
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("bufferSize", self.buffer_size),
            ("liveBufferSize", self.live_buffer_size),
            ("readBatchSize", self.read_batch_size),
        ] {
            if v == 0 {
                return Err(format!("{name} must be positive"));
            }
            if v > BUFFER_SIZE_MAX {
                return Err(format!("{name} must be at most {BUFFER_SIZE_MAX}"));
            }
        }
        if self.buffer_size <= self.read_batch_size {
            return Err("bufferSize must be greater than readBatchSize".into());
        }
        if self.min_check_point_count < 0 || self.max_check_point_count < 0 {
            return Err("checkpoint counts must not be negative".into());
        }
        if self.max_check_point_count < self.min_check_point_count {
            return Err("maxCheckPointCount must not be less than minCheckPointCount".into());
        }
        Ok(())
    }

    /// The `config` object of the info document.
    pub fn info_json(&self) -> Value {
        json!({
            "resolveLinktos": self.resolve_link_tos,
            "startFrom": self.start_from,
            "messageTimeoutMilliseconds": self.message_timeout_ms,
            "extraStatistics": self.extra_statistics,
            "maxRetryCount": self.max_retry_count,
            "liveBufferSize": self.live_buffer_size,
            "bufferSize": self.buffer_size,
            "readBatchSize": self.read_batch_size,
            "preferRoundRobin": self.strategy == Strategy::RoundRobin,
            "checkPointAfterMilliseconds": self.check_point_after_ms,
            "minCheckPointCount": self.min_check_point_count,
            "maxCheckPointCount": self.max_check_point_count,
            "maxSubscriberCount": self.max_subscriber_count,
            "namedConsumerStrategy": self.strategy.name(),
        })
    }

    /// The group's entry in the definitions stream (zero and false fields left out).
    pub fn config_entry(&self, stream: &str, group: &str) -> Value {
        let mut m = Map::new();
        m.insert("stream".into(), json!(stream));
        m.insert("group".into(), json!(group));
        let mut num = |k: &str, v: i64| {
            if v != 0 {
                m.insert(k.into(), json!(v));
            }
        };
        num("messageTimeout", self.message_timeout_ms as i64);
        num("startFrom", self.start_from);
        num("liveBufferSize", self.live_buffer_size as i64);
        num("historyBufferSize", self.buffer_size as i64);
        num("maxRetryCount", i64::from(self.max_retry_count));
        num("readBatchSize", self.read_batch_size as i64);
        num("checkPointAfter", self.check_point_after_ms as i64);
        num("minCheckPointCount", self.min_check_point_count);
        num("maxCheckPointCount", self.max_check_point_count);
        num("maxSubscriberCount", i64::from(self.max_subscriber_count));
        for (k, b) in [
            ("resolveLinkTos", self.resolve_link_tos),
            ("extraStatistics", self.extra_statistics),
            ("preferRoundRobin", self.strategy == Strategy::RoundRobin),
        ] {
            if b {
                m.insert(k.into(), json!(true));
            }
        }
        m.insert("namedConsumerStrategy".into(), json!(self.strategy.name()));
        Value::Object(m)
    }

    /// A group from its entry in the definitions stream: `(stream, group, settings)`; `None`
    /// for an entry that names no stream or group, or whose settings break the rules.
    pub fn from_config_entry(v: &Value) -> Option<(String, String, Settings)> {
        let stream = v.get("stream")?.as_str()?.to_owned();
        let group = v.get("group")?.as_str()?.to_owned();
        let n = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
        let b = |k: &str| v.get(k).and_then(Value::as_bool).unwrap_or(false);
        let u = |k: &str| u64::try_from(n(k)).unwrap_or(0);
        let strategy = match v.get("namedConsumerStrategy").and_then(Value::as_str) {
            Some(s) if !s.is_empty() => Strategy::parse(s)?,
            _ if b("preferRoundRobin") => Strategy::RoundRobin,
            _ => Strategy::DispatchToSingle,
        };
        let s = Settings {
            resolve_link_tos: b("resolveLinkTos"),
            start_from: n("startFrom"),
            message_timeout_ms: u("messageTimeout").min(MILLISECONDS_MAX),
            extra_statistics: b("extraStatistics"),
            max_retry_count: u32::try_from(u("maxRetryCount")).unwrap_or(MAX_RETRY_COUNT_MAX),
            live_buffer_size: u("liveBufferSize") as usize,
            buffer_size: u("historyBufferSize") as usize,
            read_batch_size: u("readBatchSize") as usize,
            check_point_after_ms: u("checkPointAfter").min(MILLISECONDS_MAX),
            min_check_point_count: n("minCheckPointCount").max(0),
            max_check_point_count: n("maxCheckPointCount").max(0),
            max_subscriber_count: u32::try_from(u("maxSubscriberCount")).unwrap_or(MAX_SUBSCRIBER_COUNT_MAX),
            strategy,
        };
        s.validate().ok()?;
        Some((stream, group, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_validation() {
        assert_eq!(Settings::from_body(b"").unwrap(), Settings::default());
        assert_eq!(Settings::from_body(b"{}").unwrap(), Settings::default());
        let s = Settings::from_body(br#"{"namedConsumerStrategy":"pinned","maxRetryCount":2}"#).unwrap();
        assert_eq!((s.strategy, s.max_retry_count), (Strategy::Pinned, 2));
        let s = Settings::from_body(br#"{"preferRoundRobin":false}"#).unwrap();
        assert_eq!(s.strategy, Strategy::DispatchToSingle);
        for (body, why) in [
            (&br#"{"bufferSize":0}"#[..], "bufferSize must be positive"),
            (br#"{"maxRetryCount":-1}"#, "maxRetryCount must not be negative"),
            (br#"{"bufferSize":20}"#, "bufferSize must be greater than readBatchSize"),
            (br#"{"namedConsumerStrategy":"Fastest"}"#, "Unknown namedConsumerStrategy"),
            (br#"{"messageTimeoutMilliseconds":"x"}"#, "messageTimeoutMilliseconds must be an integer"),
            (br#"{"minCheckPointCount":5,"maxCheckPointCount":4}"#, "maxCheckPointCount must not be less"),
            (b"[1]", "not a JSON object"),
            (b"{", "Invalid settings body"),
        ] {
            let e = Settings::from_body(body).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn config_entries_round_trip() {
        let s = Settings {
            resolve_link_tos: true,
            start_from: -1,
            strategy: Strategy::Pinned,
            message_timeout_ms: 0,
            ..Settings::default()
        };
        let entry = s.config_entry("orders", "g");
        assert!(entry.get("messageTimeout").is_none() && entry.get("extraStatistics").is_none());
        assert_eq!(Settings::from_config_entry(&entry), Some(("orders".into(), "g".into(), s)));
        let rr = Settings::default().config_entry("a", "b");
        assert_eq!(Settings::from_config_entry(&rr).unwrap().2, Settings::default());
    }
}
