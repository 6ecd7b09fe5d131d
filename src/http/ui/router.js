// Hash routing: `#/streams/foo/10/backward/20` is matched against the route table
// (`/streams/:stream/:pos/:dir/:count`), its page module is loaded on demand and rendered into
// the main element. Each page gets a context whose pollers, fetches and clean-ups end when the
// page is left, so nothing keeps running behind the operator's back. A reload lands on the same
// page (deep links).

import { Poller } from './poll.js';

/** Splits `#/a/b%2Fc?x=1` into decoded segments and a query. */
export function parseHash(hash) {
  const raw = (hash || '').replace(/^#/, '');
  const [path, q = ''] = raw.split('?');
  const segments = path
    .split('/')
    .filter((x) => x !== '')
    .map((x) => {
      try {
        return decodeURIComponent(x);
      } catch {
        return x;
      }
    });
  return { segments, query: new URLSearchParams(q), path };
}

function match(pattern, segments) {
  const parts = pattern.split('/').filter(Boolean);
  if (parts.length !== segments.length) return null;
  const params = {};
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i];
    if (p.startsWith(':')) {
      const [name, re] = p.slice(1).split('=');
      if (re && !new RegExp(`^(?:${re})$`).test(segments[i])) return null;
      params[name] = segments[i];
    } else if (p !== segments[i]) return null;
  }
  return params;
}

/** One page's lifetime: pollers, an abort signal for its fetches, and clean-ups. */
class PageContext {
  constructor(router, route, params, query, main) {
    this.router = router;
    this.route = route;
    this.params = params;
    this.query = query;
    this.main = main;
    this.abort = new AbortController();
    this.signal = this.abort.signal;
    this.pollers = [];
    this.cleanups = [];
  }

  get alive() {
    return !this.signal.aborted;
  }

  /**
   * Starts `fn` now and every `ms` (≥ 1 s) while the page is shown and the tab visible. A poll
   * that throws shows its error at the top of the page until a later poll succeeds.
   */
  poll(fn, ms) {
    const run = async () => {
      if (!this.alive) return;
      try {
        await fn();
        this.pollError?.remove();
        this.pollError = null;
      } catch (e) {
        if (e?.name === 'AbortError' || !this.alive) return;
        this.router.hooks.pollError?.(this, e);
      }
    };
    const p = new Poller(run, ms).start();
    this.pollers.push(p);
    return p;
  }

  onLeave(fn) {
    this.cleanups.push(fn);
  }

  setTitle(title) {
    document.title = `${title} · Annal`;
  }

  go(hash) {
    this.router.go(hash);
  }

  dispose() {
    this.abort.abort();
    for (const p of this.pollers) p.stop();
    for (const fn of this.cleanups) {
      try {
        fn();
      } catch (e) {
        console.warn(e);
      }
    }
  }
}

export class Router {
  /**
   * routes: `[{ path: '/streams/:stream', load: () => import(...), title, nav, guard }]`;
   * hooks: `{ main, before(route, parsed) → hash to redirect to | null, after(route), error(e) }`.
   */
  constructor(routes, hooks) {
    this.routes = routes;
    this.hooks = hooks;
    this.ctx = null;
    this.seq = 0;
    window.addEventListener('hashchange', () => this.render());
  }

  go(hash) {
    if (location.hash === hash) this.render();
    else location.hash = hash;
  }

  /** Renders the page of the current hash again (same route, fresh context). */
  refresh() {
    return this.render();
  }

  async render() {
    const seq = ++this.seq;
    const parsed = parseHash(location.hash);
    let route = null;
    let params = null;
    for (const r of this.routes) {
      params = match(r.path, parsed.segments);
      if (params) {
        route = r;
        break;
      }
    }
    const redirect = this.hooks.before(route, parsed);
    if (redirect) {
      location.replace(redirect);
      return;
    }
    if (this.ctx) this.ctx.dispose();
    const main = this.hooks.main;
    main.replaceChildren();
    main.setAttribute('aria-busy', 'true');
    const ctx = new PageContext(this, route, params || {}, parsed.query, main);
    this.ctx = ctx;
    try {
      const mod = route ? await route.load() : await import('./pages/notfound.js');
      if (seq !== this.seq) return;
      if (route?.title) ctx.setTitle(route.title);
      this.hooks.after(route, parsed);
      await mod.render(ctx);
    } catch (e) {
      if (seq !== this.seq || e?.name === 'AbortError') return;
      this.hooks.error(e, ctx);
    } finally {
      if (seq === this.seq) main.removeAttribute('aria-busy');
    }
  }
}
