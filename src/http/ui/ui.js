// Shared components: page headers, cards, figures, tables, badges, error boxes (status and
// reason of a failed API call), confirmation dialogs, toasts, JSON blocks and form fields.

import { h, replace } from './dom.js';
import { ApiError } from './api.js';

/** The page's heading (focused after navigation) with actions on the right. */
export function pageHeader(title, subtitle, ...actions) {
  return h(
    'header',
    { class: 'page-header' },
    h('div', { class: 'titles' }, h('h1', { tabindex: '-1' }, title), subtitle ? h('p', { class: 'subtitle' }, subtitle) : null),
    actions.length ? h('div', { class: 'actions' }, ...actions) : null,
  );
}

export function card(title, ...body) {
  return h('section', { class: 'card' }, title ? h('h2', title) : null, ...body);
}

/** A figure: label, big value, optional detail line; `id` lets a test find it. */
export function stat(label, value, detail, attrs = {}) {
  return h(
    'div',
    { class: 'stat', ...attrs },
    h('div', { class: 'stat-label' }, label),
    h('div', { class: 'stat-value' }, value ?? '–'),
    detail ? h('div', { class: 'stat-detail' }, detail) : null,
  );
}

/** Colour class of a state or status text. */
export function kindOf(text) {
  const t = String(text || '').toLowerCase();
  if (/^(master|leader|running|live|success|ok|completed|enabled|alive|caughtup|active)/.test(t)) return 'ok';
  if (/(fault|fail|error|dead|unreachable|shutdown|shuttingdown|disabled|deleted|stopped|aborted|drop)/.test(t)) return 'bad';
  if (/(slave|follower|clone|readonly)/.test(t)) return 'info';
  return 'warn';
}

export function badge(text, kind) {
  return h('span', { class: `badge ${kind || kindOf(text)}` }, text);
}

/**
 * A table. columns: `[{ label, cell: (row) => node|text, class, title }]`; rows: array.
 * opts: `{ empty, rowClass(row), caption, id }`.
 */
export function table(columns, rows, opts = {}) {
  const thead = h('thead', h('tr', columns.map((c) => h('th', { scope: 'col', class: c.class, title: c.title }, c.label))));
  const body = rows.length
    ? rows.map((r) =>
        h('tr', { class: opts.rowClass ? opts.rowClass(r) : null }, columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(r)))),
      )
    : [h('tr', h('td', { colspan: columns.length, class: 'empty' }, opts.empty || 'Nothing to show.'))];
  return h(
    'div',
    { class: 'table-wrap', id: opts.id },
    h('table', { class: 'data' }, opts.caption ? h('caption', opts.caption) : null, thead, h('tbody', body)),
  );
}

/** Key/value rows. */
export function dl(pairs) {
  return h(
    'dl',
    { class: 'kv' },
    pairs.filter(Boolean).map(([k, v]) => [h('dt', k), h('dd', v ?? '–')]),
  );
}

/** The text of an error: `401 Unauthorized` plus the node's body when it says more. */
export function errorText(e) {
  if (e instanceof ApiError) {
    const body = (e.body || '').trim();
    const more = body && body !== e.reason && body.length < 600 ? ` — ${body}` : '';
    return e.status ? `${e.status} ${e.reason}${more}` : `${e.reason}${more}`;
  }
  return String(e?.message || e);
}

/** An alert box for a failed call (role=alert so screen readers announce it). */
export function errorBox(e, context) {
  const detail = e instanceof ApiError ? `${e.method} ${e.path}` : null;
  return h(
    'div',
    { class: 'alert error', role: 'alert', 'data-status': e instanceof ApiError ? String(e.status) : '' },
    h('strong', context ? `${context}: ` : 'Error: '),
    h('span', { class: 'error-text' }, errorText(e)),
    detail ? h('div', { class: 'alert-detail' }, detail) : null,
    e instanceof ApiError && e.status === 401
      ? h('div', { class: 'alert-detail' }, 'These credentials may not do this. ', h('a', { href: '#/signout' }, 'Sign in as another user'))
      : null,
  );
}

export function notice(text, kind = 'info') {
  return h('div', { class: `alert ${kind}` }, text);
}

/** A slot that shows the latest error of a poll (cleared once a call succeeds). */
export function errorSlot() {
  const el = h('div', { class: 'error-slot', 'aria-live': 'polite' });
  return {
    el,
    show(e, context) {
      replace(el, errorBox(e, context));
    },
    clear() {
      if (el.firstChild) el.replaceChildren();
    },
  };
}

export function pre(text, cls = '') {
  return h('pre', { class: `code ${cls}`.trim(), tabindex: '0' }, text);
}

/** A labelled form field; `input` is an element (its id ties the label). */
export function field(label, input, help) {
  if (!input.id) input.id = `f-${Math.random().toString(36).slice(2, 9)}`;
  const isCheck = input.type === 'checkbox';
  if (isCheck) {
    return h(
      'div',
      { class: 'field check' },
      input,
      h('label', { for: input.id }, label),
      help ? h('div', { class: 'help' }, help) : null,
    );
  }
  return h('div', { class: 'field' }, h('label', { for: input.id }, label), input, help ? h('div', { class: 'help' }, help) : null);
}

export function input(attrs = {}) {
  return h('input', { type: 'text', ...attrs });
}

export function textarea(attrs = {}, value = '') {
  const t = h('textarea', { spellcheck: 'false', ...attrs });
  t.value = value;
  return t;
}

export function select(options, value, attrs = {}) {
  const el = h('select', attrs, options.map((o) => (Array.isArray(o) ? h('option', { value: o[0] }, o[1]) : h('option', { value: o }, o))));
  if (value !== undefined) el.value = value;
  return el;
}

let toastHost = null;

/** A short message at the bottom of the screen. */
export function toast(text, kind = 'ok') {
  if (!toastHost) {
    toastHost = h('div', { class: 'toasts', 'aria-live': 'polite' });
    document.body.appendChild(toastHost);
  }
  const t = h('div', { class: `toast ${kind}`, role: 'status' }, text);
  toastHost.appendChild(t);
  while (toastHost.children.length > 3) toastHost.firstChild.remove();
  setTimeout(() => t.remove(), 4000);
}

/**
 * A modal confirmation. opts: `{ title, message, confirm, danger, typeToConfirm, checks:
 * [{ name, label, checked }] }`. Resolves to null (cancelled) or `{ checks: {name: bool} }`.
 */
export function confirmDialog(opts) {
  return new Promise((resolve) => {
    const checks = (opts.checks || []).map((c) => {
      const el = h('input', { type: 'checkbox', name: c.name, checked: c.checked });
      return { c, el };
    });
    const typed = opts.typeToConfirm ? input({ autocomplete: 'off', 'aria-label': `Type ${opts.typeToConfirm} to confirm` }) : null;
    const ok = h('button', { type: 'submit', class: `btn ${opts.danger ? 'danger' : 'primary'}`, value: 'ok' }, opts.confirm || 'Confirm');
    const cancel = h('button', { type: 'button', class: 'btn', value: 'cancel' }, 'Cancel');
    const form = h(
      'form',
      { method: 'dialog' },
      h('h2', opts.title || 'Are you sure?'),
      opts.message ? h('p', opts.message) : null,
      checks.map(({ c, el }) => field(c.label, el)),
      typed ? field(`Type “${opts.typeToConfirm}” to confirm`, typed) : null,
      h('div', { class: 'dialog-actions' }, cancel, ok),
    );
    const dlg = h('dialog', { class: 'dialog', 'aria-label': opts.title || 'Confirm' }, form);
    if (typed) {
      ok.disabled = true;
      typed.addEventListener('input', () => {
        ok.disabled = typed.value !== opts.typeToConfirm;
      });
    }
    let result = null;
    cancel.addEventListener('click', () => dlg.close());
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      if (typed && typed.value !== opts.typeToConfirm) return;
      result = { checks: Object.fromEntries(checks.map(({ c, el }) => [c.name, el.checked])) };
      dlg.close();
    });
    dlg.addEventListener('close', () => {
      dlg.remove();
      resolve(result);
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    (typed || cancel).focus();
  });
}

/**
 * Runs an action from a button: disables it meanwhile, shows success as a toast and failure in
 * `slot` (an errorSlot) or as a toast. Returns the action's result or undefined.
 */
export async function act(btn, fn, { ok, slot, context } = {}) {
  if (btn) btn.disabled = true;
  try {
    const r = await fn();
    slot?.clear();
    if (ok) toast(ok);
    return r;
  } catch (e) {
    if (slot) slot.show(e, context);
    else toast(`${context ? context + ': ' : ''}${errorText(e)}`, 'bad');
    return undefined;
  } finally {
    if (btn) btn.disabled = false;
  }
}

/** Tabs as links between hash routes; `current` is the active href. */
export function tabs(items, current) {
  return h(
    'nav',
    { class: 'tabs', 'aria-label': 'Sections' },
    items.map(([href, label]) => h('a', { href, class: href === current ? 'active' : null, 'aria-current': href === current ? 'page' : null }, label)),
  );
}
