// One subscription group: `GET /subscriptions/{stream}/{group}/info` polled every 2 s (counters,
// buffers, parked count, connections, config), with edit, delete
// (`DELETE /subscriptions/{stream}/{group}`), replay parked messages
// (`POST …/replayParked`) and a link to the parked messages.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, dl, table, badge, errorSlot, act, confirmDialog, toast } from '../ui.js';
import { SETTINGS } from './subscription-edit.js';

export async function render(ctx) {
  const { stream, group } = ctx.params;
  const base = `subscriptions/${api.seg(stream)}/${api.seg(group)}`;
  const errors = errorSlot();
  const del = h('button', { type: 'button', class: 'btn danger', id: 'ps-delete' }, 'Delete');
  const replay = h('button', { type: 'button', class: 'btn', id: 'ps-replay' }, 'Replay parked');
  const statusHost = h('span');
  const statsHost = h('div', { id: 'ps-stats' }, h('p', { class: 'loading' }, 'Loading…'));
  const configHost = h('div', { id: 'ps-config' });
  const connHost = h('div', { id: 'ps-connections' });
  replace(
    ctx.main,
    pageHeader(
      `${group}`,
      h('span', 'on ', h('a', { href: f.route('streams', stream) }, stream), ' ', statusHost),
      session.isOps() ? h('a', { class: 'btn', href: f.route('subscriptions', stream, group, 'edit'), id: 'ps-edit' }, 'Edit') : null,
      h('a', { class: 'btn', href: f.route('subscriptions', stream, group, 'parked'), id: 'ps-parked' }, 'Parked messages'),
      session.isOps() ? replay : null,
      session.isOps() ? del : null,
    ),
    errors.el,
    h('div', { class: 'grid two' }, card('Counters', statsHost), card('Settings', configHost)),
    card('Connections', connHost),
  );

  ctx.poll(async () => {
    let info;
    try {
      info = await api.get(`${base}/info`, { signal: ctx.signal });
    } catch (e) {
      if (e.name !== 'AbortError') errors.show(e, 'GET info');
      return;
    }
    errors.clear();
    const behind = Math.max(0, Number(info.lastKnownEventNumber) - Number(info.lastProcessedEventNumber));
    replace(statusHost, badge(info.status));
    replace(
      statsHost,
      dl([
        ['Status', info.status],
        ['Last known event', h('span', { id: 'ps-known' }, f.num(info.lastKnownEventNumber))],
        ['Last processed event', h('span', { id: 'ps-processed' }, f.num(info.lastProcessedEventNumber))],
        ['Behind', f.num(behind)],
        ['Total processed', h('span', { id: 'ps-total' }, f.num(info.totalItemsProcessed))],
        ['Msgs/s', f.num(info.averageItemsPerSecond, 1)],
        ['Since last measurement', f.num(info.countSinceLastMeasurement)],
        ['In flight', f.num(info.totalInFlightMessages)],
        ['Outstanding', f.num(info.outstandingMessagesCount)],
        ['Parked', h('span', { id: 'ps-parked-count' }, f.num(info.parkedMessageCount))],
        ['Buffers (read / live / retry)', `${f.num(info.readBufferCount)} / ${f.num(info.liveBufferCount)} / ${f.num(info.retryBufferCount)}`],
      ]),
    );
    const c = info.config || {};
    replace(configHost, dl(SETTINGS.map(([k, label, def]) => [label, h('span', { class: c[k] === def ? 'muted' : null }, String(c[k] ?? '–'))])));
    replace(
      connHost,
      table(
        [
          { label: 'From', cell: (x) => h('span', { class: 'mono' }, x.from) },
          { label: 'User', cell: (x) => x.username || '–' },
          { label: 'Msgs/s', cell: (x) => f.num(x.averageItemsPerSecond, 1), class: 'num' },
          { label: 'Processed', cell: (x) => f.num(x.totalItemsProcessed), class: 'num' },
          { label: 'Available slots', cell: (x) => f.num(x.availableSlots), class: 'num' },
          { label: 'In flight', cell: (x) => f.num(x.inFlightMessages), class: 'num' },
        ],
        info.connections || [],
        { empty: 'No consumer is connected.' },
      ),
    );
  }, 2000);

  replay.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: 'Replay parked messages?', message: 'Every parked message of this group is delivered again.', confirm: 'Replay' });
    if (ok) await act(replay, () => api.post(`${base}/replayParked`), { ok: 'Parked messages replayed', slot: errors, context: 'Replay parked' });
  });
  del.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: `Delete ${group}?`, message: `The group ${group} on ${stream} and its checkpoint go; consumers are disconnected.`, confirm: 'Delete group', danger: true });
    if (!ok) return;
    const done = await act(del, () => api.del(base), { slot: errors, context: 'Delete' });
    if (done) {
      toast(`Subscription ${group} deleted`);
      ctx.go('#/subscriptions');
    }
  });
}
