//! The stream engine's decisions, free of I/O: expected-version checks, idempotency, delete rules,
//! re-creating soft-deleted streams, metadata state, name validation and event visibility. Each
//! write operation becomes a [`Plan`] ([`plan_append`], [`plan_delete`], [`plan_scavenge_point`]):
//! the events to write and the stream states they leave. The shell ([`super::Store`]) supplies the
//! facts a decision needs through [`Facts`] (stream states, the ids already written at the
//! expected positions, recent ids, fresh ids) and only encodes the planned events; the plan is
//! what a cluster's leader replicates.
//!
//! Rules are v5's (expected versions, idempotent repeats, deletes, metadata); `model/` states the same
//! semantics independently and the model comparison test holds the two together.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;

use super::metadata::{self, StreamMetadata};
use super::{NewEvent, StorageError, WriteError, SCAVENGE_POINTS};
use crate::log::record;

/// Expected version: any.
pub const ANY: i64 = -2;
/// Expected version: the stream must not exist.
pub const NO_STREAM: i64 = -1;
/// Expected version: the stream must exist.
pub const STREAM_EXISTS: i64 = -4;
/// Event number of a hard-delete tombstone.
pub const TOMBSTONE: i64 = i64::MAX;
/// Longest stream name, in bytes.
pub const STREAM_NAME_BYTES_MAX: usize = 2000;
/// Longest event type, in bytes.
pub const EVENT_TYPE_BYTES_MAX: usize = 1024;

/// What the engine knows about a stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// Raw last event number: -1 when never written, [`TOMBSTONE`] when hard-deleted.
    pub last: i64,
    /// Parsed metadata (from the latest `$$stream` event).
    pub meta: StreamMetadata,
    /// Last event number of the metastream, -1 when it has none.
    pub meta_last: i64,
}

impl StreamState {
    /// A stream that was never written.
    pub fn empty() -> StreamState {
        StreamState { last: -1, meta: StreamMetadata::default(), meta_last: -1 }
    }
    /// Hard-deleted.
    pub fn is_tombstoned(&self) -> bool {
        self.last == TOMBSTONE
    }
}

/// Whether `name` is a metastream (`$$…`), and of which stream.
pub fn meta_target(name: &str) -> Option<&str> {
    name.strip_prefix("$$")
}

/// Whether `name` is a system stream.
pub fn is_system(name: &str) -> bool {
    name.starts_with('$')
}

/// Validates a stream name for writing.
pub fn validate_name(name: &str) -> Result<(), WriteError> {
    if name.is_empty() {
        return Err(WriteError::InvalidStreamName("stream name is empty"));
    }
    let allowed = STREAM_NAME_BYTES_MAX + if name.starts_with("$$") { 2 } else { 0 };
    if name.len() > allowed {
        return Err(WriteError::InvalidStreamName("stream name is longer than 2000 bytes"));
    }
    if name.bytes().any(|b| b < 0x20) {
        return Err(WriteError::InvalidStreamName("stream name contains control characters"));
    }
    Ok(())
}

/// Outcome of an expected-version check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// Write the events, numbered from `state.last + 1` (or 0).
    Append,
    /// The same events were written before: succeed without writing.
    Idempotent {
        /// Number of the first.
        first: i64,
        /// Number of the last.
        last: i64,
    },
    /// Refuse.
    Reject(WriteError),
}

/// Whether [`check_append`] needs the ids already stored at `expected + 1 ..` (an explicit version
/// below the current one: a possible retry).
pub fn needs_existing_ids(state: &StreamState, expected: i64) -> bool {
    expected >= NO_STREAM && expected < state.last && !state.is_tombstoned()
}

/// Checks an append of events with `ids` against `state`.
///
/// - `target_tombstoned`: for a metastream `$$s`, whether `s` is hard-deleted (else false);
/// - `meta_exists`: whether the stream's metastream has events (the `-4` rule);
/// - `existing`: ids stored at `expected + 1 …` when [`needs_existing_ids`] said so;
/// - `recent(id)`: where the recent-id cache saw `id` in *this* stream (its event number).
pub fn check_append(
    state: &StreamState,
    is_meta: bool,
    target_tombstoned: bool,
    expected: i64,
    ids: &[[u8; 16]],
    existing: &[Option<[u8; 16]>],
    recent: impl Fn(&[u8; 16]) -> Option<i64>,
) -> Check {
    let cur = state.last;
    let k = ids.len() as i64;
    if state.is_tombstoned() || target_tombstoned {
        return Check::Reject(WriteError::StreamDeleted);
    }
    let soft_deleted = !is_meta && state.meta.is_soft_deleted();
    let wrong = Check::Reject(WriteError::WrongExpectedVersion { current: cur });
    match expected {
        STREAM_EXISTS | ANY => {
            if expected == STREAM_EXISTS {
                if soft_deleted {
                    return Check::Reject(WriteError::StreamDeleted);
                }
                if cur < 0 && state.meta_last < 0 {
                    return wrong;
                }
            }
            let Some(first) = ids.first().and_then(&recent) else { return Check::Append };
            if ids.iter().enumerate().all(|(i, id)| recent(id) == Some(first + i as i64)) {
                Check::Idempotent { first, last: first + k - 1 }
            } else {
                wrong
            }
        }
        NO_STREAM if soft_deleted => Check::Append,
        n if n >= NO_STREAM => {
            if n == cur {
                Check::Append
            } else if n > cur {
                wrong
            } else if (existing.len() == ids.len()
                && existing.iter().zip(ids).all(|(e, id)| e.as_ref() == Some(id)))
                // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
                || crate::buggify::bug(crate::buggify::Bug::IdempotentWithoutIds)
            {
                Check::Idempotent { first: n + 1, last: n + k }
            } else {
                wrong
            }
        }
        _ => wrong,
    }
}

/// Checks a delete (no idempotency).
pub fn check_delete(state: &StreamState, expected: i64) -> Result<(), WriteError> {
    if state.is_tombstoned() {
        return Err(WriteError::StreamDeleted);
    }
    let ok = match expected {
        ANY => true,
        STREAM_EXISTS => state.last >= 0,
        n => n >= NO_STREAM && n == state.last,
    };
    if ok {
        Ok(())
    } else {
        Err(WriteError::WrongExpectedVersion { current: state.last })
    }
}

/// The facts a decision needs, fetched by the shell: stream states (as the operations before
/// this one in the group leave them), ids already stored, recently written ids, and fresh ids for
/// the events the engine adds (metadata for re-created and soft-deleted streams, scavenge
/// points). The engine performs no I/O itself.
pub trait Facts {
    /// The state of `name`.
    fn state(&mut self, name: &str) -> Result<StreamState, StorageError>;
    /// Ids of the raw events `from .. from + count` of `stream` (`None` where one is missing).
    fn existing_ids(
        &mut self,
        stream: &str,
        from: i64,
        count: usize,
    ) -> Result<Vec<Option<[u8; 16]>>, StorageError>;
    /// Where a recent write put `id` in `stream` (its event number), if it did.
    fn recent(&self, stream: &str, id: &[u8; 16]) -> Option<i64>;
    /// A fresh event id.
    fn new_id(&mut self) -> [u8; 16];
}

/// An event the engine decided to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent<'a> {
    /// Its stream (shared by the events of one atomic write).
    pub stream: Arc<str>,
    /// Its number ([`TOMBSTONE`] for a hard delete).
    pub event_number: i64,
    /// Its id.
    pub id: [u8; 16],
    /// Its type.
    pub event_type: Cow<'a, str>,
    /// Data.
    pub data: Bytes,
    /// Metadata.
    pub metadata: Bytes,
    /// Whether data and metadata are JSON.
    pub is_json: bool,
    /// Its index in its atomic write (the events one operation writes to one stream).
    pub tx_offset: u32,
    /// Whether it ends its atomic write.
    pub tx_end: bool,
    /// A hard delete's tombstone.
    pub tombstone: bool,
    /// Whether its id is remembered for idempotent retries with `-2`/`-4`.
    pub remember_id: bool,
}

/// What one write operation does, decided: the events to write in order, the numbers to answer
/// with, and the stream states it leaves. The shell only encodes the events; a cluster's leader
/// replicates what it encoded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan<'a> {
    /// Events to write, in log order.
    pub events: Vec<PlannedEvent<'a>>,
    /// Number of the first event answered.
    pub first_event_number: i64,
    /// Number of the last event answered.
    pub last_event_number: i64,
    /// The event whose log position the answer reports (`None`: nothing is written).
    pub reported: Option<usize>,
    /// Whether the chunk is completed after the events (a scavenge point).
    pub completes_chunk: bool,
    /// The states of the streams the operation touched, after it (a handful: a short list).
    pub states: Vec<(Cow<'a, str>, StreamState)>,
}

impl<'a> Plan<'a> {
    /// An operation that writes nothing and answers `first..=last` (an idempotent repeat).
    fn nothing(first: i64, last: i64) -> Plan<'a> {
        Plan { first_event_number: first, last_event_number: last, ..Plan::default() }
    }

    /// Where the state of `name` (as this plan leaves it so far) is in [`Plan::states`].
    fn slot(&mut self, facts: &mut dyn Facts, name: impl Into<Cow<'a, str>>) -> Result<usize, StorageError> {
        let name = name.into();
        if let Some(i) = self.states.iter().position(|(n, _)| *n == name) {
            return Ok(i);
        }
        let s = facts.state(&name)?;
        self.states.push((name, s));
        Ok(self.states.len() - 1)
    }

    /// The state of `name` as this plan leaves it so far.
    fn state(
        &mut self,
        facts: &mut dyn Facts,
        name: impl Into<Cow<'a, str>>,
    ) -> Result<&StreamState, StorageError> {
        let i = self.slot(facts, name)?;
        Ok(&self.states[i].1)
    }

    /// Adds `events` as one atomic write to `stream`, numbered after its last, and updates the
    /// states: the stream's last number and, for a metastream, the metadata of its target.
    /// Returns the index of the first added event.
    fn push(
        &mut self,
        facts: &mut dyn Facts,
        stream: impl Into<Cow<'a, str>>,
        events: impl ExactSizeIterator<Item = NewEventParts<'a>>,
        remember_id: bool,
    ) -> Result<usize, StorageError> {
        let slot = self.slot(facts, stream)?;
        let first = self.states[slot].1.last + 1;
        let name: Arc<str> = Arc::from(&*self.states[slot].0);
        let at = self.events.len();
        let k = events.len();
        self.events.reserve(k);
        for (i, (id, event_type, data, metadata, is_json)) in events.enumerate() {
            self.events.push(PlannedEvent {
                stream: name.clone(),
                event_number: first + i as i64,
                id,
                event_type,
                data,
                metadata,
                is_json,
                tx_offset: i as u32,
                tx_end: i + 1 == k,
                tombstone: false,
                remember_id,
            });
        }
        let last = first + k as i64 - 1;
        self.states[slot].1.last = last;
        let target = match &self.states[slot].0 {
            Cow::Borrowed(s) => meta_target(s).map(Cow::Borrowed),
            Cow::Owned(s) => meta_target(s).map(|t| Cow::Owned(t.to_owned())),
        };
        if let (Some(target), Some(e)) = (target, self.events.last()) {
            let meta = if e.is_json && !e.data.is_empty() {
                StreamMetadata::parse(&e.data)
            } else {
                StreamMetadata { raw: Some(e.data.clone()), ..StreamMetadata::default() }
            };
            let t = self.slot(facts, target)?;
            self.states[t].1.meta_last = last;
            self.states[t].1.meta = meta;
        }
        Ok(at)
    }
}

/// An event's id, type, data, metadata and JSON flag.
type NewEventParts<'a> = ([u8; 16], Cow<'a, str>, Bytes, Bytes, bool);

fn parts(e: &NewEvent) -> NewEventParts<'_> {
    (e.id, Cow::Borrowed(e.event_type.as_str()), e.data.clone(), e.metadata.clone(), e.is_json)
}

fn metadata_event<'a>(id: [u8; 16], data: Bytes) -> NewEventParts<'a> {
    (id, Cow::Borrowed("$metadata"), data, Bytes::new(), true)
}

/// The log's limits on events.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Largest event (data + metadata) accepted, in bytes.
    pub max_event_bytes: usize,
    /// Data bytes per chunk: a record must fit in one.
    pub chunk_size: u64,
}

/// Refuses an append the log cannot take: a bad stream name, an event too large (for the limit
/// or for a chunk), or too long an event type.
fn validate_append(limits: &Limits, stream: &str, events: &[NewEvent]) -> Result<(), WriteError> {
    validate_name(stream)?;
    for e in events {
        let size = e.data.len() + e.metadata.len();
        if size > limits.max_event_bytes {
            return Err(WriteError::EventTooLarge { size, max: limits.max_event_bytes });
        }
        if e.event_type.len() > EVENT_TYPE_BYTES_MAX {
            return Err(WriteError::InvalidEvent("event type is longer than 1024 bytes".into()));
        }
        let len = record::event_frame_len(stream, &e.event_type, e.data.len(), e.metadata.len());
        if len > limits.chunk_size {
            return Err(WriteError::EventTooLarge {
                size,
                max: limits.max_event_bytes.min(limits.chunk_size as usize / 2),
            });
        }
    }
    Ok(())
}

/// Decides an append of `events` to `stream` with `expected`, after checking them against the
/// log's `limits`. Re-creating a soft-deleted stream first writes its metadata with `$tb` moved to
/// the first new event; metadata written for a soft-deleted stream keeps it undeleted past its
/// last event.
pub fn plan_append<'a>(
    facts: &mut dyn Facts,
    limits: &Limits,
    stream: &'a str,
    expected: i64,
    events: &'a [NewEvent],
) -> Result<Plan<'a>, WriteError> {
    validate_append(limits, stream, events)?;
    let mut plan = Plan::default();
    let meta_of = meta_target(stream);
    let target_tombstoned = match meta_of {
        Some(t) => plan.state(facts, t)?.is_tombstoned(),
        None => false,
    };
    let slot = plan.slot(facts, stream)?;
    let state = &plan.states[slot].1;
    let ids: Vec<[u8; 16]> = events.iter().map(|e| e.id).collect();
    let existing = if needs_existing_ids(state, expected) {
        facts.existing_ids(stream, expected + 1, ids.len())?
    } else {
        Vec::new()
    };
    let check = check_append(state, meta_of.is_some(), target_tombstoned, expected, &ids, &existing, |id| {
        facts.recent(stream, id)
    });
    let (last_now, soft_deleted) = (state.last, meta_of.is_none() && state.meta.is_soft_deleted());
    match check {
        Check::Reject(e) => Err(e),
        Check::Idempotent { .. } | Check::Append if events.is_empty() => {
            Ok(Plan::nothing(last_now + 1, last_now))
        }
        Check::Idempotent { first, last } => Ok(Plan::nothing(first, last)),
        Check::Append => {
            let first = last_now + 1;
            let mut reported = None;
            if soft_deleted {
                // Re-creating a soft-deleted stream: `$tb` moves to the first new event.
                let json = metadata::recreate_json(plan.states[slot].1.meta.raw.as_deref(), first);
                let ev = metadata_event(facts.new_id(), json.into());
                reported = Some(plan.push(facts, format!("$${stream}"), std::iter::once(ev), false)?);
            }
            let mut undeleted = None;
            if let Some(target) = meta_of {
                let t = plan.state(facts, target)?;
                if t.meta.is_soft_deleted() && t.last >= 0 {
                    undeleted = events
                        .last()
                        .filter(|l| l.is_json)
                        .and_then(|l| metadata::undelete_json(&l.data, t.last + 1))
                        .map(Bytes::from);
                }
            }
            let n = events.len();
            let evs = events.iter().enumerate().map(|(i, e)| match (&undeleted, i + 1 == n) {
                (Some(json), true) => {
                    let (id, ty, _, meta, is_json) = parts(e);
                    (id, ty, json.clone(), meta, is_json)
                }
                _ => parts(e),
            });
            let at = plan.push(facts, stream, evs, true)?;
            plan.reported = reported.or(Some(at));
            plan.first_event_number = first;
            plan.last_event_number = first + n as i64 - 1;
            Ok(plan)
        }
    }
}

/// Decides a delete of `stream` with `expected`: a tombstone (`hard`) or metadata with `$tb` at
/// the end of the stream (soft).
pub fn plan_delete<'a>(
    facts: &mut dyn Facts,
    stream: &'a str,
    expected: i64,
    hard: bool,
) -> Result<Plan<'a>, WriteError> {
    validate_name(stream)?;
    let mut plan = Plan::default();
    let slot = plan.slot(facts, stream)?;
    if let Some(t) = meta_target(stream) {
        if plan.state(facts, t)?.is_tombstoned() {
            return Err(WriteError::StreamDeleted);
        }
    }
    check_delete(&plan.states[slot].1, expected)?;
    if hard {
        plan.events.push(PlannedEvent {
            stream: Arc::from(stream),
            event_number: TOMBSTONE,
            id: [0; 16],
            event_type: Cow::Borrowed("$streamDeleted"),
            data: Bytes::new(),
            metadata: Bytes::new(),
            is_json: true,
            tx_offset: 0,
            tx_end: true,
            tombstone: true,
            remember_id: false,
        });
        plan.states[slot].1.last = TOMBSTONE;
        plan.first_event_number = TOMBSTONE;
        plan.last_event_number = TOMBSTONE;
        plan.reported = Some(0);
    } else {
        let meta = format!("$${stream}");
        let n = plan.state(facts, meta.clone())?.last + 1;
        let ev = metadata_event(facts.new_id(), Bytes::from_static(b"{\"$tb\":9223372036854775807}"));
        plan.reported = Some(plan.push(facts, meta, std::iter::once(ev), false)?);
        plan.first_event_number = n;
        plan.last_event_number = n;
    }
    Ok(plan)
}

/// Decides a scavenge point: a `$scavengePoint` event in `$scavengePoints` (with the threshold
/// when it is not 0) that completes its chunk.
pub fn plan_scavenge_point<'a>(facts: &mut dyn Facts, threshold: i64) -> Result<Plan<'a>, WriteError> {
    let data = if threshold == 0 { "{}".to_string() } else { format!("{{\"threshold\":{threshold}}}") };
    let id = facts.new_id();
    let mut plan = Plan::default();
    let n = plan.state(facts, SCAVENGE_POINTS)?.last + 1;
    let ev = (id, Cow::Borrowed("$scavengePoint"), Bytes::from(data), Bytes::new(), true);
    plan.reported = Some(plan.push(facts, SCAVENGE_POINTS, std::iter::once(ev), false)?);
    plan.first_event_number = n;
    plan.last_event_number = n;
    plan.completes_chunk = true;
    Ok(plan)
}

/// The visibility window of a stream, by event number and time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Lowest visible event number.
    pub min: i64,
    /// Highest visible event number (the raw last).
    pub max: i64,
    /// Events with a timestamp below this (µs) are expired.
    pub min_timestamp_us: Option<i64>,
}

impl Window {
    /// Computes the window of a stream with raw last number `last` at time `now_us`. A metastream
    /// shows only its latest event.
    pub fn of(state: &StreamState, is_meta: bool, now_us: i64) -> Window {
        let last = state.last;
        if is_meta {
            return Window { min: last.max(0), max: last, min_timestamp_us: None };
        }
        let m = &state.meta;
        let mut min = m.truncate_before.unwrap_or(0).max(0);
        if let Some(c) = m.max_count {
            min = min.max(last.saturating_sub(c).saturating_add(1));
        }
        let min_timestamp_us = m.max_age_secs.map(|s| now_us.saturating_sub(s.saturating_mul(1_000_000)));
        Window { min, max: last, min_timestamp_us }
    }

    /// Whether event `n` written at `timestamp_us` is visible.
    pub fn shows(&self, n: i64, timestamp_us: i64) -> bool {
        n >= self.min && n <= self.max && self.min_timestamp_us.is_none_or(|t| timestamp_us >= t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(last: i64) -> StreamState {
        StreamState { last, meta: StreamMetadata::default(), meta_last: -1 }
    }

    #[test]
    fn expected_version_matrix() {
        let none = |_: &[u8; 16]| None;
        let ids = [[1u8; 16]];
        assert_eq!(check_append(&st(-1), false, false, NO_STREAM, &ids, &[], none), Check::Append);
        assert_eq!(check_append(&st(-1), false, false, ANY, &ids, &[], none), Check::Append);
        assert_eq!(
            check_append(&st(-1), false, false, STREAM_EXISTS, &ids, &[], none),
            Check::Reject(WriteError::WrongExpectedVersion { current: -1 })
        );
        assert_eq!(check_append(&st(3), false, false, 3, &ids, &[], none), Check::Append);
        assert_eq!(
            check_append(&st(3), false, false, 4, &ids, &[], none),
            Check::Reject(WriteError::WrongExpectedVersion { current: 3 })
        );
        assert_eq!(
            check_append(&st(3), false, false, 1, &ids, &[Some([1; 16])], none),
            Check::Idempotent { first: 2, last: 2 }
        );
        assert_eq!(
            check_append(&st(3), false, false, -3, &ids, &[], none),
            Check::Reject(WriteError::WrongExpectedVersion { current: 3 })
        );
        assert_eq!(
            check_append(&st(TOMBSTONE), false, false, ANY, &ids, &[], none),
            Check::Reject(WriteError::StreamDeleted)
        );
        assert_eq!(
            check_append(&st(5), false, false, ANY, &ids, &[], |_| Some(4)),
            Check::Idempotent { first: 4, last: 4 }
        );
    }

    #[test]
    fn window_combines_tb_max_count_and_age() {
        let mut s = st(9);
        s.meta.truncate_before = Some(2);
        s.meta.max_count = Some(3);
        s.meta.max_age_secs = Some(1);
        let w = Window::of(&s, false, 10_000_000);
        assert_eq!(w.min, 7);
        assert!(w.shows(8, 9_500_000));
        assert!(!w.shows(8, 8_000_000));
        assert!(!w.shows(6, 9_500_000));
        assert_eq!(Window::of(&s, true, 0).min, 9);
    }
}
