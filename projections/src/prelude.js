// The projection API a query sees, and the entry points the Rust engine calls (the object this
// script evaluates to, out of the query's reach). Evaluated once per runtime, before the query,
// which `compile` evaluates
// through an indirect eval, so its frames are named `<input>` and their lines are the query's.
(function (g) {
  "use strict";

  const api = {};
  const stringify = JSON.stringify;
  const jsonParse = JSON.parse;

  // ---- The sandbox: no clock, no unseeded randomness, no garbage-collector observers. ----
  const OrigDate = g.Date;
  let now = 0;
  function SandboxDate(...args) {
    if (new.target === undefined) {
      return new OrigDate(now).toString();
    }
    return args.length === 0 ? new OrigDate(now) : new OrigDate(...args);
  }
  SandboxDate.prototype = OrigDate.prototype;
  SandboxDate.now = function () { return now; };
  SandboxDate.parse = OrigDate.parse;
  SandboxDate.UTC = OrigDate.UTC;
  Object.defineProperty(OrigDate.prototype, "constructor", { value: SandboxDate, writable: true, configurable: true });
  g.Date = SandboxDate;
  let seed = 1;
  Math.random = function () {
    // xorshift32, reseeded from each event's position: a replay draws the same numbers.
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 4294967296;
  };
  delete g.WeakRef;
  delete g.FinalizationRegistry;
  delete g.performance;

  // ---- The definition a query builds. ----
  const def = {
    source: null, streams: [], categories: [], matching: null, catalog: null, catalogTransform: null,
    byStream: false, partitionBy: null,
    transforms: [], outputState: false, resultStream: null, partitionPattern: null,
    definesStateTransform: false, options: {},
  };
  function fail(message) { throw new Error(message); }
  function isFn(f) { return typeof f === "function"; }
  function needFn(f, what) { if (!isFn(f)) fail(what + " needs a function"); }

  // The handlers, as v5 registers them: `when` files each of its keys here, and the global
  // functions `on_event`, `on_any` and `on_raw` add to the same lists, so the two combine. An
  // event meets the `on_raw` handlers first (its body unparsed), then the `$any`/`on_any`
  // handlers in the order they were registered, then the one handler named for its type (a later
  // registration of a name replaces the earlier one). `fold` says whether any event handler was
  // registered; without one, the state becomes each event's body.
  const reg = {
    init: null, initShared: null, named: new Map(), any: [], raw: [], deleted: [], created: [],
    fold: false,
  };
  function onEvent(type, fn) {
    if (typeof type !== "string" || type === "") fail("on_event needs an event type");
    needFn(fn, "on_event");
    reg.named.set(type, fn);
    reg.fold = true;
  }
  function onAny(fn) { needFn(fn, "on_any"); reg.any.push(fn); reg.fold = true; }
  function onRaw(fn) { needFn(fn, "on_raw"); reg.raw.push(fn); reg.fold = true; }
  g.on_event = function (type, fn) { onEvent(type, fn); };
  g.on_any = function (fn) { onAny(fn); };
  g.on_raw = function (fn) { onRaw(fn); };

  function transformBy(fn) { needFn(fn, "transformBy"); def.transforms.push({ map: fn }); return afterTransform(); }
  function filterBy(fn) { needFn(fn, "filterBy"); def.transforms.push({ keep: fn }); return afterTransform(); }
  function outputTo(resultStream, partitionPattern) {
    if (typeof resultStream !== "string" || resultStream === "") fail("outputTo needs a stream name");
    if (partitionPattern !== undefined && typeof partitionPattern !== "string") fail("outputTo's partition pattern must be a string");
    def.resultStream = resultStream;
    def.partitionPattern = partitionPattern === undefined ? null : partitionPattern;
    def.outputState = true;
    return {};
  }
  function outputState() { def.outputState = true; return { transformBy, filterBy, outputTo }; }
  function afterTransform() { return { transformBy, filterBy, outputState, outputTo }; }
  function when(handlers) {
    if (typeof handlers !== "object" || handlers === null || Array.isArray(handlers)) fail("when needs an object of handlers");
    for (const k of Object.keys(handlers)) {
      if (!isFn(handlers[k])) fail("The handler '" + k + "' is not a function");
    }
    for (const k of Object.keys(handlers)) {
      const fn = handlers[k];
      if (k === "$init") reg.init = fn;
      else if (k === "$initShared") reg.initShared = fn;
      else if (k === "$any") onAny(fn);
      else if (k === "$deleted") reg.deleted.push(fn);
      else if (k === "$created") reg.created.push(fn);
      else onEvent(k, fn);
    }
    return {
      transformBy, filterBy, outputState, outputTo,
      $defines_state_transform: function () { def.definesStateTransform = true; return afterTransform(); },
    };
  }
  function partitionBy(fn) { needFn(fn, "partitionBy"); def.partitionBy = fn; return { when }; }
  function foreachStream() { def.byStream = true; return { when }; }
  function afterAll() { return { when, partitionBy, foreachStream, outputState }; }
  function afterStreams() { return { when, partitionBy, outputState }; }
  function setSource(kind) {
    if (def.source !== null) fail("Only one source (fromAll, fromStream, ...) can be defined");
    def.source = kind;
  }
  function names(args, what) {
    const list = args.length === 1 && Array.isArray(args[0]) ? args[0] : args;
    if (list.length === 0) fail(what + " needs at least one name");
    for (const n of list) {
      if (typeof n !== "string" || n === "") fail(what + " takes non-empty strings");
    }
    return list.slice();
  }

  g.fromAll = function () { setSource("all"); return afterAll(); };
  g.fromStream = function (s) { setSource("streams"); def.streams = names([s], "fromStream"); return afterStreams(); };
  g.fromStreams = function (...a) { setSource("streams"); def.streams = names(a, "fromStreams"); return afterStreams(); };
  g.fromCategory = function (...a) {
    setSource("categories");
    def.categories = names(a, "fromCategory");
    return def.categories.length === 1 ? afterAll() : afterStreams();
  };
  g.fromCategories = function (...a) { setSource("categories"); def.categories = names(a, "fromCategories"); return afterStreams(); };
  g.fromStreamsMatching = function (fn) {
    needFn(fn, "fromStreamsMatching");
    setSource("matching");
    def.matching = fn;
    return { when, foreachStream };
  };

  g.fromStreamCatalog = function (catalog, fn) {
    if (typeof catalog !== "string" || catalog === "") fail("fromStreamCatalog needs a stream name");
    if (fn !== undefined && fn !== null) needFn(fn, "fromStreamCatalog's second argument");
    setSource("catalog");
    def.catalog = catalog;
    def.catalogTransform = isFn(fn) ? fn : null;
    return { foreachStream };
  };

  const OPTION_TYPES = {
    resultStreamName: "string", $includeLinks: "boolean", reorderEvents: "boolean",
    processingLag: "number", biState: "boolean", definesStateTransform: "boolean",
    producesResults: "boolean", partitionResultStreamNamePattern: "string",
    disableParallelism: "boolean", definesFold: "boolean", handlesDeletedNotifications: "boolean",
  };
  g.options = function (o) {
    if (typeof o !== "object" || o === null || Array.isArray(o)) fail("options needs an object");
    for (const k of Object.keys(o)) {
      if (!Object.prototype.hasOwnProperty.call(OPTION_TYPES, k)) fail("Unrecognized option: " + k);
      if (typeof o[k] !== OPTION_TYPES[k]) fail("The option " + k + " must be a " + OPTION_TYPES[k]);
      def.options[k] = o[k];
    }
  };

  // ---- Effects: what the engine hands back to the caller, which writes them. ----
  let effects = [];
  let emitEnabled = false;
  let logged = 0;
  const LOG_LINES_MAX = 100;
  function metaText(meta) {
    if (meta === undefined || meta === null) return null;
    if (typeof meta !== "object" || Array.isArray(meta)) fail("Event metadata must be an object");
    return stringify(meta);
  }
  function push(stream, type, data, meta, isJson) {
    if (!emitEnabled) fail("'emit' is not allowed by the projection/configuration/mode");
    if (typeof stream !== "string" || stream === "") fail("The stream to write to must be a non-empty string");
    if (typeof type !== "string" || type === "") fail("The event type must be a non-empty string");
    effects.push({ k: "e", s: stream, t: type, d: data, m: metaText(meta), j: isJson });
  }
  function needEvent(ev, what) {
    if (typeof ev !== "object" || ev === null || typeof ev.streamId !== "string") fail(what + " needs an event");
  }
  g.emit = function (stream, type, body, meta) {
    const text = stringify(body === undefined ? null : body);
    push(stream, type, text, meta, true);
  };
  g.linkTo = function (stream, ev, meta) {
    needEvent(ev, "linkTo");
    push(stream, "$>", ev.sequenceNumber + "@" + ev.streamId, meta, false);
  };
  g.linkStreamTo = function (stream, linked, meta) {
    if (typeof linked !== "string" || linked === "") fail("linkStreamTo needs a stream name");
    push(stream, "$@", linked, meta, false);
  };
  g.copyTo = function (stream, ev, meta) {
    needEvent(ev, "copyTo");
    const merged = {};
    const source = ev.metadata;
    if (typeof source === "object" && source !== null) {
      for (const k of Object.keys(source)) {
        if (!k.startsWith("$") || k === "$correlationId") merged[k] = source[k];
      }
    }
    if (meta !== undefined && meta !== null) {
      if (typeof meta !== "object" || Array.isArray(meta)) fail("Event metadata must be an object");
      for (const k of Object.keys(meta)) merged[k] = meta[k];
    }
    push(stream, ev.eventType, ev.bodyRaw, Object.keys(merged).length ? merged : null, ev.isJson);
  };
  g.log = function (...args) {
    if (logged < LOG_LINES_MAX) {
      logged += 1;
      effects.push({ k: "l", d: args.map(function (a) { return typeof a === "string" ? a : stringify(a); }).join(" ") });
    }
  };

  // ---- Processing. ----
  const states = new Map();
  const results = new Map();
  const dirty = new Set();
  let shared;
  let biState = false;
  let producesResults = false;
  let pending = null;

  // Every type when no event handler is registered (the state becomes the body) or when a
  // `$any`/`on_any`/`on_raw` handler is; otherwise the named types.
  function allTypes() { return !reg.fold || reg.any.length > 0 || reg.raw.length > 0; }
  function wants(type) { return allTypes() || reg.named.has(type); }
  function initState() {
    if (reg.init !== null) {
      const s = reg.init();
      return s === undefined ? {} : s;
    }
    return {};
  }
  function initShared() {
    if (reg.initShared !== null) {
      const s = reg.initShared();
      return s === undefined ? {} : s;
    }
    return {};
  }
  // What an `on_raw` handler sees: the event before its body is parsed (v5 hands the raw
  // handlers its envelope before deserializing it: `isJson` false, `body` and `data` null).
  function rawView(ev) {
    const r = Object.assign({}, ev);
    r.isJson = false;
    r.body = null;
    r.data = null;
    delete r.jsonError;
    return r;
  }
  function parse(raw) {
    if (raw === "") return {};
    try { return jsonParse(raw); } catch (e) { return undefined; }
  }
  function makeEvent(streamId, seq, type, bodyRaw, metaRaw, linkMetaRaw, isJson, eventId) {
    const ev = {
      isJson: isJson, bodyRaw: bodyRaw, eventType: type, streamId: streamId,
      sequenceNumber: seq, metadataRaw: metaRaw, linkMetadataRaw: linkMetaRaw,
      partition: "", eventId: eventId,
    };
    if (isJson) {
      if (bodyRaw === "") {
        ev.body = {};
      } else {
        try { ev.body = jsonParse(bodyRaw); } catch (e) { ev.jsonError = String(e); }
      }
      ev.data = ev.body;
    }
    ev.metadata = parse(metaRaw);
    ev.linkMetadata = linkMetaRaw === "" ? {} : parse(linkMetaRaw);
    return ev;
  }
  function partitionOf(ev) {
    if (def.byStream) {
      let p = ev.streamId;
      const lm = ev.linkMetadata;
      if (lm && typeof lm.$o === "string") p = lm.$o;
      return p.startsWith("$$") ? p.slice(2) : p;
    }
    if (def.partitionBy !== null) {
      const r = def.partitionBy(ev);
      return r === null || r === undefined || r === "" ? "" : String(r);
    }
    return "";
  }
  function apply(p, fn, ev) {
    let s = biState ? [states.get(p), shared] : states.get(p);
    const r = fn(s, ev);
    if (r !== undefined) s = r;
    if (biState) {
      if (!Array.isArray(s)) fail("A handler of a biState projection must return [state, sharedState]");
      states.set(p, s[0]);
      shared = s[1];
    } else {
      states.set(p, s);
    }
  }
  // The transforms see a copy of the state: one that changes its argument in place
  // (`s.data = 321; return s;`) changes the result, never the state (nor its checkpoint).
  function resultOf(state) {
    const copy = stringify(state);
    let r = copy === undefined ? undefined : jsonParse(copy);
    for (const t of def.transforms) {
      if (t.map) r = t.map(r);
      else if (!t.keep(r)) return null;
    }
    return r === undefined ? null : r;
  }
  function text(v) {
    const t = stringify(v);
    return t === undefined ? "null" : t;
  }
  function updateResult(p) {
    const r = resultOf(states.get(p));
    const t = r === null ? null : text(r);
    if (results.get(p) !== t) {
      results.set(p, t);
      effects.push({ k: "r", p: p, d: t });
    }
  }
  function done(p) {
    dirty.add(p);
    if (producesResults) updateResult(p);
    return effects.length > 0 ? 2 : 1;
  }
  function handle(p, ev) {
    ev.partition = p;
    if (ev.deleted !== undefined) {
      const note = { partition: p, isSoftDeleted: ev.deleted === 2 };
      for (const fn of reg.deleted) apply(p, fn, note);
      return done(p);
    }
    if (reg.raw.length > 0) {
      const raw = rawView(ev);
      for (const fn of reg.raw) apply(p, fn, raw);
    }
    if (!reg.fold) {
      states.set(p, ev.isJson && ev.body !== undefined ? ev.body : { $e: ev.bodyRaw });
      return done(p);
    }
    for (const fn of reg.any) apply(p, fn, ev);
    const named = reg.named.get(ev.eventType);
    if (named !== undefined) apply(p, named, ev);
    return done(p);
  }
  function created(p, ev) {
    if (p === "") return;
    effects.push({ k: "p", p: p });
    for (const fn of reg.created) apply(p, fn, ev);
  }

  // -1: the partition's stored state is needed (`resume`); 0: not handled; 1: handled;
  // 2: handled, with effects to take.
  api.process = function (streamId, seq, type, bodyRaw, metaRaw, linkMetaRaw, isJson, stamp, eventId, position, deleted) {
    now = stamp;
    seed = (position % 2147483629) + 1;
    let ev;
    if (deleted !== 0) {
      if (!def.byStream || reg.deleted.length === 0) return 0;
      ev = { streamId: streamId, deleted: deleted, linkMetadata: {} };
    } else {
      if (!wants(type)) return 0;
      ev = makeEvent(streamId, seq, type, bodyRaw, metaRaw, linkMetaRaw, isJson, eventId);
      if (def.matching !== null && !def.matching(streamId, ev)) return 0;
    }
    const p = partitionOf(ev);
    if (!states.has(p)) {
      pending = { p: p, ev: ev };
      return -1;
    }
    return handle(p, ev);
  };
  api.resume = function (stored) {
    const { p, ev } = pending;
    pending = null;
    if (stored === null || stored === undefined) {
      states.set(p, initState());
      created(p, ev);
    } else {
      states.set(p, jsonParse(stored));
    }
    return handle(p, ev);
  };
  // The stream a catalog event names, by the query's function: null for none.
  api.catalogEntry = function (streamId, seq, type, bodyRaw, metaRaw, linkMetaRaw, isJson, stamp, eventId, position) {
    now = stamp;
    seed = (position % 2147483629) + 1;
    const ev = makeEvent(streamId, seq, type, bodyRaw, metaRaw, linkMetaRaw, isJson, eventId);
    const r = def.catalogTransform(ev);
    // A catalog function only names streams: what it would emit or log is dropped.
    effects = [];
    return r === null || r === undefined || r === "" ? null : String(r);
  };
  api.pendingPartition = function () { return pending === null ? "" : pending.p; };
  api.effects = function () {
    const out = stringify(effects);
    effects = [];
    return out;
  };
  api.restore = function (stored) {
    if (stored === null || stored === undefined) {
      states.set("", initState());
      if (biState) shared = initShared();
    } else if (biState) {
      const both = jsonParse(stored);
      states.set("", both[0]);
      shared = both[1];
    } else {
      states.set("", jsonParse(stored));
    }
    dirty.clear();
  };
  function rootText() {
    const s = text(states.get(""));
    return biState ? "[" + s + "," + text(shared) + "]" : s;
  }
  api.checkpoint = function () {
    const parts = [];
    for (const p of dirty) {
      if (p !== "") parts.push([p, text(states.get(p))]);
    }
    dirty.clear();
    return stringify({ root: rootText(), parts: parts });
  };
  api.state = function (p) {
    if (!states.has(p)) return null;
    return p === "" ? rootText() : text(states.get(p));
  };
  api.result = function (p) {
    if (!states.has(p)) return null;
    if (def.transforms.length === 0) return p === "" ? rootText() : text(states.get(p));
    const r = resultOf(states.get(p));
    return r === null ? null : text(r);
  };
  api.partitions = function () { return states.size; };
  api.enableEmit = function (on) { emitEnabled = on; };

  // Evaluates the query and answers its definition as JSON.
  api.compile = function (source) {
    (0, eval)(source);
    if (def.source === null) fail("The query defines no source: call fromAll, fromStream, fromStreams, fromCategory, fromStreamsMatching or fromStreamCatalog");
    if (def.source === "catalog" && !def.byStream) fail("fromStreamCatalog needs foreachStream()");
    const o = def.options;
    biState = o.biState === true || reg.initShared !== null;
    const partitioned = def.byStream || def.partitionBy !== null;
    const handlesDeleted = reg.deleted.length > 0;
    if (handlesDeleted && !def.byStream) fail("The $deleted handler needs foreachStream()");
    if (handlesDeleted && biState) fail("The $deleted handler cannot be combined with a biState projection");
    if (o.reorderEvents === true) {
      if (def.source === "all") fail("reorderEvents cannot be used with fromAll()");
      if (def.source !== "streams" || def.streams.length < 2) fail("reorderEvents needs fromStreams() with more than one stream");
      if (!(o.processingLag >= 50)) fail("reorderEvents needs processingLag of at least 50");
    }
    producesResults = def.outputState || def.transforms.length > 0 || o.producesResults === true;
    const events = allTypes() ? null : Array.from(reg.named.keys());
    return stringify({
      source: def.source, streams: def.streams, categories: def.categories,
      catalogStream: def.catalog, definesCatalogTransform: def.catalogTransform !== null,
      byStream: def.byStream, byCustomPartitions: def.partitionBy !== null, partitioned: partitioned,
      events: events, biState: biState, producesResults: producesResults,
      definesFold: reg.fold || reg.init !== null || reg.initShared !== null || reg.deleted.length > 0
        || reg.created.length > 0,
      definesStateTransform: def.definesStateTransform || def.transforms.length > 0,
      handlesDeleted: handlesDeleted, includeLinks: o.$includeLinks === true,
      reorderEvents: o.reorderEvents === true, processingLag: o.processingLag === undefined ? 0 : o.processingLag,
      resultStreamName: def.resultStream !== null ? def.resultStream : (o.resultStreamName === undefined ? null : o.resultStreamName),
      partitionResultStreamNamePattern: def.partitionPattern !== null ? def.partitionPattern
        : (o.partitionResultStreamNamePattern === undefined ? null : o.partitionResultStreamNamePattern),
    });
  };
  return api;
})(globalThis)
