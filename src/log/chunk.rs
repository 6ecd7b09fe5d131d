//! Chunk files: naming, the 128-byte header and footer, creation by zero-filling.
//!
//! A chunk file `chunk-NNNNNN.MMMMMM` (start number, version) holds `chunk_size` bytes of log data
//! between a header and a footer:
//!
//! ```text
//! header (128 B): magic "ANNALCHK" | u8 file type (2) | u8 format version | [2] 0 | u64 chunk size
//!                 | u32 start number | u32 end number | u8 scavenged | [3] 0 | [16] chunk id | 0…
//!                 | u32 crc32 of bytes 0..124
//! data:           records back to back, then zeros
//! footer (128 B): magic "ANNALEND" | u8 flags (1 = completed) | [7] 0 | u64 logical data size
//!                 | u64 physical data size | u32 posmap entries | u32 crc32 of the data bytes
//!                 | u32 crc32 of the posmap | 0… | u32 crc32 of bytes 0..124
//! ```
//!
//! A scavenged chunk (header flag set, version raised, possibly spanning several logical chunks
//! after a merge) holds only the records it kept, back to back, followed by a position map of
//! `u64 log position | u64 data offset` pairs; its file is as long as that, not `chunk_size`.
//!
//! The footer is the last 128 bytes of the file and is all zeros until the chunk is completed. A new
//! chunk is written in full (zeros) and synced when created, so later appends overwrite written
//! blocks: syncing those is faster than syncing a growing file or `fallocate`d space (figures in
//! docs/durability.md and docs/decisions.md).

use std::path::Path;

/// Header size in bytes.
pub const HEADER_SIZE: u64 = 128;
/// Footer size in bytes.
pub const FOOTER_SIZE: u64 = 128;
/// Chunk file format version written by this build.
pub const CHUNK_FORMAT_VERSION: u8 = 1;
/// File type byte of a chunk.
pub const FILE_TYPE_CHUNK: u8 = 2;
const HEADER_MAGIC: &[u8; 8] = b"ANNALCHK";
const FOOTER_MAGIC: &[u8; 8] = b"ANNALEND";
/// Footer flag: the chunk is complete and immutable.
pub const FOOTER_COMPLETED: u8 = 1;

/// Decoded chunk header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Data bytes per logical chunk.
    pub chunk_size: u64,
    /// First logical chunk number covered.
    pub start: u32,
    /// Last logical chunk number covered (greater than `start` for merged scavenged chunks).
    pub end: u32,
    /// Whether the chunk was rewritten by a scavenge.
    pub scavenged: bool,
    /// Id of this chunk: [`plain_id`] for a chunk as written (the same on every replica, so
    /// replicas' chunk files are byte-identical), random for a scavenged one (node-local).
    pub id: [u8; 16],
}

/// Decoded chunk footer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkFooter {
    /// Log bytes covered (records plus trailing padding that no record used).
    pub logical_size: u64,
    /// Data bytes actually present in the file.
    pub physical_size: u64,
    /// Entries of the position map (scavenged chunks).
    pub posmap_entries: u32,
    /// CRC32 of the physical data bytes.
    pub data_crc: u32,
    /// CRC32 of the position map (scavenged chunks; 0 otherwise).
    pub posmap_crc: u32,
}

impl ChunkHeader {
    /// Encodes to exactly [`HEADER_SIZE`] bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE as usize] {
        let mut b = [0u8; HEADER_SIZE as usize];
        b[0..8].copy_from_slice(HEADER_MAGIC);
        b[8] = FILE_TYPE_CHUNK;
        b[9] = CHUNK_FORMAT_VERSION;
        b[12..20].copy_from_slice(&self.chunk_size.to_le_bytes());
        b[20..24].copy_from_slice(&self.start.to_le_bytes());
        b[24..28].copy_from_slice(&self.end.to_le_bytes());
        b[28] = self.scavenged as u8;
        b[32..48].copy_from_slice(&self.id);
        let crc = crc32fast::hash(&b[0..124]);
        b[124..128].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8]) -> Result<ChunkHeader, &'static str> {
        if b.len() < HEADER_SIZE as usize {
            return Err("header too short");
        }
        if &b[0..8] != HEADER_MAGIC || b[8] != FILE_TYPE_CHUNK {
            return Err("not a chunk file (bad magic)");
        }
        if crc32fast::hash(&b[0..124]) != u32::from_le_bytes(b[124..128].try_into().unwrap_or_default()) {
            return Err("header checksum mismatch");
        }
        if b[9] != CHUNK_FORMAT_VERSION {
            return Err("unsupported chunk format version");
        }
        Ok(ChunkHeader {
            chunk_size: u64::from_le_bytes(b[12..20].try_into().unwrap_or_default()),
            start: u32::from_le_bytes(b[20..24].try_into().unwrap_or_default()),
            end: u32::from_le_bytes(b[24..28].try_into().unwrap_or_default()),
            scavenged: b[28] != 0,
            id: b[32..48].try_into().unwrap_or_default(),
        })
    }
}

impl ChunkFooter {
    /// Encodes to exactly [`FOOTER_SIZE`] bytes.
    pub fn encode(&self) -> [u8; FOOTER_SIZE as usize] {
        let mut b = [0u8; FOOTER_SIZE as usize];
        b[0..8].copy_from_slice(FOOTER_MAGIC);
        b[8] = FOOTER_COMPLETED;
        b[16..24].copy_from_slice(&self.logical_size.to_le_bytes());
        b[24..32].copy_from_slice(&self.physical_size.to_le_bytes());
        b[32..36].copy_from_slice(&self.posmap_entries.to_le_bytes());
        b[36..40].copy_from_slice(&self.data_crc.to_le_bytes());
        b[40..44].copy_from_slice(&self.posmap_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[0..124]);
        b[124..128].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a footer: `Ok(None)` for an all-zero (not completed) footer.
    pub fn decode(b: &[u8]) -> Result<Option<ChunkFooter>, &'static str> {
        if b.len() < FOOTER_SIZE as usize {
            return Err("footer too short");
        }
        if b.iter().all(|&x| x == 0) {
            return Ok(None);
        }
        if &b[0..8] != FOOTER_MAGIC {
            return Err("bad footer magic");
        }
        if crc32fast::hash(&b[0..124]) != u32::from_le_bytes(b[124..128].try_into().unwrap_or_default()) {
            return Err("footer checksum mismatch");
        }
        if b[8] & FOOTER_COMPLETED == 0 {
            return Ok(None);
        }
        Ok(Some(ChunkFooter {
            logical_size: u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()),
            physical_size: u64::from_le_bytes(b[24..32].try_into().unwrap_or_default()),
            posmap_entries: u32::from_le_bytes(b[32..36].try_into().unwrap_or_default()),
            data_crc: u32::from_le_bytes(b[36..40].try_into().unwrap_or_default()),
            posmap_crc: u32::from_le_bytes(b[40..44].try_into().unwrap_or_default()),
        }))
    }
}

/// The file name of chunk `start` at `version`.
pub fn file_name(start: u32, version: u32) -> String {
    format!("chunk-{start:06}.{version:06}")
}

/// The id of plain chunk `number`: `annal.chunk.` and the number, little-endian.
pub fn plain_id(number: u32) -> [u8; 16] {
    let mut id = *b"annal.chunk.\0\0\0\0";
    id[12..].copy_from_slice(&number.to_le_bytes());
    id
}

/// Parses `chunk-X.Y` (or the anchor's `chk-X.Y`) into `(start, version)`.
pub fn parse_file_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("chunk-").or_else(|| name.strip_prefix("chk-"))?;
    let (x, y) = rest.split_once('.')?;
    if x.is_empty()
        || y.is_empty()
        || !x.bytes().all(|c| c.is_ascii_digit())
        || !y.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    Some((x.parse().ok()?, y.parse().ok()?))
}

/// Whether `name` is a chunk file name.
pub fn is_chunk_name(name: &str) -> bool {
    parse_file_name(name).is_some()
}

/// Writes a fresh chunk file at `path`: header, `chunk_size` zero bytes, zero footer, all synced.
/// The caller renames it into place and syncs the directory.
pub fn create_file(
    disk: &dyn crate::env::Disk,
    path: &Path,
    header: &ChunkHeader,
) -> std::io::Result<std::sync::Arc<dyn crate::env::File>> {
    let f = disk.create_zeroed(path, HEADER_SIZE + header.chunk_size + FOOTER_SIZE)?;
    f.write_all_at(&header.encode(), 0)?;
    f.sync_data()?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(file_name(3, 1), "chunk-000003.000001");
        assert_eq!(parse_file_name("chunk-000003.000001"), Some((3, 1)));
        assert_eq!(parse_file_name("chk-12.0"), Some((12, 0)));
        assert_eq!(parse_file_name("chunk-000003.000001.tmp"), None);
        assert_eq!(parse_file_name("writer.chk"), None);
    }

    #[test]
    fn header_and_footer_round_trip_and_detect_damage() {
        let h = ChunkHeader { chunk_size: 4096, start: 2, end: 3, scavenged: true, id: [9; 16] };
        let mut b = h.encode();
        assert_eq!(ChunkHeader::decode(&b), Ok(h));
        b[20] ^= 1;
        assert!(ChunkHeader::decode(&b).is_err());
        let f = ChunkFooter {
            logical_size: 4000,
            physical_size: 3000,
            posmap_entries: 2,
            data_crc: 77,
            posmap_crc: 5,
        };
        let mut b = f.encode();
        assert_eq!(ChunkFooter::decode(&b), Ok(Some(f)));
        assert_eq!(ChunkFooter::decode(&[0; 128]), Ok(None));
        b[17] ^= 4;
        assert!(ChunkFooter::decode(&b).is_err());
    }
}
