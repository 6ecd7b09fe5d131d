//! The follow feed: a cursor over committed records in log order ([`Store::follow`]).
//!
//! A cursor reads the log's history from its position and then waits for new commits. It pulls:
//! each call reads at most the records and bytes asked for, so a slow consumer holds no more
//! than its last batch and the store keeps nothing on its behalf beyond the committed position
//! it waits on. Long polls, the user cache and, in the cluster, replication, subscriptions and
//! projections consume committed records this way.
//!
//! Consumers that need only which streams were written (long polls, the user cache) ask for
//! stream names ([`Follow::next_streams`]): the store keeps the names of recently published
//! batches in memory ([`Summaries`], bounded), so those cursors read no log at all while they
//! keep up, and read the log like any cursor when they fall behind.
//!
//! Cursors go by the published position (the store's watermark, raised once a batch is in the
//! index and caches), so what a cursor yields is readable.
//!
//! Invariants: a cursor never yields a record past the published position; records come in log
//! order, each once; epoch records are yielded too (replication needs them; most consumers skip
//! them). Stream names come in log order; a cursor that entered a batch partway may be told a
//! name of that batch again.

use std::sync::Arc;

use super::{lock, StorageError, Store};
use crate::log::record::Record;

/// Frame bytes one batch of a cursor holds at most (a single larger record still comes alone).
pub const FOLLOW_BATCH_BYTES: u64 = 4 * 1024 * 1024;
/// Stream names the store keeps for recently published batches, at most.
pub const SUMMARY_NAMES_MAX: usize = 65_536;
/// Records a names cursor reads from the log at once when it is behind the kept names.
const NAMES_FROM_LOG_RECORDS: usize = 1024;

/// The streams recently published batches wrote: `(end, names)` per batch that moved the
/// committed position, in log order, complete from `from` on.
#[derive(Debug)]
pub(super) struct Summaries {
    from: u64,
    batches: std::collections::VecDeque<(u64, Vec<Arc<str>>)>,
    names: usize,
}

impl Summaries {
    /// Empty, complete from `from`.
    pub(super) fn new(from: u64) -> Summaries {
        Summaries { from, batches: Default::default(), names: 0 }
    }

    /// Records a batch ending at `end` that wrote `names` (one per run of a stream).
    pub(super) fn push(&mut self, end: u64, names: Vec<Arc<str>>) {
        if names.is_empty() {
            return;
        }
        self.names += names.len();
        self.batches.push_back((end, names));
        while self.names > SUMMARY_NAMES_MAX {
            let Some((end, gone)) = self.batches.pop_front() else { break };
            self.names -= gone.len();
            self.from = end;
        }
    }
}

/// A cursor over committed records (see the module doc).
pub struct Follow {
    store: Arc<Store>,
    pos: u64,
}

impl Store {
    /// A cursor over committed records from log position `from` (a record start or chunk
    /// boundary: `0`, the committed position, or a position a cursor or read returned).
    pub fn follow(self: &Arc<Self>, from: u64) -> Follow {
        Follow { store: self.clone(), pos: from }
    }

    /// A cursor from the published end: only records committed from now on.
    pub fn follow_new(self: &Arc<Self>) -> Follow {
        Follow { store: self.clone(), pos: self.committed.get() }
    }
}

impl Follow {
    /// Where the next record will come from.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether records past the cursor are published now.
    pub fn has_more(&self) -> bool {
        self.pos < self.store.committed.get()
    }

    /// Waits until records past the cursor are committed, then reads up to `max` of them (and
    /// about [`FOLLOW_BATCH_BYTES`]) on the calling task when the page cache holds them, else on
    /// the blocking pool. Never returns an empty batch.
    pub async fn next(&mut self, max: usize) -> Result<Vec<Record>, StorageError> {
        loop {
            self.wait().await;
            let (store, from) = (self.store.clone(), self.pos);
            let (records, next) =
                self.store.env().read_job(move || read_batch(&store, from, max.max(1))).await?;
            self.pos = next;
            if !records.is_empty() {
                return Ok(records);
            }
        }
    }

    /// Which streams the batches published past the cursor wrote, from the store's kept
    /// summaries, without waiting or reading the disk; the cursor moves to the published end.
    /// `None` when the cursor is behind what the store keeps (the log has the answer).
    pub fn streams_kept(&mut self) -> Option<Vec<Arc<str>>> {
        // Only what is fully published (the watermark) counts.
        let visible = self.store.committed.get();
        let sums = lock(&self.store.summaries);
        if self.pos < sums.from {
            return None;
        }
        // Batches are in log order: skip those the cursor has seen without a scan.
        let first = sums.batches.partition_point(|(end, _)| *end <= self.pos);
        let names = sums
            .batches
            .range(first..)
            .take_while(|(end, _)| *end <= visible)
            .flat_map(|(_, names)| names.iter().cloned())
            .collect();
        self.pos = self.pos.max(visible);
        Some(names)
    }

    /// Moves the cursor to the published end, past everything it has not read.
    pub fn skip_to_committed(&mut self) {
        self.pos = self.pos.max(self.store.committed.get());
    }

    /// Waits until records past the cursor are committed, then tells which streams they wrote
    /// ([`Follow::streams_kept`] while the cursor keeps up, else from the log). Never returns an
    /// empty list.
    pub async fn next_streams(&mut self) -> Result<Vec<Arc<str>>, StorageError> {
        loop {
            self.wait().await;
            let names = match self.streams_kept() {
                Some(names) => names,
                None => self
                    .next(NAMES_FROM_LOG_RECORDS)
                    .await?
                    .iter()
                    .filter_map(|r| match r {
                        Record::Event(e) => Some(Arc::from(e.stream.as_str())),
                        Record::Epoch(_) => None,
                    })
                    .collect(),
            };
            if !names.is_empty() {
                return Ok(names);
            }
        }
    }

    /// Completes once records past the cursor are committed.
    pub async fn wait(&self) {
        let pos = self.pos;
        self.store.committed.wait_until(|c| c > pos).await;
    }
}

/// Up to `max` published records from `from`, within the batch byte bound, and where the next
/// starts.
fn read_batch(store: &Store, from: u64, max: usize) -> Result<(Vec<Record>, u64), StorageError> {
    let mut scan = store.log.scan(from).until(store.committed.get());
    let mut out = Vec::new();
    while out.len() < max && scan.position() - from < FOLLOW_BATCH_BYTES {
        match scan.next() {
            Some(r) => out.push(r?),
            None => break,
        }
    }
    Ok((out, scan.position()))
}
