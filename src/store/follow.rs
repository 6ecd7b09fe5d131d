//! The follow feed: a cursor over committed records in log order ([`Store::follow`]).
//!
//! A cursor reads the log's history from its position and then waits for new commits. It pulls:
//! each call reads at most the records and bytes asked for, so a slow consumer holds no more
//! than its last batch and the store keeps nothing on its behalf beyond the committed position
//! it waits on. Long polls, the user cache and, in the cluster, replication, subscriptions and
//! projections consume committed records this way.
//!
//! Invariants: a cursor never yields a record past the committed position; records come in log
//! order, each once; epoch records are yielded too (replication needs them; most consumers skip
//! them).

use std::sync::Arc;

use super::{StorageError, Store};
use crate::log::record::Record;

/// Frame bytes one batch of a cursor holds at most (a single larger record still comes alone).
pub const FOLLOW_BATCH_BYTES: u64 = 4 * 1024 * 1024;

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

    /// A cursor from the committed end: only records committed from now on.
    pub fn follow_new(self: &Arc<Self>) -> Follow {
        Follow { store: self.clone(), pos: self.log.committed() }
    }
}

impl Follow {
    /// Where the next record will come from.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Whether records past the cursor are committed now.
    pub fn has_more(&self) -> bool {
        self.pos < self.store.log.committed()
    }

    /// Reads up to `max` committed records (and about [`FOLLOW_BATCH_BYTES`]) past the cursor,
    /// without waiting: empty when there are none yet. Blocking: it reads the log.
    pub fn read_now(&mut self, max: usize) -> Result<Vec<Record>, StorageError> {
        let (records, next) = read_batch(&self.store, self.pos, max)?;
        self.pos = next;
        Ok(records)
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

    /// Completes once records past the cursor are committed.
    pub async fn wait(&self) {
        let pos = self.pos;
        self.store.committed.wait_until(|c| c > pos).await;
    }
}

/// Up to `max` records from `from`, within the batch byte bound, and where the next starts.
fn read_batch(store: &Store, from: u64, max: usize) -> Result<(Vec<Record>, u64), StorageError> {
    let mut scan = store.log.scan(from);
    let mut out = Vec::new();
    while out.len() < max && scan.position() - from < FOLLOW_BATCH_BYTES {
        match scan.next() {
            Some(r) => out.push(r?),
            None => break,
        }
    }
    Ok((out, scan.position()))
}
