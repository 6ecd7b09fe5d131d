// Projections: the list (`GET /projections/all-non-transient`, or `/projections/any` with the
// queries) polled every 2 s, with status, progress, events processed and events per second
// (computed between polls), the standard (system) projections apart, start/stop per row
// (`POST /projection/{name}/command/enable|disable`), enable all and disable all.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, table, badge, errorSlot, act, confirmDialog, toast } from '../ui.js';

const rates = new Map();

export async function render(ctx) {
  const errors = errorSlot();
  const withQueries = h('input', { type: 'checkbox', id: 'include-queries', checked: ctx.query.get('queries') === '1' });
  const userHost = h('div', h('p', { class: 'loading' }, 'Loading…'));
  const sysHost = h('div');
  let list = [];

  const enableAll = h('button', { type: 'button', class: 'btn', id: 'enable-all' }, 'Enable all');
  const disableAll = h('button', { type: 'button', class: 'btn', id: 'disable-all' }, 'Disable all');
  replace(
    ctx.main,
    pageHeader(
      'Projections',
      'Continuous, one-time and query projections',
      session.isOps() ? h('a', { class: 'btn primary', href: '#/projections/new', id: 'new-projection' }, 'New projection') : null,
      h('a', { class: 'btn', href: '#/query' }, 'Query'),
      session.isOps() ? enableAll : null,
      session.isOps() ? disableAll : null,
    ),
    errors.el,
    h('div', { class: 'row' }, withQueries, h('label', { for: 'include-queries' }, 'Include queries (transient projections)')),
    card('User projections', userHost),
    card('Standard projections', h('p', { class: 'muted' }, 'Built into the node; they index streams by category, event type and correlation id.'), sysHost),
  );

  const command = async (btn, name, cmd) => {
    await act(btn, () => api.post(`projection/${api.seg(name)}/command/${cmd}`), { ok: `${name}: ${cmd} sent`, slot: errors, context: `${cmd} ${name}` });
    tick();
  };

  const columns = [
    { label: 'Name', cell: (p) => h('a', { href: f.route('projections', p.name), class: 'break' }, p.name) },
    { label: 'Mode', cell: (p) => p.mode },
    { label: 'Status', cell: (p) => [badge(p.status), p.stateReason ? h('div', { class: 'muted' }, p.stateReason) : null] },
    { label: 'Progress', cell: (p) => h('div', { class: 'progress-cell' }, h('progress', { max: 100, value: Math.max(0, Number(p.progress) || 0) }), h('span', f.pct(p.progress))) },
    { label: 'Events processed', cell: (p) => f.num(p.eventsProcessedAfterRestart), class: 'num' },
    { label: 'Events/s', cell: (p) => f.num(rates.get(p.name)?.value, 1), class: 'num' },
    { label: 'Buffered', cell: (p) => f.num(p.bufferedEvents), class: 'num' },
    { label: 'Position', cell: (p) => h('span', { class: 'mono muted' }, p.position || '–') },
    {
      label: 'Actions',
      cell: (p) => {
        if (!session.isOps()) return '';
        const running = /running/i.test(p.status);
        const b = h('button', { type: 'button', class: 'btn small' }, running ? 'Stop' : 'Start');
        b.addEventListener('click', () => command(b, p.name, running ? 'disable' : 'enable'));
        return b;
      },
    },
  ];

  const draw = () => {
    const sys = list.filter((p) => p.name.startsWith('$'));
    const usr = list.filter((p) => !p.name.startsWith('$'));
    replace(userHost, table(columns, usr, { id: 'projections', empty: 'No projections yet.' }));
    replace(sysHost, table(columns, sys, { id: 'standard-projections', empty: 'The standard projections are not running on this node (RunProjections).' }));
  };

  const tick = async () => {
    try {
      const doc = await api.get(withQueries.checked ? 'projections/any' : 'projections/all-non-transient', { signal: ctx.signal });
      list = doc.projections || [];
      const now = Date.now();
      for (const p of list) {
        const r = rates.get(p.name);
        const n = Number(p.eventsProcessedAfterRestart) || 0;
        if (r && n >= r.n && now > r.t) rates.set(p.name, { n, t: now, value: ((n - r.n) * 1000) / (now - r.t) });
        else rates.set(p.name, { n, t: now, value: r && n >= r.n ? r.value : null });
      }
      errors.clear();
      draw();
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET /projections');
    }
  };
  withQueries.addEventListener('change', tick);
  ctx.poll(tick, 2000);

  const all = async (btn, cmd) => {
    const names = list.filter((p) => !p.name.startsWith('$') && (cmd === 'enable' ? !/running/i.test(p.status) : /running/i.test(p.status))).map((p) => p.name);
    if (!names.length) {
      toast('Nothing to change');
      return;
    }
    const ok = await confirmDialog({ title: `${cmd === 'enable' ? 'Enable' : 'Disable'} ${names.length} projection(s)?`, message: names.join(', '), confirm: cmd === 'enable' ? 'Enable all' : 'Disable all' });
    if (!ok) return;
    await act(btn, async () => {
      for (const n of names) await api.post(`projection/${api.seg(n)}/command/${cmd}`);
    }, { ok: `${cmd} sent to ${names.length} projection(s)`, slot: errors, context: cmd });
    tick();
  };
  enableAll.addEventListener('click', () => all(enableAll, 'enable'));
  disableAll.addEventListener('click', () => all(disableAll, 'disable'));
}
