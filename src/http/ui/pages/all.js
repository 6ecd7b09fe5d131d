// The `$all` browser for admins: the log by position (`GET /streams/$all[/{pos}/{dir}/{n}]`),
// paged with the feed's links, and a form to jump to a position (32 hex digits, or the commit
// and prepare numbers).

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, errorBox, field, input } from '../ui.js';
import { eventsTable, pager } from '../feed.js';

export async function render(ctx) {
  const { pos, dir } = ctx.params;
  const count = Number(ctx.params.count) || 20;
  const posInput = input({ id: 'all-pos', placeholder: 'C:1234/P:1234, 1234, or 32 hex digits', autocomplete: 'off' });
  const dirSel = h('select', { id: 'all-dir' }, h('option', { value: 'forward' }, 'forward (newer)'), h('option', { value: 'backward' }, 'backward (older)'));
  const form = h('form', { class: 'inline-form' }, field('Position', posInput), field('Direction', dirSel), h('button', { type: 'submit', class: 'btn' }, 'Go'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = posInput.value.trim();
    let hex = null;
    let m;
    if (/^[0-9a-fA-F]{32}$/.test(t)) hex = t.toUpperCase();
    else if ((m = /^C:(\d+)\/P:(\d+)$/i.exec(t))) hex = f.positionHex(m[1], m[2]);
    else if (/^\d+$/.test(t)) hex = f.positionHex(t, t);
    if (!hex) {
      posInput.setCustomValidity('Give C:n/P:n, a number, or 32 hex digits');
      posInput.reportValidity();
      return;
    }
    posInput.setCustomValidity('');
    ctx.go(f.route('all', hex, dirSel.value, count));
  });

  const host = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(ctx.main, pageHeader('$all', pos ? `From ${f.positionText(pos)}, ${dir}` : 'The newest events of every stream'), card(null, form), card(null, host));
  let doc;
  try {
    doc = await api.feed('$all', pos ? { pos, dir, count, signal: ctx.signal } : { signal: ctx.signal });
  } catch (e) {
    if (e.name === 'AbortError') return;
    replace(host, errorBox(e, 'GET /streams/$all'));
    return;
  }
  replace(host, pager(doc, (p) => f.route('all', p.pos, p.dir, p.count)), eventsTable(doc.entries || [], { id: 'all-events', showStream: true }));
}
