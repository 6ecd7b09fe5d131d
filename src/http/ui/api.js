// The node's HTTP API as the UI calls it. Every URL is relative to the API base, the directory
// above the page (`<prefix>/web/index.html` → `<prefix>/`), so the UI works behind a reverse
// proxy under a path prefix. Every call sends `Accept: application/json` (unless told otherwise)
// and the tab's Basic credentials; a failed call throws an ApiError with the status and the
// reason phrase the node sent.

import * as session from './session.js';

export const base = new URL('../', location.href);

export class ApiError extends Error {
  constructor(status, reason, body, method, path) {
    super(status ? `${status} ${reason}` : reason);
    this.status = status;
    this.reason = reason;
    this.body = body;
    this.method = method;
    this.path = path;
  }
}

/** Encodes one path segment (stream names, logins, projection names). */
export const seg = (x) => encodeURIComponent(String(x));

/** The absolute URL of an API path such as `streams/foo` (no leading slash). */
export function url(path, query) {
  const u = new URL(path.replace(/^\/+/, ''), base);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null) u.searchParams.set(k, String(v));
  }
  return u;
}

const STATUS_TEXT = {
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  406: 'Not Acceptable', 408: 'Request Timeout', 409: 'Conflict', 410: 'Gone', 412: 'Precondition Failed',
  413: 'Payload Too Large', 415: 'Unsupported Media Type', 500: 'Internal Server Error', 502: 'Bad Gateway',
  503: 'Service Unavailable', 504: 'Gateway Timeout',
};

/**
 * One call. `opts`: query, headers, body (string or object → JSON), contentType, accept,
 * signal, auth (false: no credentials; a string: that Authorization value).
 * Resolves to `{ status, reason, headers, data, text }` (data: parsed JSON when the reply is
 * JSON, else the text).
 */
export async function call(method, path, opts = {}) {
  const headers = { Accept: opts.accept || 'application/json', ...(opts.headers || {}) };
  const auth = opts.auth === undefined ? session.current()?.token : opts.auth;
  if (auth) headers.Authorization = auth;
  let body = opts.body;
  if (body !== undefined && body !== null && typeof body !== 'string' && !(body instanceof Blob)) {
    body = JSON.stringify(body);
    headers['Content-Type'] = opts.contentType || 'application/json';
  } else if (body !== undefined && opts.contentType) {
    headers['Content-Type'] = opts.contentType;
  }
  const target = url(path, opts.query);
  let res;
  try {
    res = await fetch(target, { method, headers, body, signal: opts.signal, cache: 'no-store', redirect: 'follow', credentials: 'omit' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'Cannot reach the server (network error)', String(e.message || e), method, path);
  }
  const text = await res.text();
  const type = res.headers.get('content-type') || '';
  let data = text;
  const reason = res.statusText || STATUS_TEXT[res.status] || '';
  if (!res.ok) throw new ApiError(res.status, reason, text, method, path);
  if (text && /json/.test(type)) {
    try {
      data = JSON.parse(text);
    } catch (e) {
      // Shown, never papered over: a reply that says JSON and is not (e.g. a compressed body
      // whose Content-Encoding was lost on the way) is the server's fault.
      const enc = res.headers.get('content-encoding');
      throw new ApiError(
        res.status,
        `${reason}, but the reply is not valid JSON (${String(e.message).replace(/[^\x20-\x7e]+/g, '?').slice(0, 80)}; Content-Type ${type}, Content-Encoding ${enc || 'none'})`,
        '',
        method,
        path,
      );
    }
  }
  return { status: res.status, reason, headers: res.headers, data, text };
}

export const get = (path, opts) => call('GET', path, opts).then((r) => r.data);
export const post = (path, body, opts = {}) => call('POST', path, { ...opts, body });
export const put = (path, body, opts = {}) => call('PUT', path, { ...opts, body });
export const del = (path, opts) => call('DELETE', path, opts);

/** A version 4 UUID (crypto.randomUUID needs a secure context; getRandomValues does not). */
export function uuid() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

// ---- streams -------------------------------------------------------------------------------

/** A page of a stream's feed (`embed=tryharder`), or its head. */
export function feed(stream, { pos, dir, count, longPoll, signal, embed = 'tryharder' } = {}) {
  let path = `streams/${seg(stream)}`;
  if (pos !== undefined && pos !== null) path += `/${seg(pos)}/${dir || 'backward'}/${count || 20}`;
  const headers = longPoll ? { 'ES-LongPoll': String(longPoll) } : {};
  return get(path, { query: { embed }, headers, signal });
}

/** One event, with its content (data and metadata parsed). */
export function event(stream, number, signal) {
  return get(`streams/${seg(stream)}/${seg(number)}`, {
    query: { embed: 'tryharder' },
    accept: 'application/vnd.eventstore.atom+json',
    signal,
  });
}

/** Appends events `[{ eventId, eventType, data, metadata }]`. */
export function append(stream, events, expectedVersion) {
  const headers = {};
  if (expectedVersion !== undefined && expectedVersion !== '') headers['ES-ExpectedVersion'] = String(expectedVersion);
  return call('POST', `streams/${seg(stream)}`, {
    body: JSON.stringify(events),
    contentType: 'application/vnd.eventstore.events+json',
    headers,
  });
}

/** Appends one event whose data is not JSON (raw bytes with its type and id in headers). */
export function appendRaw(stream, { eventId, eventType, data }) {
  return call('POST', `streams/${seg(stream)}`, {
    body: data,
    contentType: 'application/octet-stream',
    headers: { 'ES-EventType': eventType, 'ES-EventId': eventId },
  });
}

export function deleteStream(stream, hard) {
  return del(`streams/${seg(stream)}`, { headers: hard ? { 'ES-HardDelete': 'true' } : {} });
}

export function streamMetadata(stream) {
  return get(`streams/${seg(stream)}/metadata`);
}

export function setStreamMetadata(stream, metadata) {
  return call('POST', `streams/${seg(stream)}/metadata`, {
    body: JSON.stringify([{ eventId: uuid(), eventType: '$metadata', data: metadata }]),
    contentType: 'application/vnd.eventstore.events+json',
  });
}

/** The paging position of a feed link (`…/{pos}/{forward|backward}/{n}`), or null. */
export function pageOf(feedDoc, relation) {
  const l = (feedDoc.links || []).find((x) => x.relation === relation);
  if (!l) return null;
  let p;
  try {
    p = new URL(l.uri).pathname;
  } catch {
    p = l.uri;
  }
  const m = /\/([^/]+)\/(forward|backward)\/(\d+)$/.exec(p);
  return m ? { pos: decodeURIComponent(m[1]), dir: m[2], count: Number(m[3]) } : null;
}

// ---- node ------------------------------------------------------------------------------------

/** Prometheus text to `[{ name, labels, value }]`. */
export function parseMetrics(text) {
  const out = [];
  for (const line of String(text).split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[2]) {
      for (const lm of m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[lm[1]] = lm[2];
    }
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of a metric's samples whose labels include `match`. */
export function metric(samples, name, match = {}) {
  let total = null;
  for (const x of samples) {
    if (x.name !== name) continue;
    if (Object.entries(match).some(([k, v]) => x.labels[k] !== v)) continue;
    total = (total || 0) + x.value;
  }
  return total;
}
