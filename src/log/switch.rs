//! Redaction's side of the log: where an event's record lies in its chunk file, what a chunk
//! with some events redacted must look like, and the atomic switch to such a chunk.
//!
//! A redacted event keeps its record's place, length and every field except two: its flags gain
//! [`flags::IS_REDACTED`] and each data byte becomes `0xFF`; its checksum and the chunk footer's
//! data checksum are recomputed. The log does not trust the candidate file it is handed: it
//! builds the expected redacted chunk itself from the chunk in service and switches only when the
//! candidate is identical to it, byte for byte. So a candidate that changes anything else (another
//! record, a length, the header, the position map) is refused and nothing changes.
//!
//! The switch: the candidate is synced, renamed to the chunk's next version and the directory
//! synced (a crash from here on recovers to the new version, the highest), then it replaces the
//! old chunk in the chunk map in one step under the map's lock, and the old file is removed.
//! Readers that hold the old chunk finish their read on it; readers after the switch see the new
//! one: never a mix. A failure after the rename poisons the log (it refuses writes and further
//! switches until a restart, which opens the new version): the chunk map never keeps serving a
//! version older than the newest file of the chunk.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::chunk::{self, ChunkFooter, FOOTER_SIZE, HEADER_SIZE};
use super::record::{self, flags, Record};
use super::{read_header, Chunk, Layout, Log, LogError};
use crate::env::OpenMode;

/// Where an event's record lies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Located {
    /// The chunk file's name in `db/`.
    pub file: String,
    /// Offset of the record's frame from the start of the file (header included).
    pub file_offset: u64,
    /// Whether the chunk is complete (only complete chunks can be redacted).
    pub complete: bool,
}

/// Why a chunk switch was refused.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// A name with a path in it, or not of the expected form.
    #[error("invalid file name {0:?}")]
    BadName(String),
    /// The target is not the chunk file in service.
    #[error("{0} is not a chunk in service")]
    NotInService(String),
    /// The target is the chunk being written.
    #[error("{0} is the active chunk, which cannot be redacted")]
    Active(String),
    /// A position named is not a record of the target chunk.
    #[error("no event record at log position {0} in the chunk")]
    NoSuchRecord(u64),
    /// The candidate differs from the expected redacted chunk.
    #[error("the candidate {file} differs from the expected redacted chunk at offset {offset}")]
    Mismatch {
        /// The candidate.
        file: String,
        /// First differing byte.
        offset: u64,
    },
    /// The log failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// Rewrites the record framed at `frame` (read from log position `pos`) as redacted.
fn redact_frame(frame: &[u8], pos: u64, max_body: u32) -> Result<Vec<u8>, SwitchError> {
    let (rec, _) = record::decode(frame, pos, max_body).map_err(|_| SwitchError::NoSuchRecord(pos))?;
    let Record::Event(mut e) = rec else { return Err(SwitchError::NoSuchRecord(pos)) };
    e.flags |= flags::IS_REDACTED;
    e.data = bytes::Bytes::from(vec![0xFF; e.data.len()]);
    let mut out = Vec::with_capacity(frame.len());
    record::encode_event(&e, &mut out);
    debug_assert_eq!(out.len(), frame.len());
    Ok(out)
}

/// Builds the redacted version of a complete chunk file's bytes: the records at `positions`
/// redacted, the footer's data checksum recomputed.
pub fn redact_chunk_bytes(
    bytes: &mut [u8],
    chunk_size: u64,
    positions: &[u64],
    locate: impl Fn(u64) -> Option<u64>,
) -> Result<(), SwitchError> {
    let max_body = u32::try_from(chunk_size).unwrap_or(u32::MAX);
    let len = bytes.len() as u64;
    let footer = ChunkFooter::decode(&bytes[(len - FOOTER_SIZE) as usize..])
        .map_err(|d| LogError::Invalid(format!("chunk footer: {d}")))?
        .ok_or_else(|| SwitchError::Active("the chunk".into()))?;
    for &pos in positions {
        let off = locate(pos).ok_or(SwitchError::NoSuchRecord(pos))?;
        let at = (HEADER_SIZE + off) as usize;
        let flen = bytes
            .get(at..at + 4)
            .map(|b| {
                u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize
                    + record::FRAME_OVERHEAD as usize
            })
            .ok_or(SwitchError::NoSuchRecord(pos))?;
        let frame = bytes.get(at..at + flen).ok_or(SwitchError::NoSuchRecord(pos))?;
        let new = redact_frame(frame, pos, max_body)?;
        bytes[at..at + flen].copy_from_slice(&new);
    }
    let data = &bytes[HEADER_SIZE as usize..(HEADER_SIZE + footer.physical_size) as usize];
    let f = ChunkFooter { data_crc: crc32fast::hash(data), ..footer };
    let at = (len - FOOTER_SIZE) as usize;
    bytes[at..].copy_from_slice(&f.encode());
    Ok(())
}

impl Log {
    /// Where the record at log position `pos` lies, if a chunk in service holds it.
    pub fn locate(&self, pos: u64) -> Option<Located> {
        let c = self.chunk_for(pos)?;
        let base = c.header.start as u64 * self.cfg.chunk_size;
        let off = c.offset_of(base, pos)?;
        Some(Located {
            file: c.path.file_name()?.to_string_lossy().into_owned(),
            file_offset: HEADER_SIZE + off,
            complete: c.data_end.load(std::sync::atomic::Ordering::Acquire) != u64::MAX,
        })
    }

    /// Switches chunk file `target` (the one in service) to `candidate` (a `.tmp` file in `db/`),
    /// which must be exactly `target` with the events at `positions` redacted. Returns the new
    /// file's name. On any refusal nothing changes (the candidate is left for its owner).
    pub fn switch_redacted(
        &self,
        target: &str,
        candidate: &str,
        positions: &[u64],
    ) -> Result<String, SwitchError> {
        for n in [target, candidate] {
            if n.contains('/') || n.contains('\\') || n.contains("..") {
                return Err(SwitchError::BadName(n.to_string()));
            }
        }
        if self.is_poisoned() {
            return Err(SwitchError::Log(LogError::Poisoned));
        }
        let (start, version) =
            chunk::parse_file_name(target).ok_or_else(|| SwitchError::BadName(target.into()))?;
        if !candidate.ends_with(".tmp") {
            return Err(SwitchError::BadName(candidate.into()));
        }
        let old = self
            .chunks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&start)
            .filter(|c| c.version == version)
            .cloned()
            .ok_or_else(|| SwitchError::NotInService(target.into()))?;
        if old.data_end.load(std::sync::atomic::Ordering::Acquire) == u64::MAX {
            return Err(SwitchError::Active(target.into()));
        }
        let base = start as u64 * self.cfg.chunk_size;
        let positions: Vec<u64> = positions.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
        let mut expected =
            old.file.read_vec_at(old.file_len() as usize, 0).map_err(LogError::io("read", &old.path))?;
        redact_chunk_bytes(&mut expected, self.cfg.chunk_size, &positions, |p| {
            if p < base || p >= (old.header.end as u64 + 1) * self.cfg.chunk_size {
                return None;
            }
            old.offset_of(base, p)
        })?;
        let cpath = self.cfg.dir.join(candidate);
        let cfile = self.env.disk.open(&cpath, OpenMode::Read).map_err(LogError::io("open", &cpath))?;
        let clen = cfile.len().map_err(LogError::io("stat", &cpath))?;
        if clen != expected.len() as u64 && !crate::buggify::bug(crate::buggify::Bug::SwitchWithoutValidation)
        {
            return Err(SwitchError::Mismatch {
                file: candidate.into(),
                offset: clen.min(expected.len() as u64),
            });
        }
        let got = cfile.read_vec_at(clen as usize, 0).map_err(LogError::io("read", &cpath))?;
        // The test-only bug switch takes the candidate on trust, for the simulator to catch.
        let validate = !crate::buggify::bug(crate::buggify::Bug::SwitchWithoutValidation);
        if let Some(i) = got.iter().zip(&expected).position(|(a, b)| a != b).filter(|_| validate) {
            return Err(SwitchError::Mismatch { file: candidate.into(), offset: i as u64 });
        }
        drop(cfile);
        // Into service: the candidate durable under the next version's name, then the map.
        let next = self
            .env
            .disk
            .list(&self.cfg.dir)
            .map_err(LogError::io("list", &self.cfg.dir))?
            .iter()
            .filter_map(|n| chunk::parse_file_name(n))
            .filter(|(s, _)| *s == start)
            .map(|(_, v)| v)
            .max()
            .unwrap_or(version)
            + 1;
        let path = self.cfg.dir.join(chunk::file_name(start, next));
        let w = self.env.disk.open(&cpath, OpenMode::ReadWrite).map_err(LogError::io("open", &cpath))?;
        w.sync_data().map_err(LogError::io("sync", &cpath))?;
        drop(w);
        self.env.disk.rename(&cpath, &path).map_err(LogError::io("rename", &cpath))?;
        // From here on the new version is (or may become) the chunk a restart opens. Should it not
        // also go into service now, the log is poisoned (read-only until a restart, which opens
        // it): a chunk map that kept the old version would serve the event unredacted, and a later
        // switch of the chunk would build on the old version and undo this redaction.
        let installed = self.put_in_service(&old, &path, next);
        if installed.is_err() {
            tracing::error!(chunk = %path.display(), "redaction switch failed after its rename: the log stops accepting writes");
            self.poisoned.store(true, std::sync::atomic::Ordering::Release);
        }
        installed?;
        Ok(chunk::file_name(start, next))
    }

    /// The switch's last steps: the renamed candidate at `path` (version `next`) made durable and
    /// put in service in place of `old`.
    fn put_in_service(&self, old: &Chunk, path: &std::path::Path, next: u32) -> Result<(), LogError> {
        self.env.disk.sync_dir(&self.cfg.dir).map_err(LogError::io("sync directory", &self.cfg.dir))?;
        let file = self.env.disk.open(path, OpenMode::ReadWrite).map_err(LogError::io("open", path))?;
        let header = read_header(&*file, path)?;
        let layout = match &old.layout {
            Layout::Plain => Layout::Plain,
            Layout::Mapped { map, data_len } => Layout::Mapped { map: map.clone(), data_len: *data_len },
        };
        let data_end = old.data_end.load(std::sync::atomic::Ordering::Acquire);
        let new = Arc::new(Chunk {
            header,
            version: next,
            path: path.to_path_buf(),
            file,
            data_end: AtomicU64::new(data_end),
            layout,
        });
        self.install(new)
    }
}
