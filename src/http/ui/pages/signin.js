// Sign-in and sign-out (v5's flow): the credentials are checked with `GET /info`, then
// `GET /users/$current` gives the groups that switch the admin and ops menus on. The
// credentials stay in this tab's sessionStorage; `#/signout` forgets them.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as session from '../session.js';
import { field, input, errorText } from '../ui.js';

export async function render(ctx) {
  if (ctx.route.path === '/signout') {
    session.clear();
    location.replace('#/signin');
    return;
  }
  ctx.setTitle('Sign in');
  const next = ctx.query.get('next');
  const user = input({ name: 'username', autocomplete: 'username', required: true, id: 'signin-user' });
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', id: 'signin-password' });
  const message = h('div', { 'aria-live': 'assertive', id: 'signin-message' });
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'signin-submit' }, 'Sign in');
  const form = h(
    'form',
    { class: 'form', novalidate: true },
    message,
    field('User name', user),
    field('Password', password),
    submit,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    message.replaceChildren();
    if (!user.value) {
      replace(message, h('div', { class: 'alert error', role: 'alert' }, 'Enter a user name.'));
      user.focus();
      return;
    }
    submit.disabled = true;
    submit.textContent = 'Signing in…';
    const token = session.basic(user.value, password.value);
    try {
      await api.call('GET', 'info', { auth: token, accept: 'application/json' });
      const me = await api.get('users/$current', { auth: token });
      const data = me?.data || me || {};
      session.save({ user: data.loginName || user.value, token, groups: data.groups || [], fullName: data.fullName || '' });
      const target = next && next.startsWith('#/') && !next.startsWith('#/sign') ? next : '#/dashboard';
      location.replace(target);
    } catch (e) {
      const text =
        e.status === 401
          ? 'Wrong user name or password (401 Unauthorized). Check them and try again.'
          : `Sign-in failed: ${errorText(e)}`;
      replace(message, h('div', { class: 'alert error', role: 'alert', id: 'signin-error' }, text));
      password.select();
      password.focus();
    } finally {
      submit.disabled = false;
      submit.textContent = 'Sign in';
    }
  });
  replace(
    ctx.main,
    h(
      'div',
      { class: 'signin' },
      h(
        'section',
        { class: 'card' },
        h('div', { class: 'brand' }, h('img', { src: 'favicon.svg', alt: '', width: 32, height: 32 }), h('span', { class: 'brand-name' }, 'Annal')),
        h('h1', { tabindex: '-1' }, 'Sign in to the Admin UI'),
        form,
        h('p', { class: 'muted' }, `Server: ${api.base.host}${api.base.pathname}`),
      ),
    ),
  );
  user.focus();
}
