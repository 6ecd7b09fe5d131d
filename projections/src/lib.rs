//! Annal's JavaScript projection engine: one query, in its own QuickJS runtime.
//!
//! [`Engine::compile`] evaluates a query (the v5 projection API: `options`, the selectors
//! `fromAll`, `fromStream(s)`, `fromCategory`/`fromCategories`, `fromStreamsMatching`,
//! `fromStreamCatalog`, then
//! `foreachStream`/`partitionBy`, `when` with `$init`, `$initShared`, `$any`, `$deleted`,
//! `$created` and named handlers, `transformBy`, `filterBy`, `outputState`, `outputTo`, and the
//! lower-level `on_event`, `on_any` and `on_raw`, which add to the handlers `when` registers) and
//! answers its [`Definition`], or a [`JsError`] with the message and the query's line.
//! [`Engine::process`] feeds it one event and answers what to write ([`Outcome`]); the engine
//! itself writes nothing and reads nothing: the stored state of a partition it has not seen is
//! asked of the caller. [`Engine::checkpoint`] answers the states changed since the last one.
//!
//! The sandbox: the runtime has no module loader and no host functions but the projection API,
//! so a query reaches no file, socket or clock. `Date.now()` and `new Date()` answer the current
//! event's timestamp; `Math.random` is a generator reseeded from each event's log position, so a
//! replay draws the same numbers. Each call into the query has a budget of interrupt ticks
//! ([`Limits::call_ticks`]; QuickJS polls the handler every few thousand bytecode branches), so
//! time limits count work, not wall time; the runtime has a memory limit and a stack limit. A
//! query that throws, runs out of its budget or of memory gets a [`JsError`]; the engine is then
//! spent (the caller faults the projection and drops it).
//!
//! Invariants: the same query fed the same events (and the same stored states) answers the same
//! outcomes; nothing in a query can reach the engine's entry points (they live in a closure the
//! prelude returns, not in the global object).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rquickjs::context::intrinsic;
use rquickjs::function::Args;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Object, Persistent, Runtime};
use serde_json::Value as Json;

/// Default memory limit of one projection's runtime.
pub const MEMORY_LIMIT_DEFAULT: usize = 64 << 20;
/// Default budget of one call into the query, in interrupt ticks (QuickJS polls the interrupt
/// handler about every 10,000 bytecode branches or calls; 2,000 ticks is some tens of millions
/// of operations, a few hundred milliseconds at most).
pub const CALL_TICKS_DEFAULT: u64 = 2_000;
/// Native stack a query may use (deep recursion is an error, not a crash).
pub const STACK_LIMIT: usize = 256 << 10;
/// Longest query text.
pub const QUERY_LEN_MAX: usize = 256 << 10;
/// The file name QuickJS gives code evaluated by indirect `eval`: the query's frames.
const QUERY_FILE: &str = "<input>";

const PRELUDE: &str = include_str!("prelude.js");

/// The engine's resource limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes the runtime may allocate.
    pub memory_bytes: usize,
    /// Interrupt ticks one call into the query may take.
    pub call_ticks: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_bytes: MEMORY_LIMIT_DEFAULT, call_ticks: CALL_TICKS_DEFAULT }
    }
}

/// Why a query failed: to compile, or while handling an event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JsError {
    /// A syntax error, an error thrown by the query, or a bad use of the API.
    #[error("{message}{}", line_suffix(*line))]
    Script {
        /// The error's message (with its kind, e.g. `SyntaxError: …`).
        message: String,
        /// The query's line it came from, when known.
        line: Option<u32>,
    },
    /// A call ran out of its tick budget.
    #[error("the projection's handler ran longer than its limit ({ticks} interrupt ticks){}", line_suffix(*line))]
    TimeLimit {
        /// The budget it exceeded.
        ticks: u64,
        /// The query's line it was at, when known.
        line: Option<u32>,
    },
    /// The runtime ran out of memory.
    #[error("the projection ran out of memory (limit {0} bytes)")]
    Memory(usize),
    /// The engine answered something it should not have (a query that tampered with the
    /// built-ins it relies on).
    #[error("the projection engine failed: {0}")]
    Engine(String),
}

fn line_suffix(line: Option<u32>) -> String {
    line.map(|l| format!(" (line {l})")).unwrap_or_default()
}

impl JsError {
    /// The query's line the error came from, when known.
    pub fn line(&self) -> Option<u32> {
        match self {
            JsError::Script { line, .. } | JsError::TimeLimit { line, .. } => *line,
            JsError::Memory(_) | JsError::Engine(_) => None,
        }
    }
}

/// Where a query reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `fromAll()`.
    All,
    /// `fromStream(s)` / `fromStreams(…)`.
    Streams(Vec<String>),
    /// `fromCategory(c)` / `fromCategories(…)`.
    Categories(Vec<String>),
    /// `fromStreamsMatching(fn)`: every stream, filtered by the query.
    Matching,
    /// `fromStreamCatalog(stream[, fn])`: the streams the events of a catalog stream name.
    Catalog {
        /// The catalog stream.
        stream: String,
        /// The query names each catalog event's stream with its function
        /// ([`Engine::catalog_entry`]); without one, the event is a stream reference.
        transform: bool,
    },
}

/// What a query defines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Definition {
    /// Where it reads.
    pub source: Source,
    /// `foreachStream()`.
    pub by_stream: bool,
    /// `partitionBy(…)`.
    pub by_custom_partitions: bool,
    /// The event types it handles (`None`: every type, through `$any`, `on_any`, `on_raw` or no
    /// event handler at all).
    pub events: Option<Vec<String>>,
    /// It registers a handler of any kind (`when`, `on_event`, `on_any`, `on_raw`); without one,
    /// its state is the last event's body.
    pub defines_fold: bool,
    /// Handlers receive `[state, sharedState]`.
    pub bi_state: bool,
    /// It writes results (`outputState`, `transformBy`, `filterBy`, `outputTo`).
    pub produces_results: bool,
    /// It transforms its state into its result.
    pub defines_state_transform: bool,
    /// It has a `$deleted` handler.
    pub handles_deleted: bool,
    /// `$includeLinks`: link events reach it as links, not resolved.
    pub include_links: bool,
    /// `reorderEvents`.
    pub reorder_events: bool,
    /// `processingLag`.
    pub processing_lag: u64,
    /// The result stream (`outputTo` or `resultStreamName`), if the query names one.
    pub result_stream: Option<String>,
    /// The per-partition result stream pattern (`{0}` is the partition), if the query names one.
    pub partition_result_pattern: Option<String>,
}

impl Definition {
    /// Whether states are kept per partition.
    pub fn partitioned(&self) -> bool {
        self.by_stream || self.by_custom_partitions
    }

    /// Whether an event of `event_type` can reach a handler.
    pub fn handles_type(&self, event_type: &str) -> bool {
        self.events.as_ref().is_none_or(|e| e.iter().any(|t| t == event_type))
    }
}

/// An event fed to the query.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    /// Its stream (after link resolution).
    pub stream_id: &'a str,
    /// Its event number.
    pub sequence_number: i64,
    /// Its type.
    pub event_type: &'a str,
    /// Its data.
    pub data: &'a [u8],
    /// Its metadata.
    pub metadata: &'a [u8],
    /// The metadata of the link it was read through (empty when none).
    pub link_metadata: &'a [u8],
    /// Whether its data is JSON.
    pub is_json: bool,
    /// Its timestamp, in milliseconds since the Unix epoch (what `Date` answers).
    pub timestamp_ms: f64,
    /// Its id.
    pub event_id: &'a str,
    /// Its log position (seeds `Math.random`).
    pub position: u64,
    /// A deletion of stream `stream_id` (`Some(true)`: soft), for `$deleted`.
    pub deleted: Option<bool>,
}

/// An event the query asks to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Emit {
    /// The stream.
    pub stream: String,
    /// The event type.
    pub event_type: String,
    /// The data.
    pub data: String,
    /// The metadata the query gave (a JSON object), if any.
    pub metadata: Option<String>,
    /// Whether the data is JSON.
    pub is_json: bool,
}

/// What handling one event gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The event reached a handler.
    pub handled: bool,
    /// Events written by `emit`, `linkTo`, `linkStreamTo`, `copyTo`, in order.
    pub emits: Vec<Emit>,
    /// Results that changed: the partition (`""`: the root) and the new result (`None`: removed).
    pub results: Vec<(String, Option<String>)>,
    /// Partitions seen for the first time (never stored before).
    pub new_partitions: Vec<String>,
    /// What the query logged.
    pub logs: Vec<String>,
}

/// States changed since the last checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The root state (`[state, shared]` for a biState query), JSON.
    pub root: String,
    /// Each changed partition and its state, JSON.
    pub partitions: Vec<(String, String)>,
}

/// One query in its runtime (see the module doc).
pub struct Engine {
    // Field order matters: the persistent values go before the context, the context before the
    // runtime.
    api: Persistent<Object<'static>>,
    context: Context,
    runtime: Runtime,
    ticks: Arc<AtomicU64>,
    limits: Limits,
    def: Definition,
    /// Partitions whose stored state was already asked for.
    known: HashSet<String>,
    spent: bool,
}

// SAFETY: an engine owns its runtime, its context and the one value it keeps (the entry points,
// `api`) alone and lends none of them out. The value is only used inside `Context::with`, which
// holds the runtime's lock (rquickjs's `parallel` feature makes `Runtime` and `Context` `Send`
// on those terms), and it is freed when the engine drops, before the context and the runtime,
// by whichever single thread owns the engine then.
unsafe impl Send for Engine {}

fn err_of<'js>(ctx: &Ctx<'js>, e: CaughtError<'js>, ticks: u64, limits: &Limits) -> JsError {
    if ticks > limits.call_ticks {
        let line = match &e {
            CaughtError::Exception(x) => x.stack().as_deref().and_then(query_line),
            _ => None,
        };
        return JsError::TimeLimit { ticks: limits.call_ticks, line };
    }
    let _ = ctx;
    match e {
        CaughtError::Exception(x) => {
            let message = x.message().unwrap_or_default();
            let stack = x.stack().unwrap_or_default();
            if message.contains("out of memory") {
                return JsError::Memory(limits.memory_bytes);
            }
            let kind: Option<String> =
                x.as_object().get::<_, Object>("constructor").ok().and_then(|c| c.get("name").ok());
            let message = match kind {
                Some(k) if !k.is_empty() && k != "Error" => format!("{k}: {message}"),
                _ => message,
            };
            JsError::Script { line: query_line(&stack), message }
        }
        CaughtError::Value(v) => {
            if v.is_null() || v.is_undefined() {
                // QuickJS throws nothing it can allocate when memory ran out.
                return JsError::Memory(limits.memory_bytes);
            }
            let text = v
                .as_string()
                .and_then(|s| s.to_string().ok())
                .or_else(|| ctx.json_stringify(v.clone()).ok().flatten().and_then(|s| s.to_string().ok()))
                .unwrap_or_else(|| "a value was thrown".into());
            JsError::Script { message: format!("Uncaught {text}"), line: None }
        }
        CaughtError::Error(e) => {
            let s = e.to_string();
            if s.contains("out of memory") || matches!(e, rquickjs::Error::Allocation) {
                JsError::Memory(limits.memory_bytes)
            } else {
                JsError::Engine(s)
            }
        }
    }
}

/// The first line of the query named in a stack trace (`<input>:LINE[:COL]`).
fn query_line(stack: &str) -> Option<u32> {
    let at = stack.find(QUERY_FILE)? + QUERY_FILE.len();
    let rest = stack[at..].strip_prefix(':')?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn text(v: &Json, k: &str) -> Option<String> {
    v.get(k).and_then(Json::as_str).map(str::to_owned)
}

fn list(v: &Json, k: &str) -> Vec<String> {
    v.get(k)
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

fn flag(v: &Json, k: &str) -> bool {
    v.get(k).and_then(Json::as_bool).unwrap_or(false)
}

fn definition_of(text_json: &str) -> Result<Definition, JsError> {
    let v: Json = serde_json::from_str(text_json).map_err(|e| JsError::Engine(format!("definition: {e}")))?;
    let source = match v.get("source").and_then(Json::as_str) {
        Some("all") => Source::All,
        Some("streams") => Source::Streams(list(&v, "streams")),
        Some("categories") => Source::Categories(list(&v, "categories")),
        Some("matching") => Source::Matching,
        Some("catalog") => Source::Catalog {
            stream: text(&v, "catalogStream").unwrap_or_default(),
            transform: flag(&v, "definesCatalogTransform"),
        },
        other => return Err(JsError::Engine(format!("unknown source {other:?}"))),
    };
    let events = v.get("events").and_then(Json::as_array).map(|_| list(&v, "events"));
    Ok(Definition {
        source,
        by_stream: flag(&v, "byStream"),
        by_custom_partitions: flag(&v, "byCustomPartitions"),
        events,
        defines_fold: flag(&v, "definesFold"),
        bi_state: flag(&v, "biState"),
        produces_results: flag(&v, "producesResults"),
        defines_state_transform: flag(&v, "definesStateTransform"),
        handles_deleted: flag(&v, "handlesDeleted"),
        include_links: flag(&v, "includeLinks"),
        reorder_events: flag(&v, "reorderEvents"),
        processing_lag: v.get("processingLag").and_then(Json::as_f64).map_or(0, |x| x.max(0.0) as u64),
        result_stream: text(&v, "resultStreamName"),
        partition_result_pattern: text(&v, "partitionResultStreamNamePattern"),
    })
}

impl Engine {
    /// Evaluates `query` in a new runtime with `limits`; `emit_enabled` says whether `emit`,
    /// `linkTo`, `linkStreamTo` and `copyTo` are allowed (otherwise they throw).
    pub fn compile(query: &str, limits: Limits, emit_enabled: bool) -> Result<Engine, JsError> {
        if query.len() > QUERY_LEN_MAX {
            return Err(JsError::Script {
                message: format!("The query is longer than {QUERY_LEN_MAX} bytes"),
                line: None,
            });
        }
        let runtime = Runtime::new().map_err(|e| JsError::Engine(e.to_string()))?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(STACK_LIMIT);
        let ticks = Arc::new(AtomicU64::new(0));
        let counter = ticks.clone();
        let budget = limits.call_ticks;
        runtime.set_interrupt_handler(Some(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed) + 1 > budget
        })));
        type Sandboxed = (
            intrinsic::Date,
            intrinsic::Eval,
            intrinsic::RegExpCompiler,
            intrinsic::RegExp,
            intrinsic::Json,
            intrinsic::Proxy,
            intrinsic::MapSet,
            intrinsic::TypedArrays,
            intrinsic::Promise,
            intrinsic::BigInt,
        );
        let context = Context::custom::<Sandboxed>(&runtime).map_err(|e| JsError::Engine(e.to_string()))?;
        let (api, def) = context.with(|ctx| -> Result<_, JsError> {
            ticks.store(0, Ordering::Relaxed);
            let api: Object = ctx
                .eval(PRELUDE)
                .catch(&ctx)
                .map_err(|e| JsError::Engine(format!("prelude: {}", err_of(&ctx, e, 0, &limits))))?;
            let compile: Function = api.get("compile").map_err(|e| JsError::Engine(e.to_string()))?;
            ticks.store(0, Ordering::Relaxed);
            let r: Result<String, _> = compile.call((query,)).catch(&ctx);
            let def = r.map_err(|e| err_of(&ctx, e, ticks.load(Ordering::Relaxed), &limits))?;
            let enable: Function = api.get("enableEmit").map_err(|e| JsError::Engine(e.to_string()))?;
            enable.call::<_, ()>((emit_enabled,)).map_err(|e| JsError::Engine(e.to_string()))?;
            Ok((Persistent::save(&ctx, api), definition_of(&def)?))
        })?;
        let mut engine =
            Engine { api, context, runtime, ticks, limits, def, known: HashSet::new(), spent: false };
        engine.restore(None)?;
        Ok(engine)
    }

    /// What the query defines.
    pub fn definition(&self) -> &Definition {
        &self.def
    }

    /// Calls entry point `name` with `args`, under the tick budget.
    fn call<R, F>(&mut self, name: &str, push: F) -> Result<R, JsError>
    where
        R: for<'js> rquickjs::FromJs<'js>,
        F: for<'js> FnOnce(&mut Args<'js>) -> rquickjs::Result<()>,
    {
        if self.spent {
            return Err(JsError::Engine("the engine failed before and cannot be used".into()));
        }
        let limits = self.limits;
        let ticks = self.ticks.clone();
        let api = self.api.clone();
        let r = self.context.with(|ctx| -> Result<R, JsError> {
            let api = api.restore(&ctx).map_err(|e| JsError::Engine(e.to_string()))?;
            let f: Function = api.get(name).map_err(|e| JsError::Engine(e.to_string()))?;
            let mut args = Args::new(ctx.clone(), 11);
            push(&mut args).map_err(|e| JsError::Engine(e.to_string()))?;
            ticks.store(0, Ordering::Relaxed);
            args.apply::<R>(&f)
                .catch(&ctx)
                .map_err(|e| err_of(&ctx, e, ticks.load(Ordering::Relaxed), &limits))
        });
        if r.is_err() {
            self.spent = true;
        }
        r
    }

    /// Sets the root state (`None`: a fresh start, `$init`/`$initShared`), from a checkpoint's
    /// root state as [`Snapshot::root`] gave it.
    pub fn restore(&mut self, root: Option<&str>) -> Result<(), JsError> {
        let root = root.map(str::to_owned);
        self.call::<(), _>("restore", move |a| a.push_arg(root))
    }

    /// Handles one event. `load` answers a partition's stored state (JSON) the first time the
    /// engine meets the partition, `None` when it has none.
    pub fn process(
        &mut self,
        ev: &Event<'_>,
        load: &mut dyn FnMut(&str) -> Option<String>,
    ) -> Result<Outcome, JsError> {
        let deleted = match ev.deleted {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        let fields = EventArgs::of(ev);
        let mut code: i32 = self.call("process", move |a| {
            fields.push(a)?;
            a.push_arg(deleted)
        })?;
        let mut out = Outcome::default();
        if code == -1 {
            let partition: String = self.pending_partition()?;
            let stored = if self.known.contains(&partition) { None } else { load(&partition) };
            self.known.insert(partition);
            code = self.call("resume", move |a| a.push_arg(stored))?;
        }
        out.handled = code > 0;
        if code == 2 {
            self.take_effects(&mut out)?;
        }
        Ok(out)
    }

    /// The stream catalog event `ev` names, by the function a `fromStreamCatalog` query gave
    /// (`None`: the function named none). Only for a query whose source is
    /// [`Source::Catalog`] with `transform`.
    pub fn catalog_entry(&mut self, ev: &Event<'_>) -> Result<Option<String>, JsError> {
        if !matches!(self.def.source, Source::Catalog { transform: true, .. }) {
            return Err(JsError::Engine("the query has no catalog function".into()));
        }
        let fields = EventArgs::of(ev);
        self.call("catalogEntry", move |a| fields.push(a))
    }

    fn pending_partition(&mut self) -> Result<String, JsError> {
        let api = self.api.clone();
        self.context.with(|ctx| {
            let api = api.restore(&ctx).map_err(|e| JsError::Engine(e.to_string()))?;
            let f: Function = api.get("pendingPartition").map_err(|e| JsError::Engine(e.to_string()))?;
            f.call::<_, String>(()).map_err(|e| JsError::Engine(e.to_string()))
        })
    }

    fn take_effects(&mut self, out: &mut Outcome) -> Result<(), JsError> {
        let json: String = self.call("effects", |_| Ok(()))?;
        let bad = |what: &str| JsError::Engine(format!("malformed effect: {what}"));
        let Ok(Json::Array(items)) = serde_json::from_str::<Json>(&json) else {
            return Err(bad("not an array"));
        };
        for it in items {
            match it.get("k").and_then(Json::as_str) {
                Some("e") => out.emits.push(Emit {
                    stream: text(&it, "s").ok_or_else(|| bad("stream"))?,
                    event_type: text(&it, "t").ok_or_else(|| bad("type"))?,
                    data: it.get("d").and_then(Json::as_str).unwrap_or("").to_owned(),
                    metadata: text(&it, "m"),
                    is_json: flag(&it, "j"),
                }),
                Some("r") => {
                    out.results.push((text(&it, "p").ok_or_else(|| bad("partition"))?, text(&it, "d")))
                }
                Some("p") => out.new_partitions.push(text(&it, "p").ok_or_else(|| bad("partition"))?),
                Some("l") => out.logs.push(text(&it, "d").unwrap_or_default()),
                _ => return Err(bad("kind")),
            }
        }
        Ok(())
    }

    /// The states changed since the last checkpoint.
    pub fn checkpoint(&mut self) -> Result<Snapshot, JsError> {
        let json: String = self.call("checkpoint", |_| Ok(()))?;
        let v: Json = serde_json::from_str(&json).map_err(|e| JsError::Engine(format!("checkpoint: {e}")))?;
        let root = text(&v, "root").ok_or_else(|| JsError::Engine("checkpoint: no root".into()))?;
        let partitions = v
            .get("parts")
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| Some((p.get(0)?.as_str()?.to_owned(), p.get(1)?.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Snapshot { root, partitions })
    }

    /// A partition's state (`""`: the root), if the engine holds it.
    pub fn state(&mut self, partition: &str) -> Result<Option<String>, JsError> {
        let p = partition.to_owned();
        self.call("state", move |a| a.push_arg(p))
    }

    /// A partition's result (its state through the query's transforms), if the engine holds
    /// the partition and the result is not filtered out.
    pub fn result(&mut self, partition: &str) -> Result<Option<String>, JsError> {
        let p = partition.to_owned();
        self.call("result", move |a| a.push_arg(p))
    }

    /// Partitions held (the root included).
    pub fn partitions(&mut self) -> Result<u64, JsError> {
        let n: f64 = self.call("partitions", |_| Ok(()))?;
        Ok(n as u64)
    }

    /// Bytes the runtime has allocated.
    pub fn memory_used(&self) -> u64 {
        self.runtime.memory_usage().memory_used_size.max(0) as u64
    }

    /// Whether an earlier call failed (the engine cannot be used any more).
    pub fn is_spent(&self) -> bool {
        self.spent
    }
}

/// An event's fields in the order the prelude's `process` and `catalogEntry` take them.
struct EventArgs {
    stream: String,
    seq: f64,
    ty: String,
    data: String,
    meta: String,
    link_meta: String,
    is_json: bool,
    stamp: f64,
    id: String,
    pos: f64,
}

impl EventArgs {
    fn of(ev: &Event<'_>) -> EventArgs {
        EventArgs {
            stream: ev.stream_id.to_owned(),
            seq: ev.sequence_number as f64,
            ty: ev.event_type.to_owned(),
            data: String::from_utf8_lossy(ev.data).into_owned(),
            meta: String::from_utf8_lossy(ev.metadata).into_owned(),
            link_meta: String::from_utf8_lossy(ev.link_metadata).into_owned(),
            is_json: ev.is_json,
            stamp: ev.timestamp_ms,
            id: ev.event_id.to_owned(),
            pos: ev.position as f64,
        }
    }

    fn push(self, a: &mut Args<'_>) -> rquickjs::Result<()> {
        a.push_arg(self.stream)?;
        a.push_arg(self.seq)?;
        a.push_arg(self.ty)?;
        a.push_arg(self.data)?;
        a.push_arg(self.meta)?;
        a.push_arg(self.link_meta)?;
        a.push_arg(self.is_json)?;
        a.push_arg(self.stamp)?;
        a.push_arg(self.id)?;
        a.push_arg(self.pos)
    }
}

#[cfg(test)]
mod tests;
