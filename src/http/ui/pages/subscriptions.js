// Persistent subscriptions: every group from `GET /subscriptions` (polled every 2 s), grouped by
// stream, with the last known and last processed event numbers, how far behind the group is, its
// rate, connections, in-flight messages and status.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, badge, errorSlot } from '../ui.js';

export async function render(ctx) {
  const errors = errorSlot();
  const host = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(
    ctx.main,
    pageHeader(
      'Persistent subscriptions',
      'Competing consumer groups, by stream',
      session.isOps() ? h('a', { class: 'btn primary', href: '#/subscriptions/new', id: 'new-subscription' }, 'New subscription') : null,
    ),
    errors.el,
    card(null, host),
  );
  ctx.poll(async () => {
    let list;
    try {
      list = await api.get('subscriptions', { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET /subscriptions');
      return;
    }
    errors.clear();
    replace(host, view(Array.isArray(list) ? list : []));
  }, 2000);
}

function view(list) {
  if (!list.length) return h('p', { class: 'muted', id: 'subscriptions-empty' }, 'No subscription groups yet.');
  const byStream = new Map();
  for (const s of list) {
    if (!byStream.has(s.eventStreamId)) byStream.set(s.eventStreamId, []);
    byStream.get(s.eventStreamId).push(s);
  }
  const cols = ['Group', 'Status', 'Last known', 'Last processed', 'Behind', 'Msgs/s', 'Processed', 'Connections', 'In flight'];
  const rows = [];
  for (const [stream, groups] of [...byStream.entries()].sort((a, b) => a[0].localeCompare(b[0]))) {
    const behind = groups.reduce((a, g) => a + Math.max(0, Number(g.lastKnownEventNumber) - Number(g.lastProcessedEventNumber)), 0);
    rows.push(
      h(
        'tr',
        { class: 'group-head' },
        h('td', { colspan: cols.length }, 'Stream ', h('a', { href: f.route('streams', stream) }, stream), h('span', { class: 'muted' }, ` · ${groups.length} group(s), ${f.num(behind)} behind`)),
      ),
    );
    for (const g of groups.sort((a, b) => a.groupName.localeCompare(b.groupName))) {
      const b = Math.max(0, Number(g.lastKnownEventNumber) - Number(g.lastProcessedEventNumber));
      rows.push(
        h(
          'tr',
          { 'data-group': `${stream}::${g.groupName}` },
          h('td', h('a', { href: f.route('subscriptions', stream, g.groupName) }, g.groupName)),
          h('td', badge(g.status)),
          h('td', { class: 'num' }, f.num(g.lastKnownEventNumber)),
          h('td', { class: 'num' }, f.num(g.lastProcessedEventNumber)),
          h('td', { class: 'num' }, b > 0 ? h('span', { class: 'badge warn' }, f.num(b)) : '0'),
          h('td', { class: 'num' }, f.num(g.averageItemsPerSecond, 1)),
          h('td', { class: 'num' }, f.num(g.totalItemsProcessed)),
          h('td', { class: 'num' }, f.num(g.connectionCount)),
          h('td', { class: 'num' }, f.num(g.totalInFlightMessages)),
        ),
      );
    }
  }
  return h(
    'div',
    { class: 'table-wrap', id: 'subscriptions' },
    h('table', { class: 'data' }, h('thead', h('tr', cols.map((c, i) => h('th', { scope: 'col', class: i >= 2 ? 'num' : null }, c)))), h('tbody', rows)),
  );
}
