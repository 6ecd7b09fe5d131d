// Ad-hoc queries: each run creates a transient projection
// (`POST /projections/transient?name=&emit=no&checkpoints=no&enabled=yes`, the source as the body)
// and shows its status, state and result as they come (polled every second until it completes,
// faults or is stopped). The last query text is kept in localStorage (never credentials).

import { h, replace } from '../dom.js';
import * as api from '../api.js';
import * as f from '../format.js';
import { pageHeader, card, badge, pre, errorBox, errorSlot, field, textarea, notice, act } from '../ui.js';

const KEY = 'annal.query';
const SAMPLE = `fromAll()
  .when({
    $init: function () {
      return { count: 0, types: {} };
    },
    $any: function (s, e) {
      s.count += 1;
      s.types[e.eventType] = (s.types[e.eventType] || 0) + 1;
      return s;
    }
  });
`;

export async function render(ctx) {
  const errors = errorSlot();
  const source = textarea({ id: 'query-source', class: 'tall' }, localStorage.getItem(KEY) || SAMPLE);
  const run = h('button', { type: 'submit', class: 'btn primary', id: 'query-run' }, 'Run');
  const stop = h('button', { type: 'button', class: 'btn', id: 'query-stop', disabled: true }, 'Stop');
  const statusHost = h('div', { id: 'query-status' }, h('p', { class: 'muted' }, 'Not run yet.'));
  const stateHost = h('div', { id: 'query-state' });
  const resultHost = h('div', { id: 'query-result' });
  const form = h('form', { class: 'form wide' }, field('Query (JavaScript)', source), h('div', { class: 'form-actions' }, run, stop));
  replace(
    ctx.main,
    pageHeader('Query', 'Runs a transient projection over the events you can read'),
    errors.el,
    h('div', { class: 'grid two' }, card(null, form), card('Run', statusHost, h('h3', 'State'), stateHost, h('h3', 'Result'), resultHost)),
  );

  let current = null;
  let poller = null;

  const refresh = async () => {
    if (!current) return;
    const base = `projection/${api.seg(current)}`;
    let stat;
    try {
      stat = ((await api.get(`${base}/statistics`, { signal: ctx.signal })).projections || [])[0];
    } catch (e) {
      if (e.name !== 'AbortError') replace(statusHost, errorBox(e, 'GET statistics'));
      return;
    }
    if (!stat) return;
    replace(
      statusHost,
      h('div', { class: 'row' }, badge(stat.status), h('span', { class: 'mono muted' }, current), h('span', { class: 'muted' }, `${f.num(stat.eventsProcessedAfterRestart)} events · ${f.pct(stat.progress)}`)),
      /fault/i.test(stat.status) ? notice(`Faulted: ${stat.stateReason || 'no reason given'}`, 'error') : null,
    );
    for (const [what, host] of [['state', stateHost], ['result', resultHost]]) {
      try {
        const r = await api.call('GET', `${base}/${what}`, { signal: ctx.signal });
        replace(host, r.text.trim() ? pre(f.prettyJson(r.text)) : h('p', { class: 'muted' }, '–'));
      } catch (e) {
        if (e.name !== 'AbortError') replace(host, errorBox(e, `GET ${what}`));
      }
    }
    const done = /(completed|faulted|stopped)/i.test(stat.status) && !/running/i.test(stat.status);
    stop.disabled = done;
    if (done && poller) {
      poller.stop();
      poller = null;
    }
  };

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    errors.clear();
    localStorage.setItem(KEY, source.value);
    if (poller) poller.stop();
    const name = `query-${api.uuid().slice(0, 8)}`;
    const ok = await act(
      run,
      () =>
        api.call('POST', 'projections/transient', {
          query: { name, emit: 'no', checkpoints: 'no', enabled: 'yes' },
          body: source.value,
          contentType: 'application/javascript',
        }),
      { slot: errors, context: 'Run query' },
    );
    if (!ok) return;
    current = name;
    stop.disabled = false;
    replace(stateHost);
    replace(resultHost);
    poller = ctx.poll(refresh, 1000);
  });
  stop.addEventListener('click', async () => {
    if (!current) return;
    await act(stop, () => api.post(`projection/${api.seg(current)}/command/disable`), { slot: errors, context: 'Stop query' });
    refresh();
  });
}
