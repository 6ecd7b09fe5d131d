//! Scavenge decisions, free of I/O: what accumulation records per stream, the discard rule of a
//! stream at a scavenge point, the keep/discard decision for one record, and chunk weights.
//!
//! Rules (those of EventStoreDB's scavenge):
//! - records at or after the point are out of scope (kept);
//! - the last event of a stream before the point is always kept;
//! - a tombstoned stream loses everything but its tombstone, and its whole `$$` stream;
//! - `$tb` and `$maxCount` discard below `max(tb, last − maxCount + 1)`;
//! - `$maxAge` discards events older than `EffectiveNow − maxAge` (the point's timestamp);
//! - metastreams keep only their latest record.
//!
//! Every record discarded is invisible to readers at the point's time and later (the window of
//! `store::engine::Window` only moves forward), so a scavenge never changes what a reader sees
//! unless metadata is relaxed afterwards (as in the anchor, a scavenge is destructive).

use serde::{Deserialize, Serialize};

use crate::store::metadata::StreamMetadata;

/// Event number of a tombstone.
const TOMBSTONE: i64 = i64::MAX;

/// What accumulation learned about a stream `x` from records before the point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamFacts {
    /// A tombstone of `x` was seen.
    pub tombstoned: bool,
    /// `$maxAge` of the latest metadata.
    pub max_age_secs: Option<i64>,
    /// `$maxCount` of the latest metadata.
    pub max_count: Option<i64>,
    /// `$tb` of the latest metadata.
    pub truncate_before: Option<i64>,
    /// Event number of the latest `$$x` record.
    pub meta_last: Option<i64>,
}

impl StreamFacts {
    /// Records a metadata event (`$$x` number `n`) seen in log order.
    pub fn metadata(&mut self, n: i64, is_json: bool, data: &[u8]) {
        if self.meta_last.is_some_and(|m| m > n) {
            return;
        }
        self.meta_last = Some(n);
        let m =
            if is_json && !data.is_empty() { StreamMetadata::parse(data) } else { StreamMetadata::default() };
        self.max_age_secs = m.max_age_secs;
        self.max_count = m.max_count;
        self.truncate_before = m.truncate_before;
    }
}

/// The discard rule of a stream at one scavenge point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// Events of `x` numbered below this are discarded.
    pub discard_below: i64,
    /// Events of `x` numbered below this are discarded when older than `cutoff_us`.
    pub maybe_below: i64,
    /// Age cutoff (µs since the epoch), when `$maxAge` is set.
    pub cutoff_us: Option<i64>,
    /// Records of `$$x` numbered below this are discarded.
    pub meta_discard_below: i64,
    /// `x` is tombstoned: everything but the tombstone goes.
    pub tombstoned: bool,
}

/// The rule for `x` given its facts, its last event number before the point (-1 if none) and the
/// point's EffectiveNow.
pub fn rule(f: &StreamFacts, last: i64, effective_now_us: i64) -> Rule {
    if f.tombstoned {
        return Rule {
            discard_below: TOMBSTONE,
            maybe_below: TOMBSTONE,
            cutoff_us: None,
            meta_discard_below: i64::MAX,
            tombstoned: true,
        };
    }
    let mut below = f.truncate_before.unwrap_or(0).max(0);
    if let Some(c) = f.max_count {
        below = below.max(last.saturating_sub(c).saturating_add(1));
    }
    // The last event before the point always stays.
    let below = below.min(last.max(0));
    let cutoff_us = f.max_age_secs.map(|s| effective_now_us.saturating_sub(s.saturating_mul(1_000_000)));
    let maybe_below = if cutoff_us.is_some() { last.max(0) } else { below };
    Rule {
        discard_below: below,
        maybe_below,
        cutoff_us,
        meta_discard_below: f.meta_last.unwrap_or(0),
        tombstoned: false,
    }
}

/// Whether an event record of `x` (or of `$$x` when `is_meta`) is discarded under `r`.
pub fn discards(r: &Rule, is_meta: bool, n: i64, timestamp_us: i64, is_tombstone: bool) -> bool {
    if is_meta {
        return n < r.meta_discard_below;
    }
    if r.tombstoned {
        return !is_tombstone;
    }
    n < r.discard_below || (n < r.maybe_below && r.cutoff_us.is_some_and(|c| timestamp_us < c))
}

/// Weight of a discardable event: 2 when certain, 1 when it depends on the record's age and the
/// chunk's timestamp range straddles the cutoff.
pub fn weight(r: &Rule, n: i64, chunk_ts: Option<(i64, i64)>) -> u64 {
    if r.tombstoned || n < r.discard_below {
        return 2;
    }
    match (r.cutoff_us, chunk_ts) {
        (Some(c), Some((_, max))) if n < r.maybe_below && max < c => 2,
        (Some(c), Some((min, _))) if n < r.maybe_below && min < c => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_event_is_always_kept() {
        let f = StreamFacts { truncate_before: Some(i64::MAX), meta_last: Some(0), ..StreamFacts::default() };
        let r = rule(&f, 9, 0);
        assert_eq!(r.discard_below, 9);
        assert!(discards(&r, false, 8, 0, false));
        assert!(!discards(&r, false, 9, 0, false));
    }

    #[test]
    fn max_count_and_age() {
        let f = StreamFacts {
            max_count: Some(3),
            max_age_secs: Some(10),
            meta_last: Some(2),
            ..StreamFacts::default()
        };
        let r = rule(&f, 9, 100_000_000);
        assert_eq!(r.discard_below, 7);
        assert!(discards(&r, false, 6, 99_000_000, false));
        assert!(discards(&r, false, 8, 80_000_000, false));
        assert!(!discards(&r, false, 8, 95_000_000, false));
        assert!(!discards(&r, false, 9, 0, false));
        assert!(discards(&r, true, 1, 0, false) && !discards(&r, true, 2, 0, false));
        assert_eq!(weight(&r, 8, Some((0, 50_000_000))), 2);
        assert_eq!(weight(&r, 8, Some((0, 95_000_000))), 1);
        assert_eq!(weight(&r, 8, Some((95_000_000, 96_000_000))), 0);
    }

    #[test]
    fn tombstone_takes_everything_but_itself() {
        let f = StreamFacts { tombstoned: true, ..StreamFacts::default() };
        let r = rule(&f, TOMBSTONE, 0);
        assert!(discards(&r, false, 5, 0, false));
        assert!(!discards(&r, false, TOMBSTONE, 0, true));
        assert!(discards(&r, true, 100, 0, false));
    }
}
