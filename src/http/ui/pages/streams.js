// Stream browser: open a stream by name and, for admins (the default ACL of these system
// streams), the recently created streams (the head of `$streams`) and the recently changed ones
// (the head of `$all`). Refreshed every 5 s.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import * as session from '../session.js';
import { pageHeader, card, table, errorBox, field, input, notice, badge } from '../ui.js';
import { entryStream, unresolved } from '../feed.js';

export async function render(ctx) {
  const name = input({ id: 'open-stream', name: 'stream', placeholder: 'e.g. orders-42', autocomplete: 'off', required: true });
  const form = h(
    'form',
    { class: 'inline-form', id: 'open-stream-form' },
    field('Stream name', name),
    h('button', { type: 'submit', class: 'btn primary' }, 'Open'),
  );
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const v = name.value.trim();
    if (v) ctx.go(f.route('streams', v));
  });
  const showSystem = h('input', { type: 'checkbox', id: 'show-system' });
  const created = h('div', h('p', { class: 'loading' }, 'Loading…'));
  const changed = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(
    ctx.main,
    pageHeader(
      'Stream browser',
      'Open a stream, or pick one that was created or changed recently.',
      h('a', { class: 'btn', href: '#/new-event' }, 'Add an event'),
      session.isAdmin() ? h('a', { class: 'btn', href: '#/all' }, 'Browse $all') : null,
    ),
    card(null, form),
    h('div', { class: 'row' }, showSystem, h('label', { for: 'show-system' }, 'Show system streams ($…)')),
    h('div', { class: 'grid two' }, card('Recently created streams', created), card('Recently changed streams', changed)),
  );

  let last = { created: [], changed: null };
  const draw = () => {
    const sys = showSystem.checked;
    const keep = (s) => sys || !s.startsWith('$');
    replace(created, streamList(last.created.filter((x) => keep(x.stream)), 'recent-created', 'No streams yet.'));
    if (last.changed !== null) replace(changed, streamList(last.changed.filter((x) => keep(x.stream)), 'recent-changed', 'Nothing written yet.'));
  };
  showSystem.addEventListener('change', draw);

  ctx.poll(async () => {
    if (!session.isAdmin()) {
      // $streams and $all are system streams: their default ACL lets only $admins read them.
      replace(created, notice('The recently created streams ($streams) are for $admins.', 'info'));
      replace(changed, notice('The recently changed streams ($all) are for $admins.', 'info'));
      return;
    }
    try {
      const doc = await api.feed('$streams', { pos: 'head', dir: 'backward', count: 50, embed: 'rich', signal: ctx.signal });
      last.created = (doc.entries || []).map((e) => ({ stream: entryStream(e), updated: e.updated, type: null, deleted: unresolved(e) })).filter((x) => x.stream);
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(created, errorBox(e, 'Recently created'));
      return;
    }
    {
      try {
        const doc = await api.feed('$all', { pos: 'head', dir: 'backward', count: 100, embed: 'rich', signal: ctx.signal });
        const seen = new Map();
        for (const e of doc.entries || []) {
          const stream = entryStream(e);
          if (stream && !seen.has(stream)) seen.set(stream, { stream, updated: e.updated, type: e.eventType || e.summary });
        }
        last.changed = [...seen.values()];
      } catch (e) {
        if (e.name === 'AbortError') return;
        replace(changed, errorBox(e, 'Recently changed'));
        return;
      }
    }
    draw();
  }, 5000);
}

function streamList(items, id, empty) {
  return table(
    [
      { label: 'Stream', cell: (x) => [h('a', { href: f.route('streams', x.stream), class: 'break' }, x.stream), x.deleted ? [' ', badge('deleted', 'bad')] : null] },
      { label: 'Last event', cell: (x) => x.type || '–' },
      { label: 'When', cell: (x) => h('span', { class: 'nowrap', title: x.updated }, f.ago(x.updated)) },
    ].filter((c) => id === 'recent-changed' || c.label !== 'Last event'),
    items,
    { id, empty },
  );
}
