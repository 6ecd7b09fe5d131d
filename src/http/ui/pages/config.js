// Configuration: the node's options as it runs with them (`GET /info/options`), read-only,
// grouped and filterable.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import { pageHeader, card, table, errorBox, input } from '../ui.js';

export async function render(ctx) {
  const filter = input({ type: 'search', id: 'config-filter', placeholder: 'Filter options', 'aria-label': 'Filter options' });
  const host = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(ctx.main, pageHeader('Configuration', 'The options this node runs with (read-only)'), card(null, filter, h('div', { class: 'spacer' }), host));
  let options;
  try {
    options = await api.get('info/options', { signal: ctx.signal });
  } catch (e) {
    if (e.name !== 'AbortError') replace(host, errorBox(e, 'GET /info/options'));
    return;
  }
  const draw = () => {
    const q = filter.value.trim().toLowerCase();
    const rows = (Array.isArray(options) ? options : []).filter((o) => !q || `${o.name} ${o.description} ${o.group} ${o.value}`.toLowerCase().includes(q));
    replace(
      host,
      table(
        [
          { label: 'Group', cell: (o) => o.group || '' },
          { label: 'Option', cell: (o) => h('strong', o.name) },
          { label: 'Value', cell: (o) => h('span', { class: 'mono break' }, Array.isArray(o.value) ? o.value.join(', ') : String(o.value ?? '')) },
          { label: 'Description', cell: (o) => h('span', { class: 'muted' }, o.description || '') },
        ],
        rows,
        { id: 'options', empty: 'No option matches.' },
      ),
    );
  };
  filter.addEventListener('input', draw);
  draw();
}
