//! Scavenging: removes deleted and expired events from chunks and the index, reclaiming space.
//!
//! A run is tied to one scavenge point (a `$scavengePoint` record, which completes its chunk) and
//! covers only records before it. Phases, each checkpointed in `index/scavenging/scavenging.db`
//! so a stop or a crash resumes where it left off:
//!
//! 1. **Accumulation** reads, once ever, the log between the previous point and this one,
//!    recording tombstones, metadata, chunk timestamp ranges and hash collisions.
//! 2. **Calculation** derives each affected stream's discard rule ([`plan::rule`]) and weighs the
//!    chunks (+2 per certain discard, +1 per discard that depends on age).
//! 3. **Execution** rewrites the chunks whose weight exceeds the threshold (-1: all) into
//!    scavenged chunks with a position map, swapped in atomically (new version renamed into place,
//!    then the old file removed); then **merging** joins adjacent small scavenged chunks into one
//!    file of at most a chunk's size (unless `--disable-scavenge-merging`); then **index
//!    execution** drops the entries of removed records.
//! 4. **Cleaning** drops the run's state and records the point as reached.
//!
//! Progress goes to `$scavenges-{id}` (linked from `$scavenges` for start and completion), to the
//! log (tracing) and to [`Progress`] for `/stats`. Starting rules (spec's state table): resume a
//! stopped run; else use an unreached point; else write a new point unless `syncOnly`.

pub mod db;
pub mod plan;
pub mod shared;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use self::db::{DbError, Phase, Point, Run, ScavengeDb};
use self::shared::{Credentials, Leader, SharedWrite, Written};
use crate::env::Env;
use crate::log::record::Record;
use crate::store::{StorageError, Store, WriteError, SCAVENGE_POINTS};

/// Scavenge settings from the node's options.
#[derive(Clone, Debug)]
pub struct ScavengeConfig {
    /// Merge small scavenged chunks (`!--disable-scavenge-merging`).
    pub merge: bool,
    /// Days to keep `$scavenges` history.
    pub history_max_age_days: u64,
    /// Page size of scavenging.db in bytes.
    pub page_size: usize,
    /// Stream hashes remembered for collision detection.
    pub hash_users_capacity: usize,
    /// This node's HTTP endpoint, for history events.
    pub node_endpoint: String,
}

/// Start parameters (`POST /admin/scavenge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartOptions {
    /// 1–4.
    pub threads: u32,
    /// -1 all chunks, 0 any weight, >0 minimum weight.
    pub threshold: i64,
    /// 1–100 (100 when threads > 1).
    pub throttle_percent: u32,
    /// Only run against an existing unreached point.
    pub sync_only: bool,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions { threads: 1, threshold: 0, throttle_percent: 100, sync_only: false }
    }
}

/// Largest `threads`.
pub const THREADS_MAX: u32 = 4;
/// Shortest throttle rest.
const THROTTLE_REST_MIN: Duration = Duration::from_secs(1);
/// How long a node waits to read back a scavenge point the leader wrote for it (v5: 30 × 1 s).
pub const POINT_ARRIVAL_MAX: Duration = Duration::from_secs(30);
/// Between looks for that point.
const POINT_ARRIVAL_POLL: Duration = Duration::from_millis(100);

/// Scavenge failures.
#[derive(Debug, thiserror::Error)]
pub enum ScavengeError {
    /// A start parameter is out of range.
    #[error("{0}")]
    InvalidParameter(String),
    /// A run is in progress.
    #[error("Scavenge is already running")]
    AlreadyRunning,
    /// No run with that id.
    #[error("Scavenge Id does not exist")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The scavenge database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The run's shared records (history, a new point) cannot be written: no leader is known or
    /// it cannot be reached.
    #[error("{0}")]
    NoLeader(String),
    /// The leader refused a shared write (its status code and reason).
    #[error("the leader refused the scavenge's write: {1}")]
    LeaderRefused(u16, String),
}

impl From<crate::index::IndexError> for ScavengeError {
    fn from(e: crate::index::IndexError) -> Self {
        ScavengeError::Storage(e.into())
    }
}

impl From<WriteError> for ScavengeError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::Storage(s) => ScavengeError::Storage(s),
            WriteError::NotLeader => ScavengeError::NoLeader(
                "this node is not the leader (any more): the scavenge's shared records go through \
                 the leader"
                    .into(),
            ),
            other => ScavengeError::Storage(StorageError::Io(other.to_string())),
        }
    }
}

/// Live figures of the scavenger.
#[derive(Debug, Default)]
pub struct Progress {
    /// Runs completed.
    pub runs: AtomicU64,
    /// Chunks rewritten (all runs).
    pub chunks_scavenged: AtomicU64,
    /// Chunk files merged away (all runs).
    pub chunks_merged: AtomicU64,
    /// Bytes reclaimed (all runs).
    pub space_saved: AtomicU64,
    /// Log bytes read by accumulation and execution (all runs).
    pub bytes_processed: AtomicU64,
    /// Index entries removed (all runs).
    pub index_entries_removed: AtomicU64,
    /// Collision checks that missed the hash users cache.
    pub hash_cache_misses: AtomicU64,
    /// Runs that ended, by result: succeeded, stopped, failed.
    pub results: [AtomicU64; 3],
}

struct Running {
    id: String,
    stop: Arc<AtomicBool>,
    done: tokio::sync::watch::Receiver<bool>,
}

/// The scavenger of one node.
pub struct Scavenger {
    env: Env,
    store: Arc<Store>,
    cfg: ScavengeConfig,
    db: Mutex<ScavengeDb>,
    current: Mutex<Option<Running>>,
    /// Where shared writes go in a cluster (unset: this node writes them, a single node).
    leader: std::sync::OnceLock<Arc<dyn Leader>>,
    /// Live figures.
    pub progress: Progress,
}

/// A scavenge's phase as metrics name it (KurrentDB's scavenge statuses).
pub const PHASES: [&str; 7] = [
    "Accumulation",
    "Calculation",
    "Chunk Execution",
    "Chunk Merging",
    "Index Execution",
    "Cleaning",
    "Idle",
];

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// All phases done.
    Success,
    /// Stopped by request; the next start resumes it.
    Stopped,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Scavenger {
    /// Opens the scavenger's database (`<index>/scavenging`).
    pub fn open(store: Arc<Store>, cfg: ScavengeConfig) -> Result<Arc<Scavenger>, ScavengeError> {
        let env = store.env().clone();
        let dir = store.config().index_dir.join("scavenging");
        let db = ScavengeDb::open(&env, &dir, cfg.page_size)?;
        Ok(Arc::new(Scavenger {
            env,
            store,
            cfg,
            db: Mutex::new(db),
            current: Mutex::new(None),
            leader: std::sync::OnceLock::new(),
            progress: Progress::default(),
        }))
    }

    /// Validates start parameters (the spec's rules; 400 on violation).
    pub fn validate(o: &StartOptions) -> Result<(), ScavengeError> {
        if o.threads == 0 || o.threads > THREADS_MAX {
            return Err(ScavengeError::InvalidParameter(format!(
                "threads must be between 1 and {THREADS_MAX}"
            )));
        }
        if o.throttle_percent == 0 || o.throttle_percent > 100 {
            return Err(ScavengeError::InvalidParameter("throttlePercent must be between 1 and 100".into()));
        }
        if o.throttle_percent != 100 && o.threads > 1 {
            return Err(ScavengeError::InvalidParameter(
                "throttlePercent must be 100 for a multi-threaded scavenge".into(),
            ));
        }
        if o.threshold < -1 {
            return Err(ScavengeError::InvalidParameter("threshold must be -1 or more".into()));
        }
        Ok(())
    }

    /// The id of the running scavenge.
    pub fn current(&self) -> Option<String> {
        lock(&self.current).as_ref().filter(|r| !*r.done.borrow()).map(|r| r.id.clone())
    }

    /// The phase of the running scavenge as [`PHASES`] names it ("Idle" when none runs; a stopped
    /// run waiting to be resumed is idle).
    pub fn phase(&self) -> &'static str {
        if self.current().is_none() {
            return PHASES[6];
        }
        match lock(&self.db).state.run.as_ref().map(|r| &r.phase) {
            Some(Phase::Accumulating) | None => PHASES[0],
            Some(Phase::Calculating) => PHASES[1],
            Some(Phase::Executing { .. }) => PHASES[2],
            Some(Phase::Merging) => PHASES[3],
            Some(Phase::Indexing) => PHASES[4],
            Some(Phase::Cleaning) => PHASES[5],
        }
    }

    /// Sends this node's shared writes (history, new points) through `leader` from now on: a
    /// cluster node's, which leads only some of the time.
    pub fn route_shared_writes(&self, leader: Arc<dyn Leader>) {
        let _ = self.leader.set(leader);
    }

    /// Starts (or resumes) a scavenge and returns its id (a single node's, or a start without
    /// credentials to present to a leader).
    pub async fn start(self: &Arc<Self>, opts: StartOptions) -> Result<String, ScavengeError> {
        self.start_by(opts, None).await
    }

    /// Starts (or resumes) a scavenge for the holder of `credentials` and returns its id once
    /// `$scavengeStarted` is written: a start whose history cannot be written (no leader) fails
    /// here rather than after an answer that said it began.
    pub async fn start_by(
        self: &Arc<Self>,
        opts: StartOptions,
        credentials: Credentials,
    ) -> Result<String, ScavengeError> {
        Self::validate(&opts)?;
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let stop = Arc::new(AtomicBool::new(false));
        let id = {
            let mut cur = lock(&self.current);
            if cur.as_ref().is_some_and(|r| !*r.done.borrow()) {
                return Err(ScavengeError::AlreadyRunning);
            }
            let id = self.env.new_uuid().to_string();
            *cur = Some(Running { id: id.clone(), stop: stop.clone(), done: done_rx });
            id
        };
        let started = serde_json::json!({"scavengeId": id, "nodeEndpoint": self.cfg.node_endpoint});
        let unrecorded = crate::buggify::bug(crate::buggify::Bug::ScavengeHistoryLocal);
        // (With the bug: answered before anything is recorded, recorded in the local store.)
        if !unrecorded {
            if let Err(e) = self.history(&id, "$scavengeStarted", started.clone(), true, &credentials).await {
                tracing::warn!(scavenge = %id, error = %e, "a scavenge could not start: its history cannot be written");
                done_tx.send_replace(true);
                return Err(e);
            }
        }
        let me = self.clone();
        let run_id = id.clone();
        self.env.rt.spawn(Box::pin(async move {
            if unrecorded {
                let w = SharedWrite::History {
                    scavenge_id: run_id.clone(),
                    event_type: "$scavengeStarted".into(),
                    data: started,
                    linked: true,
                };
                if let Err(e) = me.apply_shared(w).await {
                    tracing::error!(scavenge = %run_id, error = %e, "scavenge failed");
                    done_tx.send_replace(true);
                    return;
                }
            }
            let started = me.env.clock.monotonic();
            tracing::info!(scavenge = %run_id, options = ?opts, "scavenge started");
            let mut cleaned = None;
            let result = me.run(&run_id, opts, &stop, &credentials, &mut cleaned).await;
            let took = me.env.clock.monotonic() - started;
            me.finish(&run_id, &result, took, cleaned, &credentials).await;
            done_tx.send_replace(true);
        }));
        Ok(id)
    }

    /// Stops the run with `id` (or `"current"`) and waits until it has stopped.
    pub async fn stop(&self, id: &str) -> Result<String, ScavengeError> {
        let (rid, stop, mut done) = {
            let cur = lock(&self.current);
            match cur.as_ref() {
                Some(r) if (r.id == id || id == "current") && !*r.done.borrow() => {
                    (r.id.clone(), r.stop.clone(), r.done.clone())
                }
                _ => return Err(ScavengeError::NotFound),
            }
        };
        stop.store(true, Ordering::SeqCst);
        let _ = done.wait_for(|d| *d).await;
        Ok(rid)
    }

    /// Waits for the current run (if any) to end.
    pub async fn wait(&self) {
        let done = lock(&self.current).as_ref().map(|r| r.done.clone());
        if let Some(mut d) = done {
            let _ = d.wait_for(|d| *d).await;
        }
    }

    async fn blocking<R: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Scavenger) -> Result<R, ScavengeError> + Send + 'static,
    ) -> Result<R, ScavengeError> {
        let me = self.clone();
        self.env.blocking(move || f(&me)).await
    }

    async fn run(
        self: &Arc<Self>,
        id: &str,
        opts: StartOptions,
        stop: &Arc<AtomicBool>,
        credentials: &Credentials,
        cleaned: &mut Option<u64>,
    ) -> Result<Outcome, ScavengeError> {
        // Choose the point: resume, an unreached point, or a new one.
        let resume = lock(&self.db).state.run.clone();
        let run = match resume {
            Some(mut r) => {
                tracing::info!(scavenge = %r.id, phase = ?r.phase, "resuming a stopped scavenge");
                r.id = id.to_string();
                r
            }
            None => {
                let last = lock(&self.db).state.last_point.clone();
                let point = match self.blocking(|s| s.latest_point()).await? {
                    Some(p) if last.as_ref().is_none_or(|l| p.number > l.number) => p,
                    _ if opts.sync_only => {
                        tracing::info!(scavenge = %id, "syncOnly: no unreached scavenge point, nothing to do");
                        return Ok(Outcome::Success);
                    }
                    _ => {
                        let point = SharedWrite::Point { threshold: opts.threshold };
                        let written = self.shared(point, credentials).await?;
                        self.point_arrival(written.event_number).await?
                    }
                };
                Run {
                    id: id.to_string(),
                    point,
                    phase: Phase::Accumulating,
                    rules: BTreeMap::new(),
                    weights: BTreeMap::new(),
                    space_saved: 0,
                    started_us: self.env.clock.wall_micros(),
                }
            }
        };
        {
            let mut db = lock(&self.db);
            db.state.run = Some(run);
            db.save()?;
        }
        loop {
            if stop.load(Ordering::SeqCst) {
                return Ok(Outcome::Stopped);
            }
            let phase = lock(&self.db).state.run.as_ref().map(|r| r.phase.clone());
            match phase {
                None => return Ok(Outcome::Success),
                Some(Phase::Accumulating) => {
                    let st = stop.clone();
                    let cap = self.cfg.hash_users_capacity;
                    if !self.blocking(move |s| s.accumulate(&st, cap)).await? {
                        return Ok(Outcome::Stopped);
                    }
                }
                Some(Phase::Calculating) => self.blocking(|s| s.calculate()).await?,
                Some(Phase::Executing { .. }) => {
                    if !self.execute(id, opts, stop, credentials).await? {
                        return Ok(Outcome::Stopped);
                    }
                }
                Some(Phase::Merging) => {
                    let merge = self.cfg.merge;
                    let events = self
                        .blocking(move |s| {
                            if merge {
                                s.merge()
                            } else {
                                s.advance(Phase::Indexing).map(|_| Vec::new())
                            }
                        })
                        .await?;
                    for e in events {
                        self.history(id, "$scavengeMergeCompleted", e, false, credentials).await?;
                    }
                }
                Some(Phase::Indexing) => {
                    let ev = self.blocking(|s| s.execute_index()).await?;
                    self.history(id, "$scavengeIndexCompleted", ev, false, credentials).await?;
                }
                Some(Phase::Cleaning) => *cleaned = Some(self.blocking(|s| s.clean()).await?),
            }
        }
    }

    /// The scavenge point numbered `number` (or a later one), once this node has it: at once on
    /// the leader that wrote it, after replication on a follower (at most [`POINT_ARRIVAL_MAX`]).
    async fn point_arrival(self: &Arc<Self>, number: i64) -> Result<Point, ScavengeError> {
        let deadline = self.env.clock.monotonic() + POINT_ARRIVAL_MAX;
        loop {
            if let Some(p) = self.blocking(|s| s.latest_point()).await?.filter(|p| p.number >= number) {
                return Ok(p);
            }
            if self.env.clock.monotonic() >= deadline {
                return Err(ScavengeError::Storage(StorageError::Io(format!(
                    "the new scavenge point (number {number}) did not reach this node within {POINT_ARRIVAL_MAX:?}"
                ))));
            }
            self.env.rt.sleep(POINT_ARRIVAL_POLL).await;
        }
    }

    /// The latest scavenge point in the log, if any.
    fn latest_point(&self) -> Result<Option<Point>, ScavengeError> {
        let now = self.env.clock.wall_micros();
        match self.store.read_event(SCAVENGE_POINTS, -1, false, now) {
            Ok(Some(e)) => {
                let e = e.event;
                let threshold = serde_json::from_slice::<serde_json::Value>(&e.data)
                    .ok()
                    .and_then(|v| v.get("threshold").and_then(|t| t.as_i64()))
                    .unwrap_or(0);
                Ok(Some(Point {
                    number: e.event_number,
                    position: e.position,
                    effective_now_us: e.timestamp_us,
                    threshold,
                }))
            }
            Ok(None) | Err(crate::store::ReadError::NoStream) => Ok(None),
            Err(e) => Err(ScavengeError::Storage(StorageError::Io(e.to_string()))),
        }
    }

    fn advance(&self, phase: Phase) -> Result<(), ScavengeError> {
        let mut db = lock(&self.db);
        if let Some(r) = db.state.run.as_mut() {
            r.phase = phase;
        }
        db.save()?;
        Ok(())
    }

    /// Accumulation, checkpointed at every chunk boundary. Returns false when stopped.
    fn accumulate(&self, stop: &AtomicBool, cache_capacity: usize) -> Result<bool, ScavengeError> {
        let log = self.store.log();
        let size = log.chunk_size();
        let (from, end) = {
            let db = lock(&self.db);
            let run = db.state.run.as_ref().ok_or(ScavengeError::NotFound)?;
            (db.state.accumulated_until, run.point.position)
        };
        let mut users: BTreeMap<u64, String> = BTreeMap::new();
        let mut scan = log.scan(from).until(end);
        let mut chunk = from / size;
        let mut facts_batch: Vec<Record> = Vec::new();
        loop {
            let rec = scan.next().transpose().map_err(StorageError::from)?;
            let at = rec.as_ref().map(|r| r.log_position()).unwrap_or(end);
            if at / size != chunk || rec.is_none() {
                self.absorb(&facts_batch, &mut users, cache_capacity);
                facts_batch.clear();
                let mut db = lock(&self.db);
                db.state.accumulated_until = if rec.is_none() { end } else { at / size * size };
                if rec.is_none() {
                    if let Some(r) = db.state.run.as_mut() {
                        r.phase = Phase::Calculating;
                    }
                }
                db.save()?;
                drop(db);
                chunk = at / size;
                if rec.is_none() {
                    return Ok(true);
                }
                if stop.load(Ordering::SeqCst) {
                    return Ok(false);
                }
            }
            if let Some(r) = rec {
                facts_batch.push(r);
                if facts_batch.len() >= 4096 {
                    self.absorb(&facts_batch, &mut users, cache_capacity);
                    facts_batch.clear();
                }
            }
        }
    }

    fn absorb(&self, recs: &[Record], users: &mut BTreeMap<u64, String>, capacity: usize) {
        let size = self.store.log().chunk_size();
        let mut db = lock(&self.db);
        let state = &mut db.state;
        for r in recs {
            let Record::Event(e) = r else { continue };
            let bytes =
                crate::log::record::event_frame_len(&e.stream, &e.event_type, e.data.len(), e.metadata.len());
            self.progress.bytes_processed.fetch_add(bytes, Ordering::Relaxed);
            let c = (e.log_position / size) as u32;
            let ts = state.chunk_ts.entry(c).or_insert((e.timestamp_us, e.timestamp_us));
            ts.0 = ts.0.min(e.timestamp_us);
            ts.1 = ts.1.max(e.timestamp_us);
            let h = self.store.index().hash(&e.stream);
            match users.get(&h) {
                Some(n) if *n != e.stream => {
                    state.collisions.insert(n.clone());
                    state.collisions.insert(e.stream.clone());
                }
                Some(_) => {}
                None => {
                    self.progress.hash_cache_misses.fetch_add(1, Ordering::Relaxed);
                    if users.len() >= capacity.max(1) {
                        users.pop_first();
                    }
                    users.insert(h, e.stream.clone());
                }
            }
            if let Some(x) = e.stream.strip_prefix("$$").filter(|x| !x.starts_with("$$")) {
                state.streams.entry(x.to_string()).or_default().metadata(
                    e.event_number,
                    e.is_json(),
                    &e.data,
                );
            }
            if e.is_tombstone() {
                state.streams.entry(e.stream.clone()).or_default().tombstoned = true;
            }
        }
    }

    /// Calculation: rules per stream and chunk weights.
    fn calculate(&self) -> Result<(), ScavengeError> {
        let (facts, point, chunk_ts) = {
            let db = lock(&self.db);
            let run = db.state.run.as_ref().ok_or(ScavengeError::NotFound)?;
            (db.state.streams.clone(), run.point.clone(), db.state.chunk_ts.clone())
        };
        let size = self.store.log().chunk_size();
        let index = self.store.index();
        let mut rules = BTreeMap::new();
        let mut weights: BTreeMap<u32, u64> = BTreeMap::new();
        for (x, f) in &facts {
            let last =
                if f.tombstoned { i64::MAX } else { self.store.last_event_before(x, point.position)? };
            let r = plan::rule(f, last, point.effective_now_us);
            for e in index.range(index.hash(x), 0, r.maybe_below.max(r.discard_below).saturating_sub(1))? {
                if e.position < point.position {
                    let c = (e.position / size) as u32;
                    *weights.entry(c).or_default() +=
                        plan::weight(&r, e.event_number, chunk_ts.get(&c).copied());
                }
            }
            let meta = format!("$${x}");
            for e in index.range(index.hash(&meta), 0, r.meta_discard_below.saturating_sub(1))? {
                if e.position < point.position {
                    *weights.entry((e.position / size) as u32).or_default() += 2;
                }
            }
            rules.insert(x.clone(), r);
        }
        let mut db = lock(&self.db);
        if let Some(run) = db.state.run.as_mut() {
            run.rules = rules;
            run.weights = weights;
            run.phase = Phase::Executing { done: BTreeSet::new() };
        }
        db.save()?;
        Ok(())
    }

    /// Chunk execution with `threads` workers and throttling. Returns false when stopped.
    async fn execute(
        self: &Arc<Self>,
        id: &str,
        opts: StartOptions,
        stop: &Arc<AtomicBool>,
        credentials: &Credentials,
    ) -> Result<bool, ScavengeError> {
        let (todo, threshold) = {
            let db = lock(&self.db);
            let run = db.state.run.as_ref().ok_or(ScavengeError::NotFound)?;
            let done = match &run.phase {
                Phase::Executing { done } => done.clone(),
                _ => BTreeSet::new(),
            };
            let size = self.store.log().chunk_size();
            let point_chunk = (run.point.position / size) as u32;
            let todo: Vec<(u32, u32)> = self
                .store
                .log()
                .chunks()
                .iter()
                .filter(|c| c.header.start <= point_chunk && !done.contains(&c.header.start))
                .map(|c| (c.header.start, c.header.end))
                .collect();
            (todo, run.point.threshold)
        };
        let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(todo)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for _ in 0..opts.threads.max(1) {
            let (me, queue, tx, stop) = (self.clone(), queue.clone(), tx.clone(), stop.clone());
            self.env.rt.spawn(Box::pin(async move {
                loop {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Some((start, end)) = lock(&queue).pop_front() else { break };
                    let t0 = me.env.clock.monotonic();
                    let r = me.blocking(move |s| s.execute_chunk(start, end, threshold)).await;
                    let took = me.env.clock.monotonic() - t0;
                    let failed = r.is_err();
                    if tx.send((start, end, took, r)).is_err() || failed {
                        break;
                    }
                    if opts.throttle_percent < 100 {
                        let rest = took * (100 - opts.throttle_percent) / opts.throttle_percent;
                        me.env.rt.sleep(rest.max(THROTTLE_REST_MIN)).await;
                    }
                }
            }));
        }
        drop(tx);
        let mut first_error = None;
        while let Some((start, end, took, r)) = rx.recv().await {
            match r {
                Ok((was, saved)) => {
                    {
                        let mut db = lock(&self.db);
                        if let Some(run) = db.state.run.as_mut() {
                            run.space_saved += saved;
                            if let Phase::Executing { done } = &mut run.phase {
                                done.insert(start);
                            }
                        }
                        db.save()?;
                    }
                    self.history(
                        id,
                        "$scavengeChunksCompleted",
                        serde_json::json!({"scavengeId": id, "chunkStartNumber": start, "chunkEndNumber": end,
                            "timeTaken": timespan(took), "wasScavenged": was, "spaceSaved": saved,
                            "nodeEndpoint": self.cfg.node_endpoint, "errorMessage": ""}),
                        false,
                        credentials,
                    )
                    .await?;
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(false);
        }
        self.advance(Phase::Merging)?;
        Ok(true)
    }

    /// Rewrites one physical chunk without its discardable records. Returns (rewritten, bytes saved).
    fn execute_chunk(&self, start: u32, end: u32, threshold: i64) -> Result<(bool, u64), ScavengeError> {
        let log = self.store.log();
        let size = log.chunk_size();
        let (rules, weight, point) = {
            let db = lock(&self.db);
            let run = db.state.run.as_ref().ok_or(ScavengeError::NotFound)?;
            let w: u64 = run.weights.range(start..=end).map(|(_, w)| *w).sum();
            (run.rules.clone(), w, run.point.position)
        };
        if threshold >= 0 && weight as i64 <= threshold {
            return Ok((false, 0));
        }
        let (old, lo, hi) =
            log.chunk_range(start as u64 * size).ok_or(StorageError::Io(format!("chunk {start} is gone")))?;
        let mut w = log
            .begin_scavenged(old.header.start, old.header.end, old.version + 1)
            .map_err(StorageError::from)?;
        let mut scan = log.scan(lo).until(hi);
        let mut total = 0usize;
        while let Some(item) = scan.next_with_frame() {
            let (rec, frame) = item.map_err(StorageError::from)?;
            total += 1;
            if keep(&rec, &rules, point) {
                w.push(rec.log_position(), &frame).map_err(StorageError::from)?;
            }
        }
        let kept = w.records();
        if kept == total && threshold >= 0 {
            w.abort(log);
            return Ok((false, 0));
        }
        let new = w.finish(log).map_err(StorageError::from)?;
        let old_len = old.file_len();
        let new_len = new.file_len();
        log.install(new).map_err(StorageError::from)?;
        self.progress.chunks_scavenged.fetch_add(1, Ordering::Relaxed);
        let saved = old_len.saturating_sub(new_len);
        self.progress.space_saved.fetch_add(saved, Ordering::Relaxed);
        self.progress.bytes_processed.fetch_add(old_len, Ordering::Relaxed);
        tracing::info!(start, end, removed = total - kept, saved, "chunk scavenged");
        Ok((true, saved))
    }

    /// Merges runs of adjacent scavenged chunks (below the point) that fit in one chunk's size.
    fn merge(&self) -> Result<Vec<serde_json::Value>, ScavengeError> {
        let log = self.store.log();
        let size = log.chunk_size();
        let point_chunk = {
            let db = lock(&self.db);
            (db.state.run.as_ref().ok_or(ScavengeError::NotFound)?.point.position / size) as u32
        };
        let chunks: Vec<_> = log.chunks().into_iter().filter(|c| c.header.start <= point_chunk).collect();
        let mut groups: Vec<Vec<Arc<crate::log::Chunk>>> = Vec::new();
        let mut cur: Vec<Arc<crate::log::Chunk>> = Vec::new();
        let mut bytes = 0u64;
        for c in chunks {
            let len = c.file_len();
            if c.is_scavenged()
                && bytes + len <= size
                && cur.last().is_none_or(|p| p.header.end + 1 == c.header.start)
            {
                bytes += len;
                cur.push(c);
            } else {
                groups.push(std::mem::take(&mut cur));
                bytes = 0;
                if c.is_scavenged() && len <= size {
                    bytes = len;
                    cur.push(c);
                }
            }
        }
        groups.push(cur);
        let mut events = Vec::new();
        for g in groups.into_iter().filter(|g| g.len() > 1) {
            let t0 = self.env.clock.monotonic();
            let (start, end) = (g[0].header.start, g[g.len() - 1].header.end);
            let version = g.iter().map(|c| c.version).max().unwrap_or(0) + 1;
            let old_len: u64 = g.iter().map(|c| c.file_len()).sum();
            let mut w = log.begin_scavenged(start, end, version).map_err(StorageError::from)?;
            let mut scan = log.scan(start as u64 * size).until((end as u64 + 1) * size);
            while let Some(item) = scan.next_with_frame() {
                let (rec, frame) = item.map_err(StorageError::from)?;
                w.push(rec.log_position(), &frame).map_err(StorageError::from)?;
            }
            let new = w.finish(log).map_err(StorageError::from)?;
            let saved = old_len.saturating_sub(new.file_len());
            log.install(new).map_err(StorageError::from)?;
            self.progress.chunks_merged.fetch_add(g.len() as u64 - 1, Ordering::Relaxed);
            self.progress.space_saved.fetch_add(saved, Ordering::Relaxed);
            events.push(serde_json::json!({"chunkStartNumber": start, "chunkEndNumber": end,
                "timeTaken": timespan(self.env.clock.monotonic() - t0), "spaceSaved": saved, "wasMerged": true,
                "nodeEndpoint": self.cfg.node_endpoint, "errorMessage": ""}));
        }
        self.advance(Phase::Indexing)?;
        Ok(events)
    }

    /// Index execution: drops entries whose record is gone.
    fn execute_index(&self) -> Result<serde_json::Value, ScavengeError> {
        let t0 = self.env.clock.monotonic();
        let log = self.store.log().clone();
        let (removed, kept) =
            self.store.index().retain(|e| log.contains(e.position)).map_err(StorageError::from)?;
        self.progress.index_entries_removed.fetch_add(removed, Ordering::Relaxed);
        self.advance(Phase::Cleaning)?;
        Ok(serde_json::json!({"level": 0, "index": 0, "timeTaken": timespan(self.env.clock.monotonic() - t0),
            "entriesDeleted": removed, "entriesKept": kept, "spaceSaved": removed * 24, "wasScavenged": removed > 0,
            "nodeEndpoint": self.cfg.node_endpoint, "errorMessage": ""}))
    }

    /// Cleaning: the point is reached; drop the run's state.
    /// Ends the run: drops its state and records its point as reached. Returns the bytes the run
    /// reclaimed.
    fn clean(&self) -> Result<u64, ScavengeError> {
        let mut db = lock(&self.db);
        let saved = db.state.run.as_ref().map_or(0, |r| r.space_saved);
        if let Some(run) = db.state.run.take() {
            // Facts of streams whose tombstone is kept stay (they keep discarding their metastream);
            // chunk timestamp ranges of chunks below the point are no longer needed.
            let size = self.store.log().chunk_size();
            let point_chunk = (run.point.position / size) as u32;
            db.state.chunk_ts.retain(|c, _| *c > point_chunk);
            db.state.last_point = Some(run.point);
        }
        db.save()?;
        self.progress.runs.fetch_add(1, Ordering::Relaxed);
        Ok(saved)
    }

    async fn finish(
        self: &Arc<Self>,
        id: &str,
        result: &Result<Outcome, ScavengeError>,
        took: Duration,
        cleaned: Option<u64>,
        credentials: &Credentials,
    ) {
        // A run that reached its end dropped its state: `cleaned` is what it reclaimed.
        let saved = cleaned.or_else(|| lock(&self.db).state.run.as_ref().map(|r| r.space_saved)).unwrap_or(0);
        let (res, err, i) = match result {
            Ok(Outcome::Success) => ("Success", String::new(), 0),
            Ok(Outcome::Stopped) => ("Stopped", String::new(), 1),
            Err(e) => ("Failed", e.to_string(), 2),
        };
        self.progress.results[i].fetch_add(1, Ordering::Relaxed);
        let p = &self.progress;
        let (chunks, merged) =
            (p.chunks_scavenged.load(Ordering::Relaxed), p.chunks_merged.load(Ordering::Relaxed));
        match result {
            Ok(o) => tracing::info!(
                scavenge = %id, outcome = ?o, ?took, space_saved = saved,
                chunks_scavenged_total = chunks, chunks_merged_total = merged, "scavenge finished"
            ),
            Err(e) => {
                tracing::error!(scavenge = %id, error = %e, ?took, space_saved = saved, "scavenge failed")
            }
        }
        let data = serde_json::json!({"scavengeId": id, "nodeEndpoint": self.cfg.node_endpoint, "result": res,
            "error": err, "timeTaken": timespan(took), "spaceSaved": saved, "maxChunkScavenged": -1});
        if let Err(e) = self.history(id, "$scavengeCompleted", data, true, credentials).await {
            tracing::warn!(error = %e, "could not write the scavenge completion event");
        }
    }

    /// Appends a history event to `$scavenges-{id}` (and a link from `$scavenges` when `linked`).
    async fn history(
        self: &Arc<Self>,
        id: &str,
        ty: &'static str,
        data: serde_json::Value,
        linked: bool,
        credentials: &Credentials,
    ) -> Result<(), ScavengeError> {
        let w = SharedWrite::History { scavenge_id: id.to_owned(), event_type: ty.to_owned(), data, linked };
        self.shared(w, credentials).await.map(|_| ())
    }

    /// Writes `w` where the cluster's shared records go: through the leader when the node set one
    /// ([`Scavenger::route_shared_writes`]), else to this node's store.
    async fn shared(
        self: &Arc<Self>,
        w: SharedWrite,
        credentials: &Credentials,
    ) -> Result<Written, ScavengeError> {
        if let Some(leader) = self.leader.get() {
            return leader.write(w, credentials.clone()).await;
        }
        self.apply_shared(w).await
    }

    /// Writes `w` to this node's store (a single node, or the leader answering a member).
    pub async fn apply_shared(self: &Arc<Self>, w: SharedWrite) -> Result<Written, ScavengeError> {
        w.apply(&self.env, &self.store, self.cfg.history_max_age_days).await
    }

    /// Bytes of the scavenge database file.
    pub fn db_size(&self) -> u64 {
        lock(&self.db).file_len()
    }
}

/// Whether a record survives a scavenge with `rules` at `point`.
fn keep(r: &Record, rules: &BTreeMap<String, plan::Rule>, point: u64) -> bool {
    let Record::Event(e) = r else { return true };
    if e.log_position >= point {
        return true;
    }
    let (name, is_meta) = match e.stream.strip_prefix("$$").filter(|x| !x.starts_with("$$")) {
        Some(x) => (x, true),
        None => (e.stream.as_str(), false),
    };
    match rules.get(name) {
        Some(rule) => !plan::discards(rule, is_meta, e.event_number, e.timestamp_us, e.is_tombstone()),
        None => true,
    }
}

/// A .NET TimeSpan string `hh:mm:ss.fffffff`, as the anchor writes `timeTaken`.
fn timespan(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}.{:07}", s / 3600, s / 60 % 60, s % 60, d.subsec_nanos() / 100)
}
