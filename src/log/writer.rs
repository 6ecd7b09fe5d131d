//! The single writer of the log ([`LogWriter`]).
//!
//! A leader stages records with [`LogWriter::append`], which chooses their positions and chunk
//! boundaries; a follower writes the leader's records at the leader's positions with
//! [`LogWriter::append_at`], so both logs' chunks are byte-identical. [`LogWriter::flush`] makes
//! everything staged durable and moves `writer.chk` (the durable end), in two halves that the
//! commit pipeline runs for different groups at once: [`LogWriter::flush_data`] syncs the records
//! and [`Log::flush_checkpoint`] then names them in `writer.chk`; [`Log::publish`] moves the
//! committed position readers see, which a single node does at once ([`LogWriter::commit`]) and
//! a cluster's leader only once a quorum holds the records. [`LogWriter::truncate_to`] drops a
//! tail that is durable but not committed (a follower's divergent tail).
//!
//! Invariants: `writer.chk` never names bytes that are not durable; chunks below the writer's
//! chunk are complete and synced before `writer.chk` moves past them; the committed position never
//! passes `writer.chk`; after a failed write or sync the log is poisoned and refuses all writes.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::chunk::{ChunkFooter, FOOTER_SIZE, HEADER_SIZE};
use super::record;
use super::{data_crc, Chunk, Log, LogError, PAGE_BYTES};

/// The single writer of the log. Records are staged with [`LogWriter::append`] (a leader) or
/// [`LogWriter::append_at`] (a follower) and made durable, all together, by [`LogWriter::flush`]
/// or [`LogWriter::commit`] (group commit).
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
    pub(super) fn resume(log: Arc<Log>, pos: u64) -> Result<LogWriter, LogError> {
        let chunk = log.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        let base = chunk.header.start as u64 * log.cfg.chunk_size;
        let crc = data_crc(&*chunk.file, &chunk.path, pos - base)?;
        log.prepare_chunk(chunk.header.end + 1);
        log.handed.store(pos, Ordering::Release);
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
        self.set_written(self.pos);
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
        self.set_written(self.pos);
        self.buf.clear();
        Ok(())
    }

    /// Makes everything staged durable, then moves `writer.chk` and the committed position
    /// readers see (a single node's commit: [`LogWriter::flush`] then [`Log::publish`]). Any
    /// failure poisons the log.
    pub fn commit(&mut self) -> Result<u64, LogError> {
        let end = self.flush()?;
        self.log.publish(end);
        Ok(end)
    }

    /// Makes everything staged durable and moves `writer.chk` (the durable end), without moving
    /// the committed position: readers do not see the records until [`Log::publish`]. Any failure
    /// poisons the log. ([`LogWriter::flush_data`] then [`Log::flush_checkpoint`].)
    pub fn flush(&mut self) -> Result<u64, LogError> {
        let end = self.flush_data()?;
        self.log.flush_checkpoint(end)
    }

    /// The first half of [`LogWriter::flush`]: writes everything staged and syncs it (the
    /// chunks completed since the last flush, the directory when a chunk was added, the current
    /// chunk), without moving `writer.chk`. Returns the synced end, which
    /// [`Log::flush_checkpoint`] may then name; until it does, the records are not durable (a
    /// restart drops them). The commit pipeline runs the next group's `flush_data` while the
    /// previous group's checkpoint is flushed. Any failure poisons the log.
    pub fn flush_data(&mut self) -> Result<u64, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        self.flush_data_inner().inspect_err(|_| self.poison())
    }

    fn flush_data_inner(&mut self) -> Result<u64, LogError> {
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
        self.log.synced.fetch_max(self.pos, Ordering::AcqRel);
        let ended = self.log.env.clock.monotonic();
        crate::env::add_elapsed(&self.log.commit_data_ns, started, ended);
        self.log.data_phase.observe_duration(ended.saturating_sub(started));
        Ok(self.pos)
    }

    /// Hands every staged record to the files without syncing them and returns their end: a
    /// cluster's leader ships them to its followers ([`Log::scan_written`]) while its own
    /// [`LogWriter::flush`] runs. They are not durable here until that flush. Any failure
    /// poisons the log.
    pub fn write_out(&mut self) -> Result<u64, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        self.write_buffer().inspect_err(|_| self.poison())?;
        Ok(self.pos)
    }

    /// Stages a leader's record at its position `pos` (a follower's write): `frame` is the whole
    /// encoded record, which must be valid (checksum, its own position equal to `pos`) and start
    /// at the writer's position, or at the start of the next chunk when the leader completed the
    /// current one there (the current chunk is then completed, as the leader did). Nothing is
    /// durable before [`LogWriter::flush`]. Returns the record, decoded while it was checked.
    pub fn append_at(&mut self, pos: u64, frame: &[u8]) -> Result<record::Record, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        let size = self.log.cfg.chunk_size;
        let len = frame.len() as u64;
        if len > size {
            return Err(LogError::RecordTooLarge { len, chunk_size: size });
        }
        let rec = match record::decode(frame, pos, self.log.max_body) {
            Ok((rec, n)) if n as u64 == len => rec,
            Ok(_) => {
                return Err(LogError::Misplaced {
                    position: pos,
                    detail: "the frame holds more than one record".into(),
                })
            }
            Err(e) => return Err(LogError::Misplaced { position: pos, detail: e.to_string() }),
        };
        let base = self.chunk.header.start as u64 * size;
        let next_chunk = (self.chunk.header.end as u64 + 1) * size;
        if pos == next_chunk && self.pos > base {
            self.complete_chunk().inspect_err(|_| self.poison())?;
        } else if pos != self.pos {
            return Err(LogError::Misplaced {
                position: pos,
                detail: format!("the log's end is {}", self.pos),
            });
        }
        let base = self.chunk.header.start as u64 * size;
        if pos - base + len > size {
            return Err(LogError::Misplaced {
                position: pos,
                detail: "the record runs past its chunk".into(),
            });
        }
        self.buf.extend_from_slice(frame);
        self.pos += len;
        Ok(rec)
    }

    /// Drops every record at or after `pos` (a record boundary at or above the committed
    /// position, at most the writer's position): a follower's divergent tail. `writer.chk` is
    /// lowered first, so a crash part-way leaves recovery to finish the job (it zeroes past
    /// `writer.chk` and removes chunks past the writer's chunk). Chunks after `pos`'s chunk are
    /// removed, that chunk is reopened for writing (its footer cleared) and its bytes from `pos`
    /// on are zeroed and synced. `epoch.chk` is reset when it named a dropped epoch record.
    /// Committed records cannot be truncated online: that is `truncate.chk` and a restart.
    pub fn truncate_to(&mut self, pos: u64) -> Result<(), LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        if pos < self.log.committed() || pos > self.pos {
            return Err(LogError::Misplaced {
                position: pos,
                detail: format!(
                    "online truncation must stay between the committed position {} and the log's end {}",
                    self.log.committed(),
                    self.pos
                ),
            });
        }
        if pos >= self.written {
            // Only staged bytes go.
            self.buf.truncate((pos - self.written) as usize);
            self.pos = pos;
            return Ok(());
        }
        self.truncate_written(pos).inspect_err(|_| self.poison())
    }

    fn truncate_written(&mut self, pos: u64) -> Result<(), LogError> {
        let log = self.log.clone();
        let size = log.cfg.chunk_size;
        let cps = &log.checkpoints;
        self.buf.clear();
        // A log that adopts its synced tail would adopt the dropped records again after a crash
        // before they are zeroed: `writer.chk` first names what stays of its durable records
        // (so nothing kept depends on adoption), then `truncate.chk` holds the truncation until
        // the zeroes are synced (recovery finishes it, and adopts nothing, while it is set).
        let guard = log.cfg.adopt_synced_tail;
        if guard {
            let keep = log.durable().min(pos);
            if log.checkpointed() < keep {
                log.flush_checkpoint(keep)?;
            }
            cps.truncate
                .write_durable(pos as i64)
                .map_err(LogError::io("write checkpoint", cps.truncate.path()))?;
        }
        // `bug(..)` switches are test-only (src/buggify.rs): constant false without `sim`.
        {
            let _chk = log.checkpoint_lock.lock().unwrap_or_else(|e| e.into_inner());
            if log.checkpointed() > pos && !crate::buggify::bug(crate::buggify::Bug::TruncateKeepsWriterChk) {
                cps.writer
                    .write_durable(pos as i64)
                    .map_err(LogError::io("write checkpoint", cps.writer.path()))?;
                log.checkpointed.store(pos, Ordering::Release);
            }
            if log.durable() > pos && log.checkpointed() <= pos {
                log.durable.store(pos, Ordering::Release);
            }
            log.synced.store(pos.max(log.durable()), Ordering::Release);
        }
        if cps.chaser.read() > pos as i64 {
            cps.chaser.write(pos as i64).map_err(LogError::io("write checkpoint", cps.chaser.path()))?;
        }
        if cps.epoch.read() >= pos as i64 {
            cps.epoch.write_durable(-1).map_err(LogError::io("write checkpoint", cps.epoch.path()))?;
        }
        let target = log.chunk_for(pos).ok_or(LogError::OutOfRange(pos))?;
        let base = target.header.start as u64 * size;
        // What was written into `target` past `pos` (all of it when later chunks were started).
        let dirty_end = if Arc::ptr_eq(&target, &self.chunk) { self.written } else { base + size };
        if !Arc::ptr_eq(&target, &self.chunk) {
            let dropped: Vec<Arc<Chunk>> = {
                let mut chunks = log.chunks.write().unwrap_or_else(|e| e.into_inner());
                let later: Vec<u32> = chunks.range(target.header.start + 1..).map(|(k, _)| *k).collect();
                later.iter().filter_map(|k| chunks.remove(k)).collect()
            };
            for c in &dropped {
                log.env.disk.remove(&c.path).map_err(LogError::io("remove truncated chunk", &c.path))?;
            }
            log.env.disk.sync_dir(&log.cfg.dir).map_err(LogError::io("sync directory", &log.cfg.dir))?;
            self.completed.clear();
            self.dir_dirty = false;
            target
                .file
                .write_all_at(&[0u8; FOOTER_SIZE as usize], HEADER_SIZE + size)
                .map_err(LogError::io("clear footer", &target.path))?;
            target.data_end.store(u64::MAX, Ordering::Release);
            self.chunk = target.clone();
            log.prepare_chunk(target.header.end + 1);
        }
        let end = (dirty_end - base).next_multiple_of(PAGE_BYTES).min(size);
        crate::env::write_zeros(&*target.file, HEADER_SIZE + pos - base, HEADER_SIZE + end)
            .map_err(LogError::io("zero truncated tail", &target.path))?;
        target.file.sync_data().map_err(LogError::io("sync", &target.path))?;
        if guard {
            cps.truncate.write_durable(-1).map_err(LogError::io("write checkpoint", cps.truncate.path()))?;
        }
        self.crc = data_crc(&*target.file, &target.path, pos - base)?;
        self.pos = pos;
        self.set_written(pos);
        Ok(())
    }

    /// Puts in service a complete chunk received from the leader in place of the empty chunk
    /// this writer is at the start of (a follower catching up through chunks the leader
    /// scavenged), and moves past it. `writer.chk` moves first (the chunk is durable already), so
    /// a crash before the swap leaves recovery to adopt it. Returns the new end of the log.
    pub fn adopt_chunk(&mut self, chunk: Arc<Chunk>) -> Result<u64, LogError> {
        if self.log.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        let size = self.log.cfg.chunk_size;
        if chunk.header.start == self.chunk.header.end + 1 && self.pos > self.chunk.header.start as u64 * size
        {
            // The leader completed the writer's chunk where it is: complete it likewise.
            self.complete_chunk().inspect_err(|_| self.poison())?;
        }
        let base = self.chunk.header.start as u64 * size;
        if self.pos != base || !self.buf.is_empty() || chunk.header.start != self.chunk.header.start {
            return Err(LogError::Misplaced {
                position: chunk.header.start as u64 * size,
                detail: format!(
                    "a whole chunk can only be adopted at the start of the writer's chunk ({base})"
                ),
            });
        }
        self.adopt_inner(chunk).inspect_err(|_| self.poison())
    }

    fn adopt_inner(&mut self, chunk: Arc<Chunk>) -> Result<u64, LogError> {
        let log = self.log.clone();
        let size = log.cfg.chunk_size;
        let next = chunk.header.end + 1;
        let end = next as u64 * size;
        let cps = &log.checkpoints;
        {
            let _chk = log.checkpoint_lock.lock().unwrap_or_else(|e| e.into_inner());
            cps.writer
                .write_durable(end as i64)
                .map_err(LogError::io("write checkpoint", cps.writer.path()))?;
            log.checkpointed.store(end, Ordering::Release);
            log.durable.store(end, Ordering::Release);
            log.synced.fetch_max(end, Ordering::AcqRel);
        }
        log.install(chunk)?;
        self.chunk = log.new_chunk(next)?;
        self.dir_dirty = true;
        self.completed.clear();
        self.crc = crc32fast::Hasher::new();
        self.pos = end;
        self.set_written(end);
        log.prepare_chunk(next + 1);
        Ok(end)
    }

    /// Moves the end of what was handed to the files (here and for [`Log::scan_written`]).
    fn set_written(&mut self, to: u64) {
        self.written = to;
        self.log.handed.store(to, Ordering::Release);
    }

    fn poison(&self) {
        tracing::error!("log write failed: the node stops accepting writes");
        self.log.poisoned.store(true, Ordering::Release);
    }
}
