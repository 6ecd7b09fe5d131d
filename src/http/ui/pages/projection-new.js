// A new projection: `POST /projections/{continuous|onetime|transient}?name=&emit=&checkpoints=
// &enabled=&trackemittedstreams=` with the JavaScript source as the body, then its page.

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, field, input, textarea, select, errorSlot, toast } from '../ui.js';

const TEMPLATE = `fromAll()
  .when({
    $init: function () {
      return { count: 0 };
    },
    $any: function (state, event) {
      state.count += 1;
      return state;
    }
  });
`;

export async function render(ctx) {
  const errors = errorSlot();
  const name = input({ id: 'pj-name', required: true, autocomplete: 'off', placeholder: 'e.g. order-totals' });
  const mode = select([['continuous', 'Continuous'], ['onetime', 'One-time'], ['transient', 'Query (transient)']], 'continuous', { id: 'pj-mode' });
  const emit = h('input', { type: 'checkbox', id: 'pj-emit' });
  const checkpoints = h('input', { type: 'checkbox', id: 'pj-checkpoints', checked: true });
  const enabled = h('input', { type: 'checkbox', id: 'pj-enabled', checked: true });
  const track = h('input', { type: 'checkbox', id: 'pj-track' });
  const source = textarea({ id: 'pj-source', class: 'tall' }, TEMPLATE);
  const submit = h('button', { type: 'submit', class: 'btn primary', id: 'pj-create' }, 'Create');
  mode.addEventListener('change', () => {
    checkpoints.checked = mode.value === 'continuous';
    checkpoints.disabled = mode.value === 'transient';
  });
  const form = h(
    'form',
    { class: 'form wide', id: 'projection-form' },
    errors.el,
    h('div', { class: 'fields' }, field('Name', name), field('Mode', mode)),
    h(
      'div',
      { class: 'fields' },
      field('Enabled (start at once)', enabled),
      field('Emit enabled (may write to streams)', emit),
      field('Checkpoints', checkpoints, 'Continuous projections always checkpoint.'),
      field('Track emitted streams', track, 'So that deleting the projection can delete what it emitted.'),
    ),
    field('Source (JavaScript)', source),
    h('div', { class: 'form-actions' }, submit, h('a', { class: 'btn', href: '#/projections' }, 'Cancel')),
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    const n = name.value.trim();
    if (!n) {
      errors.show(new Error('A projection needs a name.'));
      name.focus();
      return;
    }
    const yes = (b) => (b ? 'yes' : 'no');
    submit.disabled = true;
    try {
      await api.call('POST', `projections/${mode.value}`, {
        query: {
          name: n,
          emit: yes(emit.checked),
          checkpoints: yes(checkpoints.checked || mode.value === 'continuous'),
          enabled: yes(enabled.checked),
          trackemittedstreams: yes(track.checked && emit.checked),
        },
        body: source.value,
        contentType: 'application/javascript',
      });
      toast(`Projection ${n} created`);
      ctx.go(f.route('projections', n));
    } catch (e) {
      errors.show(e, 'Create projection');
    } finally {
      submit.disabled = false;
    }
  });
  replace(ctx.main, pageHeader('New projection', 'JavaScript projection'), card(null, form));
  name.focus();
}
