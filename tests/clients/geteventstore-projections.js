// Drives an Annal node's projections with geteventstore-promise's projections API (npm), a
// published EventStoreDB v5 HTTP client: assert (create, then update), getState and getResult
// (with and without a partition), getInfo (with its config), config, reset, stop/start,
// disableAll/enableAll and remove. The node runs with RunProjections All.
// Usage: node geteventstore-projections.js <host> <port>. Prints "OK" and exits 0 on success.
'use strict';
const assert = require('assert');
const EventStore = require('geteventstore-promise');

const [host, port] = process.argv.slice(2);
const client = new EventStore.HTTPClient({
  hostname: host,
  port: Number(port),
  credentials: { username: 'admin', password: 'changeit' },
});
const factory = new EventStore.EventFactory();
const projections = client.projections;

// Polls `read` until `done(value)` holds (20 s at most); the last value.
async function eventually(what, read, done) {
  const deadline = Date.now() + 20000;
  let value;
  for (;;) {
    value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: never reached, last ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const added = (amount) => factory.newEvent('Added', { amount });
// Totals over the whole category, with the state as the result.
const totals = (factor) => `fromCategory('clientorder').when({
  $init: function () { return { count: 0, total: 0 }; },
  Added: function (s, e) { s.count += 1; s.total += e.data.amount * ${factor}; }
}).outputState()`;
// Totals per order stream, the result transformed.
const byOrder = `fromCategory('clientorder').foreachStream().when({
  $init: function () { return { count: 0, total: 0 }; },
  Added: function (s, e) { s.count += 1; s.total += e.body.amount; }
}).transformBy(function (s) { return { total: s.total }; })`;

(async () => {
  const name = 'client-totals';
  const partitioned = 'client-by-order';
  // Create: a continuous projection, enabled, with checkpoints.
  assert.deepStrictEqual(await projections.assert(name, totals(1)), { name });
  assert.deepStrictEqual(await projections.assert(partitioned, byOrder), { name: partitioned });
  await client.writeEvents('clientorder-1', [added(1), added(2)]);
  await client.writeEvent('clientorder-2', 'Added', { amount: 4 });
  await client.writeEvent('other-1', 'Added', { amount: 100 });

  // State and result once the three events of the category are processed.
  const state = await eventually('state', () => projections.getState(name), (s) => s && s.count === 3);
  assert.deepStrictEqual(state, { count: 3, total: 7 });
  assert.deepStrictEqual(await projections.getResult(name), { count: 3, total: 7 });
  const one = await eventually(
    'partition state',
    () => projections.getState(partitioned, { partition: 'clientorder-1' }),
    (s) => s && s.count === 2,
  );
  assert.deepStrictEqual(one, { count: 2, total: 3 });
  assert.deepStrictEqual(await projections.getState(partitioned, { partition: 'clientorder-2' }), { count: 1, total: 4 });
  assert.deepStrictEqual(await projections.getResult(partitioned, { partition: 'clientorder-1' }), { total: 3 });
  assert.deepStrictEqual(await projections.getResult(partitioned, { partition: 'clientorder-2' }), { total: 4 });

  // Info: the statistics entry of the list, with the configuration on request.
  const info = await projections.getInfo(name, true);
  assert.strictEqual(info.name, name);
  assert.strictEqual(info.mode, 'Continuous');
  assert.strictEqual(info.status, 'Running');
  assert.strictEqual(info.effectiveName, name);
  assert.ok(info.eventsProcessedAfterRestart >= 3, JSON.stringify(info));
  assert.strictEqual(info.config.emitEnabled, false);
  assert.strictEqual(info.config.trackEmittedStreams, false);
  const config = await projections.config(name);
  assert.deepStrictEqual(
    [config.checkpointHandledThreshold, config.checkpointUnhandledBytesThreshold, config.pendingEventsThreshold, config.maxWriteBatchLength],
    [4000, 10000000, 5000, 500],
  );
  assert.strictEqual(config.emitEnabled, false);
  const all = await projections.getAllProjectionsInfo();
  const names = all.projections.map((p) => p.name);
  assert.ok(names.includes(name) && names.includes(partitioned) && names.includes('$by_category'), names.join());

  // An emitting projection that tracks its streams; a one-time projection that completes.
  const emitter = 'client-emit';
  const big = `fromCategory('clientorder').when({
    Added: function (s, e) { if (e.data.amount >= 4) emit('client-big', 'Big', { amount: e.data.amount }); }
  })`;
  assert.deepStrictEqual(await projections.assert(emitter, big, 'continuous', true, true, true, true), { name: emitter });
  const emitted = await eventually(
    'emitted',
    async () => ((await client.checkStreamExists('client-big')) ? client.readEventsForward('client-big', 0, 10) : null),
    (r) => r && r.events.length === 1,
  );
  assert.deepStrictEqual(emitted.events.map((e) => [e.eventType, e.data]), [['Big', { amount: 4 }]]);
  const emitConfig = await projections.config(emitter);
  assert.deepStrictEqual([emitConfig.emitEnabled, emitConfig.trackEmittedStreams], [true, true]);
  await assert.rejects(projections.remove(emitter), (e) => e.response && e.response.status === 500, 'a running projection stays');
  const once = 'client-once';
  assert.deepStrictEqual(await projections.assert(once, totals(1), 'onetime'), { name: once });
  const done = await eventually('completed', () => projections.getInfo(once), (i) => i.status === 'Completed');
  assert.strictEqual(done.mode, 'OneTime');
  assert.deepStrictEqual(await projections.getState(once), { count: 3, total: 7 });

  // A second assert updates the query; a reset rebuilds the state from the start with it.
  assert.deepStrictEqual(await projections.assert(name, totals(10)), { name });
  const epoch = (await projections.getInfo(name)).epoch;
  assert.deepStrictEqual(await projections.reset(name), { name });
  const rebuilt = await eventually('rebuilt state', () => projections.getState(name), (s) => s && s.total === 70);
  assert.deepStrictEqual(rebuilt, { count: 3, total: 70 });
  assert.ok((await projections.getInfo(name)).epoch > epoch, 'a reset starts a new epoch');

  // Stop: the state stays while events arrive; start: they are processed.
  assert.deepStrictEqual(await projections.stop(name), { name });
  await eventually('stopped', () => projections.getInfo(name), (i) => i.status === 'Stopped');
  await client.writeEvent('clientorder-3', 'Added', { amount: 5 });
  await new Promise((r) => setTimeout(r, 300));
  assert.deepStrictEqual(await projections.getState(name), { count: 3, total: 70 });
  assert.deepStrictEqual(await projections.start(name), { name });
  const resumed = await eventually('resumed state', () => projections.getState(name), (s) => s && s.count === 4);
  assert.deepStrictEqual(resumed, { count: 4, total: 120 });
  assert.strictEqual((await projections.getInfo(name)).status, 'Running');

  // disableAll and enableAll reach every projection, the system ones included (the one-time
  // projection completes again).
  await projections.disableAll();
  const stopped = await eventually(
    'all stopped',
    () => projections.getAllProjectionsInfo(),
    (a) => a.projections.every((p) => p.status === (p.name === once ? 'Completed' : 'Stopped')),
  );
  assert.strictEqual(stopped.projections.length, 9, JSON.stringify(stopped));
  await projections.enableAll();
  await eventually(
    'all running',
    () => projections.getAllProjectionsInfo(),
    (a) => a.projections.every((p) => p.status === (p.name === once ? 'Completed' : 'Running')),
  );

  // Remove (a stopped projection) with its checkpoint and state streams.
  await projections.stop(partitioned);
  await eventually('stopped', () => projections.getInfo(partitioned), (i) => i.status === 'Stopped');
  assert.deepStrictEqual(await projections.remove(partitioned, true, true), { name: partitioned });
  assert.strictEqual(await projections.getInfo(partitioned), undefined);
  await assert.rejects(projections.getState(partitioned), (e) => e.response && e.response.status === 404);
  assert.strictEqual(await client.checkStreamExists(`$projections-${partitioned}-checkpoint`), false);
  // The other projection goes on.
  assert.deepStrictEqual(await projections.getState(name), { count: 4, total: 120 });
  console.log('OK');
})().catch((e) => {
  console.error(e && e.response ? `${e.response.status} ${e.response.statusText} ${e.config && e.config.method} ${e.config && e.config.url}` : e);
  process.exit(1);
});
