//! The event store: streams on top of the log and the index.
//!
//! Writes go through one group-commit pipeline ([`commit`]): callers queue operations, a leader
//! takes a group, [`engine`] decides each operation against the stream states as they will be
//! after the operations before it ([`stage`] turns the decisions into encoded records), the group
//! is made durable with one set of syncs, and then published. A batch append is one operation, so
//! it is atomic.
//!
//! Publishing ([`publish`]) is one path for every committed record, whoever wrote it: the local
//! commit, the start-up replay of the log tail and (in a cluster) a follower applying the leader's
//! records all go through [`Store::apply_committed`], the only code that moves the committed
//! position and updates the index and the caches. Consumers of committed records (long polls,
//! the user cache, later subscriptions, projections and replication) read them in log order with
//! a [`follow`] cursor, which reads history first and then waits for new commits; it pulls, so a
//! slow consumer holds no more than the batch it asked for.
//!
//! Reads ([`read`]) go to the index for candidate positions, read records from the log (every
//! record's checksum and position are checked), keep those of the right stream (hash collisions)
//! and apply the visibility window of the stream's metadata. Stream states are cached
//! ([`cache`]).
//!
//! Epochs are the leadership's business: [`Store::recover`] opens the store without writing
//! anything; whoever leads writes an epoch record with [`Store::start_epoch`] ([`Store::open`] is
//! recover plus a single node's epoch).
//!
//! Invariants: the stream-state cache only ever holds committed states; readers never see records
//! past the log's committed position; once the log is poisoned every write fails.

mod cache;
mod commit;
pub mod engine;
pub mod follow;
pub mod metadata;
mod pipeline;
pub mod publish;
mod read;
mod replicated;
mod stage;
mod types;

use std::sync::{Arc, Mutex};

use self::cache::{Fifo, RecentId};
use self::commit::Queue;
use self::engine::StreamState;
use crate::env::{Env, Watermark};
use crate::index::{Index, IndexConfig};
use crate::log::record::{EpochRecord, Record};
use crate::log::{Log, LogConfig, LogWriter, RecoveryReport};

pub use engine::{ANY, NO_STREAM, STREAM_EXISTS};
pub use follow::Follow;
pub use publish::Committed;
pub use replicated::StagedReplica;
pub use types::*;

/// Log records replayed into the index per published batch at start-up.
const REPLAY_BATCH_RECORDS: usize = 65_536;

/// The store.
pub struct Store {
    /// This store, for the leaders [`Store::write_async`] starts on the writer's lane.
    me: std::sync::Weak<Store>,
    env: Env,
    cfg: StoreConfig,
    log: Arc<Log>,
    index: Arc<Index>,
    writer: Mutex<LogWriter>,
    queue: Mutex<Queue>,
    /// Where dedicated leaders run: one thread that commits group after group.
    leader_lane: Box<dyn crate::env::Lane>,
    /// Where a single node's checkpoint stage runs, beside the leader ([`pipeline`]).
    checkpoint_lane: Box<dyn crate::env::Lane>,
    /// The figures of the writer's and the checkpoint's lanes, for metrics.
    pub lanes: [Arc<crate::metrics::lane::LaneStats>; 2],
    /// Committed stream states, with a generation that every published batch bumps, so a reader
    /// that computed a state while a batch was published does not cache a stale one.
    streams: Mutex<(u64, Fifo<String, StreamState>)>,
    recent: Mutex<Fifo<[u8; 16], RecentId>>,
    /// The committed position, for [`Follow`] cursors waiting for new commits.
    committed: Watermark,
    /// The durable end of the log, for a cluster's shell (raised after every flush).
    durable: Watermark,
    /// The end of a cluster leader's groups handed to the log's files, before their sync: its
    /// shell ships them to the followers while the leader syncs them ([`Store::written_watermark`]).
    written: Watermark,
    /// A cluster node's writes waiting for their quorum, and whether it takes writes.
    gate: Mutex<replicated::Gate>,
    /// A whole chunk being received from the leader: its range, the file being written, the
    /// epoch records seen in it.
    incoming: Mutex<Option<replicated::Incoming>>,
    /// Which streams recently published batches wrote, for cursors that need only that.
    summaries: Mutex<follow::Summaries>,
    /// Writer statistics.
    pub stats: WriterStats,
    /// What recovery did at open.
    pub recovery: RecoveryReport,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// Opens (or creates) a store as a single node does: [`Store::recover`], then a new epoch
    /// led by this node ([`Store::start_epoch`]).
    pub fn open(env: &Env, cfg: StoreConfig) -> Result<Arc<Store>, StorageError> {
        let store = Store::recover(env, cfg)?;
        store.start_epoch([0; 16])?;
        Ok(store)
    }

    /// Opens (or creates) a store without writing anything: recovers the log, opens the index and
    /// publishes the log past the index checkpoint (which verifies every record of that tail: a
    /// checksum failure below the writer checkpoint is corruption and stops the start).
    pub fn recover(env: &Env, cfg: StoreConfig) -> Result<Arc<Store>, StorageError> {
        let (log, writer, recovery) = Log::open(
            env,
            LogConfig {
                adopt_synced_tail: cfg.replicated,
                ..LogConfig::new(cfg.db_dir.clone(), cfg.chunk_size)
            },
        )?;
        let index = Index::open(
            env,
            IndexConfig {
                dir: cfg.index_dir.clone(),
                memtable_max: cfg.memtable_max.max(1),
                max_tables: cfg.max_index_tables.max(1),
                existence_filter_bytes: cfg.existence_filter_bytes,
                hash_mask: cfg.hash_mask,
            },
            log.committed(),
        )?;
        if cfg.replicated {
            // Publish no more than is known to be committed: the chaser follows the committed
            // position, and the index holds only committed records.
            let known = u64::try_from(log.checkpoints.chaser.read()).unwrap_or(0);
            log.set_replicated(known.max(index.replay_from()));
        }
        let committed = Watermark::new(log.committed());
        let durable = Watermark::new(log.durable());
        let written = Watermark::new(log.durable());
        let summaries = Mutex::new(follow::Summaries::new(log.committed()));
        let (leader_lane, writer_lane_stats) =
            crate::metrics::lane::metered(env, "writer", env.rt.lane("annal-writer"));
        let (checkpoint_lane, checkpoint_lane_stats) =
            crate::metrics::lane::metered(env, "checkpoint", env.rt.side_lane("annal-checkpoint"));
        let store = Arc::new_cyclic(|me| Store {
            me: me.clone(),
            env: env.clone(),
            streams: Mutex::new((0, Fifo::new(cfg.stream_cache_capacity))),
            recent: Mutex::new(Fifo::new(cfg.recent_ids_capacity)),
            cfg,
            log,
            index,
            writer: Mutex::new(writer),
            queue: Mutex::new(Queue::default()),
            leader_lane,
            checkpoint_lane,
            lanes: [writer_lane_stats, checkpoint_lane_stats],
            committed,
            durable,
            written,
            gate: Mutex::new(replicated::Gate::default()),
            incoming: Mutex::new(None),
            summaries,
            stats: WriterStats {
                group_size: crate::metrics::instruments::Histogram::new(
                    crate::metrics::instruments::GROUP_SIZE_BOUNDS,
                    1.0,
                ),
                ..WriterStats::default()
            },
            recovery,
        });
        store.replay()?;
        Ok(store)
    }

    /// Publishes the committed log past the index checkpoint (start-up).
    fn replay(&self) -> Result<(), StorageError> {
        let from = self.index.replay_from();
        let end = self.log.committed();
        let mut records = Vec::new();
        let mut scan = self.log.scan(from);
        while let Some(rec) = scan.next() {
            if let Record::Event(e) = rec? {
                records.push(e);
            }
            if records.len() >= REPLAY_BATCH_RECORDS {
                self.apply_committed(Committed::from_records(&self.index, &records, scan.position()));
                records.clear();
            }
        }
        self.apply_committed(Committed::from_records(&self.index, &records, end));
        tracing::info!(replayed_from = from, end, "index rebuilt from the log tail");
        Ok(())
    }

    /// Writes and commits an epoch record led by `leader_id` (the start of a leadership term),
    /// numbered after the last one, and points `epoch.chk` at it. Returns the record.
    pub fn start_epoch(&self, leader_id: [u8; 16]) -> Result<EpochRecord, StorageError> {
        let prev = self.log.checkpoints.epoch.read();
        let number = if prev >= 0 {
            match self.log.read(prev as u64)? {
                Record::Epoch(e) => e.epoch_number + 1,
                Record::Event(_) => 0,
            }
        } else {
            0
        };
        let (rec, end) = self.write_epoch(number as u64, leader_id)?;
        self.apply_committed(Committed::from_records(&self.index, &[], end));
        Ok(rec)
    }

    /// The durable end of the log, raised after every flush (a cluster's shell waits on it).
    pub fn durable_watermark(&self) -> &Watermark {
        &self.durable
    }

    /// The end of a cluster leader's groups written to the log's files and not necessarily
    /// synced yet: raised before the leader syncs a group, so its shell can ship the group to
    /// the followers meanwhile. Only groups that stay in the log are announced (a group the
    /// leader drops itself never is); the leader's own vote in the quorum is its
    /// [`durable_watermark`](Store::durable_watermark).
    pub fn written_watermark(&self) -> &Watermark {
        &self.written
    }

    /// The log.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// The index.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// The environment.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.cfg
    }

    /// Flushes what is not yet durable outside the write path (chaser checkpoint, index) and waits
    /// for background index work. Call before shutdown.
    pub fn close(&self) -> Result<(), StorageError> {
        if !self.cfg.replicated {
            self.drain_checkpoints();
        }
        let _w = lock(&self.writer);
        self.log.flush_chaser()?;
        self.index.quiesce()?;
        Ok(())
    }
}
