// Add an event to a stream, new or existing: `POST /streams/{id}` with
// application/vnd.eventstore.events+json (JSON data), or the raw body with ES-EventType and
// ES-EventId (data that is not JSON). An optional expected version goes in ES-ExpectedVersion.
// Writing to a `$` stream asks for confirmation first.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, textarea, errorSlot, confirmDialog, toast } from '../ui.js';

export async function render(ctx) {
  let like = {};
  try {
    like = JSON.parse(ctx.query.get('like') || '{}');
  } catch {
    like = {};
  }
  const stream = input({ id: 'ev-stream', name: 'stream', value: ctx.params.stream || '', required: true, autocomplete: 'off' });
  const type = input({ id: 'ev-type', name: 'eventType', value: like.type || '', required: true, autocomplete: 'off', placeholder: 'e.g. OrderPlaced' });
  const id = input({ id: 'ev-id', name: 'eventId', value: api.uuid(), class: 'mono' });
  const data = textarea({ id: 'ev-data', name: 'data', rows: 10 }, like.data || '{\n  \n}');
  const meta = textarea({ id: 'ev-meta', name: 'metadata', rows: 4 }, like.meta || '');
  const expected = input({ id: 'ev-expected', name: 'expectedVersion', placeholder: 'any', inputmode: 'numeric' });
  const isJson = h('input', { type: 'checkbox', id: 'ev-json', checked: true });
  const errors = errorSlot();
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'ev-submit' }, 'Add event');
  const newId = h('button', { type: 'button', class: 'btn small' }, 'New id');
  newId.addEventListener('click', () => {
    id.value = api.uuid();
  });

  const form = h(
    'form',
    { class: 'form', id: 'add-event-form' },
    errors.el,
    h('div', { class: 'fields' }, field('Stream', stream), field('Event type', type), field('Expected version', expected, 'A number, -1 (no stream), -2 (any), -4 (stream exists); empty: any.')),
    field('Event id', id, h('span', 'Writing the same id twice is idempotent. ', newId)),
    field('Data', data),
    field('Data is JSON', isJson, 'Unchecked: the text is sent as raw bytes.'),
    field('Metadata (JSON, optional)', meta),
    h('div', { class: 'form-actions' }, submit, h('a', { class: 'btn', href: ctx.params.stream ? f.route('streams', ctx.params.stream) : '#/streams' }, 'Cancel')),
  );

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    const s = stream.value.trim();
    if (!s || !type.value.trim()) {
      errors.show(new Error('Stream and event type are needed.'));
      return;
    }
    let body;
    let metaValue;
    if (meta.value.trim()) {
      try {
        metaValue = JSON.parse(meta.value);
      } catch (e) {
        errors.show(new Error(`Metadata is not valid JSON: ${e.message}`));
        return;
      }
    }
    if (isJson.checked) {
      try {
        body = JSON.parse(data.value);
      } catch (e) {
        errors.show(new Error(`Data is not valid JSON: ${e.message} (uncheck “Data is JSON” to send text)`));
        return;
      }
    }
    if (s.startsWith('$')) {
      const ok = await confirmDialog({
        title: `Write to ${s}?`,
        message: 'This is a system stream. Writing to a projection’s own streams can fault it for good.',
        confirm: 'Write anyway',
        danger: true,
      });
      if (!ok) return;
    }
    submit.disabled = true;
    try {
      if (isJson.checked) {
        const event = { eventId: id.value.trim(), eventType: type.value.trim(), data: body };
        if (metaValue !== undefined) event.metadata = metaValue;
        await api.append(s, [event], expected.value.trim());
      } else {
        await api.appendRaw(s, { eventId: id.value.trim(), eventType: type.value.trim(), data: data.value });
      }
      toast(`Event ${type.value.trim()} added to ${s}`);
      ctx.go(f.route('streams', s));
    } catch (e) {
      errors.show(e, 'Append');
    } finally {
      submit.disabled = false;
    }
  });

  replace(ctx.main, pageHeader('Add an event', ctx.params.stream ? `to ${ctx.params.stream}` : 'to a new or existing stream'), card(null, form));
  (ctx.params.stream ? type : stream).focus();
}
