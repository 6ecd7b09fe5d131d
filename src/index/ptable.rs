//! Immutable sorted index tables ("PTables"), one file per table named by a UUID in `index/`.
//!
//! ```text
//! header (128 B): magic "ANNALIDX" | u8 file type (1) | u8 version | [6] 0 | u64 entry count
//!                 | u32 block count | 0… | u32 crc32 of bytes 0..124
//! blocks (4096 B each): u16 entries | [2] 0 | entries (24 B: u64 hash, i64 event number,
//!                 u64 log position) | 0… | u32 crc32 of bytes 0..4092
//! midpoints:      the first entry of every block (24 B each)
//! footer (128 B): magic "ANNALIXE" | u64 midpoints offset | u32 crc32 of the midpoints | 0…
//!                 | u32 crc32 of bytes 0..124
//! ```
//!
//! Entries are sorted ascending by (hash, event number, position). Opening a table reads only the
//! header, footer and midpoints (one entry per block, kept in memory); a lookup binary-searches the
//! midpoints and reads the few blocks it needs, checking each block's checksum.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::Entry;
use crate::env::{Disk, File, OpenMode};

const MAGIC: &[u8; 8] = b"ANNALIDX";
const FOOTER_MAGIC: &[u8; 8] = b"ANNALIXE";
/// Bytes per block.
pub const BLOCK_SIZE: usize = 4096;
/// Entry size in bytes.
pub const ENTRY_SIZE: usize = 24;
/// Entries per block.
pub const ENTRIES_PER_BLOCK: usize = (BLOCK_SIZE - 8) / ENTRY_SIZE;
const HEADER_SIZE: u64 = 128;
const FOOTER_SIZE: u64 = 128;
const _: () = assert!(4 + ENTRIES_PER_BLOCK * ENTRY_SIZE <= BLOCK_SIZE - 4);

/// An error reading a table, with enough to name the damage.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// I/O failed.
    #[error("index table {path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// A checksum or shape check failed.
    #[error("index table {path} is corrupt at offset {offset}: {detail}")]
    Corrupt {
        /// File.
        path: PathBuf,
        /// Byte offset.
        offset: u64,
        /// What failed.
        detail: &'static str,
    },
}

/// An open table.
pub struct PTable {
    /// Its file name (a UUID).
    pub name: String,
    path: PathBuf,
    file: Arc<dyn File>,
    /// Entries in the table.
    pub count: u64,
    midpoints: Vec<Entry>,
}

fn put_entry(out: &mut [u8], e: &Entry) {
    out[0..8].copy_from_slice(&e.hash.to_le_bytes());
    out[8..16].copy_from_slice(&e.event_number.to_le_bytes());
    out[16..24].copy_from_slice(&e.position.to_le_bytes());
}

fn get_entry(b: &[u8]) -> Entry {
    Entry {
        hash: u64::from_le_bytes(b[0..8].try_into().unwrap_or_default()),
        event_number: i64::from_le_bytes(b[8..16].try_into().unwrap_or_default()),
        position: u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()),
    }
}

impl PTable {
    /// Writes sorted `entries` to `path` and syncs the file. The caller syncs the directory.
    pub fn write(disk: &dyn Disk, path: &Path, entries: impl Iterator<Item = Entry>) -> std::io::Result<u64> {
        let f = disk.open(path, OpenMode::CreateTruncate)?;
        let mut block = vec![0u8; BLOCK_SIZE];
        let mut in_block = 0usize;
        let mut blocks = 0u64;
        let mut count = 0u64;
        let mut mids: Vec<u8> = Vec::new();
        let mut out: Vec<u8> = Vec::with_capacity(64 * BLOCK_SIZE);
        let mut offset = HEADER_SIZE;
        let mut prev: Option<Entry> = None;
        let flush_block = |block: &mut Vec<u8>, n: usize, out: &mut Vec<u8>| {
            block[0..2].copy_from_slice(&(n as u16).to_le_bytes());
            let crc = crc32fast::hash(&block[..BLOCK_SIZE - 4]);
            block[BLOCK_SIZE - 4..].copy_from_slice(&crc.to_le_bytes());
            out.extend_from_slice(block);
            block.iter_mut().for_each(|b| *b = 0);
        };
        for e in entries {
            assert!(prev.is_none_or(|p| p < e), "index table entries must be strictly sorted");
            prev = Some(e);
            if in_block == 0 {
                let mut m = [0u8; ENTRY_SIZE];
                put_entry(&mut m, &e);
                mids.extend_from_slice(&m);
            }
            put_entry(&mut block[4 + in_block * ENTRY_SIZE..4 + (in_block + 1) * ENTRY_SIZE], &e);
            in_block += 1;
            count += 1;
            if in_block == ENTRIES_PER_BLOCK {
                flush_block(&mut block, in_block, &mut out);
                blocks += 1;
                in_block = 0;
                if out.len() >= 64 * BLOCK_SIZE {
                    f.write_all_at(&out, offset)?;
                    offset += out.len() as u64;
                    out.clear();
                }
            }
        }
        if in_block > 0 {
            flush_block(&mut block, in_block, &mut out);
            blocks += 1;
        }
        f.write_all_at(&out, offset)?;
        offset += out.len() as u64;
        let mid_offset = offset;
        f.write_all_at(&mids, mid_offset)?;
        offset += mids.len() as u64;
        let mut footer = [0u8; FOOTER_SIZE as usize];
        footer[0..8].copy_from_slice(FOOTER_MAGIC);
        footer[8..16].copy_from_slice(&mid_offset.to_le_bytes());
        footer[16..20].copy_from_slice(&crc32fast::hash(&mids).to_le_bytes());
        let crc = crc32fast::hash(&footer[..124]);
        footer[124..].copy_from_slice(&crc.to_le_bytes());
        f.write_all_at(&footer, offset)?;
        let mut header = [0u8; HEADER_SIZE as usize];
        header[0..8].copy_from_slice(MAGIC);
        header[8] = 1;
        header[9] = 1;
        header[16..24].copy_from_slice(&count.to_le_bytes());
        header[24..28].copy_from_slice(&(blocks as u32).to_le_bytes());
        let crc = crc32fast::hash(&header[..124]);
        header[124..].copy_from_slice(&crc.to_le_bytes());
        f.write_all_at(&header, 0)?;
        f.sync_data()?;
        Ok(count)
    }

    /// Opens a table, verifying header, footer and midpoints.
    pub fn open(disk: &dyn Disk, path: &Path) -> Result<PTable, TableError> {
        let io = |source| TableError::Io { path: path.to_path_buf(), source };
        let corrupt = |offset, detail| TableError::Corrupt { path: path.to_path_buf(), offset, detail };
        let file = disk.open(path, OpenMode::Read).map_err(io)?;
        let len = file.len().map_err(io)?;
        if len < HEADER_SIZE + FOOTER_SIZE {
            return Err(corrupt(0, "file too short"));
        }
        let mut h = [0u8; HEADER_SIZE as usize];
        file.read_exact_at(&mut h, 0).map_err(io)?;
        if &h[0..8] != MAGIC
            || crc32fast::hash(&h[..124]) != u32::from_le_bytes(h[124..].try_into().unwrap_or_default())
        {
            return Err(corrupt(0, "bad header"));
        }
        let count = u64::from_le_bytes(h[16..24].try_into().unwrap_or_default());
        let blocks = u32::from_le_bytes(h[24..28].try_into().unwrap_or_default()) as u64;
        let mut f = [0u8; FOOTER_SIZE as usize];
        file.read_exact_at(&mut f, len - FOOTER_SIZE).map_err(io)?;
        if &f[0..8] != FOOTER_MAGIC
            || crc32fast::hash(&f[..124]) != u32::from_le_bytes(f[124..].try_into().unwrap_or_default())
        {
            return Err(corrupt(len - FOOTER_SIZE, "bad footer"));
        }
        let mid_offset = u64::from_le_bytes(f[8..16].try_into().unwrap_or_default());
        if mid_offset != HEADER_SIZE + blocks * BLOCK_SIZE as u64
            || mid_offset + blocks * ENTRY_SIZE as u64 + FOOTER_SIZE != len
        {
            return Err(corrupt(len - FOOTER_SIZE, "sizes disagree"));
        }
        let mut mids = vec![0u8; blocks as usize * ENTRY_SIZE];
        file.read_exact_at(&mut mids, mid_offset).map_err(io)?;
        if crc32fast::hash(&mids) != u32::from_le_bytes(f[16..20].try_into().unwrap_or_default()) {
            return Err(corrupt(mid_offset, "midpoints checksum mismatch"));
        }
        let midpoints = mids.chunks_exact(ENTRY_SIZE).map(get_entry).collect();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(PTable { name, path: path.to_path_buf(), file, count, midpoints })
    }

    fn read_block(&self, i: usize) -> Result<Vec<Entry>, TableError> {
        let offset = HEADER_SIZE + (i * BLOCK_SIZE) as u64;
        let mut b = vec![0u8; BLOCK_SIZE];
        self.file
            .read_exact_at(&mut b, offset)
            .map_err(|source| TableError::Io { path: self.path.clone(), source })?;
        let corrupt = |detail| TableError::Corrupt { path: self.path.clone(), offset, detail };
        if crc32fast::hash(&b[..BLOCK_SIZE - 4])
            != u32::from_le_bytes(b[BLOCK_SIZE - 4..].try_into().unwrap_or_default())
        {
            return Err(corrupt("block checksum mismatch"));
        }
        let n = u16::from_le_bytes([b[0], b[1]]) as usize;
        if n == 0 || n > ENTRIES_PER_BLOCK {
            return Err(corrupt("block entry count out of range"));
        }
        Ok((0..n).map(|k| get_entry(&b[4 + k * ENTRY_SIZE..4 + (k + 1) * ENTRY_SIZE])).collect())
    }

    /// Entries with `lo <= entry <= hi`, ascending.
    pub fn range(&self, lo: Entry, hi: Entry, out: &mut Vec<Entry>) -> Result<(), TableError> {
        // The first block that can hold `lo` is the last one whose first entry is <= lo.
        let start = self.midpoints.partition_point(|m| *m <= lo).saturating_sub(1);
        for i in start..self.midpoints.len() {
            if self.midpoints[i] > hi {
                break;
            }
            for e in self.read_block(i)? {
                if e > hi {
                    return Ok(());
                }
                if e >= lo {
                    out.push(e);
                }
            }
        }
        Ok(())
    }

    /// Up to `limit` entries with `lo <= entry <= hi`, descending.
    pub fn range_desc(
        &self,
        lo: Entry,
        hi: Entry,
        limit: usize,
        out: &mut Vec<Entry>,
    ) -> Result<(), TableError> {
        let end = self.midpoints.partition_point(|m| *m <= hi);
        let mut taken = 0;
        for i in (0..end).rev() {
            for e in self.read_block(i)?.into_iter().rev() {
                if e < lo {
                    return Ok(());
                }
                if e <= hi {
                    out.push(e);
                    taken += 1;
                    if taken == limit {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// All entries, ascending (for merges).
    pub fn iter(&self) -> impl Iterator<Item = Result<Entry, TableError>> + '_ {
        (0..self.midpoints.len()).flat_map(move |i| match self.read_block(i) {
            Ok(es) => es.into_iter().map(Ok).collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        })
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of memory held for this table (midpoints).
    pub fn memory_bytes(&self) -> usize {
        self.midpoints.len() * std::mem::size_of::<Entry>()
    }
}
