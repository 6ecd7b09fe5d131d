//! `annal backup verify DIR`: proves that a backup restores, without changing it.
//!
//! In order: the manifest must say the backup is complete; the log's checkpoints must exist and
//! agree (`0 <= chaser <= writer`, `epoch < writer`); every chunk up to the writer's must be
//! present, with a valid header and footer, every record's frame and checksum valid and at the
//! position it claims, and a completed chunk's data and position-map checksums right; every index
//! file the `indexmap` lists must exist with every block's checksum right, and the bloom filters,
//! the stream existence filter and `scavenging.db` must decode. Then the backup is opened as a
//! restored node would open it (`truncate.chk` from `chaser.chk`, then [`Store::recover`]) on an
//! [`OverlayDisk`], so whatever recovery writes stays in memory, and the log is read from the start
//! to report the last event's position and the number of streams.
//!
//! Invariant: nothing under the backup directory is created, written, renamed or removed; the
//! first damage found is reported with its file and byte offset.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::env::overlay::OverlayDisk;
use crate::env::{Env, File, OpenMode};
use crate::index::bloom::Bloom;
use crate::index::ptable::PTable;
use crate::log::chunk::{self, ChunkFooter, ChunkHeader, FOOTER_SIZE, HEADER_SIZE};
use crate::log::record::{self, FrameError, Record};
use crate::store::{Store, StoreConfig};

use super::{read_checkpoint, BackupError, BackupState, Manifest, DB_DIR, INDEX_DIR, LOG_CHECKPOINTS};

/// What a verified backup holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Chunk files checked.
    pub chunks: usize,
    /// Bytes of chunk files checked.
    pub chunk_bytes: u64,
    /// Log records whose frame and checksum were checked.
    pub records: u64,
    /// Index tables checked.
    pub index_tables: usize,
    /// Entries in those tables.
    pub index_entries: u64,
    /// `writer.chk`.
    pub writer: i64,
    /// `chaser.chk`: the restored log ends here.
    pub chaser: i64,
    /// Position of the last event a restored node holds.
    pub last_event_position: Option<u64>,
    /// Events a restored node holds.
    pub events: u64,
    /// Distinct streams those events belong to.
    pub streams: usize,
    /// Things that do not stop a restore but that an operator may want to know.
    pub notes: Vec<String>,
}

/// Verifies the backup in `dir` (see the module documentation).
pub fn verify(env: &Env, dir: &Path) -> Result<VerifyReport, BackupError> {
    let mut report = VerifyReport::default();
    match Manifest::read(env, dir)? {
        Some(m) if m.state == BackupState::InProgress => {
            return Err(BackupError::Incomplete(dir.to_path_buf()))
        }
        Some(_) => {}
        None if env.disk.exists(&dir.join(DB_DIR).join("writer.chk")) => {
            report.notes.push(format!("{} has no manifest: not made by `annal backup`", dir.display()));
        }
        None => {
            return Err(BackupError::NotA {
                path: dir.to_path_buf(),
                what: "a backup",
                detail: format!("it holds neither {} nor {DB_DIR}/writer.chk", super::MANIFEST),
            })
        }
    }
    let db = dir.join(DB_DIR);
    let index = dir.join(INDEX_DIR);
    let mut cps = BTreeMap::new();
    for name in LOG_CHECKPOINTS {
        let path = db.join(name);
        if !env.disk.exists(&path) {
            return Err(BackupError::Inconsistent { dir: db.clone(), detail: format!("{name} is missing") });
        }
        cps.insert(name, read_checkpoint(env, &path)?);
    }
    let (writer, chaser, epoch) = (cps["writer.chk"], cps["chaser.chk"], cps["epoch.chk"]);
    let bad = |detail: String| BackupError::Inconsistent { dir: db.clone(), detail };
    if writer < 0 {
        return Err(bad(format!("writer.chk holds {writer}")));
    }
    if chaser < 0 || chaser > writer {
        return Err(bad(format!("chaser.chk ({chaser}) must lie between 0 and writer.chk ({writer})")));
    }
    if epoch >= writer || epoch < -1 {
        return Err(bad(format!("epoch.chk ({epoch}) points at or past writer.chk ({writer})")));
    }
    report.writer = writer;
    report.chaser = chaser;
    let chunk_size = verify_chunks(env, &db, writer as u64, &mut report)?;
    verify_index(env, &index, chaser as u64, &mut report)?;
    open_as_restored(env, &db, &index, chunk_size, chaser, &mut report)?;
    Ok(report)
}

/// Checks every chunk up to the writer's; returns the chunk size.
fn verify_chunks(env: &Env, db: &Path, writer: u64, report: &mut VerifyReport) -> Result<u64, BackupError> {
    let names = env.disk.list(db).map_err(BackupError::io("list", db))?;
    let mut latest: BTreeMap<u32, u32> = BTreeMap::new();
    for (start, version) in names.iter().filter_map(|n| chunk::parse_file_name(n)) {
        let v = latest.entry(start).or_insert(version);
        *v = (*v).max(version);
    }
    if let Some(n) = names.iter().find(|n| n.ends_with(".old")) {
        report.notes.push(format!("{n} is a leftover of an interrupted differential backup"));
    }
    let mut chunk_size = None;
    let mut expect = 0u32;
    for (&start, &version) in &latest {
        let path = db.join(chunk::file_name(start, version));
        let size = chunk_size.unwrap_or(u64::MAX);
        if chunk_size.is_some() && start as u64 * size > writer {
            break;
        }
        if start < expect {
            report.notes.push(format!("{} is covered by a merged chunk before it", path.display()));
            continue;
        }
        if start != expect {
            return Err(BackupError::Inconsistent {
                dir: db.to_path_buf(),
                detail: format!("the chunk file for chunk {expect} is missing (next is {})", path.display()),
            });
        }
        let (header, len) = verify_chunk(env, &path, chunk_size, writer, report)?;
        chunk_size = Some(header.chunk_size);
        report.chunks += 1;
        report.chunk_bytes += len;
        expect = header.end + 1;
    }
    let size = match chunk_size {
        Some(s) => s,
        None if writer == 0 => crate::log::DEFAULT_CHUNK_SIZE,
        None => {
            return Err(BackupError::Inconsistent {
                dir: db.to_path_buf(),
                detail: format!("writer.chk is {writer} but there are no chunk files"),
            })
        }
    };
    let writer_chunk = (writer / size) as u32;
    if expect < writer_chunk || (expect == writer_chunk && writer % size != 0) {
        return Err(BackupError::Inconsistent {
            dir: db.to_path_buf(),
            detail: format!("writer.chk is {writer}, but the chunk file for chunk {expect} is missing"),
        });
    }
    Ok(size)
}

fn corrupt(path: &Path, offset: u64, detail: impl Into<String>) -> BackupError {
    BackupError::Corrupt { file: path.to_path_buf(), offset, detail: detail.into() }
}

/// Checks one chunk file; returns its header and length.
fn verify_chunk(
    env: &Env,
    path: &Path,
    chunk_size: Option<u64>,
    writer: u64,
    report: &mut VerifyReport,
) -> Result<(ChunkHeader, u64), BackupError> {
    let f = env.disk.open(path, OpenMode::Read).map_err(BackupError::io("open", path))?;
    let len = f.len().map_err(BackupError::io("stat", path))?;
    if len < HEADER_SIZE + FOOTER_SIZE {
        return Err(corrupt(path, 0, format!("file of {len} bytes is too short for a chunk")));
    }
    let hb = f.read_vec_at(HEADER_SIZE as usize, 0).map_err(BackupError::io("read", path))?;
    let header = ChunkHeader::decode(&hb).map_err(|d| corrupt(path, 0, d))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if chunk::parse_file_name(&name).map(|(s, _)| s) != Some(header.start) || header.end < header.start {
        return Err(corrupt(path, 20, "the header names another chunk"));
    }
    if chunk_size.is_some_and(|s| s != header.chunk_size) {
        return Err(corrupt(path, 12, "chunk size differs from the chunks before it"));
    }
    let size = header.chunk_size;
    let footer_at = len - FOOTER_SIZE;
    let fb = f.read_vec_at(FOOTER_SIZE as usize, footer_at).map_err(BackupError::io("read", path))?;
    let footer = ChunkFooter::decode(&fb).map_err(|d| corrupt(path, footer_at, d))?;
    let base = header.start as u64 * size;
    let max_body = u32::try_from(size).unwrap_or(u32::MAX);
    let writer_chunk = (writer / size) as u32;
    match footer {
        Some(ft) if header.scavenged => {
            let at = HEADER_SIZE + ft.physical_size;
            let pm = f
                .read_vec_at(ft.posmap_entries as usize * 16, at)
                .map_err(|_| corrupt(path, at, "the position map runs past the end of the file"))?;
            if crc32fast::hash(&pm) != ft.posmap_crc {
                return Err(corrupt(path, at, "position map checksum mismatch"));
            }
            let map: Vec<(u64, u64)> = pm
                .chunks_exact(16)
                .map(|e| {
                    (
                        u64::from_le_bytes(e[0..8].try_into().unwrap_or_default()),
                        u64::from_le_bytes(e[8..16].try_into().unwrap_or_default()),
                    )
                })
                .collect();
            let mut i = 0usize;
            let crc = walk(&*f, path, ft.physical_size, ft.physical_size, max_body, report, |off| {
                let e = map.get(i).filter(|e| e.1 == off).copied();
                i += 1;
                e.map(|e| e.0).ok_or_else(|| "a record that the position map does not list".to_string())
            })?;
            if crc != ft.data_crc {
                return Err(corrupt(path, HEADER_SIZE, "data checksum mismatch (outside the records)"));
            }
        }
        Some(ft) => {
            if ft.logical_size > size || ft.physical_size > size {
                return Err(corrupt(path, footer_at, "footer sizes exceed the chunk size"));
            }
            let crc =
                walk(&*f, path, ft.logical_size, ft.physical_size, max_body, report, |off| Ok(base + off))?;
            if crc != ft.data_crc {
                return Err(corrupt(path, HEADER_SIZE, "data checksum mismatch (outside the records)"));
            }
        }
        None => {
            let writers_own = header.start <= writer_chunk && writer_chunk <= header.end;
            let ends_at_writer = header.end + 1 == writer_chunk && writer == writer_chunk as u64 * size;
            if header.scavenged || !(writers_own || ends_at_writer) {
                return Err(corrupt(path, footer_at, "chunk below the writer checkpoint is not complete"));
            }
            let end = writer - base;
            walk(&*f, path, end, end, max_body, report, |off| Ok(base + off))?;
        }
    }
    Ok((header, len))
}

/// Reads the first `data_len` data bytes of a chunk in large pieces, checking that records tile
/// `[0, records_end)` exactly, each with a valid frame and checksum at the position `expected`
/// gives for its data offset. Returns the CRC32 of the `data_len` bytes.
fn walk(
    f: &dyn File,
    path: &Path,
    records_end: u64,
    data_len: u64,
    max_body: u32,
    report: &mut VerifyReport,
    mut expected: impl FnMut(u64) -> Result<u64, String>,
) -> Result<u32, BackupError> {
    const PIECE: u64 = 4 << 20;
    let mut crc = crc32fast::Hasher::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut buf_off = 0u64;
    let mut read_to = 0u64;
    let mut at = 0u64;
    let total = data_len.max(records_end);
    while read_to < total {
        let n = (total - read_to).min(PIECE);
        let piece = f
            .read_vec_at(n as usize, HEADER_SIZE + read_to)
            .map_err(|_| corrupt(path, HEADER_SIZE + read_to, "the file ends inside its data"))?;
        crc.update(&piece[..(data_len.saturating_sub(read_to).min(n)) as usize]);
        buf.drain(..(at.min(read_to) - buf_off) as usize);
        buf_off = at.min(read_to);
        buf.extend_from_slice(&piece);
        read_to += n;
        while at < records_end {
            let rel = (at - buf_off) as usize;
            let pos = expected(at).map_err(|d| corrupt(path, HEADER_SIZE + at, d))?;
            match record::decode(&buf[rel..], pos, max_body) {
                Ok((_, len)) => {
                    at += len as u64;
                    report.records += 1;
                }
                Err(FrameError::Short { .. }) if read_to < total => break,
                Err(FrameError::Empty) => {
                    return Err(corrupt(path, HEADER_SIZE + at, "no record where the log says one is"));
                }
                Err(e) => return Err(corrupt(path, HEADER_SIZE + at, e.to_string())),
            }
        }
        if at > records_end {
            return Err(corrupt(
                path,
                HEADER_SIZE + records_end,
                "a record runs past the end of the chunk's data",
            ));
        }
    }
    Ok(crc.finalize())
}

/// Checks the index files: the indexmap, each table it lists (every block), the bloom filters,
/// the stream existence filter and the scavenge database.
fn verify_index(env: &Env, index: &Path, chaser: u64, report: &mut VerifyReport) -> Result<(), BackupError> {
    let map = index.join("indexmap");
    if env.disk.exists(&map) {
        let bytes = env.read_file(&map).map_err(BackupError::io("read", &map))?;
        let (checkpoint, names) = crate::index::parse_indexmap(&bytes).map_err(|d| corrupt(&map, 0, d))?;
        if checkpoint > chaser {
            report.notes.push(format!(
                "the index covers up to {checkpoint}, past chaser.chk ({chaser}): a restored node rebuilds it from the log"
            ));
        }
        for name in names {
            let tp = index.join(&name);
            if !env.disk.exists(&tp) {
                return Err(BackupError::Inconsistent {
                    dir: index.to_path_buf(),
                    detail: format!("index table {name}, listed in the indexmap, is missing"),
                });
            }
            let table = PTable::open(&*env.disk, &tp).map_err(table_error)?;
            for e in table.iter() {
                e.map_err(table_error)?;
                report.index_entries += 1;
            }
            let bp = index.join(format!("{name}.bloomfilter"));
            let b = env.read_file(&bp).map_err(BackupError::io("read", &bp))?;
            Bloom::decode(&b).map_err(|d| corrupt(&bp, 0, d))?;
            report.index_tables += 1;
        }
    } else if env.disk.list(index).is_ok_and(|n| n.iter().any(|n| super::is_index_table_name(n))) {
        return Err(BackupError::Inconsistent {
            dir: index.to_path_buf(),
            detail: "index tables without an indexmap".into(),
        });
    }
    let ex = index.join("stream-existence");
    let (chk, dat) = (ex.join("streamExistenceFilter.chk"), ex.join("streamExistenceFilter.dat"));
    if env.disk.exists(&chk) {
        let pos = read_checkpoint(env, &chk)?;
        if !env.disk.exists(&dat) {
            return Err(BackupError::Inconsistent {
                dir: ex.clone(),
                detail: "streamExistenceFilter.chk without streamExistenceFilter.dat".into(),
            });
        }
        let b = env.read_file(&dat).map_err(BackupError::io("read", &dat))?;
        Bloom::decode(&b).map_err(|d| corrupt(&dat, 0, d))?;
        if pos > chaser as i64 {
            report.notes.push(
                "the stream existence filter is ahead of chaser.chk: a restored node rebuilds it".into(),
            );
        }
    }
    let scav = index.join("scavenging");
    if env.disk.exists(&scav.join("scavenging.db")) {
        // Opened on an overlay: opening creates the directory when missing, and must not here.
        let o = overlay_env(env);
        crate::scavenge::db::ScavengeDb::open(&o, &scav, 4096).map_err(|e| BackupError::Corrupt {
            file: scav.join("scavenging.db"),
            offset: 0,
            detail: e.to_string(),
        })?;
    }
    Ok(())
}

fn table_error(e: crate::index::ptable::TableError) -> BackupError {
    use crate::index::ptable::TableError;
    match e {
        TableError::Corrupt { path, offset, detail } => {
            BackupError::Corrupt { file: path, offset, detail: detail.into() }
        }
        TableError::Io { path, source } => BackupError::Io { op: "read", path, source },
    }
}

/// An environment whose disk is a fresh [`OverlayDisk`] over `env`'s.
fn overlay_env(env: &Env) -> Env {
    Env::new(
        Arc::new(OverlayDisk::new(env.disk.clone())),
        env.clock.clone(),
        env.net.clone(),
        env.rt.clone(),
        env.random_u64(),
    )
}

/// Opens the backup as a restored node would (on an overlay) and reads its log from the start.
fn open_as_restored(
    env: &Env,
    db: &Path,
    index: &Path,
    chunk_size: u64,
    chaser: i64,
    report: &mut VerifyReport,
) -> Result<(), BackupError> {
    let o = overlay_env(env);
    let truncate = db.join("truncate.chk");
    let f = o.disk.open(&truncate, OpenMode::CreateTruncate).map_err(BackupError::io("write", &truncate))?;
    f.write_all_at(&chaser.to_le_bytes(), 0).map_err(BackupError::io("write", &truncate))?;
    let mut cfg = StoreConfig::new(PathBuf::from(db));
    cfg.index_dir = index.to_path_buf();
    cfg.chunk_size = chunk_size;
    // Nothing is flushed from memory while the backup is open.
    cfg.memtable_max = usize::MAX / 2;
    cfg.max_index_tables = usize::MAX / 2;
    cfg.stream_cache_capacity = 16;
    cfg.recent_ids_capacity = 16;
    let store = Store::recover(&o, cfg).map_err(|e| BackupError::Open(e.to_string()))?;
    let end = store.log().committed();
    if end != chaser as u64 {
        return Err(BackupError::Open(format!(
            "the restored log ends at {end}, not at chaser.chk ({chaser})"
        )));
    }
    let mut streams: HashSet<String> = HashSet::new();
    for rec in store.log().scan(0) {
        if let Record::Event(e) = rec.map_err(|e| BackupError::Open(e.to_string()))? {
            report.events += 1;
            report.last_event_position = Some(e.log_position);
            if !streams.contains(&e.stream) {
                streams.insert(e.stream);
            }
        }
    }
    report.streams = streams.len();
    Ok(())
}
