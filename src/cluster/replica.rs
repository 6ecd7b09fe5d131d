//! A follower's writes of the leader's records, as a two-stage pipeline off the driver's task.
//!
//! The driver hands over each shipment ([`Replica::push`]) and goes on taking messages. The write
//! stage, on a lane of its own, stages everything handed over since its last turn (at most
//! [`STAGED_BYTES_MAX`] per turn) and syncs the chunks' data ([`Store::sync_replicated`]); the
//! checkpoint stage, on a second lane, then moves `writer.chk` past it
//! ([`Store::checkpoint_replicated`]) while the write stage already stages and syncs the next
//! batch. What `writer.chk` names is reported to the driver ([`Replica::take_report`]) as an
//! [`Input::Durable`], the only way a follower's core learns of (and acknowledges) its durable
//! end. Each stage drains what waits for it in one turn, so what arrives during a sync goes
//! together into the next one.
//!
//! Invariants: a report names only an end `writer.chk` names, with the epoch records below it
//! that earlier reports did not carry; reports rise, in order. Staging follows the order of
//! [`Replica::push`]. After [`Replica::settle`] nothing is queued, staged, synced or being
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
    /// Named by `writer.chk` and not yet taken by the driver.
    report: Option<(u64, Vec<Epoch>)>,
    /// A stage failed: nothing more is done.
    failed: bool,
}

/// A follower's write pipeline (see the module doc).
pub struct Replica {
    store: Arc<Store>,
    state: Mutex<State>,
    write_lane: Box<dyn Lane>,
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
        Arc::new(Replica {
            store,
            state: Mutex::default(),
            write_lane: env.rt.lane("annal-replica"),
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
            for (data, end) in batch {
                match self.store.stage_replicated(&data, end) {
                    Ok(e) => epochs.extend(e),
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
            let start = {
                let mut st = self.lock();
                match &mut st.synced {
                    Some((end, older)) => {
                        *end = (*end).max(synced);
                        older.extend(epochs);
                    }
                    None => st.synced = Some((synced, epochs)),
                }
                !std::mem::replace(&mut st.checkpointing, true)
            };
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
            {
                let mut st = self.lock();
                let epochs = epochs.iter().map(epoch_of);
                match &mut st.report {
                    Some((end, older)) => {
                        *end = (*end).max(durable);
                        older.extend(epochs);
                    }
                    None => st.report = Some((durable, epochs.collect())),
                }
            }
            self.ready.notify_one();
        }
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
