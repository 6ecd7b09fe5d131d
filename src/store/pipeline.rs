//! The checkpoint stage of the commit pipeline, a single node's and a cluster leader's
//! ([`Store::quorum_checkpoint`], below: it only moves `writer.chk` and tells the cluster; the
//! quorum then releases the groups).
//!
//! A single node's: the group-commit leader ([`commit`](super::commit)) stages a group and syncs its data ([`LogWriter::flush_data`]),
//! then queues it here, in the [`Gate`](super::replicated::Gate)'s waiting groups (where a
//! cluster's leader queues its groups for their quorum), and goes on with the next group while
//! this stage, on a lane of its own, moves `writer.chk` past every group whose data is synced
//! ([`Log::flush_checkpoint`]: one flush for all of them), then publishes them and answers their
//! callers, in log order.
//!
//! Invariants: a group is answered with success only after its data and then `writer.chk` naming
//! its end were synced; answers go out in log order (groups leave the queue from its front, one at
//! a time, each published in the same step under the gate's lock, so a group being staged finds
//! every earlier one either waiting, with the states it leaves, or published); at most
//! [`PIPELINE_DEPTH`](super::replicated::PIPELINE_DEPTH) groups wait; once a flush fails the log
//! is poisoned and every waiting group, and every later one, is answered with the storage error.
//! A cluster leader's stage names a group durable to the cluster only once it is (`writer.chk`
//! names it, or its synced records are adopted, [`Log::adopt_synced`]), and only a group already
//! queued to wait.
//!
//! [`LogWriter::flush_data`]: crate::log::LogWriter::flush_data
//! [`Log::flush_checkpoint`]: crate::log::Log::flush_checkpoint
//! [`Log::adopt_synced`]: crate::log::Log::adopt_synced

use super::replicated::Awaiting;
use super::{lock, Committed, StorageError, Store};

impl Store {
    /// Queues a group whose data is synced (or whose flush failed: `a` then holds only error
    /// answers) for the checkpoint stage, behind the groups queued before it, and has the stage
    /// run on its lane.
    pub(super) fn queue_for_checkpoint(&self, a: Awaiting) {
        lock(&self.gate).awaiting.push_back(a);
        let me = self.me.clone();
        drop(self.checkpoint_lane.run(Box::new(move || {
            if let Some(store) = me.upgrade() {
                store.checkpoint_stage();
            }
        })));
    }

    /// Runs the checkpoint stage once: moves `writer.chk` to the end of the newest waiting group,
    /// then publishes and answers, in order, every waiting group it covers (when the flush
    /// failed, those `writer.chk` already named, and all the others with the error). Returns whether any group was answered. Callable from any
    /// thread (the checkpoint lane, a thread waiting in [`Store::write`], shutdown).
    pub(super) fn checkpoint_stage(&self) -> bool {
        let Some(target) = lock(&self.gate).awaiting.back().map(|a| a.end) else { return false };
        let flushed = self.log.flush_checkpoint(target).map_err(StorageError::from);
        // What writer.chk names, whoever moved it: a group below it is durable even when this
        // flush failed (a dropped group's own checkpoint flush may have covered it).
        let durable = self.log.durable();
        if flushed.is_ok() {
            self.durable.raise(durable);
        }
        let started = self.env.clock.monotonic();
        let (mut answered, mut failed) = (0usize, 0usize);
        loop {
            let mut gate = lock(&self.gate);
            let Some(front) = gate.awaiting.front() else { break };
            let covered = front.end <= durable;
            if !covered && flushed.is_ok() {
                // Queued after the flush began: its own run of the stage covers it.
                break;
            }
            let Some(a) = gate.awaiting.pop_front() else { break };
            answered += 1;
            match &flushed {
                Err(e) if !covered => {
                    drop(gate);
                    failed += 1;
                    self.fail_waiting(a, e, failed == 1);
                }
                _ => {
                    let Awaiting { start, end, staged, overlay, answers } = a;
                    let results: Vec<_> = answers
                        .into_iter()
                        .map(|(w, r)| {
                            (
                                w,
                                r.map(|mut ok| {
                                    ok.commit_position = end;
                                    ok
                                }),
                            )
                        })
                        .collect();
                    // The group leaves the queue and becomes visible in one step.
                    if end > start {
                        self.apply_committed(Committed::staged(end, staged, overlay));
                    }
                    drop(gate);
                    if end > start {
                        crate::buggify::acknowledged(start, end);
                    }
                    for (w, r) in results {
                        w.done(r);
                    }
                }
            }
        }
        crate::env::add_elapsed(&self.stats.total_publish_ns, started, self.env.clock.monotonic());
        if answered > 0 {
            // The leader may have stopped at a full pipeline.
            self.kick();
        }
        answered > 0
    }

    /// Answers a waiting group that a failed flush left not durable: nothing of it is
    /// acknowledged. A rejection stays one only in the `first` such group (every group before it
    /// was published) and only when it came before the group's first write; any other may rest
    /// on writes that are now not durable, so it becomes the storage error too.
    fn fail_waiting(&self, a: Awaiting, e: &StorageError, first: bool) {
        // `bug(..)` switches are test-only (src/buggify.rs): constant false without `sim`.
        if !first && a.end > a.start && crate::buggify::bug(crate::buggify::Bug::AckAfterFailedCheckpoint) {
            crate::buggify::acknowledged(a.start, a.end);
            for (w, r) in a.answers {
                w.done(r.map(|mut ok| {
                    ok.commit_position = a.end;
                    ok
                }));
            }
            return;
        }
        let mut wrote = !first;
        for (w, r) in a.answers {
            w.done(super::commit::unwritten(r, &mut wrote, e));
        }
    }

    /// Runs the checkpoint stage once, a single node's or a cluster leader's; returns whether
    /// it did anything.
    pub(super) fn run_checkpoint(&self) -> bool {
        if self.cfg.replicated {
            self.quorum_checkpoint()
        } else {
            self.checkpoint_stage()
        }
    }

    /// Has a cluster leader's checkpoint stage run on its lane (see [`Store::quorum_checkpoint`]).
    pub(super) fn queue_quorum_checkpoint(&self) {
        let me = self.me.clone();
        drop(self.checkpoint_lane.run(Box::new(move || {
            if let Some(store) = me.upgrade() {
                store.quorum_checkpoint();
            }
        })));
    }

    /// A cluster leader's checkpoint stage: makes the newest group queued to wait for its quorum
    /// durable (their data is synced), by adopting it ([`Log::adopt_synced`]) or else by moving
    /// `writer.chk` to its end, and raises the durable watermark,
    /// which the cluster counts as this node's vote in the quorum; the groups stay queued
    /// until the quorum holds them ([`Store::release`]). When the flush fails, every waiting
    /// group `writer.chk` does not name is answered with the error (its records may have reached
    /// the followers, so it is an error of unknown outcome; any rejection among them may rest
    /// on those writes and becomes the error too). Returns whether it moved the durable
    /// watermark or answered a group.
    ///
    /// The target is exactly the newest queued group's end, never the synced end of the data: a
    /// group synced but not yet queued must not be named durable to the cluster before it waits
    /// (a release would publish it as another leader's records). Nor is it kept apart from the
    /// queue: once a group that wrote nothing, queued behind a waiting one, set a kept target
    /// below that group's end, and every run of this stage after it found nothing to do (a new
    /// leader stopped committing, simulator seed 1 of the survivor scenario). A leader that
    /// lost its leadership has nothing queued, so a run that comes late does nothing.
    pub(super) fn quorum_checkpoint(&self) -> bool {
        // Read from the queue itself, each time: a group queued after this stage's last run is
        // covered by this one, and a run that finds nothing above the watermark has nothing
        // left to do (no later group can be missed: each queues its own run after it waits).
        let Some(target) = lock(&self.gate).awaiting.back().map(|a| a.end) else { return false };
        let before = self.durable.get();
        if target <= before {
            return false;
        }
        // A group's end closes its writes: inside the chunk `writer.chk` points into, its synced
        // records are durable as they are (recovery adopts them), and `writer.chk` follows at
        // most every ADOPTED_CHECKPOINT_INTERVAL.
        if !self.log.checkpoint_due() && self.log.adopt_synced(target) >= target {
            self.durable.raise(target);
            return true;
        }
        match self.log.flush_checkpoint(target) {
            Ok(durable) => {
                let durable = durable.min(target);
                self.durable.raise(durable);
                durable > before
            }
            Err(e) => {
                let e = StorageError::from(e);
                let e = match e {
                    StorageError::ReadOnly(why) => StorageError::Io(why),
                    e => e,
                };
                let durable = self.log.durable();
                let failed = {
                    let mut gate = lock(&self.gate);
                    let at =
                        gate.awaiting.iter().position(|a| a.end > durable).unwrap_or(gate.awaiting.len());
                    gate.awaiting.split_off(at)
                };
                let answered = !failed.is_empty();
                for a in failed {
                    let mut wrote = true;
                    for (w, r) in a.answers {
                        w.done(super::commit::unwritten(r, &mut wrote, &e));
                    }
                }
                self.kick();
                answered
            }
        }
    }

    /// Runs the checkpoint stage until no group waits for it (shutdown, and a thread that waits
    /// for its own answer: see [`Store::write`]).
    pub(super) fn drain_checkpoints(&self) {
        while self.run_checkpoint() {}
    }
}
