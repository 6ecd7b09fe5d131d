// A stream's metadata and ACL: `GET /streams/{id}/metadata`, edited as fields ($maxAge,
// $maxCount, $tb, $cacheControl, the five ACL roles) plus any custom keys as JSON, and written
// as a `$metadata` event with `POST /streams/{id}/metadata`.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, textarea, errorSlot, errorBox, pre, toast } from '../ui.js';

const NUMBERS = [
  ['$maxAge', 'Max age (seconds)', 'Events older than this are gone for readers and reclaimed by scavenges.'],
  ['$maxCount', 'Max count', 'Only this many newest events are kept.'],
  ['$tb', 'Truncate before', 'Events below this number are gone (v5 uses it for soft deletes).'],
  ['$cacheControl', 'Cache control (seconds)', 'max-age of the stream’s feed pages.'],
];
const ROLES = [
  ['$r', 'Read'],
  ['$w', 'Write'],
  ['$d', 'Delete'],
  ['$mr', 'Metadata read'],
  ['$mw', 'Metadata write'],
];

const roleText = (v) => (v === undefined || v === null ? '' : Array.isArray(v) ? v.join(', ') : String(v));
const roleValue = (t) => {
  const parts = t.split(',').map((x) => x.trim()).filter(Boolean);
  return parts.length === 0 ? undefined : parts.length === 1 ? parts[0] : parts;
};

export async function render(ctx) {
  const { stream } = ctx.params;
  const header = pageHeader(`${stream}: metadata`, 'Stream metadata and access control', h('a', { class: 'btn', href: f.route('streams', stream) }, 'Back to stream'));
  replace(ctx.main, header, h('p', { class: 'loading' }, 'Loading…'));
  let meta;
  try {
    meta = await api.streamMetadata(stream);
    if (typeof meta !== 'object' || meta === null) meta = {};
  } catch (e) {
    if (e.name === 'AbortError') return;
    replace(ctx.main, header, errorBox(e, `GET /streams/${stream}/metadata`));
    return;
  }
  const errors = errorSlot();
  const nums = NUMBERS.map(([k, label, help]) => [k, input({ type: 'number', min: 0, id: `md-${k.slice(1)}`, value: meta[k] ?? '' }), label, help]);
  const acl = meta.$acl || {};
  const roles = ROLES.map(([k, label]) => [k, input({ id: `acl-${k.slice(1)}`, value: roleText(acl[k]), placeholder: 'default' }), label]);
  const custom = Object.fromEntries(Object.entries(meta).filter(([k]) => !NUMBERS.some(([n]) => n === k) && k !== '$acl'));
  const customText = textarea({ id: 'md-custom', rows: 6 }, Object.keys(custom).length ? JSON.stringify(custom, null, 2) : '{}');
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'md-save' }, 'Save metadata');

  const form = h(
    'form',
    { class: 'form wide', id: 'metadata-form' },
    errors.el,
    h('h3', 'Retention'),
    h('div', { class: 'fields' }, nums.map(([, el, label, help]) => field(label, el, help))),
    h('h3', 'Access control'),
    h('p', { class: 'muted' }, 'Users or groups, separated by commas ($all: everyone; $admins; empty: the default ACL).'),
    h('div', { class: 'fields' }, roles.map(([, el, label]) => field(label, el))),
    h('h3', 'Custom metadata'),
    field('Other keys (JSON object)', customText),
    h('div', { class: 'form-actions' }, submit),
  );

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    let next;
    try {
      next = JSON.parse(customText.value || '{}');
      if (typeof next !== 'object' || Array.isArray(next) || next === null) throw new Error('not an object');
    } catch (e) {
      errors.show(new Error(`Custom metadata must be a JSON object (${e.message}).`));
      return;
    }
    for (const [k, el] of nums) {
      if (el.value !== '') next[k] = Number(el.value);
    }
    const a = {};
    for (const [k, el] of roles) {
      const v = roleValue(el.value);
      if (v !== undefined) a[k] = v;
    }
    if (Object.keys(a).length) next.$acl = a;
    submit.disabled = true;
    try {
      await api.setStreamMetadata(stream, next);
      toast('Metadata saved');
      ctx.router.refresh();
    } catch (e) {
      errors.show(e, 'Save metadata');
    } finally {
      submit.disabled = false;
    }
  });

  replace(ctx.main, header, h('div', { class: 'grid two' }, card('Edit', form), card('Current metadata', pre(JSON.stringify(meta, null, 2)))));
}
