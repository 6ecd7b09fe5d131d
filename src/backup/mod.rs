//! Backup, restore and backup verification: the maintenance tools behind `annal backup`,
//! `annal restore` and `annal backup verify`.
//!
//! A backup directory holds the log's files under `db/` (chunks and the checkpoints `chaser.chk`,
//! `epoch.chk`, `writer.chk`, `proposal.chk`), the index's files under `index/` (`indexmap`, the
//! UUID tables and their `.bloomfilter`s, `stream-existence/`, `scavenging/scavenging.db`) and a
//! manifest, `annal-backup.json`, naming the database it came from and whether it is complete.
//!
//! Modules: [`copy`] (taking a full or differential backup, in the fixed order below), [`verify`]
//! (checking a backup without changing it), [`restore`] (copying a backup onto a stopped node),
//! [`lock`] (the lock a node holds on its `db/` directory, and the database's identity),
//! [`scavenge`] (stopping and resuming a running scavenge through the node's HTTP API) and
//! [`cli`] (the command lines).
//!
//! Invariants:
//! - every file lands in a backup or a restored database under a `.partial` name and is renamed
//!   into place only once copied and synced, so a name in the destination is always a whole copy
//!   (an interrupted run leaves only `.partial` files, which the next run ignores and replaces);
//! - a backup's manifest says `in-progress` from the first file copied until the last step of the
//!   procedure is done; `verify` and `restore` refuse a backup that is not `complete`;
//! - a backup only ever holds files of one database (the manifest's `database_id`);
//! - checkpoints are copied before chunks, so the chunks of a backup hold at least everything up
//!   to its `chaser.chk`, which a restore writes to `truncate.chk`;
//! - all disk access goes through [`crate::env::Disk`], so the tools run on the simulator's disks.

pub mod cli;
pub mod copy;
pub mod restore;
pub mod scavenge;
pub mod verify;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::env::{Env, OpenMode};

/// The manifest's file name, at the top of a backup directory.
pub const MANIFEST: &str = "annal-backup.json";
/// Where a backup keeps the log's files.
pub const DB_DIR: &str = "db";
/// Where a backup keeps the index's files.
pub const INDEX_DIR: &str = "index";
/// Suffix of a file being copied.
pub const PARTIAL: &str = ".partial";
/// The log's checkpoints a backup copies, in the order it copies them.
pub const LOG_CHECKPOINTS: [&str; 4] = ["chaser.chk", "epoch.chk", "writer.chk", "proposal.chk"];

/// Errors of the backup tools. Each names what an operator needs to act on.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// An I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file failed its checksum or shape check.
    #[error("corrupt file {file} at offset {offset}: {detail}")]
    Corrupt {
        /// The file.
        file: PathBuf,
        /// Byte offset in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The files do not fit together (a missing chunk, checkpoints out of order).
    #[error("inconsistent backup in {dir}: {detail}")]
    Inconsistent {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The directory is not a backup (or not a database) this tool can use.
    #[error("{path} is not {what}: {detail}")]
    NotA {
        /// The directory.
        path: PathBuf,
        /// What it should have been.
        what: &'static str,
        /// Why it is not.
        detail: String,
    },
    /// A backup whose procedure never finished.
    #[error(
        "the backup in {0} is incomplete (its procedure was interrupted); run `annal backup --differential` into it again to finish it"
    )]
    Incomplete(PathBuf),
    /// The backup holds another database's files.
    #[error("the backup in {dir} belongs to database {found}, not to {expected} (never mix backups of different nodes; use an empty directory)")]
    OtherDatabase {
        /// The backup directory.
        dir: PathBuf,
        /// The database being backed up.
        expected: String,
        /// The one the backup holds.
        found: String,
    },
    /// The destination already holds files the operation would mix with.
    #[error("{path} is not empty: {detail}")]
    NotEmpty {
        /// The directory.
        path: PathBuf,
        /// What to do instead.
        detail: String,
    },
    /// A node runs on the database directory.
    #[error("a node is running on {0} (it holds the directory's lock); stop it first")]
    NodeRunning(PathBuf),
    /// A scavenge could not be stopped (or the node could not be asked).
    #[error("cannot back up while a scavenge may run: {0}")]
    Scavenge(String),
    /// Opening the backup as a node would failed.
    #[error("the backup does not open as a database: {0}")]
    Open(String),
    /// A bad command line.
    #[error("{0}")]
    Usage(String),
}

impl BackupError {
    /// Wraps an I/O error with the operation and path.
    pub fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> BackupError + 'a {
        move |source| BackupError::Io { op, path: path.to_path_buf(), source }
    }
}

impl From<crate::dblock::LockError> for BackupError {
    fn from(e: crate::dblock::LockError) -> BackupError {
        match e {
            crate::dblock::LockError::Held(dir) => BackupError::NodeRunning(dir),
            crate::dblock::LockError::Io { op, path, source } => BackupError::Io { op, path, source },
        }
    }
}

/// Whether a backup's procedure finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BackupState {
    /// Files are being (or were, when interrupted) copied.
    InProgress,
    /// Every step finished.
    Complete,
}

/// `annal-backup.json`: what a backup directory holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Manifest format, 1.
    pub format: u32,
    /// Whether the procedure finished.
    pub state: BackupState,
    /// Identity of the source database (its `db/annal.id`, see [`lock`]).
    pub database_id: String,
    /// The source `db/` directory.
    pub source_db: String,
    /// The source index directory.
    pub source_index: String,
    /// Whether the last run was differential.
    pub differential: bool,
    /// When the last run began, µs since the Unix epoch.
    pub started_us: i64,
    /// When it finished (0 while in progress).
    pub finished_us: i64,
    /// Files the last run copied.
    pub files_copied: u64,
    /// Bytes the last run copied.
    pub bytes_copied: u64,
    /// The backup's `chaser.chk`: a restore holds the log up to here.
    pub chaser: i64,
    /// The backup's `writer.chk`.
    pub writer: i64,
}

impl Manifest {
    /// Reads `dir`'s manifest: `Ok(None)` when there is none.
    pub fn read(env: &Env, dir: &Path) -> Result<Option<Manifest>, BackupError> {
        let path = dir.join(MANIFEST);
        if !env.disk.exists(&path) {
            return Ok(None);
        }
        let bytes = env.read_file(&path).map_err(BackupError::io("read", &path))?;
        serde_json::from_slice(&bytes).map(Some).map_err(|e| BackupError::NotA {
            path: dir.to_path_buf(),
            what: "a backup",
            detail: format!("{MANIFEST} does not parse: {e}"),
        })
    }

    /// Writes `dir`'s manifest atomically and durably.
    pub fn write(&self, env: &Env, dir: &Path) -> Result<(), BackupError> {
        let path = dir.join(MANIFEST);
        let mut text = serde_json::to_vec_pretty(self).map_err(|e| BackupError::Io {
            op: "encode",
            path: path.clone(),
            source: io::Error::other(e),
        })?;
        text.push(b'\n');
        env.write_file_atomic(&path, &text).map_err(BackupError::io("write", &path))
    }
}

/// Reads a checkpoint file's value (its first 8 bytes, little-endian).
pub fn read_checkpoint(env: &Env, path: &Path) -> Result<i64, BackupError> {
    let f = env.disk.open(path, OpenMode::Read).map_err(BackupError::io("open", path))?;
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, 0).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            BackupError::Corrupt {
                file: path.to_path_buf(),
                offset: 0,
                detail: "shorter than 8 bytes".into(),
            }
        } else {
            BackupError::Io { op: "read", path: path.to_path_buf(), source: e }
        }
    })?;
    Ok(i64::from_le_bytes(b))
}

/// Whether `path` is a directory on `env`'s disk.
pub fn is_dir(env: &Env, path: &Path) -> bool {
    env.disk.list(path).is_ok()
}

/// Whether `name` is an index table or its bloom filter (`<uuid>` or `<uuid>.bloomfilter`).
pub fn is_index_table_name(name: &str) -> bool {
    uuid::Uuid::parse_str(name.strip_suffix(".bloomfilter").unwrap_or(name)).is_ok()
        && !name.ends_with(PARTIAL)
}

/// What [`copy_file`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Copied {
    /// Copied, this many bytes.
    Bytes(u64),
    /// The source file does not exist (any more).
    Vanished,
}

/// Copies `from` to `to`: written to `to.partial`, synced, then renamed over `to` (the caller
/// syncs the directory). `progress` is told of every piece copied.
pub fn copy_file(
    env: &Env,
    from: &Path,
    to: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Copied, BackupError> {
    match copy_data(env, from, to, progress)? {
        Some(done) => {
            let n = done.bytes;
            done.finish(env)?;
            Ok(Copied::Bytes(n))
        }
        None => Ok(Copied::Vanished),
    }
}

/// A file whose bytes were written to its `.partial` name but not yet synced and renamed.
pub struct Unsynced {
    file: std::sync::Arc<dyn crate::env::File>,
    partial: PathBuf,
    to: PathBuf,
    /// Bytes copied.
    pub bytes: u64,
}

impl Unsynced {
    /// Syncs the copy and renames it to its final name.
    pub fn finish(self, env: &Env) -> Result<(), BackupError> {
        self.file.sync_data().map_err(BackupError::io("sync", &self.partial))?;
        drop(self.file);
        env.disk.rename(&self.partial, &self.to).map_err(BackupError::io("rename", &self.partial))
    }
}

/// Syncs every copy in `batch`, then renames each to its final name (the caller syncs the
/// directories); empties the batch.
pub fn settle(env: &Env, batch: &mut Vec<Unsynced>) -> Result<(), BackupError> {
    for u in batch.iter() {
        u.file.sync_data().map_err(BackupError::io("sync", &u.partial))?;
    }
    for u in batch.drain(..) {
        u.finish(env)?;
    }
    Ok(())
}

/// The first half of [`copy_file`]: writes `from`'s bytes to `to.partial` ([`crate::env::Disk::copy_file`],
/// inside the kernel on the real disk). `None`: `from` does not exist (any more).
pub fn copy_data(
    env: &Env,
    from: &Path,
    to: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<Option<Unsynced>, BackupError> {
    let partial = partial_path(to);
    let bytes = match env.disk.copy_file(from, &partial) {
        Ok(n) => n,
        // The source vanished (a scavenge replaced it): nothing to copy. Any other missing file
        // (the destination's directory) is an error.
        Err(e) if e.kind() == io::ErrorKind::NotFound && !env.disk.exists(from) => return Ok(None),
        Err(e) => return Err(BackupError::Io { op: "copy", path: from.to_path_buf(), source: e }),
    };
    progress(bytes);
    let file = env.disk.open(&partial, OpenMode::ReadWrite).map_err(BackupError::io("open", &partial))?;
    // The disk writes this copy while the next ones are made; the batch's syncs then wait for
    // little (see `settle`).
    file.start_writeback();
    Ok(Some(Unsynced { file, partial, to: to.to_path_buf(), bytes }))
}

/// `path` with [`PARTIAL`] appended.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(PARTIAL);
    PathBuf::from(s)
}
