//! The store as a cluster node: writes wait for a quorum, and the log follows a leader.
//!
//! On the leader, a group's records are shipped as soon as they are written (before the leader's
//! own sync: [`Store::written_watermark`]); the flushed group is not published: it waits in the
//! [`Gate`] until the cluster says a quorum holds it ([`Store::release`]), the leader counting
//! itself only once the checkpoint stage ([`pipeline`](super::pipeline)) made it durable here
//! ([`Store::durable_watermark`]). Up to [`QUORUM_DEPTH`] groups wait at once:
//! the next group is staged against the states the waiting groups leave (and their event ids,
//! for idempotent retries), and while any group waits every later group waits too, even one
//! that writes nothing, so no answer goes out before the writes it depended on are committed
//! (an idempotent retry of a waiting write is answered only once the original commits). A write
//! whose quorum does not come within the commit timeout is answered
//! [`WriteError::CommitTimeout`](super::WriteError::CommitTimeout) and stays in the log, to be
//! committed or truncated later; when leadership is lost, everything waiting is answered the same
//! way.
//!
//! On a follower, the leader's records are written at the leader's positions and made durable
//! in two steps, the second of which may run beside the first of the next records
//! ([`Store::stage_replicated`] and [`Store::sync_replicated`], then
//! [`Store::checkpoint_replicated`]); a divergent tail is dropped ([`Store::truncate_tail`]),
//! and records are published once the leader says they are committed ([`Store::release`]),
//! never splitting an atomic write.
//!
//! Invariants: publishing happens in log order and only up to a position the cluster committed
//! and this node holds durably; an answer to a replicated write is a success only after its
//! group was published; a group announced to the followers is never dropped by the leader, and
//! a failure after the announcement is answered as an error of unknown outcome, never as
//! "not written".

use std::collections::{BTreeMap, VecDeque};

use super::commit::Waiter;
use super::engine::StreamState;
use super::stage::Staged;
use super::{lock, Committed, StorageError, Store, WriteError, WriteResult};
use crate::log::record::{self, flags, EpochRecord, Record};

/// Groups waiting for their quorum (a cluster leader's) or their checkpoint flush (a single
/// node's), and whether this node takes writes.
#[derive(Default)]
pub(super) struct Gate {
    /// This node leads and its term's epoch is committed.
    pub leading: bool,
    /// This leader resigns: it stages nothing new (queued writes are refused as "not the
    /// leader", a retryable answer), while what it wrote commits before it hands over.
    pub resigning: bool,
    /// Groups in log order, not yet published: durable ones waiting for their quorum, or a
    /// single node's groups waiting for `writer.chk` to name them.
    /// A cluster leader's checkpoint stage makes the newest of them durable
    /// ([`Store::quorum_checkpoint`]): their ends never fall, so that is all of them.
    pub awaiting: VecDeque<Awaiting>,
}

/// A group waiting for its quorum, or (a single node) for its checkpoint flush.
pub(super) struct Awaiting {
    pub start: u64,
    pub end: u64,
    pub staged: Staged,
    pub overlay: BTreeMap<String, StreamState>,
    pub answers: Vec<(Waiter, Result<WriteResult, WriteError>)>,
}

/// A whole chunk being received from the leader: its chunk range, the file being written, and
/// the epoch records seen in it.
pub(super) type Incoming = (u32, u32, crate::log::ScavengedWriter, Vec<EpochRecord>);

/// Groups that may wait at once in a single node's commit pipeline for their checkpoint flush
/// ([`pipeline`](super::pipeline)). The leader stages no further group until one leaves.
pub(super) const PIPELINE_DEPTH: usize = 8;

/// Groups that may wait at once for their quorum on a cluster's leader. Each group costs a
/// shipment to every follower, a sync pair on each and an acknowledgement back, whatever its
/// size; with two in flight, what arrives meanwhile gathers into the next group instead of
/// leaving as many small ones (measured: `docs/decisions.md`, "Cluster writes").
pub(super) const QUORUM_DEPTH: usize = 2;

/// Records published per batch when a range of the log is released.
const RELEASE_BATCH_RECORDS: usize = 16_384;

impl Store {
    /// Whether a group waits for its quorum (every later group then waits too).
    pub(super) fn holding(&self) -> bool {
        !lock(&self.gate).awaiting.is_empty()
    }

    /// Whether the pipeline is full: no further group is staged until one is released.
    pub(super) fn pipeline_full(&self) -> bool {
        let depth = if self.cfg.replicated { QUORUM_DEPTH } else { PIPELINE_DEPTH };
        lock(&self.gate).awaiting.len() >= depth
    }

    /// The state a waiting group left `stream` in (the newest), if any waits with it.
    pub(super) fn awaited_state(&self, stream: &str) -> Option<StreamState> {
        let g = lock(&self.gate);
        g.awaiting.iter().rev().find_map(|a| a.overlay.get(stream).cloned())
    }

    /// Fills the gaps of `ids` (the ids of events `from ..` of `stream`) from waiting groups.
    pub(super) fn awaited_ids(&self, stream: &str, from: i64, ids: &mut [Option<[u8; 16]>]) {
        let g = lock(&self.gate);
        for a in &g.awaiting {
            super::stage::fill_ids(&a.staged.recent, stream, from, ids);
        }
    }

    /// The event number a waiting group gave event `id` in `stream`, if any.
    pub(super) fn awaited_id(&self, stream: &str, id: &[u8; 16]) -> Option<i64> {
        let g = lock(&self.gate);
        g.awaiting.iter().rev().find_map(|a| {
            a.staged.recent.iter().find(|(i, s, _)| i == id && **s == *stream).map(|(_, _, n)| *n)
        })
    }

    /// Whether this node takes writes: a single node always; a cluster node while it leads.
    pub(super) fn leading(&self) -> bool {
        !self.cfg.replicated || lock(&self.gate).leading
    }

    /// Whether a leader's published state covers its whole log, so that a new group may be
    /// decided against it (expected versions, event numbers, idempotent retries). A leader whose
    /// store could not publish what its quorum committed (a read error while releasing) holds
    /// records its stream states do not show: deciding against them would give a write an
    /// event number a committed record already has.
    /// (Groups waiting for their quorum are accounted for: later groups are decided against
    /// their states; what must be published is everything before the first of them.)
    ///
    /// The three reads go in this order, each seeing at least what the one before saw: the
    /// durable watermark (not the log's durable end: a group is queued to wait before the
    /// watermark moves past it, so a flushed group about to wait does not count as unpublished),
    /// then the first waiting group, then the committed position. Read first, the committed
    /// position could predate a group queued, flushed and released just before the watermark
    /// was read, and a leader under load answered "not ready" (or refused queued writes) for a
    /// moment.
    pub fn published_all(&self) -> bool {
        let durable = self.durable.get();
        let before = lock(&self.gate).awaiting.front().map(|a| a.start);
        self.log().committed() >= before.unwrap_or(durable)
    }

    /// Whether this cluster node currently takes writes.
    pub fn is_leading(&self) -> bool {
        self.leading()
    }

    /// This leader resigns: from now on it stages no new group (queued and later writes are
    /// answered [`WriteError::NotLeader`]); groups already staged go on to their quorum. Ends
    /// with the leadership ([`Store::set_leading`]).
    pub fn set_resigning(&self) {
        lock(&self.gate).resigning = true;
        self.kick();
    }

    /// Whether this leader resigns ([`Store::set_resigning`]).
    pub(super) fn resigning(&self) -> bool {
        lock(&self.gate).resigning
    }

    /// Whether a group is being staged now (a commit leader runs): once a resigning leader's
    /// store is not staging, everything it will ever write for this term is written.
    pub fn is_staging(&self) -> bool {
        self.queue_has_leader()
    }

    /// Opens or closes this node for writes (a cluster's leader, once its epoch is committed).
    /// Closing answers every waiting write with a commit timeout (their outcome is unknown: a
    /// new leader may commit or drop them) and every queued one with "not the leader".
    pub fn set_leading(&self, leading: bool) {
        let dropped: Vec<Awaiting> = {
            let mut g = lock(&self.gate);
            g.leading = leading;
            g.resigning = false;
            if leading {
                Vec::new()
            } else {
                g.awaiting.drain(..).collect()
            }
        };
        for a in dropped {
            for (w, _) in a.answers {
                w.done(Err(WriteError::CommitTimeout));
            }
        }
        self.kick();
    }

    /// Writes an epoch record numbered `number`, led by `leader`, at the end of the log, makes it
    /// durable and points `epoch.chk` at it, without publishing it (a cluster's leader starting
    /// its term). Returns the record and the position after it.
    pub fn write_epoch(&self, number: u64, leader: [u8; 16]) -> Result<(EpochRecord, u64), StorageError> {
        let mut w = lock(&self.writer);
        let cps = &self.log.checkpoints;
        let rec = EpochRecord {
            log_position: 0,
            epoch_number: number as i64,
            epoch_id: *self.env.new_uuid().as_bytes(),
            prev_epoch_position: cps.epoch.read(),
            timestamp_us: self.env.clock.wall_micros(),
            leader_id: leader,
        };
        let mut probe = Vec::new();
        record::encode_epoch(&rec, &mut probe);
        let pos = w.append(probe.len() as u64, |pos, out| {
            record::encode_epoch(&EpochRecord { log_position: pos, ..rec.clone() }, out)
        })?;
        let end = w.flush()?;
        cps.epoch.write_durable(pos as i64).map_err(|e| StorageError::Io(e.to_string()))?;
        self.durable.raise(end);
        Ok((EpochRecord { log_position: pos, ..rec }, end))
    }

    /// Stages a leader's records (whole frames, each at the position it names; nothing durable
    /// yet). When the leader's shipment ends at the start of the next chunk (`end`), the leader
    /// completed the current chunk after these records: so does this log. Returns the epoch
    /// records among them and whether the last of them closes an atomic write (or is an epoch
    /// record): only such an end may be adopted ([`Store::adopt_replicated`]).
    pub fn stage_replicated(&self, frames: &[u8], end: u64) -> Result<StagedReplica, StorageError> {
        let mut w = lock(&self.writer);
        let mut staged = StagedReplica { epochs: Vec::new(), closes: None, events: 0, bytes: 0 };
        let mut at = 0usize;
        while at < frames.len() {
            let (pos, len) = frame_at(&frames[at..], self.log.max_body())
                .map_err(|e| StorageError::Io(format!("a replicated frame at offset {at}: {e}")))?;
            // The cluster core ships the leader's records from where it counts this log's end.
            // A node that just stopped leading may hold more: groups it wrote and synced, which
            // it never counted durable (leadership went while they waited). They are its own,
            // uncommitted, and no quorum counted them: they give way to the leader's records.
            if at == 0 && pos < w.position() && pos >= self.log.committed() {
                tracing::info!(
                    from = w.position(),
                    to = pos,
                    "dropping records this node wrote as leader and never counted durable"
                );
                w.truncate_to(pos)?;
                self.repoint_epoch_chk()?;
            }
            let frame = &frames[at..at + len];
            staged.closes = match w.append_at(pos, frame)? {
                Record::Epoch(e) => {
                    staged.epochs.push(e);
                    Some(true)
                }
                Record::Event(e) => {
                    staged.events += 1;
                    staged.bytes += (e.data.len() + e.metadata.len()) as u64;
                    Some(e.flags & flags::TX_END != 0)
                }
            };
            at += len;
        }
        let size = self.log.chunk_size();
        if end > w.position() && end % size == 0 && end / size == w.position() / size + 1 {
            w.complete_now()?;
        }
        Ok(staged)
    }

    /// Syncs the data of every staged record of the leader's (the first half of making them
    /// durable: [`Store::checkpoint_replicated`] is the second) and returns its end.
    pub fn sync_replicated(&self) -> Result<u64, StorageError> {
        Ok(lock(&self.writer).flush_data()?)
    }

    /// Makes the records [`Store::sync_replicated`] synced below `end` durable without a
    /// checkpoint when the log can adopt them ([`Log::adopt_synced`](crate::log::Log::adopt_synced));
    /// returns the durable end (below `end` when they need [`Store::checkpoint_replicated`]).
    /// `end` must close an atomic write ([`StagedReplica::closes`]): recovery adopts whole
    /// atomic writes only.
    pub fn adopt_replicated(&self, end: u64) -> u64 {
        self.log.adopt_synced(end)
    }

    /// Moves `writer.chk` to `end`, which [`Store::sync_replicated`] returned, then points
    /// `epoch.chk` at `last_epoch` (the newest epoch record below `end`, if any). Runs beside the
    /// staging and syncing of the next records. Returns the durable end. It does not raise the
    /// durable watermark: a follower's shell reports its durable end to its core itself, in
    /// order with its truncations.
    pub fn checkpoint_replicated(&self, end: u64, last_epoch: Option<u64>) -> Result<u64, StorageError> {
        let durable = self.log.flush_checkpoint(end)?;
        if let Some(at) = last_epoch {
            let cps = &self.log.checkpoints;
            cps.epoch.write_durable(at as i64).map_err(|e| StorageError::Io(e.to_string()))?;
        }
        Ok(durable)
    }

    /// Gathers a piece of a whole chunk the leader ships (the records of a chunk it scavenged,
    /// covering chunks `start..=end`), and with the last piece writes the chunk, puts it in
    /// service in place of the writer's empty chunk and moves past it. Returns the durable end
    /// and the epoch records once the chunk is in service, `None` before.
    pub fn replicate_chunk(
        &self,
        start: u32,
        end: u32,
        last: bool,
        frames: &[u8],
    ) -> Result<Option<(u64, Vec<EpochRecord>)>, StorageError> {
        let mut incoming = lock(&self.incoming);
        if incoming.as_ref().is_none_or(|(s, e, _, _)| (*s, *e) != (start, end)) {
            if let Some((_, _, w, _)) = incoming.take() {
                w.abort(&self.log);
            }
            // The version above any file of that chunk number (the writer's empty chunk is 0).
            let w = self.log.begin_scavenged(start, end, 1)?;
            *incoming = Some((start, end, w, Vec::new()));
        }
        let Some((_, _, w, epochs)) = incoming.as_mut() else { return Ok(None) };
        let mut at = 0usize;
        while at < frames.len() {
            let (pos, len) = frame_at(&frames[at..], self.log.max_body())
                .map_err(|e| StorageError::Io(format!("a replicated frame at offset {at}: {e}")))?;
            let frame = &frames[at..at + len];
            match record::decode(frame, pos, self.log.max_body()) {
                Ok((Record::Epoch(e), _)) => epochs.push(e),
                Ok((Record::Event(_), _)) => {}
                Err(e) => return Err(StorageError::Io(format!("a replicated record at {pos}: {e}"))),
            }
            w.push_checked(pos, frame)?;
            at += len;
        }
        if !last {
            return Ok(None);
        }
        let Some((_, _, w, epochs)) = incoming.take() else { return Ok(None) };
        let chunk = w.finish(&self.log)?;
        let mut writer = lock(&self.writer);
        let end = writer.adopt_chunk(chunk)?;
        let durable = writer.flush()?;
        drop(writer);
        if let Some(e) = epochs.last() {
            let cps = &self.log.checkpoints;
            cps.epoch.write_durable(e.log_position as i64).map_err(|e| StorageError::Io(e.to_string()))?;
        }
        self.durable.raise(durable.max(end));
        Ok(Some((durable.max(end), epochs)))
    }

    /// Drops the log past `to`: a divergent tail that was never committed.
    pub fn truncate_tail(&self, to: u64) -> Result<(), StorageError> {
        let mut w = lock(&self.writer);
        w.truncate_to(to)?;
        self.repoint_epoch_chk()
    }

    /// After a truncation: `epoch.chk` names the newest epoch record left (the truncation reset
    /// it if it was dropped).
    fn repoint_epoch_chk(&self) -> Result<(), StorageError> {
        if self.log.checkpoints.epoch.read() < 0 {
            if let Some(e) = self.load_epochs()?.last() {
                let cps = &self.log.checkpoints;
                cps.epoch
                    .write_durable(e.log_position as i64)
                    .map_err(|e| StorageError::Io(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Every epoch record of the durable log, oldest first: found from `epoch.chk` (or, when it
    /// is unset, by reading the log) and then by following each record's
    /// link to the one before.
    pub fn load_epochs(&self) -> Result<Vec<EpochRecord>, StorageError> {
        let mut at = self.log.checkpoints.epoch.read();
        if at < 0 || at as u64 >= self.log.durable() {
            // Rare (a log written before epochs were tracked, or an interrupted truncation):
            // the last epoch record is found by reading the log once.
            at = -1;
            for r in self.log.scan_durable(0) {
                if let Record::Epoch(e) = r? {
                    at = e.log_position as i64;
                }
            }
        }
        let mut out = Vec::new();
        while at >= 0 {
            match self.log.read_durable(at as u64) {
                Ok(Record::Epoch(e)) => {
                    at = e.prev_epoch_position;
                    out.push(e);
                }
                // A scavenged chunk may have dropped old epochs: the chain ends there.
                Ok(Record::Event(_)) | Err(crate::log::LogError::OutOfRange(_)) => break,
                Err(e) => return Err(e.into()),
            }
        }
        out.reverse();
        Ok(out)
    }

    /// Publishes the log up to `upto`, which the cluster committed: waiting groups (answered in
    /// order) and, between them, records a previous leader wrote. Stops short of `upto` rather
    /// than split a group or an atomic write.
    pub fn release(&self, upto: u64) -> Result<(), StorageError> {
        let upto = upto.min(self.log.durable());
        loop {
            let next = {
                let g = lock(&self.gate);
                g.awaiting.front().map(|a| (a.start, a.end))
            };
            match next {
                Some((start, end)) if end <= upto => {
                    self.publish_records(start)?;
                    let mut gate = lock(&self.gate);
                    let Some(a) = gate.awaiting.pop_front() else { continue };
                    self.settle(gate, a);
                }
                Some((start, _)) => {
                    self.publish_records(start.min(upto))?;
                    break;
                }
                None => {
                    self.publish_records(upto)?;
                    break;
                }
            }
        }
        self.kick();
        Ok(())
    }

    /// Queues a durable group of this leader's to wait for its quorum. A group that wrote nothing
    /// and ends at or below the committed position while nothing waits any more is answered now
    /// instead: the groups it was decided behind were released between its staging and here, and
    /// no quorum will ever come for it (it ships nothing), so waiting would stall it, and, with a
    /// second such group, fill the pipeline and stop every later write. The check and the queueing
    /// happen under the gate's lock, as a release's taking and publishing of a group do.
    pub(super) fn hold(&self, a: Awaiting) {
        let mut gate = lock(&self.gate);
        if gate.awaiting.is_empty() && a.end <= self.log.committed() {
            self.settle(gate, a);
            return;
        }
        // Groups wait in log order, each ending at or after the one before.
        debug_assert!(
            crate::buggify::bug(crate::buggify::Bug::EmptyGroupEndsAtCommitted)
                || gate.awaiting.back().is_none_or(|b| b.end <= a.start && a.start <= a.end),
            "a group {}..{} queued behind one ending at {:?}",
            a.start,
            a.end,
            gate.awaiting.back().map(|b| b.end)
        );
        gate.awaiting.push_back(a);
    }

    /// Publishes group `a`, which left the queue (or never joined it) under `gate`, and answers
    /// its callers: the group becomes visible and stops waiting in one step, so whoever looks
    /// finds it waiting or published, never neither.
    fn settle(&self, gate: std::sync::MutexGuard<'_, Gate>, a: Awaiting) {
        let results: Vec<_> = a
            .answers
            .into_iter()
            .map(|(w, r)| {
                (
                    w,
                    r.map(|mut ok| {
                        ok.commit_position = a.end;
                        ok
                    }),
                )
            })
            .collect();
        self.apply_committed(Committed::staged(a.end, a.staged, a.overlay));
        drop(gate);
        for (w, r) in results {
            w.done(r);
        }
    }

    /// Publishes the durable records between the committed position and `to`, ending after the
    /// last record that closes an atomic write (or an epoch record).
    fn publish_records(&self, to: u64) -> Result<(), StorageError> {
        let from = self.log.committed();
        if to <= from {
            return Ok(());
        }
        let mut scan = self.log.scan_durable(from).until(to);
        let mut batch = Vec::new();
        let mut safe = from;
        let mut safe_len = 0;
        while let Some(rec) = scan.next() {
            let rec = rec?;
            match rec {
                Record::Epoch(_) => {
                    safe = scan.position();
                    safe_len = batch.len();
                }
                Record::Event(e) => {
                    let closes = e.flags & flags::TX_END != 0;
                    batch.push(e);
                    if closes {
                        safe = scan.position();
                        safe_len = batch.len();
                    }
                }
            }
            if safe_len >= RELEASE_BATCH_RECORDS {
                let rest = batch.split_off(safe_len);
                self.apply_committed(Committed::from_records(&self.index, &batch, safe));
                batch = rest;
                safe_len = 0;
            }
        }
        batch.truncate(safe_len);
        if safe > self.log.committed() {
            self.apply_committed(Committed::from_records(&self.index, &batch, safe));
        }
        Ok(())
    }
}

/// The position and length of the record frame at the start of `buf` (a leader's records, back
/// to back), checked against the bounds before anything reads the frame.
fn frame_at(buf: &[u8], max_body: u32) -> Result<(u64, usize), &'static str> {
    let body =
        buf.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize).ok_or("cut short")?;
    let len = body + record::FRAME_OVERHEAD as usize;
    if body < record::BODY_HEADER || body > max_body as usize {
        return Err("bad length");
    }
    if buf.len() < len {
        return Err("cut short");
    }
    Ok((u64::from_le_bytes(buf[10..18].try_into().unwrap_or_default()), len))
}

/// What [`Store::stage_replicated`] staged.
#[derive(Debug, Default)]
pub struct StagedReplica {
    /// The epoch records among the records.
    pub epochs: Vec<EpochRecord>,
    /// Whether the last record closes an atomic write or is an epoch record (`None`: no record).
    pub closes: Option<bool>,
    /// Event records among the records.
    pub events: u64,
    /// Their data and metadata bytes.
    pub bytes: u64,
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::env::mem::{InlineRuntime, ManualClock, MemDisk, MemNet};
    use crate::env::Env;
    use crate::store::stage::Staged;
    use crate::store::{NewEvent, StoreConfig};

    #[tokio::test(flavor = "current_thread")]
    async fn a_group_of_refused_writes_queued_after_its_predecessor_was_released_is_answered() {
        // Seen on three processes under load (`writes_resume_after_every_recovery`): a group of
        // writes that were all refused is decided while an earlier group waits for its quorum,
        // so it must wait behind it; the quorum came and the earlier group was released between
        // that decision and the queueing. Queued, the group waited for a release that never came
        // (it ships nothing), a second one filled the pipeline, and the leader answered every
        // later write with a commit timeout while the cluster looked healthy.
        let clock = Arc::new(ManualClock::new(1_700_000_000_000_000));
        let env = Env::new(
            Arc::new(MemDisk::default()),
            clock,
            Arc::new(MemNet::default()),
            Arc::new(InlineRuntime),
            5,
        );
        let mut c = StoreConfig::new("/db");
        c.chunk_size = 1 << 16;
        c.existence_filter_bytes = 4096;
        c.replicated = true;
        c.commit_timeout = Duration::from_secs(3600);
        let store = Store::recover(&env, c).unwrap();
        store.write_epoch(1, [1; 16]).unwrap();
        store.release(store.log().durable()).unwrap();
        store.set_leading(true);

        let ev = NewEvent {
            id: [7; 16],
            event_type: "t".into(),
            data: vec![1].into(),
            metadata: bytes::Bytes::new(),
            is_json: false,
        };
        let s = store.clone();
        let first = tokio::spawn(async move { s.append_async("s", -1, vec![ev]).await });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(store.holding(), "the first group waits for its quorum");
        let end = store.durable_watermark().get();
        // The refused group, decided behind the first (it ends where the first ends) ...
        let (tx, refused) = tokio::sync::oneshot::channel();
        let empty =
            Staged { results: Vec::new(), entries: Vec::new(), names: Vec::new(), recent: Vec::new() };
        let group = Awaiting {
            start: end,
            end,
            staged: empty,
            overlay: BTreeMap::new(),
            answers: vec![(Waiter::Task(tx), Err(WriteError::WrongExpectedVersion { current: 0 }))],
        };
        // ... and the quorum's release, which comes first.
        store.release(store.durable_watermark().get()).unwrap();
        assert_eq!(first.await.unwrap().unwrap().first_event_number, 0);
        store.hold(group);
        assert!(!store.holding(), "nothing waits for a quorum that will not come");
        assert!(!store.pipeline_full());
        assert_eq!(refused.await.unwrap(), Err(WriteError::WrongExpectedVersion { current: 0 }));
    }
}
