import test from 'ava';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Command } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, bytes, frames, hex, pipeline, readReply, req } from '../helpers/wire.js';

const EVERY_COMMAND: Request[] = [
  req.findOwner('k', '1'),
  req.request('k', '1', 'alice', { ttl: 30, ttw: 60, priority: 3 }),
  req.request('k', '1', 'bob', { ttl: 30, ttw: 60, priority: 1 }),
  req.findOwner('k', '1'),
  req.location('k', '1', 'bob'),
  req.renew('k', '1', 'bob'),
  req.list('k'),
  req.release('k', '1', 'alice'),
  req.findOwner('k', '1'),
  req.releaseAll('bob'),
  req.stats(),
];

/** The replies to EVERY_COMMAND, byte for byte, minus the stats reply's 58 bytes. */
const EVERY_REPLY_BEFORE_STATS = bytes(
  0, // find owner: free
  0,
  1, // alice owns
  0,
  2, // bob waits
  5,
  'alice', // find owner
  0,
  2, // location of bob
  1, // renew bob
  0,
  2,
  3,
  0,
  30,
  0,
  60,
  1,
  '1',
  5,
  'alice',
  1,
  1,
  0,
  30,
  0,
  60,
  1,
  '1',
  3,
  'bob',
  0, // list
  0,
  1, // release alice
  3,
  'bob', // promoted
  0,
  1, // release all bob
);

test('a pipelined batch in one write is answered in request order, byte for byte', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  client.send(frames(...EVERY_COMMAND));
  t.is(hex(await client.read(EVERY_REPLY_BEFORE_STATS.length)), hex(EVERY_REPLY_BEFORE_STATS));
  const stats = await readReply(client, Command.Stats);
  t.like(stats, { lockRequests: 2, ownerLookups: 3, contenderLookups: 1, renewals: 1, releases: 1, releaseAlls: 1 });
  t.like(stats, { listRequests: 1, statsRequests: 1, owners: 0, contenders: 0, activeConnections: 1 });
});

test('a batch sent one byte at a time gets the same replies as one sent whole', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  for (const byte of frames(...EVERY_COMMAND)) {
    client.send([byte]);
    await nextTurn();
  }
  t.is(hex(await client.read(EVERY_REPLY_BEFORE_STATS.length)), hex(EVERY_REPLY_BEFORE_STATS));
  t.like(await readReply(client, Command.Stats), { lockRequests: 2, statsRequests: 1 });
});

test('many pipelined requests on one connection are all answered, in order', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const requests: Request[] = [];
  for (let i = 0; i < 500; i++) requests.push(req.request('queue', 'x', `owner-${i}`, { ttl: 0, ttw: 0 }));
  for (let i = 0; i < 500; i++) requests.push(req.location('queue', 'x', `owner-${i}`));
  const replies = await pipeline(client, ...requests);
  const positions = Array.from({ length: 500 }, (_, i) => i + 1);
  t.deepEqual(replies, [...positions, ...positions]);
});

test('a half-closed client (nc -N) gets every reply before the server closes', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  client.sendAndEnd(frames(...EVERY_COMMAND));
  const all = await client.readUntilClose();
  t.is(hex(all.subarray(0, EVERY_REPLY_BEFORE_STATS.length)), hex(EVERY_REPLY_BEFORE_STATS));
  t.is(all.length, EVERY_REPLY_BEFORE_STATS.length + 58);
});

test('a half-closed client with a large batch still gets every reply', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  const requests: Request[] = [];
  for (let i = 0; i < 1_000; i++) requests.push(req.request('k', String(i), 'o'), req.list('k'));
  client.sendAndEnd(frames(...requests));
  const all = await client.readUntilClose();
  // Each list reply has one more 1-char-owner entry than the last: 2 + n * (1+2+2+1+len(i)+1+1+1).
  let expected = 0;
  let entries = 0;
  for (let i = 0; i < 1_000; i++) {
    entries += 9 + String(i).length;
    expected += 2 + 2 + entries;
  }
  t.is(all.length, expected);
});

test('an unknown command byte closes only that connection, with no reply and no state change', async (t) => {
  const server = await startServer(t);
  const bystander = await server.accepted();
  t.is(await ask.request(bystander, 'k', '1', 'alice'), 1);
  const listBefore = await ask.list(bystander, 'k');

  const offender = await server.accepted();
  offender.send([0x0e]);
  t.is((await offender.readUntilClose()).length, 0);

  // Replies to requests before the bad byte in the same batch still arrive; nothing after it runs.
  const second = await server.accepted();
  second.send(Buffer.concat([frames(req.location('k', '1', 'alice')), bytes(0x00), frames(req.request('k', '1', 'mallory'))]));
  t.is(hex(await second.readUntilClose()), '0001');

  const third = await server.accepted();
  third.send([0xff, 0x02, 0x01]);
  t.is((await third.readUntilClose()).length, 0);

  t.deepEqual(await ask.list(bystander, 'k'), listBefore);
  t.is(await ask.location(bystander, 'k', '1', 'mallory'), 0);
  t.like(await ask.stats(bystander), { lockRequests: 1, owners: 1, contenders: 0, activeConnections: 1 });
});
