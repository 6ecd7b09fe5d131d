//! Projections: the service behind `/projections` and `/projection/{name}`.
//!
//! The system projections (`$streams`, `$stream_by_category`, `$by_category`, `$by_event_type`,
//! `$by_correlation_id`) run as native code: each enabled one is a task that follows committed
//! records from its checkpoint, hands each to its sans-IO handler ([`system::SystemHandler`]),
//! writes what the handler emits ([`emitted`]: exactly once, across restarts) and checkpoints
//! by the rule of [`checkpoint`]. The decisions are free of I/O; this module is the shell.
//!
//! JavaScript projections (with `RunProjections All`) run on the same tasks: their handler is a
//! query in the `annal-js` engine, which [`js`] feeds with the records its source selects (on
//! the blocking pool, a batch at a time) and whose outcomes it turns into emits, results and
//! partition catalog entries, written by the same exactly-once path. Their states go with each
//! checkpoint (partitions first, then the root, see [`js`]). They are created with
//! [`Projections::create`] (a transient one lives in memory only, and a sweep deletes it
//! `ProjectionsQueryExpiry` after its last access, see [`expiry`]), complete at the end of the
//! log in the one-time and transient modes, and can be deleted ([`Projections::delete`]).
//!
//! Durable state lives in streams, so it replicates and is backed up like any other:
//! - `$projections-$all`, the registry: `$ProjectionsInitialized`, then one `$ProjectionCreated`
//!   (data: the name) per projection, whose event number is the projection's id, and a
//!   `$ProjectionDeleted` per deletion;
//! - `$projections-{name}`, the definition ([`definition`]), one `$ProjectionUpdated` per change;
//! - `$projections-{name}-checkpoint`, `$ProjectionCheckpoint` events (`$maxCount` 2) whose
//!   metadata is the tag of the position processed up to (`$by_event_type` writes it to `$et` as
//!   a `$Checkpoint` event too).
//!
//! The service runs where writes are taken (the leader; a single node always):
//! [`Projections::start`] creates what is missing, loads the definitions and starts the enabled
//! projections; with `StartStandardProjections` it enables the system projections first. Each
//! start drops what an earlier one ran. A projection's task stops when the node no longer leads.
//! With `RunProjections None` the service never starts (and the routes do not exist).
//!
//! Commands ([`Projections::command`]) run one at a time: each writes the new definition, then
//! stops and starts tasks. `disable` lets the task finish its batch and write a final
//! checkpoint; `abort` stops it without one; `reset` raises the version and starts a new epoch,
//! so the projection processes the log again from the start and its output of older epochs no
//! longer counts. A failure of the store (a read or write error, a read-only store) does not
//! fault a projection: it starts again from its checkpoint a second later, until the store
//! serves again; only its query or its output streams can fault it.
//!
//! Invariants: at most one task per projection (each task has an id, and what a replaced task
//! reports is ignored); a checkpoint is written only after everything
//! emitted before its position is written; a JavaScript projection's engine holds exactly the
//! state of the position its task last reached (its next batch is read only after that
//! position's checkpoint decision).

pub mod category;
pub mod checkpoint;
pub mod definition;
pub mod emitted;
pub mod expiry;
pub mod feed;
pub mod js;
pub mod system;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

use self::checkpoint::{position_text, tag_prefix, Progress, Tag};
use self::definition::{Definition, Kind, Mode, ProjectionConfig, RunAs, UPDATED_EVENT_TYPE};
use self::emitted::{Emitted, Head, Pending};
use self::js::JsRunner;
use self::system::{SystemHandler, SystemKind};
use crate::config::RunProjections;
use crate::env::Env;
use crate::log::record::Record;
use crate::store::{NewEvent, ReadError, StorageError, Store, WriteError, WriteOp, ANY};

/// The registry stream.
pub const REGISTRY_STREAM: &str = "$projections-$all";
/// The event type of a projection's creation in the registry.
pub const CREATED_EVENT_TYPE: &str = "$ProjectionCreated";
/// The event type of a projection's deletion in the registry.
pub const DELETED_EVENT_TYPE: &str = "$ProjectionDeleted";
/// The event type that opens the registry.
pub const INITIALIZED_EVENT_TYPE: &str = "$ProjectionsInitialized";
/// The event type of a checkpoint.
pub const CHECKPOINT_EVENT_TYPE: &str = "$ProjectionCheckpoint";
/// Records one batch of a projection reads at most (below `pendingEventsThreshold`).
pub const BATCH_RECORDS_MAX: usize = 4096;
/// Partition checkpoint writes handed to the store at once.
pub const PARTITION_WRITES_MAX: usize = 1024;
/// Times a projection reads an emitted stream's head again after a refused write, per batch,
/// before it faults.
pub const WRITE_RETRIES_MAX: usize = 5;
/// How long a projection stopped by a storage failure waits before it starts again from its
/// checkpoint.
pub const STORAGE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);
/// The status reason of a projection whose configuration forbids emitting.
const EMIT_NOT_ALLOWED: &str = "'emit' is not allowed by the projection/configuration/mode";

/// The definition stream of a projection.
pub fn definition_stream(name: &str) -> String {
    format!("$projections-{name}")
}

/// The checkpoint stream of a projection.
pub fn checkpoint_stream(name: &str) -> String {
    format!("$projections-{name}-checkpoint")
}

/// Why a projection request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProjError {
    /// The service does not run here (the node does not lead, or is still loading).
    #[error("projections are not running on this node")]
    NotReady,
    /// No such projection.
    #[error("projection not found")]
    NotFound,
    /// The caller may not do this.
    #[error("not authorized")]
    NotAuthorized,
    /// A bad query or configuration.
    #[error("{0}")]
    Invalid(String),
    /// A projection of that name exists.
    #[error("{0}")]
    Conflict(String),
    /// Refused in the projection's current state.
    #[error("{0}")]
    OperationFailed(String),
    /// A read failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A write of the projection's streams failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// A JavaScript projection to create.
#[derive(Clone, Debug)]
pub struct Create {
    /// Name.
    pub name: String,
    /// Mode.
    pub mode: Mode,
    /// Query text.
    pub query: String,
    /// Start at once.
    pub enabled: bool,
    /// `emitEnabled`.
    pub emit: bool,
    /// Checkpoints (a one-time projection's choice; continuous ones always checkpoint,
    /// transient ones never do).
    pub checkpoints: bool,
    /// `trackEmittedStreams` (only with `emit`).
    pub track_emitted_streams: bool,
    /// Who creates it (it runs as them).
    pub run_as: RunAs,
}

/// A command on one projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Enable and start.
    Enable,
    /// Disable; stop after a final checkpoint.
    Disable,
    /// Disable; stop at once without a checkpoint.
    Abort,
    /// New epoch: process the log again from the start.
    Reset,
}

/// Where a projection's task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunState {
    /// Not running.
    Stopped,
    /// Processing (or waiting for new records).
    Running,
    /// Stopped by `abort`.
    Aborted,
    /// Stopped by an error (see the reason).
    Faulted,
    /// A one-time or transient projection that reached the end of the log.
    Completed,
}

/// A projection's figures for documents.
#[derive(Clone, Debug)]
pub struct View {
    /// The definition.
    pub def: Definition,
    /// Where its task is.
    pub state: RunState,
    /// Why it faulted.
    pub reason: String,
    /// The position processed up to (`None`: not known yet).
    pub position: Option<u64>,
    /// The last checkpoint's position.
    pub last_checkpoint: Option<u64>,
    /// Events handled since the task started.
    pub processed: u64,
    /// A checkpoint is being written.
    pub checkpoint_writing: bool,
    /// Emitted events written since the task started.
    pub written: u64,
    /// Events read and not yet processed.
    pub buffered: u64,
    /// The committed log position, for `progress`.
    pub committed: u64,
    /// Partitions a JavaScript projection holds (1 for the others).
    pub partitions: u64,
    /// Bytes of its state (the root partition's) at its last checkpoint.
    pub state_bytes: u64,
    /// What a JavaScript projection's query defines.
    pub query_definition: Option<annal_js::Definition>,
}

impl View {
    /// The v5 status text: the state, with ` (Enabled)` when a stopped or faulted projection is
    /// enabled.
    pub fn status(&self) -> String {
        let s = match self.state {
            RunState::Stopped => "Stopped",
            RunState::Running => "Running",
            RunState::Aborted => "Aborted",
            RunState::Faulted => "Faulted",
            RunState::Completed => "Completed",
        };
        if self.def.enabled && matches!(self.state, RunState::Stopped | RunState::Faulted) {
            format!("{s} (Enabled)")
        } else {
            s.to_owned()
        }
    }

    /// The position as text (`C:p/P:p`), `C:0/P:-1` before the projection has one.
    pub fn position_text(&self) -> String {
        self.position.map_or_else(|| "C:0/P:-1".into(), position_text)
    }

    /// The last checkpoint as text.
    pub fn last_checkpoint_text(&self) -> String {
        self.last_checkpoint.map_or_else(|| "C:0/P:-1".into(), position_text)
    }

    /// Progress through the log, in percent (`-1` before the projection has a position).
    pub fn progress(&self) -> f64 {
        match self.position {
            None => -1.0,
            Some(_) if self.committed == 0 => 100.0,
            Some(p) => ((p as f64 / self.committed as f64) * 100.0).min(100.0),
        }
    }

    /// The tag of the position, for `ES-Position`.
    pub fn position_tag(&self) -> String {
        let p = self.position.unwrap_or(0);
        format!("{{\"$c\":{p},\"$p\":{p}}}")
    }
}

/// How a task is asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    No,
    Graceful,
    Now,
}

struct Run {
    /// Unique per task.
    id: u64,
    stop: tokio::sync::watch::Sender<Stop>,
    done: tokio::sync::watch::Receiver<bool>,
}

struct Entry {
    def: Definition,
    /// The last event number of the definition stream.
    def_last: i64,
    run: Option<Run>,
    state: RunState,
    reason: String,
    position: Option<u64>,
    last_checkpoint: Option<u64>,
    processed: u64,
    checkpoint_writing: bool,
    written: u64,
    buffered: u64,
    /// A JavaScript projection's engine: the running one, or the last one to run.
    js: Option<Arc<Mutex<JsRunner>>>,
    /// What its query defines.
    query_definition: Option<annal_js::Definition>,
    /// Partitions it holds.
    partitions: u64,
    /// Bytes of its state (the root partition's) at its last checkpoint.
    state_bytes: u64,
    /// When a request last read or changed it (the `Env` monotonic clock; see [`expiry`]).
    last_access: Duration,
}

impl Entry {
    fn new(def: Definition, def_last: i64) -> Entry {
        Entry {
            def,
            def_last,
            run: None,
            state: RunState::Stopped,
            reason: String::new(),
            position: None,
            last_checkpoint: None,
            processed: 0,
            checkpoint_writing: false,
            written: 0,
            buffered: 0,
            js: None,
            query_definition: None,
            partitions: 1,
            state_bytes: 0,
            last_access: Duration::ZERO,
        }
    }
}

#[derive(Default)]
struct Inner {
    running: bool,
    generation: u64,
    /// The id of the last task started.
    last_run: u64,
    projections: BTreeMap<String, Entry>,
    /// The expiry sweep of this generation runs (only while a transient projection exists).
    sweeping: bool,
}

/// Whether the node leads (may take writes).
type LeaderCheck = Box<dyn Fn() -> bool + Send + Sync>;

/// The projections service (see the module doc).
pub struct Projections {
    env: Env,
    store: Arc<Store>,
    mode: RunProjections,
    start_standard: bool,
    me: Weak<Projections>,
    inner: Mutex<Inner>,
    /// Held by starts and commands: one change at a time.
    commands: tokio::sync::Mutex<()>,
    leads: std::sync::OnceLock<LeaderCheck>,
    /// `ProjectionsQueryExpiry` (unset: [`expiry::QUERY_EXPIRY_DEFAULT`]).
    query_expiry: std::sync::OnceLock<Duration>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a batch's writes ended, when not well.
enum WriteFailure {
    /// The node no longer leads: stop quietly.
    NotLeader,
    /// The projection faults.
    Fault(String),
    /// The store failed (an I/O error, a group dropped, a read-only store): the projection starts
    /// again from its checkpoint a moment later ([`Projections::storage_failed`]).
    Storage(String),
}

impl Projections {
    /// A service over `store`, not started.
    pub fn new(env: Env, store: Arc<Store>, mode: RunProjections, start_standard: bool) -> Arc<Projections> {
        Arc::new_cyclic(|me| Projections {
            env,
            store,
            mode,
            start_standard,
            me: me.clone(),
            inner: Mutex::new(Inner::default()),
            commands: tokio::sync::Mutex::new(()),
            leads: std::sync::OnceLock::new(),
            query_expiry: std::sync::OnceLock::new(),
        })
    }

    /// Sets `ProjectionsQueryExpiry`, how long a transient projection is kept after its last
    /// access (see [`expiry`]). Set once, before the service starts.
    pub fn set_query_expiry(&self, expiry: Duration) {
        let _ = self.query_expiry.set(expiry);
    }

    fn query_expiry(&self) -> Duration {
        self.query_expiry.get().copied().unwrap_or(expiry::QUERY_EXPIRY_DEFAULT)
    }

    /// A name for a projection created without one.
    pub fn new_name(&self) -> String {
        self.env.new_uuid().hyphenated().to_string()
    }

    /// Which projections run on this node.
    pub fn mode(&self) -> RunProjections {
        self.mode
    }

    /// Sets how the service tells whether the node leads; without one it always does. Set once.
    pub fn set_leader_check(&self, f: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.leads.set(Box::new(f));
    }

    fn leads(&self) -> bool {
        self.leads.get().is_none_or(|f| f())
    }

    /// Whether the service runs (and the node leads).
    pub fn running(&self) -> bool {
        lock(&self.inner).running && self.leads()
    }

    fn event(&self, event_type: &str, data: Vec<u8>, metadata: Vec<u8>, is_json: bool) -> NewEvent {
        NewEvent::fresh(&self.env, event_type, data, metadata, is_json)
    }

    /// Creates what is missing, loads the definitions and starts the enabled projections
    /// (enabling the system projections first with `StartStandardProjections`). Does nothing
    /// with `RunProjections None`.
    pub async fn start(&self) -> Result<(), ProjError> {
        if self.mode == RunProjections::None {
            return Ok(());
        }
        let _cmd = self.commands.lock().await;
        // What an earlier start ran ends before anything is loaded again.
        for mut done in self.stop_all() {
            let _ = done.wait_for(|d| *d).await;
        }
        let ids = self.ensure_registry().await?;
        let store = self.store.clone();
        let loaded = self
            .env
            .blocking(move || {
                ids.into_iter()
                    .map(|(name, id)| load_definition(&store, &name, id).map(|d| (name, id, d)))
                    .collect::<Result<Vec<_>, StorageError>>()
            })
            .await?;
        let mut entries = Vec::new();
        for (name, id, found) in loaded {
            match SystemKind::from_name(&name) {
                Some(kind) => {
                    let (mut def, mut last) = found.unwrap_or_else(|| (Definition::new_system(kind, id), -1));
                    if last < 0 || (self.start_standard && !def.enabled) {
                        def.enabled |= self.start_standard;
                        last = self.write_definition(&def, last).await?;
                    }
                    entries.push(Entry::new(def, last));
                }
                None => {
                    let Some((def, last)) = found else {
                        tracing::warn!(projection = %name, "no readable definition; the projection is left out");
                        continue;
                    };
                    let query_definition = js::check(&def.query).ok();
                    let mut e = Entry::new(def, last);
                    e.query_definition = query_definition;
                    entries.push(e);
                }
            }
        }
        let generation = {
            let mut inner = lock(&self.inner);
            inner.generation += 1;
            inner.running = true;
            inner.sweeping = false;
            inner.projections = entries.into_iter().map(|e| (e.def.name.clone(), e)).collect();
            inner.generation
        };
        let names: Vec<String> = lock(&self.inner)
            .projections
            .values()
            .filter(|e| e.def.enabled && self.may_run(&e.def))
            .map(|e| e.def.name.clone())
            .collect();
        for name in names {
            self.spawn_run(&name, generation);
        }
        tracing::info!(mode = ?self.mode, "projections started");
        Ok(())
    }

    /// Stops every task at once (no checkpoints; the next start resumes from the last ones).
    pub fn stop(&self) {
        drop(self.stop_all());
    }

    /// [`Projections::stop`], then waits until every task has ended (none writes any more).
    pub async fn stop_and_wait(&self) {
        for mut done in self.stop_all() {
            let _ = done.wait_for(|d| *d).await;
        }
    }

    /// Stops every task; what tells when each has ended.
    fn stop_all(&self) -> Vec<tokio::sync::watch::Receiver<bool>> {
        let mut inner = lock(&self.inner);
        inner.running = false;
        inner.generation += 1;
        let mut done = Vec::new();
        for e in inner.projections.values_mut() {
            if let Some(run) = e.run.take() {
                run.stop.send_replace(Stop::Now);
                done.push(run.done);
            }
            if e.state == RunState::Running {
                e.state = RunState::Stopped;
            }
        }
        done
    }

    /// Whether this node runs `def` (JavaScript projections only with `RunProjections All`).
    fn may_run(&self, def: &Definition) -> bool {
        def.system().is_some() || self.mode == RunProjections::All
    }

    /// The ids of every projection in the registry, creating the registry or the system
    /// projections' entries it lacks.
    async fn ensure_registry(&self) -> Result<BTreeMap<String, i64>, ProjError> {
        let store = self.store.clone();
        let (mut ids, last) = self.env.blocking(move || read_registry(&store)).await?;
        let missing: Vec<SystemKind> =
            SystemKind::ALL.into_iter().filter(|k| !ids.contains_key(k.name())).collect();
        if !missing.is_empty() {
            let mut events = Vec::new();
            if last < 0 {
                events.push(self.event(INITIALIZED_EVENT_TYPE, b"{}".to_vec(), Vec::new(), true));
            }
            for k in &missing {
                events.push(self.event(CREATED_EVENT_TYPE, k.name().as_bytes().to_vec(), Vec::new(), false));
            }
            let r = self.store.append_async(REGISTRY_STREAM, last, events).await?;
            let first_created = r.last_event_number - missing.len() as i64 + 1;
            for (i, k) in missing.iter().enumerate() {
                ids.insert(k.name().to_owned(), first_created + i as i64);
            }
        }
        Ok(ids)
    }

    /// Writes `def` after event `last` of its stream; the new last event number.
    async fn write_definition(&self, def: &Definition, last: i64) -> Result<i64, ProjError> {
        let ev = self.event(UPDATED_EVENT_TYPE, def.to_json(), Vec::new(), true);
        let r = self.store.append_async(&definition_stream(&def.name), last, vec![ev]).await?;
        Ok(r.last_event_number)
    }

    fn check_running(&self) -> Result<(), ProjError> {
        if self.running() {
            Ok(())
        } else {
            Err(ProjError::NotReady)
        }
    }

    fn view_of(&self, e: &Entry) -> View {
        View {
            def: e.def.clone(),
            state: e.state,
            reason: e.reason.clone(),
            position: e.position,
            last_checkpoint: e.last_checkpoint,
            processed: e.processed,
            checkpoint_writing: e.checkpoint_writing,
            written: e.written,
            buffered: e.buffered,
            committed: self.store.log().committed(),
            partitions: e.partitions,
            state_bytes: e.state_bytes,
            query_definition: e.query_definition.clone(),
        }
    }

    /// Every projection, by name.
    pub fn list(&self) -> Result<Vec<View>, ProjError> {
        self.check_running()?;
        let inner = lock(&self.inner);
        Ok(inner.projections.values().map(|e| self.view_of(e)).collect())
    }

    /// One projection.
    pub fn get(&self, name: &str) -> Result<View, ProjError> {
        self.check_running()?;
        let inner = lock(&self.inner);
        inner.projections.get(name).map(|e| self.view_of(e)).ok_or(ProjError::NotFound)
    }

    /// One projection, for a request that reads it (its query or configuration): an access,
    /// which keeps a transient projection from expiring (see [`expiry`]); [`Projections::get`]
    /// is not one.
    pub fn access(&self, name: &str) -> Result<View, ProjError> {
        self.check_running()?;
        self.touch(name);
        self.get(name)
    }

    /// Notes an access to `name` (see [`expiry`]).
    fn touch(&self, name: &str) {
        let now = self.env.clock.monotonic();
        self.with_entry(name, |e| e.last_access = now);
    }

    /// Runs a command (see the module doc).
    pub async fn command(&self, name: &str, command: Command) -> Result<(), ProjError> {
        let _cmd = self.commands.lock().await;
        self.check_running()?;
        self.touch(name);
        let (mut def, last, running) = self.current(name)?;
        match command {
            Command::Enable => {
                if def.enabled && running {
                    return Ok(());
                }
                if !def.enabled {
                    def.enabled = true;
                    self.store_definition(&def, last).await?;
                }
                self.restart(name);
            }
            Command::Disable | Command::Abort => {
                if def.enabled {
                    def.enabled = false;
                    self.store_definition(&def, last).await?;
                }
                let how = if command == Command::Disable { Stop::Graceful } else { Stop::Now };
                self.stop_one(name, how).await;
                if command == Command::Abort {
                    self.with_entry(name, |e| e.state = RunState::Aborted);
                }
            }
            Command::Reset => {
                self.stop_one(name, Stop::Now).await;
                def.version += 1;
                def.epoch = def.version;
                self.store_definition(&def, last).await?;
                self.with_entry(name, |e| {
                    e.position = None;
                    e.last_checkpoint = None;
                    e.state = RunState::Stopped;
                });
                if def.enabled {
                    self.restart(name);
                }
            }
        }
        Ok(())
    }

    /// Replaces the query (`PUT /projection/{name}/query[?emit=]`): checked first (a
    /// JavaScript query's syntax error is refused with its message and line); the version rises
    /// and an enabled projection restarts with it from its checkpoint. `emit` changes a
    /// JavaScript projection's `emitEnabled`; the system projections always emit.
    pub async fn update_query(&self, name: &str, query: &str, emit: Option<bool>) -> Result<(), ProjError> {
        let _cmd = self.commands.lock().await;
        self.check_running()?;
        self.touch(name);
        let (mut def, last, _) = self.current(name)?;
        let mut query_definition = None;
        match def.kind {
            Kind::System(kind) => {
                SystemHandler::new(kind, query).map_err(ProjError::Invalid)?;
                if emit == Some(false) {
                    return Err(ProjError::Invalid(
                        "The system projections emit; emit=no is not allowed for them".into(),
                    ));
                }
            }
            Kind::Js => {
                let checked = js::check(query).map_err(ProjError::Invalid)?;
                check_mode(&checked, def.mode)?;
                query_definition = Some(checked);
                if let Some(emit) = emit {
                    def.config.emit_enabled = emit;
                    def.config.track_emitted_streams &= emit;
                }
            }
        }
        self.stop_one(name, Stop::Graceful).await;
        def.query = query.to_owned();
        def.version += 1;
        self.store_definition(&def, last).await?;
        if query_definition.is_some() {
            self.with_entry(name, |e| e.query_definition = query_definition);
        }
        if def.enabled {
            self.restart(name);
        }
        Ok(())
    }

    /// Creates a JavaScript projection (`POST /projections/{mode}`): the query is checked first
    /// (a syntax or API error is refused with its message and line); a transient projection
    /// lives in memory only, the others are registered in `$projections-$all` and defined in
    /// their own stream. It starts at once when enabled.
    pub async fn create(&self, c: Create) -> Result<(), ProjError> {
        let _cmd = self.commands.lock().await;
        self.check_running()?;
        if self.mode != RunProjections::All {
            return Err(ProjError::Invalid(
                "JavaScript projections run only with RunProjections All; this node runs the system projections only"
                    .into(),
            ));
        }
        if lock(&self.inner).projections.contains_key(&c.name) {
            return Err(ProjError::Conflict(format!("Duplicate projection names : {}", c.name)));
        }
        let query_definition = js::check(&c.query).map_err(ProjError::Invalid)?;
        check_mode(&query_definition, c.mode)?;
        let mut def = Definition::new_js(&c.name, -1, &c.query, c.mode, c.run_as);
        def.enabled = c.enabled;
        def.config.emit_enabled = c.emit && c.mode != Mode::Transient;
        def.config.track_emitted_streams = c.track_emitted_streams && def.config.emit_enabled;
        def.checkpoints_enabled = match c.mode {
            Mode::Continuous => true,
            Mode::OneTime => c.checkpoints,
            Mode::Transient => false,
        };
        let mut last = -1;
        if c.mode != Mode::Transient {
            let ev = self.event(CREATED_EVENT_TYPE, c.name.as_bytes().to_vec(), Vec::new(), false);
            def.id = self.store.append_async(REGISTRY_STREAM, ANY, vec![ev]).await?.last_event_number;
            last = self.write_definition(&def, ANY).await?;
        }
        let mut e = Entry::new(def, last);
        e.query_definition = Some(query_definition);
        e.last_access = self.env.clock.monotonic();
        let sweep = {
            let mut inner = lock(&self.inner);
            inner.projections.insert(c.name.clone(), e);
            let start = c.mode == Mode::Transient && !inner.sweeping;
            inner.sweeping |= start;
            start.then_some(inner.generation)
        };
        if let Some(generation) = sweep {
            self.spawn_expiry_sweep(generation);
        }
        if c.enabled {
            self.restart(&c.name);
        }
        Ok(())
    }

    /// Deletes a stopped or faulted JavaScript projection (a transient one is stopped first):
    /// `$ProjectionDeleted` in the registry, its definition stream deleted, and with the flags
    /// its checkpoint stream (`delete_checkpoint`), its stored partition states and result
    /// streams (`delete_state`), and the streams it emitted to when it tracked them
    /// (`delete_emitted`).
    pub async fn delete(
        &self,
        name: &str,
        delete_state: bool,
        delete_checkpoint: bool,
        delete_emitted: bool,
    ) -> Result<(), ProjError> {
        let _cmd = self.commands.lock().await;
        self.check_running()?;
        let (def, _, running) = self.current(name)?;
        if def.system().is_some() {
            return Err(ProjError::OperationFailed("System projections cannot be deleted".into()));
        }
        if def.mode == Mode::Transient {
            self.stop_one(name, Stop::Now).await;
            lock(&self.inner).projections.remove(name);
            return Ok(());
        }
        if running {
            return Err(ProjError::OperationFailed(
                "Cannot delete a projection that hasn't been stopped or faulted.".into(),
            ));
        }
        let ev = self.event(DELETED_EVENT_TYPE, name.as_bytes().to_vec(), Vec::new(), false);
        self.store.append_async(REGISTRY_STREAM, ANY, vec![ev]).await?;
        let mut streams = vec![definition_stream(name)];
        if delete_checkpoint {
            streams.push(checkpoint_stream(name));
        }
        if delete_state {
            let store = self.store.clone();
            let catalog = js::catalog_stream(name);
            let mut partitions = self.env.blocking(move || read_names(&store, &catalog)).await?;
            partitions.sort();
            partitions.dedup();
            let query = lock(&self.inner).projections.get(name).and_then(|e| e.query_definition.clone());
            let results: Vec<String> = match &query {
                Some(q) => partitions
                    .iter()
                    .map(String::as_str)
                    .chain(std::iter::once(""))
                    .map(|p| js::result_stream(name, q, p))
                    .collect(),
                None => vec![js::default_result_stream(name)],
            };
            streams.extend(partitions.iter().map(|p| js::partition_checkpoint_stream(name, p)));
            streams.extend(results);
            streams.push(js::catalog_stream(name));
        }
        if delete_emitted && def.config.track_emitted_streams {
            let store = self.store.clone();
            let tracking = js::tracking_stream(name);
            let mut emitted = self.env.blocking(move || read_names(&store, &tracking)).await?;
            emitted.sort();
            emitted.dedup();
            streams.extend(emitted);
            streams.push(js::tracking_stream(name));
        }
        let ops = streams
            .into_iter()
            .map(|stream| WriteOp::Delete { stream, expected: ANY, hard: false })
            .collect();
        for r in self.store.write_all_async(ops).await {
            match r {
                Ok(_) | Err(WriteError::StreamDeleted | WriteError::WrongExpectedVersion { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        lock(&self.inner).projections.remove(name);
        Ok(())
    }

    /// A JavaScript projection's state (`result`: its result) of `partition` (`""`: the root),
    /// from its engine, or else from what it stored (the last checkpoint; for a result, the last
    /// event of the result stream). `None` for a system projection or a partition never seen.
    pub async fn state(
        &self,
        name: &str,
        partition: &str,
        result: bool,
    ) -> Result<Option<String>, ProjError> {
        self.check_running()?;
        self.touch(name);
        let (def, js_runner, at) = {
            let inner = lock(&self.inner);
            let e = inner.projections.get(name).ok_or(ProjError::NotFound)?;
            (e.def.clone(), e.js.clone(), e.last_checkpoint)
        };
        if def.system().is_some() {
            return Ok(None);
        }
        let p = partition.to_owned();
        let store = self.store.clone();
        let now = self.env.clock.wall_micros();
        let found = self
            .env
            .blocking(move || -> Result<Option<String>, StorageError> {
                let mut result_stream = None;
                if let Some(r) = js_runner {
                    let mut r = lock(&r);
                    let held = if result { r.result(&p) } else { r.state(&p) };
                    if let Ok(Some(s)) = held {
                        return Ok(Some(s));
                    }
                    result_stream = Some(r.result_stream(&p));
                }
                let version = def.projection_version();
                if result {
                    let stream = result_stream.unwrap_or_else(|| js::default_result_stream(&def.name));
                    return match store.read_event(&stream, -1, false, now) {
                        Ok(Some(e)) if e.event.event_type == js::RESULT_TYPE => {
                            Ok(Some(String::from_utf8_lossy(&e.event.data).into_owned()))
                        }
                        Ok(_)
                        | Err(
                            ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_),
                        ) => Ok(None),
                        Err(ReadError::Storage(e)) => Err(e),
                    };
                }
                let Some((tag, data)) = read_last_checkpoint(&store, &checkpoint_stream(&def.name))? else {
                    return Ok(None);
                };
                if tag.version.id != version.id || tag.version.epoch != version.epoch {
                    return Ok(None);
                }
                if p.is_empty() {
                    return Ok(match serde_json::from_slice::<Value>(&data) {
                        Ok(Value::Array(a)) => a.first().filter(|v| !v.is_null()).map(Value::to_string),
                        _ => None,
                    });
                }
                let at = at.unwrap_or(tag.position).min(tag.position);
                js::read_partition_checkpoint(&store, &def.name, &p, &version, at, now)
                    .map(|found| found.map(|(stored, _)| stored.state))
                    .map_err(StorageError::Corrupt)
            })
            .await?;
        Ok(found)
    }

    /// Replaces configuration fields (`PUT /projection/{name}/config`); only while the projection
    /// is stopped or faulted.
    pub async fn update_config(&self, name: &str, body: &Map<String, Value>) -> Result<(), ProjError> {
        let _cmd = self.commands.lock().await;
        self.check_running()?;
        self.touch(name);
        let (mut def, last, running) = self.current(name)?;
        if running {
            return Err(ProjError::OperationFailed(
                "Cannot update the config of a projection that hasn't been stopped or faulted.".into(),
            ));
        }
        let mut config = def.config;
        config.apply(body).map_err(ProjError::Invalid)?;
        def.config = config;
        def.version += 1;
        self.store_definition(&def, last).await?;
        Ok(())
    }

    /// The configuration of a projection (an access, see [`expiry`]).
    pub fn config(&self, name: &str) -> Result<ProjectionConfig, ProjError> {
        Ok(self.access(name)?.def.config)
    }

    /// Starts the task that deletes expired transient projections of `generation`: it looks
    /// every [`expiry::sweep_period`] and ends with the generation, or when no transient
    /// projection is left (the next one created starts it again).
    fn spawn_expiry_sweep(&self, generation: u64) {
        let (me, env) = (self.me.clone(), self.env.clone());
        let period = expiry::sweep_period(self.query_expiry());
        self.env.rt.spawn(Box::pin(async move {
            loop {
                env.rt.sleep(period).await;
                let Some(me) = me.upgrade() else { return };
                if !me.expire_transients(generation).await {
                    return;
                }
            }
        }));
    }

    /// Deletes the transient projections of `generation` that expired; whether the sweep goes on
    /// (the generation is current and a transient projection is left).
    async fn expire_transients(&self, generation: u64) -> bool {
        let expiry = self.query_expiry();
        let due = |inner: &Inner, name: &str, now: Duration| {
            inner.generation == generation
                && inner.projections.get(name).is_some_and(|e| {
                    e.def.mode == Mode::Transient && expiry::expired(e.last_access, now, expiry)
                })
        };
        let candidates: Vec<String> = {
            let inner = lock(&self.inner);
            let now = self.env.clock.monotonic();
            inner.projections.keys().filter(|n| due(&inner, n, now)).cloned().collect()
        };
        if !candidates.is_empty() {
            let _cmd = self.commands.lock().await;
            for name in candidates {
                // Looked at again under the command lock: a request may have read it since.
                if !due(&lock(&self.inner), &name, self.env.clock.monotonic()) {
                    continue;
                }
                tracing::info!(projection = %name, ?expiry, "transient projection expired; deleted");
                self.stop_one(&name, Stop::Now).await;
                lock(&self.inner).projections.remove(&name);
            }
        }
        let mut inner = lock(&self.inner);
        if inner.generation != generation || !inner.running {
            return false;
        }
        let left = inner.projections.values().any(|e| e.def.mode == Mode::Transient);
        inner.sweeping = left;
        left
    }

    fn current(&self, name: &str) -> Result<(Definition, i64, bool), ProjError> {
        let inner = lock(&self.inner);
        let e = inner.projections.get(name).ok_or(ProjError::NotFound)?;
        Ok((e.def.clone(), e.def_last, e.run.is_some() && e.state == RunState::Running))
    }

    async fn store_definition(&self, def: &Definition, last: i64) -> Result<(), ProjError> {
        let new_last =
            if def.mode == Mode::Transient { last } else { self.write_definition(def, last).await? };
        self.with_entry(&def.name, |e| {
            e.def = def.clone();
            e.def_last = new_last;
        });
        Ok(())
    }

    fn with_entry<R>(&self, name: &str, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        lock(&self.inner).projections.get_mut(name).map(f)
    }

    /// Stops a projection's task and waits until it has.
    async fn stop_one(&self, name: &str, how: Stop) {
        let done = self
            .with_entry(name, |e| {
                e.run.as_ref().map(|r| {
                    r.stop.send_replace(how);
                    (r.id, r.done.clone())
                })
            })
            .flatten();
        if let Some((id, mut done)) = done {
            let _ = done.wait_for(|d| *d).await;
            // The task cleared its run when it ended; make sure of it.
            self.with_entry(name, |e| {
                if e.run.as_ref().is_some_and(|r| r.id == id) {
                    e.run = None;
                    e.state = RunState::Stopped;
                }
            });
        }
    }

    fn restart(&self, name: &str) {
        let generation = {
            let inner = lock(&self.inner);
            match inner.projections.get(name) {
                Some(e) if self.may_run(&e.def) => inner.generation,
                _ => return,
            }
        };
        self.spawn_run(name, generation);
    }

    /// Starts a projection's task under the service's `generation`.
    fn spawn_run(&self, name: &str, generation: u64) {
        let Some(me) = self.me.upgrade() else { return };
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(Stop::No);
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let def = {
            let mut inner = lock(&self.inner);
            if inner.generation != generation || !inner.running {
                return;
            }
            let Some(e) = inner.projections.get_mut(name) else { return };
            if let Some(old) = e.run.take() {
                old.stop.send_replace(Stop::Now);
            }
            inner.last_run += 1;
            let id = inner.last_run;
            let Some(e) = inner.projections.get_mut(name) else { return };
            e.run = Some(Run { id, stop: stop_tx, done: done_rx });
            e.state = RunState::Running;
            e.reason.clear();
            e.processed = 0;
            e.written = 0;
            (e.def.clone(), id)
        };
        let (def, id) = def;
        self.env.rt.spawn(Box::pin(async move {
            me.run(def, id, stop_rx).await;
            done_tx.send_replace(true);
        }));
    }

    /// Updates the entry of task `id` (a replaced task's reports are ignored).
    fn report(&self, name: &str, id: u64, f: impl FnOnce(&mut Entry)) {
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.projections.get_mut(name) {
            if e.run.as_ref().is_some_and(|r| r.id == id) {
                f(e);
            }
        }
    }

    /// Ends task `id` after a failure of the store, which may pass (a failed read or write, a
    /// group dropped before it committed, a store read-only until the node restarts): the
    /// projection keeps its state and starts again from its last checkpoint after
    /// [`STORAGE_RETRY`], unless it was stopped, replaced or faulted meanwhile. Its output stays
    /// exactly once: the new task learns what each emitted stream holds before it writes.
    fn storage_failed(&self, name: &str, id: u64, reason: String) {
        tracing::warn!(projection = name, %reason, "projection stopped by a storage failure; it starts again from its checkpoint");
        self.report(name, id, |e| e.reason = format!("{reason} (starting again from the last checkpoint)"));
        let (me, env, name) = (self.me.clone(), self.env.clone(), name.to_string());
        self.env.rt.spawn(Box::pin(async move {
            env.rt.sleep(STORAGE_RETRY).await;
            let Some(me) = me.upgrade() else { return };
            let current = lock(&me.inner)
                .projections
                .get(&name)
                .is_some_and(|e| e.state == RunState::Running && e.run.as_ref().is_some_and(|r| r.id == id));
            if current {
                me.restart(&name);
            }
        }));
    }

    fn fault(&self, name: &str, id: u64, reason: String) {
        tracing::warn!(projection = name, %reason, "projection faulted");
        self.report(name, id, |e| {
            e.state = RunState::Faulted;
            e.reason = reason;
            e.run = None;
        });
    }

    /// A projection's task: from its checkpoint, batch after batch, until asked to stop (a
    /// one-time or transient projection stops by itself at the end of the log as it was when
    /// the task started).
    async fn run(&self, def: Definition, id: u64, mut stop: tokio::sync::watch::Receiver<Stop>) {
        let name = def.name.clone();
        let handler = match def.kind {
            Kind::System(kind) => match SystemHandler::new(kind, &def.query) {
                Ok(h) => Handler::System(h),
                Err(e) => return self.fault(&name, id, e),
            },
            Kind::Js => match JsRunner::new(&def) {
                Ok(r) => {
                    let r = Arc::new(Mutex::new(r));
                    self.report(&name, id, |e| e.js = Some(r.clone()));
                    Handler::Js(r)
                }
                Err(e) => return self.fault(&name, id, e),
            },
        };
        if def.system().is_some() && !def.config.emit_enabled {
            return self.fault(&name, id, EMIT_NOT_ALLOWED.into());
        }
        let version = def.projection_version();
        let checkpoints = def.checkpoints_enabled && def.mode != Mode::Transient;
        let store = self.store.clone();
        let cp_stream = checkpoint_stream(&name);
        let loaded = if checkpoints {
            self.env.blocking(move || read_last_checkpoint(&store, &cp_stream)).await
        } else {
            Ok(None)
        };
        let from = match loaded {
            Ok(Some((tag, data))) if tag.version.id == version.id && tag.version.epoch == version.epoch => {
                Some((tag.position, data))
            }
            Ok(_) => None,
            Err(e) => return self.storage_failed(&name, id, format!("cannot read the checkpoint: {e}")),
        };
        // A one-time or transient projection ends where the log ended when it started.
        let end_at = def.mode.completes().then(|| self.store.log().committed());
        if let Handler::Js(r) = &handler {
            let restored = lock(r).restore(from.as_ref().map(|(p, d)| (*p, &d[..])));
            if let Err(e) = restored {
                return self.fault(&name, id, e);
            }
            if lock(r).tracks() {
                let store = self.store.clone();
                let stream = js::tracking_stream(&name);
                match self.env.blocking(move || read_names(&store, &stream)).await {
                    Ok(streams) => lock(r).set_tracked(streams),
                    Err(e) => {
                        return self.storage_failed(
                            &name,
                            id,
                            format!("cannot read the tracked streams: {e}"),
                        )
                    }
                }
            }
        }
        if let (Handler::Js(r), Some(end)) = (&handler, end_at) {
            if lock(r).catalog_stream().is_some() {
                let (store, runner, now) = (self.store.clone(), r.clone(), self.env.clock.wall_micros());
                let read = self
                    .env
                    .blocking(move || {
                        let mut runner = lock(&runner);
                        let streams = js::read_catalog(&mut runner, &store, end, now)?;
                        runner.set_catalog(streams);
                        Ok::<(), js::HandleError>(())
                    })
                    .await;
                match read {
                    Ok(()) => {}
                    Err(js::HandleError::Query(e)) => return self.fault(&name, id, e),
                    Err(js::HandleError::Storage(e)) => return self.storage_failed(&name, id, e),
                }
            }
        }
        let from = from.map(|(p, _)| p);
        let start = from.unwrap_or(0);
        self.report(&name, id, |e| {
            e.position = Some(start);
            e.last_checkpoint = from;
        });
        let mut completed = false;
        let mut follow = self.store.follow(start);
        let mut progress = Progress::new(def.config.thresholds(), start, self.env.clock.monotonic());
        let mut emitted = Emitted::new(version, def.config.max_write_batch_length as usize);
        let batch_max = (def.config.pending_events_threshold as usize).clamp(1, BATCH_RECORDS_MAX);
        let mut last_checkpoint = from;
        // The next batch is read and handled while the one before it is written (not for a
        // JavaScript projection: its state must be the batch's at the checkpoint after it).
        let pipelined = matches!(handler, Handler::System(_));
        let mut next: Option<Batch> = None;
        let how = loop {
            if end_at.is_some_and(|end| progress.position() >= end) {
                completed = true;
                break Stop::Graceful;
            }
            let batch = match next.take() {
                Some(b) => b,
                None => match self.read_batch(&mut follow, &handler, &mut stop, batch_max).await {
                    Read::Batch(b) => b,
                    Read::Stop(how) => break how,
                    Read::Failed(e) => return self.fault(&name, id, e),
                    Read::Storage(e) => return self.storage_failed(&name, id, e),
                },
            };
            let count = batch.emits.len() as u64;
            self.report(&name, id, |e| e.buffered = count);
            let pending = Pending::new(batch.emits);
            let (written, more) = if pipelined && follow.has_more() && end_at.is_none() {
                let (w, r) = tokio::join!(
                    self.write_emits(&mut emitted, pending),
                    self.read_batch(&mut follow, &handler, &mut stop, batch_max)
                );
                (w, Some(r))
            } else {
                (self.write_emits(&mut emitted, pending).await, None)
            };
            match written {
                Ok(()) => {}
                Err(WriteFailure::NotLeader) => break Stop::Now,
                Err(WriteFailure::Fault(reason)) => return self.fault(&name, id, reason),
                Err(WriteFailure::Storage(reason)) => return self.storage_failed(&name, id, reason),
            }
            progress.batch(batch.handled, batch.last_handled, batch.end);
            let pos = progress.position();
            let partitions = match &handler {
                Handler::Js(r) => lock(r).partitions(),
                Handler::System(_) => 1,
            };
            self.report(&name, id, |e| {
                e.position = Some(pos);
                e.processed += batch.handled;
                e.written += count;
                e.buffered = 0;
                e.partitions = partitions;
            });
            if !self.leads() {
                break Stop::Now;
            }
            let now = self.env.clock.monotonic();
            if checkpoints && progress.due(now) {
                match self.write_checkpoint(&def, &handler, id, pos).await {
                    Ok(()) => {
                        progress.checkpointed(now);
                        last_checkpoint = Some(pos);
                    }
                    Err(WriteFailure::Fault(reason)) => return self.fault(&name, id, reason),
                    Err(WriteFailure::Storage(reason)) => return self.storage_failed(&name, id, reason),
                    Err(WriteFailure::NotLeader) => break Stop::Now,
                }
            }
            match more {
                None => {}
                Some(Read::Batch(b)) => next = Some(b),
                Some(Read::Stop(how)) => break how,
                Some(Read::Failed(e)) => return self.fault(&name, id, e),
                Some(Read::Storage(e)) => return self.storage_failed(&name, id, e),
            }
        };
        if how == Stop::Graceful && checkpoints && last_checkpoint != Some(progress.position()) {
            let pos = progress.position();
            match self.write_checkpoint(&def, &handler, id, pos).await {
                Ok(()) => {}
                Err(WriteFailure::Fault(reason)) => return self.fault(&name, id, reason),
                Err(WriteFailure::Storage(reason)) => return self.storage_failed(&name, id, reason),
                Err(WriteFailure::NotLeader) => {}
            }
        }
        self.report(&name, id, |e| {
            e.state = if completed { RunState::Completed } else { RunState::Stopped };
            e.run = None;
        });
    }

    /// Waits for records past `follow` (or a stop), reads up to `max` and hands them to
    /// `handler` (a JavaScript projection's on the blocking pool).
    async fn read_batch(
        &self,
        follow: &mut crate::store::follow::Follow,
        handler: &Handler,
        stop: &mut tokio::sync::watch::Receiver<Stop>,
        max: usize,
    ) -> Read {
        let records = tokio::select! {
            biased;
            s = stop.wait_for(|s| *s != Stop::No) => return Read::Stop(s.map_or(Stop::Now, |s| *s)),
            r = follow.next(max) => r,
        };
        let records = match records {
            Ok(r) => r,
            Err(e) => return Read::Storage(format!("cannot read the log: {e}")),
        };
        let end = follow.position();
        match handler {
            Handler::System(h) => {
                let mut b = Batch { emits: Vec::new(), handled: 0, last_handled: None, end };
                for r in &records {
                    if let Record::Event(e) = r {
                        if h.handle(e, &mut b.emits) {
                            b.handled += 1;
                            b.last_handled = Some(e.log_position);
                        }
                    }
                }
                Read::Batch(b)
            }
            Handler::Js(r) => {
                let (r, store) = (r.clone(), self.store.clone());
                let now = self.env.clock.wall_micros();
                match self.env.blocking(move || lock(&r).handle(&records, &store, now)).await {
                    Ok(h) => Read::Batch(Batch {
                        emits: h.emits,
                        handled: h.handled,
                        last_handled: h.last_handled,
                        end,
                    }),
                    Err(js::HandleError::Query(e)) => Read::Failed(e),
                    Err(js::HandleError::Storage(e)) => Read::Storage(e),
                }
            }
        }
    }

    /// Writes a batch's emits (see [`emitted`]).
    async fn write_emits(&self, emitted: &mut Emitted, mut pending: Pending) -> Result<(), WriteFailure> {
        let mut retries = 0;
        while !pending.is_empty() {
            let unknown = emitted.unknown(&pending);
            if !unknown.is_empty() {
                let store = self.store.clone();
                let now = self.env.clock.wall_micros();
                let heads = self
                    .env
                    .blocking(move || {
                        unknown
                            .into_iter()
                            .map(|s| read_head(&store, &s, now).map(|h| (s, h)))
                            .collect::<Result<Vec<_>, StorageError>>()
                    })
                    .await
                    .map_err(|e| WriteFailure::Storage(format!("cannot read an emitted stream: {e}")))?;
                for (s, h) in heads {
                    emitted.learn(s, h);
                }
            }
            let writes = emitted.next_writes(&mut pending);
            if writes.is_empty() {
                break;
            }
            let ops =
                writes.iter().map(|w| emitted.op(&pending, w, || *self.env.new_uuid().as_bytes())).collect();
            let results = self.store.write_all_async(ops).await;
            // A stream whose write failed: its later writes of the round are not counted (they
            // expected what the failed one would have left); its head is read again.
            let mut failed: Vec<&str> = Vec::new();
            for (w, r) in writes.iter().zip(results) {
                if failed.contains(&w.stream.as_str()) {
                    continue;
                }
                if r.is_err() {
                    failed.push(&w.stream);
                }
                match r {
                    Ok(ok) => emitted.written(&mut pending, w, ok.last_event_number),
                    Err(WriteError::WrongExpectedVersion { .. } | WriteError::CommitTimeout) => {
                        retries += 1;
                        if retries > WRITE_RETRIES_MAX {
                            return Err(WriteFailure::Fault(format!(
                                "the emitted stream {} keeps changing under the projection",
                                w.stream
                            )));
                        }
                        emitted.forget(&w.stream);
                    }
                    Err(WriteError::StreamDeleted) => {
                        tracing::warn!(stream = %w.stream, "a projection's emitted stream is deleted; its events are dropped");
                        emitted.drop_stream(&mut pending, &w.stream);
                    }
                    Err(WriteError::NotLeader) => return Err(WriteFailure::NotLeader),
                    Err(e @ WriteError::Storage(_)) => {
                        return Err(WriteFailure::Storage(format!("cannot write to {}: {e}", w.stream)))
                    }
                    Err(e) => return Err(WriteFailure::Fault(format!("cannot write to {}: {e}", w.stream))),
                }
            }
        }
        Ok(())
    }

    /// Writes a checkpoint at `pos`: a JavaScript projection's changed partition states first,
    /// then the root checkpoint.
    async fn write_checkpoint(
        &self,
        def: &Definition,
        handler: &Handler,
        id: u64,
        pos: u64,
    ) -> Result<(), WriteFailure> {
        let name = def.name.as_str();
        self.report(name, id, |e| e.checkpoint_writing = true);
        let tag = format!("{}}}", tag_prefix(&def.projection_version(), pos));
        let stream = checkpoint_stream(name);
        let mut data = b"[null]".to_vec();
        let mut partitions = Vec::new();
        if let Handler::Js(runner) = handler {
            let snap = lock(runner).snapshot();
            match snap {
                Ok(snap) => {
                    data = snap.root.into_bytes();
                    partitions = snap.partitions;
                }
                Err(reason) => {
                    self.report(name, id, |e| e.checkpoint_writing = false);
                    return Err(WriteFailure::Fault(reason));
                }
            }
        }
        let state_bytes = data.len() as u64;
        let r = async {
            if !partitions.is_empty() {
                self.write_partition_checkpoints(name, &tag, partitions).await?;
            }
            let store = self.store.clone();
            let s = stream.clone();
            let fresh = self.env.blocking(move || store.stream_state(&s)).await?.last < 0;
            if fresh {
                let meta = self.event("$metadata", br#"{"$maxCount":2}"#.to_vec(), Vec::new(), true);
                self.store.append_async(&format!("$${stream}"), ANY, vec![meta]).await?;
            }
            let ev = self.event(CHECKPOINT_EVENT_TYPE, data, tag.clone().into_bytes(), true);
            self.store.append_async(&stream, ANY, vec![ev]).await?;
            if def.system() == Some(SystemKind::ByEventType) {
                let ev = self.event("$Checkpoint", tag.clone().into_bytes(), tag.clone().into_bytes(), true);
                self.store.append_async("$et", ANY, vec![ev]).await?;
            }
            Ok::<(), ProjError>(())
        }
        .await;
        self.report(name, id, |e| {
            e.checkpoint_writing = false;
            if r.is_ok() {
                e.last_checkpoint = Some(pos);
                e.state_bytes = state_bytes;
            }
        });
        r.map_err(|e| WriteFailure::Storage(format!("cannot write a checkpoint: {e}")))
    }

    /// Writes each changed partition's state to its checkpoint stream (`$maxCount` 2 set first
    /// on a new one; the checkpoint it was loaded from first again when a newer one without a
    /// root event follows that, [`js::PartitionState::keep`]), in groups of
    /// [`PARTITION_WRITES_MAX`] operations.
    async fn write_partition_checkpoints(
        &self,
        name: &str,
        tag: &str,
        parts: Vec<js::PartitionState>,
    ) -> Result<(), ProjError> {
        let mut ops = Vec::new();
        for js::PartitionState { partition, state, fresh, keep } in parts {
            let stream = js::partition_checkpoint_stream(name, &partition);
            if fresh {
                let meta = self.event("$metadata", br#"{"$maxCount":2}"#.to_vec(), Vec::new(), true);
                ops.push(WriteOp::Append {
                    stream: format!("$${stream}"),
                    expected: ANY,
                    events: vec![meta],
                });
            }
            let mut events = Vec::with_capacity(2);
            if let Some(kept) = keep {
                events.push(self.event(
                    js::PARTITION_CHECKPOINT_TYPE,
                    kept.state.into_bytes(),
                    kept.tag,
                    true,
                ));
            }
            events.push(self.event(
                js::PARTITION_CHECKPOINT_TYPE,
                state.into_bytes(),
                tag.as_bytes().to_vec(),
                true,
            ));
            ops.push(WriteOp::Append { stream, expected: ANY, events });
        }
        while !ops.is_empty() {
            let rest = ops.split_off(ops.len().min(PARTITION_WRITES_MAX));
            for r in self.store.write_all_async(std::mem::replace(&mut ops, rest)).await {
                r?;
            }
        }
        Ok(())
    }
}

/// What handles a projection's records.
enum Handler {
    /// A system projection's native handler.
    System(SystemHandler),
    /// A JavaScript projection's engine (shared with the entry, for its state and result).
    Js(Arc<Mutex<JsRunner>>),
}

/// A batch of records, handled and not yet written.
struct Batch {
    emits: Vec<system::Emit>,
    /// Events that passed the projection's filter.
    handled: u64,
    /// The position of the last of them.
    last_handled: Option<u64>,
    /// Where the batch ends.
    end: u64,
}

/// What reading a batch gave.
enum Read {
    Batch(Batch),
    Stop(Stop),
    /// The projection faults, for this reason (its query failed).
    Failed(String),
    /// The store failed: the projection starts again from its checkpoint a moment later.
    Storage(String),
}

/// The registry's ids by name and its last event number.
fn read_registry(store: &Store) -> Result<(BTreeMap<String, i64>, i64), StorageError> {
    let mut ids = BTreeMap::new();
    let mut from = 0;
    loop {
        let slice = match store.read_forward(REGISTRY_STREAM, from, 256, false, 0) {
            Ok(s) => s,
            Err(ReadError::NoStream | ReadError::StreamDeleted) => return Ok((ids, -1)),
            Err(ReadError::InvalidPosition(p)) => return Err(StorageError::Corrupt(format!("position {p}"))),
            Err(ReadError::Storage(e)) => return Err(e),
        };
        for e in &slice.events {
            let e = &e.event;
            let name = String::from_utf8_lossy(&e.data).into_owned();
            if e.event_type == CREATED_EVENT_TYPE {
                ids.insert(name, e.event_number);
            } else if e.event_type == DELETED_EVENT_TYPE {
                ids.remove(&name);
            }
        }
        if slice.is_end_of_stream || slice.events.is_empty() {
            return Ok((ids, slice.last_event_number));
        }
        from = slice.next_event_number;
    }
}

/// A projection's stored definition and the last event number of its stream (a system
/// projection's unreadable definition gives its default one; a JavaScript projection's, none).
fn load_definition(store: &Store, name: &str, id: i64) -> Result<Option<(Definition, i64)>, StorageError> {
    let stream = definition_stream(name);
    match store.read_event(&stream, -1, false, 0) {
        Ok(Some(e)) => {
            let last = store.stream_state(&stream)?.last;
            let def = match Definition::from_json(name, id, &e.event.data) {
                Some(d) => d,
                None => match SystemKind::from_name(name) {
                    Some(kind) => {
                        tracing::warn!(projection = name, "unreadable definition; using the default");
                        Definition::new_system(kind, id)
                    }
                    None => return Ok(None),
                },
            };
            Ok(Some((def, last)))
        }
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted) => Ok(None),
        Err(ReadError::InvalidPosition(p)) => Err(StorageError::Corrupt(format!("position {p}"))),
        Err(ReadError::Storage(e)) => Err(e),
    }
}

/// The names a stream's events hold (a projection's partition catalog or tracked streams).
/// Whether a query may run in `mode`: a `fromStreamCatalog` query only completes.
fn check_mode(q: &annal_js::Definition, mode: Mode) -> Result<(), ProjError> {
    if matches!(q.source, annal_js::Source::Catalog { .. }) && !mode.completes() {
        return Err(ProjError::Invalid(js::CATALOG_NEEDS_QUERY_MODE.into()));
    }
    Ok(())
}

fn read_names(store: &Store, stream: &str) -> Result<Vec<String>, StorageError> {
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let slice = match store.read_forward(stream, from, 4096, false, 0) {
            Ok(s) => s,
            Err(ReadError::NoStream | ReadError::StreamDeleted) => return Ok(out),
            Err(ReadError::InvalidPosition(p)) => return Err(StorageError::Corrupt(format!("position {p}"))),
            Err(ReadError::Storage(e)) => return Err(e),
        };
        out.extend(slice.events.iter().map(|e| String::from_utf8_lossy(&e.event.data).into_owned()));
        if slice.is_end_of_stream || slice.events.is_empty() {
            return Ok(out);
        }
        from = slice.next_event_number;
    }
}

/// The tag and data of a checkpoint stream's last event.
fn read_last_checkpoint(store: &Store, stream: &str) -> Result<Option<(Tag, bytes::Bytes)>, StorageError> {
    match store.read_event(stream, -1, false, 0) {
        Ok(Some(e)) => Ok(Tag::from_metadata(&e.event.metadata).map(|t| (t, e.event.data))),
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted) => Ok(None),
        Err(ReadError::InvalidPosition(p)) => Err(StorageError::Corrupt(format!("position {p}"))),
        Err(ReadError::Storage(e)) => Err(e),
    }
}

/// An emitted stream's head: its last event number and its last event's tag.
fn read_head(store: &Store, stream: &str, now_us: i64) -> Result<Head, StorageError> {
    let last = store.stream_state(stream)?.last;
    if last < 0 {
        return Ok(Head { last, tag: None });
    }
    let tag = match store.read_event(stream, -1, false, now_us) {
        Ok(Some(e)) => Tag::from_metadata(&e.event.metadata),
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
            None
        }
        Err(ReadError::Storage(e)) => return Err(e),
    };
    Ok(Head { last, tag })
}

/// How long [`Projections::wait_idle`] polls between looks.
const IDLE_POLL: Duration = Duration::from_millis(10);

impl Projections {
    /// Waits until every running projection has processed the log up to the committed position
    /// at the call, or `limit` passed; whether they did. For tests and benchmarks.
    pub async fn wait_caught_up(&self, limit: Duration) -> bool {
        let target = self.store.log().committed();
        let deadline = self.env.clock.monotonic() + limit;
        loop {
            let behind = lock(&self.inner)
                .projections
                .values()
                .any(|e| e.state == RunState::Running && e.position.is_none_or(|p| p < target));
            if !behind {
                return true;
            }
            if self.env.clock.monotonic() >= deadline {
                return false;
            }
            self.env.rt.sleep(IDLE_POLL).await;
        }
    }
}
