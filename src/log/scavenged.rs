//! Scavenged chunks: writing a replacement for complete chunks that keeps only some records
//! (with a position map from log positions to data offsets), and putting it in service.
//!
//! Invariants: a scavenged chunk is written to a temporary name, synced and renamed into place
//! before it is installed; the chunks it replaces stay readable until [`Log::install`], and
//! readers holding one finish on it; records keep their log positions.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::chunk::{self, ChunkFooter, ChunkHeader, HEADER_SIZE};
use super::record::{self, Record};
use super::{Chunk, Layout, Log, LogError, SCAVENGE_WRITE_BYTES};
use crate::env::{File, OpenMode};

impl Log {
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

    /// [`ScavengedWriter::push`] for records from elsewhere (a leader's): a record out of range
    /// or out of order is an error, not a bug.
    pub fn push_checked(&mut self, pos: u64, frame: &[u8]) -> Result<(), LogError> {
        if pos < self.range.0 || pos >= self.range.1 || self.map.last().is_some_and(|&(q, _)| q >= pos) {
            return Err(LogError::Misplaced {
                position: pos,
                detail: format!("outside the chunk range {}..{} or out of order", self.range.0, self.range.1),
            });
        }
        self.push(pos, frame)
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
