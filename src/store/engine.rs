//! The stream engine's decisions, free of I/O: expected-version checks, idempotency, delete rules,
//! name validation and event visibility. The shell ([`super::Store`]) fetches the facts these
//! functions need (stream state, the ids already written at the expected positions) and performs
//! the writes they decide on.
//!
//! Rules are v5's (expected versions, idempotent repeats, deletes, metadata); `model/` states the same
//! semantics independently and the model comparison test holds the two together.

use super::metadata::StreamMetadata;
use super::WriteError;

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
