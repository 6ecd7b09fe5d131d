// One projection, in three tabs.
// Overview: `GET /projection/{name}/statistics`, `/state[?partition=]` and `/result[?partition=]`
// polled every 2 s, the source and definition (`GET /projection/{name}/query?config=yes`), and the
// commands start/stop/reset (`POST …/command/enable|disable|reset`) and delete
// (`DELETE /projection/{name}?deleteStateStream=&deleteCheckpointStream=&deleteEmittedStreams=`).
// Edit: the source, `PUT /projection/{name}/query?emit=yes|no`. Config: `GET`/`PUT …/config`.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, dl, badge, pre, errorBox, errorSlot, act, confirmDialog, tabs, field, input, textarea, notice, toast } from '../ui.js';

const CONFIG_FIELDS = [
  ['emitEnabled', 'Emit enabled', 'bool'],
  ['trackEmittedStreams', 'Track emitted streams', 'bool'],
  ['checkpointAfterMs', 'Checkpoint after (ms)', 'num'],
  ['checkpointHandledThreshold', 'Checkpoint handled threshold', 'num'],
  ['checkpointUnhandledBytesThreshold', 'Checkpoint unhandled bytes threshold', 'num'],
  ['pendingEventsThreshold', 'Pending events threshold', 'num'],
  ['maxWriteBatchLength', 'Max write batch length', 'num'],
  ['maxAllowedWritesInFlight', 'Max allowed writes in flight', 'num'],
];

export async function render(ctx) {
  const { name } = ctx.params;
  const tab = ctx.params.tab || 'overview';
  const base = `projection/${api.seg(name)}`;
  const errors = errorSlot();
  const nav = tabs(
    [
      [f.route('projections', name), 'Overview'],
      [f.route('projections', name, 'edit'), 'Edit source'],
      [f.route('projections', name, 'config'), 'Config'],
    ],
    tab === 'overview' ? f.route('projections', name) : f.route('projections', name, tab),
  );
  const statusHost = h('span');
  const actions = commands(ctx, name, base, errors);
  replace(ctx.main, pageHeader(name, statusHost, ...actions), errors.el, nav, h('p', { class: 'loading' }, 'Loading…'));
  const body = h('div');
  ctx.main.lastChild.replaceWith(body);

  if (tab === 'edit') return edit(ctx, name, base, body);
  if (tab === 'config') return config(ctx, name, base, body);
  return overview(ctx, name, base, body, statusHost, errors, actions);
}

function commands(ctx, name, base, errors) {
  if (!session.isOps()) return [];
  const mk = (label, id, kind = '') => h('button', { type: 'button', class: `btn ${kind}`.trim(), id }, label);
  const start = mk('Start', 'pj-start', 'primary');
  const stop = mk('Stop', 'pj-stop');
  const reset = mk('Reset', 'pj-reset');
  const del = mk('Delete', 'pj-delete', 'danger');
  const cmd = (btn, c) => act(btn, () => api.post(`${base}/command/${c}`), { ok: `${name}: ${c} sent`, slot: errors, context: c });
  start.addEventListener('click', () => cmd(start, 'enable'));
  stop.addEventListener('click', () => cmd(stop, 'disable'));
  reset.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Reset ${name}?`,
      message: 'The projection starts again from the beginning of its source; its state is rebuilt. Emitted events are not removed.',
      confirm: 'Reset',
      danger: true,
    });
    if (ok) cmd(reset, 'reset');
  });
  del.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Delete ${name}?`,
      message: 'Only a stopped or faulted projection can be deleted.',
      confirm: 'Delete projection',
      danger: true,
      checks: [
        { name: 'deleteStateStream', label: 'Delete the state stream', checked: false },
        { name: 'deleteCheckpointStream', label: 'Delete the checkpoint stream', checked: false },
        { name: 'deleteEmittedStreams', label: 'Delete the emitted streams', checked: false },
      ],
    });
    if (!ok) return;
    const done = await act(del, () => api.del(base, { query: Object.fromEntries(Object.entries(ok.checks).map(([k, v]) => [k, v ? 'true' : 'false'])) }), { slot: errors, context: 'Delete' });
    if (done) {
      toast(`Projection ${name} deleted`);
      ctx.go('#/projections');
    }
  });
  const buttons = [start, stop, reset, del];
  // Start only when not running, stop only when running (set from each statistics poll).
  buttons.update = (status) => {
    const running = /running/i.test(status || '');
    start.disabled = running;
    stop.disabled = !running;
  };
  return buttons;
}

async function overview(ctx, name, base, body, statusHost, errors, actions) {
  const statsHost = h('div', { id: 'pj-stats' });
  const partition = input({ id: 'pj-partition', placeholder: '(whole projection)', autocomplete: 'off', value: ctx.query.get('partition') || '' });
  const stateHost = h('div', { id: 'pj-state' }, h('p', { class: 'loading' }, 'Loading…'));
  const resultHost = h('div', { id: 'pj-result' });
  const queryHost = h('div', { id: 'pj-query' });
  const faultHost = h('div');
  const partForm = h('form', { class: 'inline-form' }, h('div', { class: 'field' }, h('label', { for: 'pj-partition' }, 'Partition'), partition), h('button', { type: 'submit', class: 'btn' }, 'Show'));
  partForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    tick();
  });
  replace(
    body,
    faultHost,
    h('div', { class: 'grid two' }, card('Statistics', statsHost), card('State', partForm, stateHost, h('h3', 'Result'), resultHost)),
    card('Source', queryHost),
  );

  let prev = null;
  const tick = async () => {
    let stat;
    try {
      const doc = await api.get(`${base}/statistics`, { signal: ctx.signal });
      stat = (doc.projections || [])[0];
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET statistics');
      return;
    }
    if (!stat) return;
    errors.clear();
    const now = Date.now();
    const n = Number(stat.eventsProcessedAfterRestart) || 0;
    const rate = prev && n >= prev.n && now > prev.t ? ((n - prev.n) * 1000) / (now - prev.t) : null;
    prev = { n, t: now };
    replace(statusHost, badge(stat.status), ' ', h('span', { class: 'muted' }, stat.mode));
    actions.update?.(stat.status);
    replace(faultHost, /fault/i.test(stat.status) ? notice(`Faulted: ${stat.stateReason || 'no reason given'}`, 'error') : null);
    replace(
      statsHost,
      dl([
        ['Status', h('span', { id: 'pj-status' }, stat.status)],
        ['Mode', stat.mode],
        ['Progress', h('div', { class: 'progress-cell' }, h('progress', { max: 100, value: Math.max(0, Number(stat.progress) || 0) }), h('span', f.pct(stat.progress)))],
        ['Events processed', h('span', { id: 'pj-processed' }, f.num(stat.eventsProcessedAfterRestart))],
        ['Events/s', f.num(rate, 1)],
        ['Position', h('span', { class: 'mono' }, stat.position || '–')],
        ['Last checkpoint', h('span', { class: 'mono' }, stat.lastCheckpoint || '–')],
        ['Checkpoint status', stat.checkpointStatus || '–'],
        ['Buffered events', f.num(stat.bufferedEvents)],
        ['Partitions cached', f.num(stat.partitionsCached)],
        ['Reads / writes in progress', `${f.num(stat.readsInProgress)} / ${f.num(stat.writesInProgress)}`],
        ['Pending writes (before / after checkpoint)', `${f.num(stat.writePendingEventsBeforeCheckpoint)} / ${f.num(stat.writePendingEventsAfterCheckpoint)}`],
        ['Core processing time', `${f.num(stat.coreProcessingTime)} ms`],
        ['Version / epoch', `${stat.version} / ${stat.epoch}`],
        stat.stateReason ? ['Reason', stat.stateReason] : null,
      ]),
    );
    const q = partition.value ? { partition: partition.value } : {};
    for (const [what, host] of [['state', stateHost], ['result', resultHost]]) {
      try {
        const r = await api.call('GET', `${base}/${what}`, { query: q, signal: ctx.signal });
        const text = r.text.trim();
        replace(host, text ? pre(f.prettyJson(text)) : h('p', { class: 'muted' }, `No ${what}${partition.value ? ' for this partition' : ''} yet.`));
      } catch (e) {
        if (e.name === 'AbortError') return;
        replace(host, errorBox(e, `GET ${what}`));
      }
    }
  };
  ctx.poll(tick, 2000);

  try {
    const q = await api.get(`${base}/query`, { query: { config: 'yes' }, signal: ctx.signal });
    replace(
      queryHost,
      pre(q.query || '', 'source'),
      h('h3', 'Definition'),
      dl([
        ['Type', q.type || 'JS'],
        ['Emit enabled', q.emitEnabled ? 'yes' : 'no'],
        ['Track emitted streams', q.trackEmittedStreams ? 'yes' : 'no'],
        ['Checkpoints', q.checkpointsEnabled ? 'yes' : 'no'],
        ['Result stream', q.outputConfig?.resultStreamName ? h('a', { href: f.route('streams', q.outputConfig.resultStreamName) }, q.outputConfig.resultStreamName) : '–'],
      ]),
      h('details', h('summary', 'Definition JSON'), pre(JSON.stringify(q.definition || {}, null, 2))),
    );
  } catch (e) {
    if (e.name !== 'AbortError') replace(queryHost, errorBox(e, 'GET query'));
  }
}

async function edit(ctx, name, base, body) {
  let q;
  try {
    q = await api.get(`${base}/query`, { query: { config: 'yes' }, signal: ctx.signal });
  } catch (e) {
    if (e.name !== 'AbortError') replace(body, errorBox(e, 'GET query'));
    return;
  }
  const errors = errorSlot();
  const source = textarea({ id: 'pj-edit-source', class: 'tall' }, q.query || '');
  const emit = h('input', { type: 'checkbox', id: 'pj-edit-emit', checked: !!q.emitEnabled });
  const save = h('button', { type: 'submit', class: 'btn primary', id: 'pj-save' }, 'Save source');
  const form = h('form', { class: 'form wide' }, errors.el, field('Source (JavaScript)', source), field('Emit enabled', emit), h('div', { class: 'form-actions' }, save));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const done = await act(save, () => api.put(`${base}/query`, source.value, { query: { emit: emit.checked ? 'yes' : 'no' }, contentType: 'application/javascript' }), { slot: errors, context: 'Save source' });
    if (done) {
      toast('Source saved');
      ctx.go(f.route('projections', name));
    }
  });
  replace(body, card(null, session.isOps() ? form : [notice('Changing the source needs $ops or $admins.', 'info'), pre(q.query || '')]));
}

async function config(ctx, name, base, body) {
  let c;
  try {
    c = await api.get(`${base}/config`, { signal: ctx.signal });
  } catch (e) {
    if (e.name !== 'AbortError') replace(body, errorBox(e, 'GET config'));
    return;
  }
  const errors = errorSlot();
  const inputs = CONFIG_FIELDS.map(([k, label, kind]) => {
    const el = kind === 'bool' ? h('input', { type: 'checkbox', id: `cfg-${k}`, checked: !!c[k] }) : input({ type: 'number', min: 0, id: `cfg-${k}`, value: c[k] ?? 0 });
    return [k, kind, el, label];
  });
  const save = h('button', { type: 'submit', class: 'btn primary', id: 'cfg-save' }, 'Save config');
  const form = h(
    'form',
    { class: 'form wide' },
    errors.el,
    notice('The configuration changes only while the projection is stopped or faulted. A number left at 0 keeps its value.', 'info'),
    h('div', { class: 'fields' }, inputs.map(([, , el, label]) => field(label, el))),
    h('div', { class: 'form-actions' }, save),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const doc = {};
    for (const [k, kind, el] of inputs) doc[k] = kind === 'bool' ? el.checked : Number(el.value) || 0;
    const done = await act(save, () => api.put(`${base}/config`, doc), { slot: errors, context: 'Save config' });
    if (done) {
      toast('Config saved');
      ctx.router.refresh();
    }
  });
  replace(body, h('div', { class: 'grid two' }, card('Config', form), card('As the node reports it', pre(JSON.stringify(c, null, 2)))));
}
