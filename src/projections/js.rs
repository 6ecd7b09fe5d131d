//! A JavaScript projection's side of the service: which committed records reach its query, the
//! events it sees (links resolved), and what its outcomes become (events to emit, results,
//! the partition catalog, checkpoints of its states). The query runs in the `annal-js` engine,
//! which decides and writes nothing; this module turns records into its events and its effects
//! into [`Emit`]s the service writes exactly once ([`super::emitted`]).
//!
//! Where state lives:
//! - the root state (`[state, shared]` with biState) in the checkpoint event of
//!   `$projections-{name}-checkpoint`, data `[root]`;
//! - each partition's state in `$projections-{name}-{partition}-checkpoint` (`$Checkpoint`
//!   events, `$maxCount` 2), written before the root checkpoint at every checkpoint for the
//!   partitions changed since the one before. Loading a partition takes its newest checkpoint of
//!   the current epoch at or before the root checkpoint's position: one written for a checkpoint
//!   whose root event never made it is ignored, and the partition's changes after the root
//!   checkpoint are processed again. Such a partition's next checkpoint writes the loaded one
//!   again before the new one (one append), so the two events `$maxCount` keeps always hold one
//!   at or before the root, however many checkpoints in a row lose their root event;
//! - results in `$projections-{name}-result` (or the query's result stream) and
//!   `$projections-{name}-{partition}-result`, `Result` events (`ResultRemoved` when a filter
//!   drops the result), emitted like any other output;
//! - the catalog `$projections-{name}-partitions`, a `$partition` event per new partition;
//! - with `trackEmittedStreams`, `$projections-{name}-emittedstreams`: a `$StreamTracked` event
//!   (data: the stream) before the first event emitted to each stream.
//!
//! Which records a query sees: `fromAll` every event of a stream not starting with `$`;
//! `fromStream(s)` the events of the streams named; `fromCategory` those of the streams whose
//! category (the text before the first `-`) is named. Links (`$>`) are resolved to their target
//! unless the query sets `$includeLinks`; with it they reach the query as they are (under
//! `fromAll` they are passed over otherwise). A stream's deletion reaches a `$deleted` handler.
//! `fromStreamCatalog` (one-time and transient projections only, with `foreachStream`) sees the
//! events of the streams its catalog stream names ([`read_catalog`], read when the run starts,
//! as far as the log reached then), taken from the one log like every other source: in log
//! order, so each stream's events in order, the streams interleaved as they were written.
//!
//! Invariant: the engine's states always correspond to everything processed up to the batch the
//! service last handed it; the service takes a snapshot only between batches.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use annal_js::{Engine, JsError, Limits, Outcome, Source};
use serde_json::Value;

use super::category::{CategoryRule, DEFAULT_RULE};
use super::checkpoint::{ProjectionVersion, Tag};
use super::definition::{Definition, Mode};
use super::system::{deleted_stream, Emit, LINK_TYPE};
use crate::log::record::{EventRecord, Record};
use crate::store::{ReadError, Store};

/// The event type of a partition's checkpoint.
pub const PARTITION_CHECKPOINT_TYPE: &str = "$Checkpoint";
/// The event type of a result.
pub const RESULT_TYPE: &str = "Result";
/// The event type of a result a filter dropped.
pub const RESULT_REMOVED_TYPE: &str = "ResultRemoved";
/// The event type of a catalog entry.
pub const PARTITION_TYPE: &str = "$partition";
/// Partition names longer than this fault the projection (they name streams).
pub const PARTITION_NAME_MAX: usize = 1024;
/// The event type of an emitted stream's entry in the tracking stream.
pub const STREAM_TRACKED_TYPE: &str = "$StreamTracked";
/// Tracked stream names a projection remembers at most.
pub const TRACKED_STREAMS_MAX: usize = 65_536;
/// Streams a `fromStreamCatalog` catalog may name (more faults the projection).
pub const CATALOG_STREAMS_MAX: usize = 100_000;
/// Catalog events read at once.
const CATALOG_PAGE: usize = 1024;
/// The reason a continuous projection cannot read a catalog.
pub const CATALOG_NEEDS_QUERY_MODE: &str =
    "fromStreamCatalog is supported only by one-time and transient projections";
/// Metadata keys of the tag, which a query's own metadata cannot set.
const TAG_KEYS: [&str; 4] = ["$v", "$c", "$p", "$causedBy"];

/// `$projections-{name}-{partition}-checkpoint`.
pub fn partition_checkpoint_stream(name: &str, partition: &str) -> String {
    format!("$projections-{name}-{partition}-checkpoint")
}

/// `$projections-{name}-partitions`.
pub fn catalog_stream(name: &str) -> String {
    format!("$projections-{name}-partitions")
}

/// `$projections-{name}-emittedstreams`, the streams a projection emitted to (with
/// `trackEmittedStreams`).
pub fn tracking_stream(name: &str) -> String {
    format!("$projections-{name}-emittedstreams")
}

/// The default result stream.
pub fn default_result_stream(name: &str) -> String {
    format!("$projections-{name}-result")
}

/// The result stream of projection `name` (its query defining `def`) for `partition` (`""`:
/// the root): the query's own names, or `$projections-{name}[-{partition}]-result`.
pub fn result_stream(name: &str, def: &annal_js::Definition, partition: &str) -> String {
    if partition.is_empty() {
        return def.result_stream.clone().unwrap_or_else(|| default_result_stream(name));
    }
    match &def.partition_result_pattern {
        Some(p) => p.replace("{0}", partition),
        None => format!("$projections-{name}-{partition}-result"),
    }
}

/// Compiles a query for a check (create, update): the message and line of what is wrong.
pub fn check(query: &str) -> Result<annal_js::Definition, String> {
    Engine::compile(query, Limits::default(), true).map(|e| e.definition().clone()).map_err(describe)
}

/// An engine error as a status reason.
pub fn describe(e: JsError) -> String {
    e.to_string()
}

/// Why handling a batch failed.
#[derive(Debug)]
pub enum HandleError {
    /// The query failed (or gave what cannot be written): the projection faults.
    Query(String),
    /// A read of the store failed: the projection starts again from its checkpoint.
    Storage(String),
}

/// What handling a batch gave.
#[derive(Debug, Default)]
pub struct Handled {
    /// Events to write.
    pub emits: Vec<Emit>,
    /// Events that reached a handler.
    pub handled: u64,
    /// The position of the last of them.
    pub last_handled: Option<u64>,
}

/// A changed partition's state, for its checkpoint.
#[derive(Debug)]
pub struct PartitionState {
    /// The partition.
    pub partition: String,
    /// Its state, JSON.
    pub state: String,
    /// Its checkpoint stream is new (it needs `$maxCount`).
    pub fresh: bool,
    /// The stored checkpoint this run loaded the partition from, when a newer one (of a
    /// checkpoint whose root event was never written) follows it: written again, with its own
    /// tag, just before the new one, so that the stream's last two events still hold a
    /// checkpoint at or before the root should this checkpoint's root event fail too.
    pub keep: Option<StoredPartition>,
}

/// A partition checkpoint as stored: the state and the tag (the event's metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredPartition {
    /// The state, JSON.
    pub state: String,
    /// The tag, as the event's metadata.
    pub tag: Vec<u8>,
}

/// What a checkpoint writes.
#[derive(Debug)]
pub struct Snapshot {
    /// The root checkpoint's data (`[root state]`).
    pub root: String,
    /// The partitions changed since the last checkpoint.
    pub partitions: Vec<PartitionState>,
}

/// Which records reach a query, and as what (see the module doc): its source's streams, its
/// event types, and links resolved unless it includes them. The projections' tasks and
/// `read-events` select alike.
#[derive(Clone, Debug)]
pub struct Selector {
    source: Source,
    events: Option<Vec<String>>,
    include_links: bool,
    /// The query has a `$deleted` handler (deletions are the caller's to recognise).
    pub handles_deleted: bool,
    category: CategoryRule,
    /// The streams a catalog source names (none until [`Selector::with_catalog`]).
    catalog: Option<Arc<HashSet<String>>>,
}

/// What a record is to a query.
#[derive(Debug)]
pub enum Selected {
    /// Nothing: not of its source or type, or a link whose target is gone.
    No,
    /// The record's own event.
    Event,
    /// The target of the link the record is.
    Target(EventRecord),
}

impl Selector {
    /// The selection of a query that defines `def`, categories by `category`.
    pub fn of(def: &annal_js::Definition, category: CategoryRule) -> Selector {
        Selector {
            source: def.source.clone(),
            events: def.events.clone(),
            include_links: def.include_links,
            handles_deleted: def.handles_deleted,
            category,
            catalog: None,
        }
    }

    /// The selection with the streams a catalog source names.
    pub fn with_catalog(mut self, catalog: Option<Arc<HashSet<String>>>) -> Selector {
        self.catalog = catalog;
        self
    }

    /// The selection of `source` with the default category rule.
    pub fn new(source: Source, events: Option<Vec<String>>, include_links: bool) -> Selector {
        Selector {
            source,
            events,
            include_links,
            handles_deleted: false,
            category: CategoryRule::default(),
            catalog: None,
        }
    }

    /// Whether the source reads `stream`'s events.
    pub fn selects(&self, stream: &str) -> bool {
        match &self.source {
            Source::All | Source::Matching => !stream.starts_with('$'),
            Source::Streams(s) => s.iter().any(|x| x == stream),
            Source::Categories(c) => self.category.category(stream).is_some_and(|k| c.iter().any(|x| x == k)),
            Source::Catalog { .. } => self.catalog.as_ref().is_some_and(|c| c.contains(stream)),
        }
    }

    fn handles_type(&self, event_type: &str) -> bool {
        self.events.as_ref().is_none_or(|e| e.iter().any(|t| t == event_type))
    }

    /// What `e` is to the query (links' targets are read from `store` at `now_us`).
    pub fn select(&self, e: &EventRecord, store: &Store, now_us: i64) -> Result<Selected, String> {
        if !self.selects(&e.stream) {
            return Ok(Selected::No);
        }
        if e.event_type == LINK_TYPE && !self.include_links {
            if matches!(self.source, Source::All | Source::Matching) {
                return Ok(Selected::No);
            }
            return Ok(match resolve(store, e, now_us)? {
                Some(target) if self.handles_type(&target.event_type) => Selected::Target(target),
                _ => Selected::No,
            });
        }
        Ok(if self.handles_type(&e.event_type) { Selected::Event } else { Selected::No })
    }
}

/// One running JavaScript projection (see the module doc).
pub struct JsRunner {
    engine: Engine,
    name: String,
    version: ProjectionVersion,
    mode: Mode,
    category: CategoryRule,
    /// Where the root checkpoint the run started from lies (partitions stored past it are
    /// ignored); `None`: a fresh start, nothing is stored.
    restored_at: Option<u64>,
    /// Partitions first met in this run and not stored yet (their checkpoint streams get
    /// `$maxCount` with their first checkpoint).
    fresh: HashSet<String>,
    /// Partitions loaded from a checkpoint that a newer one follows, with that checkpoint
    /// ([`PartitionState::keep`]), until their next checkpoint.
    keep: HashMap<String, StoredPartition>,
    /// With `trackEmittedStreams`: the streams already in the tracking stream (at most
    /// [`TRACKED_STREAMS_MAX`]; past that it is cleared, and a stream may be tracked twice).
    tracked: Option<HashSet<String>>,
    /// A `fromStreamCatalog` query's streams ([`JsRunner::set_catalog`]).
    catalog: Option<Arc<HashSet<String>>>,
}

impl JsRunner {
    /// Compiles `def`'s query.
    pub fn new(def: &Definition) -> Result<JsRunner, String> {
        let emit = def.config.emit_enabled && def.mode != Mode::Transient;
        let engine = Engine::compile(&def.query, Limits::default(), emit).map_err(describe)?;
        if matches!(engine.definition().source, Source::Catalog { .. }) && !def.mode.completes() {
            return Err(CATALOG_NEEDS_QUERY_MODE.into());
        }
        let category = CategoryRule::parse(DEFAULT_RULE)?;
        Ok(JsRunner {
            engine,
            name: def.name.clone(),
            version: def.projection_version(),
            mode: def.mode,
            category,
            restored_at: None,
            fresh: HashSet::new(),
            keep: HashMap::new(),
            tracked: (def.config.track_emitted_streams && def.config.emit_enabled).then(HashSet::new),
            catalog: None,
        })
    }

    /// The catalog stream of a `fromStreamCatalog` query.
    pub fn catalog_stream(&self) -> Option<&str> {
        match &self.definition().source {
            Source::Catalog { stream, .. } => Some(stream),
            _ => None,
        }
    }

    /// Sets the streams a `fromStreamCatalog` query reads ([`read_catalog`]).
    pub fn set_catalog(&mut self, streams: Vec<String>) {
        self.catalog = Some(Arc::new(streams.into_iter().collect()));
    }

    /// What the query defines.
    pub fn definition(&self) -> &annal_js::Definition {
        self.engine.definition()
    }

    /// Starts from a root checkpoint at `position` whose data is `data` (`None`: from the start).
    pub fn restore(&mut self, from: Option<(u64, &[u8])>) -> Result<(), String> {
        let root = match from {
            None => None,
            Some((_, data)) => match serde_json::from_slice::<Value>(data) {
                Ok(Value::Array(mut a)) if !a.is_empty() => match a.swap_remove(0) {
                    Value::Null => None,
                    v => Some(v.to_string()),
                },
                _ => return Err("the checkpoint's data is not a state".into()),
            },
        };
        self.restored_at = from.map(|(p, _)| p);
        self.keep.clear();
        self.engine.restore(root.as_deref()).map_err(describe)
    }

    /// With `trackEmittedStreams`, the streams already tracked (read from the tracking stream).
    pub fn set_tracked(&mut self, streams: Vec<String>) {
        if let Some(t) = self.tracked.as_mut() {
            t.extend(streams.into_iter().take(TRACKED_STREAMS_MAX));
        }
    }

    /// Whether it tracks the streams it emits to.
    pub fn tracks(&self) -> bool {
        self.tracked.is_some()
    }

    /// Hands the events of `records` to the query; `now_us` is the clock for reads of link
    /// targets and stored partitions.
    pub fn handle(&mut self, records: &[Record], store: &Store, now_us: i64) -> Result<Handled, HandleError> {
        let mut out = Handled::default();
        let selector = Selector::of(self.definition(), self.category).with_catalog(self.catalog.clone());
        for r in records {
            let Record::Event(e) = r else { continue };
            if selector.handles_deleted {
                if let Some(stream) = deleted_stream(e) {
                    if selector.selects(stream) {
                        let soft = !e.is_tombstone();
                        let stream = stream.to_owned();
                        self.one(e, &stream, None, Some(soft), store, now_us, &mut out)?;
                    }
                    continue;
                }
            }
            match selector.select(e, store, now_us).map_err(HandleError::Storage)? {
                Selected::No => {}
                Selected::Event => self.one(e, &e.stream, None, None, store, now_us, &mut out)?,
                Selected::Target(target) => {
                    self.one(&target, &target.stream.clone(), Some(e), None, store, now_us, &mut out)?
                }
            }
        }
        Ok(out)
    }

    /// One event (`link`: the link it was read through; `deleted`: a deletion of `stream`).
    #[allow(clippy::too_many_arguments)]
    fn one(
        &mut self,
        e: &EventRecord,
        stream: &str,
        link: Option<&EventRecord>,
        deleted: Option<bool>,
        store: &Store,
        now_us: i64,
        out: &mut Handled,
    ) -> Result<(), HandleError> {
        let source = link.unwrap_or(e);
        let id = uuid::Uuid::from_bytes(e.event_id).hyphenated().to_string();
        let ev = annal_js::Event {
            stream_id: stream,
            sequence_number: e.event_number,
            event_type: &e.event_type,
            data: &e.data,
            metadata: &e.metadata,
            link_metadata: link.map_or(&[][..], |l| &l.metadata[..]),
            is_json: e.is_json(),
            timestamp_ms: (e.timestamp_us / 1000) as f64,
            event_id: &id,
            position: source.log_position,
            deleted,
        };
        let mut failed: Option<String> = None;
        let mut kept: Vec<(String, StoredPartition)> = Vec::new();
        let (name, version, restored_at) = (self.name.clone(), self.version, self.restored_at);
        let mut load = |p: &str| -> Option<String> {
            let at = restored_at?;
            match read_partition_checkpoint(store, &name, p, &version, at, now_us) {
                Ok(Some((stored, newest))) => {
                    let state = stored.state.clone();
                    if !newest {
                        kept.push((p.to_owned(), stored));
                    }
                    Some(state)
                }
                Ok(None) => None,
                Err(e) => {
                    failed = Some(e);
                    None
                }
            }
        };
        let outcome = self.engine.process(&ev, &mut load);
        self.keep.extend(kept);
        let outcome = outcome.map_err(|e| HandleError::Query(describe(e)))?;
        if let Some(e) = failed {
            return Err(HandleError::Storage(e));
        }
        if outcome.handled {
            out.handled += 1;
            out.last_handled = Some(source.log_position);
        }
        self.effects(outcome, source, out).map_err(HandleError::Query)
    }

    fn effects(&mut self, o: Outcome, source: &EventRecord, out: &mut Handled) -> Result<(), String> {
        for line in &o.logs {
            tracing::info!(projection = %self.name, "{line}");
        }
        let emit = |stream: String, event_type: String, data: String, extra: String, is_json: bool| Emit {
            stream,
            event_type: Cow::Owned(event_type),
            is_json,
            data,
            extra,
            position: source.log_position,
            caused_by: source.event_id,
        };
        for e in o.emits {
            if let Some(tracked) = self.tracked.as_mut() {
                if !tracked.contains(&e.stream) {
                    if tracked.len() >= TRACKED_STREAMS_MAX {
                        tracked.clear();
                    }
                    tracked.insert(e.stream.clone());
                    let (stream, data) = (tracking_stream(&self.name), e.stream.clone());
                    out.emits.push(emit(stream, STREAM_TRACKED_TYPE.into(), data, String::new(), false));
                }
            }
            let extra = metadata_members(e.metadata.as_deref());
            out.emits.push(emit(e.stream, e.event_type, e.data, extra, e.is_json));
        }
        if self.mode == Mode::Transient {
            return Ok(());
        }
        for p in o.new_partitions {
            if p.len() > PARTITION_NAME_MAX {
                return Err(format!("a partition name is longer than {PARTITION_NAME_MAX} bytes"));
            }
            self.fresh.insert(p.clone());
            out.emits.push(emit(catalog_stream(&self.name), PARTITION_TYPE.into(), p, String::new(), false));
        }
        for (p, result) in o.results {
            let stream = self.result_stream(&p);
            let (ty, data, is_json) = match result {
                Some(r) => (RESULT_TYPE, r, true),
                None => (RESULT_REMOVED_TYPE, String::new(), false),
            };
            out.emits.push(emit(stream, ty.into(), data, String::new(), is_json));
        }
        Ok(())
    }

    /// The result stream of a partition (`""`: the root).
    pub fn result_stream(&self, partition: &str) -> String {
        result_stream(&self.name, self.definition(), partition)
    }

    /// The states changed since the last snapshot.
    pub fn snapshot(&mut self) -> Result<Snapshot, String> {
        let s = self.engine.checkpoint().map_err(describe)?;
        let partitions = s
            .partitions
            .into_iter()
            .map(|(partition, state)| {
                let fresh = self.fresh.remove(&partition);
                let keep = self
                    .keep
                    .remove(&partition)
                    .filter(|_| !crate::buggify::bug(crate::buggify::Bug::PartitionCheckpointNotKept));
                PartitionState { partition, state, fresh, keep }
            })
            .collect();
        Ok(Snapshot { root: format!("[{}]", s.root), partitions })
    }

    /// A partition's state (`""`: the root), if the engine holds it.
    pub fn state(&mut self, partition: &str) -> Result<Option<String>, String> {
        self.engine.state(partition).map_err(describe)
    }

    /// A partition's result, if the engine holds it.
    pub fn result(&mut self, partition: &str) -> Result<Option<String>, String> {
        self.engine.result(partition).map_err(describe)
    }

    /// Partitions held, the root included (0 once the engine failed).
    pub fn partitions(&mut self) -> u64 {
        if self.engine.is_spent() {
            return 0;
        }
        self.engine.partitions().unwrap_or(0)
    }

    /// Bytes the engine holds.
    pub fn memory_used(&self) -> u64 {
        self.engine.memory_used()
    }
}

/// The stream a catalog event refers to when the query gives no function, as v5 reads them:
/// a link (`$>`, data `{n}@{stream}`) names its target's stream; a stream reference (`$@`) and
/// the old stream-created events (`$stream-created`, `StreamCreated`) name their data. Any other
/// type is an error (the projection faults).
pub fn stream_reference(event_type: &str, data: &[u8]) -> Result<String, String> {
    let text = String::from_utf8_lossy(data);
    match event_type {
        LINK_TYPE => match text.split_once('@') {
            Some((_, stream)) => Ok(stream.to_owned()),
            None => Err(format!("The catalog link {text:?} names no stream")),
        },
        "$@" | "$stream-created" | "StreamCreated" => Ok(text.into_owned()),
        other => Err(format!("The catalog holds an event of type {other:?}, which names no stream: use $@ or $> events, or give fromStreamCatalog a function")),
    }
}

/// The streams `runner`'s catalog names, in the catalog's order without repeats: its events
/// written before log position `end` (the end of the log when the run started), each named by
/// the query's function or else read as a stream reference ([`stream_reference`]). An absent or
/// deleted catalog names none.
pub fn read_catalog(
    runner: &mut JsRunner,
    store: &Store,
    end: u64,
    now_us: i64,
) -> Result<Vec<String>, HandleError> {
    let Some(catalog) = runner.catalog_stream().map(str::to_owned) else { return Ok(Vec::new()) };
    let transform = matches!(runner.definition().source, Source::Catalog { transform: true, .. });
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    let mut from = 0;
    loop {
        let slice = match store.read_forward(&catalog, from, CATALOG_PAGE, false, now_us) {
            Ok(s) => s,
            Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
                return Ok(out)
            }
            Err(ReadError::Storage(e)) => {
                return Err(HandleError::Storage(format!("cannot read {catalog}: {e}")))
            }
        };
        for r in &slice.events {
            let e = &r.event;
            if e.position >= end {
                return Ok(out);
            }
            let named = if transform {
                let id = uuid::Uuid::from_bytes(e.id).hyphenated().to_string();
                let ev = annal_js::Event {
                    stream_id: &e.stream,
                    sequence_number: e.event_number,
                    event_type: &e.event_type,
                    data: &e.data,
                    metadata: &e.metadata,
                    link_metadata: &[],
                    is_json: e.is_json,
                    timestamp_ms: (e.timestamp_us / 1000) as f64,
                    event_id: &id,
                    position: e.position,
                    deleted: None,
                };
                runner.engine.catalog_entry(&ev).map_err(|x| HandleError::Query(describe(x)))?
            } else {
                Some(stream_reference(&e.event_type, &e.data).map_err(HandleError::Query)?)
            };
            let Some(stream) = named.filter(|s| !s.is_empty()) else { continue };
            if seen.insert(stream.clone()) {
                if out.len() >= CATALOG_STREAMS_MAX {
                    return Err(HandleError::Query(format!(
                        "The catalog {catalog} names more than {CATALOG_STREAMS_MAX} streams"
                    )));
                }
                out.push(stream);
            }
        }
        if slice.is_end_of_stream || slice.events.is_empty() {
            return Ok(out);
        }
        from = slice.next_event_number;
    }
}

/// A query's metadata object as members after the tag (the tag's own keys dropped).
fn metadata_members(meta: Option<&str>) -> String {
    let Some(Ok(Value::Object(m))) = meta.map(serde_json::from_str::<Value>) else { return String::new() };
    let mut out = String::new();
    for (k, v) in m {
        if TAG_KEYS.contains(&k.as_str()) {
            continue;
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(&Value::from(k).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out
}

/// The target of link `e` as a record (`None`: gone or not a link).
fn resolve(store: &Store, e: &EventRecord, now_us: i64) -> Result<Option<EventRecord>, String> {
    let text = String::from_utf8_lossy(&e.data);
    let Some((n, stream)) = text.split_once('@') else { return Ok(None) };
    let Ok(n) = n.trim().parse::<i64>() else { return Ok(None) };
    match store.read_event(stream, n, false, now_us) {
        Ok(Some(r)) => {
            let t = r.event;
            let mut flags = 0;
            if t.is_json {
                flags |= crate::log::record::flags::IS_JSON;
            }
            Ok(Some(EventRecord {
                log_position: t.position,
                flags,
                transaction_position: t.position,
                transaction_offset: 0,
                event_number: t.event_number,
                event_id: t.id,
                timestamp_us: t.timestamp_us,
                stream: t.stream,
                event_type: t.event_type,
                data: t.data,
                metadata: t.metadata,
            }))
        }
        Ok(None) | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
            Ok(None)
        }
        Err(ReadError::Storage(e)) => Err(format!("cannot read a link's target: {e}")),
    }
}

/// The checkpoint of `partition` stored for a restart from a root checkpoint at `at` (its newest
/// checkpoint of `version` at or before `at`; `None`: none), with whether it is the newest event
/// of its stream (`false`: a checkpoint past `at` follows it, which a crash or a failed write left
/// without its root event).
pub fn read_partition_checkpoint(
    store: &Store,
    name: &str,
    partition: &str,
    version: &ProjectionVersion,
    at: u64,
    now_us: i64,
) -> Result<Option<(StoredPartition, bool)>, String> {
    let stream = partition_checkpoint_stream(name, partition);
    let slice = match store.read_backward(&stream, -1, 2, false, now_us) {
        Ok(s) => s,
        Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
            return Ok(None)
        }
        Err(ReadError::Storage(e)) => return Err(format!("cannot read {stream}: {e}")),
    };
    for (i, e) in slice.events.iter().enumerate() {
        let e = &e.event;
        let Some(tag) = Tag::from_metadata(&e.metadata) else { continue };
        if tag.version.id == version.id && tag.version.epoch == version.epoch && tag.position <= at {
            let stored = StoredPartition {
                state: String::from_utf8_lossy(&e.data).into_owned(),
                tag: e.metadata.to_vec(),
            };
            return Ok(Some((stored, i == 0)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_events_name_streams_as_v5_reads_them() {
        assert_eq!(stream_reference("$@", b"order-1").unwrap(), "order-1");
        assert_eq!(stream_reference("$>", b"12@order-2").unwrap(), "order-2");
        assert_eq!(stream_reference("$>", b"0@a@b").unwrap(), "a@b", "the first @ splits");
        assert_eq!(stream_reference("$stream-created", b"s").unwrap(), "s");
        assert_eq!(stream_reference("StreamCreated", b"s").unwrap(), "s");
        assert!(stream_reference("$>", b"no-at").unwrap_err().contains("names no stream"));
        assert!(stream_reference("Listed", b"{}").unwrap_err().contains("\"Listed\""));
    }

    #[test]
    fn a_catalog_selects_only_the_streams_it_names() {
        let q = "fromStreamCatalog('c').foreachStream().when({ $any: function (s, e) {} })";
        let def = check(q).unwrap();
        let sel = Selector::of(&def, CategoryRule::default());
        assert!(!sel.selects("a"), "nothing before the catalog is read");
        let names: HashSet<String> = ["a".to_string(), "$b".to_string()].into();
        let sel = sel.with_catalog(Some(Arc::new(names)));
        assert!(sel.selects("a") && sel.selects("$b"));
        assert!(!sel.selects("c") && !sel.selects("ab"));
    }
}
