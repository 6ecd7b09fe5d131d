//! The transaction log: chunk files in `db/`, the checkpoints, the writer and readers, recovery.
//!
//! The log is a sequence of byte positions. Position `p` lives in logical chunk
//! `p / chunk_size` at offset `p % chunk_size` of that chunk's data. Records never span chunks: a
//! record that does not fit completes the chunk (its footer is written) and goes to the next one.
//!
//! Invariants:
//! - `writer.chk` is the end of the durable log. Bytes below it are committed; an append is
//!   acknowledged only after its bytes *and* `writer.chk` are synced ([`LogWriter::commit`]).
//! - Readers never see past [`Log::committed`], so a half-written group commit is invisible.
//! - Every chunk below the writer's chunk is complete (has a footer), durably: a commit syncs the
//!   chunks it completed before `writer.chk` moves past them, and recovery syncs the one chunk
//!   that can end exactly at `writer.chk` with a footer no commit covered.
//! - After a failed write or sync the log is poisoned: it refuses further writes, because the
//!   state of the file after a failed fsync is unknown (and retrying fsync can report success for
//!   data that never reached the disk).
//!
//! Recovery ([`Log::open`]): a `truncate.chk` below `writer.chk` first truncates the log to it (the
//! spec's restore procedure); then anything past `writer.chk` is a torn tail and is zeroed; chunk
//! files past the writer's chunk are leftovers of pre-allocation and are removed. Recovery reads
//! only the writer's chunk, never the whole log: committed records are checksummed on every read,
//! and the index rebuild verifies the tail it replays.

pub mod checkpoint;
pub mod chunk;
pub mod record;

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;

use self::checkpoint::Checkpoint;
use self::chunk::{ChunkFooter, ChunkHeader, FOOTER_SIZE, HEADER_SIZE};
use self::record::{FrameError, Record};
use crate::env::{Env, File, OpenMode};

/// Default logical chunk size: 256 MiB of data per chunk file.
pub const DEFAULT_CHUNK_SIZE: u64 = 256 * 1024 * 1024;
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
    /// Chunk files found.
    pub chunks: usize,
}

/// The transaction log (shared by readers and the single writer).
pub struct Log {
    env: Env,
    cfg: LogConfig,
    chunks: RwLock<BTreeMap<u32, Arc<Chunk>>>,
    committed: AtomicU64,
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
    /// Opens (creating if empty) and recovers the log in `cfg.dir`.
    pub fn open(env: &Env, cfg: LogConfig) -> Result<(Arc<Log>, LogWriter, RecoveryReport), LogError> {
        if cfg.chunk_size < MIN_CHUNK_SIZE || cfg.chunk_size > u32::MAX as u64 {
            return Err(LogError::Invalid(format!(
                "chunk size {} is outside {MIN_CHUNK_SIZE}..={}",
                cfg.chunk_size,
                u32::MAX
            )));
        }
        let disk = &*env.disk;
        let dir = cfg.dir.clone();
        disk.create_dir_all(&dir).map_err(LogError::io("create directory", &dir))?;
        disk.sync_dir(crate::env::parent(&dir)).map_err(LogError::io("sync directory", &dir))?;
        let names = disk.list(&dir).map_err(LogError::io("list", &dir))?;
        let fresh = !names.iter().any(|n| chunk::is_chunk_name(n) || n == "writer.chk");
        let cp = |name: &str, init: i64| {
            let p = dir.join(name);
            Checkpoint::open(disk, &p, init).map_err(LogError::io("open checkpoint", &dir))
        };
        if !fresh && !disk.exists(&dir.join("writer.chk")) {
            return Err(LogError::Invalid(format!("{} holds chunk files but no writer.chk", dir.display())));
        }
        let checkpoints = Checkpoints {
            writer: Checkpoint::open_direct(disk, &dir.join("writer.chk"), 0)
                .map_err(LogError::io("open checkpoint", &dir))?,
            chaser: cp("chaser.chk", 0)?,
            epoch: cp("epoch.chk", -1)?,
            truncate: cp("truncate.chk", -1)?,
            proposal: cp("proposal.chk", 0)?,
        };
        for n in names.iter().filter(|n| n.ends_with(".tmp")) {
            let p = dir.join(n);
            disk.remove(&p).map_err(LogError::io("remove temporary file", &p))?;
        }
        let mut latest: BTreeMap<u32, u32> = BTreeMap::new();
        for (start, version) in names.iter().filter_map(|n| chunk::parse_file_name(n)) {
            let v = latest.entry(start).or_insert(version);
            *v = (*v).max(version);
        }
        for (start, version) in names.iter().filter_map(|n| chunk::parse_file_name(n)) {
            if latest.get(&start) != Some(&version) {
                let p = dir.join(chunk::file_name(start, version));
                disk.remove(&p).map_err(LogError::io("remove superseded chunk", &p))?;
            }
        }
        let max_body = u32::try_from(cfg.chunk_size).unwrap_or(u32::MAX);
        let log = Arc::new(Log {
            env: env.clone(),
            cfg,
            chunks: RwLock::new(BTreeMap::new()),
            committed: AtomicU64::new(0),
            checkpoints,
            prepared: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            max_body,
            commit_syncs: AtomicU64::new(0),
            commit_data_ns: AtomicU64::new(0),
            commit_checkpoint_ns: AtomicU64::new(0),
        });
        let mut report = RecoveryReport { chunks: latest.len(), ..RecoveryReport::default() };
        let writer_pos = log.recover(&latest, &mut report)?;
        let writer = LogWriter::resume(log.clone(), writer_pos)?;
        Ok((log, writer, report))
    }

    fn recover(&self, latest: &BTreeMap<u32, u32>, report: &mut RecoveryReport) -> Result<u64, LogError> {
        let disk = &*self.env.disk;
        let dir = &self.cfg.dir;
        let size = self.cfg.chunk_size;
        let cps = &self.checkpoints;
        let mut writer = u64::try_from(cps.writer.read())
            .map_err(|_| LogError::Invalid(format!("writer.chk holds {}", cps.writer.read())))?;
        // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
        if crate::buggify::bug(crate::buggify::Bug::RecoverToChaser) {
            writer = writer.min(u64::try_from(cps.chaser.read()).unwrap_or(writer));
        }
        let truncate = cps.truncate.read();
        if truncate >= 0 && (truncate as u64) < writer {
            tracing::warn!(from = writer, to = truncate, "truncating the log to truncate.chk");
            writer = truncate as u64;
            report.truncated_to = Some(writer);
        }
        // Open the chunks, in order, up to the writer's chunk; remove those past it.
        let writer_chunk = (writer / size) as u32;
        let mut chunks = BTreeMap::new();
        let mut expect = 0u32;
        for (&start, &version) in latest {
            let path = dir.join(chunk::file_name(start, version));
            if start < expect {
                // Covered by a merged scavenged chunk that replaced it (removal was interrupted).
                disk.remove(&path).map_err(LogError::io("remove merged chunk", &path))?;
                continue;
            }
            if start > writer_chunk {
                disk.remove(&path).map_err(LogError::io("remove chunk past the writer", &path))?;
                continue;
            }
            if start != expect {
                return Err(LogError::Invalid(format!(
                    "chunk file for chunk {expect} is missing (found {})",
                    path.display()
                )));
            }
            let file = disk.open(&path, OpenMode::ReadWrite).map_err(LogError::io("open", &path))?;
            let mut hb = [0u8; HEADER_SIZE as usize];
            file.read_exact_at(&mut hb, 0).map_err(LogError::io("read header", &path))?;
            let header = ChunkHeader::decode(&hb).map_err(|d| LogError::Corrupt {
                file: path.clone(),
                offset: 0,
                detail: d.into(),
            })?;
            if header.chunk_size != size {
                return Err(LogError::Invalid(format!(
                    "{} was written with chunk size {}, but the node runs with {size}; start with --chunk-size {}",
                    path.display(),
                    header.chunk_size,
                    header.chunk_size
                )));
            }
            if header.start != start {
                return Err(LogError::Corrupt {
                    file: path,
                    offset: 20,
                    detail: "header names another chunk".into(),
                });
            }
            let flen = file.len().map_err(LogError::io("stat", &path))?;
            let mut fb = [0u8; FOOTER_SIZE as usize];
            file.read_exact_at(&mut fb, flen.saturating_sub(FOOTER_SIZE))
                .map_err(LogError::io("read footer", &path))?;
            let footer = ChunkFooter::decode(&fb).map_err(|d| LogError::Corrupt {
                file: path.clone(),
                offset: flen.saturating_sub(FOOTER_SIZE),
                detail: d.into(),
            })?;
            let last = header.end >= writer_chunk;
            let mut layout = Layout::Plain;
            if let (Some(f), true) = (&footer, header.scavenged) {
                if last {
                    return Err(LogError::Corrupt {
                        file: path,
                        offset: 28,
                        detail: "the chunk being written is marked scavenged".into(),
                    });
                }
                layout = load_posmap(&*file, &path, f)?;
            }
            // The chunk that ends exactly at writer.chk: the commit that filled it did not
            // complete it (a chunk is completed by the next append, which may never have
            // committed), so whatever footer it has may be unsynced, written by a writer that
            // crashed after it while the page cache survived.
            let ends_at_writer = header.end + 1 == writer_chunk && writer == writer_chunk as u64 * size;
            let data_end = match (footer, last) {
                (Some(f), false) if ends_at_writer => {
                    file.sync_data().map_err(LogError::io("sync", &path))?;
                    f.logical_size
                }
                (Some(f), false) => f.logical_size,
                // The last committed record filled this chunk to its last byte, so writer.chk
                // points at the start of the next chunk, which was never created: the writer
                // completes a chunk only when a record no longer fits. Complete it now.
                (None, false) if !header.scavenged && ends_at_writer => {
                    complete_full_chunk(&*file, &path, size)?;
                    size
                }
                (None, false) => {
                    return Err(LogError::Corrupt {
                        file: path,
                        offset: flen.saturating_sub(FOOTER_SIZE),
                        detail: "chunk below the writer checkpoint is not complete".into(),
                    })
                }
                (_, true) => u64::MAX,
            };
            expect = header.end + 1;
            chunks.insert(
                start,
                Arc::new(Chunk { header, version, path, file, data_end: AtomicU64::new(data_end), layout }),
            );
        }
        if writer > 0 && expect <= writer_chunk && writer % size != 0 {
            return Err(LogError::Invalid(format!(
                "writer.chk is {writer} but the chunk file for chunk {writer_chunk} is missing"
            )));
        }
        *self.chunks.write().unwrap_or_else(|e| e.into_inner()) = chunks;
        if expect <= writer_chunk {
            // The writer sits exactly at the start of a chunk that was never created.
            self.new_chunk(writer_chunk)?;
        }
        // The names the log now builds on are made durable: a chunk created above, or one that a
        // crashed writer renamed into place without syncing the directory (the page cache kept
        // it), and the removals of leftovers.
        disk.sync_dir(dir).map_err(LogError::io("sync directory", dir))?;
        let current = self.chunk_for(writer).ok_or(LogError::OutOfRange(writer))?;
        // The writer's chunk: undo a completion that was not committed, zero the torn tail.
        let local = writer - current.header.start as u64 * size;
        let mut fb = [0u8; FOOTER_SIZE as usize];
        let flen = current.file.len().map_err(LogError::io("stat", &current.path))?;
        current
            .file
            .read_exact_at(&mut fb, flen - FOOTER_SIZE)
            .map_err(LogError::io("read footer", &current.path))?;
        if fb.iter().any(|&b| b != 0) {
            current
                .file
                .write_all_at(&[0u8; FOOTER_SIZE as usize], flen - FOOTER_SIZE)
                .map_err(LogError::io("clear footer", &current.path))?;
        }
        report.torn_bytes = self.zero_tail(&current, local, report.truncated_to.is_some())?;
        current.file.sync_data().map_err(LogError::io("sync", &current.path))?;
        if report.truncated_to.is_some() || cps.writer.read() != writer as i64 {
            cps.writer.write_durable(writer as i64).map_err(LogError::io("write", cps.writer.path()))?;
        }
        if cps.chaser.read() > writer as i64 || cps.chaser.read() < 0 {
            cps.chaser.write_durable(writer as i64).map_err(LogError::io("write", cps.chaser.path()))?;
        }
        if cps.epoch.read() >= writer as i64 {
            cps.epoch.write_durable(-1).map_err(LogError::io("write", cps.epoch.path()))?;
        }
        if truncate >= 0 {
            cps.truncate.write_durable(-1).map_err(LogError::io("write", cps.truncate.path()))?;
        }
        self.committed.store(writer, Ordering::Release);
        Ok(writer)
    }

    /// Zeroes non-zero bytes from `local` on. A torn tail is at most one group commit long, so the
    /// scan stops at the first all-zero block; a truncation (`full`) zeroes to the end.
    fn zero_tail(&self, chunk: &Chunk, local: u64, full: bool) -> Result<u64, LogError> {
        let size = self.cfg.chunk_size;
        let mut at = local;
        let mut zeroed = 0u64;
        let mut buf = vec![0u8; TAIL_SCAN_BYTES];
        while at < size {
            let n = ((size - at) as usize).min(TAIL_SCAN_BYTES);
            chunk.read(&mut buf[..n], at)?;
            let dirty = buf[..n].iter().any(|&b| b != 0);
            if dirty {
                zeroed += buf[..n].iter().filter(|&&b| b != 0).count() as u64;
                chunk
                    .file
                    .write_all_at(&vec![0u8; n], HEADER_SIZE + at)
                    .map_err(LogError::io("zero torn tail", &chunk.path))?;
            } else if !full {
                break;
            }
            at += n as u64;
        }
        Ok(zeroed)
    }

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
        let mut hb = [0u8; HEADER_SIZE as usize];
        file.read_exact_at(&mut hb, 0).map_err(LogError::io("read header", &path))?;
        let header = ChunkHeader::decode(&hb).map_err(|d| LogError::Corrupt {
            file: path.clone(),
            offset: 0,
            detail: d.into(),
        })?;
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
            id: *self.env.new_uuid().as_bytes(),
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

    /// End of the committed (durable, readable) log.
    pub fn committed(&self) -> u64 {
        self.committed.load(Ordering::Acquire)
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
        let base = c.header.start as u64 * self.cfg.chunk_size;
        let span = (c.header.end - c.header.start + 1) as u64 * self.cfg.chunk_size;
        let end = base + c.data_end.load(Ordering::Acquire).min(span);
        end.min(self.committed())
    }

    /// Reads the record at `pos`, which must be the start of a committed record.
    /// `OutOfRange` when no record starts there (or a scavenge removed it).
    pub fn read(&self, pos: u64) -> Result<Record, LogError> {
        let c = self.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        self.read_in(&c, pos)
    }

    fn read_in(&self, c: &Chunk, pos: u64) -> Result<Record, LogError> {
        let end = self.readable_end(c);
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

    /// Scans committed records forward from `from` (a record start or chunk boundary).
    pub fn scan(&self, from: u64) -> Scan<'_> {
        Scan { log: self, pos: from, buf: Bytes::new(), buf_off: 0, chunk: None, limit: None }
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

    /// Starts a scavenged replacement for the complete chunks `start..=end` at `version`: kept
    /// records are streamed in with [`ScavengedWriter::push`] and the file is put in place by
    /// [`ScavengedWriter::finish`]; the chunks it replaces stay in service until [`Log::install`].
    pub fn begin_scavenged(&self, start: u32, end: u32, version: u32) -> Result<ScavengedWriter, LogError> {
        let path = self.cfg.dir.join(chunk::file_name(start, version));
        let tmp = crate::env::tmp_path(&path);
        let file =
            self.env.disk.open(&tmp, OpenMode::CreateTruncate).map_err(LogError::io("create", &tmp))?;
        let size = self.cfg.chunk_size;
        let header = ChunkHeader {
            chunk_size: size,
            start,
            end,
            scavenged: true,
            id: *self.env.new_uuid().as_bytes(),
        };
        file.write_all_at(&header.encode(), 0).map_err(LogError::io("write", &tmp))?;
        Ok(ScavengedWriter {
            header,
            version,
            path,
            tmp,
            file,
            range: (start as u64 * size, (end as u64 + 1) * size),
            data_len: 0,
            map: Vec::new(),
            crc: crc32fast::Hasher::new(),
            buf: Vec::with_capacity(SCAVENGE_WRITE_BYTES),
        })
    }

    /// Writes a scavenged replacement holding `records` (see [`Log::begin_scavenged`]).
    pub fn write_scavenged(
        &self,
        start: u32,
        end: u32,
        version: u32,
        records: &[Record],
    ) -> Result<Arc<Chunk>, LogError> {
        let mut w = self.begin_scavenged(start, end, version)?;
        let mut frame = Vec::new();
        for r in records {
            frame.clear();
            match r {
                Record::Event(e) => record::encode_event(e, &mut frame),
                Record::Epoch(e) => record::encode_epoch(e, &mut frame),
            }
            w.push(r.log_position(), &frame)?;
        }
        w.finish(self)
    }

    /// Puts a scavenged chunk in service in place of the chunks it covers, then removes their
    /// files. Readers holding an old chunk finish on it.
    pub fn install(&self, new: Arc<Chunk>) -> Result<(), LogError> {
        let (start, end) = (new.header.start, new.header.end);
        let old: Vec<Arc<Chunk>> = {
            let mut chunks = self.chunks.write().unwrap_or_else(|e| e.into_inner());
            let covered: Vec<u32> = chunks.range(start..=end).map(|(k, _)| *k).collect();
            let old = covered.iter().filter_map(|k| chunks.remove(k)).collect();
            chunks.insert(start, new.clone());
            old
        };
        for c in old.iter().filter(|c| c.path != new.path) {
            self.env.disk.remove(&c.path).map_err(LogError::io("remove replaced chunk", &c.path))?;
        }
        self.env.disk.sync_dir(&self.cfg.dir).map_err(LogError::io("sync directory", &self.cfg.dir))
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

/// Streams the kept records of a scavenge into a new chunk file.
pub struct ScavengedWriter {
    header: ChunkHeader,
    version: u32,
    path: PathBuf,
    tmp: PathBuf,
    file: Arc<dyn File>,
    range: (u64, u64),
    data_len: u64,
    map: Vec<(u64, u64)>,
    crc: crc32fast::Hasher,
    buf: Vec<u8>,
}

impl ScavengedWriter {
    /// Appends the frame of the record at log position `pos` (ascending, inside the range).
    pub fn push(&mut self, pos: u64, frame: &[u8]) -> Result<(), LogError> {
        assert!(
            pos >= self.range.0 && pos < self.range.1 && self.map.last().is_none_or(|&(q, _)| q < pos),
            "scavenged records out of range or order"
        );
        self.map.push((pos, self.data_len));
        self.data_len += frame.len() as u64;
        self.crc.update(frame);
        self.buf.extend_from_slice(frame);
        if self.buf.len() >= SCAVENGE_WRITE_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// Records pushed so far.
    pub fn records(&self) -> usize {
        self.map.len()
    }

    fn flush(&mut self) -> Result<(), LogError> {
        let at = HEADER_SIZE + self.data_len - self.buf.len() as u64;
        self.file.write_all_at(&self.buf, at).map_err(LogError::io("write", &self.tmp))?;
        self.buf.clear();
        Ok(())
    }

    /// Drops the unfinished file.
    pub fn abort(self, log: &Log) {
        drop(self.file);
        if let Err(e) = log.env.disk.remove(&self.tmp) {
            tracing::warn!(error = %e, "could not remove an abandoned scavenge file");
        }
    }

    /// Writes the position map and footer, syncs the file and renames it into place.
    pub fn finish(mut self, log: &Log) -> Result<Arc<Chunk>, LogError> {
        self.flush()?;
        let mut pm = Vec::with_capacity(self.map.len() * 16);
        for (p, o) in &self.map {
            pm.extend_from_slice(&p.to_le_bytes());
            pm.extend_from_slice(&o.to_le_bytes());
        }
        let footer = ChunkFooter {
            logical_size: self.range.1 - self.range.0,
            physical_size: self.data_len,
            posmap_entries: self.map.len() as u32,
            data_crc: self.crc.clone().finalize(),
            posmap_crc: crc32fast::hash(&pm),
        };
        let io = LogError::io("write", &self.tmp);
        self.file
            .write_all_at(&pm, HEADER_SIZE + self.data_len)
            .and_then(|_| {
                self.file.write_all_at(&footer.encode(), HEADER_SIZE + self.data_len + pm.len() as u64)
            })
            .and_then(|_| self.file.sync_data())
            .map_err(io)?;
        let disk = &*log.env.disk;
        disk.rename(&self.tmp, &self.path).map_err(LogError::io("rename", &self.tmp))?;
        disk.sync_dir(&log.cfg.dir).map_err(LogError::io("sync directory", &log.cfg.dir))?;
        Ok(Arc::new(Chunk {
            header: self.header,
            version: self.version,
            path: self.path,
            file: self.file,
            data_end: AtomicU64::new(self.range.1 - self.range.0),
            layout: Layout::Mapped { map: self.map, data_len: self.data_len },
        }))
    }
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

/// Writes the footer of a plain chunk whose data fills all `size` bytes (read back for its CRC)
/// and syncs it.
fn complete_full_chunk(file: &dyn File, path: &Path, size: u64) -> Result<(), LogError> {
    let crc = data_crc(file, path, size)?;
    let footer = ChunkFooter {
        logical_size: size,
        physical_size: size,
        posmap_entries: 0,
        data_crc: crc.finalize(),
        posmap_crc: 0,
    };
    file.write_all_at(&footer.encode(), HEADER_SIZE + size).map_err(LogError::io("write footer", path))?;
    file.sync_data().map_err(LogError::io("sync", path))
}

/// Reads and checks the position map of a scavenged chunk.
fn load_posmap(file: &dyn File, path: &Path, f: &ChunkFooter) -> Result<Layout, LogError> {
    let at = HEADER_SIZE + f.physical_size;
    let mut b = vec![0u8; f.posmap_entries as usize * 16];
    file.read_exact_at(&mut b, at).map_err(LogError::io("read position map", path))?;
    let corrupt =
        |detail: &str| LogError::Corrupt { file: path.to_path_buf(), offset: at, detail: detail.into() };
    if crc32fast::hash(&b) != f.posmap_crc {
        return Err(corrupt("position map checksum mismatch"));
    }
    let map: Vec<(u64, u64)> = b
        .chunks_exact(16)
        .map(|e| {
            (
                u64::from_le_bytes(e[0..8].try_into().unwrap_or_default()),
                u64::from_le_bytes(e[8..16].try_into().unwrap_or_default()),
            )
        })
        .collect();
    if map.windows(2).any(|w| w[0].0 >= w[1].0 || w[0].1 >= w[1].1)
        || map.last().is_some_and(|e| e.1 >= f.physical_size)
    {
        return Err(corrupt("position map is not ascending or points past the data"));
    }
    Ok(Layout::Mapped { map, data_len: f.physical_size })
}

/// A forward scan over committed records (see [`Log::scan`]).
pub struct Scan<'a> {
    log: &'a Log,
    pos: u64,
    buf: Bytes,
    /// Data offset (in the current chunk) of `buf[0]`.
    buf_off: u64,
    chunk: Option<Arc<Chunk>>,
    limit: Option<u64>,
}

impl Scan<'_> {
    /// Position of the next record to be returned.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Stops the scan at `end` (exclusive) even if more is committed.
    pub fn until(mut self, end: u64) -> Self {
        self.limit = Some(end);
        self
    }

    /// The next record together with its encoded frame (shared, not copied).
    pub fn next_with_frame(&mut self) -> Option<Result<(Record, Bytes), LogError>> {
        match self.next_framed() {
            Ok(Some(x)) => Some(Ok(x)),
            Ok(None) => None,
            Err(e) => {
                self.limit = Some(0);
                Some(Err(e))
            }
        }
    }

    fn next_record(&mut self) -> Result<Option<Record>, LogError> {
        Ok(self.next_framed()?.map(|(r, _)| r))
    }

    fn next_framed(&mut self) -> Result<Option<(Record, Bytes)>, LogError> {
        let size = self.log.cfg.chunk_size;
        loop {
            let stop = self.limit.unwrap_or(u64::MAX).min(self.log.committed());
            if self.pos >= stop {
                return Ok(None);
            }
            let c = match &self.chunk {
                Some(c)
                    if c.header.start as u64 * size <= self.pos
                        && self.pos < (c.header.end as u64 + 1) * size =>
                {
                    c.clone()
                }
                _ => {
                    let c = self.log.chunk_for(self.pos).ok_or(LogError::OutOfRange(self.pos))?;
                    self.chunk = Some(c.clone());
                    self.buf = Bytes::new();
                    c
                }
            };
            let base = c.header.start as u64 * size;
            let span_end = (c.header.end as u64 + 1) * size;
            let end = self.log.readable_end(&c).min(stop);
            let next = c.first_from(base, self.pos).filter(|(p, _)| *p < end);
            let Some((pos, off)) = next else {
                if end < stop || span_end <= stop {
                    // The rest of this chunk is padding (or was scavenged away): next chunk.
                    self.pos = span_end;
                    self.chunk = None;
                    continue;
                }
                return Ok(None);
            };
            self.pos = pos;
            let avail = c.readable_from(base, off, end);
            let in_buf = off >= self.buf_off && off < self.buf_off + self.buf.len() as u64;
            if !in_buf {
                self.fill(&c, off, avail, SCAN_READ_BYTES)?;
            }
            let at = (off - self.buf_off) as usize;
            match record::decode_shared(&self.buf, at, pos, self.log.max_body) {
                Ok((r, len)) => {
                    self.pos = c.after(pos, len as u64, span_end);
                    return Ok(Some((r, self.buf.slice(at..at + len))));
                }
                Err(FrameError::Short { needed })
                    if needed as u64 <= avail && (at > 0 || self.buf.len() < needed) =>
                {
                    self.fill(&c, off, avail, SCAN_READ_BYTES.max(needed))?;
                }
                Err(e) => return Err(c.corrupt(off, e)),
            }
        }
    }

    fn fill(&mut self, c: &Chunk, off: u64, avail: u64, want: usize) -> Result<(), LogError> {
        let n = (avail as usize).min(want);
        self.buf = Bytes::from(c.read_vec(n, off)?);
        self.buf_off = off;
        Ok(())
    }
}

impl Iterator for Scan<'_> {
    type Item = Result<Record, LogError>;
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.limit = Some(0);
                Some(Err(e))
            }
        }
    }
}

/// The single writer of the log. Records are staged with [`LogWriter::append`] and made durable,
/// all together, by [`LogWriter::commit`] (group commit).
pub struct LogWriter {
    log: Arc<Log>,
    chunk: Arc<Chunk>,
    /// Next record position.
    pos: u64,
    /// Position up to which bytes were handed to the file.
    written: u64,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
    completed: Vec<Arc<Chunk>>,
    dir_dirty: bool,
}

impl LogWriter {
    fn resume(log: Arc<Log>, pos: u64) -> Result<LogWriter, LogError> {
        let chunk = log.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        let base = chunk.header.start as u64 * log.cfg.chunk_size;
        let crc = data_crc(&*chunk.file, &chunk.path, pos - base)?;
        log.prepare_chunk(chunk.header.end + 1);
        Ok(LogWriter {
            log,
            chunk,
            pos,
            written: pos,
            buf: Vec::new(),
            crc,
            completed: Vec::new(),
            dir_dirty: false,
        })
    }

    /// The position the next record will get (if it fits in the current chunk).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The log this writer appends to.
    pub fn log(&self) -> &Arc<Log> {
        &self.log
    }

    /// Stages a record of `len` frame bytes, which `encode` appends to the buffer given the record's
    /// position. Returns the position.
    pub fn append(&mut self, len: u64, encode: impl FnOnce(u64, &mut Vec<u8>)) -> Result<u64, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        let size = self.log.cfg.chunk_size;
        if len > size {
            return Err(LogError::RecordTooLarge { len, chunk_size: size });
        }
        let base = self.chunk.header.start as u64 * size;
        // BUGGIFY (sim only): complete a non-empty chunk early although the record fits; the rest
        // of the chunk becomes padding, exactly as when a record does not fit.
        if self.pos - base + len > size || (self.pos > base && crate::buggify!()) {
            self.complete_chunk().inspect_err(|_| self.poison())?;
        }
        let pos = self.pos;
        let before = self.buf.len();
        encode(pos, &mut self.buf);
        assert_eq!(
            (self.buf.len() - before) as u64,
            len,
            "encoded frame length differs from the reserved length"
        );
        self.pos += len;
        Ok(pos)
    }

    /// Completes the current chunk after the records staged so far (a scavenge point ends its
    /// chunk). Part of the next commit.
    pub fn complete_now(&mut self) -> Result<(), LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        self.complete_chunk().inspect_err(|_| self.poison())
    }

    fn complete_chunk(&mut self) -> Result<(), LogError> {
        self.write_buffer()?;
        let size = self.log.cfg.chunk_size;
        let base = self.chunk.header.start as u64 * size;
        let used = self.pos - base;
        let crc = std::mem::replace(&mut self.crc, crc32fast::Hasher::new()).finalize();
        let footer = ChunkFooter {
            logical_size: used,
            physical_size: used,
            posmap_entries: 0,
            data_crc: crc,
            posmap_crc: 0,
        };
        let c = &self.chunk;
        c.file
            .write_all_at(&footer.encode(), HEADER_SIZE + size)
            .map_err(LogError::io("write footer", &c.path))?;
        c.data_end.store(used, Ordering::Release);
        self.completed.push(c.clone());
        let next = c.header.end + 1;
        self.chunk = self.log.new_chunk(next)?;
        self.dir_dirty = true;
        self.pos = next as u64 * size;
        self.written = self.pos;
        self.log.prepare_chunk(next + 1);
        Ok(())
    }

    fn write_buffer(&mut self) -> Result<(), LogError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let size = self.log.cfg.chunk_size;
        let base = self.chunk.header.start as u64 * size;
        self.crc.update(&self.buf);
        // The write runs on to the end of its last page with the zeros that are there already
        // (the data area past the written end is all zeros: chunks are created zeroed and the
        // torn tail is zeroed at start-up). A write that covers a page in full never makes the
        // kernel read that page from disk first; a partial write to an uncached page does, and
        // new chunks are zeroed around the page cache, so without this nearly every commit that
        // starts a page would wait for a disk read.
        let at = HEADER_SIZE + self.written - base;
        let end = at + self.buf.len() as u64;
        let padded = end.next_multiple_of(PAGE_BYTES).min(HEADER_SIZE + size);
        self.buf.resize(self.buf.len() + (padded - end) as usize, 0);
        let c = &self.chunk;
        c.file.write_all_at(&self.buf, at).map_err(LogError::io("write", &c.path))?;
        self.written = self.pos;
        self.buf.clear();
        Ok(())
    }

    /// Makes everything staged durable, then moves `writer.chk` and the readable end. Any failure
    /// poisons the log.
    pub fn commit(&mut self) -> Result<u64, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        self.commit_inner().inspect_err(|_| self.poison())
    }

    fn commit_inner(&mut self) -> Result<u64, LogError> {
        let started = self.log.env.clock.monotonic();
        self.write_buffer()?;
        // `bug(..)` switches are test-only (src/buggify.rs): constant false without `sim`.
        let ack_before_fsync = crate::buggify::bug(crate::buggify::Bug::AckBeforeFsync);
        let syncs = &self.log.commit_syncs;
        for c in self.completed.drain(..) {
            if !ack_before_fsync {
                c.file.sync_data().map_err(LogError::io("sync", &c.path))?;
                syncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        if self.dir_dirty && !crate::buggify::bug(crate::buggify::Bug::SkipChunkDirFsync) {
            let dir = &self.log.cfg.dir;
            self.log.env.disk.sync_dir(dir).map_err(LogError::io("sync directory", dir))?;
            syncs.fetch_add(1, Ordering::Relaxed);
        }
        self.dir_dirty = false;
        let c = &self.chunk;
        if !ack_before_fsync {
            c.file.sync_data().map_err(LogError::io("sync", &c.path))?;
            syncs.fetch_add(1, Ordering::Relaxed);
        }
        let synced = self.log.env.clock.monotonic();
        let cps = &self.log.checkpoints;
        cps.writer
            .write_durable(self.pos as i64)
            .map_err(LogError::io("write checkpoint", cps.writer.path()))?;
        syncs.fetch_add(1, Ordering::Relaxed);
        self.log.committed.store(self.pos, Ordering::Release);
        // The chaser checkpoint follows without its own sync: it is flushed at index flushes and
        // shutdown, and after a crash recovery clamps it to writer.chk. The group is durable
        // already, so failing to write it must not turn the commit into a reported failure.
        if let Err(e) = cps.chaser.write(self.pos as i64) {
            tracing::warn!(error = %e, "writing chaser.chk failed; it is rewritten by the next commit");
        }
        let moved = self.log.env.clock.monotonic();
        crate::env::add_elapsed(&self.log.commit_data_ns, started, synced);
        crate::env::add_elapsed(&self.log.commit_checkpoint_ns, synced, moved);
        Ok(self.pos)
    }

    fn poison(&self) {
        tracing::error!("log write failed: the node stops accepting writes");
        self.log.poisoned.store(true, Ordering::Release);
    }
}
