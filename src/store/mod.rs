//! The event store: streams on top of the log and the index.
//!
//! Writes go through one group-commit pipeline. A caller of [`Store::write`] queues its operation;
//! the first caller to find no leader becomes the leader, takes every queued operation (up to a
//! byte bound), decides each one with [`engine`] against the stream states as they will be after
//! the operations before it in the group, stages the records, commits them with one set of syncs
//! ([`LogWriter::commit`]), applies them to the index and caches, and answers everyone. It then
//! hands leadership to the next waiting caller. A batch append is one operation, so it is atomic.
//!
//! Reads go to the index for candidate positions, read records from the log (every record's
//! checksum and position are checked), keep those of the right stream (hash collisions) and apply
//! the visibility window of the stream's metadata.
//!
//! Invariants: the stream-state cache only ever holds committed states; readers never see records
//! past the log's committed end; once the log is poisoned every write fails.

pub mod engine;
pub mod metadata;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use self::engine::{Check, StreamState, Window, TOMBSTONE};
use self::metadata::StreamMetadata;
use crate::env::Env;
use crate::index::{Entry, Index, IndexConfig, IndexError};
use crate::log::record::{self, flags, EpochRecord, EventFrame, EventRecord, Record};
use crate::log::{Log, LogConfig, LogError, LogWriter, RecoveryReport};

pub use engine::{ANY, NO_STREAM, STREAM_EXISTS};

/// The stream of scavenge points.
pub const SCAVENGE_POINTS: &str = "$scavengePoints";

/// Configuration of a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// `db/`.
    pub db_dir: PathBuf,
    /// `index/`.
    pub index_dir: PathBuf,
    /// Data bytes per chunk.
    pub chunk_size: u64,
    /// Largest event (data + metadata) accepted, in bytes.
    pub max_event_bytes: usize,
    /// Memtable entries before a flush.
    pub memtable_max: usize,
    /// Index tables before an automatic merge.
    pub max_index_tables: usize,
    /// Stream existence filter size in bytes.
    pub existence_filter_bytes: u64,
    /// Stream hash mask (tests only).
    pub hash_mask: u64,
    /// Stream states cached.
    pub stream_cache_capacity: usize,
    /// Event ids remembered for idempotent retries with `-2`/`-4`.
    pub recent_ids_capacity: usize,
    /// Bytes staged per group commit at most (a single larger operation still goes alone).
    pub group_bytes_max: usize,
}

impl StoreConfig {
    /// Production defaults under `dir` (`dir/` for chunks, `dir/index` for the index).
    pub fn new(dir: impl Into<PathBuf>) -> StoreConfig {
        let dir = dir.into();
        StoreConfig {
            index_dir: dir.join("index"),
            db_dir: dir,
            chunk_size: crate::log::DEFAULT_CHUNK_SIZE,
            max_event_bytes: 16 * 1024 * 1024,
            memtable_max: 1_000_000,
            max_index_tables: 4,
            existence_filter_bytes: 16 * 1024 * 1024,
            hash_mask: u64::MAX,
            stream_cache_capacity: 100_000,
            recent_ids_capacity: 100_000,
            group_bytes_max: 4 * 1024 * 1024,
        }
    }
}

/// A storage failure, as reported to clients.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    /// No space left.
    #[error("disk full: {0}")]
    DiskFull(String),
    /// Writes are refused after an earlier failure.
    #[error("the node is read-only after a storage failure: {0}")]
    ReadOnly(String),
    /// Committed data failed verification.
    #[error("corruption detected: {0}")]
    Corrupt(String),
    /// Other I/O failure.
    #[error("I/O error: {0}")]
    Io(String),
}

impl From<LogError> for StorageError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::DiskFull { .. } => StorageError::DiskFull(e.to_string()),
            LogError::Poisoned => StorageError::ReadOnly(e.to_string()),
            LogError::Corrupt { .. } => StorageError::Corrupt(e.to_string()),
            LogError::Io { .. }
            | LogError::OutOfRange(_)
            | LogError::RecordTooLarge { .. }
            | LogError::Invalid(_) => StorageError::Io(e.to_string()),
        }
    }
}

impl From<IndexError> for StorageError {
    fn from(e: IndexError) -> Self {
        match e {
            IndexError::Table(crate::index::ptable::TableError::Corrupt { .. }) => {
                StorageError::Corrupt(e.to_string())
            }
            _ => StorageError::Io(e.to_string()),
        }
    }
}

/// Why a write was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// The expected version did not match.
    #[error("wrong expected version (current version {current})")]
    WrongExpectedVersion {
        /// The stream's current version.
        current: i64,
    },
    /// The stream is deleted (hard, or soft for `-4`).
    #[error("stream deleted")]
    StreamDeleted,
    /// Bad stream name.
    #[error("invalid stream name: {0}")]
    InvalidStreamName(&'static str),
    /// An event too large.
    #[error("event of {size} bytes exceeds the limit of {max} bytes")]
    EventTooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// Other invalid event content.
    #[error("invalid event: {0}")]
    InvalidEvent(String),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why a read failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The stream does not exist (or is soft-deleted).
    #[error("stream not found")]
    NoStream,
    /// The stream was hard-deleted.
    #[error("stream deleted")]
    StreamDeleted,
    /// A `$all` position that is not the start of a record.
    #[error("invalid position {0}")]
    InvalidPosition(u64),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// An event to append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    /// Event id (UUID bytes).
    pub id: [u8; 16],
    /// Event type.
    pub event_type: String,
    /// Data.
    pub data: Bytes,
    /// Metadata.
    pub metadata: Bytes,
    /// Whether data and metadata are JSON.
    pub is_json: bool,
}

/// A write operation.
#[derive(Clone, Debug)]
pub enum WriteOp {
    /// Append events atomically.
    Append {
        /// Stream.
        stream: String,
        /// Expected version.
        expected: i64,
        /// Events.
        events: Vec<NewEvent>,
    },
    /// Write a scavenge point (`$scavengePoint` in `$scavengePoints`) and complete the chunk
    /// after it.
    ScavengePoint {
        /// Weight a chunk must exceed to be executed (stored in the point).
        threshold: i64,
    },
    /// Delete a stream.
    Delete {
        /// Stream.
        stream: String,
        /// Expected version.
        expected: i64,
        /// Tombstone (true) or `$tb` metadata (false).
        hard: bool,
    },
}

/// A successful write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteResult {
    /// Number of the first event (for a delete: the tombstone or metadata event).
    pub first_event_number: i64,
    /// Number of the last event.
    pub last_event_number: i64,
    /// Log position of the first record written (`None` when nothing was written: idempotent).
    pub position: Option<u64>,
    /// Log position after the write.
    pub commit_position: u64,
}

impl WriteResult {
    /// One record `n` written at `pos` (the commit position is filled in at commit).
    fn single(n: i64, pos: u64) -> WriteResult {
        WriteResult { first_event_number: n, last_event_number: n, position: Some(pos), commit_position: 0 }
    }
}

/// A stored event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedEvent {
    /// Stream.
    pub stream: String,
    /// Event number.
    pub event_number: i64,
    /// Event id.
    pub id: [u8; 16],
    /// Event type.
    pub event_type: String,
    /// Data.
    pub data: Bytes,
    /// Metadata.
    pub metadata: Bytes,
    /// JSON flag.
    pub is_json: bool,
    /// Redacted flag.
    pub is_redacted: bool,
    /// Commit time, µs since the epoch.
    pub timestamp_us: i64,
    /// Log position.
    pub position: u64,
}

impl From<EventRecord> for RecordedEvent {
    fn from(r: EventRecord) -> Self {
        RecordedEvent {
            is_json: r.is_json(),
            is_redacted: r.flags & flags::IS_REDACTED != 0,
            stream: r.stream,
            event_number: r.event_number,
            id: r.event_id,
            event_type: r.event_type,
            data: r.data,
            metadata: r.metadata,
            timestamp_us: r.timestamp_us,
            position: r.log_position,
        }
    }
}

/// An event as read, with the link that led to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedEvent {
    /// The event (the link target when a link was resolved).
    pub event: RecordedEvent,
    /// The link event, when `event` was reached through one.
    pub link: Option<RecordedEvent>,
}

impl ResolvedEvent {
    /// The event that sits in the stream that was read (the link, if any).
    pub fn original(&self) -> &RecordedEvent {
        self.link.as_ref().unwrap_or(&self.event)
    }
}

/// A page of a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSlice {
    /// Events in read order.
    pub events: Vec<ResolvedEvent>,
    /// Where the next page starts.
    pub next_event_number: i64,
    /// The stream's raw last event number.
    pub last_event_number: i64,
    /// Whether no further event exists in the read direction.
    pub is_end_of_stream: bool,
}

/// A page of `$all`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllSlice {
    /// Events in read order.
    pub events: Vec<ResolvedEvent>,
    /// Position to continue from.
    pub next_position: u64,
    /// Whether the read reached the end (forward) or start (backward) of the log.
    pub is_end: bool,
}

/// Writer figures for `/stats` (`es.writer`).
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Group commits done.
    pub flushes: AtomicU64,
    /// Operations in the last group.
    pub last_flush_size: AtomicU64,
    /// Sum of group sizes.
    pub total_flush_size: AtomicU64,
    /// Largest group.
    pub max_flush_size: AtomicU64,
    /// Duration of the last commit (µs).
    pub last_flush_us: AtomicU64,
    /// Sum of commit durations (µs).
    pub total_flush_us: AtomicU64,
    /// Longest commit (µs).
    pub max_flush_us: AtomicU64,
    /// Nanoseconds groups spent being staged: deciding every operation against the stream
    /// states and encoding its records (the log's [`CommitStats`](crate::log::CommitStats) has
    /// the data and checkpoint phases that follow).
    pub total_stage_ns: AtomicU64,
    /// Nanoseconds groups spent being published once durable: the index, the caches, the
    /// committed position and every caller's answer.
    pub total_publish_ns: AtomicU64,
    /// Operations waiting for a leader right now.
    pub queued: AtomicU64,
    /// Records read from the log.
    pub records_read: AtomicU64,
    /// Stream-state cache hits.
    pub cache_hits: AtomicU64,
    /// Stream-state cache misses.
    pub cache_misses: AtomicU64,
    /// Reads that met a colliding stream hash.
    pub hash_collisions: AtomicU64,
}

enum Reply {
    Lead,
    Done(Result<WriteResult, WriteError>),
}

/// How a queued operation's caller waits: a thread blocked in [`Store::write`] (which may be
/// asked to lead), or a task awaiting [`Store::write_async`] (which never leads).
enum Waiter {
    Thread(SyncSender<Reply>),
    Task(tokio::sync::oneshot::Sender<Result<WriteResult, WriteError>>),
}

impl Waiter {
    fn done(self, r: Result<WriteResult, WriteError>) {
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

struct Pending {
    op: WriteOp,
    bytes: usize,
    tx: Waiter,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    leader: bool,
}

/// Where a recently written event id went: its stream and event number.
type RecentId = (Arc<str>, i64);

/// A bounded map with first-in-first-out eviction.
struct Fifo<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Fifo<K, V> {
    fn new(cap: usize) -> Self {
        Fifo { map: HashMap::new(), order: VecDeque::new(), cap: cap.max(1) }
    }
    fn get<Q: std::hash::Hash + Eq + ?Sized>(&self, k: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
    {
        self.map.get(k)
    }
    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > self.cap {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }
}

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
    /// Committed stream states, with a generation that every writer update bumps, so a reader
    /// that computed a state while a write committed does not cache a stale one.
    streams: Mutex<(u64, Fifo<String, StreamState>)>,
    recent: Mutex<Fifo<[u8; 16], RecentId>>,
    committed: tokio::sync::watch::Sender<u64>,
    /// Writer statistics.
    pub stats: WriterStats,
    /// What recovery did at open.
    pub recovery: RecoveryReport,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a staged write leaves a stream.
struct Staged {
    results: Vec<Option<Result<WriteResult, WriteError>>>,
    entries: Vec<Entry>,
    names: Vec<Arc<str>>,
    recent: Vec<([u8; 16], Arc<str>, i64)>,
}

impl Store {
    /// Opens (or creates) a store: recovers the log, opens the index and replays the log past the
    /// index checkpoint, then writes an epoch record.
    pub fn open(env: &Env, cfg: StoreConfig) -> Result<Arc<Store>, StorageError> {
        let (log, writer, recovery) =
            Log::open(env, LogConfig { dir: cfg.db_dir.clone(), chunk_size: cfg.chunk_size })?;
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
        // Rebuild the index past its checkpoint. This verifies every record of the tail: a checksum
        // failure below the writer checkpoint is corruption and stops the start.
        let from = index.replay_from();
        let mut entries: Vec<Entry> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        let mut scan = log.scan(from);
        while let Some(rec) = scan.next() {
            if let Record::Event(e) = rec? {
                entries.push(Entry {
                    hash: index.hash(&e.stream),
                    event_number: e.event_number,
                    position: e.log_position,
                });
                names.push(e.stream);
            }
            if entries.len() >= 65_536 {
                index.add(&entries, &names.iter().map(String::as_str).collect::<Vec<_>>(), scan.position());
                entries.clear();
                names.clear();
                index.maybe_flush();
            }
        }
        index.add(&entries, &names.iter().map(String::as_str).collect::<Vec<_>>(), log.committed());
        index.maybe_flush();
        tracing::info!(replayed_from = from, end = log.committed(), "index rebuilt from the log tail");
        let (committed, _) = tokio::sync::watch::channel(log.committed());
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
            leader_lane: env.rt.lane("annal-writer"),
            committed,
            stats: WriterStats::default(),
            recovery,
        });
        store.write_epoch()?;
        Ok(store)
    }

    fn write_epoch(&self) -> Result<(), StorageError> {
        let mut w = lock(&self.writer);
        let cps = &self.log.checkpoints;
        let prev = cps.epoch.read();
        let number = if prev >= 0 {
            match self.log.read(prev as u64)? {
                Record::Epoch(e) => e.epoch_number + 1,
                Record::Event(_) => 0,
            }
        } else {
            0
        };
        let rec = EpochRecord {
            log_position: 0,
            epoch_number: number,
            epoch_id: *self.env.new_uuid().as_bytes(),
            prev_epoch_position: prev,
            timestamp_us: self.env.clock.wall_micros(),
            leader_id: [0; 16],
        };
        let mut probe = Vec::new();
        record::encode_epoch(&rec, &mut probe);
        let pos = w.append(probe.len() as u64, |pos, out| {
            record::encode_epoch(&EpochRecord { log_position: pos, ..rec.clone() }, out)
        })?;
        w.commit()?;
        cps.epoch.write_durable(pos as i64).map_err(|e| StorageError::Io(e.to_string()))?;
        self.committed.send_replace(self.log.committed());
        Ok(())
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

    /// Watches the committed log position (long polls wait on it).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.committed.subscribe()
    }

    // ----------------------------------------------------------------------------------------
    // Writes

    /// Performs a write through the group-commit pipeline. Blocks the calling thread until the
    /// write is durable (or refused); async callers go through [`Env::blocking`].
    pub fn write(&self, op: WriteOp) -> Result<WriteResult, WriteError> {
        let (tx, rx) = sync_channel(2);
        if self.enqueue(op, Waiter::Thread(tx)) {
            self.lead(false);
        }
        loop {
            match rx.recv() {
                Ok(Reply::Lead) => self.lead(false),
                Ok(Reply::Done(r)) => return r,
                Err(_) => return Err(StorageError::Io("the writer stopped".into()).into()),
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
        let r = rx.await.unwrap_or_else(|_| Err(StorageError::Io("the writer stopped".into()).into()));
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
        let (results, staged, committed) = self.commit_group(&ops);
        let took = (clock.monotonic() - started).as_micros() as u64;
        let s = &self.stats;
        s.flushes.fetch_add(1, Ordering::Relaxed);
        s.last_flush_size.store(batch.len() as u64, Ordering::Relaxed);
        s.total_flush_size.fetch_add(batch.len() as u64, Ordering::Relaxed);
        s.max_flush_size.fetch_max(batch.len() as u64, Ordering::Relaxed);
        s.last_flush_us.store(took, Ordering::Relaxed);
        s.total_flush_us.fetch_add(took, Ordering::Relaxed);
        s.max_flush_us.fetch_max(took, Ordering::Relaxed);
        for (p, r) in batch.into_iter().zip(results) {
            p.tx.done(r);
        }
        crate::env::add_elapsed(&s.total_stage_ns, started, staged);
        crate::env::add_elapsed(&s.total_publish_ns, committed, clock.monotonic());
    }

    /// Stages, commits and publishes one group; also returns when staging ended and when the
    /// commit did (monotonic), for the writer's phase statistics.
    fn commit_group(&self, ops: &[&WriteOp]) -> (Vec<Result<WriteResult, WriteError>>, Duration, Duration) {
        let mut w = lock(&self.writer);
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
        let commit = if staged_any || self.log.is_poisoned() {
            w.commit().map_err(StorageError::from)
        } else {
            Ok(self.log.committed())
        };
        drop(w);
        let committed_at = self.env.clock.monotonic();
        let mut out = Vec::with_capacity(ops.len());
        match commit {
            Ok(pos) => {
                let names: Vec<&str> = staged.names.iter().map(|n| &**n).collect();
                self.index.add(&staged.entries, &names, pos);
                {
                    let mut cache = lock(&self.streams);
                    cache.0 += 1;
                    for (name, st) in overlay {
                        cache.1.insert(name, st);
                    }
                }
                {
                    let mut recent = lock(&self.recent);
                    for (id, stream, n) in staged.recent {
                        recent.insert(id, (stream, n));
                    }
                }
                self.committed.send_replace(pos);
                for r in staged
                    .results
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
                self.index.maybe_flush();
            }
            Err(e) => {
                // Nothing of this group is acknowledged; rejections stay rejections.
                for r in staged.results.into_iter().flatten() {
                    out.push(match r {
                        Err(WriteError::Storage(s)) => Err(WriteError::Storage(s)),
                        Err(other) => Err(other),
                        Ok(_) => Err(WriteError::Storage(e.clone())),
                    });
                }
                out.resize_with(ops.len(), || Err(WriteError::Storage(e.clone())));
            }
        }
        (out, staged_at, committed_at)
    }

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

    fn stage(
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

    // ----------------------------------------------------------------------------------------
    // Stream state

    /// `f` of the committed state of a stream, if cached (no storage read, no copy of the state).
    pub fn with_cached_state<R>(&self, name: &str, f: impl FnOnce(&StreamState) -> R) -> Option<R> {
        let cache = lock(&self.streams);
        let r = f(cache.1.get(name)?);
        self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
        Some(r)
    }

    /// The committed state of a stream (cached).
    pub fn stream_state(&self, name: &str) -> Result<StreamState, StorageError> {
        let generation = {
            let cache = lock(&self.streams);
            if let Some(s) = cache.1.get(name) {
                self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
                return Ok(s.clone());
            }
            cache.0
        };
        self.stats.cache_misses.fetch_add(1, Ordering::Relaxed);
        let last = self.last_event_number(name)?;
        let mut st = StreamState { last, meta: StreamMetadata::default(), meta_last: -1 };
        if engine::meta_target(name).is_none() {
            let meta = format!("$${name}");
            st.meta_last = self.last_event_number(&meta)?;
            if st.meta_last >= 0 {
                if let Some(e) = self.event_at(&meta, st.meta_last)? {
                    st.meta = if e.is_json() && !e.data.is_empty() {
                        StreamMetadata::parse(&e.data)
                    } else {
                        StreamMetadata { raw: Some(e.data.clone()), ..StreamMetadata::default() }
                    };
                }
            }
        }
        let mut cache = lock(&self.streams);
        if cache.0 == generation {
            cache.1.insert(name.to_owned(), st.clone());
        }
        Ok(st)
    }

    /// Raw last event number of `name`: -1 if never written, `i64::MAX` if hard-deleted.
    fn last_event_number(&self, name: &str) -> Result<i64, StorageError> {
        self.last_event_before(name, u64::MAX)
    }

    /// Raw last event number of `name` among records before log position `before` (the last
    /// event before a scavenge point); -1 if none.
    pub fn last_event_before(&self, name: &str, before: u64) -> Result<i64, StorageError> {
        const PAGE: usize = 16;
        if !self.index.may_exist(name) {
            return Ok(-1);
        }
        let hash = self.index.hash(name);
        let mut hi = i64::MAX;
        loop {
            let cands = self.index.range_desc(hash, 0, hi, PAGE)?;
            for c in cands.iter().filter(|c| c.position < before) {
                if let Some(e) = self.record_of(c.position, name)? {
                    return Ok(e.event_number);
                }
            }
            let Some(lowest) = cands.last().map(|c| c.event_number) else { return Ok(-1) };
            if cands.len() < PAGE {
                return Ok(-1);
            }
            // Every entry above `lowest` belonged to colliding streams; the page may have cut
            // through the entries at `lowest`, so check those in full before going below.
            for c in self.index.range(hash, lowest, lowest)?.into_iter().filter(|c| c.position < before) {
                if let Some(e) = self.record_of(c.position, name)? {
                    return Ok(e.event_number);
                }
            }
            if lowest <= 0 {
                return Ok(-1);
            }
            hi = lowest - 1;
        }
    }

    /// The event record at `pos` if it belongs to `stream`.
    fn record_of(&self, pos: u64, stream: &str) -> Result<Option<EventRecord>, StorageError> {
        self.stats.records_read.fetch_add(1, Ordering::Relaxed);
        let rec = match self.log.read(pos) {
            Ok(r) => r,
            // Removed by a scavenge; the index entry goes at the end of that scavenge.
            Err(LogError::OutOfRange(_)) if pos < self.log.committed() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match rec {
            Record::Event(e) if e.stream == stream => Ok(Some(e)),
            _ => {
                self.stats.hash_collisions.fetch_add(1, Ordering::Relaxed);
                Ok(None)
            }
        }
    }

    /// The raw event `n` of `stream` (no visibility rules).
    fn event_at(&self, stream: &str, n: i64) -> Result<Option<EventRecord>, StorageError> {
        for c in self.index.range(self.index.hash(stream), n, n)? {
            if let Some(e) = self.record_of(c.position, stream)? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    /// Ids of the raw events `from .. from + count` (None where an event is missing).
    fn ids_at(&self, stream: &str, from: i64, count: usize) -> Result<Vec<Option<[u8; 16]>>, StorageError> {
        let to = from.saturating_add(count as i64 - 1);
        let mut out = vec![None; count];
        for c in self.index.range(self.index.hash(stream), from, to)? {
            if let Some(e) = self.record_of(c.position, stream)? {
                out[(e.event_number - from) as usize] = Some(e.event_id);
            }
        }
        Ok(out)
    }

    // ----------------------------------------------------------------------------------------
    // Reads

    /// The state of a stream for reading, with its window; errors for missing/deleted streams.
    fn readable(&self, stream: &str, now_us: i64) -> Result<(StreamState, Window, bool), ReadError> {
        let state = self.stream_state(stream)?;
        let meta_of = engine::meta_target(stream);
        if let Some(t) = meta_of {
            if self.stream_state(t)?.is_tombstoned() {
                return Err(ReadError::StreamDeleted);
            }
        }
        if state.is_tombstoned() {
            return Err(ReadError::StreamDeleted);
        }
        if state.last < 0 || (meta_of.is_none() && state.meta.is_soft_deleted()) {
            return Err(ReadError::NoStream);
        }
        let w = Window::of(&state, meta_of.is_some(), now_us);
        Ok((state, w, meta_of.is_some()))
    }

    /// Visible events of `stream` with numbers in `lo..=hi`, ascending, at most `limit`.
    fn visible_range(
        &self,
        stream: &str,
        w: &Window,
        lo: i64,
        hi: i64,
        limit: usize,
        descending: bool,
    ) -> Result<Vec<EventRecord>, StorageError> {
        let hash = self.index.hash(stream);
        let lo = lo.max(w.min);
        let hi = hi.min(w.max);
        let mut out = Vec::new();
        if lo > hi || limit == 0 {
            return Ok(out);
        }
        // Walk the number range in windows of `limit`, so expired events are skipped.
        let step = (limit as i64).clamp(1, 4096);
        let mut cursor = if descending { hi } else { lo };
        loop {
            let (a, b) = if descending {
                (cursor.saturating_sub(step - 1).max(lo), cursor)
            } else {
                (cursor, cursor.saturating_add(step - 1).min(hi))
            };
            let cands = self.index.range(hash, a, b)?;
            let positions: Vec<u64> = cands.iter().map(|c| c.position).collect();
            self.stats.records_read.fetch_add(positions.len() as u64, Ordering::Relaxed);
            let mut recs: Vec<EventRecord> = self
                .log
                .read_many(&positions)?
                .into_iter()
                .filter_map(|r| match r {
                    Some(Record::Event(e)) if e.stream == stream => Some(e),
                    None => None,
                    _ => {
                        self.stats.hash_collisions.fetch_add(1, Ordering::Relaxed);
                        None
                    }
                })
                .collect();
            if descending {
                recs.reverse();
            }
            for e in recs {
                if w.shows(e.event_number, e.timestamp_us) {
                    out.push(e);
                    if out.len() == limit {
                        return Ok(out);
                    }
                }
            }
            if descending {
                if a <= lo {
                    return Ok(out);
                }
                cursor = a - 1;
            } else {
                if b >= hi {
                    return Ok(out);
                }
                cursor = b + 1;
            }
        }
    }

    fn resolve(
        &self,
        e: EventRecord,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<ResolvedEvent, StorageError> {
        let ev = RecordedEvent::from(e);
        if !resolve_links || ev.event_type != "$>" {
            return Ok(ResolvedEvent { event: ev, link: None });
        }
        let target = std::str::from_utf8(&ev.data).ok().and_then(|s| {
            let (n, stream) = s.split_once('@')?;
            let n: i64 = n.parse().ok()?;
            (n >= 0).then(|| (n, stream.to_owned()))
        });
        if let Some((n, stream)) = target {
            match self.read_event(&stream, n, false, now_us) {
                Ok(Some(t)) => return Ok(ResolvedEvent { event: t.event, link: Some(ev) }),
                Ok(None)
                | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {}
                Err(ReadError::Storage(s)) => return Err(s),
            }
        }
        Ok(ResolvedEvent { event: ev, link: None })
    }

    /// Reads event `n` (`-1`: the last visible one).
    pub fn read_event(
        &self,
        stream: &str,
        n: i64,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<Option<ResolvedEvent>, ReadError> {
        let (_, w, _) = self.readable(stream, now_us)?;
        let found = if n == -1 {
            self.visible_range(stream, &w, w.min, w.max, 1, true)?.pop()
        } else if n < 0 {
            None
        } else {
            self.visible_range(stream, &w, n, n, 1, false)?.pop()
        };
        Ok(match found {
            Some(e) => Some(self.resolve(e, resolve_links, now_us)?),
            None => None,
        })
    }

    /// Reads forward from `from`, at most `count` events.
    pub fn read_forward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (state, w, _) = self.readable(stream, now_us)?;
        let recs = self.visible_range(stream, &w, from.max(0), w.max, count, false)?;
        let next = recs.last().map(|e| e.event_number + 1).unwrap_or(from);
        let events = recs
            .into_iter()
            .map(|e| self.resolve(e, resolve_links, now_us))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StreamSlice {
            events,
            next_event_number: next,
            last_event_number: state.last,
            is_end_of_stream: next > state.last,
        })
    }

    /// Reads backward from `from` (`-1`: the head), at most `count` events.
    pub fn read_backward(
        &self,
        stream: &str,
        from: i64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<StreamSlice, ReadError> {
        let (state, w, _) = self.readable(stream, now_us)?;
        let from = if from == -1 { state.last } else { from };
        let recs =
            if from < 0 { Vec::new() } else { self.visible_range(stream, &w, w.min, from, count, true)? };
        let next = recs.last().map(|e| e.event_number - 1).unwrap_or(-1);
        let is_end =
            recs.is_empty() || next < 0 || self.visible_range(stream, &w, w.min, next, 1, true)?.is_empty();
        let events = recs
            .into_iter()
            .map(|e| self.resolve(e, resolve_links, now_us))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StreamSlice {
            events,
            next_event_number: next,
            last_event_number: state.last,
            is_end_of_stream: is_end,
        })
    }

    /// Reads `$all` forward from `position` (a record start), at most `count` events. Links are
    /// resolved when `resolve_links`.
    pub fn read_all_forward(
        &self,
        position: u64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<AllSlice, ReadError> {
        let mut scan = self.log.scan(position);
        let mut events = Vec::new();
        let mut first = true;
        while events.len() < count {
            match scan.next() {
                None => break,
                Some(Ok(Record::Event(e))) => events.push(self.resolve(e, resolve_links, now_us)?),
                Some(Ok(Record::Epoch(_))) => {}
                Some(Err(LogError::Corrupt { .. } | LogError::OutOfRange(_))) if first => {
                    return Err(ReadError::InvalidPosition(position))
                }
                Some(Err(e)) => return Err(StorageError::from(e).into()),
            }
            first = false;
        }
        let next_position = scan.position();
        Ok(AllSlice { events, next_position, is_end: next_position >= self.log.committed() })
    }

    /// Reads `$all` backward from before `position` (`u64::MAX`: the end), at most `count` events.
    pub fn read_all_backward(
        &self,
        position: u64,
        count: usize,
        resolve_links: bool,
        now_us: i64,
    ) -> Result<AllSlice, ReadError> {
        let mut events = Vec::new();
        let mut pos = position.min(self.log.committed());
        let mut first = true;
        while events.len() < count && pos > 0 {
            let (recs, next) = match self.log.read_backward(pos, count - events.len()) {
                Ok(x) => x,
                Err(LogError::Corrupt { .. } | LogError::OutOfRange(_)) if first => {
                    return Err(ReadError::InvalidPosition(position))
                }
                Err(e) => return Err(StorageError::from(e).into()),
            };
            first = false;
            if recs.is_empty() {
                break;
            }
            for r in recs {
                if let Record::Event(e) = r {
                    events.push(self.resolve(e, resolve_links, now_us)?);
                }
            }
            pos = next;
        }
        Ok(AllSlice { events, next_position: pos, is_end: pos == 0 })
    }

    /// Metadata of a stream (parsed; default when none).
    pub fn metadata(&self, stream: &str) -> Result<StreamMetadata, StorageError> {
        Ok(self.stream_state(stream)?.meta)
    }

    /// Flushes what is not yet durable outside the write path (chaser checkpoint, index) and waits
    /// for background index work. Call before shutdown.
    pub fn close(&self) -> Result<(), StorageError> {
        let _w = lock(&self.writer);
        self.log.flush_chaser()?;
        self.index.quiesce()?;
        Ok(())
    }
}
