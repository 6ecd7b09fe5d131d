// Formatting of figures for display: bytes, counts, rates, durations, times, positions, and the
// hash paths the UI links to (every path segment encoded).

export function bytes(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
  n = Number(n);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(n >= 100 ? 0 : 1)} ${units[i]}`;
}

export function num(n, digits = 0) {
  if (n === null || n === undefined || n === '' || Number.isNaN(Number(n))) return '–';
  return Number(n).toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function rate(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
  return `${num(n, n < 10 ? 1 : 0)}/s`;
}

export function pct(n) {
  if (n === null || n === undefined || Number.isNaN(Number(n))) return '–';
  return `${Number(n).toFixed(1)}%`;
}

/** Seconds as `3d 4h`, `5h 12m`, `2m 03s`, `4.2s`. */
export function duration(sec) {
  if (sec === null || sec === undefined || Number.isNaN(sec)) return '–';
  sec = Math.max(0, sec);
  if (sec < 60) return `${sec < 10 ? sec.toFixed(1) : Math.round(sec)}s`;
  const d = Math.floor(sec / 86400);
  const hh = Math.floor((sec % 86400) / 3600);
  const mm = Math.floor((sec % 3600) / 60);
  const ss = Math.floor(sec % 60);
  if (d) return `${d}d ${hh}h`;
  if (hh) return `${hh}h ${mm}m`;
  return `${mm}m ${String(ss).padStart(2, '0')}s`;
}

/** A .NET TimeSpan text (`00:00:01.0160139`, `1.02:03:04`) in seconds. */
export function timespan(text) {
  if (typeof text !== 'string') return null;
  const m = /^(?:(\d+)\.)?(\d+):(\d+):(\d+(?:\.\d+)?)$/.exec(text.trim());
  if (!m) return null;
  return (Number(m[1] || 0) * 86400) + Number(m[2]) * 3600 + Number(m[3]) * 60 + Number(m[4]);
}

/** Time since an ISO date, as `12s ago`. */
export function ago(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '–';
  return `${duration((now - t) / 1000)} ago`;
}

export function time(iso) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso || '–';
  const d = new Date(t);
  const p = (x, n = 2) => String(x).padStart(n, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A `$all` position (commit and prepare) as the 32 hex digits of its URL. */
export function positionHex(commit, prepare) {
  const hex = (n) => BigInt(n).toString(16).toUpperCase().padStart(16, '0');
  return hex(commit) + hex(prepare);
}

/** The 32 hex digits of a `$all` position as `C:…/P:…`, or the text unchanged. */
export function positionText(hex) {
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) return hex;
  return `C:${BigInt('0x' + hex.slice(0, 16))}/P:${BigInt('0x' + hex.slice(16))}`;
}

/** A hash route from raw segments: `route('streams', name, 10)` → `#/streams/<enc name>/10`. */
export function route(...segments) {
  return '#/' + segments.map((x) => encodeURIComponent(String(x))).join('/');
}

/** Pretty-prints JSON text; text that is not JSON comes back unchanged. */
export function prettyJson(text) {
  if (text === null || text === undefined) return '';
  if (typeof text !== 'string') return JSON.stringify(text, null, 2);
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
