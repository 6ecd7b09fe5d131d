//! Reads: streams forward and backward, single events, `$all` in both directions, link
//! resolution, and the index lookups behind them (with hash collisions resolved by the record's
//! stream name).
//!
//! Invariants: only committed records are read; every record read is checksummed; a stream's
//! metadata window (`$maxCount`, `$maxAge`, `$tb`) decides what is visible.

use std::sync::atomic::Ordering;

use super::engine::{self, StreamState, Window};
use super::metadata::StreamMetadata;
use super::{AllSlice, ReadError, RecordedEvent, ResolvedEvent, StorageError, Store, StreamSlice};
use crate::log::record::{EventRecord, Record};
use crate::log::LogError;

impl Store {
    /// Raw last event number of `name`: -1 if never written, `i64::MAX` if hard-deleted.
    pub(super) fn last_event_number(&self, name: &str) -> Result<i64, StorageError> {
        self.last_event_before(name, u64::MAX)
    }

    /// Raw last event number of `name` among records before log position `before` (the last
    /// event before a scavenge point); -1 if none.
    pub fn last_event_before(&self, name: &str, before: u64) -> Result<i64, StorageError> {
        const PAGE: usize = 16;
        if !self.index.may_exist(name) {
            return Ok(-1);
        }
        let hash = self.index.hash(name);
        let mut hi = i64::MAX;
        loop {
            let cands = self.index.range_desc(hash, 0, hi, PAGE)?;
            for c in cands.iter().filter(|c| c.position < before) {
                if let Some(e) = self.record_of(c.position, name)? {
                    return Ok(e.event_number);
                }
            }
            let Some(lowest) = cands.last().map(|c| c.event_number) else { return Ok(-1) };
            if cands.len() < PAGE {
                return Ok(-1);
            }
            // Every entry above `lowest` belonged to colliding streams; the page may have cut
            // through the entries at `lowest`, so check those in full before going below.
            for c in self.index.range(hash, lowest, lowest)?.into_iter().filter(|c| c.position < before) {
                if let Some(e) = self.record_of(c.position, name)? {
                    return Ok(e.event_number);
                }
            }
            if lowest <= 0 {
                return Ok(-1);
            }
            hi = lowest - 1;
        }
    }

    /// The event record at `pos` if it belongs to `stream`.
    fn record_of(&self, pos: u64, stream: &str) -> Result<Option<EventRecord>, StorageError> {
        self.stats.records_read.fetch_add(1, Ordering::Relaxed);
        let rec = match self.log.read(pos) {
            Ok(r) => r,
            // Removed by a scavenge; the index entry goes at the end of that scavenge.
            Err(LogError::OutOfRange(_)) if pos < self.log.committed() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match rec {
            Record::Event(e) if e.stream == stream => Ok(Some(e)),
            _ => {
                self.stats.hash_collisions.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    /// The raw event `n` of `stream` (no visibility rules).
    pub(super) fn event_at(&self, stream: &str, n: i64) -> Result<Option<EventRecord>, StorageError> {
        for c in self.index.range(self.index.hash(stream), n, n)? {
            if let Some(e) = self.record_of(c.position, stream)? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// Ids of the raw events `from .. from + count` (None where an event is missing).
    pub(super) fn ids_at(
        &self,
        stream: &str,
        from: i64,
        count: usize,
    ) -> Result<Vec<Option<[u8; 16]>>, StorageError> {
        let to = from.saturating_add(count as i64 - 1);
        let mut out = vec![None; count];
        for c in self.index.range(self.index.hash(stream), from, to)? {
            if let Some(e) = self.record_of(c.position, stream)? {
                out[(e.event_number - from) as usize] = Some(e.event_id);
            }
        }
        Ok(out)
    }

    /// The state of a stream for reading, with its window; errors for missing/deleted streams.
    fn readable(&self, stream: &str, now_us: i64) -> Result<(StreamState, Window, bool), ReadError> {
        let state = self.stream_state(stream)?;
        let meta_of = engine::meta_target(stream);
        if let Some(t) = meta_of {
            if self.stream_state(t)?.is_tombstoned() {
                return Err(ReadError::StreamDeleted);
            }
        }
        if state.is_tombstoned() {
            return Err(ReadError::StreamDeleted);
        }
        if state.last < 0 || (meta_of.is_none() && state.meta.is_soft_deleted()) {
            return Err(ReadError::NoStream);
        }
        let w = Window::of(&state, meta_of.is_some(), now_us);
        Ok((state, w, meta_of.is_some()))
    }

    /// Visible events of `stream` with numbers in `lo..=hi`, ascending, at most `limit`.
    fn visible_range(
        &self,
        stream: &str,
        w: &Window,
        lo: i64,
        hi: i64,
        limit: usize,
        descending: bool,
    ) -> Result<Vec<EventRecord>, StorageError> {
        let hash = self.index.hash(stream);
        let lo = lo.max(w.min);
        let hi = hi.min(w.max);
        let mut out = Vec::new();
        if lo > hi || limit == 0 {
            return Ok(out);
        }
        // Walk the number range in windows of `limit`, so expired events are skipped.
        let step = (limit as i64).clamp(1, 4096);
        let mut cursor = if descending { hi } else { lo };
        loop {
            let (a, b) = if descending {
                (cursor.saturating_sub(step - 1).max(lo), cursor)
            } else {
                (cursor, cursor.saturating_add(step - 1).min(hi))
            };
            let cands = self.index.range(hash, a, b)?;
            let positions: Vec<u64> = cands.iter().map(|c| c.position).collect();
            self.stats.records_read.fetch_add(positions.len() as u64, Ordering::Relaxed);
            let mut recs: Vec<EventRecord> = self
                .log
                .read_many(&positions)?
                .into_iter()
                .filter_map(|r| match r {
                    Some(Record::Event(e)) if e.stream == stream => Some(e),
                    None => None,
                    _ => {
                        self.stats.hash_collisions.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                })
                .collect();
            if descending {
                recs.reverse();
            }
            for e in recs {
                if w.shows(e.event_number, e.timestamp_us) {
                    out.push(e);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
            if descending {
                if a <= lo {
                    return Ok(out);
                }
                cursor = a - 1;
            } else {
                if b >= hi {
                    return Ok(out);
                }
                cursor = b + 1;
            }
        }
    }

    fn resolve(
        &self,
        e: EventRecord,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<ResolvedEvent, StorageError> {
        let ev = RecordedEvent::from(e);
        if !resolve_links || ev.event_type != "$>" {
            return Ok(ResolvedEvent { event: ev, link: None });
        }
        let target = std::str::from_utf8(&ev.data).ok().and_then(|s| {
            let (n, stream) = s.split_once('@')?;
            let n: i64 = n.parse().ok()?;
            (n >= 0).then(|| (n, stream.to_owned()))
        });
        if let Some((n, stream)) = target {
            match self.read_event(&stream, n, false, now_us) {
                Ok(Some(t)) => return Ok(ResolvedEvent { event: t.event, link: Some(ev) }),
                Ok(None)
                | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {}
                Err(ReadError::Storage(s)) => return Err(s),
            }
        }
        Ok(ResolvedEvent { event: ev, link: None })
    }

    /// Reads event `n` (`-1`: the last visible one).
    pub fn read_event(
        &self,
        stream: &str,
        n: i64,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<Option<ResolvedEvent>, ReadError> {
        let (_, w, _) = self.readable(stream, now_us)?;
        let found = if n == -1 {
            self.visible_range(stream, &w, w.min, w.max, 1, true)?.pop()
        } else if n < 0 {
            None
        } else {
            self.visible_range(stream, &w, n, n, 1, false)?.pop()
        };
        Ok(match found {
            Some(e) => Some(self.resolve(e, resolve_links, now_us)?),
            None => None,
        })
    }

    /// Reads forward from `from`, at most `count` events.
    pub fn read_forward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (state, w, _) = self.readable(stream, now_us)?;
        let recs = self.visible_range(stream, &w, from.max(0), w.max, count, false)?;
        let next = recs.last().map(|e| e.event_number + 1).unwrap_or(from);
        let events = recs
            .into_iter()
            .map(|e| self.resolve(e, resolve_links, now_us))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StreamSlice {
            events,
            next_event_number: next,
            last_event_number: state.last,
            is_end_of_stream: next > state.last,
        })
    }

    /// Reads backward from `from` (`-1`: the head), at most `count` events.
    pub fn read_backward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (state, w, _) = self.readable(stream, now_us)?;
        let from = if from == -1 { state.last } else { from };
        let recs =
            if from < 0 { Vec::new() } else { self.visible_range(stream, &w, w.min, from, count, true)? };
        let next = recs.last().map(|e| e.event_number - 1).unwrap_or(-1);
        let is_end =
            recs.is_empty() || next < 0 || self.visible_range(stream, &w, w.min, next, 1, true)?.is_empty();
        let events = recs
            .into_iter()
            .map(|e| self.resolve(e, resolve_links, now_us))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StreamSlice {
            events,
            next_event_number: next,
            last_event_number: state.last,
            is_end_of_stream: is_end,
        })
    }

    /// Reads `$all` forward from `position` (a record start), at most `count` events. Links are
    /// resolved when `resolve_links`.
    pub fn read_all_forward(
        &self,
        position: u64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<AllSlice, ReadError> {
        let mut scan = self.log.scan(position);
        let mut events = Vec::new();
        let mut first = true;
        while events.len() < count {
            match scan.next() {
                None => break,
                Some(Ok(Record::Event(e))) => events.push(self.resolve(e, resolve_links, now_us)?),
                Some(Ok(Record::Epoch(_))) => {}
                Some(Err(LogError::Corrupt { .. } | LogError::OutOfRange(_))) if first => {
                    return Err(ReadError::InvalidPosition(position))
                }
                Some(Err(e)) => return Err(StorageError::from(e).into()),
            }
            first = false;
        }
        let next_position = scan.position();
        Ok(AllSlice { events, next_position, is_end: next_position >= self.log.committed() })
    }

    /// Reads `$all` backward from before `position` (`u64::MAX`: the end), at most `count` events.
    pub fn read_all_backward(
        &self,
        position: u64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<AllSlice, ReadError> {
        let mut events = Vec::new();
        let mut pos = position.min(self.log.committed());
        let mut first = true;
        while events.len() < count && pos > 0 {
            let (recs, next) = match self.log.read_backward(pos, count - events.len()) {
                Ok(x) => x,
                Err(LogError::Corrupt { .. } | LogError::OutOfRange(_)) if first => {
                    return Err(ReadError::InvalidPosition(position))
                }
                Err(e) => return Err(StorageError::from(e).into()),
            };
            first = false;
            if recs.is_empty() {
                break;
            }
            for r in recs {
                if let Record::Event(e) = r {
                    events.push(self.resolve(e, resolve_links, now_us)?);
                }
            }
            pos = next;
        }
        Ok(AllSlice { events, next_position: pos, is_end: pos == 0 })
    }

    /// Metadata of a stream (parsed; default when none).
    pub fn metadata(&self, stream: &str) -> Result<StreamMetadata, StorageError> {
        Ok(self.stream_state(stream)?.meta)
    }
}
