// Admin: everything that acts on this node, on a leader or a follower alike.
// Scavenge: start with every parameter (`POST /admin/scavenge?threshold=&threads=&throttlePercent=
// &syncOnly=&startFromChunk=`), the running one (`GET /admin/scavenge/current`, polled every 2 s)
// with stop (`DELETE /admin/scavenge/{id}`), the history (the head of `$scavenges`, polled every
// 5 s). Also merge indexes, reload configuration, the log level, resign leadership, and shut down
// after confirmation.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, select, table, badge, dl, errorSlot, errorBox, act, confirmDialog, notice, toast } from '../ui.js';

export async function render(ctx) {
  const errors = errorSlot();
  const currentHost = h('div', { id: 'scavenge-current' }, h('p', { class: 'loading' }, 'Loading…'));
  const historyHost = h('div', { id: 'scavenge-history-host' }, h('p', { class: 'loading' }, 'Loading…'));
  const nodeHost = h('div', { id: 'admin-node' });

  // Start form.
  const threshold = input({ type: 'number', id: 'sc-threshold', value: 0, step: 1 });
  const threads = input({ type: 'number', id: 'sc-threads', value: 1, min: 1, max: 4 });
  const throttle = input({ type: 'number', id: 'sc-throttle', value: 100, min: 1, max: 100 });
  const startChunk = input({ type: 'number', id: 'sc-start-chunk', value: 0, min: 0 });
  const syncOnly = h('input', { type: 'checkbox', id: 'sc-sync-only' });
  const start = h('button', { type: 'submit', class: 'btn primary', id: 'sc-start' }, 'Start scavenge');
  const form = h(
    'form',
    { class: 'form wide', id: 'scavenge-form' },
    h(
      'div',
      { class: 'fields' },
      field('Threshold', threshold, 'Chunks are rewritten when their weight (what they can reclaim) exceeds it; -1: every chunk. Default 0.'),
      field('Threads', threads, '1 to 4. Default 1.'),
      field('Throttle %', throttle, '1 to 100: share of the time the scavenge may work (100: no throttle). Default 100.'),
      field('Start from chunk', startChunk, 'v5’s parameter; this node accepts it but scavenges from the first chunk. Default 0.'),
    ),
    field('Sync only', syncOnly, 'Only bring the scavenge state up to date with the log; remove nothing.'),
    h('div', { class: 'form-actions' }, start),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await act(
      start,
      () =>
        api.call('POST', 'admin/scavenge', {
          query: {
            threshold: threshold.value || 0,
            threads: threads.value || 1,
            throttlePercent: throttle.value || 100,
            syncOnly: syncOnly.checked ? 'true' : 'false',
            startFromChunk: startChunk.value || 0,
          },
        }),
      { slot: errors, context: 'Start scavenge' },
    );
    const id = r?.data?.scavengeId;
    if (id) {
      toast(`Scavenge ${id.slice(0, 8)} started`);
      ctx.go(f.route('admin', 'scavenges', id));
    }
  });

  // Node actions.
  const mk = (label, id, kind = '') => h('button', { type: 'button', class: `btn ${kind}`.trim(), id }, label);
  const merge = mk('Merge indexes', 'admin-merge');
  const reload = mk('Reload configuration', 'admin-reload');
  const resign = mk('Resign leadership', 'admin-resign');
  const shutdown = mk('Shut down node', 'admin-shutdown', 'danger');
  const level = select(['Error', 'Warn', 'Info', 'Debug', 'Trace'], undefined, { id: 'admin-loglevel' });
  const setLevel = mk('Set log level', 'admin-set-loglevel');
  merge.addEventListener('click', () => act(merge, () => api.post('admin/mergeindexes'), { ok: 'Index merge started', slot: errors, context: 'Merge indexes' }));
  reload.addEventListener('click', async () => {
    const r = await act(reload, () => api.post('admin/reloadconfig', undefined, { accept: 'text/plain' }), { slot: errors, context: 'Reload configuration' });
    if (r) toast(String(r.text || 'Configuration reloaded').trim());
  });
  resign.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: 'Resign leadership?', message: 'This leader steps down and the cluster elects another.', confirm: 'Resign', danger: true });
    if (ok) act(resign, () => api.post('admin/node/resign'), { ok: 'Resigning', slot: errors, context: 'Resign' });
  });
  setLevel.addEventListener('click', () => act(setLevel, () => api.post('admin/loglevel', undefined, { query: { level: level.value } }), { ok: `Log level ${level.value}`, slot: errors, context: 'Log level' }));
  shutdown.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: 'Shut this node down?',
      message: `The node at ${api.base.host} stops; it has to be started again by whoever runs it. A leader hands over first.`,
      confirm: 'Shut down',
      danger: true,
      typeToConfirm: 'shutdown',
    });
    if (ok) act(shutdown, () => api.post('admin/shutdown'), { ok: 'The node is shutting down', slot: errors, context: 'Shutdown' });
  });

  replace(
    ctx.main,
    pageHeader('Admin', `Acts on this node (${api.base.host})`),
    errors.el,
    h('div', { class: 'grid two' }, card('Scavenge', currentHost, h('h3', 'Start a scavenge'), form), card('Node', nodeHost, h('h3', 'Actions'), h('div', { class: 'actions' }, merge, reload, resign, shutdown), h('h3', 'Log level'), h('div', { class: 'inline-form' }, field('Level', level), setLevel))),
    card('Scavenge history', historyHost),
  );

  // Node facts (once) and the log level.
  (async () => {
    try {
      const [info, lv] = await Promise.all([api.get('info', { signal: ctx.signal }), api.get('admin/loglevel', { signal: ctx.signal }).catch(() => null)]);
      if (lv?.level) level.value = lv.level;
      resign.disabled = !/^(master|leader)$/i.test(info.state || '');
      replace(nodeHost, dl([['State', badge(info.state || '?')], ['Address', api.base.host], ['Version', info.esVersion || '?'], ['Projections', info.projectionsMode || '?'], ['Log', lv ? `${lv.level} (${lv.format})` : '–']]));
    } catch (e) {
      if (e.name !== 'AbortError') replace(nodeHost, errorBox(e, 'GET /info'));
    }
  })();

  ctx.poll(async () => {
    try {
      const cur = await api.get('admin/scavenge/current', { signal: ctx.signal });
      if (cur?.scavengeId) {
        const stop = h('button', { type: 'button', class: 'btn danger small', id: 'sc-stop' }, 'Stop');
        stop.addEventListener('click', async () => {
          const ok = await confirmDialog({ title: 'Stop the scavenge?', message: 'It stops after the chunk in hand; the next one starts where it left off.', confirm: 'Stop scavenge', danger: true });
          if (ok) act(stop, () => api.del(`admin/scavenge/${api.seg(cur.scavengeId)}`), { ok: 'Stopping the scavenge', slot: errors, context: 'Stop scavenge' });
        });
        replace(
          currentHost,
          notice(h('span', 'Running: ', h('a', { href: f.route('admin', 'scavenges', cur.scavengeId) }, cur.scavengeId), ' '), 'info'),
          h('div', { class: 'actions' }, h('a', { class: 'btn small', href: f.route('admin', 'scavenges', cur.scavengeId) }, 'Watch progress'), stop),
        );
      } else {
        replace(currentHost, h('p', { class: 'muted' }, 'No scavenge is running on this node.'));
      }
    } catch (e) {
      if (e.name !== 'AbortError') replace(currentHost, errorBox(e, 'GET /admin/scavenge/current'));
    }
  }, 2000);

  ctx.poll(async () => {
    try {
      const doc = await api.feed('$scavenges', { pos: 'head', dir: 'backward', count: 100, signal: ctx.signal });
      replace(historyHost, history(doc.entries || []));
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(historyHost, e.status === 404 ? h('p', { class: 'muted', id: 'scavenge-history' }, 'No scavenge has run yet.') : errorBox(e, 'GET /streams/$scavenges'));
    }
  }, 5000);
}

function parse(e) {
  try {
    return typeof e.data === 'string' ? JSON.parse(e.data) : e.data || {};
  } catch {
    return {};
  }
}

/** One row per scavenge from `$scavengeStarted` / `$scavengeCompleted` links in `$scavenges`. */
function history(entries) {
  const runs = new Map();
  for (const e of entries) {
    const d = parse(e);
    const id = d.scavengeId || String(e.streamId || '').replace(/^\$scavenges-/, '');
    if (!id) continue;
    const r = runs.get(id) || { id };
    if (e.eventType === '$scavengeStarted') {
      r.started = e.updated;
      r.node = d.nodeEndpoint;
    } else if (e.eventType === '$scavengeCompleted') {
      r.completed = e.updated;
      r.result = d.result;
      r.error = d.error;
      r.timeTaken = d.timeTaken;
      r.spaceSaved = d.spaceSaved;
      r.node = r.node || d.nodeEndpoint;
    }
    runs.set(id, r);
  }
  const rows = [...runs.values()].sort((a, b) => String(b.started || b.completed).localeCompare(String(a.started || a.completed)));
  return table(
    [
      { label: 'Scavenge', cell: (r) => h('a', { href: f.route('admin', 'scavenges', r.id), class: 'mono' }, r.id.slice(0, 8)) },
      { label: 'Node', cell: (r) => h('span', { class: 'mono' }, r.node || '–') },
      { label: 'Started', cell: (r) => (r.started ? f.time(r.started) : '–') },
      { label: 'Result', cell: (r) => (r.result ? badge(r.result) : badge('running', 'info')) },
      { label: 'Time taken', cell: (r) => (r.timeTaken ? f.duration(f.timespan(r.timeTaken)) : '–'), class: 'num' },
      { label: 'Space saved', cell: (r) => (r.spaceSaved !== undefined ? f.bytes(r.spaceSaved) : '–'), class: 'num' },
      { label: 'Error', cell: (r) => r.error || '' },
    ],
    rows,
    { id: 'scavenge-history', empty: 'No scavenge has run yet.' },
  );
}
