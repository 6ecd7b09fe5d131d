// The Admin UI's entry point: the route table, the navigation (menus by the user's groups),
// the top bar (node state, the signed-in user, sign-out) and the sign-in guard. Pages live in
// pages/*.js and are loaded when first visited.

import { h, replace } from './dom.js';
import * as api from './api.js';
import * as session from './session.js';
import { Router } from './router.js';
import { badge, errorBox } from './ui.js';

const P = (name) => () => import(`./pages/${name}.js`);

/** need: who may see the page (`user`, `ops` or `admin`); public pages need no sign-in. */
const routes = [
  { path: '/signin', load: P('signin'), title: 'Sign in', public: true },
  { path: '/signout', load: P('signin'), title: 'Sign in', public: true },
  { path: '/dashboard', load: P('dashboard'), title: 'Dashboard', nav: 'dashboard' },
  { path: '/cluster', load: P('cluster'), title: 'Cluster', nav: 'cluster' },
  { path: '/streams', load: P('streams'), title: 'Streams', nav: 'streams' },
  { path: '/new-event', load: P('addevent'), title: 'Add an event', nav: 'streams' },
  { path: '/streams/:stream', load: P('stream'), title: 'Stream', nav: 'streams' },
  { path: '/streams/:stream/metadata', load: P('metadata'), title: 'Stream metadata', nav: 'streams' },
  { path: '/streams/:stream/add', load: P('addevent'), title: 'Add an event', nav: 'streams' },
  { path: '/streams/:stream/:number=\\d+', load: P('event'), title: 'Event', nav: 'streams' },
  { path: '/streams/:stream/:pos/:dir=forward|backward/:count=\\d+', load: P('stream'), title: 'Stream', nav: 'streams' },
  { path: '/all', load: P('all'), title: '$all', nav: 'all', need: 'admin' },
  { path: '/all/:pos/:dir=forward|backward/:count=\\d+', load: P('all'), title: '$all', nav: 'all', need: 'admin' },
  { path: '/projections', load: P('projections'), title: 'Projections', nav: 'projections' },
  { path: '/projections/new', load: P('projection-new'), title: 'New projection', nav: 'projections', need: 'ops' },
  { path: '/projections/:name', load: P('projection'), title: 'Projection', nav: 'projections' },
  { path: '/projections/:name/:tab=edit|config', load: P('projection'), title: 'Projection', nav: 'projections' },
  { path: '/query', load: P('query'), title: 'Query', nav: 'query' },
  { path: '/subscriptions', load: P('subscriptions'), title: 'Persistent subscriptions', nav: 'subscriptions' },
  { path: '/subscriptions/new', load: P('subscription-edit'), title: 'New subscription', nav: 'subscriptions', need: 'ops' },
  { path: '/subscriptions/:stream/:group', load: P('subscription'), title: 'Subscription', nav: 'subscriptions' },
  { path: '/subscriptions/:stream/:group/edit', load: P('subscription-edit'), title: 'Edit subscription', nav: 'subscriptions', need: 'ops' },
  { path: '/subscriptions/:stream/:group/parked', load: P('parked'), title: 'Parked messages', nav: 'subscriptions' },
  { path: '/subscriptions/:stream/:group/parked/:pos/:dir=forward|backward/:count=\\d+', load: P('parked'), title: 'Parked messages', nav: 'subscriptions' },
  { path: '/users', load: P('users'), title: 'Users', nav: 'users', need: 'admin' },
  { path: '/users/new', load: P('user'), title: 'New user', nav: 'users', need: 'admin' },
  { path: '/users/:login', load: P('user'), title: 'User', nav: 'users', need: 'admin' },
  { path: '/admin', load: P('admin'), title: 'Admin', nav: 'admin', need: 'ops' },
  { path: '/admin/scavenges/:id', load: P('scavenge'), title: 'Scavenge', nav: 'admin', need: 'ops' },
  { path: '/config', load: P('config'), title: 'Configuration', nav: 'config', need: 'ops' },
];

/** Menu entries: [key, label, hash, need]. */
const MENU = [
  ['Overview', [['dashboard', 'Dashboard', '#/dashboard'], ['cluster', 'Cluster', '#/cluster']]],
  [
    'Data',
    [
      ['streams', 'Stream browser', '#/streams'],
      ['all', '$all', '#/all', 'admin'],
      ['projections', 'Projections', '#/projections'],
      ['query', 'Query', '#/query'],
      ['subscriptions', 'Persistent subscriptions', '#/subscriptions'],
    ],
  ],
  [
    'Operations',
    [
      ['users', 'Users', '#/users', 'admin'],
      ['admin', 'Admin', '#/admin', 'ops'],
      ['config', 'Configuration', '#/config', 'ops'],
    ],
  ],
];

const allowed = (need) => !need || need === 'user' || (need === 'ops' ? session.isOps() : need === 'admin' ? session.isAdmin() : true);

const el = {
  nav: document.getElementById('nav'),
  main: document.getElementById('main'),
  status: document.getElementById('node-status'),
  user: document.getElementById('user-box'),
  footer: document.getElementById('footer'),
  sidebar: document.getElementById('sidebar'),
  toggle: document.getElementById('menu-toggle'),
  shell: document.getElementById('shell'),
};

function renderNav(active) {
  const s = session.current();
  if (!s) {
    el.nav.replaceChildren();
    return;
  }
  replace(
    el.nav,
    MENU.map(([group, items]) => {
      const visible = items.filter(([, , , need]) => allowed(need));
      if (!visible.length) return null;
      return h(
        'div',
        { class: 'nav-group' },
        h('div', { class: 'nav-group-title' }, group),
        h(
          'ul',
          visible.map(([key, label, href]) =>
            h('li', h('a', { href, 'data-nav': key, class: key === active ? 'active' : null, 'aria-current': key === active ? 'page' : null }, label)),
          ),
        ),
      );
    }),
  );
}

function renderUser() {
  const s = session.current();
  if (!s) {
    el.user.replaceChildren();
    return;
  }
  const role = session.isAdmin() ? '$admins' : session.isOps() ? '$ops' : 'user';
  replace(
    el.user,
    h('span', { class: 'user-name', id: 'current-user', title: (s.groups || []).join(', ') || 'no groups' }, s.user),
    h('span', { class: 'user-role' }, role),
    h('a', { class: 'btn small', href: '#/signout', id: 'sign-out' }, 'Sign out'),
  );
}

/** The node's state and version in the top bar (from `GET /info`, once per sign-in or reload). */
export async function refreshNodeStatus() {
  try {
    const info = await api.get('info');
    replace(el.status, h('span', { class: 'node-label' }, 'Node'), badge(info.state || 'unknown'), h('span', { class: 'node-addr' }, api.base.host));
    replace(el.footer, `Annal Admin UI · server version ${info.esVersion || '?'} · projections ${info.projectionsMode || '?'}`);
  } catch (e) {
    replace(el.status, badge('unreachable', 'bad'));
  }
}

let lastUser = null;

const router = new Router(routes, {
  main: el.main,
  before(route, parsed) {
    const s = session.current();
    if (!route?.public && !s) {
      const next = parsed.path && parsed.path !== '/' ? `?next=${encodeURIComponent('#' + parsed.path + (parsed.query.toString() ? '?' + parsed.query : ''))}` : '';
      return `#/signin${next}`;
    }
    if (!route && parsed.segments.length === 0) return s ? '#/dashboard' : '#/signin';
    // v5's UI names this page #/clusterstatus; old bookmarks keep working.
    if (parsed.path === '/clusterstatus') return '#/cluster';
    return null;
  },
  after(route) {
    const s = session.current();
    el.shell.classList.toggle('signed-out', !s);
    if ((s?.user || null) !== lastUser) {
      lastUser = s?.user || null;
      renderUser();
      if (s) refreshNodeStatus();
      else el.status.replaceChildren();
    }
    renderNav(route?.nav);
    el.sidebar.classList.remove('open');
    el.toggle.setAttribute('aria-expanded', 'false');
    if (route && !allowed(route.need)) {
      throw Object.assign(new Error(`This page needs ${route.need === 'admin' ? '$admins' : '$ops or $admins'}; ${s.user} is not a member.`), {
        needs: true,
      });
    }
  },
  error(e, ctx) {
    replace(ctx.main, h('h1', { tabindex: '-1' }, document.title.split(' · ')[0] || 'Error'), errorBox(e));
  },
  pollError(ctx, e) {
    const box = errorBox(e, 'This page failed to update');
    if (ctx.pollError?.isConnected) ctx.pollError.replaceWith(box);
    else ctx.main.prepend(box);
    ctx.pollError = box;
  },
});

// Focus the page heading after each navigation, for keyboard and screen reader users.
new MutationObserver(() => {
  const h1 = el.main.querySelector('h1');
  if (h1 && !el.main.dataset.focused && document.activeElement === document.body) {
    h1.focus({ preventScroll: true });
    el.main.dataset.focused = '1';
  }
}).observe(el.main, { childList: true, subtree: false });
window.addEventListener('hashchange', () => delete el.main.dataset.focused);

el.toggle.addEventListener('click', () => {
  const open = !el.sidebar.classList.contains('open');
  el.sidebar.classList.toggle('open', open);
  el.toggle.setAttribute('aria-expanded', String(open));
});
document.addEventListener('keydown', (ev) => {
  if (ev.key === 'Escape' && el.sidebar.classList.contains('open')) {
    el.sidebar.classList.remove('open');
    el.toggle.setAttribute('aria-expanded', 'false');
    el.toggle.focus();
  }
});
document.getElementById('skip-link').addEventListener('click', () => el.main.focus());

export { router };
router.render();
