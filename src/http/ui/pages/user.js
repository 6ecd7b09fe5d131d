// One user, or a new one. New: `POST /users/` {loginName, fullName, groups, password}.
// Existing: `GET /users/{login}`; edit full name and groups (`PUT /users/{login}`), enable or
// disable (`POST /users/{login}/command/enable|disable`), reset the password
// (`POST /users/{login}/command/reset-password` {newPassword}), delete (`DELETE /users/{login}`).

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, errorSlot, errorBox, act, confirmDialog, toast, badge, dl } from '../ui.js';

const KNOWN_GROUPS = ['$admins', '$ops'];

function groupsEditor(groups = []) {
  const boxes = KNOWN_GROUPS.map((g) => [g, h('input', { type: 'checkbox', id: `grp-${g.slice(1)}`, checked: groups.includes(g) })]);
  const other = input({ id: 'grp-other', value: groups.filter((g) => !KNOWN_GROUPS.includes(g)).join(', '), placeholder: 'other groups, comma separated' });
  return {
    el: h('div', h('div', { class: 'row' }, boxes.map(([g, b]) => field(g, b))), field('Other groups', other)),
    value: () => [...boxes.filter(([, b]) => b.checked).map(([g]) => g), ...other.value.split(',').map((x) => x.trim()).filter(Boolean)],
  };
}

export async function render(ctx) {
  if (!ctx.params.login) return create(ctx);
  const { login } = ctx.params;
  const base = `users/${api.seg(login)}`;
  replace(ctx.main, pageHeader(login, 'User'), h('p', { class: 'loading' }, 'Loading…'));
  let user;
  try {
    user = (await api.get(base, { signal: ctx.signal })).data;
  } catch (e) {
    if (e.name !== 'AbortError') replace(ctx.main, pageHeader(login, 'User'), errorBox(e, `GET /users/${login}`));
    return;
  }
  const errors = errorSlot();
  const toggle = h('button', { type: 'button', class: 'btn', id: 'user-toggle' }, user.disabled ? 'Enable' : 'Disable');
  const del = h('button', { type: 'button', class: 'btn danger', id: 'user-delete' }, 'Delete');
  toggle.addEventListener('click', async () => {
    const cmd = user.disabled ? 'enable' : 'disable';
    const done = await act(toggle, () => api.post(`${base}/command/${cmd}`), { ok: `${login} ${cmd}d`, slot: errors, context: cmd });
    if (done) ctx.router.refresh();
  });
  del.addEventListener('click', async () => {
    const ok = await confirmDialog({ title: `Delete ${login}?`, message: 'The account is removed; its sessions stop working.', confirm: 'Delete user', danger: true, typeToConfirm: login });
    if (!ok) return;
    const done = await act(del, () => api.del(base), { slot: errors, context: 'Delete' });
    if (done) {
      toast(`User ${login} deleted`);
      ctx.go('#/users');
    }
  });

  const fullName = input({ id: 'user-fullname', value: user.fullName || '' });
  const groups = groupsEditor(user.groups || []);
  const save = h('button', { type: 'submit', class: 'btn primary', id: 'user-save' }, 'Save');
  const editForm = h('form', { class: 'form' }, field('Full name', fullName), groups.el, h('div', { class: 'form-actions' }, save));
  editForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const done = await act(save, () => api.put(base, { fullName: fullName.value, groups: groups.value() }), { ok: 'User saved', slot: errors, context: 'Save' });
    if (done) ctx.router.refresh();
  });

  const pw = h('input', { type: 'password', id: 'user-newpw', autocomplete: 'new-password' });
  const pw2 = h('input', { type: 'password', id: 'user-newpw2', autocomplete: 'new-password' });
  const reset = h('button', { type: 'submit', class: 'btn', id: 'user-reset' }, 'Reset password');
  const pwForm = h('form', { class: 'form' }, field('New password', pw), field('Repeat', pw2), h('div', { class: 'form-actions' }, reset));
  pwForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!pw.value || pw.value !== pw2.value) {
      errors.show(new Error('The two passwords must be the same and not empty.'));
      return;
    }
    const done = await act(reset, () => api.post(`${base}/command/reset-password`, { newPassword: pw.value }), { ok: 'Password reset', slot: errors, context: 'Reset password' });
    if (done) pwForm.reset();
  });

  replace(
    ctx.main,
    pageHeader(login, h('span', user.fullName || '', ' ', user.disabled ? badge('disabled', 'bad') : badge('enabled', 'ok')), toggle, del),
    errors.el,
    h(
      'div',
      { class: 'grid two' },
      card('Details', dl([['Login', user.loginName], ['Groups', (user.groups || []).join(', ') || 'none'], ['Last updated', user.dateLastUpdated ? f.time(user.dateLastUpdated) : '–']]), h('h3', 'Edit'), editForm),
      card('Password', pwForm),
    ),
  );
}

function create(ctx) {
  const errors = errorSlot();
  const login = input({ id: 'new-login', required: true, autocomplete: 'off' });
  const fullName = input({ id: 'new-fullname' });
  const pw = h('input', { type: 'password', id: 'new-password', autocomplete: 'new-password' });
  const pw2 = h('input', { type: 'password', id: 'new-password2', autocomplete: 'new-password' });
  const groups = groupsEditor([]);
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'new-user-create' }, 'Create user');
  const form = h(
    'form',
    { class: 'form', id: 'new-user-form' },
    errors.el,
    h('div', { class: 'fields' }, field('Login', login), field('Full name', fullName)),
    h('div', { class: 'fields' }, field('Password', pw), field('Repeat password', pw2)),
    groups.el,
    h('div', { class: 'form-actions' }, submit, h('a', { class: 'btn', href: '#/users' }, 'Cancel')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    if (!login.value.trim()) return errors.show(new Error('A login is needed.'));
    if (!pw.value || pw.value !== pw2.value) return errors.show(new Error('The two passwords must be the same and not empty.'));
    const done = await act(
      submit,
      () => api.post('users/', { loginName: login.value.trim(), fullName: fullName.value, groups: groups.value(), password: pw.value }),
      { slot: errors, context: 'Create user' },
    );
    if (done) {
      toast(`User ${login.value.trim()} created`);
      ctx.go(f.route('users', login.value.trim()));
    }
  });
  replace(ctx.main, pageHeader('New user'), card(null, form));
  login.focus();
}
