//! Publishing committed records: the one path from "durable (and, in a cluster, held by a
//! quorum)" to "visible". [`Store::apply_committed`] moves the log's committed position, adds the
//! records to the index, updates or drops the cached stream states, remembers the event ids a
//! local write accepted, and wakes every [`Follow`](super::Follow) cursor. The local group commit,
//! the start-up replay and a follower applying a leader's records all build a [`Committed`] batch
//! and call it; nothing else touches those structures for writes.
//!
//! Invariants: batches are applied in log order, each ending at or past the previous one; a
//! batch's end is at most the log's durable end; after a batch, no cached stream state is older
//! than the batch (it was replaced by the writer's state or dropped); follow cursors are woken
//! only after everything else, so what they learn of is readable.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::engine::{self, StreamState};
use super::stage::Staged;
use super::{lock, Store};
use crate::index::{Entry, Index};
use crate::log::record::EventRecord;

/// A batch of committed records, as [`Store::apply_committed`] takes it.
#[derive(Debug, Default)]
pub struct Committed {
    /// Log position after the batch.
    end: u64,
    /// Index entries of the batch's event records.
    entries: Vec<Entry>,
    /// Names of the streams the entries belong to (for the existence filter).
    names: Vec<Arc<str>>,
    /// Stream states after the batch, as the writer that decided it knows them.
    states: BTreeMap<String, StreamState>,
    /// Whether the cached states of the batch's streams (and of the streams their metastreams
    /// describe) are dropped, to be recomputed on the next read: the writer's states are unknown.
    drop_states: bool,
    /// Event ids accepted by a local write: id, stream, event number.
    recent: Vec<([u8; 16], Arc<str>, i64)>,
}

impl Committed {
    /// A locally staged group that is now durable up to `end`, with the stream states its
    /// decisions left (`overlay`).
    pub(super) fn staged(end: u64, staged: Staged, overlay: BTreeMap<String, StreamState>) -> Committed {
        Committed {
            end,
            entries: staged.entries,
            names: staged.names,
            states: overlay,
            drop_states: false,
            recent: staged.recent,
        }
    }

    /// Records read back from the log, or received from a leader, committed up to `end`: every
    /// event record is indexed and the cached states of its stream (and, for a metastream, of
    /// the stream it describes) are dropped. Event ids are not remembered: idempotent retries
    /// with `-2`/`-4` recognise only writes this process accepted, as after a restart.
    pub fn from_records(index: &Index, records: &[EventRecord], end: u64) -> Committed {
        let mut batch = Committed { end, drop_states: true, ..Committed::default() };
        for e in records {
            batch.entries.push(Entry {
                hash: index.hash(&e.stream),
                event_number: e.event_number,
                position: e.log_position,
            });
            if batch.names.last().is_none_or(|n| **n != *e.stream) {
                batch.names.push(Arc::from(e.stream.as_str()));
            }
        }
        batch
    }
}

impl Store {
    /// Publishes a committed batch: the committed position moves to its end (at most the durable
    /// end), then the index, the stream-state cache and the recent ids take its records, then
    /// every follow cursor is woken. The only code that does any of these for writes.
    pub fn apply_committed(&self, batch: Committed) {
        let start = self.log.committed();
        self.log.publish(batch.end);
        let names: Vec<&str> = batch.names.iter().map(|n| &**n).collect();
        self.index.add(&batch.entries, &names, batch.end);
        drop(names);
        let end = self.log.committed();
        {
            let mut cache = lock(&self.streams);
            cache.0 += 1;
            if batch.drop_states {
                for name in &batch.names {
                    cache.1.remove(&**name);
                    if let Some(target) = engine::meta_target(name) {
                        cache.1.remove(target);
                    }
                }
            }
            for (name, st) in batch.states {
                cache.1.insert(name, st);
            }
        }
        if !batch.recent.is_empty() {
            let mut recent = lock(&self.recent);
            for (id, stream, n) in batch.recent {
                recent.insert(id, (stream, n));
            }
        }
        if end > start {
            lock(&self.summaries).push(end, batch.names);
        }
        self.committed.raise(end);
        self.index.maybe_flush();
    }
}
