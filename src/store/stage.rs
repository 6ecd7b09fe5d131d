//! Staging: turning a group's operations into encoded log records through the writer, with the
//! stream states each leaves behind (the group's overlay), the index entries and the event ids
//! to remember. Decisions come from [`engine`](super::engine) as plans; this module supplies the
//! facts they need ([`engine::Facts`] over the overlay) and the log's limits, and encodes what
//! the plans decide.
//!
//! Invariant: nothing staged is visible or acknowledged until the group is durable and published.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::engine::{self, StreamState};
use super::{lock, StorageError, Store, WriteError, WriteOp, WriteResult};
use crate::index::Entry;
use crate::log::record::{self, flags, EventFrame};
use crate::log::LogWriter;

/// Where a staged write leaves a stream.
pub(super) struct Staged {
    /// Each operation's outcome, in order.
    pub(super) results: Vec<Option<Result<WriteResult, WriteError>>>,
    /// Index entries of the staged event records.
    pub(super) entries: Vec<Entry>,
    /// Their streams (one per run of records of a stream).
    pub(super) names: Vec<Arc<str>>,
    /// Event ids to remember for idempotent retries: id, stream, event number.
    pub(super) recent: Vec<([u8; 16], Arc<str>, i64)>,
}

/// The facts of one group for the engine: states from the group's overlay (falling back to the
/// committed states), ids from the index, recent ids, fresh ids from the environment.
struct GroupFacts<'s> {
    store: &'s Store,
    overlay: &'s BTreeMap<String, StreamState>,
    /// Event ids the group's earlier operations wrote: a retry in the same group as its original
    /// is idempotent too.
    group_recent: &'s [([u8; 16], Arc<str>, i64)],
}

/// Fills the gaps of `ids` (the ids of events `from ..` of `stream`) from `recent`.
pub(super) fn fill_ids(
    recent: &[([u8; 16], Arc<str>, i64)],
    stream: &str,
    from: i64,
    ids: &mut [Option<[u8; 16]>],
) {
    for (id, s, n) in recent {
        let k = n - from;
        if **s == *stream && k >= 0 && (k as usize) < ids.len() && ids[k as usize].is_none() {
            ids[k as usize] = Some(*id);
        }
    }
}

impl engine::Facts for GroupFacts<'_> {
    fn state(&mut self, name: &str) -> Result<StreamState, StorageError> {
        // The plan keeps what it fetched and the overlay takes the plan's states afterwards.
        // Then the states of groups still waiting for their checkpoint flush or their quorum.
        match self.overlay.get(name) {
            Some(s) => Ok(s.clone()),
            None => match self.store.awaited_state(name) {
                Some(s) => Ok(s),
                None => self.store.stream_state(name),
            },
        }
    }

    fn existing_ids(
        &mut self,
        stream: &str,
        from: i64,
        count: usize,
    ) -> Result<Vec<Option<[u8; 16]>>, StorageError> {
        // Events this group's earlier operations wrote (a retry in the same group as its
        // original), then those of groups still waiting (checkpoint flush, quorum), which are
        // not indexed yet. Waiting groups are looked at before the index: a group released
        // meanwhile is published before it stops waiting, so the index then holds it (looking
        // in the index first could miss an event both ways).
        let mut ids = vec![None; count];
        fill_ids(self.group_recent, stream, from, &mut ids);
        if ids.iter().any(Option::is_none) {
            self.store.awaited_ids(stream, from, &mut ids);
        }
        if ids.iter().any(Option::is_none) {
            let indexed = self.store.ids_at(stream, from, count)?;
            for (id, found) in ids.iter_mut().zip(indexed) {
                if id.is_none() {
                    *id = found;
                }
            }
        }
        Ok(ids)
    }

    fn recent(&self, stream: &str, id: &[u8; 16]) -> Option<i64> {
        if let Some((_, _, n)) = self.group_recent.iter().rev().find(|(i, s, _)| i == id && **s == *stream) {
            return Some(*n);
        }
        if let Some(n) = self.store.awaited_id(stream, id) {
            return Some(n);
        }
        lock(&self.store.recent).get(id).filter(|(s, _)| **s == *stream).map(|(_, n)| *n)
    }

    fn new_id(&mut self) -> [u8; 16] {
        *self.store.env.new_uuid().as_bytes()
    }
}

impl Store {
    /// Stages one operation of a group: validates its input, has the engine decide it against the
    /// group's overlay, encodes the planned events and applies the plan's states to the overlay.
    /// Returns the answer (its commit position is filled in at commit) and whether anything was
    /// written.
    pub(super) fn stage(
        &self,
        w: &mut LogWriter,
        overlay: &mut BTreeMap<String, StreamState>,
        op: &WriteOp,
        now: i64,
        staged: &mut Staged,
    ) -> Result<(WriteResult, bool), WriteError> {
        let mut facts = GroupFacts { store: self, overlay, group_recent: &staged.recent };
        let plan = match op {
            WriteOp::Append { stream, expected, events } => {
                let limits = engine::Limits {
                    max_event_bytes: self.cfg.max_event_bytes,
                    chunk_size: self.log.chunk_size(),
                };
                engine::plan_append(&mut facts, &limits, stream, *expected, events)?
            }
            WriteOp::Delete { stream, expected, hard } => {
                engine::plan_delete(&mut facts, stream, *expected, *hard)?
            }
            WriteOp::ScavengePoint { threshold } => engine::plan_scavenge_point(&mut facts, *threshold)?,
        };
        let position = self.encode(w, &plan, now, staged)?;
        let wrote = !plan.events.is_empty();
        overlay.extend(plan.states.into_iter().map(|(name, st)| (name.into_owned(), st)));
        Ok((
            WriteResult {
                first_event_number: plan.first_event_number,
                last_event_number: plan.last_event_number,
                position,
                commit_position: 0,
            },
            wrote,
        ))
    }

    /// Encodes a plan's events through the writer (completing the chunk after them when the plan
    /// says so); returns the log position the answer reports.
    fn encode(
        &self,
        w: &mut LogWriter,
        plan: &engine::Plan<'_>,
        now: i64,
        staged: &mut Staged,
    ) -> Result<Option<u64>, WriteError> {
        let mut reported = None;
        let mut tx_position = 0;
        for (i, e) in plan.events.iter().enumerate() {
            let mut fl = flags::DATA | flags::IS_COMMITTED;
            if e.is_json {
                fl |= flags::IS_JSON;
            }
            if e.tombstone {
                fl |= flags::STREAM_DELETE;
            }
            if e.tx_offset == 0 {
                fl |= flags::TX_BEGIN;
            }
            if e.tx_end {
                fl |= flags::TX_END;
            }
            let frame = EventFrame {
                log_position: 0,
                flags: fl,
                transaction_position: tx_position,
                transaction_offset: e.tx_offset,
                event_number: e.event_number,
                event_id: e.id,
                timestamp_us: now,
                stream: &e.stream,
                event_type: &e.event_type,
                data: &e.data,
                metadata: &e.metadata,
            };
            let pos = self.stage_record(w, frame, &e.stream, staged)?;
            if e.tx_offset == 0 {
                tx_position = pos;
            }
            if e.remember_id {
                staged.recent.push((e.id, e.stream.clone(), e.event_number));
            }
            if plan.reported == Some(i) {
                reported = Some(pos);
            }
        }
        if plan.completes_chunk {
            w.complete_now().map_err(StorageError::from)?;
        }
        Ok(reported)
    }

    /// Stages one event record (its log and transaction positions are filled in here).
    fn stage_record(
        &self,
        w: &mut LogWriter,
        frame: EventFrame<'_>,
        stream: &Arc<str>,
        staged: &mut Staged,
    ) -> Result<u64, WriteError> {
        let pos = w
            .append(frame.len(), |pos, out| {
                let mut f = frame;
                f.log_position = pos;
                if f.transaction_offset == 0 {
                    f.transaction_position = pos;
                }
                record::encode_frame(&f, out)
            })
            .map_err(StorageError::from)?;
        staged.entries.push(Entry {
            hash: self.index.hash(stream),
            event_number: frame.event_number,
            position: pos,
        });
        if !staged.names.last().is_some_and(|n| Arc::ptr_eq(n, stream)) {
            staged.names.push(stream.clone());
        }
        Ok(pos)
    }
}
