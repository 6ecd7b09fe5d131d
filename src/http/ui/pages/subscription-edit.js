// Create or edit a subscription group with every setting and its default: create is
// `PUT /subscriptions/{stream}/{group}`, update `POST` to the same URL, both with the camelCase
// JSON body v5 takes. Editing starts from the group's current config (`GET …/info`).

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, select, errorSlot, errorBox, toast } from '../ui.js';

/** [key, label, default, kind, help]. */
export const SETTINGS = [
  ['resolveLinktos', 'Resolve links', false, 'bool', 'Deliver the events that $> links point to.'],
  ['startFrom', 'Start from', 0, 'int', 'First event number without a checkpoint; -1: only new events.'],
  ['messageTimeoutMilliseconds', 'Message timeout (ms)', 10000, 'num', 'In-flight time before a message is retried; 0: never.'],
  ['extraStatistics', 'Extra statistics', false, 'bool', 'Per-consumer latency figures.'],
  ['maxRetryCount', 'Max retry count', 10, 'num', 'Retries before a message is parked.'],
  ['liveBufferSize', 'Live buffer size', 500, 'num', 'Messages buffered once caught up.'],
  ['bufferSize', 'Buffer size', 500, 'num', 'Messages buffered while catching up (above the read batch size).'],
  ['readBatchSize', 'Read batch size', 20, 'num', 'Events read per page.'],
  ['checkPointAfterMilliseconds', 'Checkpoint after (ms)', 1000, 'num', 'Time between checkpoints.'],
  ['minCheckPointCount', 'Min checkpoint count', 10, 'num', 'Processed events before a timed checkpoint.'],
  ['maxCheckPointCount', 'Max checkpoint count', 500, 'num', 'Processed events that force a checkpoint.'],
  ['maxSubscriberCount', 'Max subscriber count', 10, 'num', 'Consumers at most; 0: no limit.'],
  ['namedConsumerStrategy', 'Consumer strategy', 'RoundRobin', 'strategy', 'How messages are shared among consumers.'],
];

export async function render(ctx) {
  const editing = ctx.params.stream !== undefined;
  const { stream, group } = ctx.params;
  const title = editing ? `Edit ${group}` : 'New subscription';
  replace(ctx.main, pageHeader(title, editing ? `on ${stream}` : null), h('p', { class: 'loading' }, 'Loading…'));
  let current = {};
  if (editing) {
    try {
      const info = await api.get(`subscriptions/${api.seg(stream)}/${api.seg(group)}/info`, { signal: ctx.signal });
      current = info.config || {};
    } catch (e) {
      if (e.name !== 'AbortError') replace(ctx.main, pageHeader(title), errorBox(e, 'GET info'));
      return;
    }
  }
  const errors = errorSlot();
  const streamIn = input({ id: 'ps-stream', value: stream || ctx.query.get('stream') || '', required: true, disabled: editing, autocomplete: 'off' });
  const groupIn = input({ id: 'ps-group', value: group || '', required: true, disabled: editing, autocomplete: 'off' });
  const inputs = SETTINGS.map(([k, label, def, kind, help]) => {
    const v = current[k] ?? def;
    let el;
    if (kind === 'bool') el = h('input', { type: 'checkbox', id: `ps-${k}`, checked: !!v });
    else if (kind === 'strategy') el = select(['RoundRobin', 'DispatchToSingle', 'Pinned'], v, { id: `ps-${k}` });
    else el = input({ type: 'number', id: `ps-${k}`, value: v, min: kind === 'int' ? undefined : 0, step: 1 });
    return { k, kind, el, label, help: `${help} Default: ${def}.` };
  });
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'ps-save' }, editing ? 'Save changes' : 'Create');
  const form = h(
    'form',
    { class: 'form wide', id: 'subscription-form' },
    errors.el,
    h('div', { class: 'fields' }, field('Stream', streamIn, 'The stream the group reads.'), field('Group', groupIn)),
    h('h3', 'Settings'),
    h('div', { class: 'fields' }, inputs.map((x) => field(x.label, x.el, x.help))),
    h('div', { class: 'form-actions' }, submit, h('a', { class: 'btn', href: editing ? f.route('subscriptions', stream, group) : '#/subscriptions' }, 'Cancel')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    const s = streamIn.value.trim();
    const g = groupIn.value.trim();
    if (!s || !g) {
      errors.show(new Error('Stream and group are needed.'));
      return;
    }
    const body = {};
    for (const x of inputs) {
      body[x.k] = x.kind === 'bool' ? x.el.checked : x.kind === 'strategy' ? x.el.value : Number(x.el.value);
    }
    submit.disabled = true;
    try {
      await api.call(editing ? 'POST' : 'PUT', `subscriptions/${api.seg(s)}/${api.seg(g)}`, { body });
      toast(editing ? 'Subscription updated' : `Subscription ${g} created`);
      ctx.go(f.route('subscriptions', s, g));
    } catch (e) {
      errors.show(e, editing ? 'Update' : 'Create');
    } finally {
      submit.disabled = false;
    }
  });
  replace(ctx.main, pageHeader(title, editing ? `on ${stream}` : 'A competing-consumer group on a stream'), card(null, form));
}
