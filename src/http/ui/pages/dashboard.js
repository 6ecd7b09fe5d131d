// Dashboard: the node at a glance. Polls `GET /stats` every 2 s, `GET /metrics` every 4 s (events
// written and read per second come from its kurrentdb_io_events_total, which /stats does not
// carry) and `GET /info` every 10 s; keeps 5 minutes of samples for the charts while the tab is
// open.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { Series, Rate, lineChart } from '../charts.js';
import { pageHeader, card, stat, table, badge, errorSlot, notice } from '../ui.js';

// Samples survive leaving and coming back to the dashboard (module state, per tab).
const series = {
  in: new Series('written', 'c1'),
  out: new Series('read', 'c2'),
  bytes: new Series('written', 'c3'),
  cpu: new Series('CPU', 'c4'),
  queue: new Series('queued', 'c1'),
};
const rates = { in: new Rate(), out: new Rate(), bytes: new Rate() };

const POLL_MS = 2000;

export async function render(ctx) {
  const errors = errorSlot();
  const body = h('div', { id: 'dashboard' }, h('p', { class: 'loading' }, 'Loading figures…'));
  replace(ctx.main, pageHeader('Dashboard', `Node ${api.base.host}`), errors.el, body);

  let info = null;
  let metricsNote = null;
  let lastSamples = [];
  let tick = 0;
  ctx.poll(async () => {
    try {
      info = await api.get('info', { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET /info');
    }
  }, 10000);

  ctx.poll(async () => {
    let stats;
    let samples = [];
    try {
      stats = await api.get('stats', { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET /stats');
      return;
    }
    // /metrics (about 30 KB, 5 KB gzipped) every other poll: enough for the event rates.
    const fresh = tick++ % 2 === 0;
    if (fresh) {
      try {
        const text = await api.get('metrics', { signal: ctx.signal, accept: 'text/plain' });
        lastSamples = api.parseMetrics(text);
        metricsNote = null;
      } catch (e) {
        if (e.name === 'AbortError') return;
        metricsNote = `Events per second need GET /metrics, which failed: ${e.message}`;
      }
    }
    samples = lastSamples;
    errors.clear();
    if (!ctx.alive) return;
    const now = Date.now();
    const m = (name, match) => api.metric(samples, name, match);
    if (fresh) {
      const written = m('kurrentdb_io_events_total', { activity: 'written' });
      const read = m('kurrentdb_io_events_total', { activity: 'read' });
      series.in.push(rates.in.next(written, now), now);
      series.out.push(rates.out.next(read, now), now);
    }
    series.bytes.push(rates.bytes.next(stats?.es?.checksum, now), now);
    series.cpu.push(Number(stats?.proc?.cpu), now);
    const queues = Object.values(stats?.es?.queue || {});
    series.queue.push(queues.reduce((a, q) => a + (Number(q.length) || 0), 0), now);
    replace(body, view(stats, samples, info, metricsNote));
  }, POLL_MS);
}

function view(stats, samples, info, metricsNote) {
  const es = stats.es || {};
  const proc = stats.proc || {};
  const sys = stats.sys || {};
  const m = (name, match) => api.metric(samples, name, match);
  const started = Date.parse(proc.startTime);
  const uptime = Number.isNaN(started) ? m('kurrentdb_proc_up_time_seconds_total') : (Date.now() - started) / 1000;
  const chaser = m('kurrentdb_checkpoints', { name: 'chaser' });
  const drives = Object.entries(sys.drive || {});
  const disk = drives[0]?.[1];
  const ri = es.readIndex || {};
  const ps = es.persistentSubscriptions || {};
  const w = es.writer || {};

  const figures = h(
    'div',
    { class: 'grid stats', id: 'figures' },
    stat('State', info ? badge(info.state || '?') : '…', info ? `projections ${info.projectionsMode || '?'}` : null, { id: 'fig-state' }),
    stat('Version', info?.esVersion || '…', 'v5 HTTP API', { id: 'fig-version' }),
    stat('Uptime', f.duration(uptime), proc.startTime ? `since ${f.time(proc.startTime)}` : null, { id: 'fig-uptime' }),
    stat('Writer checkpoint', f.num(es.checksum), `chaser ${f.num(chaser)}`, { id: 'fig-writer' }),
    stat('Events in', f.rate(series.in.last), 'written per second', { id: 'fig-in' }),
    stat('Events out', f.rate(series.out.last), 'read over HTTP per second', { id: 'fig-out' }),
    stat('Disk free', disk ? f.bytes(disk.availableBytes) : '–', disk ? `${disk.usage || '?'} of ${f.bytes(disk.totalBytes)} used` : null, { id: 'fig-disk' }),
    stat('Memory', f.bytes(proc.mem), `system free ${f.bytes(sys.freeMem)}`, { id: 'fig-mem' }),
    stat('CPU', f.pct(proc.cpu), `machine ${f.pct(sys.cpu)}`, { id: 'fig-cpu' }),
    stat('Connections', f.num(proc.tcp?.connections), `${f.num(proc.threadsCount)} threads`, { id: 'fig-conn' }),
  );

  const charts = h(
    'div',
    { class: 'grid charts', id: 'charts' },
    lineChart([series.in, series.out], { title: 'Events/s', format: (v) => f.num(v, v < 10 ? 1 : 0) }),
    lineChart([series.bytes], { title: 'Bytes written/s', format: f.bytes, min: 1024 }),
    lineChart([series.cpu], { title: 'Process CPU %', format: (v) => f.pct(v), min: 5 }),
    lineChart([series.queue], { title: 'Queued items', format: (v) => f.num(v), min: 5 }),
  );

  const queueRows = Object.entries(es.queue || {}).map(([key, q]) => ({ key, ...q }));
  const queues = card(
    'Queues',
    table(
      [
        { label: 'Queue', cell: (q) => q.queueName || q.key },
        { label: 'Group', cell: (q) => q.groupName || '–' },
        { label: 'Length', cell: (q) => f.num(q.length), class: 'num' },
        { label: 'Items/s', cell: (q) => f.num(q.avgItemsPerSecond), class: 'num' },
        { label: 'Avg time (ms)', cell: (q) => f.num(q.avgProcessingTime, 3), class: 'num' },
        { label: 'Idle', cell: (q) => f.pct(q.idleTimePercent), class: 'num' },
        { label: 'Peak (current / lifetime)', cell: (q) => `${f.num(q.lengthCurrentTryPeak)} / ${f.num(q.lengthLifetimePeak)}`, class: 'num' },
        { label: 'Processed', cell: (q) => f.num(q.totalItemsProcessed), class: 'num' },
        { label: 'Last message', cell: (q) => q.lastProcessedMessage || '–' },
      ],
      queueRows,
      { id: 'queues', empty: 'The node reports no queues.' },
    ),
  );

  const hit = (a, b) => (Number(a) + Number(b) > 0 ? f.pct((100 * Number(a)) / (Number(a) + Number(b))) : '–');
  const siCount = m('kurrentdb_cache_resources_entries', { cache: 'stream-info', kind: 'count' });
  const siCap = m('kurrentdb_cache_resources_entries', { cache: 'stream-info', kind: 'capacity' });
  const caches = card(
    'Caches and index',
    table(
      [
        { label: 'Figure', cell: (r) => r[0] },
        { label: 'Hits', cell: (r) => r[1], class: 'num' },
        { label: 'Misses', cell: (r) => r[2], class: 'num' },
        { label: 'Hit ratio / size', cell: (r) => r[3], class: 'num' },
      ],
      [
        ['Records', f.num(ri.cachedRecord), f.num(ri.notCachedRecord), hit(ri.cachedRecord, ri.notCachedRecord)],
        ['Stream info', f.num(ri.cachedStreamInfo), f.num(ri.notCachedStreamInfo), `${hit(ri.cachedStreamInfo, ri.notCachedStreamInfo)}${siCount !== null ? ` · ${f.num(siCount)} of ${f.num(siCap)}` : ''}`],
        ['Transactions', f.num(ri.cachedTransInfo), f.num(ri.notCachedTransInfo), hit(ri.cachedTransInfo, ri.notCachedTransInfo)],
        ['Index memtable entries', f.num(ri.memTableEntries), '', ''],
        ['Index tables / entries', f.num(ri.tables), f.num(ri.tableEntries), f.bytes(ri.memoryBytes)],
      ],
      { id: 'caches' },
    ),
  );

  const writer = card(
    'Writer',
    h(
      'dl',
      { class: 'kv' },
      [
        ['Flushes', f.num(w.totalFlushes)],
        ['fsyncs', f.num(w.fsyncs)],
        ['Mean flush size', f.num(w.meanFlushSize, 2)],
        ['Mean flush delay', `${f.num(w.meanFlushDelayMs, 3)} ms`],
        ['Max flush size', f.num(w.maxFlushSize)],
        ['Queued flushes', f.num(w.queuedFlushMessages)],
      ].map(([k, v]) => [h('dt', k), h('dd', v)]),
    ),
  );

  const subs = card(
    'Persistent subscriptions',
    h(
      'dl',
      { class: 'kv' },
      [
        ['Running', ps.running === undefined ? '–' : ps.running ? 'yes' : 'no'],
        ['Groups', f.num(ps.groups)],
        ['Connections', f.num(ps.connections)],
        ['In flight', f.num(ps.inFlightMessages)],
        ['Delivered', f.num(ps.totalDelivered)],
        ['Retried / timed out / parked', `${f.num(ps.totalRetried)} / ${f.num(ps.totalTimedOut)} / ${f.num(ps.totalParked)}`],
      ].map(([k, v]) => [h('dt', k), h('dd', v)]),
    ),
  );

  const disks = card(
    'Disk space',
    table(
      [
        { label: 'Path', cell: (d) => h('span', { class: 'mono' }, d[0]) },
        { label: 'Used', cell: (d) => f.bytes(d[1].usedBytes), class: 'num' },
        { label: 'Available', cell: (d) => f.bytes(d[1].availableBytes), class: 'num' },
        { label: 'Total', cell: (d) => f.bytes(d[1].totalBytes), class: 'num' },
        {
          label: 'Usage',
          cell: (d) => {
            const used = Number(d[1].totalBytes) ? (100 * (Number(d[1].totalBytes) - Number(d[1].availableBytes))) / Number(d[1].totalBytes) : 0;
            return h('div', { class: 'progress-cell' }, h('progress', { max: 100, value: used.toFixed(1) }), h('span', d[1].usage || f.pct(used)));
          },
        },
      ],
      drives,
      { id: 'disks', empty: 'No drive figures.' },
    ),
  );

  return [
    metricsNote ? notice(metricsNote, 'warn') : null,
    figures,
    charts,
    queues,
    h('div', { class: 'grid two' }, caches, disks),
    h('div', { class: 'grid two' }, writer, subs),
  ];
}
