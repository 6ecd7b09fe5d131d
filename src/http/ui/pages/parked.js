// A subscription group's parked messages: the stream `$persistentsubscription-{stream}::{group}-parked`
// read page by page (`GET /streams/…?embed=tryharder`), links resolved to the parked events, with
// replay (`POST /subscriptions/{stream}/{group}/replayParked`).

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, errorBox, errorSlot, act } from '../ui.js';
import { eventsTable, pager } from '../feed.js';

export async function render(ctx) {
  const { stream, group, pos, dir } = ctx.params;
  const count = Number(ctx.params.count) || 20;
  const parked = `$persistentsubscription-${stream}::${group}-parked`;
  const errors = errorSlot();
  const replay = h('button', { type: 'button', class: 'btn', id: 'parked-replay' }, 'Replay all parked');
  replay.addEventListener('click', () =>
    act(replay, () => api.post(`subscriptions/${api.seg(stream)}/${api.seg(group)}/replayParked`), { ok: 'Parked messages replayed', slot: errors, context: 'Replay parked' }),
  );
  const host = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(
    ctx.main,
    pageHeader(
      `Parked: ${group}`,
      h('span', 'on ', h('a', { href: f.route('streams', stream) }, stream), ' · stream ', h('a', { href: f.route('streams', parked) }, parked)),
      h('a', { class: 'btn', href: f.route('subscriptions', stream, group) }, 'Back to group'),
      session.isOps() ? replay : null,
    ),
    errors.el,
    card(null, host),
  );
  try {
    const doc = await api.feed(parked, pos ? { pos, dir, count, signal: ctx.signal } : { signal: ctx.signal });
    replace(host, pager(doc, (p) => f.route('subscriptions', stream, group, 'parked', p.pos, p.dir, p.count)), eventsTable(doc.entries || [], { id: 'parked-events', empty: 'No parked messages.' }));
  } catch (e) {
    if (e.name === 'AbortError') return;
    replace(host, e.status === 404 ? h('p', { class: 'muted', id: 'parked-events' }, 'No parked messages: nothing was ever parked.') : errorBox(e, `GET /streams/${parked}`));
  }
}
