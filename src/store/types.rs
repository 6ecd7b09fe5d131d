//! The store's vocabulary: configuration, errors, operations, results and the records readers
//! get. No behaviour beyond conversions.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;

use bytes::Bytes;

use crate::index::IndexError;
use crate::log::record::{flags, EventRecord};
use crate::log::LogError;

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
    /// Part of a cluster: nothing is published before a quorum holds it ([`Store::release`]),
    /// and `chaser.chk` follows the committed position (so a restart publishes no more than was
    /// committed).
    pub replicated: bool,
    /// How long a replicated write waits for its quorum before it is answered with
    /// [`WriteError::CommitTimeout`] (it stays in the log and may still commit).
    pub commit_timeout: std::time::Duration,
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
            replicated: false,
            commit_timeout: std::time::Duration::from_secs(2),
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
            | LogError::Misplaced { .. }
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
    /// This cluster node does not lead (or no longer does): it takes no writes.
    #[error("this node is not the leader")]
    NotLeader,
    /// A quorum did not confirm the write in time. It stays in the log and may still commit;
    /// retrying with the same event ids is safe.
    #[error("the write was not confirmed by a quorum in time")]
    CommitTimeout,
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

impl NewEvent {
    /// An event the node writes itself (definitions, checkpoints, links), with a new id from `env`.
    pub fn fresh(
        env: &crate::env::Env,
        event_type: &str,
        data: Vec<u8>,
        metadata: Vec<u8>,
        is_json: bool,
    ) -> NewEvent {
        NewEvent {
            id: *env.new_uuid().as_bytes(),
            event_type: event_type.into(),
            data: Bytes::from(data),
            metadata: Bytes::from(metadata),
            is_json,
        }
    }
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

/// Writer figures for `/stats` (`es.writer`) and metrics.
#[derive(Default)]
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
    /// Group commit durations.
    pub flush_duration: crate::metrics::instruments::Histogram,
    /// Operations per group commit.
    pub group_size: crate::metrics::instruments::Histogram,
    /// Largest group recently (operations).
    pub flush_size_max: crate::metrics::instruments::RecentMax,
    /// Longest group commit recently (nanoseconds).
    pub flush_duration_max: crate::metrics::instruments::RecentMax,
}
