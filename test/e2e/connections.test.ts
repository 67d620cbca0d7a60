import test from 'ava';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, bytes, frames, hex, req } from '../helpers/wire.js';

test('--max-connections: the connection beyond the limit gets 0x00 and is counted as too busy', async (t) => {
  const server = await startServer(t, { args: ['--max-connections', '2'] });
  const first = await server.accepted();
  const second = await server.accepted();
  const refusedEvent = server.nextEvent('refused');
  const third = await server.connect();
  t.is(hex(await third.readUntilClose()), '00');
  t.like((await refusedEvent).fields, { reason: 'too-busy' });
  t.like(await ask.stats(first), { acceptedConnections: 2, rejectedTooBusy: 1, rejectedNotInHosts: 0, activeConnections: 2 });

  // Once a client leaves, there is room again.
  second.destroy();
  const newcomer = await pollUntil('a free slot', async () => {
    const candidate = await server.connect();
    const greeting = await candidate.read(1);
    if (greeting[0] === 0x01) return candidate;
    candidate.destroy();
    return undefined;
  });
  t.like(await ask.stats(newcomer), { activeConnections: 2 });
});

test('the allowlist is checked before the connection limit', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n', args: ['--max-connections', '1'] });
  const only = await server.accepted();
  const stranger = await server.connect({ localAddress: '127.0.0.2' });
  t.is(hex(await stranger.readUntilClose()), '00');
  const local = await server.connect();
  t.is(hex(await local.readUntilClose()), '00');
  t.like(await ask.stats(only), { acceptedConnections: 1, rejectedNotInHosts: 1, rejectedTooBusy: 1 });
});

test('--frame-timeout: a connection holding a partial frame is closed; an idle one is not', async (t) => {
  const server = await startServer(t, { args: ['--frame-timeout', '1'] });
  const idle = await server.accepted();
  const partial = await server.accepted();
  const timeoutEvent = server.nextEvent('frame-timeout');
  // A request (0x02) cut off inside its key.
  partial.send(bytes(0x02, 3, 'k'));
  t.is((await partial.readUntilClose()).length, 0);
  await timeoutEvent;
  // The idle connection (no partial frame) outlived the partial one and still works.
  t.false(idle.isClosed);
  t.like(await ask.stats(idle), { lockRequests: 0 });
});

test('--frame-timeout: replies to whole frames before the partial one are delivered first', async (t) => {
  const server = await startServer(t, { args: ['--frame-timeout', '1'] });
  const client = await server.accepted();
  client.send(Buffer.concat([frames(req.request('k', '1', 'a')), bytes(0x01, 1, 'k')]));
  t.is(hex(await client.readUntilClose()), '0001');
  const other = await server.accepted();
  t.is(await ask.findOwner(other, 'k', '1'), 'a');
});

/** Owner names of 255 bytes make each list reply large, so replies outgrow every buffer fast. */
const BIG_OWNERS = 20;
const FLOOD_REQUESTS = 20_000;

test('backpressure: a client that never reads does not stop the server from serving others', async (t) => {
  const server = await startServer(t);
  const setup = await server.accepted();
  for (let i = 0; i < BIG_OWNERS; i++) {
    t.is(await ask.request(setup, 'big', '1', String(i).padStart(255, '#')), i + 1);
  }
  const hog: RawClient = await server.accepted();
  hog.socket.pause();
  // Alternate list and stats: 20 000 requests ask for about 50 MB of replies that are never read.
  const flood = Buffer.concat(Array.from({ length: FLOOD_REQUESTS / 2 }, () => frames(req.list('big'), req.stats())));
  hog.send(flood);

  const other = await server.accepted();
  t.is(await ask.request(other, 'small', '1', 'other'), 1);
  t.is(await ask.findOwner(other, 'big', '0'), '');
  t.is((await ask.list(other, 'big')).length, BIG_OWNERS);
  // The server stopped taking the hog's requests once its replies backed up.
  const stats = await ask.stats(other);
  t.true(stats.listRequests + stats.statsRequests < FLOOD_REQUESTS, `served ${stats.listRequests} lists, ${stats.statsRequests} stats`);
  t.log(`served ${stats.listRequests} lists and ${stats.statsRequests} stats of ${FLOOD_REQUESTS}`);
  t.is(stats.activeConnections, 3);

  hog.destroy();
  await pollUntil('the hog to be gone', async () => ((await ask.stats(other)).activeConnections === 2 ? true : undefined));
  t.is(await ask.location(other, 'small', '1', 'other'), 1);
});
