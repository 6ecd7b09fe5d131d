//! A follower's writes of the leader's records, as a two-stage pipeline off the driver's task.
//!
//! The driver hands over each shipment ([`Replica::push`]) and goes on taking messages. The write
//! stage, on a lane of its own, stages everything handed over since its last turn (at most
//! [`STAGED_BYTES_MAX`] per turn) and syncs the chunks' data ([`Store::sync_replicated`]).
//! Synced records inside the chunk `writer.chk` points into are durable as they are when they end
//! with a whole atomic write (a cluster node's log adopts them on recovery,
//! [`Store::adopt_replicated`]): the write stage reports their end to the driver at once. The
//! checkpoint stage, on a second lane, moves `writer.chk` past what the write stage synced
//! ([`Store::checkpoint_replicated`]) while the write stage goes on: after every batch that could
//! not be adopted (it reaches into a new chunk, ends inside an atomic write, or carries an epoch
//! record, which `epoch.chk` must name), and otherwise once `writer.chk` is due
//! ([`Log::checkpoint_due`](crate::log::Log::checkpoint_due)), so under load a follower makes one
//! sync per batch instead of two. What is reported reaches the driver
//! ([`Replica::take_report`]) as an [`Input::Durable`], the only way a follower's core learns of
//! (and acknowledges) its durable end. Each stage drains what waits for it in one turn, so what
//! arrives during a sync goes together into the next one.
//!
//! Invariants: a report names only a durable end (named by `writer.chk`, or synced and adoptable
//! below it), with the epoch records below it that earlier reports did not carry, and every such
//! epoch record is named by `epoch.chk` first; reports rise, in order. Staging follows the order
//! of [`Replica::push`]. After [`Replica::settle`] nothing is queued, staged, synced or being
//! checkpointed: the driver settles before every effect but a send, a release and a write (so
//! before a truncation, a whole chunk, an epoch record, a vote) and before the core reads a
//! subscription's answer, which it must decide knowing its log's exact end; a truncation never
//! meets a write or a checkpoint in flight. After a failure no further turn runs, and the node
//! stops taking part (the `failed` callback). The queue holds at most what the leader ships beyond the follower's
//! acknowledgements ([`SHIP_WINDOW_BYTES`](super::core::SHIP_WINDOW_BYTES)).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::Notify;

use super::core::{Epoch, Input};
use crate::env::{Env, Lane};
use crate::log::record::EpochRecord;
use crate::store::Store;

/// Bytes of a leader's records the write stage stages before it syncs, even with more waiting.
pub const STAGED_BYTES_MAX: usize = 1 << 20;

/// Reports a failure the node cannot vouch past (see the shell's `fatal`).
pub type Failed = Box<dyn Fn(String) + Send + Sync>;

/// Where the pipeline stands, under one lock.
#[derive(Default)]
struct State {
    /// Shipments handed over and not staged yet: the records and the end of their shipment.
    queued: VecDeque<(Bytes, u64)>,
    /// A write-stage job is queued or running (it drains `queued` before it ends).
    writing: bool,
    /// Synced by the write stage and not yet named by `writer.chk`: the end and the epoch
    /// records below it.
    synced: Option<(u64, Vec<EpochRecord>)>,
    /// A checkpoint-stage job is queued or running (it drains `synced` before it ends).
    checkpointing: bool,
    /// Durable and not yet taken by the driver.
    report: Option<(u64, Vec<Epoch>)>,
    /// The highest end reported.
    reported: u64,
    /// Epoch records are on their way through the checkpoint stage: no end past them may be
    /// reported before them.
    epochs_in_flight: bool,
    /// A stage failed: nothing more is done.
    failed: bool,
}

/// A follower's write pipeline (see the module doc).
pub struct Replica {
    store: Arc<Store>,
    state: Mutex<State>,
    write_lane: Box<dyn Lane>,
    /// The write lane's figures, for metrics.
    pub write_stats: Arc<crate::metrics::lane::LaneStats>,
    /// Events (and their data and metadata bytes) written from the leader's records.
    pub events_written: [std::sync::atomic::AtomicU64; 2],
    checkpoint_lane: Box<dyn Lane>,
    /// Wakes the driver when a report or a failure is there.
    ready: Notify,
    failed: Failed,
}

/// An epoch record as the core knows it.
pub fn epoch_of(e: &EpochRecord) -> Epoch {
    Epoch { number: e.epoch_number.max(0) as u64, id: e.epoch_id, position: e.log_position }
}

impl Replica {
    /// A pipeline writing into `store`, its stages on lanes of `env`; `failed` is called (from
    /// a stage's thread) when a write or a sync fails.
    pub fn new(env: &Env, store: Arc<Store>, failed: Failed) -> Arc<Replica> {
        let (write_lane, write_stats) =
            crate::metrics::lane::metered(env, "replica", env.rt.lane("annal-replica"));
        Arc::new(Replica {
            events_written: Default::default(),
            store,
            state: Mutex::default(),
            write_lane,
            write_stats,
            checkpoint_lane: env.rt.side_lane("annal-replica-chk"),
            ready: Notify::new(),
            failed,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands over the leader's records `data`, from a shipment ending at `end`, to be written
    /// after everything handed over before.
    pub fn push(self: &Arc<Self>, data: Bytes, end: u64) {
        let start = {
            let mut st = self.lock();
            if st.failed {
                return;
            }
            st.queued.push_back((data, end));
            !std::mem::replace(&mut st.writing, true)
        };
        if start {
            let me = self.clone();
            drop(self.write_lane.run(Box::new(move || me.write_stage())));
        }
    }

    /// The durable end to report to the core, if it moved since the last report.
    pub fn take_report(&self) -> Option<Input> {
        self.lock().report.take().map(|(end, epochs)| Input::Durable { end, epochs })
    }

    /// Completes when a report may be there (or a stage failed).
    pub async fn ready(&self) {
        self.ready.notified().await
    }

    /// Whether nothing is queued, staged, synced or being checkpointed.
    fn idle(&self) -> bool {
        let st = self.lock();
        st.queued.is_empty() && !st.writing && st.synced.is_none() && !st.checkpointing
    }

    /// Waits until everything handed over is durable and reported (or a stage failed).
    pub async fn settle(&self) {
        while !self.idle() {
            // Each lane runs its jobs in order: these run after every job queued before them.
            self.write_lane.run(Box::new(|| {})).await;
            self.checkpoint_lane.run(Box::new(|| {})).await;
        }
    }

    /// The write stage: stages what was handed over and syncs its data, turn after turn, until
    /// nothing waits; each synced end goes to the checkpoint stage.
    fn write_stage(self: Arc<Self>) {
        loop {
            let batch = {
                let mut st = self.lock();
                if st.failed || st.queued.is_empty() {
                    st.writing = false;
                    return;
                }
                let mut batch = Vec::new();
                let mut bytes = 0usize;
                while bytes < STAGED_BYTES_MAX {
                    let Some((data, end)) = st.queued.pop_front() else { break };
                    bytes += data.len().max(1);
                    batch.push((data, end));
                }
                batch
            };
            let mut epochs = Vec::new();
            // Whether the batch ends with a whole atomic write: only then can it be adopted.
            let mut closes = true;
            for (data, end) in batch {
                match self.store.stage_replicated(&data, end) {
                    Ok(staged) => {
                        let [events, bytes] = &self.events_written;
                        events.fetch_add(staged.events, std::sync::atomic::Ordering::Relaxed);
                        bytes.fetch_add(staged.bytes, std::sync::atomic::Ordering::Relaxed);
                        epochs.extend(staged.epochs);
                        closes = staged.closes.unwrap_or(closes);
                    }
                    Err(e) => {
                        tracing::error!(end, error = %e, "writing the leader's records failed");
                        return self.fail(true, format!("cannot write the leader's records: {e}"));
                    }
                }
            }
            let synced = match self.store.sync_replicated() {
                Ok(end) => end,
                Err(e) => return self.fail(true, format!("cannot make the leader's records durable: {e}")),
            };
            // Records adopted as they are need no checkpoint before they are reported.
            let adopted = closes && epochs.is_empty() && self.store.adopt_replicated(synced) >= synced;
            let (start, reported) = {
                let mut st = self.lock();
                let fast = adopted && !st.epochs_in_flight;
                let reported = fast && Self::add_report(&mut st, synced, Vec::new());
                let due = !fast || self.store.log().checkpoint_due();
                if due {
                    st.epochs_in_flight |= !epochs.is_empty();
                    match &mut st.synced {
                        Some((end, older)) => {
                            *end = (*end).max(synced);
                            older.extend(epochs);
                        }
                        None => st.synced = Some((synced, epochs)),
                    }
                }
                (due && !std::mem::replace(&mut st.checkpointing, true), reported)
            };
            if reported {
                self.ready.notify_one();
            }
            if start {
                let me = self.clone();
                drop(self.checkpoint_lane.run(Box::new(move || me.checkpoint_stage())));
            }
        }
    }

    /// The checkpoint stage: moves `writer.chk` past what the write stage synced (and
    /// `epoch.chk` to the newest epoch record among it) and reports it, until nothing waits.
    fn checkpoint_stage(self: Arc<Self>) {
        loop {
            let (end, epochs) = {
                let mut st = self.lock();
                match st.synced.take() {
                    Some(s) if !st.failed => s,
                    _ => {
                        st.checkpointing = false;
                        return;
                    }
                }
            };
            let durable = match self.store.checkpoint_replicated(end, epochs.last().map(|e| e.log_position)) {
                Ok(d) => d,
                Err(e) => return self.fail(false, format!("cannot make the leader's records durable: {e}")),
            };
            let reported = {
                let mut st = self.lock();
                st.epochs_in_flight = st.synced.as_ref().is_some_and(|(_, e)| !e.is_empty());
                Self::add_report(&mut st, durable, epochs.iter().map(epoch_of).collect())
            };
            if reported {
                self.ready.notify_one();
            }
        }
    }

    /// Adds the durable end `end` and the epoch records below it to the report; returns whether
    /// that told anything new.
    fn add_report(st: &mut State, end: u64, epochs: Vec<Epoch>) -> bool {
        if end <= st.reported && epochs.is_empty() {
            return false;
        }
        st.reported = st.reported.max(end);
        match &mut st.report {
            Some((at, older)) => {
                *at = (*at).max(end);
                older.extend(epochs);
            }
            None => st.report = Some((end, epochs)),
        }
        true
    }

    /// Stops the pipeline after a failure in the stage `writing` says (the other stage stops at
    /// its next turn).
    fn fail(&self, writing: bool, why: String) {
        {
            let mut st = self.lock();
            st.failed = true;
            st.queued.clear();
            st.synced = None;
            if writing {
                st.writing = false;
            } else {
                st.checkpointing = false;
            }
        }
        (self.failed)(why);
        self.ready.notify_one();
    }
}
