// Polling that respects the operator's machine and the node: a poller never starts a call
// before the previous one finished, never more than once a second, and does nothing while the
// tab is hidden (document.visibilityState); it runs again as soon as the tab is visible.

export const MIN_INTERVAL_MS = 1000;

const active = new Set();

document.addEventListener('visibilitychange', () => {
  for (const p of active) p.wake();
});

export const visible = () => document.visibilityState === 'visible';

/** Resolves once the tab is visible (at once if it is). */
export function whenVisible(signal) {
  if (visible()) return Promise.resolve();
  return new Promise((resolve) => {
    const on = () => {
      if (visible() || signal?.aborted) {
        document.removeEventListener('visibilitychange', on);
        resolve();
      }
    };
    document.addEventListener('visibilitychange', on);
    signal?.addEventListener('abort', on);
  });
}

/** Sleeps `ms`, cut short by `signal`. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

export class Poller {
  /** `fn()` runs now and then every `intervalMs` (at least a second) while visible. */
  constructor(fn, intervalMs) {
    this.fn = fn;
    this.interval = Math.max(MIN_INTERVAL_MS, intervalMs || MIN_INTERVAL_MS);
    this.timer = null;
    this.running = false;
    this.stopped = true;
    this.lastStart = 0;
  }

  start() {
    this.stopped = false;
    active.add(this);
    this.wake();
    return this;
  }

  stop() {
    this.stopped = true;
    active.delete(this);
    clearTimeout(this.timer);
    this.timer = null;
  }

  /** Runs at once if due, else schedules the next run (nothing while hidden). */
  wake() {
    if (this.stopped || this.running) return;
    clearTimeout(this.timer);
    this.timer = null;
    if (!visible()) return;
    const wait = this.lastStart + this.interval - Date.now();
    if (wait > 0) this.timer = setTimeout(() => this.wake(), wait);
    else this.tick();
  }

  async tick() {
    this.running = true;
    this.lastStart = Date.now();
    try {
      await this.fn();
    } catch (e) {
      if (e?.name !== 'AbortError') console.warn('poll failed', e);
    } finally {
      this.running = false;
    }
    this.wake();
  }
}
