// The page for a hash that no route matches.

import { h, replace } from '../dom.js';
import { pageHeader } from '../ui.js';

export async function render(ctx) {
  ctx.setTitle('Not found');
  replace(
    ctx.main,
    pageHeader('Page not found', `Nothing lives at ${location.hash || '#/'}.`),
    h('p', h('a', { href: '#/dashboard' }, 'Go to the dashboard')),
  );
}
