//! `annal restore`: copies a complete backup onto a stopped node's directories and writes
//! `truncate.chk` from the backup's `chaser.chk`, so the node truncates its log to that point
//! when it starts.
//!
//! Order: every check first (the backup is complete, its checkpoints exist and its chunks run
//! without a gap up to the chunk holding `chaser.chk`; no node holds the target's lock; the
//! target holds no database unless `overwrite` was asked for), so bad input changes nothing. Then,
//! holding the target's lock (a node cannot start meanwhile): the index files, the chunks, the
//! checkpoints with `truncate.chk`, and `writer.chk` last. A restore that is interrupted therefore
//! leaves chunks without a `writer.chk`, which a node refuses to open, rather than a database that
//! looks whole; running the restore again with `overwrite` finishes it.
//!
//! The backup's identity (`annal.id`) is not copied, and a replaced database's is removed, so
//! every node restored from one backup, a whole new cluster included, is a database of its own
//! for later backups.

use std::path::{Path, PathBuf};

use crate::env::Env;
use crate::log::chunk::{self, ChunkHeader, HEADER_SIZE};

use super::{
    copy_data, is_dir, read_checkpoint, settle, BackupError, BackupState, Manifest, Unsynced, DB_DIR,
    INDEX_DIR, LOG_CHECKPOINTS, PARTIAL,
};
use crate::dblock::{DbLock, ID_FILE, LOCK_FILE};
use crate::env::OpenMode;

/// What to restore, and where to.
#[derive(Clone, Debug)]
pub struct RestoreOptions {
    /// The backup directory.
    pub from: PathBuf,
    /// The node's `db/` directory.
    pub db: PathBuf,
    /// The node's index directory.
    pub index: PathBuf,
    /// Replace a database already in the target (its chunks, checkpoints and index files).
    pub overwrite: bool,
}

/// What a restore did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreSummary {
    /// Files copied.
    pub files: u64,
    /// Bytes copied.
    pub bytes: u64,
    /// Files of an earlier database removed (with `overwrite`).
    pub removed: u64,
    /// The position the node truncates its log to on start (`truncate.chk`).
    pub truncate_to: i64,
}

/// Restores (see the module documentation). `progress` gets the bytes copied so far.
pub fn restore(
    env: &Env,
    opts: &RestoreOptions,
    progress: &mut dyn FnMut(&Path, u64),
) -> Result<RestoreSummary, BackupError> {
    let (bd, bi) = (opts.from.join(DB_DIR), opts.from.join(INDEX_DIR));
    match Manifest::read(env, &opts.from)? {
        None => {
            return Err(BackupError::NotA {
                path: opts.from.clone(),
                what: "a backup",
                detail: format!("it has no {}", super::MANIFEST),
            })
        }
        Some(m) if m.state != BackupState::Complete => {
            return Err(BackupError::Incomplete(opts.from.clone()))
        }
        Some(_) => {}
    }
    for name in LOG_CHECKPOINTS {
        if !env.disk.exists(&bd.join(name)) {
            return Err(BackupError::Inconsistent { dir: bd.clone(), detail: format!("{name} is missing") });
        }
    }
    let chaser = read_checkpoint(env, &bd.join("chaser.chk"))?;
    let chunks = check_chunks(env, &bd, chaser)?;
    let lock = DbLock::acquire(env, &opts.db)?;
    let existing = database_files(env, &opts.db, &opts.index)?;
    if !existing.is_empty() && !opts.overwrite {
        return Err(BackupError::NotEmpty {
            path: opts.db.clone(),
            detail: format!(
                "it holds a database ({} files, e.g. {}); pass --overwrite to replace it",
                existing.len(),
                existing[0].display()
            ),
        });
    }
    let mut summary = RestoreSummary { truncate_to: chaser, ..RestoreSummary::default() };
    for path in existing {
        env.disk.remove(&path).map_err(BackupError::io("remove", &path))?;
        summary.removed += 1;
    }
    // Copies are synced and renamed in batches (see `copy.rs`): before each directory sync.
    let mut batch: Vec<Unsynced> = Vec::new();
    let mut copy = |from: &Path, to: &Path, summary: &mut RestoreSummary, batch: &mut Vec<Unsynced>| {
        let mut done = summary.bytes;
        match copy_data(env, from, to, &mut |n| {
            done += n;
            progress(from, done);
        })? {
            Some(u) => {
                summary.files += 1;
                summary.bytes += u.bytes;
                batch.push(u);
                if batch.len() >= 64 || batch.iter().map(|u| u.bytes).sum::<u64>() >= 1 << 30 {
                    settle(env, batch)?;
                }
                Ok(())
            }
            None => Err(BackupError::Inconsistent {
                dir: opts.from.clone(),
                detail: format!("{} vanished during the restore", from.display()),
            }),
        }
    };
    let sync_dir = |dir: &Path, batch: &mut Vec<Unsynced>| -> Result<(), BackupError> {
        settle(env, batch)?;
        env.disk.sync_dir(dir).map_err(BackupError::io("sync directory", dir))
    };
    // The index, with its subdirectories.
    let mut dirs = vec![(bi.clone(), opts.index.clone())];
    while let Some((from, to)) = dirs.pop() {
        if !env.disk.exists(&from) {
            continue;
        }
        env.disk.create_dir_all(&to).map_err(BackupError::io("create directory", &to))?;
        for name in env.disk.list(&from).map_err(BackupError::io("list", &from))? {
            let (f, t) = (from.join(&name), to.join(&name));
            if is_dir(env, &f) {
                dirs.push((f, t));
            } else if !name.ends_with(PARTIAL) {
                copy(&f, &t, &mut summary, &mut batch)?;
            }
        }
        sync_dir(&to, &mut batch)?;
    }
    for name in &chunks {
        copy(&bd.join(name), &opts.db.join(name), &mut summary, &mut batch)?;
    }
    sync_dir(&opts.db, &mut batch)?;
    for name in ["chaser.chk", "epoch.chk", "proposal.chk"] {
        copy(&bd.join(name), &opts.db.join(name), &mut summary, &mut batch)?;
    }
    copy(&bd.join("chaser.chk"), &opts.db.join("truncate.chk"), &mut summary, &mut batch)?;
    sync_dir(&opts.db, &mut batch)?;
    copy(&bd.join("writer.chk"), &opts.db.join("writer.chk"), &mut summary, &mut batch)?;
    sync_dir(&opts.db, &mut batch)?;
    drop(lock);
    Ok(summary)
}

/// The backup's chunk files to restore (the newest version of each), checked to run without a gap
/// from chunk 0 to the chunk holding `chaser`.
fn check_chunks(env: &Env, bd: &Path, chaser: i64) -> Result<Vec<String>, BackupError> {
    let mut names: Vec<(u32, u32, String)> = env
        .disk
        .list(bd)
        .map_err(BackupError::io("list", bd))?
        .into_iter()
        .filter_map(|n| chunk::parse_file_name(&n).map(|(s, v)| (s, v, n)))
        .collect();
    names.sort();
    let mut out: Vec<String> = Vec::new();
    let mut expect = 0u32;
    let mut size = None;
    for (i, (start, _, name)) in names.iter().enumerate() {
        if names.get(i + 1).is_some_and(|n| n.0 == *start) {
            continue; // a newer version follows
        }
        let path = bd.join(name);
        let f = env.disk.open(&path, OpenMode::Read).map_err(BackupError::io("open", &path))?;
        let hb = f.read_vec_at(HEADER_SIZE as usize, 0).map_err(BackupError::io("read", &path))?;
        let h = ChunkHeader::decode(&hb).map_err(|d| BackupError::Corrupt {
            file: path.clone(),
            offset: 0,
            detail: d.into(),
        })?;
        if *start < expect {
            continue; // covered by a merged chunk before it
        }
        if *start != expect {
            return Err(BackupError::Inconsistent {
                dir: bd.to_path_buf(),
                detail: format!("the chunk file for chunk {expect} is missing (next is {name})"),
            });
        }
        size = Some(h.chunk_size);
        expect = h.end + 1;
        out.push(name.clone());
    }
    let needed = match size {
        Some(s) if chaser >= 0 => (chaser as u64 / s) as u32,
        _ if chaser <= 0 => 0,
        _ => {
            return Err(BackupError::Inconsistent {
                dir: bd.to_path_buf(),
                detail: "there are no chunk files".into(),
            })
        }
    };
    if chaser > 0 && expect <= needed && size.is_some_and(|s| chaser as u64 % s != 0) {
        return Err(BackupError::Inconsistent {
            dir: bd.to_path_buf(),
            detail: format!("chaser.chk is {chaser}, but the chunk file for chunk {expect} is missing"),
        });
    }
    Ok(out)
}

/// Files of a database in the target directories (chunks, checkpoints, index files), which a
/// restore would mix with.
fn database_files(env: &Env, db: &Path, index: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let mut out = Vec::new();
    if let Ok(names) = env.disk.list(db) {
        for n in names {
            if chunk::is_chunk_name(&n) || n.ends_with(".chk") || n == ID_FILE {
                out.push(db.join(n));
            }
        }
    }
    let mut dirs = vec![index.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(names) = env.disk.list(&d) else { continue };
        for n in names {
            let p = d.join(&n);
            if is_dir(env, &p) {
                dirs.push(p);
            } else if n != LOCK_FILE {
                out.push(p);
            }
        }
    }
    Ok(out)
}
