import test from 'ava';
import { readFile } from 'node:fs/promises';
import { parseLockFile } from '../../src/files/lockFile.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, bytes, hex, pipeline, req } from '../helpers/wire.js';

// SIGSYS: drain. No new entries (position 0); everything on existing entries works; exit 0
// once the table is empty.

test('SIGSYS on an empty server: noble death at once, exit 0', async (t) => {
  const server = await startServer(t);
  const shutdown = server.nextEvent('shutdown');
  server.signal('SIGSYS');
  t.is((await shutdown).fields.reason, 'drained');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  t.is(server.eventsNamed('drain-started').length, 1);
  t.deepEqual(parseLockFile(await readFile(server.lockFile, 'latin1'), server.lockFile), []);
});

test('SIGSYS: new entries get 0, existing ones work; the last release ends the process with 0', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await pipeline(client, req.request('k', '1', 'alice', { ttl: 0 }), req.request('k', '1', 'bob', { ttl: 0, ttw: 0 }));
  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;

  // Literal bytes for the refused request: position 0.
  client.send(bytes(0x02, 1, 'k', 1, '1', 5, 'carol', 0, 0, 0, 0, 0));
  t.is(hex(await client.read(2)), '0000');
  t.is(await ask.request(client, 'new-key', 'x', 'dave'), 0);
  t.is(await ask.location(client, 'k', '1', 'carol'), 0);

  // Re-requests of existing entries, renewals and look-ups work as usual.
  t.is(await ask.request(client, 'k', '1', 'bob', { ttl: 5, ttw: 6 }), 2);
  t.is(await ask.request(client, 'k', '1', 'alice', { ttl: 0 }), 1);
  t.true(await ask.renew(client, 'k', '1', 'bob'));
  t.is(await ask.findOwner(client, 'k', '1'), 'alice');
  t.deepEqual(
    (await ask.list(client, 'k')).map((e) => [e.owner, e.ttl, e.ttw]),
    [
      ['alice', 0, 0],
      ['bob', 5, 6],
    ],
  );

  // Connections are still accepted while draining.
  const latecomer = await server.accepted();
  t.like(await ask.stats(latecomer), { owners: 1, contenders: 1, activeConnections: 2 });

  // Releasing the owner promotes the waiter; the server keeps running while bob holds it.
  t.is(await ask.release(client, 'k', '1', 'alice'), 1);
  t.is(await ask.findOwner(latecomer, 'k', '1'), 'bob');
  t.true(server.running);

  const shutdown = server.nextEvent('shutdown');
  t.is(await ask.releaseAll(latecomer, 'bob'), 1);
  t.is((await shutdown).fields.reason, 'drained');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  await client.waitForClose();
  await latecomer.waitForClose();
  t.is((await server.event('locks-saved')).fields.count, '0');
});

test("SIGSYS: release with index '*' can empty the table and end the drain", async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await pipeline(client, req.request('k', '1', 'alice'), req.request('k', '2', 'alice'));
  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;
  t.is(await ask.release(client, 'k', '*', 'alice'), 2);
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});

test('SIGSYS: entries that expire count too; the drain ends when the last one runs out', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  t.is(await ask.request(client, 'k', '1', 'alice', { ttl: 1 }), 1);
  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;
  t.is((await server.nextEvent('shutdown')).fields.reason, 'drained');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});
