// One scavenge, live: the stream `$scavenges-{id}` read every 2 s until its `$scavengeCompleted`
// arrives, showing chunks done, space reclaimed, index tables, the result, and a stop button
// (`DELETE /admin/scavenge/{id}`) while it runs.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, stat, table, badge, errorSlot, errorBox, act, confirmDialog, notice } from '../ui.js';

const parse = (e) => {
  try {
    return typeof e.data === 'string' ? JSON.parse(e.data) : e.data || {};
  } catch {
    return {};
  }
};

export async function render(ctx) {
  const { id } = ctx.params;
  const errors = errorSlot();
  const stop = h('button', { type: 'button', class: 'btn danger', id: 'sc-stop-run' }, 'Stop scavenge');
  const host = h('div', { id: 'scavenge' }, h('p', { class: 'loading' }, 'Waiting for the scavenge’s first record…'));
  const subtitle = h('span', { class: 'mono' }, id);
  replace(ctx.main, pageHeader(`Scavenge ${id.slice(0, 8)}`, subtitle, h('a', { class: 'btn', href: '#/admin' }, 'Back to admin'), stop), errors.el, host);
  stop.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: 'Stop this scavenge?', confirm: 'Stop scavenge', danger: true });
    if (ok) act(stop, () => api.del(`admin/scavenge/${api.seg(id)}`), { ok: 'Stopping', slot: errors, context: 'Stop scavenge' });
  });

  const poller = ctx.poll(async () => {
    let entries = [];
    try {
      // Read forward from the start so long scavenges show every chunk in order.
      let pos = 0;
      for (let page = 0; page < 20; page++) {
        const doc = await api.feed(`$scavenges-${id}`, { pos, dir: 'forward', count: 100, signal: ctx.signal });
        const got = (doc.entries || []).slice().reverse();
        entries.push(...got);
        if (got.length < 100) break;
        pos += 100;
      }
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) return; // not written yet
      replace(host, errorBox(e, `GET /streams/$scavenges-${id}`));
      return;
    }
    const started = entries.find((e) => e.eventType === '$scavengeStarted');
    const completed = entries.find((e) => e.eventType === '$scavengeCompleted');
    const chunks = entries.filter((e) => e.eventType === '$scavengeChunksCompleted').map(parse);
    const merged = entries.filter((e) => e.eventType === '$scavengeMergeCompleted').map(parse);
    const indexes = entries.filter((e) => e.eventType === '$scavengeIndexCompleted').map(parse);
    const done = completed ? parse(completed) : null;
    const saved = chunks.reduce((a, c) => a + (Number(c.spaceSaved) || 0), 0) + merged.reduce((a, c) => a + (Number(c.spaceSaved) || 0), 0);
    stop.disabled = !!done;
    const node = done?.nodeEndpoint || (started ? parse(started).nodeEndpoint : null);
    if (node) subtitle.textContent = `${id} · on node ${node}`;
    const elapsed = started ? ((done ? Date.parse(completed.updated) : Date.now()) - Date.parse(started.updated)) / 1000 : null;
    replace(
      host,
      done
        ? notice(`Finished: ${done.result}${done.error ? ` — ${done.error}` : ''}`, /success/i.test(done.result) ? 'ok' : 'warn')
        : notice('Running: this page updates every 2 seconds.', 'info'),
      h(
        'div',
        { class: 'grid stats' },
        stat('Result', done ? badge(done.result) : badge('Running', 'info'), null, { id: 'sc-result' }),
        stat('Chunks done', f.num(chunks.length), `${chunks.filter((c) => c.wasScavenged).length} scavenged`, { id: 'sc-chunks' }),
        stat('Space reclaimed', f.bytes(done?.spaceSaved ?? saved), null, { id: 'sc-saved' }),
        stat('Index tables', f.num(indexes.length), `${f.num(indexes.reduce((a, c) => a + (Number(c.entriesDeleted) || 0), 0))} entries deleted`),
        stat('Elapsed', f.duration(done?.timeTaken ? f.timespan(done.timeTaken) : elapsed), started ? `started ${f.time(started.updated)}` : null),
      ),
      card(
        'Chunks',
        table(
          [
            { label: 'Chunks', cell: (c) => `${c.chunkStartNumber}–${c.chunkEndNumber}` },
            { label: 'Scavenged', cell: (c) => (c.wasScavenged ? 'yes' : 'no') },
            { label: 'Space saved', cell: (c) => f.bytes(c.spaceSaved), class: 'num' },
            { label: 'Time', cell: (c) => f.duration(f.timespan(c.timeTaken)), class: 'num' },
            { label: 'Error', cell: (c) => c.errorMessage || '' },
          ],
          chunks,
          { id: 'sc-chunk-table', empty: 'No chunk done yet.' },
        ),
      ),
    );
    if (done) poller.stop();
  }, 2000);
}
