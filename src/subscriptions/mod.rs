//! Persistent subscriptions: competing consumers of a stream, with acknowledgements, retries,
//! parking and checkpoints (the service behind `/subscriptions`).
//!
//! [`Subscriptions`] is the one place that owns every group. Each group's decisions are a
//! sans-IO [`core::Group`]; this shell performs what the cores ask for: it reads pages of the
//! subscribed stream when a poll needs messages, writes parked links and checkpoints, and keeps
//! the definitions. Two tasks drive it once a group exists (a node without groups runs none):
//! one follows committed records (a stream's groups learn it was written, so they read again),
//! one ticks every [`TICK`] on the `Env` clock (time-outs, lapsed consumers, checkpoints on the
//! timer, and stopping the service when the node no longer leads).
//!
//! Durable state lives in streams, so it replicates and is backed up like any other:
//! - the definitions, all groups in one event of [`CONFIG_STREAM`] (the last event counts);
//! - each group's checkpoint in `$persistentsubscription-{stream}::{group}-checkpoint`: the
//!   event number below which everything was acknowledged, skipped or parked;
//! - each group's parked messages in `$persistentsubscription-{stream}::{group}-parked`: one
//!   link per message.
//!
//! Buffers, in-flight messages and retry counts live in memory: after a restart (or on a new
//! leader) a group resumes after its checkpoint, so messages past it may be delivered again
//! (at-least-once), never lost. The service runs only on a node that leads (a single node
//! always): [`Subscriptions::start`] loads the definitions (again at each new term),
//! [`Subscriptions::stop`] drops every group without writing anything; until it starts, and
//! whenever the leader check ([`Subscriptions::set_leader_check`]) says the node does not lead,
//! requests get [`SubError::NotReady`].
//!
//! Invariants: at most one group per `(stream, group)`; definitions are changed one at a time
//! and the stream is written before memory changes; an outcome reported for a group that was
//! replaced since (its generation differs) is ignored.

pub mod core;
pub mod settings;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Value};

use self::core::{Group, Message, MessageId, NackAction, PageResult, ParkRequest, Snapshot, TakeError};
use self::settings::Settings;
use crate::env::Env;
use crate::store::{NewEvent, ReadError, StorageError, Store, WriteError, ANY};

/// The stream of definitions.
pub const CONFIG_STREAM: &str = "$persistentSubscriptionConfig";
/// The event type of a definitions event.
pub const CONFIG_EVENT_TYPE: &str = "PersistentConfig1";
/// The event type of a checkpoint.
pub const CHECKPOINT_EVENT_TYPE: &str = "SubscriptionCheckpoint";
/// How often groups check time-outs, lapsed consumers and timed checkpoints.
pub const TICK: Duration = Duration::from_millis(500);
/// Page reads one poll makes at most to fill a group's buffer.
pub const FILL_READS_MAX: usize = 64;
/// Messages one poll takes at most (`/{count}`).
pub const POLL_COUNT_MAX: usize = 100;
/// Parked links read per page by a replay.
const REPLAY_PAGE: usize = 100;
/// Metadata of the checkpoint and parked streams: only admins may touch them.
const ADMIN_ACL: &str = r#"{"$r":"$admins","$w":"$admins","$d":"$admins","$mr":"$admins","$mw":"$admins"}"#;

/// The checkpoint stream of a group.
pub fn checkpoint_stream(stream: &str, group: &str) -> String {
    format!("$persistentsubscription-{stream}::{group}-checkpoint")
}

/// The parked stream of a group.
pub fn parked_stream(stream: &str, group: &str) -> String {
    format!("$persistentsubscription-{stream}::{group}-parked")
}

/// Why a subscription request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SubError {
    /// The service has not started (the node does not lead, or is still loading).
    #[error("persistent subscriptions are not running on this node")]
    NotReady,
    /// No such group.
    #[error("subscription group not found")]
    NotFound,
    /// The group exists already.
    #[error("subscription group already exists")]
    Exists,
    /// Bad settings or names.
    #[error("{0}")]
    Invalid(String),
    /// The subscribed stream was hard-deleted.
    #[error("the subscribed stream was deleted")]
    StreamDeleted,
    /// The group has as many consumers as it allows.
    #[error("the group has its maximum number of consumers")]
    TooManyConsumers,
    /// A read failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A write of the service's streams failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

type Key = (String, String);

struct Entry {
    generation: u64,
    core: Group,
    /// The checkpoint stream has its metadata.
    checkpoint_meta: bool,
}

#[derive(Default)]
struct Inner {
    running: bool,
    /// Bumped by every start and stop, and given to every new group.
    generation: u64,
    /// The generation of the last start (the tasks of that start end when it changes).
    started: u64,
    /// The tasks of this start are running.
    tasks: bool,
    groups: BTreeMap<Key, Entry>,
}

/// Whether the node leads (may take writes).
type LeaderCheck = Box<dyn Fn() -> bool + Send + Sync>;

/// What a group asked the shell to write.
struct Effects {
    key: Key,
    generation: u64,
    parks: Vec<ParkRequest>,
    checkpoint: Option<(i64, bool)>,
}

/// Totals over every group since the service started, for `/stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Groups.
    pub groups: u64,
    /// Live consumers.
    pub consumers: u64,
    /// Messages in flight.
    pub in_flight: u64,
    /// Messages acknowledged or skipped.
    pub processed: u64,
    /// Deliveries.
    pub delivered: u64,
    /// Retries.
    pub retried: u64,
    /// Time-outs.
    pub timed_out: u64,
    /// Parked.
    pub parked: u64,
}

/// A group's figures for documents.
#[derive(Clone, Debug)]
pub struct GroupView {
    /// Stream.
    pub stream: String,
    /// Group.
    pub group: String,
    /// Settings.
    pub settings: Settings,
    /// Figures.
    pub snapshot: Snapshot,
}

/// The persistent subscription service (see the module doc).
pub struct Subscriptions {
    env: Env,
    store: Arc<Store>,
    me: Weak<Subscriptions>,
    inner: Mutex<Inner>,
    /// Held while the definitions change, so each definitions event has every group.
    config: tokio::sync::Mutex<()>,
    stop: tokio::sync::watch::Sender<u64>,
    leads: std::sync::OnceLock<LeaderCheck>,
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The stream a follow batch's name concerns (a metastream's writes concern its stream).
fn subject(name: &str) -> &str {
    crate::store::engine::meta_target(name).unwrap_or(name)
}

fn checkpoint_of(data: &[u8]) -> Option<i64> {
    match serde_json::from_slice::<Value>(data).ok()? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn page_of(r: Result<crate::store::StreamSlice, ReadError>) -> PageResult {
    match r {
        // An empty page scanned the whole visible range: nothing up to the stream's last event
        // is readable (expired or truncated), so the next read starts after it.
        Ok(s) if s.events.is_empty() => PageResult::Page {
            events: s.events,
            next: s.next_event_number.max(s.last_event_number.saturating_add(1)),
            last: s.last_event_number,
            end: true,
        },
        Ok(s) => PageResult::Page {
            events: s.events,
            next: s.next_event_number,
            last: s.last_event_number,
            end: s.is_end_of_stream,
        },
        Err(ReadError::NoStream) => PageResult::NoStream,
        Err(ReadError::StreamDeleted) => PageResult::Deleted,
        Err(e @ (ReadError::InvalidPosition(_) | ReadError::Storage(_))) => {
            tracing::warn!(error = %e, "a subscription's page read failed");
            PageResult::Failed
        }
    }
}

impl Subscriptions {
    /// A service over `store`, not started.
    pub fn new(env: Env, store: Arc<Store>) -> Arc<Subscriptions> {
        let (stop, _) = tokio::sync::watch::channel(0);
        Arc::new_cyclic(|me| Subscriptions {
            env,
            store,
            me: me.clone(),
            inner: Mutex::new(Inner::default()),
            config: tokio::sync::Mutex::new(()),
            stop,
            leads: std::sync::OnceLock::new(),
        })
    }

    /// Sets how the service tells whether the node leads (a cluster node's role); without one it
    /// always does. Set once.
    pub fn set_leader_check(&self, f: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.leads.set(Box::new(f));
    }

    fn leads(&self) -> bool {
        self.leads.get().is_none_or(|f| f())
    }

    fn now(&self) -> Duration {
        self.env.clock.monotonic()
    }

    /// Whether the service runs (and the node leads).
    pub fn running(&self) -> bool {
        lock(&self.inner).running && self.leads()
    }

    /// Loads the definitions and checkpoints and starts the service, dropping whatever an
    /// earlier start held (a new term starts from the replicated state).
    pub async fn start(&self) -> Result<(), StorageError> {
        let _cfg = self.config.lock().await;
        self.stop();
        let store = self.store.clone();
        let defs = self.env.blocking(move || load(&store)).await?;
        let now = self.now();
        let generation = {
            let mut inner = lock(&self.inner);
            inner.generation += 1;
            let generation = inner.generation;
            inner.groups.clear();
            for (stream, group, settings, checkpoint, last) in defs {
                inner.generation += 1;
                let core = Group::new(stream.clone(), group.clone(), settings, checkpoint, last, now);
                let e = Entry { generation: inner.generation, core, checkpoint_meta: checkpoint.is_some() };
                inner.groups.insert((stream, group), e);
            }
            inner.running = true;
            inner.started = generation;
            generation
        };
        self.stop.send_replace(generation);
        tracing::info!(groups = lock(&self.inner).groups.len(), "persistent subscriptions started");
        self.ensure_tasks();
        let keys: Vec<Key> = lock(&self.inner).groups.keys().cloned().collect();
        if let (Some(me), false) = (self.me.upgrade(), keys.is_empty()) {
            self.env.rt.spawn(Box::pin(async move {
                for key in keys {
                    me.first_read(&key).await;
                }
            }));
        }
        Ok(())
    }

    /// Starts the two tasks of this start if groups exist and they are not running yet.
    fn ensure_tasks(&self) {
        let generation = {
            let mut inner = lock(&self.inner);
            if !inner.running || inner.tasks || inner.groups.is_empty() {
                return;
            }
            inner.tasks = true;
            inner.started
        };
        self.spawn_tasks(generation);
    }

    /// Stops the service: every group and its consumers are dropped (nothing is written; the
    /// next start resumes from the checkpoints).
    pub fn stop(&self) {
        let generation = {
            let mut inner = lock(&self.inner);
            if !inner.running {
                return;
            }
            inner.running = false;
            inner.tasks = false;
            inner.groups.clear();
            inner.generation += 1;
            inner.generation
        };
        self.stop.send_replace(generation);
        tracing::info!("persistent subscriptions stopped");
    }

    fn spawn_tasks(&self, generation: u64) {
        let Some(me) = self.me.upgrade() else { return };
        let mut follow = self.store.follow_new();
        let mut stop = self.stop.subscribe();
        let weak = Arc::downgrade(&me);
        self.env.rt.spawn(Box::pin(async move {
            loop {
                let names = tokio::select! {
                    biased;
                    _ = stop.wait_for(|g| *g != generation) => return,
                    r = follow.next_streams() => r,
                };
                let Some(me) = weak.upgrade() else { return };
                match names {
                    Ok(names) => me.written(&names),
                    Err(e) => {
                        tracing::warn!(error = %e, "persistent subscriptions could not follow the log");
                        follow.skip_to_committed();
                        me.written_all();
                    }
                }
            }
        }));
        let mut stop = self.stop.subscribe();
        let weak = Arc::downgrade(&me);
        let env = self.env.clone();
        self.env.rt.spawn(Box::pin(async move {
            loop {
                tokio::select! {
                    biased;
                    _ = stop.wait_for(|g| *g != generation) => return,
                    _ = env.rt.sleep(TICK) => {}
                }
                let Some(me) = weak.upgrade() else { return };
                me.tick();
            }
        }));
    }

    /// Tells the groups of written streams to read again.
    fn written(&self, names: &[Arc<str>]) {
        let mut inner = lock(&self.inner);
        for name in names {
            let s = subject(name);
            for (_, e) in inner.groups.range_mut((s.to_owned(), String::new())..) {
                if e.core.stream != s {
                    break;
                }
                e.core.written();
            }
        }
    }

    fn written_all(&self) {
        for e in lock(&self.inner).groups.values_mut() {
            e.core.written();
        }
    }

    /// Time-outs, lapsed consumers and checkpoints on the timer, for every group; stops the
    /// service when the node no longer leads.
    pub fn tick(&self) {
        if !self.leads() {
            self.stop();
            return;
        }
        let now = self.now();
        let effects: Vec<Effects> = {
            let mut inner = lock(&self.inner);
            inner
                .groups
                .iter_mut()
                .map(|(k, e)| {
                    e.core.expire(now);
                    effects_of(k, e, now, true)
                })
                .collect()
        };
        for fx in effects {
            self.perform(fx);
        }
    }

    /// Writes what a group asked for, on a task of its own.
    fn perform(&self, fx: Effects) {
        if fx.parks.is_empty() && fx.checkpoint.is_none() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        self.env.rt.spawn(Box::pin(async move { me.write_effects(fx).await }));
    }

    /// Writes `fx`, then whatever the group wants written after it (written parks may let a
    /// checkpoint through), in a loop. After a failed write it stops: what failed is asked for
    /// again at the next tick, so a store that refuses writes (read-only after a storage
    /// failure) is not retried in a busy loop.
    async fn write_effects(&self, mut fx: Effects) {
        loop {
            let (stream, group) = (fx.key.0.as_str(), fx.key.1.as_str());
            let mut failed = false;
            for p in std::mem::take(&mut fx.parks) {
                let ok = self.write_park(stream, group, &p).await;
                failed |= !ok;
                self.with_group(&fx.key, fx.generation, |g| g.core.on_parked(p.message.id, ok));
            }
            if let Some((n, has_meta)) = fx.checkpoint {
                let ok = self.write_checkpoint(stream, group, n, has_meta).await;
                failed |= !ok;
                let now = self.now();
                self.with_group(&fx.key, fx.generation, |g| {
                    g.core.on_checkpoint(n, ok, now);
                    g.checkpoint_meta |= ok;
                });
            }
            if failed {
                return;
            }
            let now = self.now();
            match self.with_group(&fx.key, fx.generation, |e| effects_of(&fx.key, e, now, false)) {
                Some(more) if !more.parks.is_empty() || more.checkpoint.is_some() => fx = more,
                _ => return,
            }
        }
    }

    fn with_group<R>(&self, key: &Key, generation: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut inner = lock(&self.inner);
        inner.groups.get_mut(key).filter(|e| e.generation == generation).map(f)
    }

    fn event(&self, event_type: &str, data: Vec<u8>, metadata: Vec<u8>, is_json: bool) -> NewEvent {
        NewEvent::fresh(&self.env, event_type, data, metadata, is_json)
    }

    async fn write_park(&self, stream: &str, group: &str, p: &ParkRequest) -> bool {
        let target = &p.message.event.event;
        let meta = json!({
            "added": crate::http::text::iso8601(self.env.clock.wall_micros()),
            "reason": p.reason,
            "subscriptionEventNumber": p.message.number,
        });
        let link = self.event(
            "$>",
            format!("{}@{}", target.event_number, target.stream).into_bytes(),
            meta.to_string().into_bytes(),
            false,
        );
        match self.store.append_async(&parked_stream(stream, group), ANY, vec![link]).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(stream, group, error = %e, "parking a message failed; it stays outstanding");
                false
            }
        }
    }

    async fn write_checkpoint(&self, stream: &str, group: &str, n: i64, has_meta: bool) -> bool {
        let name = checkpoint_stream(stream, group);
        if !has_meta {
            let meta = format!(r#"{{"$maxCount":2,"$acl":{ADMIN_ACL}}}"#).into_bytes();
            let ev = self.event("$metadata", meta, Vec::new(), true);
            if let Err(e) = self.store.append_async(&format!("$${name}"), ANY, vec![ev]).await {
                tracing::warn!(stream, group, error = %e, "writing the checkpoint stream's metadata failed");
                return false;
            }
        }
        let ev = self.event(CHECKPOINT_EVENT_TYPE, n.to_string().into_bytes(), Vec::new(), true);
        match self.store.append_async(&name, ANY, vec![ev]).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(stream, group, error = %e, "writing a checkpoint failed");
                false
            }
        }
    }

    // ---- requests ----

    fn check_running(&self) -> Result<(), SubError> {
        if self.running() {
            Ok(())
        } else {
            Err(SubError::NotReady)
        }
    }

    /// Writes the definitions with `change` applied (under the definitions lock).
    async fn write_config(
        &self,
        user: &str,
        change: impl FnOnce(&mut BTreeMap<Key, Settings>),
    ) -> Result<(), SubError> {
        let mut defs: BTreeMap<Key, Settings> =
            lock(&self.inner).groups.iter().map(|(k, e)| (k.clone(), e.core.settings.clone())).collect();
        change(&mut defs);
        let entries: Vec<Value> = defs.iter().map(|((s, g), st)| st.config_entry(s, g)).collect();
        let doc = json!({
            "version": "2",
            "updated": crate::http::text::iso8601(self.env.clock.wall_micros()),
            "updatedBy": user,
            "entries": entries,
        });
        let fresh = {
            let store = self.store.clone();
            self.env.blocking(move || store.stream_state(CONFIG_STREAM)).await?.last < 0
        };
        if fresh {
            let ev = self.event("$metadata", br#"{"$maxCount":2}"#.to_vec(), Vec::new(), true);
            self.store.append_async(&format!("$${CONFIG_STREAM}"), ANY, vec![ev]).await?;
        }
        let ev = self.event(CONFIG_EVENT_TYPE, doc.to_string().into_bytes(), Vec::new(), true);
        self.store.append_async(CONFIG_STREAM, ANY, vec![ev]).await?;
        Ok(())
    }

    fn validate_names(stream: &str, group: &str) -> Result<(), SubError> {
        if stream.is_empty() || stream == "$all" {
            return Err(SubError::Invalid(
                "Persistent subscriptions to $all or to no stream are not supported".into(),
            ));
        }
        if group.is_empty() {
            return Err(SubError::Invalid("The group name must not be empty".into()));
        }
        Ok(())
    }

    /// Where a new group starts reading: checks `startFrom` against the stream and returns its
    /// last event number.
    async fn stream_last(&self, stream: &str, settings: &Settings) -> Result<i64, SubError> {
        let store = self.store.clone();
        let name = stream.to_owned();
        let state = self.env.blocking(move || store.stream_state(&name)).await?;
        if state.is_tombstoned() {
            return Ok(state.last);
        }
        if settings.start_from > state.last + 1 {
            return Err(SubError::Invalid(format!(
                "startFrom {} is beyond the end of the stream (its last event number is {})",
                settings.start_from, state.last
            )));
        }
        Ok(state.last)
    }

    /// Creates a group.
    pub async fn create(
        &self,
        stream: &str,
        group: &str,
        settings: Settings,
        user: &str,
    ) -> Result<(), SubError> {
        let (_cfg, key, _, last) = self.open_definition(stream, group, &settings, false).await?;
        let parked_meta = format!(r#"{{"$acl":{ADMIN_ACL}}}"#).into_bytes();
        let ev = self.event("$metadata", parked_meta, Vec::new(), true);
        self.store.append_async(&format!("$${}", parked_stream(stream, group)), ANY, vec![ev]).await?;
        self.define(user, &key, &settings).await?;
        // A checkpoint left by an earlier group of the same name (deleted streams read as none).
        let checkpoint = self.read_checkpoint(stream, group).await?;
        self.install(key.clone(), settings, checkpoint, last);
        self.first_read(&key).await;
        Ok(())
    }

    /// A group's first read, as it is created, updated or loaded (as v5's, which reads at
    /// once): its figures (`lastKnownEventNumber`, what is behind) are true before any consumer
    /// polls. A failed read is only logged: the next poll reads again.
    async fn first_read(&self, key: &Key) {
        if let Err(e) = self.fill(key).await {
            tracing::debug!(stream = %key.0, group = %key.1, error = %e, "a group's first read failed; its next poll reads again");
        }
    }

    /// The opening step of [`Subscriptions::create`] and [`Subscriptions::update`]: checks the
    /// names, takes the definitions lock (held until the returned guard drops), checks that the
    /// service runs and that the group exists (`must_exist`: an update) or does not (a create),
    /// and checks `startFrom` against the stream. Returns the guard, the group's key, its
    /// current checkpoint (an update's; none for a create) and the stream's last event number.
    async fn open_definition(
        &self,
        stream: &str,
        group: &str,
        settings: &Settings,
        must_exist: bool,
    ) -> Result<(tokio::sync::MutexGuard<'_, ()>, Key, Option<i64>, i64), SubError> {
        Self::validate_names(stream, group)?;
        let guard = self.config.lock().await;
        self.check_running()?;
        let key = (stream.to_owned(), group.to_owned());
        let checkpoint = match (lock(&self.inner).groups.get(&key), must_exist) {
            (None, true) => return Err(SubError::NotFound),
            (Some(_), false) => return Err(SubError::Exists),
            (None, false) => None,
            (Some(e), true) => Some(e.core.checkpoint()).filter(|c| *c >= 0),
        };
        let last = self.stream_last(stream, settings).await?;
        Ok((guard, key, checkpoint, last))
    }

    /// Writes the definitions with the group `key` defined by `settings` (a new group, or new
    /// settings of one).
    async fn define(&self, user: &str, key: &Key, settings: &Settings) -> Result<(), SubError> {
        let (k, s) = (key.clone(), settings.clone());
        self.write_config(user, move |d| {
            d.insert(k, s);
        })
        .await
    }

    async fn read_checkpoint(&self, stream: &str, group: &str) -> Result<Option<i64>, SubError> {
        let store = self.store.clone();
        let name = checkpoint_stream(stream, group);
        Ok(self.env.blocking(move || last_checkpoint(&store, &name)).await?)
    }

    fn install(&self, key: Key, settings: Settings, checkpoint: Option<i64>, last: i64) {
        let now = self.now();
        let mut inner = lock(&self.inner);
        inner.generation += 1;
        let generation = inner.generation;
        let core = Group::new(key.0.clone(), key.1.clone(), settings, checkpoint, last, now);
        inner.groups.insert(key, Entry { generation, core, checkpoint_meta: checkpoint.is_some() });
        drop(inner);
        self.ensure_tasks();
    }

    /// Replaces a group's settings: its consumers are dropped and it restarts from its
    /// checkpoint; its checkpoint and parked streams are kept.
    pub async fn update(
        &self,
        stream: &str,
        group: &str,
        settings: Settings,
        user: &str,
    ) -> Result<(), SubError> {
        let (_cfg, key, checkpoint, last) = self.open_definition(stream, group, &settings, true).await?;
        self.define(user, &key, &settings).await?;
        self.install(key.clone(), settings, checkpoint, last);
        self.first_read(&key).await;
        Ok(())
    }

    /// Deletes a group, with its checkpoint and parked streams.
    pub async fn delete(&self, stream: &str, group: &str, user: &str) -> Result<(), SubError> {
        let _cfg = self.config.lock().await;
        self.check_running()?;
        let key = (stream.to_owned(), group.to_owned());
        if !lock(&self.inner).groups.contains_key(&key) {
            return Err(SubError::NotFound);
        }
        let k = key.clone();
        self.write_config(user, move |d| {
            d.remove(&k);
        })
        .await?;
        lock(&self.inner).groups.remove(&key);
        for name in [checkpoint_stream(stream, group), parked_stream(stream, group)] {
            match self
                .store
                .write_async(crate::store::WriteOp::Delete {
                    stream: name.clone(),
                    expected: ANY,
                    hard: false,
                })
                .await
            {
                Ok(_) | Err(WriteError::StreamDeleted | WriteError::WrongExpectedVersion { .. }) => {}
                Err(e) => tracing::warn!(stream = %name, error = %e, "deleting a group's stream failed"),
            }
        }
        Ok(())
    }

    /// Fills a group's buffer from the stream as far as it wants.
    async fn fill(&self, key: &Key) -> Result<(), SubError> {
        for _ in 0..FILL_READS_MAX {
            let (generation, req, resolve) = {
                let mut inner = lock(&self.inner);
                if !inner.running || !self.leads() {
                    return Err(SubError::NotReady);
                }
                let e = inner.groups.get_mut(key).ok_or(SubError::NotFound)?;
                match e.core.read_request() {
                    Some(r) => (e.generation, r, e.core.settings.resolve_link_tos),
                    None => return Ok(()),
                }
            };
            let store = self.store.clone();
            let stream = key.0.clone();
            let now_us = self.env.clock.wall_micros();
            // Classified (and a failure logged) only once the job is done: a run of the job that
            // met a read needing the device is discarded and run again.
            let page = page_of(
                self.env
                    .read_job(move || store.read_forward(&stream, req.from, req.count, resolve, now_us))
                    .await,
            );
            let failed = matches!(page, PageResult::Failed);
            if self.with_group(key, generation, |e| e.core.on_read(page)).is_none() || failed {
                return Ok(());
            }
        }
        Ok(())
    }

    /// A poll: up to `count` messages for consumer `consumer` (polling as `user`).
    pub async fn poll(
        &self,
        stream: &str,
        group: &str,
        consumer: &str,
        user: &str,
        count: usize,
    ) -> Result<(Vec<Message>, bool), SubError> {
        let key = (stream.to_owned(), group.to_owned());
        self.fill(&key).await?;
        let now = self.now();
        let (taken, fx) = {
            let mut inner = lock(&self.inner);
            if !inner.running || !self.leads() {
                return Err(SubError::NotReady);
            }
            let e = inner.groups.get_mut(&key).ok_or(SubError::NotFound)?;
            let taken = e.core.take(consumer, user, count, now);
            let resolve = e.core.settings.resolve_link_tos;
            (taken.map(|t| (t, resolve)), effects_of(&key, e, now, false))
        };
        self.perform(fx);
        taken.map_err(|e| match e {
            TakeError::TooManyConsumers => SubError::TooManyConsumers,
            TakeError::StreamDeleted => SubError::StreamDeleted,
        })
    }

    /// Acknowledges messages of a group (an unknown group or id is ignored, as v5 does).
    pub fn ack(&self, stream: &str, group: &str, ids: &[MessageId]) {
        self.answer(stream, group, |g, now| g.ack(ids, now));
    }

    /// Answers messages negatively.
    pub fn nack(&self, stream: &str, group: &str, ids: &[MessageId], action: NackAction) {
        self.answer(stream, group, |g, now| g.nack(ids, action, now));
    }

    fn answer(&self, stream: &str, group: &str, f: impl FnOnce(&mut Group, Duration)) {
        let key = (stream.to_owned(), group.to_owned());
        let now = self.now();
        let fx = {
            let mut inner = lock(&self.inner);
            let Some(e) = inner.groups.get_mut(&key) else { return };
            f(&mut e.core, now);
            effects_of(&key, e, now, false)
        };
        self.perform(fx);
    }

    /// Replays a group's parked messages: they are delivered again before new events, and the
    /// parked stream is truncated past them.
    pub async fn replay_parked(&self, stream: &str, group: &str) -> Result<(), SubError> {
        let key = (stream.to_owned(), group.to_owned());
        let (generation, resolve) = {
            let mut inner = lock(&self.inner);
            if !inner.running || !self.leads() {
                return Err(SubError::NotReady);
            }
            let e = inner.groups.get_mut(&key).ok_or(SubError::NotFound)?;
            if !e.core.begin_replay() {
                return Ok(());
            }
            (e.generation, e.core.settings.resolve_link_tos)
        };
        let r = self.replay(&key, generation, resolve).await;
        self.with_group(&key, generation, |e| e.core.end_replay());
        r
    }

    async fn replay(&self, key: &Key, generation: u64, resolve: bool) -> Result<(), SubError> {
        let parked = parked_stream(&key.0, &key.1);
        let mut from = 0;
        let mut last;
        loop {
            let store = self.store.clone();
            let (name, stream) = (parked.clone(), key.0.clone());
            let now_us = self.env.clock.wall_micros();
            let page = self
                .env
                .read_job(move || -> Result<(Vec<Message>, i64, i64, bool), ReadError> {
                    let slice = store.read_forward(&name, from, REPLAY_PAGE, false, now_us)?;
                    let mut msgs = Vec::new();
                    for link in &slice.events {
                        let meta: Value = serde_json::from_slice(&link.event.metadata).unwrap_or(Value::Null);
                        let Some(n) = meta.get("subscriptionEventNumber").and_then(Value::as_i64) else {
                            continue;
                        };
                        match store.read_event(&stream, n, resolve, now_us) {
                            Ok(Some(ev)) => msgs.push(Message::new(ev, true)),
                            // Gone (deleted or scavenged): nothing left to deliver.
                            Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok((msgs, slice.next_event_number, slice.last_event_number, slice.is_end_of_stream))
                })
                .await;
            let (msgs, next, stream_last, end) = match page {
                Ok(p) => p,
                Err(ReadError::NoStream | ReadError::StreamDeleted) => return Ok(()),
                Err(ReadError::Storage(e)) => return Err(e.into()),
                Err(e @ ReadError::InvalidPosition(_)) => return Err(StorageError::Io(e.to_string()).into()),
            };
            last = stream_last;
            if self.with_group(key, generation, |e| e.core.add_replayed(msgs)).is_none() {
                return Ok(());
            }
            if end || next <= from {
                break;
            }
            from = next;
        }
        if last >= 0 {
            let meta = format!(r#"{{"$acl":{ADMIN_ACL},"$tb":{}}}"#, last + 1).into_bytes();
            let ev = self.event("$metadata", meta, Vec::new(), true);
            self.store.append_async(&format!("$${parked}"), ANY, vec![ev]).await?;
        }
        Ok(())
    }

    /// Every group's figures (`stream`: only that stream's; `measure`: starts new rate
    /// measurements). `None` when the service is not running.
    pub fn groups(&self, stream: Option<&str>, measure: bool) -> Result<Vec<GroupView>, SubError> {
        let now = self.now();
        let mut inner = lock(&self.inner);
        if !inner.running || !self.leads() {
            return Err(SubError::NotReady);
        }
        Ok(inner
            .groups
            .iter_mut()
            .filter(|((s, _), _)| stream.is_none_or(|x| x == s))
            .map(|((s, g), e)| GroupView {
                stream: s.clone(),
                group: g.clone(),
                settings: e.core.settings.clone(),
                snapshot: e.core.snapshot(now, measure),
            })
            .collect())
    }

    /// One group's figures.
    pub fn group(&self, stream: &str, group: &str) -> Result<GroupView, SubError> {
        let now = self.now();
        let mut inner = lock(&self.inner);
        if !inner.running || !self.leads() {
            return Err(SubError::NotReady);
        }
        let e = inner.groups.get_mut(&(stream.to_owned(), group.to_owned())).ok_or(SubError::NotFound)?;
        Ok(GroupView {
            stream: stream.to_owned(),
            group: group.to_owned(),
            settings: e.core.settings.clone(),
            snapshot: e.core.snapshot(now, true),
        })
    }

    /// Messages in a group's parked stream (not yet replayed).
    pub async fn parked_count(&self, stream: &str, group: &str) -> Result<i64, SubError> {
        let store = self.store.clone();
        let name = parked_stream(stream, group);
        Ok(self.env.blocking(move || parked_in(&store, &name)).await?)
    }

    /// Messages in a group's parked stream (blocking: may read the index).
    pub fn parked_now(&self, stream: &str, group: &str) -> Result<i64, StorageError> {
        parked_in(&self.store, &parked_stream(stream, group))
    }

    /// Totals for `/stats`.
    pub fn totals(&self) -> Totals {
        let now = self.now();
        let mut inner = lock(&self.inner);
        let mut t = Totals::default();
        for e in inner.groups.values_mut() {
            let s = e.core.snapshot(now, false);
            t.groups += 1;
            t.consumers += s.consumers.len() as u64;
            t.in_flight += s.in_flight as u64;
            t.processed += s.figures.processed;
            t.delivered += s.figures.delivered;
            t.retried += s.figures.retried;
            t.timed_out += s.figures.timed_out;
            t.parked += s.figures.parked;
        }
        t
    }
}

/// What a group wants written now: parked links, and a checkpoint when one is due.
fn effects_of(key: &Key, e: &mut Entry, now: Duration, on_timer: bool) -> Effects {
    Effects {
        key: key.clone(),
        generation: e.generation,
        parks: e.core.parks_due(),
        checkpoint: e.core.checkpoint_due(now, on_timer).map(|n| (n, e.checkpoint_meta)),
    }
}

/// Events in the parked stream `name` that are not yet replayed (not truncated away).
fn parked_in(store: &Store, name: &str) -> Result<i64, StorageError> {
    let st = store.stream_state(name)?;
    if st.last < 0 || st.is_tombstoned() || st.meta.is_soft_deleted() {
        return Ok(0);
    }
    Ok(st.last + 1 - st.meta.truncate_before.unwrap_or(0).clamp(0, st.last + 1))
}

/// The last checkpoint in a checkpoint stream.
fn last_checkpoint(store: &Store, name: &str) -> Result<Option<i64>, StorageError> {
    match store.read_event(name, -1, false, store.env().clock.wall_micros()) {
        Ok(Some(ev)) => Ok(checkpoint_of(&ev.event.data)),
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
            Ok(None)
        }
        Err(ReadError::Storage(e)) => Err(e),
    }
}

/// Every defined group with its checkpoint and its stream's last event number.
#[allow(clippy::type_complexity)]
fn load(store: &Store) -> Result<Vec<(String, String, Settings, Option<i64>, i64)>, StorageError> {
    let doc = match store.read_event(CONFIG_STREAM, -1, false, store.env().clock.wall_micros()) {
        Ok(Some(ev)) => serde_json::from_slice::<Value>(&ev.event.data).unwrap_or(Value::Null),
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
            Value::Null
        }
        Err(ReadError::Storage(e)) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in doc.get("entries").and_then(Value::as_array).into_iter().flatten() {
        let Some((stream, group, settings)) = Settings::from_config_entry(entry) else {
            tracing::warn!(%entry, "a persistent subscription definition is invalid and was left out");
            continue;
        };
        let checkpoint = last_checkpoint(store, &checkpoint_stream(&stream, &group))?;
        let last = store.stream_state(&stream)?.last;
        out.push((stream, group, settings, checkpoint, last));
    }
    Ok(out)
}
