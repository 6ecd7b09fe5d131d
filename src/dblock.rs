//! The lock a node holds on its `db/` directory, and the database's identity (used by the node,
//! `annal backup` and `annal restore`).
//!
//! A node takes an exclusive [`crate::env::Disk::try_lock`] on `db/annal.lock` when it opens the
//! database and holds it until its store is closed at shutdown; `annal restore` takes the same
//! lock, so a restore never writes under a running node and a node never starts on a
//! half-restored directory. On the real disk the lock is `flock`, which dies with its holder, so a
//! crashed node leaves no stale lock. Taking the lock writes nothing (on disks that live inside
//! one process it is granted without touching the disk at all).
//!
//! The database's identity is a UUID in `db/annal.id`, written by the first backup that needs it.
//! Backups record it, so a differential backup refuses a directory that holds another database's
//! files. A restore does not copy it and removes the target's: a restored node gets a new identity
//! at its first backup (a new cluster restored from one backup has the same data but different
//! nodes, and their backups must not be mixed either).

use std::path::{Path, PathBuf};

use crate::env::{DiskLock, Env};

/// Why the lock or the identity could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process (or another open of the same database) holds the lock.
    #[error("a node is running on {0} (it holds the directory's lock); stop it first")]
    Held(PathBuf),
    /// An I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LockError + 'a {
    move |source| LockError::Io { op, path: path.to_path_buf(), source }
}

/// The lock file's name in `db/`.
pub const LOCK_FILE: &str = "annal.lock";
/// The identity file's name in `db/`.
pub const ID_FILE: &str = "annal.id";

/// A held lock on a database directory.
pub struct DbLock {
    _guard: DiskLock,
    path: PathBuf,
}

impl DbLock {
    /// Takes the lock on `db_dir` (created if missing). Fails with [`LockError::Held`]
    /// when another process (or another open of the same database) holds it.
    pub fn acquire(env: &Env, db_dir: &Path) -> Result<DbLock, LockError> {
        env.disk.create_dir_all(db_dir).map_err(io("create directory", db_dir))?;
        let path = db_dir.join(LOCK_FILE);
        let guard = env
            .disk
            .try_lock(&path)
            .map_err(io("lock", &path))?
            .ok_or_else(|| LockError::Held(db_dir.to_path_buf()))?;
        Ok(DbLock { _guard: guard, path })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The identity recorded in `db_dir`, without creating one: `None` when there is none yet.
pub fn read_id(env: &Env, db_dir: &Path) -> Result<Option<String>, LockError> {
    let path = db_dir.join(ID_FILE);
    if !env.disk.exists(&path) {
        return Ok(None);
    }
    let bytes = env.read_file(&path).map_err(io("read", &path))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(uuid::Uuid::parse_str(text.trim()).ok().map(|u| u.to_string()))
}

/// The identity of the database in `db_dir`, written (atomically and durably) when it has none.
pub fn database_id(env: &Env, db_dir: &Path) -> Result<String, LockError> {
    if let Some(id) = read_id(env, db_dir)? {
        return Ok(id);
    }
    let id = env.new_uuid().to_string();
    let path = db_dir.join(ID_FILE);
    env.write_file_atomic(&path, format!("{id}\n").as_bytes()).map_err(io("write", &path))?;
    Ok(id)
}
