//! Start-up recovery of the log ([`Log::open`]).
//!
//! Owns turning the files of `db/` into a consistent log: a `truncate.chk` below `writer.chk`
//! first truncates the log to it (the restore procedure); on a cluster node's log the whole
//! atomic writes synced past `writer.chk` in its chunk are adopted (never while `truncate.chk` is
//! set), and past them the whole chunk is zeroed; otherwise anything past `writer.chk` is a torn
//! tail and is zeroed; chunk files past the writer's chunk are leftovers of pre-allocation and are
//! removed; superseded scavenged versions and merged chunks are removed. Recovery reads only the
//! writer's chunk, never the whole log: committed records are checksummed on every read, and the
//! index rebuild verifies the tail it replays.
//!
//! Invariants it establishes: every chunk below the writer's chunk is complete (has a footer)
//! durably, including the one that ends exactly at `writer.chk`; the names the log builds on are
//! durable in `db/`; the data area past `writer.chk` (which names what was adopted) is zero;
//! `chaser.chk` and `epoch.chk` do not point past `writer.chk`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use super::checkpoint::Checkpoint;
use super::chunk::{self, ChunkFooter, FOOTER_SIZE, HEADER_SIZE};
use super::{
    data_crc, read_header, Checkpoints, Chunk, Layout, Log, LogConfig, LogError, LogWriter, RecoveryReport,
};
use super::{record, MIN_CHUNK_SIZE, TAIL_SCAN_BYTES};
use crate::env::{Env, File, OpenMode};

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
            replicated: std::sync::atomic::AtomicBool::new(false),
            durable: AtomicU64::new(0),
            checkpointed: AtomicU64::new(0),
            checkpointed_at_ns: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            handed: AtomicU64::new(0),
            checkpoint_lock: Mutex::new(()),
            checkpoints,
            prepared: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            max_body,
            commit_syncs: AtomicU64::new(0),
            commit_data_ns: AtomicU64::new(0),
            commit_checkpoint_ns: AtomicU64::new(0),
            data_phase: crate::metrics::instruments::Histogram::latency(),
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
        // A follower installing a leader's scavenged chunk renames it into place before it moves
        // writer.chk past it: found complete at the writer's chunk with the writer at its start,
        // it is adopted (never after a truncation, which must stay a truncation).
        if report.truncated_to.is_none() && writer % size == 0 {
            if let Some(end) = self.installed_ahead(latest, (writer / size) as u32)? {
                tracing::warn!(
                    from = writer,
                    to = end,
                    "adopting a chunk installed from the leader before a crash"
                );
                writer = end;
            }
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
            let header = read_header(&*file, &path)?;
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
        // A cluster node's log adopts the whole records synced past writer.chk in its chunk
        // (never while a truncation is pending: what it drops must stay dropped).
        let base = current.header.start as u64 * size;
        let adopting = self.cfg.adopt_synced_tail && truncate < 0;
        let mut adopted_epoch = None;
        if adopting {
            let (end, epoch) = self.adopt_tail(&current, writer - base)?;
            if end > writer - base {
                tracing::info!(from = writer, to = base + end, "adopting the records synced past writer.chk");
                report.adopted_bytes = base + end - writer;
                writer = base + end;
                adopted_epoch = epoch;
            }
        }
        // The writer's chunk: undo a completion that was not committed, zero the torn tail.
        let local = writer - base;
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
        // Past an adopted end the whole chunk is zeroed: a later adoption must find nothing there
        // but what this run writes (an earlier run's unsynced writes can leave holes).
        report.torn_bytes = self.zero_tail(&current, local, truncate >= 0 || adopting)?;
        current.file.sync_data().map_err(LogError::io("sync", &current.path))?;
        if report.truncated_to.is_some() || cps.writer.read() != writer as i64 {
            cps.writer.write_durable(writer as i64).map_err(LogError::io("write", cps.writer.path()))?;
        }
        if cps.chaser.read() > writer as i64 || cps.chaser.read() < 0 {
            cps.chaser.write_durable(writer as i64).map_err(LogError::io("write", cps.chaser.path()))?;
        }
        if let Some(at) = adopted_epoch {
            cps.epoch.write_durable(at as i64).map_err(LogError::io("write", cps.epoch.path()))?;
        } else if cps.epoch.read() >= writer as i64 {
            cps.epoch.write_durable(-1).map_err(LogError::io("write", cps.epoch.path()))?;
        }
        if truncate >= 0 {
            cps.truncate.write_durable(-1).map_err(LogError::io("write", cps.truncate.path()))?;
        }
        self.durable.store(writer, Ordering::Release);
        self.checkpointed.store(writer, Ordering::Release);
        self.synced.store(writer, Ordering::Release);
        self.handed.store(writer, Ordering::Release);
        self.committed.store(writer, Ordering::Release);
        Ok(writer)
    }

    /// Zeroes non-zero bytes from `local` on. A torn tail is at most one group commit long, so the
    /// scan stops at the first all-zero block; a truncation (`full`) zeroes to the end.
    /// The end of a complete scavenged chunk that starts at chunk `number`, if that is what the
    /// latest file of `number` holds.
    fn installed_ahead(&self, latest: &BTreeMap<u32, u32>, number: u32) -> Result<Option<u64>, LogError> {
        let Some(&version) = latest.get(&number) else { return Ok(None) };
        let path = self.cfg.dir.join(chunk::file_name(number, version));
        let file = self.env.disk.open(&path, OpenMode::Read).map_err(LogError::io("open", &path))?;
        let header = read_header(&*file, &path)?;
        if !header.scavenged || header.start != number {
            return Ok(None);
        }
        let flen = file.len().map_err(LogError::io("stat", &path))?;
        let mut fb = [0u8; FOOTER_SIZE as usize];
        file.read_exact_at(&mut fb, flen.saturating_sub(FOOTER_SIZE))
            .map_err(LogError::io("read footer", &path))?;
        Ok(match ChunkFooter::decode(&fb) {
            Ok(Some(_)) => Some((header.end as u64 + 1) * self.cfg.chunk_size),
            _ => None,
        })
    }

    /// Where the whole, checksummed records that follow each other from `local` in `chunk` end
    /// (chunk-local) after the last of them that closes an atomic write or is an epoch record
    /// (a write is adopted whole or not at all), stopping before any record that would end at the
    /// chunk's end; and the position of the last epoch record among them. A record that fails
    /// its checks is read again once (a read can be corrupted in flight) before the scan stops
    /// there.
    fn adopt_tail(&self, chunk: &Chunk, local: u64) -> Result<(u64, Option<u64>), LogError> {
        let size = self.cfg.chunk_size;
        let base = chunk.header.start as u64 * size;
        let (mut at, mut buf_at) = (local, local);
        let mut buf: Vec<u8> = Vec::new();
        let mut last_epoch = None;
        let mut closed = local;
        let mut reread = false;
        while at < size {
            let off = (at - buf_at) as usize;
            match record::decode(&buf[off.min(buf.len())..], base + at, self.max_body) {
                Ok((rec, len)) => {
                    if at + len as u64 >= size {
                        break;
                    }
                    let closes = match &rec {
                        record::Record::Epoch(_) => {
                            last_epoch = Some(base + at);
                            true
                        }
                        record::Record::Event(e) => e.flags & record::flags::TX_END != 0,
                    };
                    at += len as u64;
                    if closes {
                        closed = at;
                    }
                    reread = false;
                }
                Err(record::FrameError::Short { needed }) if buf_at != at || buf.len() < needed => {
                    if needed as u64 > size - at {
                        break;
                    }
                    let n = needed.max(super::SCAN_READ_BYTES).min((size - at) as usize);
                    buf = vec![0u8; n];
                    chunk.read(&mut buf, at)?;
                    buf_at = at;
                }
                Err(record::FrameError::Empty) | Err(record::FrameError::Short { .. }) => break,
                Err(_) if !reread => {
                    // Read it again from the device's copy.
                    reread = true;
                    buf.clear();
                    buf_at = at;
                }
                Err(_) => break,
            }
        }
        // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
        if crate::buggify::bug(crate::buggify::Bug::AdoptPartialWrite) {
            return Ok((at, last_epoch));
        }
        Ok((closed, last_epoch))
    }

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
