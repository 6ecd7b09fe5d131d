//! `annal backup`: a full or differential file-copy backup of a node's `db/` and index.
//!
//! The copy follows a fixed order, which is what makes a copy of a running node's files
//! consistent. A running scavenge is stopped first (and resumed at the end). Then the index:
//! (1) if the index directory holds no files, go to (7); (2) copy `indexmap`, again until the
//! source has one; (3) list the index tables (`<uuid>`, `<uuid>.bloomfilter`) in the source;
//! (4) copy those the backup lacks; (5) if the source's `indexmap` now differs from the copy (a
//! flush or merge ran), or the copy lists a table the backup lacks, go back to (2) (after ten
//! rounds, a copy whose tables are all in the backup is kept even if the source moved on again:
//! it is a consistent earlier state of the index); (6) remove
//! from the backup the tables not listed in (3); (7) copy `stream-existence/streamExistenceFilter.chk`,
//! (8) then its `.dat`, (9) then `scavenging/scavenging.db`, each if present. Then the log:
//! (1) rename the backup's last chunk to `<name>.old` (it was the active chunk, and has grown
//! since); (2) copy `chaser.chk`, `epoch.chk`, `writer.chk`, `proposal.chk`, in that order;
//! (3) list the source's chunk files; (4) copy those the backup lacks, every one of them;
//! (5) remove from the backup every chunk not in that list, and the `.old` file.
//!
//! A full backup is the same procedure into an empty directory. A differential one updates a
//! backup of the same database, copying only what changed: completed chunks and index tables never
//! change under their names.
//!
//! Why the order is safe: the index is copied before the log, so the index never covers more than
//! the chunks copied after it; `chaser.chk` is copied before every chunk, so the chunks hold at
//! least the log up to it, and a restore truncates the log to it. Chunks a scavenge replaced during
//! the copy (the old file vanished under us) make step (4) list the source again and copy the new
//! names; step (5) then drops the replaced ones from the backup.
//!
//! Beyond the fixed order: a chunk of the backup whose footer says it is not complete, or that
//! ends past the backup's `writer.chk`, is treated like the last chunk (renamed to `.old` and
//! copied again), so a backup interrupted while chunks completed cannot keep a stale copy of one,
//! nor one the node completed but had not yet made durable (a crash then reopens it, and it is
//! written again with other records).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::env::{Env, OpenMode};
use crate::log::chunk::{self, ChunkFooter, ChunkHeader, FOOTER_SIZE, HEADER_SIZE};

use super::scavenge::ScavengeControl;
use super::{
    copy_data, is_dir, is_index_table_name, read_checkpoint, settle, BackupError, BackupState, Copied,
    Manifest, Unsynced, DB_DIR, INDEX_DIR, LOG_CHECKPOINTS, PARTIAL,
};

/// Rounds of the index steps (2)–(5), and listings of the chunks, before giving up: each round
/// means the node changed the files while they were copied.
const MAX_ROUNDS: u32 = 1000;
/// Rounds of the index steps after which a self-consistent copy of a still-changing index is
/// taken (see [`copy_index`]).
const SETTLE_ROUNDS: u32 = 10;

/// What to back up, and where to.
#[derive(Clone, Debug)]
pub struct BackupOptions {
    /// The node's `db/` directory.
    pub source_db: PathBuf,
    /// The node's index directory (`db/index` unless the node runs with `--index`).
    pub source_index: PathBuf,
    /// The backup directory.
    pub dest: PathBuf,
    /// Update an existing backup of the same database instead of requiring an empty directory.
    pub differential: bool,
}

/// A step of the procedure, for a progress display.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A new phase began.
    Step(&'static str),
    /// A file is being copied.
    File(&'a Path),
    /// Bytes copied so far in this run, and the bytes known to be due (grows as files are listed).
    Bytes {
        /// Copied.
        done: u64,
        /// Due.
        planned: u64,
    },
}

/// What a backup did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupSummary {
    /// Files copied.
    pub files_copied: u64,
    /// Bytes copied.
    pub bytes_copied: u64,
    /// Files found in the backup already and not copied again.
    pub files_kept: u64,
    /// Files removed from the backup (superseded chunks and tables).
    pub files_removed: u64,
    /// Chunk files the backup holds.
    pub chunks: u64,
    /// The backup's `chaser.chk`: a restore holds every event before it.
    pub chaser: i64,
    /// The backup's `writer.chk`.
    pub writer: i64,
    /// Times the source changed under the copy and a listing was taken again.
    pub relisted: u32,
    /// The index kept changing during the copy: the backup holds a consistent earlier state of
    /// it (every table its `indexmap` lists), which a restored node brings up to date from the log.
    pub index_moving: bool,
    /// The scavenge stopped for the backup, if one ran.
    pub scavenge_stopped: Option<String>,
    /// How resuming it went: the new run's id, or why it failed.
    pub scavenge_resumed: Option<Result<String, String>>,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Copies not yet synced and renamed are settled once this many bytes (or files) wait: one
/// batch of syncs lets the kernel write the files back together, as `cp` followed by one `sync`
/// does, where a sync per file would wait for each in turn.
const BATCH_BYTES: u64 = 1 << 30;
const BATCH_FILES: usize = 64;

struct Run<'a> {
    env: &'a Env,
    progress: &'a mut dyn FnMut(Progress<'_>),
    summary: BackupSummary,
    planned: u64,
    /// Copied files waiting for their sync and rename (see [`Run::settle`]).
    batch: Vec<Unsynced>,
}

impl Run<'_> {
    /// Copies one file. It is synced and renamed to its name by the next [`Run::settle`] (every
    /// directory sync and every look at the destination settles first).
    ///
    /// The copy runs as blocking work ([`Env::blocking`]): the backup's own task yields while a
    /// file is copied, and in the simulator the node runs on between any two files.
    async fn copy(&mut self, from: &Path, to: &Path) -> Result<Copied, BackupError> {
        (self.progress)(Progress::File(from));
        let (env, f, t) = (self.env.clone(), from.to_path_buf(), to.to_path_buf());
        let r = self.env.blocking(move || copy_data(&env, &f, &t, &mut |_| {})).await?;
        let Some(unsynced) = r else { return Ok(Copied::Vanished) };
        let n = unsynced.bytes;
        let done = self.summary.bytes_copied + n;
        (self.progress)(Progress::Bytes { done, planned: self.planned.max(done) });
        self.summary.files_copied += 1;
        self.summary.bytes_copied += n;
        self.batch.push(unsynced);
        if self.batch.len() >= BATCH_FILES || self.batch.iter().map(|u| u.bytes).sum::<u64>() >= BATCH_BYTES {
            self.settle().await?;
        }
        Ok(Copied::Bytes(n))
    }

    /// Syncs every copy of the batch, then renames each to its name.
    async fn settle(&mut self) -> Result<(), BackupError> {
        settle(self.env, &mut self.batch)
    }
    fn plan(&mut self, path: &Path) {
        if let Ok(f) = self.env.disk.open(path, OpenMode::Read) {
            self.planned += f.len().unwrap_or(0);
        }
    }

    fn remove(&mut self, path: &Path) -> Result<(), BackupError> {
        self.env.disk.remove(path).map_err(BackupError::io("remove", path))?;
        self.summary.files_removed += 1;
        Ok(())
    }

    async fn sync_dir(&mut self, dir: &Path) -> Result<(), BackupError> {
        self.settle().await?;
        self.env.disk.sync_dir(dir).map_err(BackupError::io("sync directory", dir))
    }

    async fn create_dir(&mut self, dir: &Path) -> Result<(), BackupError> {
        self.env.disk.create_dir_all(dir).map_err(BackupError::io("create directory", dir))?;
        self.sync_dir(crate::env::parent(dir)).await
    }
}

/// Checks that `opts.dest` may receive a backup of database `database_id`, creating it when
/// missing. Changes nothing when it may not.
fn check_destination(env: &Env, opts: &BackupOptions, database_id: &str) -> Result<(), BackupError> {
    let dest = &opts.dest;
    if !env.disk.exists(dest) {
        return Ok(());
    }
    if !is_dir(env, dest) {
        return Err(BackupError::NotA {
            path: dest.clone(),
            what: "a directory",
            detail: "it is a file".into(),
        });
    }
    match Manifest::read(env, dest)? {
        Some(m) if m.database_id != database_id => Err(BackupError::OtherDatabase {
            dir: dest.clone(),
            expected: database_id.to_string(),
            found: m.database_id,
        }),
        Some(_) if !opts.differential => Err(BackupError::NotEmpty {
            path: dest.clone(),
            detail: "it holds a backup; pass --differential to update it, or choose an empty directory"
                .into(),
        }),
        Some(_) => Ok(()),
        None => {
            let names = env.disk.list(dest).map_err(BackupError::io("list", dest))?;
            if names.is_empty() {
                Ok(())
            } else {
                Err(BackupError::NotEmpty {
                    path: dest.clone(),
                    detail: format!("it holds files that are not an annal backup ({})", names.join(", ")),
                })
            }
        }
    }
}

/// Takes a backup (see the module documentation). `database_id` is the source's identity (see
/// [`super::lock`]); `control` stops a running scavenge first and resumes it at the end, whatever
/// the outcome of the copy.
pub async fn backup(
    env: &Env,
    opts: &BackupOptions,
    database_id: &str,
    control: &mut dyn ScavengeControl,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<BackupSummary, BackupError> {
    if !env.disk.exists(&opts.source_db.join("writer.chk")) {
        return Err(BackupError::NotA {
            path: opts.source_db.clone(),
            what: "a database directory",
            detail: "it has no writer.chk".into(),
        });
    }
    check_destination(env, opts, database_id)?;
    let began = env.clock.monotonic();
    progress(Progress::Step("stopping a running scavenge"));
    let stopped = control.stop_running().await?;
    let mut run = Run { env, progress, summary: BackupSummary::default(), planned: 0, batch: Vec::new() };
    let mut result = copy_all(&mut run, opts, database_id).await;
    let settled = run.settle().await;
    if result.is_ok() {
        result = settled;
    }
    let mut summary = run.summary;
    summary.scavenge_stopped = stopped.clone();
    if stopped.is_some() {
        summary.scavenge_resumed = Some(control.resume().await.map_err(|e| e.to_string()));
    }
    summary.elapsed = env.clock.monotonic().saturating_sub(began);
    result.map(|()| summary)
}

async fn copy_all(run: &mut Run<'_>, opts: &BackupOptions, database_id: &str) -> Result<(), BackupError> {
    let env = run.env;
    let (bd, bi) = (opts.dest.join(DB_DIR), opts.dest.join(INDEX_DIR));
    run.create_dir(&opts.dest).await?;
    let mut manifest = Manifest {
        format: 1,
        state: BackupState::InProgress,
        database_id: database_id.to_string(),
        source_db: opts.source_db.display().to_string(),
        source_index: opts.source_index.display().to_string(),
        differential: opts.differential,
        started_us: env.clock.wall_micros(),
        finished_us: 0,
        files_copied: 0,
        bytes_copied: 0,
        chaser: -1,
        writer: -1,
    };
    manifest.write(env, &opts.dest)?;
    run.create_dir(&bd).await?;
    run.create_dir(&bi).await?;
    (run.progress)(Progress::Step("index"));
    copy_index(run, &opts.source_index, &bi).await?;
    (run.progress)(Progress::Step("log"));
    copy_log(run, &opts.source_db, &bd).await?;
    run.sync_dir(&opts.dest).await?;
    manifest.state = BackupState::Complete;
    manifest.finished_us = env.clock.wall_micros();
    manifest.files_copied = run.summary.files_copied;
    manifest.bytes_copied = run.summary.bytes_copied;
    manifest.chaser = run.summary.chaser;
    manifest.writer = run.summary.writer;
    manifest.write(env, &opts.dest)
}

/// The index steps (1)–(9).
async fn copy_index(run: &mut Run<'_>, si: &Path, bi: &Path) -> Result<(), BackupError> {
    let env = run.env;
    let names = match env.disk.list(si) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(BackupError::Io { op: "list", path: si.to_path_buf(), source: e }),
    };
    // (1) Only directories (or nothing): no tables yet.
    if names.iter().any(|n| !is_dir(env, &si.join(n))) {
        let mut rounds = 0u32;
        let listed = loop {
            // (2) Copy indexmap, repeating until the source holds one.
            loop {
                match run.copy(&si.join("indexmap"), &bi.join("indexmap")).await? {
                    Copied::Bytes(_) => break,
                    Copied::Vanished => {
                        rounds = bump(rounds, si, "the indexmap never appeared")?;
                        env.rt.sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            // (3) The tables in the source, then (4) those the backup lacks.
            let listed: BTreeSet<String> = env
                .disk
                .list(si)
                .map_err(BackupError::io("list", si))?
                .into_iter()
                .filter(|n| is_index_table_name(n))
                .collect();
            for name in &listed {
                let to = bi.join(name);
                if env.disk.exists(&to) {
                    run.summary.files_kept += 1;
                    continue;
                }
                run.plan(&si.join(name));
                // A table a merge removed meanwhile: the indexmap changed too, step (5) sees it.
                run.copy(&si.join(name), &to).await?;
            }
            run.settle().await?;
            // (5) Stable when the source's indexmap is the one copied and the backup holds every
            // table it lists.
            let copied =
                env.read_file(&bi.join("indexmap")).map_err(BackupError::io("read", &bi.join("indexmap")))?;
            let source = env.read_file(&si.join("indexmap")).ok();
            let complete = match crate::index::parse_indexmap(&copied) {
                Ok((_, tables)) => tables.iter().all(|t| {
                    env.disk.exists(&bi.join(t)) && env.disk.exists(&bi.join(format!("{t}.bloomfilter")))
                }),
                Err(_) => false,
            };
            if source.as_deref() == Some(&copied[..]) && complete {
                break listed;
            }
            // Under a load that flushes the index faster than a round copies it, the source's
            // indexmap may never hold still. A copy whose tables are all in the backup is a
            // consistent earlier state of the index (tables never change under their names, and
            // a restored node replays the log past its checkpoint), so after a few rounds it is
            // taken as it is.
            if complete && rounds >= SETTLE_ROUNDS {
                run.summary.index_moving = true;
                break listed;
            }
            run.summary.relisted += 1;
            rounds = bump(rounds, si, "the index kept changing")?;
        };
        // (6) Tables the source no longer has.
        for name in env.disk.list(bi).map_err(BackupError::io("list", bi))? {
            let stale_table = is_index_table_name(&name) && !listed.contains(&name);
            if stale_table || name.ends_with(PARTIAL) {
                run.remove(&bi.join(&name))?;
            }
        }
        run.sync_dir(bi).await?;
    }
    // (7), (8), (9): each if present.
    for (sub, name) in [
        ("stream-existence", "streamExistenceFilter.chk"),
        ("stream-existence", "streamExistenceFilter.dat"),
        ("scavenging", "scavenging.db"),
    ] {
        let from = si.join(sub).join(name);
        if env.disk.exists(&from) {
            let dir = bi.join(sub);
            run.create_dir(&dir).await?;
            run.plan(&from);
            run.copy(&from, &dir.join(name)).await?;
            run.sync_dir(&dir).await?;
        }
    }
    Ok(())
}

fn bump(rounds: u32, dir: &Path, what: &str) -> Result<u32, BackupError> {
    if rounds >= MAX_ROUNDS {
        return Err(BackupError::Inconsistent {
            dir: dir.to_path_buf(),
            detail: format!("{what} after {rounds} rounds"),
        });
    }
    Ok(rounds + 1)
}

/// Whether the chunk file at `path` has a completed footer and ends at or below `writer` (the
/// `writer.chk` copied with it). A chunk completed past `writer.chk` is not settled yet: the node
/// syncs a completed chunk before it moves `writer.chk` past it, and a crash in between makes
/// recovery reopen the chunk and write other records into it under the same name.
fn is_complete(env: &Env, path: &Path, writer: Option<i64>) -> bool {
    let Ok(f) = env.disk.open(path, OpenMode::Read) else { return false };
    let Ok(len) = f.len() else { return false };
    let Ok(h) = f.read_vec_at(HEADER_SIZE as usize, 0) else { return false };
    let Ok(header) = ChunkHeader::decode(&h) else { return false };
    let end = (u64::from(header.end) + 1).saturating_mul(header.chunk_size);
    if writer.is_none_or(|w| w < 0 || end > w as u64) {
        return false;
    }
    let Ok(b) = f.read_vec_at(FOOTER_SIZE as usize, len.saturating_sub(FOOTER_SIZE)) else { return false };
    matches!(ChunkFooter::decode(&b), Ok(Some(_)))
}

/// The log steps (1)–(5).
async fn copy_log(run: &mut Run<'_>, sd: &Path, bd: &Path) -> Result<(), BackupError> {
    let env = run.env;
    // (1) The last chunk of the backup (and any other not complete) is copied again.
    let mut held: Vec<String> = env
        .disk
        .list(bd)
        .map_err(BackupError::io("list", bd))?
        .into_iter()
        .filter(|n| chunk::is_chunk_name(n))
        .collect();
    held.sort_by_key(|n| chunk::parse_file_name(n));
    let last = held.last().cloned();
    let writer = read_checkpoint(env, &bd.join("writer.chk")).ok();
    for name in held {
        let path = bd.join(&name);
        if Some(&name) == last.as_ref() || !is_complete(env, &path, writer) {
            env.disk
                .rename(&path, &bd.join(format!("{name}.old")))
                .map_err(BackupError::io("rename", &path))?;
        }
    }
    run.sync_dir(bd).await?;
    // (2) before (3) and (4): the checkpoints name no more of the log than the chunks hold. The
    // test-only bug switch copies them the other way round, for the simulator to catch.
    let listed = if crate::buggify::bug(crate::buggify::Bug::BackupChunksBeforeCheckpoints) {
        let listed = copy_chunks(run, sd, bd).await?;
        copy_checkpoints(run, sd, bd).await?;
        listed
    } else {
        copy_checkpoints(run, sd, bd).await?;
        copy_chunks(run, sd, bd).await?
    };
    // (5) Chunks the source no longer has, the .old file and leftovers of interrupted copies.
    for name in env.disk.list(bd).map_err(BackupError::io("list", bd))? {
        let stale = chunk::is_chunk_name(&name) && !listed.contains(&name);
        if stale || name.ends_with(".old") || name.ends_with(PARTIAL) {
            run.remove(&bd.join(&name))?;
        }
    }
    run.sync_dir(bd).await?;
    run.summary.chunks = listed.len() as u64;
    run.summary.chaser = read_checkpoint(env, &bd.join("chaser.chk"))?;
    run.summary.writer = read_checkpoint(env, &bd.join("writer.chk"))?;
    Ok(())
}

/// The log step (2): the checkpoints, in order.
async fn copy_checkpoints(run: &mut Run<'_>, sd: &Path, bd: &Path) -> Result<(), BackupError> {
    for name in LOG_CHECKPOINTS {
        let from = sd.join(name);
        run.plan(&from);
        if run.copy(&from, &bd.join(name)).await? == Copied::Vanished {
            return Err(BackupError::NotA {
                path: sd.to_path_buf(),
                what: "a database directory",
                detail: format!("it has no {name}"),
            });
        }
    }
    run.sync_dir(bd).await
}

/// The log steps (3) and (4): every chunk file of the source the backup lacks, listed again while
/// a scavenge replaces some. Returns the last listing.
async fn copy_chunks(run: &mut Run<'_>, sd: &Path, bd: &Path) -> Result<BTreeSet<String>, BackupError> {
    let env = run.env;
    let mut rounds = 0u32;
    loop {
        let listed: BTreeSet<String> = env
            .disk
            .list(sd)
            .map_err(BackupError::io("list", sd))?
            .into_iter()
            .filter(|n| chunk::is_chunk_name(n))
            .collect();
        let due: Vec<&String> = listed.iter().filter(|n| !env.disk.exists(&bd.join(n))).collect();
        for name in &due {
            run.plan(&sd.join(name));
        }
        let mut vanished = false;
        for name in listed.iter() {
            let to = bd.join(name);
            if env.disk.exists(&to) {
                if rounds == 0 {
                    run.summary.files_kept += 1;
                }
                continue;
            }
            if run.copy(&sd.join(name), &to).await? == Copied::Vanished {
                vanished = true;
            }
        }
        run.settle().await?;
        if !vanished {
            return Ok(listed);
        }
        run.summary.relisted += 1;
        rounds = bump(rounds, sd, "chunk files kept vanishing")?;
    }
}
