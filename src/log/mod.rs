//! The transaction log: chunk files in `db/`, the checkpoints, readers, and (in submodules) the
//! writer, recovery, scans and scavenged chunks.
//!
//! The log is a sequence of byte positions. Position `p` lives in logical chunk
//! `p / chunk_size` at offset `p % chunk_size` of that chunk's data. Records never span chunks: a
//! record that does not fit completes the chunk (its footer is written) and goes to the next one.
//!
//! Two ends: the durable end ([`Log::durable`], `writer.chk`) and the committed position readers
//! see ([`Log::committed`]). A single node moves both at each commit; a cluster's leader moves the
//! committed position only once a quorum holds the records, and a follower below it.
//!
//! Invariants:
//! - `writer.chk` names durable bytes: a flush syncs the data *and then* writes `writer.chk`.
//!   It is the end of the durable log, except on a cluster node's log
//!   ([`LogConfig::adopt_synced_tail`]): there the durable end may pass it by whole atomic
//!   writes whose data is synced, inside the chunk `writer.chk` points into, which recovery
//!   adopts (checksummed records at their positions, contiguous, up to the last one that closes
//!   an atomic write) and past which it zeroes the whole chunk. The committed position never
//!   passes the durable end.
//! - Readers never see past [`Log::committed`], so a half-written group commit is invisible.
//! - Every chunk below the writer's chunk is complete (has a footer), durably: a flush syncs the
//!   chunks it completed before `writer.chk` moves past them, and recovery syncs the one chunk
//!   that can end exactly at `writer.chk` with a footer no commit covered.
//! - Plain chunks carry ids derived from their number ([`chunk::plain_id`]), so a follower that
//!   writes the leader's records at the leader's positions has byte-identical chunk files.
//! - After a failed write or sync the log is poisoned: it refuses further writes, because the
//!   state of the file after a failed fsync is unknown (and retrying fsync can report success for
//!   data that never reached the disk).
//!
//! Modules: [`writer`] (the single writer: staging, flushing, following, online truncation),
//! [`recovery`] (start-up), [`scan`] (forward scans), [`scavenged`] (rewritten chunks), [`chunk`]
//! (file header and footer), [`record`] (record framing), [`checkpoint`] (the `.chk` files).

pub mod checkpoint;
pub mod chunk;
pub mod record;
mod recovery;
mod scan;
mod scavenged;
mod switch;
mod writer;

pub use scan::Scan;
pub use scavenged::ScavengedWriter;
pub use switch::{redact_chunk_bytes, Located, SwitchError};
pub use writer::LogWriter;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;

use self::checkpoint::Checkpoint;
use self::chunk::{ChunkHeader, HEADER_SIZE};
use self::record::{FrameError, Record};
use crate::env::{Env, File};

/// Default logical chunk size: 256 MiB of data per chunk file.
pub const DEFAULT_CHUNK_SIZE: u64 = 256 * 1024 * 1024;
/// Longest a cluster node that writes leaves `writer.chk` behind the records it adopted as
/// durable ([`Log::adopt_synced`]): each later flush of `writer.chk` is one sync less per write.
pub const ADOPTED_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(50);
/// Smallest chunk size accepted (tests use tiny chunks).
pub const MIN_CHUNK_SIZE: u64 = 4096;
/// Bytes read at once when scanning the log.
const SCAN_READ_BYTES: usize = 256 * 1024;
/// Bytes read at once when a single record is fetched (most records fit).
const POINT_READ_BYTES: usize = 4096;
/// Buffer of a scavenged chunk writer.
const SCAVENGE_WRITE_BYTES: usize = 1 << 20;
/// Largest span of positions read at once by [`Log::read_many`].
const COALESCE_BYTES: u64 = 512 * 1024;
/// Page size the chunk writer pads its writes to (see `LogWriter::write_buffer`).
const PAGE_BYTES: u64 = 4096;
/// Block size of the torn-tail scan at start-up.
const TAIL_SCAN_BYTES: usize = 1 << 20;

/// Where and how big.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// The `db/` directory.
    pub dir: PathBuf,
    /// Data bytes per chunk.
    pub chunk_size: u64,
    /// Whether records synced past `writer.chk` in its chunk are durable ([`Log::adopt_synced`]):
    /// recovery adopts them. A cluster node's log, whose follower role acknowledges the leader's
    /// records once their data is synced; a single node keeps `writer.chk` as its only end.
    pub adopt_synced_tail: bool,
}

impl LogConfig {
    /// A log in `dir` with `chunk_size` bytes of data per chunk, whose durable end is `writer.chk`.
    pub fn new(dir: impl Into<PathBuf>, chunk_size: u64) -> LogConfig {
        LogConfig { dir: dir.into(), chunk_size, adopt_synced_tail: false }
    }
}

/// Errors of the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An I/O call failed.
    #[error("I/O error during {op} of {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// No space left on the device.
    #[error("disk full during {op} of {path}")]
    DiskFull {
        /// What was being done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
    },
    /// Committed data failed its checksum or shape check.
    #[error("corrupt data in {file} at offset {offset}: {detail}")]
    Corrupt {
        /// The chunk (or checkpoint) file.
        file: PathBuf,
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// A position outside the committed log.
    #[error("log position {0} is outside the committed log")]
    OutOfRange(u64),
    /// A record larger than a chunk can hold.
    #[error("record of {len} bytes does not fit in a chunk of {chunk_size} bytes")]
    RecordTooLarge {
        /// Frame length.
        len: u64,
        /// Chunk size.
        chunk_size: u64,
    },
    /// An earlier write or sync failed; no further writes are accepted.
    #[error("the log refuses writes after an earlier write or sync failure; restart the node")]
    Poisoned,
    /// The files on disk do not make a valid log (missing chunk, bad configuration).
    #[error("invalid database: {0}")]
    Invalid(String),
    /// A follower's record or truncation that does not fit the log where it was asked to go.
    #[error("cannot place the log at {position}: {detail}")]
    Misplaced {
        /// The position asked for.
        position: u64,
        /// Why not.
        detail: String,
    },
}

impl LogError {
    fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LogError + 'a {
        move |source| {
            if source.raw_os_error() == Some(libc::ENOSPC) || source.kind() == io::ErrorKind::StorageFull {
                LogError::DiskFull { op, path: path.to_path_buf() }
            } else {
                LogError::Io { op, path: path.to_path_buf(), source }
            }
        }
    }
}

/// Where a chunk's records physically are.
#[derive(Debug)]
pub enum Layout {
    /// Records at `offset = position - base` (chunks as written).
    Plain,
    /// A scavenged chunk: the kept records back to back, with a position map of
    /// `(log position, data offset)` pairs, ascending.
    Mapped {
        /// The position map.
        map: Vec<(u64, u64)>,
        /// Bytes of record data.
        data_len: u64,
    },
}

/// One open chunk file.
pub struct Chunk {
    /// Its header.
    pub header: ChunkHeader,
    /// File version (raised by scavenging).
    pub version: u32,
    /// Path of the file.
    pub path: PathBuf,
    file: Arc<dyn File>,
    /// Data bytes in use: from the footer for a complete chunk, `u64::MAX` while it is written.
    data_end: AtomicU64,
    /// Physical layout.
    pub layout: Layout,
}

impl Chunk {
    fn read(&self, buf: &mut [u8], offset: u64) -> Result<(), LogError> {
        self.file.read_exact_at(buf, HEADER_SIZE + offset).map_err(LogError::io("read", &self.path))
    }
    fn read_vec(&self, len: usize, offset: u64) -> Result<Vec<u8>, LogError> {
        self.file.read_vec_at(len, HEADER_SIZE + offset).map_err(LogError::io("read", &self.path))
    }
    fn corrupt(&self, offset: u64, detail: impl std::fmt::Display) -> LogError {
        LogError::Corrupt {
            file: self.path.clone(),
            offset: HEADER_SIZE + offset,
            detail: detail.to_string(),
        }
    }
    /// The data offset of the record at log position `pos`, if the chunk holds one there.
    fn offset_of(&self, base: u64, pos: u64) -> Option<u64> {
        match &self.layout {
            Layout::Plain => Some(pos - base),
            Layout::Mapped { map, .. } => map.binary_search_by_key(&pos, |e| e.0).ok().map(|i| map[i].1),
        }
    }
    /// The first record at or after `pos`: its position and data offset.
    fn first_from(&self, base: u64, pos: u64) -> Option<(u64, u64)> {
        match &self.layout {
            Layout::Plain => Some((pos, pos - base)),
            Layout::Mapped { map, .. } => map.get(map.partition_point(|e| e.0 < pos)).copied(),
        }
    }
    /// The position after the record at `pos` with frame length `len`.
    fn after(&self, pos: u64, len: u64, span_end: u64) -> u64 {
        match &self.layout {
            Layout::Plain => pos + len,
            Layout::Mapped { map, .. } => {
                map.get(map.partition_point(|e| e.0 <= pos)).map(|e| e.0).unwrap_or(span_end)
            }
        }
    }
    /// The last record before `pos`: its position and data offset (mapped chunks only).
    fn last_before(&self, pos: u64) -> Option<(u64, u64)> {
        match &self.layout {
            Layout::Plain => None,
            Layout::Mapped { map, .. } => map.partition_point(|e| e.0 < pos).checked_sub(1).map(|i| map[i]),
        }
    }
    /// Bytes of data that may be read at `offset` for a record, given the readable end position.
    fn readable_from(&self, base: u64, offset: u64, end: u64) -> u64 {
        match &self.layout {
            Layout::Plain => (end - base).saturating_sub(offset),
            Layout::Mapped { data_len, .. } => data_len.saturating_sub(offset),
        }
    }
    /// Whether this chunk was rewritten by a scavenge.
    pub fn is_scavenged(&self) -> bool {
        matches!(self.layout, Layout::Mapped { .. })
    }
    /// Size of the chunk file in bytes.
    pub fn file_len(&self) -> u64 {
        self.file.len().unwrap_or(0)
    }
}

/// The five checkpoint files of `db/`.
pub struct Checkpoints {
    /// End of the durable log.
    pub writer: Checkpoint,
    /// How far the log has been processed into the index (restores truncate to it).
    pub chaser: Checkpoint,
    /// Position of the last epoch record, -1 before the first.
    pub epoch: Checkpoint,
    /// Set (by a restore) to truncate the log on the next start; -1 otherwise.
    pub truncate: Checkpoint,
    /// Last election proposal number.
    pub proposal: Checkpoint,
}

/// What recovery did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The log was truncated to this position by `truncate.chk`.
    pub truncated_to: Option<u64>,
    /// Non-zero bytes past `writer.chk` that were zeroed (a torn tail).
    pub torn_bytes: u64,
    /// Bytes of synced records past `writer.chk` that were adopted
    /// ([`LogConfig::adopt_synced_tail`]).
    pub adopted_bytes: u64,
    /// Chunk files found.
    pub chunks: usize,
}

/// The transaction log (shared by readers and the single writer).
pub struct Log {
    env: Env,
    cfg: LogConfig,
    chunks: RwLock<BTreeMap<u32, Arc<Chunk>>>,
    /// What readers see: at most `durable`.
    committed: AtomicU64,
    /// A cluster node's log: the chaser follows the committed position.
    replicated: std::sync::atomic::AtomicBool,
    /// The durable end: what recovery keeps. `writer.chk`, or past it what
    /// [`Log::adopt_synced`] adopted (at most `synced`).
    durable: AtomicU64,
    /// What `writer.chk` names (at most `durable`).
    checkpointed: AtomicU64,
    /// When `writer.chk` last moved (monotonic nanoseconds).
    checkpointed_at_ns: AtomicU64,
    /// The end of the data the writer has synced ([`LogWriter::flush_data`]): at least
    /// `durable`; `writer.chk` may be moved up to it ([`Log::flush_checkpoint`]).
    synced: AtomicU64,
    /// The end of the records the writer has handed to the files, synced or not (at least
    /// `synced` but after a truncation): what [`Log::scan_written`] may read.
    handed: AtomicU64,
    /// Held around every write of `writer.chk`, so its writes land in the order their values
    /// were decided (the checkpoint stage of the commit pipeline runs beside the writer).
    checkpoint_lock: Mutex<()>,
    /// Checkpoint files.
    pub checkpoints: Checkpoints,
    prepared: Mutex<Option<(u32, Arc<dyn File>)>>,
    poisoned: AtomicBool,
    max_body: u32,
    /// Syncs (file data, directory, `writer.chk`) the writer's commits have made.
    commit_syncs: AtomicU64,
    /// Nanoseconds the writer's commits spent on their data and on `writer.chk`.
    commit_data_ns: AtomicU64,
    commit_checkpoint_ns: AtomicU64,
    /// Durations of the data phase (writing a group's records out and syncing them), for metrics.
    pub data_phase: crate::metrics::instruments::Histogram,
}

/// What the writer's commits have cost so far (for `/stats`): each commit first makes its
/// records durable (the data phase), then moves `writer.chk` (the checkpoint phase).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Syncs made: each chunk's data, the directory when a chunk was added, `writer.chk`. A
    /// group commit normally makes two.
    pub syncs: u64,
    /// Time in the data phase: writing the staged records out and syncing the chunk (at a chunk
    /// change also the completed chunk and the directory).
    pub data: Duration,
    /// Time in the checkpoint phase: writing and syncing `writer.chk` (and writing `chaser.chk`).
    pub checkpoint: Duration,
}

impl Log {
    /// Creates chunk `number` (using the pre-allocated file when it is ready) and registers it.
    fn new_chunk(&self, number: u32) -> Result<Arc<Chunk>, LogError> {
        let dir = &self.cfg.dir;
        let path = dir.join(chunk::file_name(number, 0));
        let tmp = crate::env::tmp_path(&path);
        let file = {
            let mut prepared = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
            match prepared.take() {
                Some((n, f)) if n == number => f,
                _ => {
                    let header = self.fresh_header(number);
                    chunk::create_file(&*self.env.disk, &tmp, &header)
                        .map_err(LogError::io("create chunk", &tmp))?
                }
            }
        };
        self.env.disk.rename(&tmp, &path).map_err(LogError::io("rename chunk", &tmp))?;
        let header = read_header(&*file, &path)?;
        let c = Arc::new(Chunk {
            header,
            version: 0,
            path,
            file,
            data_end: AtomicU64::new(u64::MAX),
            layout: Layout::Plain,
        });
        self.chunks.write().unwrap_or_else(|e| e.into_inner()).insert(number, c.clone());
        Ok(c)
    }

    fn fresh_header(&self, number: u32) -> ChunkHeader {
        ChunkHeader {
            chunk_size: self.cfg.chunk_size,
            start: number,
            end: number,
            scavenged: false,
            id: chunk::plain_id(number),
        }
    }

    /// Pre-allocates chunk `number` in the background, off the append path.
    fn prepare_chunk(self: &Arc<Self>, number: u32) {
        let log = self.clone();
        self.env.rt.background(
            "annal-chunk-prealloc",
            Box::new(move || {
                let mut prepared = log.prepared.lock().unwrap_or_else(|e| e.into_inner());
                if matches!(&*prepared, Some((n, _)) if *n == number) {
                    return;
                }
                let path = log.cfg.dir.join(chunk::file_name(number, 0));
                let tmp = crate::env::tmp_path(&path);
                match chunk::create_file(&*log.env.disk, &tmp, &log.fresh_header(number)) {
                    Ok(f) => *prepared = Some((number, f)),
                    Err(e) => tracing::warn!(error = %e, "pre-allocating the next chunk failed; it will be created on demand"),
                }
            }),
        );
    }

    /// End of the committed log: what readers see (at most [`Log::durable`]).
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
    }

    /// End of the durable log: `writer.chk`, or past it the synced records a cluster node's log
    /// adopted ([`Log::adopt_synced`]).
    pub fn durable(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// What `writer.chk` names.
    pub fn checkpointed(&self) -> u64 {
        self.checkpointed.load(Ordering::Acquire)
    }

    /// Whether `writer.chk` last moved [`ADOPTED_CHECKPOINT_INTERVAL`] ago or more: a writer
    /// that adopts what it synced ([`Log::adopt_synced`]) moves it then.
    pub fn checkpoint_due(&self) -> bool {
        let now = self.env.clock.monotonic().as_nanos() as u64;
        now.saturating_sub(self.checkpointed_at_ns.load(Ordering::Acquire))
            >= ADOPTED_CHECKPOINT_INTERVAL.as_nanos() as u64
    }

    /// The end of the chunk `writer.chk` points into: records synced below it are adoptable.
    fn adoptable_limit(&self) -> u64 {
        (self.checkpointed() / self.cfg.chunk_size + 1) * self.cfg.chunk_size
    }

    /// Makes the synced records below `end` durable without moving `writer.chk`, when this log
    /// adopts its synced tail ([`LogConfig::adopt_synced_tail`]) and `end` lies inside the chunk
    /// `writer.chk` points into (recovery scans only that chunk, and never adopts a record that
    /// ends exactly at the chunk's end); otherwise `writer.chk` must move first
    /// ([`Log::flush_checkpoint`]). `end` must be where an atomic write ends: recovery adopts
    /// nothing of a write whose last record it does not find. Returns the durable end.
    pub fn adopt_synced(&self, end: u64) -> u64 {
        let _chk = self.checkpoint_lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.cfg.adopt_synced_tail
            && !self.is_poisoned()
            && end <= self.synced.load(Ordering::Acquire)
            && end < self.adoptable_limit()
        {
            self.durable.fetch_max(end, Ordering::AcqRel);
        }
        self.durable()
    }

    /// Moves the committed position readers see to `pos` (clamped to the durable end; it never
    /// moves back). A single node publishes each commit at once; a cluster's leader publishes
    /// what a quorum holds.
    pub fn publish(&self, pos: u64) {
        debug_assert!(pos <= self.durable(), "publishing {pos} past the durable end {}", self.durable());
        let to = pos.min(self.durable());
        let before = self.committed.fetch_max(to, Ordering::AcqRel);
        if to > before && self.replicated.load(Ordering::Acquire) {
            // Not synced: a restart publishes at most this, and less is safe (it waits for the
            // leader to say again what is committed).
            if let Err(e) = self.checkpoints.chaser.write(to as i64) {
                tracing::warn!(error = %e, "writing chaser.chk failed; it is rewritten by the next commit");
            }
        }
    }

    /// The second half of a flush ([`LogWriter::flush_data`] is the first): moves `writer.chk` to
    /// `end` and syncs it, so the records below `end` are durable. `end` is clamped to the synced
    /// end of the data, so `writer.chk` never names bytes that are not durable; a value at or
    /// below what `writer.chk` names costs nothing. Writes of `writer.chk` are
    /// serialized, each at least the one before (truncation aside). Returns the durable end. A
    /// failure poisons the log; once it is poisoned nothing is flushed.
    pub fn flush_checkpoint(&self, end: u64) -> Result<u64, LogError> {
        let _chk = self.checkpoint_lock.lock().unwrap_or_else(|e| e.into_inner());
        if self.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        let end = end.min(self.synced.load(Ordering::Acquire));
        if end <= self.checkpointed() {
            return Ok(self.durable());
        }
        let started = self.env.clock.monotonic();
        let cps = &self.checkpoints;
        if let Err(e) = cps.writer.write_durable(end as i64) {
            tracing::error!("log write failed: the node stops accepting writes");
            self.poisoned.store(true, Ordering::Release);
            return Err(LogError::io("write checkpoint", cps.writer.path())(e));
        }
        self.commit_syncs.fetch_add(1, Ordering::Relaxed);
        self.checkpointed.store(end, Ordering::Release);
        self.checkpointed_at_ns.store(started.as_nanos() as u64, Ordering::Release);
        self.durable.fetch_max(end, Ordering::AcqRel);
        // The chaser checkpoint follows without its own sync: it is flushed at index flushes and
        // shutdown, and after a crash recovery clamps it to writer.chk. The group is durable
        // already, so failing to write it must not turn the commit into a reported failure.
        // A cluster node's chaser follows the committed position instead (Log::publish).
        if !self.is_replicated() {
            if let Err(e) = cps.chaser.write(end as i64) {
                tracing::warn!(error = %e, "writing chaser.chk failed; it is rewritten by the next commit");
            }
        }
        crate::env::add_elapsed(&self.commit_checkpoint_ns, started, self.env.clock.monotonic());
        Ok(self.durable())
    }

    /// Makes this a cluster node's log: `chaser.chk` follows the committed position instead of
    /// the durable end, and the committed position starts at `known` (what is known to be
    /// committed: the larger of `chaser.chk` and the index checkpoint), not at the durable end.
    pub fn set_replicated(&self, known: u64) {
        self.replicated.store(true, Ordering::Release);
        self.committed.store(known.min(self.durable()), Ordering::Release);
    }

    /// The largest record body accepted.
    pub fn max_body(&self) -> u32 {
        self.max_body
    }

    /// Whether this is a cluster node's log ([`Log::set_replicated`]).
    pub fn is_replicated(&self) -> bool {
        self.replicated.load(Ordering::Acquire)
    }

    /// Data bytes per chunk.
    pub fn chunk_size(&self) -> u64 {
        self.cfg.chunk_size
    }

    /// The `db/` directory.
    pub fn dir(&self) -> &Path {
        &self.cfg.dir
    }

    /// What the writer's commits have cost so far.
    pub fn commit_stats(&self) -> CommitStats {
        let ns = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        CommitStats {
            syncs: self.commit_syncs.load(Ordering::Relaxed),
            data: ns(&self.commit_data_ns),
            checkpoint: ns(&self.commit_checkpoint_ns),
        }
    }

    /// Whether an earlier failure poisoned the writer.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Open chunk files, in log order.
    pub fn chunks(&self) -> Vec<Arc<Chunk>> {
        self.chunks.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    fn chunk_for(&self, pos: u64) -> Option<Arc<Chunk>> {
        let n = (pos / self.cfg.chunk_size) as u32;
        let chunks = self.chunks.read().unwrap_or_else(|e| e.into_inner());
        let (_, c) = chunks.range(..=n).next_back()?;
        (c.header.end >= n).then(|| c.clone())
    }

    /// End (exclusive, logical position) of readable data in `c`.
    fn readable_end(&self, c: &Chunk) -> u64 {
        self.readable_end_to(c, self.committed())
    }

    /// The end of what can be read in `c` up to `horizon` (the committed or the durable end).
    fn readable_end_to(&self, c: &Chunk, horizon: u64) -> u64 {
        let base = c.header.start as u64 * self.cfg.chunk_size;
        let span = (c.header.end - c.header.start + 1) as u64 * self.cfg.chunk_size;
        let end = base + c.data_end.load(Ordering::Acquire).min(span);
        end.min(horizon)
    }

    /// Where the records before `pos` end. A chunk never splits a record, so when `pos` starts a
    /// chunk the one before may end in padding: this is the end of its last record then (`pos`
    /// when that chunk is scavenged or missing, and whenever `pos` does not start a chunk).
    pub fn records_end_before(&self, pos: u64) -> u64 {
        if pos == 0 || pos % self.cfg.chunk_size != 0 {
            return pos;
        }
        match self.chunk_for(pos - 1) {
            Some(c) if !c.is_scavenged() => self.readable_end_to(&c, pos),
            _ => pos,
        }
    }

    /// Reads the record at `pos`, which must be the start of a durable record, committed or not
    /// (a cluster's replication and epoch bookkeeping; readers use [`Log::read`]).
    pub fn read_durable(&self, pos: u64) -> Result<Record, LogError> {
        let c = self.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        self.read_to(&c, pos, self.readable_end_to(&c, self.durable()))
    }

    /// Reads the record at `pos`, which must be the start of a committed record.
    /// `OutOfRange` when no record starts there (or a scavenge removed it).
    pub fn read(&self, pos: u64) -> Result<Record, LogError> {
        let c = self.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        self.read_in(&c, pos)
    }

    fn read_in(&self, c: &Chunk, pos: u64) -> Result<Record, LogError> {
        self.read_to(c, pos, self.readable_end(c))
    }

    fn read_to(&self, c: &Chunk, pos: u64, end: u64) -> Result<Record, LogError> {
        if pos >= end {
            return Err(LogError::OutOfRange(pos));
        }
        let base = c.header.start as u64 * self.cfg.chunk_size;
        let off = c.offset_of(base, pos).ok_or(LogError::OutOfRange(pos))?;
        let avail = c.readable_from(base, off, end) as usize;
        let buf = Bytes::from(c.read_vec(avail.min(POINT_READ_BYTES), off)?);
        match record::decode_shared(&buf, 0, pos, self.max_body) {
            Ok((r, _)) => Ok(r),
            Err(FrameError::Short { needed }) if needed <= avail => {
                record::decode_shared(&Bytes::from(c.read_vec(needed, off)?), 0, pos, self.max_body)
                    .map(|(r, _)| r)
                    .map_err(|e| c.corrupt(off, e))
            }
            Err(e) => Err(c.corrupt(off, e)),
        }
    }

    /// Reads the records at `positions` (each the start of a committed record), coalescing
    /// nearby records of one chunk into single reads. Results are in the order given; `None`
    /// where a scavenge removed the record.
    pub fn read_many(&self, positions: &[u64]) -> Result<Vec<Option<Record>>, LogError> {
        let mut out = Vec::with_capacity(positions.len());
        let mut i = 0;
        while i < positions.len() {
            let first = positions[i];
            let c = self.chunk_for(first).ok_or(LogError::OutOfRange(first))?;
            let end = self.readable_end(&c);
            let base = c.header.start as u64 * self.cfg.chunk_size;
            if first >= end {
                return Err(LogError::OutOfRange(first));
            }
            let Some(first_off) = c.offset_of(base, first) else {
                out.push(None);
                i += 1;
                continue;
            };
            // Extend the group while records ascend within this chunk and the span stays small.
            let mut offs = vec![first_off];
            let mut j = i + 1;
            while j < positions.len() && positions[j] > positions[j - 1] && positions[j] < end {
                match c.offset_of(base, positions[j]) {
                    Some(o) if o > offs[offs.len() - 1] && o - first_off < COALESCE_BYTES => offs.push(o),
                    _ => break,
                }
                j += 1;
            }
            if offs.len() == 1 {
                out.push(Some(self.read_in(&c, first)?));
                i = j;
                continue;
            }
            let last_off = offs[offs.len() - 1];
            let span = ((last_off - first_off) as usize + POINT_READ_BYTES)
                .min(c.readable_from(base, first_off, end) as usize);
            let buf = Bytes::from(c.read_vec(span, first_off)?);
            for (&p, &o) in positions[i..j].iter().zip(&offs) {
                match record::decode_shared(&buf, (o - first_off) as usize, p, self.max_body) {
                    Ok((r, _)) => out.push(Some(r)),
                    Err(FrameError::Short { .. }) => out.push(Some(self.read_in(&c, p)?)),
                    Err(e) => return Err(c.corrupt(o, e)),
                }
            }
            i = j;
        }
        Ok(out)
    }

    /// Reads up to `max` records that start before `before`, newest first. Returns them and the
    /// position to continue from (the start of the oldest returned record).
    pub fn read_backward(&self, before: u64, max: usize) -> Result<(Vec<Record>, u64), LogError> {
        let mut out = Vec::new();
        let mut pos = before.min(self.committed());
        let size = self.cfg.chunk_size;
        while out.len() < max && pos > 0 {
            let Some(c) = self.chunk_for(pos - 1) else { break };
            let base = c.header.start as u64 * size;
            let end = self.readable_end(&c);
            if pos > end {
                pos = end;
            }
            if c.is_scavenged() {
                match c.last_before(pos) {
                    Some((p, _)) => {
                        out.push(self.read_in(&c, p)?);
                        pos = p;
                    }
                    None => pos = base,
                }
                continue;
            }
            if pos == base {
                continue;
            }
            let local = pos - base;
            let mut lb = [0u8; 4];
            c.read(&mut lb, local - 4.min(local))?;
            let len =
                record::frame_len_before(&lb, self.max_body).map_err(|e| c.corrupt(local - 4, e))? as u64;
            if len > local {
                return Err(c.corrupt(local - 4, "record length runs before the chunk start"));
            }
            let start = pos - len;
            out.push(self.read_in(&c, start)?);
            pos = start;
        }
        Ok((out, pos))
    }

    /// Whether a record starts at committed position `pos` (false once a scavenge removed it).
    pub fn contains(&self, pos: u64) -> bool {
        match self.chunk_for(pos) {
            Some(c) => {
                let base = c.header.start as u64 * self.cfg.chunk_size;
                pos < self.readable_end(&c) && c.offset_of(base, pos).is_some()
            }
            None => false,
        }
    }

    /// The physical chunk holding `pos` and the log range `[lo, hi)` it covers.
    pub fn chunk_range(&self, pos: u64) -> Option<(Arc<Chunk>, u64, u64)> {
        let c = self.chunk_for(pos)?;
        let size = self.cfg.chunk_size;
        let (lo, hi) = (c.header.start as u64 * size, (c.header.end as u64 + 1) * size);
        Some((c, lo, hi))
    }

    /// Flushes the chaser checkpoint (called at index flushes and shutdown).
    pub fn flush_chaser(&self) -> Result<(), LogError> {
        self.checkpoints.chaser.flush().map_err(LogError::io("sync", self.checkpoints.chaser.path()))
    }
}

/// Reads and checks the header of the chunk file at `path`.
fn read_header(file: &dyn File, path: &Path) -> Result<ChunkHeader, LogError> {
    let mut hb = [0u8; HEADER_SIZE as usize];
    file.read_exact_at(&mut hb, 0).map_err(LogError::io("read header", path))?;
    ChunkHeader::decode(&hb).map_err(|d| LogError::Corrupt {
        file: path.to_path_buf(),
        offset: 0,
        detail: d.into(),
    })
}

/// The running CRC of the first `len` data bytes of a plain chunk file (read in pieces).
fn data_crc(file: &dyn File, path: &Path, len: u64) -> Result<crc32fast::Hasher, LogError> {
    let mut crc = crc32fast::Hasher::new();
    let mut at = 0u64;
    while at < len {
        let n = ((len - at) as usize).min(SCAN_READ_BYTES);
        let piece = file.read_vec_at(n, HEADER_SIZE + at).map_err(LogError::io("read", path))?;
        crc.update(&piece);
        at += n as u64;
    }
    Ok(crc)
}
