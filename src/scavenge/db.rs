//! `index/scavenging/scavenging.db`: the scavenge's persistent state, through the Env disk.
//!
//! The state (accumulated stream facts, chunk timestamp ranges, detected collisions, the last
//! completed point and the checkpoint of a run in progress) is one checksummed document, written
//! whole and replaced atomically (`.tmp`, sync, rename, sync the directory) at every checkpoint:
//!
//! ```text
//! magic "ANNALSCV" | u32 format version | u32 page size | u64 body length | body (JSON)
//! | u32 crc32 of everything before | zero padding to a multiple of the page size
//! ```
//!
//! The page size is `--scavenge-backend-page-size` (KiB); the state holds only streams that have
//! metadata or a tombstone, so it stays small next to the log. A damaged file is an error (the
//! operator can delete it: the next scavenge then accumulates from the start of the log).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::{Rule, StreamFacts};
use crate::env::Env;

const MAGIC: &[u8; 8] = b"ANNALSCV";
const FORMAT: u32 = 1;

/// A scavenge point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// Number of the point (event number in `$scavengePoints`).
    pub number: i64,
    /// Log position of the point record: the run covers records before it.
    pub position: u64,
    /// Time used for `$maxAge` decisions (the point's timestamp).
    pub effective_now_us: i64,
    /// Weight a chunk must exceed (-1: all chunks).
    pub threshold: i64,
}

/// Where a run is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Reading new chunks up to the point.
    Accumulating,
    /// Working out rules and weights.
    Calculating,
    /// Rewriting chunks; `done` lists the chunk starts already executed.
    Executing {
        /// Chunks done.
        done: BTreeSet<u32>,
    },
    /// Joining small scavenged chunks.
    Merging,
    /// Dropping index entries of removed records.
    Indexing,
    /// Dropping state no longer needed.
    Cleaning,
}

/// A run in progress (or stopped, to be resumed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// Scavenge id.
    pub id: String,
    /// The point.
    pub point: Point,
    /// Checkpoint.
    pub phase: Phase,
    /// Rules per stream (filled by calculation).
    pub rules: BTreeMap<String, Rule>,
    /// Weights per chunk start (filled by calculation).
    pub weights: BTreeMap<u32, u64>,
    /// Bytes reclaimed so far.
    pub space_saved: u64,
    /// When the run first started (µs since the epoch).
    pub started_us: i64,
}

/// Everything the scavenge keeps between runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    /// Accumulation has read the log up to here.
    pub accumulated_until: u64,
    /// The last point a run completed.
    pub last_point: Option<Point>,
    /// Facts per stream name (streams with metadata or a tombstone).
    pub streams: BTreeMap<String, StreamFacts>,
    /// Timestamp range (µs) of each logical chunk accumulated.
    pub chunk_ts: BTreeMap<u32, (i64, i64)>,
    /// Stream names found sharing a 64-bit hash with another stream.
    pub collisions: BTreeSet<String>,
    /// The run in progress, if any.
    pub run: Option<Run>,
}

/// The database file.
pub struct ScavengeDb {
    env: Env,
    path: PathBuf,
    page_size: usize,
    /// The current state.
    pub state: State,
}

/// Failures of the scavenge database.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// I/O.
    #[error("scavenge database {path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// Bad content.
    #[error("scavenge database {path} is damaged ({detail}); delete it to accumulate again from the start")]
    Corrupt {
        /// File.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
}

impl ScavengeDb {
    /// Opens (or starts empty) the database in `dir` (`index/scavenging`).
    pub fn open(env: &Env, dir: &Path, page_size: usize) -> Result<ScavengeDb, DbError> {
        let io = |source| DbError::Io { path: dir.to_path_buf(), source };
        env.disk.create_dir_all(dir).map_err(io)?;
        env.disk.sync_dir(crate::env::parent(dir)).map_err(io)?;
        let path = dir.join("scavenging.db");
        let state = if env.disk.exists(&path) {
            let b = env.read_file(&path).map_err(|source| DbError::Io { path: path.clone(), source })?;
            decode(&b).map_err(|detail| DbError::Corrupt { path: path.clone(), detail })?
        } else {
            State::default()
        };
        Ok(ScavengeDb { env: env.clone(), path, page_size: page_size.max(512), state })
    }

    /// Writes the current state durably (a checkpoint).
    pub fn save(&self) -> Result<(), DbError> {
        let body = serde_json::to_vec(&self.state)
            .map_err(|e| DbError::Corrupt { path: self.path.clone(), detail: e.to_string() })?;
        let mut out = Vec::with_capacity(body.len() + 32);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&(self.page_size as u32).to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out.resize(out.len().div_ceil(self.page_size) * self.page_size, 0);
        self.env
            .write_file_atomic(&self.path, &out)
            .map_err(|source| DbError::Io { path: self.path.clone(), source })
    }

    /// Size of the file in bytes (for statistics).
    pub fn file_len(&self) -> u64 {
        self.env.disk.open(&self.path, crate::env::OpenMode::Read).and_then(|f| f.len()).unwrap_or(0)
    }
}

fn decode(b: &[u8]) -> Result<State, String> {
    if b.len() < 28 || &b[0..8] != MAGIC {
        return Err("not a scavenge database".into());
    }
    if u32::from_le_bytes(b[8..12].try_into().unwrap_or_default()) != FORMAT {
        return Err("unknown format version".into());
    }
    let len = u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()) as usize;
    let end = 24usize.checked_add(len).filter(|e| e + 4 <= b.len()).ok_or("length runs past the file")?;
    let crc = u32::from_le_bytes(b[end..end + 4].try_into().unwrap_or_default());
    if crc32fast::hash(&b[..end]) != crc {
        return Err("checksum mismatch".into());
    }
    serde_json::from_slice(&b[24..end]).map_err(|e| e.to_string())
}
