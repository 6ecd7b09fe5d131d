// Browser tests of the Admin UI in Debian's headless Chromium, driven by playwright-core (Node 20).
//
//   node tests/ui/browser.mjs --url http://127.0.0.1:PORT/ --screenshots DIR
//        [--scenario single|follower|cluster] [--members URL,URL,URL]
//        [--user admin --password changeit] [--chromium /usr/bin/chromium]
//
// --url is where the UI is served: `GET {url}` answers 302 to `web/index.html`, the page is
// `{url}web/index.html` and the API is `{url}` (the node itself once it embeds the UI, or
// tests/ui/devserver.mjs in front of a node). playwright-core is loaded from env PLAYWRIGHT_CORE
// (a path to the package) or target/ui-tools/node_modules/playwright-core; install it with
// `npm install --prefix target/ui-tools playwright-core@1` (it downloads no browser).
//
// Scenarios:
//   single   (a single node) sign-in, a wrong password, the dashboard, a stream written by the
//            test, an event added through the form and read back, a projection whose state
//            follows new events, a persistent subscription's counters, a user without admin
//            menus, a scavenge started, watched and found in the history, an API error with its
//            status and reason, a deep link surviving a reload, no CSP violation; and the
//            figures: first load (bytes, first paint), idle requests per minute, hidden tab.
//   follower (--url is a follower of a 3-node cluster) sign-in, a scavenge from the admin page
//            completes and is in the history, streams are readable, the cluster page shows the
//            leader.
//   cluster  (--members: the UI base URL of each of 3 members) the cluster page of a follower
//            shows the leader; the leader is shut down (POST /admin/shutdown) and within 30 s the
//            page shows another leader and the old one dead.
//
// Each step is printed; the first failure exits 1 with its reason (and a failure-*.png); 0 when
// everything passed. One PNG per page is saved under --screenshots.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '../..');

// ---- arguments ---------------------------------------------------------------------------------

function parseArgs(argv) {
  const o = { scenario: 'single', user: 'admin', password: 'changeit', chromium: '/usr/bin/chromium', members: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) die(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--url') o.url = v();
    else if (a === '--screenshots') o.screenshots = v();
    else if (a === '--scenario') o.scenario = v();
    else if (a === '--members') o.members = v().split(',').map((x) => x.trim()).filter(Boolean);
    else if (a === '--user') o.user = v();
    else if (a === '--password') o.password = v();
    else if (a === '--chromium') o.chromium = v();
    else if (a === '--help' || a === '-h') {
      console.log(fs.readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').filter((l) => l.startsWith('//')).map((l) => l.slice(3)).join('\n'));
      process.exit(0);
    } else die(`unknown argument ${a}`);
  }
  if (!['single', 'follower', 'cluster'].includes(o.scenario)) die(`unknown scenario ${o.scenario}`);
  if (o.scenario === 'cluster') {
    if (o.members.length !== 3) die('--scenario cluster needs --members URL,URL,URL');
    o.members = o.members.map(slash);
    o.url = o.url ? slash(o.url) : null;
  } else {
    if (!o.url) die('--url is required');
    o.url = slash(o.url);
  }
  if (!o.screenshots) die('--screenshots DIR is required');
  return o;
}

function slash(u) {
  return u.endsWith('/') ? u : u + '/';
}

function die(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

const opts = parseArgs(process.argv.slice(2));
fs.mkdirSync(opts.screenshots, { recursive: true });

function loadPlaywright() {
  const where = process.env.PLAYWRIGHT_CORE ? path.resolve(process.env.PLAYWRIGHT_CORE) : path.join(repo, 'target/ui-tools/node_modules/playwright-core');
  try {
    return createRequire(import.meta.url)(where);
  } catch (e) {
    die(`playwright-core not found at ${where} (npm install --prefix target/ui-tools playwright-core@1, or set PLAYWRIGHT_CORE): ${e.message}`);
  }
}

// ---- steps -------------------------------------------------------------------------------------

let page = null;
let stepNo = 0;
const t0 = Date.now();
const figures = [];

class StepFailure extends Error {}

async function step(name, fn) {
  stepNo++;
  const started = Date.now();
  process.stdout.write(`[${String(stepNo).padStart(2, '0')}] ${name} … `);
  try {
    const r = await fn();
    console.log(`ok (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return r;
  } catch (e) {
    console.log('FAILED');
    console.error(`FAIL: step ${stepNo} "${name}": ${e.message}`);
    if (page) {
      try {
        const file = path.join(opts.screenshots, `failure-${String(stepNo).padStart(2, '0')}.png`);
        await page.screenshot({ path: file, fullPage: true });
        console.error(`      screenshot of the failure: ${file}`);
        console.error(`      page: ${page.url()}`);
        const alerts = await page.locator('.alert.error').allInnerTexts().catch(() => []);
        if (alerts.length) console.error(`      errors on the page: ${alerts.join(' | ')}`);
      } catch {
        /* the browser may be gone */
      }
    }
    await cleanup();
    console.log(`0 passed, 1 failed`);
    process.exit(1);
  }
}

function check(cond, msg) {
  if (!cond) throw new StepFailure(msg);
}

function figure(label, value) {
  figures.push([label, value]);
  console.log(`      ${label}: ${value}`);
}

/** Polls `fn` until it returns a truthy value; fails with `what` after `ms`. */
async function until(what, fn, ms = 30000, every = 250) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await sleep(every);
  }
  throw new StepFailure(`timed out after ${ms / 1000} s waiting for ${what}${last instanceof Error ? ` (last error: ${last.message})` : ''}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let shotNo = 0;
async function shot(name) {
  shotNo++;
  await page.waitForTimeout(150);
  const file = path.join(opts.screenshots, `${String(shotNo).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
}

// ---- the API, from the test's side -------------------------------------------------------------

function basic(user, password) {
  return 'Basic ' + Buffer.from(`${user}:${password}`).toString('base64');
}

async function api(base, method, p, { body, headers = {}, user = opts.user, password = opts.password, expect } = {}) {
  const h = { Accept: 'application/json', Authorization: basic(user, password), ...headers };
  let b = body;
  if (b !== undefined && typeof b !== 'string') {
    b = JSON.stringify(b);
    h['Content-Type'] = h['Content-Type'] || 'application/json';
  }
  const res = await fetch(new URL(p, base), { method, headers: h, body: b, redirect: 'manual' });
  const text = await res.text();
  if (expect !== undefined ? res.status !== expect : !res.ok) {
    throw new StepFailure(`${method} ${p} answered ${res.status} ${res.statusText}: ${text.slice(0, 300)}`);
  }
  let data = text;
  try {
    data = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.status, headers: res.headers, data, text };
}

/** Events in a stream (its last event number + 1). */
async function streamLength(base, stream) {
  const r = await api(base, 'GET', `streams/${encodeURIComponent(stream)}/head/backward/1?embed=body`);
  const e = (r.data.entries || [])[0];
  return e ? Number(e.positionEventNumber ?? e.eventNumber) + 1 : 0;
}

function uuid() {
  return crypto.randomUUID();
}

async function appendEvents(base, stream, events) {
  await api(base, 'POST', `streams/${encodeURIComponent(stream)}`, {
    body: JSON.stringify(events.map((e) => ({ eventId: uuid(), ...e }))),
    headers: { 'Content-Type': 'application/vnd.eventstore.events+json' },
  });
}

// ---- the browser -------------------------------------------------------------------------------

let context = null;
let profileDir = null;
const consoleErrors = [];
const cspViolations = [];
const pageErrors = [];

async function launch() {
  const { chromium } = loadPlaywright();
  check(fs.existsSync(opts.chromium), `no browser at ${opts.chromium} (apt-get install -y chromium)`);
  profileDir = fs.mkdtempSync(path.join(os.tmpdir(), 'annal-ui-profile-'));
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: opts.chromium,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(30000);
  // Headless Chromium keeps every tab visible; this lets the test hide the tab the way a browser
  // does (document.visibilityState 'hidden' and a visibilitychange event).
  await page.addInitScript(() => {
    window.__annalHidden = false;
    Object.defineProperty(Document.prototype, 'visibilityState', { configurable: true, get: () => (window.__annalHidden ? 'hidden' : 'visible') });
    Object.defineProperty(Document.prototype, 'hidden', { configurable: true, get: () => window.__annalHidden });
  });
  page.on('console', (m) => {
    const text = m.text();
    if (/Content[- ]Security[- ]Policy|Refused to (execute|load|apply|connect|frame)/i.test(text)) cspViolations.push(text);
    else if (m.type() === 'error') consoleErrors.push(text);
  });
  page.on('pageerror', (e) => pageErrors.push(e.message));
}

async function cleanup() {
  try {
    if (context) await context.close();
  } catch {
    /* already gone */
  }
  context = null;
  if (profileDir) fs.rmSync(profileDir, { recursive: true, force: true });
}

const ui = (base, hash = '') => `${base}web/index.html${hash}`;
const enc = encodeURIComponent;

async function goto(base, hash) {
  await page.goto(ui(base, hash));
  await page.waitForLoadState('domcontentloaded');
}

async function textOf(sel) {
  return (await page.locator(sel).first().innerText()).trim();
}

async function signIn(base, user, password) {
  await goto(base, '#/signin');
  await page.waitForSelector('#signin-user');
  await page.fill('#signin-user', user);
  await page.fill('#signin-password', password);
  await page.click('#signin-submit');
  await page.waitForSelector('#current-user');
  await until(`the dashboard after signing in as ${user}`, async () => (await page.locator('#figures').count()) > 0);
  check((await textOf('#current-user')) === user, `the top bar names ${await textOf('#current-user')}, not ${user}`);
}

async function signOut() {
  await page.click('#sign-out');
  await page.waitForSelector('#signin-user');
  check((await page.evaluate(() => sessionStorage.getItem('annal.session'))) === null, 'sign-out left credentials in sessionStorage');
}

/** Requests the page makes while `fn` runs (all of them, with URLs). */
async function countRequests(ms) {
  const seen = [];
  const on = (r) => seen.push(r.url());
  page.on('request', on);
  await page.waitForTimeout(ms);
  page.off('request', on);
  return seen;
}

// ---- checks common to the scenarios ------------------------------------------------------------

async function checkServing(base) {
  const root = await fetch(base, { redirect: 'manual' });
  check(root.status === 302, `GET ${base} answered ${root.status}, not 302`);
  const loc = root.headers.get('location');
  check(loc && new URL(loc, base).href === ui(base), `GET ${base} redirects to ${loc}, not web/index.html`);
  const idx = await fetch(ui(base));
  check(idx.ok, `GET web/index.html answered ${idx.status}`);
  check(/text\/html/.test(idx.headers.get('content-type') || ''), `index.html has content type ${idx.headers.get('content-type')}`);
  const csp = idx.headers.get('content-security-policy') || '';
  check(/script-src 'self'/.test(csp) && /frame-ancestors 'none'/.test(csp), `index.html has no strict Content-Security-Policy (got "${csp}")`);
  check(idx.headers.get('x-content-type-options') === 'nosniff', 'index.html lacks X-Content-Type-Options: nosniff');
  check(idx.headers.get('x-frame-options') === 'DENY', 'index.html lacks X-Frame-Options: DENY');
  const html = await idx.text();
  check(!/<script(?![^>]*\bsrc=)[^>]*>/i.test(html), 'index.html has an inline script');
  check(!/\son[a-z]+\s*=/i.test(html) && !/\sstyle\s*=/i.test(html), 'index.html has inline handlers or style attributes');
}

async function measureFirstLoad(base) {
  // A cold load (cache disabled) of the dashboard, signed in: bytes over the wire from the CDP
  // network events, first contentful paint, and the time until the figures are rendered.
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const sizes = new Map();
  let requests = 0;
  const onReq = () => requests++;
  const onDone = (ev) => sizes.set(ev.requestId, ev.encodedDataLength);
  cdp.on('Network.requestWillBeSent', onReq);
  cdp.on('Network.loadingFinished', onDone);
  await page.goto('about:blank');
  const started = Date.now();
  await page.goto(ui(base, '#/dashboard'));
  await page.waitForSelector('#fig-writer .stat-value');
  await until('the writer checkpoint on the dashboard', async () => /\d/.test(await textOf('#fig-writer .stat-value')));
  const rendered = Date.now() - started;
  await page.waitForTimeout(300);
  const perf = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const fcp = performance.getEntriesByName('first-contentful-paint')[0];
    const res = performance.getEntriesByType('resource');
    const ui = res.filter((r) => /\/web\//.test(r.name));
    return {
      fcp: fcp ? Math.round(fcp.startTime) : null,
      domContentLoaded: nav ? Math.round(nav.domContentLoadedEventEnd) : null,
      uiBytes: ui.reduce((a, r) => a + (r.transferSize || 0), 0) + (nav ? nav.transferSize : 0),
      uiFiles: ui.length + 1,
      decoded: ui.reduce((a, r) => a + (r.decodedBodySize || 0), 0) + (nav ? nav.decodedBodySize : 0),
    };
  });
  cdp.off('Network.requestWillBeSent', onReq);
  cdp.off('Network.loadingFinished', onDone);
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
  const total = [...sizes.values()].reduce((a, b) => a + b, 0);
  figure('first load of the dashboard: bytes on the wire (all requests, CDP)', `${total} B in ${requests} requests`);
  figure('first load: UI files (resource timing transferSize)', `${perf.uiBytes} B in ${perf.uiFiles} files (${perf.decoded} B decoded)`);
  figure('first load: first contentful paint', `${perf.fcp} ms (DOMContentLoaded ${perf.domContentLoaded} ms)`);
  figure('first load: dashboard figures rendered after', `${rendered} ms`);
}

async function measureIdle() {
  await page.reload();
  await until('the dashboard figures', async () => /\d/.test(await textOf('#fig-writer .stat-value')));
  await page.waitForTimeout(1500);
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  let bytes = 0;
  const onDone = (ev) => (bytes += ev.encodedDataLength);
  cdp.on('Network.loadingFinished', onDone);
  const seen = await countRequests(15000);
  cdp.off('Network.loadingFinished', onDone);
  await cdp.detach();
  const perMin = Math.round((seen.length * 60) / 15);
  const paths = [...new Set(seen.map((u) => new URL(u).pathname.replace(/.*\/(?=[^/]+$)/, '')))].join(', ');
  figure('idle dashboard tab: API requests per minute', `${perMin} (${seen.length} in 15 s: ${paths})`);
  figure('idle dashboard tab: bytes per minute on the wire', `${Math.round((bytes * 60) / 15)} B`);
  check(seen.length > 0, 'the dashboard made no request in 15 s: it is not live');
  check(perMin <= 120, `the idle dashboard makes ${perMin} requests a minute (more than one a second per poller?)`);
  // Hide the tab: no request at all may follow (in-flight ones finish first).
  await page.evaluate(() => {
    window.__annalHidden = true;
    document.dispatchEvent(new Event('visibilitychange'));
  });
  await page.waitForTimeout(2500);
  const hidden = await countRequests(10000);
  figure('hidden tab: requests in 10 s', `${hidden.length}`);
  check(hidden.length === 0, `a hidden tab made ${hidden.length} requests: ${hidden.join(', ')}`);
  await page.evaluate(() => {
    window.__annalHidden = false;
    document.dispatchEvent(new Event('visibilitychange'));
  });
  const back = await countRequests(2500);
  check(back.length > 0, 'the dashboard did not poll again once visible');
}

function finalChecks() {
  check(cspViolations.length === 0, `CSP violations in the console: ${cspViolations.join(' | ')}`);
  check(pageErrors.length === 0, `uncaught errors in the page: ${pageErrors.join(' | ')}`);
}

// ---- scenario: single --------------------------------------------------------------------------

async function single() {
  const base = opts.url;
  const run = Math.random().toString(36).slice(2, 8);
  const stream = `ui-test-${run}`;

  await step('the UI is served: / redirects to web/index.html; CSP and security headers; no inline script', () => checkServing(base));
  await step('launch headless Chromium', launch);

  await step('a wrong password shows a clear message (401)', async () => {
    await goto(base, '#/dashboard');
    await page.waitForSelector('#signin-user');
    check(page.url().includes('#/signin'), 'an unsigned visit to #/dashboard does not lead to the sign-in page');
    await page.fill('#signin-user', opts.user);
    await page.fill('#signin-password', 'certainly-not-the-password');
    await page.click('#signin-submit');
    await page.waitForSelector('#signin-error');
    const t = await textOf('#signin-error');
    check(/wrong user name or password/i.test(t) && /401/.test(t), `the message is "${t}"`);
    check((await page.evaluate(() => sessionStorage.getItem('annal.session'))) === null, 'failed sign-in stored credentials');
    await shot('signin-wrong-password');
  });

  await step(`sign in as ${opts.user}; credentials only in sessionStorage, no cookie`, async () => {
    await page.fill('#signin-user', opts.user);
    await page.fill('#signin-password', opts.password);
    await page.click('#signin-submit');
    await page.waitForSelector('#figures');
    check(page.url().includes('#/dashboard'), `after sign-in the page is ${page.url()}`);
    const cookies = await context.cookies();
    check(cookies.length === 0, `the UI set cookies: ${cookies.map((c) => c.name).join(', ')}`);
    const stored = await page.evaluate(() => ({ s: sessionStorage.getItem('annal.session'), l: JSON.stringify(localStorage) }));
    check(stored.s && JSON.parse(stored.s).groups.includes('$admins'), 'the session does not hold the $admins group');
    check(!/Basic |changeit/.test(stored.l), 'credentials found in localStorage');
    for (const nav of ['admin', 'users', 'all']) check((await page.locator(`[data-nav=${nav}]`).count()) === 1, `admin menu ${nav} missing for ${opts.user}`);
  });

  await step('dashboard renders figures from /info, /stats and /metrics', async () => {
    await until('state, version, uptime and writer checkpoint', async () => {
      const [st, ver, up, wr] = await Promise.all(['#fig-state', '#fig-version', '#fig-uptime', '#fig-writer'].map((s) => textOf(`${s} .stat-value`)));
      return /master|leader/i.test(st) && /\d+\.\d+/.test(ver) && /\d/.test(up) && /\d/.test(wr);
    });
    check((await page.locator('#queues tbody tr').count()) > 0, 'no queue rows');
    check((await page.locator('#disks tbody tr').count()) > 0, 'no disk rows');
    await until('events per second (the second poll)', async () => /\d/.test(await textOf('#fig-in .stat-value')));
    check((await page.locator('#charts svg').count()) >= 3, 'the charts are missing');
    await shot('dashboard');
  });

  await step('measure the first load of the dashboard', () => measureFirstLoad(base));
  await step('measure the idle tab and check that a hidden tab stops polling', measureIdle);

  await step('the dashboard shows events per second and charts under a write load', async () => {
    let writing = true;
    const writer = (async () => {
      for (let i = 0; writing && i < 60; i++) {
        await appendEvents(base, `ui-load-${run}`, Array.from({ length: 20 }, (_, k) => ({ eventType: 'Load', data: { i, k } })));
        await sleep(250);
      }
    })();
    try {
      await until('events in above zero', async () => {
        const t = await textOf('#fig-in .stat-value');
        return /\d/.test(t) && Number(t.replace(/[^0-9.]/g, '')) > 0;
      }, 30000, 500);
      await page.waitForTimeout(6000);
    } finally {
      writing = false;
      await writer;
    }
    await shot('dashboard-live');
  });

  await step(`browse to stream ${stream}, written by the test, and see its events`, async () => {
    await appendEvents(base, stream, [
      { eventType: 'TestStarted', data: { run, n: 1 }, metadata: { by: 'browser.mjs' } },
      { eventType: 'TestProgressed', data: { run, n: 2 } },
      { eventType: 'TestProgressed', data: { run, n: 3 } },
    ]);
    await goto(base, '#/streams');
    await page.fill('#open-stream', stream);
    await page.press('#open-stream', 'Enter');
    await page.waitForSelector('#events tbody tr');
    await until('3 event rows', async () => (await page.locator('#events tbody tr').count()) === 3);
    const body = await textOf('#events');
    check(body.includes('TestStarted') && body.includes('TestProgressed'), `the table shows: ${body.slice(0, 200)}`);
    await shot('stream');
    await goto(base, '#/streams');
    await until(`${stream} among the recently created streams`, async () => (await textOf('#recent-created')).includes(stream), 30000);
    await until(`${stream} among the recently changed streams`, async () => (await textOf('#recent-changed')).includes(stream), 30000);
    await shot('stream-browser');
  });

  await step('event view pretty-prints data and metadata; a link resolves', async () => {
    await goto(base, `#/streams/${enc(stream)}/0`);
    await page.waitForSelector('#event-data pre');
    const data = await textOf('#event-data pre');
    check(data.includes(`"run": "${run}"`) && data.includes('\n'), `data shown as ${data}`);
    check((await page.locator('text=browser.mjs').count()) > 0, 'the metadata is not shown');
    await shot('event');
    await until('the $ce- link of the event', async () => {
      await goto(base, `#/streams/${enc('$ce-ui')}`);
      await page.waitForSelector('#events, .alert.error');
      return (await page.locator('#events tbody a', { hasText: `@${stream}` }).count()) > 0;
    }, 30000, 1000);
    await page.locator('#events tbody tr').first().locator('a').first().click();
    await page.waitForSelector('#link-target');
    check((await textOf('#link-target')).includes(`@${stream}`), 'the link does not resolve to the event');
    await shot('event-link');
  });

  await step('a deep link survives a reload', async () => {
    const hash = `#/streams/${enc(stream)}/0/forward/20`;
    await goto(base, hash);
    await page.waitForSelector('#events tbody tr');
    await page.reload();
    await page.waitForSelector('#events tbody tr');
    check(new URL(page.url()).hash === hash, `after reload the page is ${page.url()}`);
    check((await textOf('main h1')) === stream, `after reload the heading is ${await textOf('main h1')}`);
    check((await page.locator('#events tbody tr').count()) === 3, 'after reload the events are not shown');
  });

  await step('add an event through the form and read it back through the API', async () => {
    await goto(base, `#/streams/${enc(stream)}`);
    await page.click('#add-event');
    await page.waitForSelector('#ev-type');
    check((await page.inputValue('#ev-stream')) === stream, 'the form is not for the stream');
    await page.fill('#ev-type', 'AddedFromUi');
    await page.fill('#ev-data', JSON.stringify({ via: 'ui', run }));
    await page.fill('#ev-meta', '{"source":"form"}');
    await page.click('#ev-submit');
    await page.waitForSelector('#events tbody tr');
    await until('4 events in the stream page', async () => (await page.locator('#events tbody tr').count()) === 4);
    const r = await api(base, 'GET', `streams/${enc(stream)}/3`, { headers: { Accept: 'application/vnd.eventstore.atom+json' }, expect: 200 });
    const e = r.data;
    check(e.content?.eventType === 'AddedFromUi', `event 3 has type ${e.content?.eventType}`);
    check(e.content?.data?.via === 'ui' && e.content?.data?.run === run, `event 3 has data ${JSON.stringify(e.content?.data)}`);
    check(e.content?.metadata?.source === 'form', `event 3 has metadata ${JSON.stringify(e.content?.metadata)}`);
    await goto(base, `#/streams/${enc(stream)}/add`);
    await page.waitForSelector('#ev-type');
    await shot('add-event');
  });

  await step('live follow shows events as they are written', async () => {
    await goto(base, `#/streams/${enc(stream)}`);
    await page.waitForSelector('#events tbody tr');
    const before = await page.locator('#events tbody tr').count();
    await page.click('#follow');
    await page.waitForTimeout(1500);
    await appendEvents(base, stream, [{ eventType: 'Followed', data: { n: 1 } }, { eventType: 'Followed', data: { n: 2 } }]);
    await until('two more rows while following', async () => (await page.locator('#events tbody tr').count()) === before + 2, 30000);
    await shot('stream-follow');
    await page.click('#follow');
  });

  await step('soft and hard delete a stream, each after confirmation', async () => {
    const soft = `ui-soft-${run}`;
    const hard = `ui-hard-${run}`;
    await appendEvents(base, soft, [{ eventType: 'Doomed', data: {} }]);
    await appendEvents(base, hard, [{ eventType: 'Doomed', data: {} }]);
    await goto(base, `#/streams/${enc(soft)}`);
    await page.waitForSelector('#events tbody tr');
    await page.click('#soft-delete');
    await page.waitForSelector('dialog[open]');
    await shot('confirm-delete');
    await page.click('dialog[open] button[type=submit]');
    await page.waitForURL(/#\/streams$/);
    await api(base, 'GET', `streams/${enc(soft)}`, { expect: 404 });
    await goto(base, `#/streams/${enc(hard)}`);
    await page.waitForSelector('#events tbody tr');
    await page.click('#hard-delete');
    await page.waitForSelector('dialog[open]');
    check(await page.isDisabled('dialog[open] button[type=submit]'), 'hard delete is possible without typing the name');
    await page.fill('dialog[open] input', hard);
    await page.click('dialog[open] button[type=submit]');
    await page.waitForURL(/#\/streams$/);
    await api(base, 'GET', `streams/${enc(hard)}`, { expect: 410 });
  });

  await step('edit the stream metadata (ACL and max count) and read it back', async () => {
    await goto(base, `#/streams/${enc(stream)}/metadata`);
    await page.waitForSelector('#md-maxCount');
    await page.fill('#md-maxCount', '1000');
    await page.fill('#acl-r', '$all');
    await page.click('#md-save');
    await until('the saved metadata', async () => {
      const r = await api(base, 'GET', `streams/${enc(stream)}/metadata`);
      return r.data?.$maxCount === 1000 && r.data?.$acl?.$r === '$all';
    });
    await page.waitForSelector('#md-maxCount');
    await shot('stream-metadata');
  });

  const proj = `ui-proj-${run}`;
  await step(`create projection ${proj} and see its state change as events arrive`, async () => {
    await goto(base, '#/projections/new');
    await page.waitForSelector('#pj-name');
    await page.fill('#pj-name', proj);
    await page.fill('#pj-source', `fromStream(${JSON.stringify(stream)}).when({ $init: function () { return { count: 0 }; }, $any: function (s, e) { s.count += 1; return s; } });`);
    await page.click('#pj-create');
    await page.waitForSelector('#pj-state');
    const n = await streamLength(base, stream);
    await until(`state count ${n}`, async () => new RegExp(`"count": ${n}\\b`).test(await textOf('#pj-state')), 60000);
    await shot('projection-before');
    await appendEvents(base, stream, [{ eventType: 'Later', data: { n: 5 } }, { eventType: 'Later', data: { n: 6 } }]);
    await until(`state count ${n + 2} after two more events`, async () => new RegExp(`"count": ${n + 2}\\b`).test(await textOf('#pj-state')), 60000);
    check(/running/i.test(await textOf('#pj-status')), `status ${await textOf('#pj-status')}`);
    await shot('projection');
    await goto(base, '#/projections');
    await until(`${proj} in the list`, async () => (await textOf('#projections')).includes(proj));
    await until('the standard projections', async () => (await textOf('#standard-projections')).includes('$by_category'));
    await shot('projections');
    await goto(base, `#/projections/${enc(proj)}/config`);
    await page.waitForSelector('#cfg-checkpointHandledThreshold');
    await shot('projection-config');
  });

  await step(`stop ${proj} and delete it with its state stream`, async () => {
    await goto(base, `#/projections/${enc(proj)}`);
    await page.waitForSelector('#pj-status');
    await until('the stop button enabled', async () => !(await page.isDisabled('#pj-stop')));
    await page.click('#pj-stop');
    await until('status Stopped', async () => /stopped/i.test(await textOf('#pj-status')), 30000);
    await page.click('#pj-delete');
    await page.waitForSelector('dialog[open]');
    await page.check('dialog[open] input[name=deleteStateStream]');
    await page.check('dialog[open] input[name=deleteCheckpointStream]');
    await page.click('dialog[open] button[type=submit]');
    await page.waitForURL(/#\/projections$/);
    await until('the projection gone', async () => {
      const r = await fetch(new URL(`projection/${enc(proj)}`, base), { headers: { Authorization: basic(opts.user, opts.password), Accept: 'application/json' } });
      return r.status === 404;
    }, 30000, 500);
  });

  await step('run an ad-hoc query (transient projection) and see its result', async () => {
    await goto(base, '#/query');
    await page.waitForSelector('#query-source');
    await page.fill('#query-source', `fromStream(${JSON.stringify(stream)}).when({ $init: function () { return { seen: 0 }; }, $any: function (s, e) { s.seen += 1; return s; } });`);
    await page.click('#query-run');
    const n = await streamLength(base, stream);
    await until(`the query state (seen ${n})`, async () => new RegExp(`"seen": ${n}\\b`).test(await textOf('#query-state')), 60000);
    await shot('query');
  });

  const group = `ui-group-${run}`;
  await step(`create persistent subscription ${group} and see its counters`, async () => {
    await goto(base, '#/subscriptions/new');
    await page.waitForSelector('#ps-stream');
    await page.fill('#ps-stream', stream);
    await page.fill('#ps-group', group);
    check((await page.inputValue('#ps-messageTimeoutMilliseconds')) === '10000', 'the message timeout default is not 10000');
    check((await page.inputValue('#ps-readBatchSize')) === '20', 'the read batch size default is not 20');
    await page.click('#ps-save');
    await page.waitForSelector('#ps-known');
    const last = (await streamLength(base, stream)) - 1;
    await until(`last known event ${last}`, async () => (await textOf('#ps-known')) === String(last));
    // A consumer takes three messages and acknowledges them.
    const r = await api(base, 'GET', `subscriptions/${enc(stream)}/${enc(group)}/3?embed=None`, { headers: { Accept: 'application/vnd.eventstore.competingatom+json' } });
    const ids = (r.data.entries || []).map((e) => (e.links || []).find((l) => l.relation === 'ack')?.uri?.split('/').pop()).filter(Boolean);
    check(ids.length === 3, `the consumer got ${ids.length} messages`);
    await api(base, 'POST', `subscriptions/${enc(stream)}/${enc(group)}/ack?ids=${ids.join(',')}`, { expect: 202 });
    await until('3 processed on the detail page', async () => (await textOf('#ps-total')) === '3');
    await shot('subscription');
    await goto(base, '#/subscriptions');
    await until(`${group} in the list`, async () => (await page.locator(`[data-group="${stream}::${group}"]`).count()) === 1);
    await shot('subscriptions');
    await goto(base, `#/subscriptions/${enc(stream)}/${enc(group)}/parked`);
    await page.waitForSelector('#parked-events');
    await shot('subscription-parked');
  });

  await step(`edit ${group} (max retry count 7), then delete it`, async () => {
    await goto(base, `#/subscriptions/${enc(stream)}/${enc(group)}/edit`);
    await page.waitForSelector('#ps-maxRetryCount');
    await page.fill('#ps-maxRetryCount', '7');
    await page.click('#ps-save');
    await page.waitForSelector('#ps-known');
    const info = await api(base, 'GET', `subscriptions/${enc(stream)}/${enc(group)}/info`);
    check(info.data.config.maxRetryCount === 7, `maxRetryCount is ${info.data.config.maxRetryCount}`);
    await page.click('#ps-delete');
    await page.waitForSelector('dialog[open]');
    await page.click('dialog[open] button[type=submit]');
    await page.waitForURL(/#\/subscriptions$/);
    await api(base, 'GET', `subscriptions/${enc(stream)}/${enc(group)}/info`, { expect: 404 });
  });

  await step('an API error is shown with its status and reason', async () => {
    await goto(base, '#/subscriptions/new');
    await page.waitForSelector('#ps-stream');
    await page.fill('#ps-stream', stream);
    await page.fill('#ps-group', `bad-${run}`);
    await page.fill('#ps-bufferSize', '5');
    await page.click('#ps-save');
    await page.waitForSelector('.alert.error');
    const t = await textOf('.alert.error');
    check(/400/.test(t) && /bufferSize must be greater than readBatchSize/.test(t), `the error shows "${t}"`);
    await shot('api-error');
    await goto(base, `#/streams/${enc(`no-such-stream-${run}`)}`);
    await page.waitForSelector('.alert.error');
    check(/404/.test(await textOf('.alert.error')), 'a missing stream is not shown as 404');
  });

  const login = `ui-user-${run}`;
  const pw = `pw-${run}-secret`;
  await step(`create user ${login}, sign in as that user: no admin menus`, async () => {
    await goto(base, '#/users/new');
    await page.waitForSelector('#new-login');
    await page.fill('#new-login', login);
    await page.fill('#new-fullname', 'UI Test User');
    await page.fill('#new-password', pw);
    await page.fill('#new-password2', pw);
    await page.click('#new-user-create');
    await page.waitForSelector('#user-toggle');
    await shot('user');
    await goto(base, '#/users');
    await until(`${login} in the users list`, async () => (await textOf('#users')).includes(login));
    await shot('users');
    await signOut();
    await signIn(base, login, pw);
    for (const nav of ['admin', 'users', 'all', 'config']) check((await page.locator(`[data-nav=${nav}]`).count()) === 0, `the ${nav} menu is shown to a plain user`);
    check((await page.locator('[data-nav=dashboard]').count()) === 1, 'the dashboard menu is missing');
    await goto(base, '#/admin');
    await page.waitForSelector('.alert.error');
    check(/needs/i.test(await textOf('.alert.error')), 'the admin page does not say it needs $ops');
    await shot('plain-user');
    await signOut();
    await signIn(base, opts.user, opts.password);
  });

  await step(`reset ${login}'s password, edit its groups, disable it`, async () => {
    await goto(base, `#/users/${enc(login)}`);
    await page.waitForSelector('#user-newpw');
    await page.fill('#user-newpw', `${pw}-2`);
    await page.fill('#user-newpw2', `${pw}-2`);
    await page.click('#user-reset');
    await until('the new password accepted', async () => (await api(base, 'GET', 'users/$current', { user: login, password: `${pw}-2`, expect: 200 })).status === 200);
    await page.check('#grp-ops');
    await page.fill('#user-fullname', 'UI Test Operator');
    await page.click('#user-save');
    await until('the groups saved', async () => {
      const u = (await api(base, 'GET', `users/${enc(login)}`)).data.data;
      return u.groups.includes('$ops') && u.fullName === 'UI Test Operator';
    });
    await page.waitForSelector('#user-toggle');
    await page.click('#user-toggle');
    await until('the user disabled', async () => (await api(base, 'GET', `users/${enc(login)}`)).data.data.disabled === true);
    await api(base, 'GET', 'users/$current', { user: login, password: `${pw}-2`, expect: 401 });
    await page.waitForSelector('#user-toggle');
    await shot('user-disabled');
  });

  await step('start a scavenge from the admin page, watch it finish, see it in the history', async () => {
    await goto(base, '#/admin');
    await page.waitForSelector('#sc-start');
    await page.fill('#sc-threads', '2');
    await page.click('#sc-start');
    await page.waitForURL(/#\/admin\/scavenges\//);
    const id = decodeURIComponent(page.url().split('/').pop());
    await until('the scavenge result Success', async () => /success/i.test(await textOf('#sc-result')), 180000, 500);
    await shot('scavenge');
    await goto(base, '#/admin');
    await until('the scavenge in the history', async () => (await textOf('#scavenge-history-host')).includes(id.slice(0, 8)), 30000);
    await shot('admin');
  });

  await step('the other pages render: cluster, $all, configuration', async () => {
    await goto(base, '#/cluster');
    await page.waitForSelector('#members tbody tr');
    check(/single node/i.test(await textOf('main')), 'a single node is not labelled');
    await shot('cluster');
    await goto(base, '#/all');
    await page.waitForSelector('#all-events tbody tr');
    await shot('all');
    await goto(base, '#/config');
    await page.waitForSelector('#options tbody tr');
    await shot('config');
  });

  await step('keyboard: the menu is reachable with Tab and links are real links', async () => {
    await goto(base, '#/dashboard');
    await page.waitForSelector('#figures');
    await page.keyboard.press('Tab');
    const seen = [];
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press('Tab');
      seen.push(await page.evaluate(() => document.activeElement?.getAttribute('href') || document.activeElement?.tagName));
    }
    check(seen.includes('#/streams'), `Tab order reached ${seen.join(', ')}`);
  });

  await step('narrow screen: the menu folds into a button', async () => {
    await page.setViewportSize({ width: 420, height: 860 });
    await goto(base, '#/dashboard');
    await page.waitForSelector('#figures');
    check(await page.isVisible('#menu-toggle'), 'no menu button on a narrow screen');
    await shot('narrow-dashboard');
    await page.click('#menu-toggle');
    await page.waitForTimeout(300);
    await shot('narrow-menu');
    await page.setViewportSize({ width: 1360, height: 900 });
  });

  await step('no CSP violation and no uncaught error in the console', finalChecks);
}

// ---- scenario: follower ------------------------------------------------------------------------

async function follower() {
  const base = opts.url;
  const run = Math.random().toString(36).slice(2, 8);
  await step('the UI is served by the follower', () => checkServing(base));
  await step('the node is a follower', async () => {
    const r = await api(base, 'GET', 'info');
    check(/slave|follower|clone/i.test(r.data.state), `the node at ${base} is ${r.data.state}`);
  });
  await step('launch headless Chromium', launch);
  await step('sign in on the follower', () => signIn(base, opts.user, opts.password));
  await step('dashboard on the follower', async () => {
    await until('the state figure', async () => /slave|follower/i.test(await textOf('#fig-state .stat-value')));
    await shot('follower-dashboard');
  });
  await step('the cluster page shows the leader', async () => {
    await goto(base, '#/cluster');
    await page.waitForSelector('#members tbody tr');
    await until('a leader row', async () => (await page.locator('#members tr.row-leader').count()) === 1);
    check(!/none/.test(await textOf('#fig-leader .stat-value')), 'no leader named');
    check((await page.locator('#members tbody tr').count()) === 3, 'not 3 members');
    await shot('follower-cluster');
  });
  await step('start a scavenge from the admin page of the follower; it completes and is in the history', async () => {
    await goto(base, '#/admin');
    await page.waitForSelector('#sc-start');
    await page.click('#sc-start');
    await page.waitForURL(/#\/admin\/scavenges\//);
    const id = decodeURIComponent(page.url().split('/').pop());
    await until('the scavenge result Success', async () => /success/i.test(await textOf('#sc-result')), 180000, 500);
    await shot('follower-scavenge');
    await goto(base, '#/admin');
    await until('the scavenge in the history', async () => (await textOf('#scavenge-history-host')).includes(id.slice(0, 8)), 30000);
    await shot('follower-admin');
  });
  const stream = `ui-follower-${run}`;
  await step(`streams are readable on the follower (${stream})`, async () => {
    await appendEvents(base, stream, [{ eventType: 'OnFollower', data: { run } }, { eventType: 'OnFollower', data: { run, n: 2 } }]);
    await until('2 events', async () => {
      await goto(base, `#/streams/${enc(stream)}`);
      await page.waitForSelector('#events, .alert.error');
      return (await page.locator('#events tbody tr').count()) === 2;
    }, 30000, 1000);
    await shot('follower-stream');
  });
  await step('the projections page works on the follower (its requests are forwarded to the leader)', async () => {
    await goto(base, '#/projections');
    await until('the standard projections in the list', async () => (await textOf('#standard-projections')).includes('$by_category'));
    await shot('follower-projections');
  });
  await step('no CSP violation and no uncaught error in the console', finalChecks);
}

// ---- scenario: cluster -------------------------------------------------------------------------

async function cluster() {
  const states = await step('find the leader among the members', async () => {
    const out = [];
    for (const m of opts.members) {
      const info = (await api(m, 'GET', 'info')).data;
      const g = (await api(m, 'GET', 'gossip')).data;
      out.push({ base: m, state: info.state, addr: `${g.serverIp}:${g.serverPort}` });
    }
    console.log(`\n      ${out.map((x) => `${x.base} ${x.state} (${x.addr})`).join('\n      ')}`);
    check(out.filter((x) => /master|leader/i.test(x.state)).length === 1, 'not exactly one leader');
    return out;
  });
  const leader = states.find((x) => /master|leader/i.test(x.state));
  const watcher = (opts.url && states.find((x) => x.base === opts.url && x !== leader)) || states.find((x) => x !== leader);
  await step(`the UI is served by ${watcher.base}`, () => checkServing(watcher.base));
  await step('launch headless Chromium', launch);
  await step(`sign in on ${watcher.base}`, () => signIn(watcher.base, opts.user, opts.password));
  await step(`the cluster page shows the leader ${leader.addr}`, async () => {
    await goto(watcher.base, '#/cluster');
    await page.waitForSelector('#members tbody tr');
    await until('the leader', async () => (await textOf('#fig-leader .stat-value')) === leader.addr && (await page.locator('#members tr.row-leader').count()) === 1);
    check((await page.locator('#members tbody tr').count()) === 3, 'not 3 members');
    await shot('cluster-before');
  });
  await step(`shut the leader ${leader.addr} down; within 30 s the page shows another leader and the old one dead`, async () => {
    await api(leader.base, 'POST', 'admin/shutdown');
    const since = Date.now();
    await until('a new leader and the old one dead', async () => {
      const now = await textOf('#fig-leader .stat-value');
      const deadRows = await page.locator('#members tr.row-dead').allInnerTexts();
      return now !== leader.addr && now !== 'none' && deadRows.some((t) => t.includes(leader.addr));
    }, 30000, 500);
    figure('leader change seen by the UI after', `${((Date.now() - since) / 1000).toFixed(1)} s`);
    await shot('cluster-after');
  });
  await step('no CSP violation and no uncaught error in the console', finalChecks);
}

// ---- main --------------------------------------------------------------------------------------

console.log(`Admin UI browser tests: scenario ${opts.scenario}, ${opts.scenario === 'cluster' ? opts.members.join(' ') : opts.url}`);
try {
  if (opts.scenario === 'single') await single();
  else if (opts.scenario === 'follower') await follower();
  else await cluster();
} catch (e) {
  console.error(`FAIL: ${e.stack || e}`);
  await cleanup();
  console.log('0 passed, 1 failed');
  process.exit(1);
}
await cleanup();
if (figures.length) {
  console.log('Figures:');
  for (const [k, v] of figures) console.log(`  ${k}: ${v}`);
}
console.log(`All ${stepNo} steps passed in ${((Date.now() - t0) / 1000).toFixed(0)} s; screenshots in ${opts.screenshots}`);
console.log(`${stepNo} passed, 0 failed`);
