//! Checkpoint tags and the checkpoint rule, free of I/O.
//!
//! A projection's position is a log position: every record before it was processed and every
//! event it emitted for them is written. Emitted events and checkpoints carry it as a tag in
//! their metadata: `$v` (`"{id}:{epoch}:{version}:4"`, the projection's identity and the epoch
//! its output belongs to) and `$c`/`$p` (commit and prepare position, equal here: a record's own
//! log position).
//!
//! A checkpoint is due, once more than `checkpointAfterMs` passed since the last one, when
//! `checkpointHandledThreshold` events were handled since it, or when the records the projection
//! passed over without handling them span more than `checkpointUnhandledBytesThreshold` bytes
//! since the last handled event or checkpoint.

use std::time::Duration;

use serde_json::Value;

/// The system version written as the last field of `$v`.
pub const SYSTEM_VERSION: i64 = 4;
/// Default `checkpointHandledThreshold`: handled events between checkpoints.
pub const CHECKPOINT_HANDLED_THRESHOLD: u64 = 4000;
/// Default `checkpointUnhandledBytesThreshold`: log bytes passed over between checkpoints.
pub const CHECKPOINT_UNHANDLED_BYTES_THRESHOLD: u64 = 10_000_000;
/// Default `pendingEventsThreshold`: events read ahead of processing, at most.
pub const PENDING_EVENTS_THRESHOLD: u64 = 5000;
/// Default `maxWriteBatchLength`: events of one emitted-stream write, at most.
pub const MAX_WRITE_BATCH_LENGTH: u64 = 500;

/// Who a projection's output belongs to: its id (the event number of its creation in the
/// registry), and the epoch and version of its definition. A reset starts a new epoch: output of
/// older epochs no longer counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProjectionVersion {
    /// Projection id.
    pub id: i64,
    /// Epoch (raised by a reset to the new version).
    pub epoch: i64,
    /// Version (raised by every change of the definition).
    pub version: i64,
}

impl ProjectionVersion {
    /// The `$v` value.
    pub fn tag_value(&self) -> String {
        format!("{}:{}:{}:{SYSTEM_VERSION}", self.id, self.epoch, self.version)
    }

    /// Parses a `$v` value.
    pub fn parse(v: &str) -> Option<ProjectionVersion> {
        let mut it = v.split(':').map(|x| x.parse::<i64>().ok());
        let (Some(Some(id)), Some(Some(epoch)), Some(Some(version))) = (it.next(), it.next(), it.next())
        else {
            return None;
        };
        Some(ProjectionVersion { id, epoch, version })
    }
}

/// A tag as read back from an event's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tag {
    /// Whose output.
    pub version: ProjectionVersion,
    /// The position (`$p`).
    pub position: u64,
}

impl Tag {
    /// The metadata's tag, if it has one.
    pub fn from_metadata(metadata: &[u8]) -> Option<Tag> {
        let v: Value = serde_json::from_slice(metadata).ok()?;
        let version = ProjectionVersion::parse(v.get("$v")?.as_str()?)?;
        let position = v.get("$p")?.as_u64()?;
        Some(Tag { version, position })
    }

    /// Whether output tagged so already covers the source event at `position` for a projection
    /// of `current` (same projection, an epoch at least as new, at or past that position).
    pub fn covers(&self, current: &ProjectionVersion, position: u64) -> bool {
        self.version.id == current.id && self.version.epoch >= current.epoch && self.position >= position
    }
}

/// The opening members of a tagged metadata object: `{"$v":…,"$c":p,"$p":p` (no closing brace).
pub fn tag_prefix(v: &ProjectionVersion, position: u64) -> String {
    format!("{{\"$v\":\"{}\",\"$c\":{position},\"$p\":{position}", v.tag_value())
}

/// The string form of a position, as the statistics show it.
pub fn position_text(position: u64) -> String {
    format!("C:{position}/P:{position}")
}

/// The thresholds of the checkpoint rule (a projection's configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// `checkpointAfterMs`.
    pub after: Duration,
    /// `checkpointHandledThreshold`.
    pub handled: u64,
    /// `checkpointUnhandledBytesThreshold`.
    pub unhandled_bytes: u64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            after: Duration::ZERO,
            handled: CHECKPOINT_HANDLED_THRESHOLD,
            unhandled_bytes: CHECKPOINT_UNHANDLED_BYTES_THRESHOLD,
        }
    }
}

/// Progress since the last checkpoint (see the module doc).
#[derive(Clone, Debug)]
pub struct Progress {
    thresholds: Thresholds,
    handled: u64,
    /// The position of the last handled event or checkpoint.
    mark: u64,
    /// The position processed up to.
    position: u64,
    /// When the last checkpoint was written (monotonic).
    last_at: Duration,
}

impl Progress {
    /// Progress from a checkpoint at `position`, written (or loaded) at `now`.
    pub fn new(thresholds: Thresholds, position: u64, now: Duration) -> Progress {
        Progress { thresholds, handled: 0, mark: position, position, last_at: now }
    }

    /// A record ending at `end` was processed; `handled` when it passed the projection's filter.
    pub fn record(&mut self, handled: bool, end: u64) {
        if handled {
            self.handled += 1;
            self.mark = end;
        }
        self.position = self.position.max(end);
    }

    /// Processed up to `end` (records the projection does not see, such as epoch records).
    pub fn advance(&mut self, end: u64) {
        self.position = self.position.max(end);
    }

    /// A batch ending at `end` was processed and its output written: `handled` events passed
    /// the filter, the last of them at `last_handled`.
    pub fn batch(&mut self, handled: u64, last_handled: Option<u64>, end: u64) {
        self.handled += handled;
        if let Some(p) = last_handled {
            self.mark = p;
        }
        self.advance(end);
    }

    /// Where the projection is.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Handled events since the last checkpoint.
    pub fn handled(&self) -> u64 {
        self.handled
    }

    /// Whether a checkpoint is due at `now`.
    pub fn due(&self, now: Duration) -> bool {
        let after = self.thresholds.after;
        if !after.is_zero() && now.saturating_sub(self.last_at) <= after {
            return false;
        }
        let t = &self.thresholds;
        (self.handled > 0 && self.handled >= t.handled)
            || self.position.saturating_sub(self.mark) > t.unhandled_bytes
    }

    /// A checkpoint of the current position was written at `now`.
    pub fn checkpointed(&mut self, now: Duration) {
        self.handled = 0;
        self.mark = self.position;
        self.last_at = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_tags_round_trip() {
        let v = ProjectionVersion { id: 3, epoch: -1, version: 1 };
        assert_eq!(v.tag_value(), "3:-1:1:4");
        assert_eq!(ProjectionVersion::parse("3:-1:1:4"), Some(v));
        assert_eq!(ProjectionVersion::parse("x:1:1"), None);
        let meta = format!("{},\"$o\":\"a-1\"}}", tag_prefix(&v, 77));
        assert_eq!(meta, r#"{"$v":"3:-1:1:4","$c":77,"$p":77,"$o":"a-1"}"#);
        let tag = Tag::from_metadata(meta.as_bytes()).unwrap();
        assert_eq!(tag, Tag { version: v, position: 77 });
        assert!(tag.covers(&v, 77) && tag.covers(&v, 10) && !tag.covers(&v, 78));
        let reset = ProjectionVersion { id: 3, epoch: 2, version: 2 };
        assert!(!tag.covers(&reset, 10), "output of an older epoch does not count");
        assert!(!tag.covers(&ProjectionVersion { id: 4, ..v }, 10), "another projection's output");
        assert_eq!(Tag::from_metadata(b"{\"a\":1}"), None);
        assert_eq!(Tag::from_metadata(b"not json"), None);
        assert_eq!(position_text(5), "C:5/P:5");
    }

    #[test]
    fn checkpoint_rule() {
        let t = Thresholds { after: Duration::ZERO, handled: 3, unhandled_bytes: 100 };
        let mut p = Progress::new(t, 0, Duration::ZERO);
        assert!(!p.due(Duration::ZERO));
        p.record(true, 10);
        p.record(true, 20);
        assert!(!p.due(Duration::ZERO));
        p.record(true, 30);
        assert!(p.due(Duration::ZERO));
        p.checkpointed(Duration::from_secs(1));
        assert_eq!((p.handled(), p.position()), (0, 30));
        // Passed-over records count by bytes since the last handled event.
        p.record(false, 100);
        assert!(!p.due(Duration::from_secs(1)));
        p.record(true, 120);
        p.record(false, 221);
        assert!(p.due(Duration::from_secs(1)), "101 unhandled bytes since the last handled event");
        p.checkpointed(Duration::from_secs(2));
        p.batch(2, Some(300), 400);
        assert!(!p.due(Duration::from_secs(2)), "two handled, 100 bytes after the last of them");
        p.batch(0, None, 401);
        assert!(p.due(Duration::from_secs(2)));
        // checkpointAfterMs holds checkpoints back.
        let t = Thresholds { after: Duration::from_millis(500), ..t };
        let mut p = Progress::new(t, 0, Duration::ZERO);
        for i in 1..=5 {
            p.record(true, i * 10);
        }
        assert!(!p.due(Duration::from_millis(500)));
        assert!(p.due(Duration::from_millis(501)));
    }
}
