//! The stream index: `(stream hash, event number) → log position`.
//!
//! A memtable takes new entries; when it holds `memtable_max` entries it is frozen and written, in
//! the background, to an immutable sorted table named by a UUID in `index/`, with a
//! `<uuid>.bloomfilter` beside it. The `indexmap` file lists the tables and the log position they
//! cover (the index checkpoint); it is checksummed and replaced atomically. When more than
//! `max_tables` tables exist they are merged into one, also in the background. On start the index
//! is rebuilt from the log past its checkpoint ([`Index::replay`]).
//!
//! Hashes are 64-bit and may collide: entries of two streams can share a hash and even an event
//! number. The index therefore returns *candidates*; the store reads each candidate record and keeps
//! those whose stream name matches, so a colliding pair of streams reads correctly.
//!
//! The stream existence filter (`stream-existence/streamExistenceFilter.dat` and `.chk`) is a bloom
//! filter over stream names: "certainly absent" answers skip the index for new streams.

pub mod bloom;
pub mod memtable;
pub mod ptable;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use self::bloom::Bloom;
use self::memtable::MemTable;
use self::ptable::{PTable, TableError};
use crate::env::{Env, OpenMode};

/// One index entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    /// Stream hash.
    pub hash: u64,
    /// Event number.
    pub event_number: i64,
    /// Log position of the record.
    pub position: u64,
}

/// Parses and checks an `indexmap` file: its index checkpoint and the table names it lists.
pub fn parse_indexmap(bytes: &[u8]) -> Result<(u64, Vec<String>), String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "indexmap is not text".to_string())?;
    let (sum, rest) = text.split_once('\n').ok_or("indexmap is truncated")?;
    if format!("{:08x}", crc32fast::hash(rest.as_bytes())) != sum.trim() {
        return Err("indexmap checksum mismatch".into());
    }
    let mut lines = rest.lines();
    if lines.next() != Some(INDEXMAP_VERSION) {
        return Err("unknown indexmap version".into());
    }
    let cp = lines.next().ok_or("indexmap has no checkpoint")?;
    let checkpoint: u64 =
        cp.split('/').next().and_then(|s| s.parse().ok()).ok_or("indexmap checkpoint is not a number")?;
    lines.next().ok_or("indexmap has no merge level")?;
    let mut names = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        names.push(line.rsplit(',').next().ok_or("bad indexmap line")?.to_string());
    }
    Ok((checkpoint, names))
}

/// The 64-bit stream hash (FNV-1a, then a mixing step), masked by `mask` (all ones in production;
/// tests narrow it to force collisions).
pub fn stream_hash(name: &str, mask: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 33)).wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h & mask
}

fn name_key(name: &str) -> u64 {
    stream_hash(name, u64::MAX).rotate_left(29) ^ (name.len() as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Index configuration.
#[derive(Clone, Debug)]
pub struct IndexConfig {
    /// The `index/` directory.
    pub dir: PathBuf,
    /// Entries in the memtable before it is flushed to a table.
    pub memtable_max: usize,
    /// Tables allowed before an automatic merge.
    pub max_tables: usize,
    /// Size of the stream existence filter in bytes.
    pub existence_filter_bytes: u64,
    /// Mask applied to stream hashes (tests only; all ones otherwise).
    pub hash_mask: u64,
}

/// Index errors.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// A table failed.
    #[error(transparent)]
    Table(#[from] TableError),
    /// Other I/O.
    #[error("index I/O error on {path}: {source}")]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

struct Table {
    table: PTable,
    bloom: Bloom,
}

/// Tables listed by an indexmap, and its checkpoint.
type LoadedMap = (Vec<Arc<Table>>, u64);

struct Frozen {
    entries: Arc<MemTable>,
    until: u64,
}

struct State {
    mem: MemTable,
    frozen: Vec<Frozen>,
    tables: Vec<Arc<Table>>,
    /// Log position below which every entry is in `tables`.
    checkpoint: u64,
}

/// Figures for `/stats` and the benchmark.
#[derive(Clone, Debug, Default)]
pub struct IndexStats {
    /// Entries in memtables.
    pub memtable_entries: usize,
    /// Tables on disk.
    pub tables: usize,
    /// Entries in tables.
    pub table_entries: u64,
    /// Approximate memory held by the index, in bytes.
    pub memory_bytes: usize,
    /// Index checkpoint.
    pub checkpoint: u64,
}

/// The index.
pub struct Index {
    env: Env,
    cfg: IndexConfig,
    state: RwLock<State>,
    existence: RwLock<Bloom>,
    /// Position up to which the log has been applied (entries and existence filter).
    applied: AtomicU64,
    job: Mutex<()>,
}

const INDEXMAP: &str = "indexmap";
const INDEXMAP_VERSION: &str = "2";
const EXISTENCE_DIR: &str = "stream-existence";
const EXISTENCE_DAT: &str = "streamExistenceFilter.dat";
const EXISTENCE_CHK: &str = "streamExistenceFilter.chk";

impl Index {
    /// Opens the index. `log_end` is the committed end of the log; tables covering more than that
    /// (after a truncation) are dropped and the index is rebuilt from the start.
    pub fn open(env: &Env, cfg: IndexConfig, log_end: u64) -> Result<Arc<Index>, IndexError> {
        let disk = &*env.disk;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| IndexError::Io { path, source }
        };
        let ex_dir = cfg.dir.join(EXISTENCE_DIR);
        disk.create_dir_all(&ex_dir).map_err(io(&ex_dir))?;
        disk.sync_dir(crate::env::parent(&cfg.dir)).map_err(io(&cfg.dir))?;
        disk.sync_dir(&cfg.dir).map_err(io(&cfg.dir))?;
        let (mut tables, mut checkpoint) = match Self::load_map(env, &cfg) {
            Ok(Some(x)) => x,
            Ok(None) => (Vec::new(), 0),
            Err(e) => {
                tracing::warn!(error = %e, "the index is unusable and will be rebuilt from the log");
                (Vec::new(), 0)
            }
        };
        if checkpoint > log_end {
            tracing::warn!(
                checkpoint,
                log_end,
                "the index covers more than the log (truncated): rebuilding it"
            );
            tables.clear();
            checkpoint = 0;
        }
        // Remove table files that the map does not list (leftovers of an interrupted flush or merge).
        let listed: BTreeSet<String> = tables.iter().map(|t| t.table.name.clone()).collect();
        for name in disk.list(&cfg.dir).map_err(io(&cfg.dir))? {
            let base = name.strip_suffix(".bloomfilter").unwrap_or(&name);
            if uuid::Uuid::parse_str(base).is_ok() && !listed.contains(base) {
                let p = cfg.dir.join(&name);
                disk.remove(&p).map_err(io(&p))?;
            }
        }
        let (existence, existence_checkpoint) = {
            let chk = ex_dir.join(EXISTENCE_CHK);
            let dat = ex_dir.join(EXISTENCE_DAT);
            let loaded = (|| -> Option<(Bloom, u64)> {
                let c = env.read_file(&chk).ok()?;
                let pos = i64::from_le_bytes(c.get(0..8)?.try_into().ok()?);
                let b = Bloom::decode(&env.read_file(&dat).ok()?).ok()?;
                (pos >= 0
                    && pos as u64 <= log_end
                    && b.size_bytes() as u64 == cfg.existence_filter_bytes.max(8))
                .then_some((b, pos as u64))
            })();
            loaded.unwrap_or_else(|| (Bloom::new(cfg.existence_filter_bytes.max(8) * 8, 3), 0))
        };
        let applied = checkpoint.min(existence_checkpoint);
        Ok(Arc::new(Index {
            env: env.clone(),
            cfg,
            state: RwLock::new(State { mem: MemTable::new(), frozen: Vec::new(), tables, checkpoint }),
            existence: RwLock::new(existence),
            applied: AtomicU64::new(applied),
            job: Mutex::new(()),
        }))
    }

    fn load_map(env: &Env, cfg: &IndexConfig) -> Result<Option<LoadedMap>, String> {
        let path = cfg.dir.join(INDEXMAP);
        if !env.disk.exists(&path) {
            return Ok(None);
        }
        let text = env.read_file(&path).map_err(|e| e.to_string())?;
        let (checkpoint, names) = parse_indexmap(&text)?;
        let mut tables = Vec::new();
        for name in &names {
            let tp = cfg.dir.join(name);
            let table = PTable::open(&*env.disk, &tp).map_err(|e| e.to_string())?;
            let bp = cfg.dir.join(format!("{name}.bloomfilter"));
            let bloom = env
                .read_file(&bp)
                .map_err(|e| e.to_string())
                .and_then(|b| Bloom::decode(&b).map_err(|e| format!("{}: {e}", bp.display())))?;
            tables.push(Arc::new(Table { table, bloom }));
        }
        Ok(Some((tables, checkpoint)))
    }

    /// Where the rebuild from the log must start.
    pub fn replay_from(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }

    /// Adds entries for records the log has committed up to `until`, and the names of the
    /// streams they belong to (to the existence filter). Entries below the table checkpoint
    /// (seen again while the existence filter catches up) are not added twice.
    pub fn add(&self, entries: &[Entry], names: &[&str], until: u64) {
        if !names.is_empty() {
            // Re-inserting a name the filter already holds (during replay) changes nothing.
            let mut ex = self.existence.write().unwrap_or_else(|e| e.into_inner());
            for name in names {
                ex.insert(name_key(name));
            }
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let cp = st.checkpoint;
        for e in entries.iter().filter(|e| e.position >= cp) {
            st.mem.insert(*e);
        }
        drop(st);
        self.applied.fetch_max(until, Ordering::AcqRel);
    }

    /// Freezes a full memtable and writes it out in the background. Call without holding locks.
    pub fn maybe_flush(self: &Arc<Self>) {
        {
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            // BUGGIFY (sim only): flush a small, non-empty memtable early.
            if st.mem.len() < self.cfg.memtable_max && (st.mem.is_empty() || !crate::buggify!()) {
                return;
            }
            let fresh = st.mem.empty_like();
            let entries = Arc::new(std::mem::replace(&mut st.mem, fresh));
            let until = self.applied.load(Ordering::Acquire);
            st.frozen.push(Frozen { entries, until });
        }
        let me = self.clone();
        self.env.rt.background("annal-index-flush", Box::new(move || me.run_jobs(false)));
    }

    /// Merges all tables into one now (`POST /admin/mergeindexes`).
    pub fn merge_now(self: &Arc<Self>) {
        let me = self.clone();
        self.env.rt.background("annal-index-merge", Box::new(move || me.run_jobs(true)));
    }

    fn run_jobs(&self, force_merge: bool) {
        let _job = self.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Err(e) = self.flush_frozen() {
            // `bug(..)` is a test-only switch (src/buggify.rs): constant false without `sim`.
            if crate::buggify::bug(crate::buggify::Bug::PanicOnIndexFlushError) {
                panic!("index flush failed: {e}");
            }
            tracing::error!(error = %e, "index flush failed; entries stay in memory and the flush is retried later");
            return;
        }
        let n = self.state.read().unwrap_or_else(|e| e.into_inner()).tables.len();
        if n > self.cfg.max_tables || (force_merge && n > 1) {
            if let Err(e) = self.merge() {
                tracing::error!(error = %e, "index merge failed");
            }
        }
    }

    fn new_table(&self, entries: impl Iterator<Item = Entry>) -> Result<Arc<Table>, IndexError> {
        let disk = &*self.env.disk;
        let name = self.env.new_uuid().to_string();
        let path = self.cfg.dir.join(&name);
        let mut hashes = Vec::new();
        let count = PTable::write(
            disk,
            &path,
            entries.inspect(|e| {
                if hashes.last() != Some(&e.hash) {
                    hashes.push(e.hash)
                }
            }),
        )
        .map_err(|source| IndexError::Io { path: path.clone(), source })?;
        debug_assert!(count as usize >= hashes.len());
        let mut bloom = Bloom::for_keys(hashes.len());
        hashes.iter().for_each(|h| bloom.insert(*h));
        let bp = self.cfg.dir.join(format!("{name}.bloomfilter"));
        let f = disk
            .open(&bp, OpenMode::CreateTruncate)
            .map_err(|source| IndexError::Io { path: bp.clone(), source })?;
        f.write_all_at(&bloom.encode(), 0)
            .and_then(|_| f.sync_data())
            .map_err(|source| IndexError::Io { path: bp.clone(), source })?;
        disk.sync_dir(&self.cfg.dir)
            .map_err(|source| IndexError::Io { path: self.cfg.dir.clone(), source })?;
        let table = PTable::open(disk, &path)?;
        Ok(Arc::new(Table { table, bloom }))
    }

    fn flush_frozen(&self) -> Result<(), IndexError> {
        loop {
            let next = {
                let st = self.state.read().unwrap_or_else(|e| e.into_inner());
                st.frozen.first().map(|f| (f.entries.clone(), f.until))
            };
            let Some((entries, until)) = next else { return Ok(()) };
            let table = self.new_table(entries.sorted().into_iter())?;
            {
                let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
                st.frozen.remove(0);
                st.tables.push(table);
                st.checkpoint = until;
            }
            self.write_map()?;
            self.write_existence()?;
        }
    }

    fn merge(&self) -> Result<(), IndexError> {
        let old: Vec<Arc<Table>> = self.state.read().unwrap_or_else(|e| e.into_inner()).tables.clone();
        let mut all: Vec<Entry> = Vec::new();
        for t in &old {
            for e in t.table.iter() {
                all.push(e?);
            }
        }
        all.sort_unstable();
        all.dedup();
        let merged = self.new_table(all.into_iter())?;
        {
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            let keep: Vec<Arc<Table>> =
                st.tables.iter().filter(|t| !old.iter().any(|o| Arc::ptr_eq(o, t))).cloned().collect();
            st.tables = std::iter::once(merged).chain(keep).collect();
        }
        self.write_map()?;
        old.iter().for_each(|t| self.remove_table_files(t));
        Ok(())
    }

    /// Removes a table that the indexmap no longer lists (a leftover is also removed at start).
    fn remove_table_files(&self, t: &Table) {
        for p in [t.table.path().to_path_buf(), self.cfg.dir.join(format!("{}.bloomfilter", t.table.name))] {
            if let Err(e) = self.env.disk.remove(&p) {
                tracing::warn!(error = %e, path = %p.display(), "could not remove an index table no longer listed");
            }
        }
    }

    fn write_map(&self) -> Result<(), IndexError> {
        let (checkpoint, names) = {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            (st.checkpoint, st.tables.iter().map(|t| t.table.name.clone()).collect::<Vec<_>>())
        };
        let mut rest = format!("{INDEXMAP_VERSION}\n{checkpoint}/{checkpoint}\n{}\n", i32::MAX);
        for (i, n) in names.iter().enumerate() {
            rest.push_str(&format!("0,{i},{n}\n"));
        }
        let text = format!("{:08x}\n{rest}", crc32fast::hash(rest.as_bytes()));
        let path = self.cfg.dir.join(INDEXMAP);
        self.env.write_file_atomic(&path, text.as_bytes()).map_err(|source| IndexError::Io { path, source })
    }

    fn write_existence(&self) -> Result<(), IndexError> {
        let (bytes, pos) = {
            let ex = self.existence.read().unwrap_or_else(|e| e.into_inner());
            (ex.encode(), self.applied.load(Ordering::Acquire))
        };
        let dir = self.cfg.dir.join(EXISTENCE_DIR);
        let dat = dir.join(EXISTENCE_DAT);
        let chk = dir.join(EXISTENCE_CHK);
        // The checkpoint is written after the data, so it never claims more than the data holds.
        self.env
            .write_file_atomic(&dat, &bytes)
            .map_err(|source| IndexError::Io { path: dat.clone(), source })?;
        self.env
            .write_file_atomic(&chk, &(pos as i64).to_le_bytes())
            .map_err(|source| IndexError::Io { path: chk.clone(), source })
    }

    /// Whether stream `name` may have been written (false: certainly never).
    pub fn may_exist(&self, name: &str) -> bool {
        self.existence.read().unwrap_or_else(|e| e.into_inner()).may_contain(name_key(name))
    }

    /// Candidate entries for `hash` with event numbers in `from..=to`, ascending, deduplicated.
    pub fn range(&self, hash: u64, from: i64, to: i64) -> Result<Vec<Entry>, IndexError> {
        if from > to {
            return Ok(Vec::new());
        }
        let lo = Entry { hash, event_number: from, position: 0 };
        let hi = Entry { hash, event_number: to, position: u64::MAX };
        let (mut out, tables) = self.in_memory(hash, from, to);
        for t in tables.iter().filter(|t| t.bloom.may_contain(hash)) {
            t.table.range(lo, hi, &mut out)?;
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// Up to `limit` candidate entries for `hash` with event numbers in `from..=to`, highest first.
    /// With colliding streams, callers ask again below the lowest entry returned.
    pub fn range_desc(&self, hash: u64, from: i64, to: i64, limit: usize) -> Result<Vec<Entry>, IndexError> {
        if from > to || limit == 0 {
            return Ok(Vec::new());
        }
        let lo = Entry { hash, event_number: from, position: 0 };
        let hi = Entry { hash, event_number: to, position: u64::MAX };
        let (mut out, tables) = {
            let st = self.state.read().unwrap_or_else(|e| e.into_inner());
            let mut out: Vec<Entry> = st.mem.range(hash, from, to).rev().take(limit).collect();
            for f in &st.frozen {
                out.extend(f.entries.range(hash, from, to).rev().take(limit));
            }
            (out, st.tables.clone())
        };
        for t in tables.iter().filter(|t| t.bloom.may_contain(hash)) {
            t.table.range_desc(lo, hi, limit, &mut out)?;
        }
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.dedup();
        out.truncate(limit);
        Ok(out)
    }

    fn in_memory(&self, hash: u64, from: i64, to: i64) -> (Vec<Entry>, Vec<Arc<Table>>) {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Entry> = st.mem.range(hash, from, to).collect();
        for f in &st.frozen {
            out.extend(f.entries.range(hash, from, to));
        }
        (out, st.tables.clone())
    }

    /// Drops every entry for which `keep` is false (records a scavenge removed): memtables are
    /// filtered in place, tables that lose entries are rewritten. Returns (removed, kept).
    pub fn retain(&self, keep: impl Fn(&Entry) -> bool) -> Result<(u64, u64), IndexError> {
        let _job = self.job.lock().unwrap_or_else(|e| e.into_inner());
        self.flush_frozen()?;
        let (mut removed, mut kept) = (0u64, 0u64);
        {
            let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
            let before = st.mem.len();
            st.mem.retain(|e| keep(e));
            removed += (before - st.mem.len()) as u64;
            kept += st.mem.len() as u64;
        }
        let tables = self.state.read().unwrap_or_else(|e| e.into_inner()).tables.clone();
        let mut replaced = Vec::new();
        let mut next = Vec::with_capacity(tables.len());
        for t in tables {
            let all = t.table.iter().collect::<Result<Vec<_>, _>>()?;
            let left: Vec<Entry> = all.iter().copied().filter(|e| keep(e)).collect();
            removed += (all.len() - left.len()) as u64;
            kept += left.len() as u64;
            if left.len() == all.len() {
                next.push(t);
            } else {
                if !left.is_empty() {
                    next.push(self.new_table(left.into_iter())?);
                }
                replaced.push(t);
            }
        }
        if !replaced.is_empty() {
            self.state.write().unwrap_or_else(|e| e.into_inner()).tables = next;
            self.write_map()?;
            replaced.iter().for_each(|t| self.remove_table_files(t));
        }
        Ok((removed, kept))
    }

    /// Figures for statistics.
    pub fn stats(&self) -> IndexStats {
        let st = self.state.read().unwrap_or_else(|e| e.into_inner());
        let ex = self.existence.read().unwrap_or_else(|e| e.into_inner()).size_bytes();
        let mem = st.mem.len() + st.frozen.iter().map(|f| f.entries.len()).sum::<usize>();
        let mem_bytes =
            st.mem.memory_bytes() + st.frozen.iter().map(|f| f.entries.memory_bytes()).sum::<usize>();
        IndexStats {
            memtable_entries: mem,
            tables: st.tables.len(),
            table_entries: st.tables.iter().map(|t| t.table.count).sum(),
            memory_bytes: mem_bytes
                + st.tables.iter().map(|t| t.table.memory_bytes() + t.bloom.size_bytes()).sum::<usize>()
                + ex,
            checkpoint: st.checkpoint,
        }
    }

    /// The hash of `name` under this index's configuration.
    pub fn hash(&self, name: &str) -> u64 {
        stream_hash(name, self.cfg.hash_mask)
    }

    /// Waits for background flushes and merges to finish, then persists the existence filter.
    pub fn quiesce(&self) -> Result<(), IndexError> {
        let _job = self.job.lock().unwrap_or_else(|e| e.into_inner());
        self.flush_frozen()?;
        self.write_existence()
    }
}
