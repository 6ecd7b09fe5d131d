// One event (`GET /streams/{id}/{n}?embed=tryharder` as application/vnd.eventstore.atom+json):
// its data and metadata pretty-printed, the link it was read through resolved (a `$>` in a
// projection's stream shows the event it points to), neighbours, and "add one like this".

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, dl, pre, errorBox, notice } from '../ui.js';

export async function render(ctx) {
  const { stream } = ctx.params;
  const n = Number(ctx.params.number);
  replace(ctx.main, pageHeader(`${n}@${stream}`, 'Event'), h('p', { class: 'loading' }, 'Loading…'));
  let e;
  try {
    e = await api.event(stream, n, ctx.signal);
  } catch (err) {
    if (err.name === 'AbortError') return;
    replace(ctx.main, pageHeader(`${n}@${stream}`, 'Event'), errorBox(err, `GET /streams/${stream}/${n}`), h('p', h('a', { href: f.route('streams', stream) }, `Back to ${stream}`)));
    return;
  }
  const content = e.content || {};
  const isLink = e.positionStreamId && e.streamId && (e.positionStreamId !== e.streamId || Number(e.positionEventNumber) !== Number(e.eventNumber));
  const dataText = content.data !== undefined ? f.prettyJson(content.data) : f.prettyJson(e.data);
  const metaText = content.metadata !== undefined && content.metadata !== '' ? f.prettyJson(content.metadata) : f.prettyJson(e.metaData || '');
  const likeThis = `${f.route('streams', stream, 'add')}?like=${encodeURIComponent(JSON.stringify({ type: e.eventType, data: dataText.slice(0, 4000), meta: metaText.slice(0, 2000) }))}`;

  replace(
    ctx.main,
    pageHeader(
      `${n}@${stream}`,
      e.eventType,
      h('a', { class: 'btn', href: f.route('streams', stream) }, 'Stream'),
      n > 0 ? h('a', { class: 'btn', href: f.route('streams', stream, n - 1), id: 'prev-event' }, '← Previous') : null,
      h('a', { class: 'btn', href: f.route('streams', stream, n + 1), id: 'next-event' }, 'Next →'),
      h('a', { class: 'btn', href: likeThis }, 'Add one like this'),
    ),
    isLink
      ? notice(
          h('span', 'Read through a link: ', h('strong', `${e.positionEventNumber}@${e.positionStreamId}`), ' points to ', h('a', { href: f.route('streams', e.streamId, e.eventNumber), id: 'link-target' }, `${e.eventNumber}@${e.streamId}`), '.'),
          'info',
        )
      : null,
    h(
      'div',
      { class: 'grid two' },
      card(
        'Event',
        dl([
          ['Stream', h('a', { href: f.route('streams', e.streamId) }, e.streamId)],
          ['Number', String(e.eventNumber)],
          ['Type', e.eventType],
          ['Event id', h('span', { class: 'mono' }, e.eventId)],
          ['Created', `${f.time(e.updated)} (${f.ago(e.updated)})`],
          ['JSON', e.isJson ? 'yes' : 'no'],
        ]),
      ),
      e.linkMetaData ? card('Link metadata', pre(f.prettyJson(e.linkMetaData))) : card('Metadata', metaText ? pre(metaText) : h('p', { class: 'muted' }, 'No metadata.')),
    ),
    card('Data', h('div', { id: 'event-data' }, dataText ? pre(dataText) : h('p', { class: 'muted' }, 'No data.'))),
    e.linkMetaData ? card('Metadata', metaText ? pre(metaText) : h('p', { class: 'muted' }, 'No metadata.')) : null,
  );
}
