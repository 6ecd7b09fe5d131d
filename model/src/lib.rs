//! Reference semantics of Annal's stream engine: a plain in-memory event store used as a test
//! oracle.
//!
//! A property test drives the real engine and this [`Model`] with the same operations and
//! requires identical answers, so this crate is written for obviousness, not speed. It has no
//! I/O, no async and no clock: every operation that depends on time takes `now_us` (microseconds)
//! from the caller.
//!
//! # What it owns
//!
//! * **The log**: every record ever written (events, metadata events, tombstones), in write order.
//!   A record's `position` is its index in the log, so positions start at 0 and strictly increase.
//!   `$all` reads ([`Model::read_all_forward`], [`Model::read_all_backward`]) return the log as is.
//! * **Streams**: for each stream name, its events in event-number order. Event numbers start at 0
//!   and have no gaps; a tombstone is not part of its stream's event list.
//! * **Hard deletes**: the set of tombstoned stream names.
//! * **Idempotency memory**: for each client-supplied event id, the `(stream, event number)` of the
//!   latest event written with it.
//!
//! # Invariants
//!
//! * `log[i].position == i` and the events of a stream have numbers `0, 1, 2, …`.
//! * Nothing is ever removed: deletion, truncation and expiry only change what stream reads show.
//! * A hard-deleted stream and its metastream `$$stream` accept no more writes.
//! * Metadata of stream `s` is derived on demand from the latest event of `$$s`; it is never cached.
//!
//! # Judgement calls
//!
//! Where the specification was silent the model decides as follows (each is repeated on the item
//! it concerns):
//!
//! * The idempotency memory keeps, per id, only the **latest** write (like a cache keyed by id).
//!   Records the server writes by itself (tombstones, soft-delete and recreate metadata) are not
//!   remembered; only ids supplied through [`Model::append`] and [`Model::set_metadata`] are.
//! * A metastream (any name starting with `$$`) ignores its own metadata: it is never soft-deleted
//!   and only the implicit `$maxCount = 1` applies to its reads.
//! * Stream-name validation applies to the name the caller passes (for [`Model::set_metadata`] and
//!   soft deletes, to `s`, not to `$$s`).
//! * JSON rebuilt by the model (recreate after soft delete, `$tb` added by `set_metadata`) is
//!   compact: `{`, members joined by `,`, `}`, each member `key:value` copied verbatim from the
//!   source text, and the added or replaced member written as `"$tb":N`.

mod json;
pub mod projections;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use json::Value;

/// An event id: the 16 bytes of a UUID.
pub type EventId = [u8; 16];

/// Expected version: the stream must not exist (its raw last event number is -1).
pub const NO_STREAM: i64 = -1;
/// Expected version: no check (apart from idempotency).
pub const ANY: i64 = -2;
/// Expected version: the stream must exist (have events, or at least metadata).
pub const STREAM_EXISTS: i64 = -4;
/// Event number of a tombstone record, and [`Model::last_event_number`] of a hard-deleted stream.
pub const TOMBSTONE_EVENT_NUMBER: i64 = i64::MAX;
/// The `$tb` (truncate before) value that marks a stream as soft-deleted.
pub const SOFT_DELETE_TB: i64 = i64::MAX;

/// Longest accepted stream name, in bytes.
pub const STREAM_NAME_BYTES_MAX: usize = 2000;

const METASTREAM_PREFIX: &str = "$$";
const METADATA_EVENT_TYPE: &str = "$metadata";
const TOMBSTONE_EVENT_TYPE: &str = "$streamDeleted";
const LINK_EVENT_TYPE: &str = "$>";

/// An event as a client submits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// Client-chosen id, used for idempotency.
    pub id: EventId,
    /// Event type, e.g. `OrderPlaced`, `$metadata` or `$>` (link).
    pub event_type: String,
    /// Payload.
    pub data: Vec<u8>,
    /// Event metadata (not stream metadata).
    pub metadata: Vec<u8>,
    /// Whether `data` is JSON.
    pub is_json: bool,
}

/// A record as written to the log: an event, a metadata event or a tombstone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// Stream the record belongs to.
    pub stream: String,
    /// Number within the stream, or [`TOMBSTONE_EVENT_NUMBER`] for a tombstone.
    pub event_number: i64,
    /// Event id (all zero for tombstones).
    pub id: EventId,
    /// Event type.
    pub event_type: String,
    /// Payload.
    pub data: Vec<u8>,
    /// Event metadata.
    pub metadata: Vec<u8>,
    /// Whether `data` is JSON.
    pub is_json: bool,
    /// The `now_us` of the operation that wrote the record.
    pub timestamp_us: i64,
    /// Log order: 0 for the first record ever written, then strictly increasing by 1.
    /// Only the order is meaningful when comparing with the real engine.
    pub position: u64,
}

/// Result of a successful append (or of an idempotent repeat of one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOk {
    /// Number of the first event of the batch. For an empty batch: current last number + 1.
    pub first_event_number: i64,
    /// Number of the last event of the batch. For an empty batch: current last number.
    pub last_event_number: i64,
}

/// Why a write (append, delete, set_metadata) was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The expected version check failed; `current` is the raw last event number of the stream
    /// the check applied to (-1 if it has no events).
    WrongExpectedVersion {
        /// Raw last event number of the checked stream.
        current: i64,
    },
    /// The stream (or the stream its metastream belongs to) is hard-deleted, or, for
    /// [`STREAM_EXISTS`], soft-deleted.
    StreamDeleted,
    /// The stream name is empty or longer than [`STREAM_NAME_BYTES_MAX`] bytes.
    InvalidStreamName,
}

/// Why a stream read failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadError {
    /// The stream has no events, is soft-deleted, or its name is invalid.
    NoStream,
    /// The stream (or, for a metastream, its base stream) is hard-deleted.
    StreamDeleted,
}

/// A page of a stream read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSlice {
    /// The events, in read direction.
    pub events: Vec<ResolvedEvent>,
    /// Where the next page starts (see [`Model::read_forward`], [`Model::read_backward`]).
    pub next_event_number: i64,
    /// Raw last event number of the stream.
    pub last_event_number: i64,
    /// Whether this page reaches the end in read direction.
    pub is_end_of_stream: bool,
}

/// An event as returned by a stream read, with its link resolved if asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedEvent {
    /// The link's target if a link was resolved, otherwise the event read.
    pub event: RecordedEvent,
    /// The link event itself when it was resolved, otherwise `None`.
    pub link: Option<RecordedEvent>,
}

/// The parsed stream metadata that affects the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamMetadata {
    /// `$maxAge` in seconds (positive values only).
    pub max_age_secs: Option<i64>,
    /// `$maxCount` (positive values only).
    pub max_count: Option<i64>,
    /// `$tb`, truncate before (non-negative values only); [`SOFT_DELETE_TB`] means soft-deleted.
    pub truncate_before: Option<i64>,
    /// `$cacheControl` in seconds (positive values only).
    pub cache_control_secs: Option<i64>,
    /// Data of the latest metadata event, whenever one exists (even if it is not JSON).
    pub raw: Option<Vec<u8>>,
}

/// Parses stream metadata JSON.
///
/// Reads the top-level keys `$maxAge`, `$maxCount`, `$tb` and `$cacheControl` of a JSON object
/// (keys compared after unescaping). Each present one must be a JSON integer (no fraction, no
/// exponent, within `i64`); if any is not (a string, `null`, `1.0`, …), all fields are `None`.
/// Invalid JSON or a non-object gives all `None` too. Values `<= 0` of `$maxAge`, `$maxCount` and
/// `$cacheControl` and negative `$tb` are ignored. With duplicate keys the last one wins (after
/// every occurrence has passed the integer check). `raw` is always `Some(json)`.
pub fn parse_metadata(json: &[u8]) -> StreamMetadata {
    let empty = StreamMetadata { raw: Some(json.to_vec()), ..StreamMetadata::default() };
    let Some(Value::Object(members)) = json::parse(json) else { return empty };
    let mut metadata = empty.clone();
    for member in members {
        let (field, min) = match member.key.as_str() {
            "$maxAge" => (&mut metadata.max_age_secs, 1),
            "$maxCount" => (&mut metadata.max_count, 1),
            "$tb" => (&mut metadata.truncate_before, 0),
            "$cacheControl" => (&mut metadata.cache_control_secs, 1),
            _ => continue,
        };
        let Some(value) = member.value.as_integer() else { return empty };
        *field = (value >= min).then_some(value);
    }
    metadata
}

/// The in-memory reference event store. See the crate docs for what it owns and its invariants.
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Every record ever written; `log[i].position == i`.
    log: Vec<RecordedEvent>,
    /// Per stream, the log index of event number `i` at index `i` (tombstones excluded).
    streams: HashMap<String, Vec<usize>>,
    /// Streams with a tombstone.
    hard_deleted: HashSet<String>,
    /// Per client-supplied event id, the latest `(stream, event number)` written with it.
    ids: HashMap<EventId, (String, i64)>,
}

/// What an expected-version check decided.
enum Check {
    /// Write the batch.
    Write,
    /// The batch was already written: answer this and write nothing.
    AlreadyWritten(AppendOk),
}

impl Model {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `events` to `stream` if `expected` allows it.
    ///
    /// Check order: name validity, hard delete (of `stream`, or of `x` when `stream` is `$$x`),
    /// then the expected version:
    /// * [`STREAM_EXISTS`]: soft-deleted ⇒ `StreamDeleted`; no events and no metadata ⇒
    ///   `WrongExpectedVersion { current: -1 }`; otherwise as [`ANY`].
    /// * [`ANY`]: if the first event's id was last written to this stream at number `f`, the batch
    ///   is a repeat when every event `i` was last written here at `f + i` (answer `f..=f+k-1`,
    ///   write nothing), otherwise `WrongExpectedVersion`. An id not last written here ⇒ append.
    /// * `n >= -1`: soft-deleted and `n == -1` ⇒ append (recreate); `n == cur` ⇒ append;
    ///   `n > cur` ⇒ `WrongExpectedVersion`; `n < cur` ⇒ a repeat if the raw events `n+1..` carry
    ///   the batch's ids in order (answer `n+1..=n+k`), otherwise `WrongExpectedVersion`.
    /// * anything else (`-3`, `< -4`) ⇒ `WrongExpectedVersion`.
    ///
    /// An empty batch that passes the check writes nothing and answers `cur+1, cur`.
    ///
    /// A real append of at least one event to a soft-deleted (non-meta) stream first writes a
    /// metadata event to `$$stream` that sets `$tb` to the first new event number (other
    /// members kept), so that the old events stay hidden and the stream exists again.
    pub fn append(
        &mut self,
        stream: &str,
        expected: i64,
        events: Vec<NewEvent>,
        now_us: i64,
    ) -> Result<AppendOk, AppendError> {
        check_name(stream)?;
        if self.is_hard_deleted(stream) {
            return Err(AppendError::StreamDeleted);
        }
        let cur = self.raw_last(stream);
        let check = self.check_expected(stream, expected, &events)?;
        if events.is_empty() {
            return Ok(AppendOk { first_event_number: cur + 1, last_event_number: cur });
        }
        if let Check::AlreadyWritten(ok) = check {
            return Ok(ok);
        }
        if self.is_soft_deleted(stream) {
            let raw = self.stream_metadata(stream).raw.unwrap_or_default();
            self.write_server_metadata(stream, with_tb(&raw, cur + 1), now_us);
        }
        Ok(self.write_events(stream, events, now_us))
    }

    /// Deletes `stream`: hard (tombstone, forever) or soft (`$tb` = [`SOFT_DELETE_TB`]).
    ///
    /// The expected version applies to `stream` itself and has no idempotency: it must be
    /// [`ANY`], [`STREAM_EXISTS`] with at least one event, or exactly the raw last event number
    /// (so [`NO_STREAM`] works only on a stream without events); otherwise
    /// `WrongExpectedVersion { current }`.
    ///
    /// A hard delete writes a tombstone record (number [`TOMBSTONE_EVENT_NUMBER`], type
    /// `$streamDeleted`, empty data and metadata, JSON, id all zero). A soft delete writes to
    /// `$$stream` a `$metadata` event with data `{"$tb":9223372036854775807}` and a server id
    /// (all `0xAB` but byte 0 = the new metadata event's number as `u8`). A soft delete also
    /// fails with `StreamDeleted` if `$$stream` itself was hard-deleted.
    pub fn delete(
        &mut self,
        stream: &str,
        expected: i64,
        hard: bool,
        now_us: i64,
    ) -> Result<(), AppendError> {
        check_name(stream)?;
        let written = if hard { stream.to_owned() } else { metastream_of(stream) };
        if self.is_hard_deleted(&written) {
            return Err(AppendError::StreamDeleted);
        }
        let cur = self.raw_last(stream);
        let passes = expected == ANY || (expected == STREAM_EXISTS && cur >= 0) || expected == cur;
        if !passes {
            return Err(AppendError::WrongExpectedVersion { current: cur });
        }
        if hard {
            self.push(RecordedEvent {
                stream: stream.to_owned(),
                event_number: TOMBSTONE_EVENT_NUMBER,
                id: [0; 16],
                event_type: TOMBSTONE_EVENT_TYPE.to_owned(),
                data: Vec::new(),
                metadata: Vec::new(),
                is_json: true,
                timestamp_us: now_us,
                position: 0,
            });
            self.hard_deleted.insert(stream.to_owned());
        } else {
            let data = format!("{{\"$tb\":{SOFT_DELETE_TB}}}").into_bytes();
            self.write_server_metadata(stream, data, now_us);
        }
        Ok(())
    }

    /// Writes stream metadata: appends a `$metadata` JSON event with id `id` to `$$stream`.
    ///
    /// `expected` refers to `$$stream`, with exactly the rules of [`Model::append`] (including
    /// idempotency on `id`). Fails with `StreamDeleted` if `stream` or `$$stream` is hard-deleted.
    ///
    /// If `stream` is soft-deleted and has events and `json` is an object without a `$tb` key,
    /// the written data is `json` with `"$tb": cur+1` added as its last member (so the stream
    /// comes back with its old events hidden). Otherwise (including invalid JSON) `json` is
    /// written as given. Returns the numbers within `$$stream`.
    pub fn set_metadata(
        &mut self,
        stream: &str,
        expected: i64,
        id: EventId,
        json: Vec<u8>,
        now_us: i64,
    ) -> Result<AppendOk, AppendError> {
        check_name(stream)?;
        let meta = metastream_of(stream);
        if self.is_hard_deleted(&meta) {
            return Err(AppendError::StreamDeleted);
        }
        let mut event = NewEvent {
            id,
            event_type: METADATA_EVENT_TYPE.to_owned(),
            data: json,
            metadata: Vec::new(),
            is_json: true,
        };
        if let Check::AlreadyWritten(ok) =
            self.check_expected(&meta, expected, std::slice::from_ref(&event))?
        {
            return Ok(ok);
        }
        let cur = self.raw_last(stream);
        if self.is_soft_deleted(stream) && cur >= 0 {
            if let Some(Value::Object(members)) = json::parse(&event.data) {
                if !members.iter().any(|member| member.key == "$tb") {
                    event.data = with_tb(&event.data, cur + 1);
                }
            }
        }
        Ok(self.write_events(&meta, vec![event], now_us))
    }

    /// Reads one event: `n == -1` means the last visible event. `Ok(None)` if that event does
    /// not exist or is not visible (any `n < -1` included).
    pub fn read_event(
        &self,
        stream: &str,
        n: i64,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<Option<ResolvedEvent>, ReadError> {
        let (_, visible) = self.visible(stream, now_us)?;
        let event = if n == -1 { visible.last() } else { visible.iter().find(|e| e.event_number == n) };
        Ok(event.map(|event| self.resolve(event, resolve_links, now_us)))
    }

    /// Reads at most `count` visible events with number `>= from`, ascending.
    ///
    /// `next_event_number` is the last returned number + 1, or `from` if nothing was returned;
    /// `is_end_of_stream` is `next_event_number > last_event_number` (raw).
    pub fn read_forward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (cur, visible) = self.visible(stream, now_us)?;
        let page: Vec<&RecordedEvent> =
            visible.into_iter().filter(|e| e.event_number >= from).take(count).collect();
        let next = page.last().map_or(from, |e| e.event_number + 1);
        Ok(StreamSlice {
            events: page.into_iter().map(|e| self.resolve(e, resolve_links, now_us)).collect(),
            next_event_number: next,
            last_event_number: cur,
            is_end_of_stream: next > cur,
        })
    }

    /// Reads at most `count` visible events with number `<= from` (`from == -1`: the raw last
    /// number), descending.
    ///
    /// `next_event_number` is the smallest returned number - 1, or -1 if nothing was returned;
    /// `is_end_of_stream` is true if nothing was returned or `next_event_number` is below the
    /// smallest visible number.
    pub fn read_backward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (cur, visible) = self.visible(stream, now_us)?;
        let from = if from == -1 { cur } else { from };
        let first_visible = visible.first().map(|e| e.event_number);
        let page: Vec<&RecordedEvent> =
            visible.into_iter().rev().filter(|e| e.event_number <= from).take(count).collect();
        let next = page.last().map_or(-1, |e| e.event_number - 1);
        let is_end = page.is_empty() || first_visible.is_some_and(|first| next < first);
        Ok(StreamSlice {
            events: page.into_iter().map(|e| self.resolve(e, resolve_links, now_us)).collect(),
            next_event_number: next,
            last_event_number: cur,
            is_end_of_stream: is_end,
        })
    }

    /// At most `count` records of the log in order, starting at position `after` (inclusive) or
    /// at the beginning. No filtering and no link resolution.
    pub fn read_all_forward(&self, after: Option<u64>, count: usize) -> Vec<RecordedEvent> {
        let start = after.map_or(0, |p| usize::try_from(p).unwrap_or(usize::MAX).min(self.log.len()));
        self.log[start..].iter().take(count).cloned().collect()
    }

    /// At most `count` records of the log in reverse order, starting just below position
    /// `before` (exclusive) or at the end. No filtering and no link resolution.
    pub fn read_all_backward(&self, before: Option<u64>, count: usize) -> Vec<RecordedEvent> {
        let end =
            before.map_or(self.log.len(), |p| usize::try_from(p).unwrap_or(usize::MAX).min(self.log.len()));
        self.log[..end].iter().rev().take(count).cloned().collect()
    }

    /// Raw last event number of `stream`, ignoring metadata: -1 if it has no events,
    /// [`TOMBSTONE_EVENT_NUMBER`] if it is hard-deleted. For a metastream `$$x` of a hard-deleted
    /// Forgets the recently written event ids, as a node restart does: the real engine keeps
    /// them in an in-memory cache, so idempotency under `ANY`/`STREAM_EXISTS` is best-effort
    /// across restarts (explicit expected versions stay idempotent: they compare stored events).
    pub fn forget_recent_ids(&mut self) {
        self.ids.clear();
    }

    /// `x`, this is still the raw last number of `$$x` (the tombstone belongs to `x`).
    pub fn last_event_number(&self, stream: &str) -> i64 {
        if self.hard_deleted.contains(stream) {
            TOMBSTONE_EVENT_NUMBER
        } else {
            self.raw_last(stream)
        }
    }

    /// Metadata of `stream`, from the latest event of `$$stream`: parsed if that event is JSON with
    /// non-empty data, otherwise all `None` but `raw`. All `None` if `$$stream` has no events.
    pub fn stream_metadata(&self, stream: &str) -> StreamMetadata {
        let Some(latest) = self.raw_latest(&metastream_of(stream)) else { return StreamMetadata::default() };
        if latest.is_json && !latest.data.is_empty() {
            parse_metadata(&latest.data)
        } else {
            StreamMetadata { raw: Some(latest.data.clone()), ..StreamMetadata::default() }
        }
    }

    // ---- Private helpers -------------------------------------------------------------------

    fn raw_last(&self, stream: &str) -> i64 {
        self.streams.get(stream).map_or(-1, |events| events.len() as i64 - 1)
    }

    fn raw_event(&self, stream: &str, n: i64) -> Option<&RecordedEvent> {
        let index = *self.streams.get(stream)?.get(usize::try_from(n).ok()?)?;
        Some(&self.log[index])
    }

    fn raw_latest(&self, stream: &str) -> Option<&RecordedEvent> {
        self.raw_event(stream, self.raw_last(stream))
    }

    /// Whether `stream` is tombstoned, or is `$$x` for a tombstoned `x`.
    fn is_hard_deleted(&self, stream: &str) -> bool {
        self.hard_deleted.contains(stream)
            || base_of(stream).is_some_and(|base| self.hard_deleted.contains(base))
    }

    /// Whether `stream` is soft-deleted. Metastreams never are (their own metadata is ignored).
    fn is_soft_deleted(&self, stream: &str) -> bool {
        base_of(stream).is_none() && self.stream_metadata(stream).truncate_before == Some(SOFT_DELETE_TB)
    }

    /// The expected-version rules of [`Model::append`] (hard delete already checked).
    fn check_expected(&self, stream: &str, expected: i64, events: &[NewEvent]) -> Result<Check, AppendError> {
        let cur = self.raw_last(stream);
        let wrong = Err(AppendError::WrongExpectedVersion { current: cur });
        match expected {
            ANY | STREAM_EXISTS => {
                if expected == STREAM_EXISTS {
                    if self.is_soft_deleted(stream) {
                        return Err(AppendError::StreamDeleted);
                    }
                    if cur < 0 && self.raw_last(&metastream_of(stream)) < 0 {
                        return Err(AppendError::WrongExpectedVersion { current: -1 });
                    }
                }
                let Some(first) = events.first() else { return Ok(Check::Write) };
                let Some((_, first_number)) = self.ids.get(&first.id).filter(|(s, _)| s == stream) else {
                    return Ok(Check::Write);
                };
                let first_number = *first_number;
                let repeated = (first_number..).zip(events).all(|(number, event)| {
                    self.ids.get(&event.id).is_some_and(|(s, n)| s == stream && *n == number)
                });
                if repeated {
                    Ok(Check::AlreadyWritten(AppendOk {
                        first_event_number: first_number,
                        last_event_number: first_number + events.len() as i64 - 1,
                    }))
                } else {
                    wrong
                }
            }
            n if n >= -1 => {
                if (n == -1 && self.is_soft_deleted(stream)) || n == cur {
                    Ok(Check::Write)
                } else if n > cur {
                    wrong
                } else {
                    let repeated = (n + 1..).zip(events).all(|(number, event)| {
                        self.raw_event(stream, number).is_some_and(|e| e.id == event.id)
                    });
                    if repeated {
                        Ok(Check::AlreadyWritten(AppendOk {
                            first_event_number: n + 1,
                            last_event_number: n + events.len() as i64,
                        }))
                    } else {
                        wrong
                    }
                }
            }
            _ => wrong,
        }
    }

    /// Appends a record to the log, setting its position, and indexes it in its stream.
    fn push(&mut self, mut record: RecordedEvent) {
        record.position = self.log.len() as u64;
        if record.event_number != TOMBSTONE_EVENT_NUMBER {
            let events = self.streams.entry(record.stream.clone()).or_default();
            assert_eq!(record.event_number, events.len() as i64, "event numbers have no gaps");
            events.push(self.log.len());
        }
        self.log.push(record);
    }

    /// Writes client events (at least one) at the end of `stream` and remembers their ids.
    fn write_events(&mut self, stream: &str, events: Vec<NewEvent>, now_us: i64) -> AppendOk {
        let first = self.raw_last(stream) + 1;
        let mut number = first;
        for event in events {
            self.ids.insert(event.id, (stream.to_owned(), number));
            self.push(RecordedEvent {
                stream: stream.to_owned(),
                event_number: number,
                id: event.id,
                event_type: event.event_type,
                data: event.data,
                metadata: event.metadata,
                is_json: event.is_json,
                timestamp_us: now_us,
                position: 0,
            });
            number += 1;
        }
        AppendOk { first_event_number: first, last_event_number: number - 1 }
    }

    /// Writes a server-made `$metadata` event with `data` to `$$stream` (id not remembered).
    fn write_server_metadata(&mut self, stream: &str, data: Vec<u8>, now_us: i64) {
        let meta = metastream_of(stream);
        let number = self.raw_last(&meta) + 1;
        let mut id = [0xAB; 16];
        id[0] = number as u8;
        self.push(RecordedEvent {
            stream: meta,
            event_number: number,
            id,
            event_type: METADATA_EVENT_TYPE.to_owned(),
            data,
            metadata: Vec::new(),
            is_json: true,
            timestamp_us: now_us,
            position: 0,
        });
    }

    /// The raw last number and the visible events (ascending) of `stream` at `now_us`.
    fn visible(&self, stream: &str, now_us: i64) -> Result<(i64, Vec<&RecordedEvent>), ReadError> {
        if check_name(stream).is_err() {
            return Err(ReadError::NoStream);
        }
        if self.is_hard_deleted(stream) {
            return Err(ReadError::StreamDeleted);
        }
        let cur = self.raw_last(stream);
        if cur < 0 {
            return Err(ReadError::NoStream);
        }
        let events = self.streams[stream].iter().map(|&index| &self.log[index]);
        if base_of(stream).is_some() {
            // Metastreams behave as if `$maxCount` were 1.
            return Ok((cur, events.filter(|e| e.event_number == cur).collect()));
        }
        let metadata = self.stream_metadata(stream);
        if metadata.truncate_before == Some(SOFT_DELETE_TB) {
            return Err(ReadError::NoStream);
        }
        let oldest_us =
            metadata.max_age_secs.map(|secs| now_us.saturating_sub(secs.saturating_mul(1_000_000)));
        let visible = events
            .filter(|e| metadata.truncate_before.is_none_or(|tb| e.event_number >= tb))
            .filter(|e| metadata.max_count.is_none_or(|max| e.event_number > cur - max))
            .filter(|e| oldest_us.is_none_or(|oldest| e.timestamp_us >= oldest))
            .collect();
        Ok((cur, visible))
    }

    /// Resolves `event` if it is a link and `resolve_links` is set.
    ///
    /// A link is an event of type `$>` whose data is UTF-8 `N@stream`: `N` is what
    /// `str::parse::<i64>` accepts (an optional sign, then decimal digits) and must be `>= 0`;
    /// `stream` is everything after the first `@`. The target is read with its own stream's
    /// visibility rules at `now_us`; if the data is malformed or the target is missing, invisible
    /// or in a deleted stream, the link is returned unresolved. Targets that are links themselves
    /// are not followed.
    fn resolve(&self, event: &RecordedEvent, resolve_links: bool, now_us: i64) -> ResolvedEvent {
        let target = resolve_links
            .then(|| self.link_target(event, now_us))
            .flatten()
            .map(|target| ResolvedEvent { event: target.clone(), link: Some(event.clone()) });
        target.unwrap_or_else(|| ResolvedEvent { event: event.clone(), link: None })
    }

    fn link_target(&self, link: &RecordedEvent, now_us: i64) -> Option<&RecordedEvent> {
        if link.event_type != LINK_EVENT_TYPE {
            return None;
        }
        let (number, stream) = std::str::from_utf8(&link.data).ok()?.split_once('@')?;
        let number: i64 = number.parse().ok().filter(|n| *n >= 0)?;
        let (_, visible) = self.visible(stream, now_us).ok()?;
        visible.into_iter().find(|e| e.event_number == number)
    }
}

/// `InvalidStreamName` for an empty name or one longer than [`STREAM_NAME_BYTES_MAX`] bytes.
fn check_name(stream: &str) -> Result<(), AppendError> {
    if stream.is_empty() || stream.len() > STREAM_NAME_BYTES_MAX {
        Err(AppendError::InvalidStreamName)
    } else {
        Ok(())
    }
}

fn metastream_of(stream: &str) -> String {
    format!("{METASTREAM_PREFIX}{stream}")
}

/// `Some(x)` if `stream` is the metastream `$$x`.
fn base_of(stream: &str) -> Option<&str> {
    stream.strip_prefix(METASTREAM_PREFIX)
}

/// `raw` with its top-level `$tb` set to `tb`, rebuilt compactly (see the crate docs).
///
/// Members other than `$tb` are copied verbatim in source order; every `$tb` member is written
/// as `"$tb":tb` in place; if there is none it is added last. If `raw` is not a JSON object the
/// result is `{"$tb":tb}`.
fn with_tb(raw: &[u8], tb: i64) -> Vec<u8> {
    let tb_member = format!("\"$tb\":{tb}");
    let (Some(Value::Object(members)), Ok(text)) = (json::parse(raw), std::str::from_utf8(raw)) else {
        return format!("{{{tb_member}}}").into_bytes();
    };
    let mut parts: Vec<String> = members
        .iter()
        .map(|member| {
            if member.key == "$tb" {
                tb_member.clone()
            } else {
                format!("{}:{}", &text[member.key_span.clone()], &text[member.value_span.clone()])
            }
        })
        .collect();
    if !members.iter().any(|member| member.key == "$tb") {
        parts.push(tb_member);
    }
    format!("{{{}}}", parts.join(",")).into_bytes()
}
