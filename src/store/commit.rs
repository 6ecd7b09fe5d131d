//! The write queue and group commit: callers queue operations ([`Store::write`] blocks a thread,
//! [`Store::write_async`] a task); the first caller to find no leader leads (or, for tasks, a
//! dedicated leader runs on the writer's lane), takes every queued operation up to a byte bound,
//! stages them and flushes them with one set of syncs; then leadership passes to the next waiter.
//! A single node's leader syncs only the group's data and queues the group for the checkpoint
//! stage ([`pipeline`](super::pipeline)), which moves `writer.chk`, publishes
//! ([`Store::apply_committed`]) and answers, while the leader goes on with the next group. A
//! cluster's leader writes the group's records to the files and announces them, so they are
//! shipped to the followers while it syncs their data; the group then waits for its quorum
//! ([`replicated`](super::replicated)) while the checkpoint stage moves `writer.chk` past it and
//! tells the cluster this node holds it durably, and the leader goes on with the next group.
//!
//! Invariants: an operation is answered only after its group is durable and published, or
//! refused; a failed flush answers every operation of its group with the storage error (rejections
//! stay rejections); leadership always passes on, even when a leader unwinds.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{sync_channel, SyncSender, TryRecvError};
use std::time::Duration;

use bytes::Bytes;

use super::engine::{self, StreamState};
use super::replicated::Awaiting;
use super::stage::Staged;
use super::{lock, Committed, NewEvent, StorageError, Store, WriteError, WriteOp, WriteResult};
use crate::log::LogError;

pub(super) enum Reply {
    Lead,
    Done(Result<WriteResult, WriteError>),
}

/// How a queued operation's caller waits: a thread blocked in [`Store::write`] (which may be
/// asked to lead), or a task awaiting [`Store::write_async`] (which never leads).
pub(super) enum Waiter {
    Thread(SyncSender<Reply>),
    Task(tokio::sync::oneshot::Sender<Result<WriteResult, WriteError>>),
}

impl Waiter {
    pub(super) fn done(self, r: Result<WriteResult, WriteError>) {
        match self {
            Waiter::Thread(tx) => {
                let _ = tx.send(Reply::Done(r));
            }
            Waiter::Task(tx) => {
                let _ = tx.send(r);
            }
        }
    }
}

pub(super) struct Pending {
    op: WriteOp,
    bytes: usize,
    tx: Waiter,
}

#[derive(Default)]
pub(super) struct Queue {
    pending: VecDeque<Pending>,
    leader: bool,
}

impl Store {
    /// Performs a write through the group-commit pipeline. Blocks the calling thread until the
    /// write is durable (or refused); async callers go through [`Env::blocking`].
    pub fn write(&self, op: WriteOp) -> Result<WriteResult, WriteError> {
        let (tx, rx) = sync_channel(2);
        if self.enqueue(op, Waiter::Thread(tx)) {
            self.lead(false);
        }
        loop {
            let reply = match rx.try_recv() {
                Ok(reply) => Ok(reply),
                // A group waits for its checkpoint flush, which this thread runs too rather
                // than only wait for the checkpoint lane: in a simulation that lane runs only
                // when this thread's task yields, which a blocked thread never does.
                Err(TryRecvError::Empty) if self.run_checkpoint() => continue,
                Err(TryRecvError::Empty) => rx.recv().map_err(|_| ()),
                Err(TryRecvError::Disconnected) => Err(()),
            };
            match reply {
                Ok(Reply::Lead) => self.lead(false),
                Ok(Reply::Done(r)) => return r,
                Err(()) => return Err(StorageError::Io("the writer stopped".into()).into()),
            }
        }
    }

    /// [`Store::write`] for async callers: the operation joins the same group-commit queue, and
    /// the task waits without holding a thread. When no leader is active, one is started on the
    /// writer's [`Lane`](crate::env::Lane) (one thread that takes every such leader; inline in
    /// simulations); it commits groups until the queue is empty or a waiting thread can lead.
    pub async fn write_async(&self, op: WriteOp) -> Result<WriteResult, WriteError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let leader = self.enqueue(op, Waiter::Task(tx)).then(|| self.start_leader());
        let stopped = || Err(StorageError::Io("the writer stopped".into()).into());
        let r = if self.cfg.replicated {
            // A quorum may not come: answer within the commit timeout (the write may still
            // commit; a retry with the same event ids is safe).
            let timeout = self.env.rt.sleep(self.cfg.commit_timeout);
            tokio::select! {
                biased;
                r = rx => r.unwrap_or_else(|_| stopped()),
                _ = timeout => Err(WriteError::CommitTimeout),
            }
        } else {
            rx.await.unwrap_or_else(|_| stopped())
        };
        // In simulations the leader ran inline; its modelled I/O time passes here, as it did when
        // HTTP appends went through `Env::blocking`. A real leader is not waited for: it may go on
        // with later groups.
        #[cfg(feature = "sim")]
        if let Some(io) = leader {
            io.await;
        }
        #[cfg(not(feature = "sim"))]
        drop(leader);
        r
    }

    /// Several writes queued together, so one group commit can take them all (see
    /// [`Store::write_async`]); their results in the same order. Each write is decided and
    /// answered on its own: one refused write does not hold back the others.
    pub async fn write_all_async(&self, ops: Vec<WriteOp>) -> Vec<Result<WriteResult, WriteError>> {
        let mut waits = Vec::with_capacity(ops.len());
        let mut leader = None;
        for op in ops {
            let (tx, rx) = tokio::sync::oneshot::channel();
            if self.enqueue(op, Waiter::Task(tx)) {
                leader = Some(self.start_leader());
            }
            waits.push(rx);
        }
        let stopped = || Err(StorageError::Io("the writer stopped".into()).into());
        let mut out = Vec::with_capacity(waits.len());
        if self.cfg.replicated {
            // One deadline for all: once it passed, a write not answered yet timed out.
            let mut timeout = Some(self.env.rt.sleep(self.cfg.commit_timeout));
            for mut rx in waits {
                let r = match timeout.as_mut() {
                    Some(t) => tokio::select! {
                        biased;
                        r = &mut rx => Some(r.unwrap_or_else(|_| stopped())),
                        _ = t => None,
                    },
                    None => None,
                };
                out.push(match r {
                    Some(r) => r,
                    None => {
                        timeout = None;
                        match rx.try_recv() {
                            Ok(r) => r,
                            Err(_) => Err(WriteError::CommitTimeout),
                        }
                    }
                });
            }
        } else {
            for rx in waits {
                out.push(rx.await.unwrap_or_else(|_| stopped()));
            }
        }
        #[cfg(feature = "sim")]
        if let Some(io) = leader {
            io.await;
        }
        #[cfg(not(feature = "sim"))]
        drop(leader);
        out
    }

    /// Appends events without blocking the calling task (see [`Store::write_async`]).
    pub async fn append_async(
        &self,
        stream: &str,
        expected: i64,
        events: Vec<NewEvent>,
    ) -> Result<WriteResult, WriteError> {
        self.write_async(WriteOp::Append { stream: stream.to_owned(), expected, events }).await
    }

    /// Queues `op`; true when the caller must see to leading (no leader was active).
    fn enqueue(&self, op: WriteOp, tx: Waiter) -> bool {
        let bytes = match &op {
            WriteOp::Append { events, .. } => {
                events.iter().map(|e| e.data.len() + e.metadata.len() + 64).sum()
            }
            WriteOp::Delete { .. } | WriteOp::ScavengePoint { .. } => 64,
        };
        let mut q = lock(&self.queue);
        q.pending.push_back(Pending { op, bytes, tx });
        self.stats.queued.store(q.pending.len() as u64, Ordering::Relaxed);
        !std::mem::replace(&mut q.leader, true)
    }

    /// Whether a commit leader runs.
    pub(super) fn queue_has_leader(&self) -> bool {
        lock(&self.queue).leader
    }

    /// Starts a leader when writes are queued and none runs (after a release or a change of
    /// role), so they are committed or refused.
    pub(super) fn kick(&self) {
        let mut q = lock(&self.queue);
        if q.pending.is_empty() || q.leader || self.pipeline_full() {
            return;
        }
        q.leader = true;
        drop(q);
        drop(self.start_leader());
    }

    /// Runs a dedicated leader on the writer's lane (the leader flag is already set).
    /// The returned future completes when that leader is done; dropping it detaches the leader.
    /// (Simulated runtimes run the leader inline and model its I/O time as that future's delay.)
    fn start_leader(&self) -> crate::env::BoxFuture<'static, ()> {
        match self.me.upgrade() {
            Some(store) => self.leader_lane.run(Box::new(move || store.lead(true))),
            // Unreachable while a caller holds the store; nothing can commit without it.
            None => {
                lock(&self.queue).leader = false;
                Box::pin(async {})
            }
        }
    }

    /// Appends events (a convenience over [`Store::write`]).
    pub fn append(
        &self,
        stream: &str,
        expected: i64,
        events: Vec<NewEvent>,
    ) -> Result<WriteResult, WriteError> {
        self.write(WriteOp::Append { stream: stream.to_owned(), expected, events })
    }

    /// Deletes a stream.
    pub fn delete(&self, stream: &str, expected: i64, hard: bool) -> Result<WriteResult, WriteError> {
        self.write(WriteOp::Delete { stream: stream.to_owned(), expected, hard })
    }

    /// Writes stream metadata (an event of type `$metadata` in `$$stream`).
    pub fn set_metadata(
        &self,
        stream: &str,
        expected: i64,
        id: [u8; 16],
        json: Bytes,
    ) -> Result<WriteResult, WriteError> {
        engine::validate_name(stream)?;
        let ev = NewEvent {
            id,
            event_type: "$metadata".into(),
            data: json,
            metadata: Bytes::new(),
            is_json: true,
        };
        self.append(&format!("$${stream}"), expected, vec![ev])
    }

    /// Commits queued groups. A thread that waits in [`Store::write`] leads one group and hands
    /// leadership to the next waiting thread; tasks of [`Store::write_async`] cannot lead, so
    /// when one is next, a `dedicated` leader (on the writer's lane) goes on to the next group
    /// and a thread's leader starts a dedicated one and returns to its caller.
    fn lead(&self, dedicated: bool) {
        // If this leader unwinds (a bug), leadership must still pass on, or every later write
        // would wait forever; its own group's callers see the writer stop (their senders drop).
        struct HandOff<'a>(&'a Store, bool);
        impl Drop for HandOff<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    return;
                }
                let mut q = lock(&self.0.queue);
                match q.pending.front().map(|p| &p.tx) {
                    Some(Waiter::Thread(tx)) => {
                        let _ = tx.send(Reply::Lead);
                    }
                    // Queued tasks wait for the next write to start a leader.
                    Some(Waiter::Task(_)) | None => q.leader = false,
                }
            }
        }
        let mut hand_off = HandOff(self, true);
        loop {
            self.commit_next();
            let mut q = lock(&self.queue);
            if self.pipeline_full() {
                // Groups wait for their quorum; a release starts the next leader.
                q.leader = false;
                break;
            }
            match q.pending.front().map(|p| &p.tx) {
                None => {
                    q.leader = false;
                    break;
                }
                Some(Waiter::Thread(tx)) => {
                    let _ = tx.send(Reply::Lead);
                    break;
                }
                Some(Waiter::Task(_)) if dedicated => {}
                Some(Waiter::Task(_)) => {
                    drop(q);
                    // Detached: this thread goes back to its caller.
                    drop(self.start_leader());
                    break;
                }
            }
        }
        hand_off.1 = false;
    }

    /// Takes the next group off the queue, commits it and answers its callers.
    fn commit_next(&self) {
        if self.pipeline_full() {
            return;
        }
        if self.cfg.replicated && (!self.leading() || self.resigning() || !self.published_all()) {
            let refused: Vec<Pending> = lock(&self.queue).pending.drain(..).collect();
            for p in refused {
                p.tx.done(Err(WriteError::NotLeader));
            }
            return;
        }
        let batch: Vec<Pending> = {
            let mut q = lock(&self.queue);
            let mut taken = Vec::new();
            let mut bytes = 0usize;
            while let Some(p) = q.pending.front() {
                // BUGGIFY (sim only): end the group early, so groups of every size occur.
                if !taken.is_empty() && (bytes + p.bytes > self.cfg.group_bytes_max || crate::buggify!()) {
                    break;
                }
                bytes += p.bytes;
                taken.extend(q.pending.pop_front());
            }
            self.stats.queued.store(q.pending.len() as u64, Ordering::Relaxed);
            taken
        };
        let clock = &self.env.clock;
        let started = clock.monotonic();
        let ops: Vec<&WriteOp> = batch.iter().map(|p| &p.op).collect();
        let (results, staged, committed, held) = self.commit_group(&ops);
        let ended = clock.monotonic();
        let took_d = ended - started;
        let took = took_d.as_micros() as u64;
        let s = &self.stats;
        s.flush_duration.observe_duration(took_d);
        s.group_size.observe(batch.len() as u64);
        s.flush_size_max.record(ended, batch.len() as u64);
        s.flush_duration_max.record(ended, u64::try_from(took_d.as_nanos()).unwrap_or(u64::MAX));
        s.flushes.fetch_add(1, Ordering::Relaxed);
        s.last_flush_size.store(batch.len() as u64, Ordering::Relaxed);
        s.total_flush_size.fetch_add(batch.len() as u64, Ordering::Relaxed);
        s.max_flush_size.fetch_max(batch.len() as u64, Ordering::Relaxed);
        s.last_flush_us.store(took, Ordering::Relaxed);
        s.total_flush_us.fetch_add(took, Ordering::Relaxed);
        s.max_flush_us.fetch_max(took, Ordering::Relaxed);
        match held {
            Some(mut a) if !self.cfg.replicated => {
                // Answered once writer.chk names it (the checkpoint stage, src/store/pipeline.rs).
                a.answers = batch.into_iter().map(|p| p.tx).zip(results).collect();
                self.queue_for_checkpoint(a);
            }
            Some(mut a) => {
                // Answered when a quorum holds the group (or leadership is lost).
                a.answers = batch.into_iter().map(|p| p.tx).zip(results).collect();
                self.hold(a);
                // Only now may the cluster learn that these records are durable here: a release
                // that came first would publish them as another leader's, and this group would
                // wait forever. The checkpoint stage moves writer.chk past them and says so,
                // while this thread goes on with the next group.
                self.queue_quorum_checkpoint();
                if !self.leading() {
                    // Leadership went while this group was written: answer it now.
                    self.set_leading(false);
                }
            }
            None => {
                for (p, r) in batch.into_iter().zip(results) {
                    p.tx.done(r);
                }
            }
        }
        crate::env::add_elapsed(&s.total_stage_ns, started, staged);
        if self.cfg.replicated {
            // (A single node's groups are published by the checkpoint stage, which counts that.)
            crate::env::add_elapsed(&s.total_publish_ns, committed, clock.monotonic());
        }
    }

    /// Stages, commits and publishes one group; also returns when staging ended and when the
    /// commit did (monotonic), for the writer's phase statistics. A cluster node's durable group
    /// is not published but returned, to wait for its quorum.
    #[allow(clippy::type_complexity)]
    fn commit_group(
        &self,
        ops: &[&WriteOp],
    ) -> (Vec<Result<WriteResult, WriteError>>, Duration, Duration, Option<Awaiting>) {
        let mut w = lock(&self.writer);
        let start = w.position();
        // Whether the log was read-only before this group: only then is "read-only" a promise
        // that nothing of the group was written.
        let poisoned_before = self.log.is_poisoned();
        let mut overlay: BTreeMap<String, StreamState> = BTreeMap::new();
        let mut staged =
            Staged { results: Vec::new(), entries: Vec::new(), names: Vec::new(), recent: Vec::new() };
        let now = self.env.clock.wall_micros();
        let mut staged_any = false;
        for op in ops {
            let r = self.stage(&mut w, &mut overlay, op, now, &mut staged);
            match r {
                Ok((res, wrote)) => {
                    staged_any |= wrote;
                    staged.results.push(Some(Ok(res)));
                }
                Err(e) => staged.results.push(Some(Err(e))),
            }
            if self.log.is_poisoned() {
                break;
            }
        }
        let staged_at = self.env.clock.monotonic();
        // The pipeline: only the data is synced here; `writer.chk` follows in the checkpoint
        // stage while the next group is staged and synced (a cluster's leader ships the group
        // meanwhile, and the group also waits for its quorum).
        let pipelined = !self.cfg.replicated;
        // BUGGIFY (sim only): the durable group is dropped before it commits, as a deposed
        // leader's divergent tail is, so online truncation runs under the simulator's faults. Its
        // callers get a storage error (to them the outcome is unknown; here it is "not written").
        // In the pipeline its checkpoint is flushed first, so that it is durable when dropped.
        // A cluster's leader decides it before the group is announced to the followers: a group
        // they may hold is never dropped by the leader that shipped it.
        let drop_group = |end: u64| end > start && crate::buggify!();
        let mut commit = if staged_any || self.log.is_poisoned() {
            if pipelined {
                w.flush_data().map_err(StorageError::from)
            } else {
                self.write_out_and_flush(&mut w, start, drop_group)
            }
        } else if pipelined || self.holding() {
            // Nothing written: the group ends where it starts, at the end of the group before
            // it, behind which it waits (the checkpoint stage's target is the newest waiting
            // group's end). `bug(..)` is a test-only switch (src/buggify.rs).
            if !pipelined && crate::buggify::bug(crate::buggify::Bug::EmptyGroupEndsAtCommitted) {
                Ok(self.log.committed())
            } else {
                Ok(w.position())
            }
        } else {
            Ok(self.log.committed())
        };
        // A log that turned read-only while this group was staged or written may hold some of
        // its records already (a completed chunk writes out what was staged before it), which a
        // cluster node's recovery adopts: to its callers the outcome is unknown, not "refused".
        if !poisoned_before {
            if let Err(StorageError::ReadOnly(why)) = &commit {
                commit = Err(StorageError::Io(format!(
                    "{why}; the log failed while this write was being written, so it may or may not be there"
                )));
            }
        }
        if pipelined && matches!(commit, Ok(end) if drop_group(end)) {
            let flushed = match commit {
                Ok(end) => self.log.flush_checkpoint(end).map(|_| ()),
                Err(_) => Ok(()),
            };
            commit = match flushed.and_then(|()| w.truncate_to(start)) {
                Ok(()) => Err(StorageError::Io("the group was dropped before it committed".into())),
                Err(e) => Err(e.into()),
            };
        }
        drop(w);
        let committed_at = self.env.clock.monotonic();
        let mut out = Vec::with_capacity(ops.len());
        if let Ok(end) = commit {
            // A group that wrote nothing still waits behind groups that wait: its answers may
            // rest on their writes. A single node's group always waits for its checkpoint.
            if pipelined || (self.cfg.replicated && (end > start || self.holding())) {
                let mut results: Vec<_> = std::mem::take(&mut staged.results)
                    .into_iter()
                    .map(|r| {
                        r.unwrap_or_else(
                            || Err(StorageError::ReadOnly(LogError::Poisoned.to_string()).into()),
                        )
                    })
                    .collect();
                results.resize_with(ops.len(), || {
                    Err(StorageError::ReadOnly(LogError::Poisoned.to_string()).into())
                });
                let held = Awaiting { start, end, staged, overlay, answers: Vec::new() };
                return (results, staged_at, committed_at, Some(held));
            }
            self.durable.raise(end);
        }
        match commit {
            Ok(pos) => {
                let results = std::mem::take(&mut staged.results);
                self.apply_committed(Committed::staged(pos, staged, overlay));
                for r in results
                    .into_iter()
                    .map(|r| r.unwrap_or_else(|| Err(StorageError::ReadOnly("not staged".into()).into())))
                {
                    out.push(r.map(|mut w| {
                        w.commit_position = pos;
                        w
                    }));
                }
                out.resize_with(ops.len(), || {
                    Err(StorageError::ReadOnly(LogError::Poisoned.to_string()).into())
                });
            }
            Err(e) => {
                // Nothing of this group is acknowledged. A rejection stays one only when nothing
                // was staged before it (and nothing waits for a quorum): one decided against the group's own staged writes (a wrong
                // expected version whose current version counts them, a stream they deleted) is
                // no longer true once they are not written, so it becomes the group's error.
                // On a cluster's leader with groups waiting for their quorum, a rejection may rest
                // on their writes (not committed yet): it becomes the group's error too, rather
                // than leave before the writes it counted.
                let mut wrote = self.holding();
                for r in staged.results.into_iter().flatten() {
                    out.push(unwritten(r, &mut wrote, &e));
                }
                out.resize_with(ops.len(), || Err(WriteError::Storage(e.clone())));
                if pipelined {
                    // Its answers go out behind the groups waiting before it.
                    let empty = Staged {
                        results: Vec::new(),
                        entries: Vec::new(),
                        names: Vec::new(),
                        recent: Vec::new(),
                    };
                    let at = start.max(self.log.durable());
                    let held = Awaiting {
                        start: at,
                        end: at,
                        staged: empty,
                        overlay: BTreeMap::new(),
                        answers: Vec::new(),
                    };
                    return (out, staged_at, committed_at, Some(held));
                }
            }
        }
        (out, staged_at, committed_at, None)
    }
}

impl Store {
    /// A cluster leader's flush of a staged group starting at `start`: hands the records to the
    /// files, announces them ([`Store::written_watermark`]) so the shell ships them to the
    /// followers while this thread syncs them, then syncs their data; `writer.chk` follows in
    /// the checkpoint stage ([`pipeline`](super::pipeline)). A group `drop` picks (the
    /// simulator's) is never announced: it is flushed and dropped again.
    ///
    /// Once announced, the group may reach the followers and commit without this node, so a
    /// failure after that is never answered as "certainly not written" (read-only): the log
    /// poisoned meanwhile (by the checkpoint stage) is an I/O error of unknown outcome.
    fn write_out_and_flush(
        &self,
        w: &mut crate::log::LogWriter,
        start: u64,
        drop: impl Fn(u64) -> bool,
    ) -> Result<u64, StorageError> {
        let end = w.write_out()?;
        if drop(end) {
            w.flush()?;
            w.truncate_to(start)?;
            return Err(StorageError::Io("the group was dropped before it committed".into()));
        }
        if end <= start {
            return Ok(w.flush_data()?);
        }
        self.written.raise(end);
        w.flush_data().map_err(|e| match e {
            LogError::Poisoned => StorageError::Io(
                "the log failed while this group was made durable (the followers may hold it)".into(),
            ),
            e => e.into(),
        })
    }
}

/// The answer to one write of a group a failed flush left not durable (`e`): its own storage
/// error stays; a rejection stays one only while nothing before it in the group was written
/// (`wrote`), since it may have been decided against those writes; a success, and any later
/// rejection, become `e`. Sets `wrote` at the first success.
pub(super) fn unwritten(
    r: Result<WriteResult, WriteError>,
    wrote: &mut bool,
    e: &StorageError,
) -> Result<WriteResult, WriteError> {
    match r {
        Err(WriteError::Storage(s)) => Err(WriteError::Storage(s)),
        Err(other) if !*wrote => Err(other),
        Err(_) => Err(WriteError::Storage(e.clone())),
        Ok(_) => {
            *wrote = true;
            Err(WriteError::Storage(e.clone()))
        }
    }
}
