// Users: every account from `GET /users/` with its groups and whether it is enabled.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, table, badge, errorBox } from '../ui.js';

export async function render(ctx) {
  const host = h('div', h('p', { class: 'loading' }, 'Loading…'));
  replace(ctx.main, pageHeader('Users', 'Accounts and their groups', h('a', { class: 'btn primary', href: '#/users/new', id: 'new-user' }, 'New user')), card(null, host));
  let doc;
  try {
    doc = await api.get('users/', { signal: ctx.signal });
  } catch (e) {
    if (e.name !== 'AbortError') replace(host, errorBox(e, 'GET /users/'));
    return;
  }
  const users = (doc.data || []).slice().sort((a, b) => a.loginName.localeCompare(b.loginName));
  replace(
    host,
    table(
      [
        { label: 'Login', cell: (u) => h('a', { href: f.route('users', u.loginName) }, u.loginName) },
        { label: 'Full name', cell: (u) => u.fullName || '–' },
        { label: 'Groups', cell: (u) => ((u.groups || []).length ? (u.groups || []).map((g) => h('span', { class: 'badge neutral' }, g)) : h('span', { class: 'muted' }, 'none')) },
        { label: 'Status', cell: (u) => (u.disabled ? badge('disabled', 'bad') : badge('enabled', 'ok')) },
      ],
      users,
      { id: 'users', empty: 'No users.' },
    ),
  );
}
