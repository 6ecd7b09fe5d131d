// Small SVG time-series charts: a Series keeps the samples of the last minutes, lineChart draws
// one or more series over that window with the latest value and the peak as text. Pure SVG
// attributes, no inline styles (the CSP forbids them); colours come from app.css classes.

import { s, h } from './dom.js';

/** Timestamped samples of one figure, kept for `windowMs`. */
export class Series {
  constructor(label, cls, windowMs = 5 * 60 * 1000) {
    this.label = label;
    this.cls = cls;
    this.windowMs = windowMs;
    this.points = [];
  }

  push(value, t = Date.now()) {
    if (value === null || value === undefined || Number.isNaN(value)) return;
    this.points.push([t, value]);
    const from = t - this.windowMs;
    while (this.points.length && this.points[0][0] < from) this.points.shift();
  }

  get last() {
    return this.points.length ? this.points[this.points.length - 1][1] : null;
  }
}

/** Per-second rate of a counter between polls (null on the first sample or a reset). */
export class Rate {
  constructor() {
    this.prev = null;
  }

  next(value, t = Date.now()) {
    if (value === null || value === undefined) return null;
    const p = this.prev;
    this.prev = [t, value];
    if (!p || value < p[1] || t <= p[0]) return null;
    return ((value - p[1]) * 1000) / (t - p[0]);
  }
}

const W = 320;
const H = 90;
const PAD_T = 6;
const PAD_B = 4;

/**
 * An SVG chart of `series` (Series[]) over their window. opts: `{ format(v) → text, title, min }`.
 */
export function lineChart(series, opts = {}) {
  const now = Date.now();
  const windowMs = series[0]?.windowMs || 300000;
  const from = now - windowMs;
  let max = opts.min ?? 1;
  for (const sr of series) for (const [, v] of sr.points) max = Math.max(max, v);
  max *= 1.1;
  const x = (t) => (((t - from) / windowMs) * W).toFixed(1);
  const y = (v) => (PAD_T + (1 - v / max) * (H - PAD_T - PAD_B)).toFixed(1);
  const fmt = opts.format || ((v) => String(Math.round(v)));
  const grid = [0.25, 0.5, 0.75].map((f) => s('line', { x1: 0, x2: W, y1: y(max * f), y2: y(max * f), class: 'grid' }));
  const lines = series.map((sr) => {
    const pts = sr.points.filter(([t]) => t >= from).map(([t, v]) => `${x(t)},${y(v)}`);
    if (pts.length === 1) pts.unshift(`${Math.max(0, Number(x(sr.points[0][0])) - 2)},${pts[0].split(',')[1]}`);
    return s('polyline', { points: pts.join(' '), class: `line ${sr.cls}`, fill: 'none' });
  });
  const svg = s(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', class: 'chart-svg', role: 'img', 'aria-label': opts.title || series.map((sr) => sr.label).join(', ') },
    s('rect', { x: 0, y: 0, width: W, height: H, class: 'chart-bg' }),
    grid,
    lines,
  );
  const legend = h(
    'div',
    { class: 'chart-legend' },
    series.map((sr) => h('span', { class: `legend-item ${sr.cls}` }, h('span', { class: 'swatch' }), `${sr.label}: `, h('strong', sr.last === null ? '–' : fmt(sr.last)))),
  );
  return h(
    'figure',
    { class: 'chart' },
    h('figcaption', h('span', opts.title || ''), h('span', { class: 'chart-peak' }, `peak ${fmt(max / 1.1)}`)),
    svg,
    h('div', { class: 'chart-axis' }, h('span', `${Math.round(windowMs / 60000)} min ago`), h('span', 'now')),
    legend,
  );
}
