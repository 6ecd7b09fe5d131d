//! Staging: turning a group's operations into encoded log records through the writer, with the
//! stream states each leaves behind (the group's overlay), the index entries and the event ids
//! to remember. Decisions come from [`engine`](super::engine); this module reads the states the
//! decisions need and encodes what they decide.
//!
//! Invariant: nothing staged is visible or acknowledged until the group is durable and published.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::engine::{self, Check, StreamState, TOMBSTONE};
use super::metadata::{self, StreamMetadata};
use super::{lock, NewEvent, StorageError, Store, WriteError, WriteOp, WriteResult, SCAVENGE_POINTS};
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

impl Store {
    /// Current state of `name`, as it will be after the staged operations of this group.
    fn state_in(
        &self,
        overlay: &mut BTreeMap<String, StreamState>,
        name: &str,
    ) -> Result<StreamState, StorageError> {
        if let Some(s) = overlay.get(name) {
            return Ok(s.clone());
        }
        let s = self.stream_state(name)?;
        overlay.insert(name.to_owned(), s.clone());
        Ok(s)
    }

    pub(super) fn stage(
        &self,
        w: &mut LogWriter,
        overlay: &mut BTreeMap<String, StreamState>,
        op: &WriteOp,
        now: i64,
        staged: &mut Staged,
    ) -> Result<(WriteResult, bool), WriteError> {
        match op {
            WriteOp::Append { stream, expected, events } => {
                engine::validate_name(stream)?;
                for e in events {
                    let size = e.data.len() + e.metadata.len();
                    if size > self.cfg.max_event_bytes {
                        return Err(WriteError::EventTooLarge { size, max: self.cfg.max_event_bytes });
                    }
                    if e.event_type.len() > engine::EVENT_TYPE_BYTES_MAX {
                        return Err(WriteError::InvalidEvent("event type is longer than 1024 bytes".into()));
                    }
                    let len = record::event_frame_len(stream, &e.event_type, e.data.len(), e.metadata.len());
                    if len > self.log.chunk_size() {
                        return Err(WriteError::EventTooLarge {
                            size,
                            max: self.cfg.max_event_bytes.min(self.log.chunk_size() as usize / 2),
                        });
                    }
                }
                let state = self.state_in(overlay, stream)?;
                let meta_of = engine::meta_target(stream);
                let target_tombstoned = match meta_of {
                    Some(t) => self.state_in(overlay, t)?.is_tombstoned(),
                    None => false,
                };
                let ids: Vec<[u8; 16]> = events.iter().map(|e| e.id).collect();
                let existing = if engine::needs_existing_ids(&state, *expected) {
                    self.ids_at(stream, *expected + 1, ids.len())?
                } else {
                    Vec::new()
                };
                let recent = lock(&self.recent);
                let check = engine::check_append(
                    &state,
                    meta_of.is_some(),
                    target_tombstoned,
                    *expected,
                    &ids,
                    &existing,
                    |id| recent.get(id).filter(|(s, _)| **s == **stream).map(|(_, n)| *n),
                );
                drop(recent);
                match check {
                    Check::Reject(e) => Err(e),
                    Check::Idempotent { .. } | Check::Append if events.is_empty() => Ok((
                        WriteResult {
                            first_event_number: state.last + 1,
                            last_event_number: state.last,
                            position: None,
                            commit_position: 0,
                        },
                        false,
                    )),
                    Check::Idempotent { first, last } => Ok((
                        WriteResult {
                            first_event_number: first,
                            last_event_number: last,
                            position: None,
                            commit_position: 0,
                        },
                        false,
                    )),
                    Check::Append => {
                        let first = state.last + 1;
                        let mut first_pos = None;
                        if meta_of.is_none() && state.meta.is_soft_deleted() {
                            // Re-creating a soft-deleted stream: `$tb` moves to the first new event.
                            let json = metadata::recreate_json(state.meta.raw.as_deref(), first);
                            let id = *self.env.new_uuid().as_bytes();
                            let ev = NewEvent {
                                id,
                                event_type: "$metadata".into(),
                                data: json.into(),
                                metadata: Bytes::new(),
                                is_json: true,
                            };
                            first_pos = Some(self.stage_events(
                                w,
                                overlay,
                                &format!("$${stream}"),
                                &[ev],
                                now,
                                staged,
                                false,
                            )?);
                        }
                        let mut events = std::borrow::Cow::Borrowed(events);
                        if let Some(target) = meta_of {
                            let t = self.state_in(overlay, target)?;
                            if t.meta.is_soft_deleted() && t.last >= 0 {
                                if let Some(last) = events.last() {
                                    if let Some(j) = last
                                        .is_json
                                        .then(|| metadata::undelete_json(&last.data, t.last + 1))
                                        .flatten()
                                    {
                                        let mut evs = events.into_owned();
                                        if let Some(l) = evs.last_mut() {
                                            l.data = j.into();
                                        }
                                        events = std::borrow::Cow::Owned(evs);
                                    }
                                }
                            }
                        }
                        let pos = self.stage_events(w, overlay, stream, &events, now, staged, true)?;
                        let last = first + events.len() as i64 - 1;
                        Ok((
                            WriteResult {
                                first_event_number: first,
                                last_event_number: last,
                                position: Some(first_pos.unwrap_or(pos)),
                                commit_position: 0,
                            },
                            true,
                        ))
                    }
                }
            }
            WriteOp::ScavengePoint { threshold } => {
                let data =
                    if *threshold == 0 { "{}".to_string() } else { format!("{{\"threshold\":{threshold}}}") };
                let ev = NewEvent {
                    id: *self.env.new_uuid().as_bytes(),
                    event_type: "$scavengePoint".into(),
                    data: data.into(),
                    metadata: Bytes::new(),
                    is_json: true,
                };
                let n = self.state_in(overlay, SCAVENGE_POINTS)?.last + 1;
                let pos = self.stage_events(w, overlay, SCAVENGE_POINTS, &[ev], now, staged, false)?;
                w.complete_now().map_err(StorageError::from)?;
                Ok((WriteResult::single(n, pos), true))
            }
            WriteOp::Delete { stream, expected, hard } => {
                engine::validate_name(stream)?;
                let state = self.state_in(overlay, stream)?;
                if let Some(t) = engine::meta_target(stream) {
                    if self.state_in(overlay, t)?.is_tombstoned() {
                        return Err(WriteError::StreamDeleted);
                    }
                }
                engine::check_delete(&state, *expected)?;
                if *hard {
                    let frame = EventFrame {
                        log_position: 0,
                        flags: flags::DATA
                            | flags::IS_COMMITTED
                            | flags::IS_JSON
                            | flags::STREAM_DELETE
                            | flags::TX_BEGIN
                            | flags::TX_END,
                        transaction_position: 0,
                        transaction_offset: 0,
                        event_number: TOMBSTONE,
                        event_id: [0; 16],
                        timestamp_us: now,
                        stream,
                        event_type: "$streamDeleted",
                        data: &[],
                        metadata: &[],
                    };
                    let pos = self.stage_record(w, frame, &Arc::from(stream.as_str()), staged)?;
                    let st = overlay.entry(stream.clone()).or_insert_with(StreamState::empty);
                    st.last = TOMBSTONE;
                    Ok((
                        WriteResult {
                            first_event_number: TOMBSTONE,
                            last_event_number: TOMBSTONE,
                            position: Some(pos),
                            commit_position: 0,
                        },
                        true,
                    ))
                } else {
                    let meta = format!("$${stream}");
                    let meta_state = self.state_in(overlay, &meta)?;
                    let ev = NewEvent {
                        id: *self.env.new_uuid().as_bytes(),
                        event_type: "$metadata".into(),
                        data: Bytes::from_static(b"{\"$tb\":9223372036854775807}"),
                        metadata: Bytes::new(),
                        is_json: true,
                    };
                    let pos = self.stage_events(w, overlay, &meta, &[ev], now, staged, false)?;
                    let n = meta_state.last + 1;
                    Ok((WriteResult::single(n, pos), true))
                }
            }
        }
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

    /// Stages events for `stream` numbered after its current last, updating the overlay (and the
    /// metadata of the target stream when `stream` is a metastream). Returns the first position.
    #[allow(clippy::too_many_arguments)]
    fn stage_events(
        &self,
        w: &mut LogWriter,
        overlay: &mut BTreeMap<String, StreamState>,
        stream: &str,
        events: &[NewEvent],
        now: i64,
        staged: &mut Staged,
        remember_ids: bool,
    ) -> Result<u64, WriteError> {
        let state = self.state_in(overlay, stream)?;
        let first = state.last + 1;
        let name: Arc<str> = Arc::from(stream);
        let mut first_pos = 0;
        for (i, e) in events.iter().enumerate() {
            let n = first + i as i64;
            let mut fl = flags::DATA | flags::IS_COMMITTED;
            if e.is_json {
                fl |= flags::IS_JSON;
            }
            if i == 0 {
                fl |= flags::TX_BEGIN;
            }
            if i + 1 == events.len() {
                fl |= flags::TX_END;
            }
            let frame = EventFrame {
                log_position: 0,
                flags: fl,
                transaction_position: first_pos,
                transaction_offset: i as u32,
                event_number: n,
                event_id: e.id,
                timestamp_us: now,
                stream,
                event_type: &e.event_type,
                data: &e.data,
                metadata: &e.metadata,
            };
            let pos = self.stage_record(w, frame, &name, staged)?;
            if i == 0 {
                first_pos = pos;
            }
            if remember_ids {
                staged.recent.push((e.id, name.clone(), n));
            }
        }
        let last = first + events.len() as i64 - 1;
        if let Some(st) = overlay.get_mut(stream) {
            st.last = last;
        }
        if let (Some(target), Some(e)) = (engine::meta_target(stream), events.last()) {
            let mut t = self.state_in(overlay, target)?;
            t.meta_last = last;
            t.meta = if e.is_json && !e.data.is_empty() {
                StreamMetadata::parse(&e.data)
            } else {
                StreamMetadata { raw: Some(e.data.clone()), ..StreamMetadata::default() }
            };
            overlay.insert(target.to_owned(), t);
        }
        Ok(first_pos)
    }
}
