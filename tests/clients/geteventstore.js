// Drives an Annal node with geteventstore-promise, a published EventStoreDB v5 HTTP client
// (npm). Usage: node geteventstore.js <host> <port> [https]. Prints "OK" and exits 0 on success.
// Over https the server's certificate is validated (trust its CA with NODE_EXTRA_CA_CERTS).
'use strict';
const assert = require('assert');
const EventStore = require('geteventstore-promise');

const [host, port, protocol] = process.argv.slice(2);
const client = new EventStore.HTTPClient({
  hostname: host,
  port: Number(port),
  protocol: protocol || 'http',
  credentials: { username: 'admin', password: 'changeit' },
});
const factory = new EventStore.EventFactory();

(async () => {
  const stream = `js-client-${process.pid}`;
  await client.writeEvent(stream, 'Created', { something: '123' }, { meta: true });
  await client.writeEvents(stream, [
    factory.newEvent('Updated', { n: 1 }),
    factory.newEvent('Updated', { n: 2 }, { by: 'test' }),
  ]);
  assert.strictEqual(await client.checkStreamExists(stream), true);
  assert.strictEqual(await client.checkStreamExists(`${stream}-missing`), false);

  const forward = await client.readEventsForward(stream, 0, 10);
  assert.deepStrictEqual(forward.events.map((e) => e.eventType), ['Created', 'Updated', 'Updated']);
  assert.deepStrictEqual(forward.events[0].data, { something: '123' });
  assert.strictEqual(forward.events[2].eventNumber, 2);
  assert.strictEqual(forward.isEndOfStream, true);

  const backward = await client.readEventsBackward(stream, undefined, 2);
  assert.deepStrictEqual(backward.events.map((e) => e.data.n), [2, 1]);

  const all = await client.getEvents(stream, 0, 2, 'forward');
  assert.strictEqual(all.length, 2);

  const typed = await client.getEventsByType(stream, ['Updated']);
  assert.strictEqual(typed.length, 2);

  const everything = await client.getAllStreamEvents(stream, 2);
  assert.strictEqual(everything.length, 3);

  // Optimistic concurrency surfaces as an HTTP 400 from the server.
  await assert.rejects(
    client.writeEvent(stream, 'Conflict', {}, undefined, { expectedVersion: 0 }),
    (e) => e.response && e.response.status === 400,
  );

  // Persistent subscriptions: create (a second assert updates), read with ack/nack links, info.
  const ps = client.persistentSubscriptions;
  const group = 'js-group';
  await ps.assert(group, stream, { startFrom: 0, maxRetryCount: 1, readBatchSize: 10, bufferSize: 50 });
  await ps.assert(group, stream, { startFrom: 0, maxRetryCount: 2, readBatchSize: 10, bufferSize: 50 });
  const page = await ps.getEvents(group, stream, 2, 'Body');
  assert.deepStrictEqual(page.entries.map((e) => e.event.eventNumber), [1, 0]);
  assert.deepStrictEqual(page.entries[1].event.data, { something: '123' });
  await page.entries[1].ack();
  await page.entries[0].nack();
  // The nacked message comes back first (retry), then the next event; ackAll takes both.
  const next = await ps.getEvents(group, stream, 2, 'Body');
  assert.deepStrictEqual(next.entries.map((e) => e.event.eventNumber), [2, 1]);
  await next.ackAll();
  const info = await ps.getSubscriptionInfo(group, stream);
  assert.strictEqual(info.totalItemsProcessed, 3);
  assert.strictEqual(info.config.maxRetryCount, 2);
  const mine = await ps.getStreamSubscriptionsInfo(stream);
  assert.deepStrictEqual(mine.map((g) => g.groupName), [group]);
  const every = await ps.getAllSubscriptionsInfo();
  assert.ok(every.some((g) => g.eventStreamId === stream));
  await ps.remove(group, stream);
  await assert.rejects(ps.getSubscriptionInfo(group, stream), (e) => e.response && e.response.status === 404);

  await client.deleteStream(stream);
  assert.strictEqual(await client.checkStreamExists(stream), false);
  console.log('OK');
})().catch((e) => {
  console.error(e && e.response ? `${e.response.status} ${e.response.statusText}` : e);
  process.exit(1);
});
