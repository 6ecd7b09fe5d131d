// Feed pages of events, shared by the stream view, the `$all` browser and parked messages: the
// events table (links resolved: the row names the event a `$>` link points to), an "expand all"
// toggle that shows every event's data and metadata pretty-printed (so the browser's find works),
// and the first/previous/next/last pager built from the feed's Atom links.

import { h } from './dom.js';
import * as api from './api.js';
import * as f from './format.js';
import { table } from './ui.js';

/** `n@stream` from an entry's title (entries of unresolvable links carry nothing else). */
export function titleRef(e) {
  const m = /^(-?\d+)@(.*)$/.exec(e?.title || '');
  return m ? { number: Number(m[1]), stream: m[2] } : { number: null, stream: null };
}

/** The stream an entry's event lives in (resolved through links when they resolve). */
export function entryStream(e) {
  return e.streamId ?? titleRef(e).stream;
}

/** Whether the entry is a link whose target is gone (a deleted stream or event). */
export function unresolved(e) {
  return e.streamId === undefined && e.summary === '$>';
}

/** The hash of an entry's own page: its place in the stream read (the link, if it is one). */
export function entryHref(e) {
  const stream = e.positionStreamId ?? entryStream(e);
  const number = e.positionEventNumber ?? e.eventNumber ?? titleRef(e).number;
  return f.route('streams', stream, number);
}

function preview(text, max = 90) {
  if (text === undefined || text === null || text === '') return h('span', { class: 'muted' }, '–');
  let t = String(text);
  try {
    t = JSON.stringify(JSON.parse(t));
  } catch {
    /* not JSON: shown as is */
  }
  return h('span', { class: 'mono', title: t.length > max ? t.slice(0, 2000) : null }, t.length > max ? t.slice(0, max) + '…' : t);
}

/**
 * The events table. opts: `{ id, expand, showStream, newIds (Set of eventIds to flash), empty }`.
 */
export function eventsTable(entries, opts = {}) {
  const cols = [
    { label: '#', cell: (e) => (e.positionEventNumber ?? e.eventNumber) === undefined ? '–' : h('a', { href: entryHref(e), class: 'nowrap' }, `${e.positionEventNumber ?? e.eventNumber}`), class: 'num' },
    opts.showStream ? { label: 'Stream', cell: (e) => h('a', { href: f.route('streams', e.positionStreamId ?? entryStream(e)), class: 'break' }, e.positionStreamId ?? entryStream(e)) } : null,
    {
      label: 'Type',
      cell: (e) => [
        unresolved(e)
          ? h('span', { class: 'muted' }, 'link to ', h('a', { href: f.route('streams', titleRef(e).stream) }, e.title), ' (target deleted)')
          : h('span', { class: 'nowrap' }, e.eventType),
        e.positionStreamId && e.streamId && e.positionStreamId !== e.streamId
          ? h('div', { class: 'muted' }, 'link → ', h('a', { href: f.route('streams', e.streamId, e.eventNumber) }, `${e.eventNumber}@${e.streamId}`))
          : null,
      ],
    },
    { label: 'Created', cell: (e) => h('span', { class: 'nowrap', title: e.updated }, f.time(e.updated)) },
    {
      label: opts.expand ? 'Data and metadata' : 'Data',
      cell: (e) =>
        opts.expand
          ? h(
              'div',
              h('pre', { class: 'code small' }, f.prettyJson(e.data ?? '')),
              e.metaData ? h('pre', { class: 'code small' }, f.prettyJson(e.metaData)) : null,
            )
          : preview(e.data),
    },
    { label: 'Event id', cell: (e) => h('span', { class: 'mono muted nowrap' }, e.eventId || '–') },
  ].filter(Boolean);
  return table(cols, entries, {
    id: opts.id || 'events',
    empty: opts.empty || 'No events on this page.',
    rowClass: (e) => (opts.newIds?.has(e.eventId) ? 'new-row' : null),
  });
}

/**
 * Pager buttons from a feed document's links. `toHash({ pos, dir, count })` gives the route of a
 * page. Labels follow the feed: "first" is the newest page, "last" the oldest.
 */
export function pager(doc, toHash, extra = []) {
  const btn = (rel, label) => {
    const p = api.pageOf(doc, rel);
    return p
      ? h('a', { class: 'btn small', href: toHash(p), 'data-rel': rel }, label)
      : h('span', { class: 'btn small', 'aria-disabled': 'true', 'data-rel': rel }, label);
  };
  return h(
    'nav',
    { class: 'pager', 'aria-label': 'Pages' },
    btn('first', '⇤ Newest'),
    btn('previous', '← Newer'),
    btn('next', 'Older →'),
    btn('last', 'Oldest ⇥'),
    ...extra,
  );
}
