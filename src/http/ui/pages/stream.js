// One stream: its feed page by page (`GET /streams/{id}[/{pos}/{dir}/{n}]?embed=tryharder`),
// live follow at the head (long polls of `ES-LongPoll: 10` on the next position, at most one a
// second, none while the tab is hidden), links to the metadata and ACL editor and the add-event
// form, and soft or hard delete (`DELETE /streams/{id}`, `ES-HardDelete`) after confirmation.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, errorBox, errorSlot, confirmDialog, act, notice, toast } from '../ui.js';
import { eventsTable, pager } from '../feed.js';
import { whenVisible, sleep } from '../poll.js';

const COUNT = 20;

export async function render(ctx) {
  const stream = ctx.params.stream;
  const paged = ctx.params.pos !== undefined;
  const count = Number(ctx.params.count) || COUNT;
  const errors = errorSlot();
  const expandKey = 'annal.expand';
  let expand = sessionStorage.getItem(expandKey) === '1';
  let following = false;
  let entries = [];
  let doc = null;
  const newIds = new Set();

  const tableHost = h('div', h('p', { class: 'loading' }, 'Loading events…'));
  const pagerHost = h('div');
  const followBtn = h('button', { type: 'button', class: 'btn small', id: 'follow', 'aria-pressed': 'false' }, '▶ Follow live');
  const expandBtn = h('button', { type: 'button', class: 'btn small', id: 'expand-all', 'aria-pressed': String(expand) }, expand ? 'Collapse all' : 'Expand all');
  const status = h('span', { class: 'muted', 'aria-live': 'polite' });

  const softBtn = h('button', { type: 'button', class: 'btn danger', id: 'soft-delete' }, 'Delete');
  const hardBtn = h('button', { type: 'button', class: 'btn danger', id: 'hard-delete' }, 'Hard delete');

  replace(
    ctx.main,
    pageHeader(
      stream,
      paged ? `Events from ${ctx.params.pos}, ${ctx.params.dir}, ${count} per page` : 'Newest events',
      h('a', { class: 'btn primary', href: f.route('streams', stream, 'add'), id: 'add-event' }, 'Add event'),
      h('a', { class: 'btn', href: f.route('streams', stream, 'metadata'), id: 'edit-metadata' }, 'Metadata & ACL'),
      softBtn,
      hardBtn,
    ),
    errors.el,
    stream.startsWith('$') ? notice('A system stream: written by the node itself. Be careful when writing to it or deleting it.', 'warn') : null,
    card(null, h('div', { class: 'row' }, pagerHost, h('span', { class: 'spacer' }), status, followBtn, expandBtn), tableHost),
  );

  const draw = () => {
    replace(tableHost, eventsTable(entries, { id: 'events', expand, newIds, empty: 'This stream has no events on this page.' }));
  };
  const toHash = (p) => f.route('streams', stream, p.pos, p.dir, p.count);

  async function load() {
    try {
      doc = await api.feed(stream, paged ? { pos: ctx.params.pos, dir: ctx.params.dir, count, signal: ctx.signal } : { signal: ctx.signal });
    } catch (e) {
      if (e.name === 'AbortError') return;
      replace(
        tableHost,
        errorBox(e, `GET /streams/${stream}`),
        e.status === 404 ? h('p', 'The stream has no events yet. ', h('a', { href: f.route('streams', stream, 'add') }, 'Add the first event')) : null,
      );
      followBtn.disabled = true;
      return;
    }
    entries = doc.entries || [];
    replace(pagerHost, pager(doc, toHash));
    followBtn.disabled = !doc.headOfStream && paged;
    draw();
  }

  async function follow() {
    // Long polls from the position after the newest shown event, while following.
    let lastStart = 0;
    while (following && ctx.alive) {
      await whenVisible(ctx.signal);
      const wait = lastStart + 1000 - Date.now();
      if (wait > 0) await sleep(wait, ctx.signal);
      if (!following || !ctx.alive) break;
      lastStart = Date.now();
      const top = entries.reduce((m, e) => Math.max(m, Number(e.positionEventNumber ?? e.eventNumber)), -1);
      status.textContent = 'following…';
      try {
        const page = await api.feed(stream, { pos: top + 1, dir: 'forward', count: COUNT, longPoll: 10, signal: ctx.signal });
        const fresh = (page.entries || []).filter((e) => Number(e.positionEventNumber ?? e.eventNumber) > top);
        if (fresh.length) {
          newIds.clear();
          for (const e of fresh) newIds.add(e.eventId);
          entries = [...fresh, ...entries].slice(0, 200);
          draw();
        }
        errors.clear();
      } catch (e) {
        if (e.name === 'AbortError') break;
        errors.show(e, 'Follow');
        await sleep(3000, ctx.signal);
      }
    }
    status.textContent = '';
  }

  followBtn.addEventListener('click', () => {
    following = !following;
    followBtn.setAttribute('aria-pressed', String(following));
    followBtn.textContent = following ? '❚❚ Pause' : '▶ Follow live';
    followBtn.classList.toggle('active', following);
    if (following) {
      if (paged) {
        // Following starts from the head: go there first.
        ctx.go(f.route('streams', stream) + '?follow=1');
        return;
      }
      follow();
    }
  });
  expandBtn.addEventListener('click', () => {
    expand = !expand;
    sessionStorage.setItem(expandKey, expand ? '1' : '0');
    expandBtn.textContent = expand ? 'Collapse all' : 'Expand all';
    expandBtn.setAttribute('aria-pressed', String(expand));
    draw();
  });
  ctx.onLeave(() => {
    following = false;
  });

  softBtn.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Delete ${stream}?`,
      message: 'A soft delete hides the stream’s events; writing to it again brings it back with later event numbers. Its events are reclaimed by the next scavenge.',
      confirm: 'Delete stream',
      danger: true,
    });
    if (!ok) return;
    const done = await act(softBtn, () => api.deleteStream(stream, false), { slot: errors, context: 'Delete' });
    if (done) {
      toast(`Stream ${stream} deleted`);
      ctx.go('#/streams');
    }
  });
  hardBtn.addEventListener('click', async () => {
    const ok = await confirmDialog({
      title: `Hard delete ${stream}?`,
      message: 'A hard delete is permanent: the stream can never be written or read again, not even recreated.',
      confirm: 'Hard delete',
      danger: true,
      typeToConfirm: stream,
    });
    if (!ok) return;
    const done = await act(hardBtn, () => api.deleteStream(stream, true), { slot: errors, context: 'Hard delete' });
    if (done) {
      toast(`Stream ${stream} hard deleted`);
      ctx.go('#/streams');
    }
  });

  await load();
  if (ctx.query.get('follow') === '1' && !paged && doc) followBtn.click();
}
