import test, { type ExecutionContext } from 'ava';
import { Command, STATS_REPLY_LENGTH } from '../../src/protocol/constants.js';
import { decodeReply } from '../../src/protocol/decodeReply.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, bytes, hex, readReplyBytes } from '../helpers/wire.js';

// Every command once with literal request and reply bytes, as an old C client or `printf | nc`
// would send them. The codec helpers are used only to set up state around the literal exchange.

async function freshClient(t: ExecutionContext): Promise<RawClient> {
  const server = await startServer(t);
  return server.accepted();
}

/** Sends literal bytes and reads exactly `expected.length` bytes back. */
async function exchange(client: RawClient, request: Buffer, expected: Buffer): Promise<string> {
  client.send(request);
  return hex(await client.read(expected.length));
}

const ALICE_REQUEST = bytes(0x02, 4, 'user', 2, '42', 5, 'alice', 0x00, 0x1e, 0x00, 0x3c, 0x0a);
const BOB_REQUEST = bytes(0x02, 4, 'user', 2, '42', 3, 'bob', 0x00, 0x1e, 0x00, 0x3c, 0x05);

test('the greeting of an allowed client is the single byte 0x01, and nothing follows it unasked', async (t) => {
  const server = await startServer(t);
  const client = await server.connect();
  t.is(hex(await client.read(1)), '01');
  // A stats round trip shows nothing else was queued behind the greeting: the reply read right
  // after it is the stats reply itself, with this connection counted.
  t.like(await ask.stats(client), { statsRequests: 1, acceptedConnections: 1, activeConnections: 1, lockRequests: 0 });
  t.is(client.buffered, 0);
});

test('0x01 find owner: zero-length owner when free, then the owner with its length byte', async (t) => {
  const client = await freshClient(t);
  const findOwner = bytes(0x01, 4, 'user', 2, '42');
  t.is(await exchange(client, findOwner, bytes(0)), '00');
  t.is(await exchange(client, ALICE_REQUEST, bytes(0, 1)), '0001');
  t.is(await exchange(client, findOwner, bytes(5, 'alice')), hex(bytes(5, 'alice')));
});

test('0x02 request: 1 for the owner, 2 for the first in line, re-request keeps the place', async (t) => {
  const client = await freshClient(t);
  t.is(await exchange(client, ALICE_REQUEST, bytes(0, 1)), '0001');
  t.is(await exchange(client, BOB_REQUEST, bytes(0, 2)), '0002');
  // Same key, index and owner again: a renewal, still position 2 (and 1 for alice).
  t.is(await exchange(client, BOB_REQUEST, bytes(0, 2)), '0002');
  t.is(await exchange(client, ALICE_REQUEST, bytes(0, 1)), '0001');
});

test('0x03 find contender location: the position, or 0 for someone absent', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  await exchange(client, BOB_REQUEST, bytes(0, 2));
  t.is(await exchange(client, bytes(0x03, 4, 'user', 2, '42', 5, 'alice'), bytes(0, 0)), '0001');
  t.is(await exchange(client, bytes(0x03, 4, 'user', 2, '42', 3, 'bob'), bytes(0, 0)), '0002');
  t.is(await exchange(client, bytes(0x03, 4, 'user', 2, '42', 3, 'eve'), bytes(0, 0)), '0000');
  t.is(await exchange(client, bytes(0x03, 4, 'user', 2, '43', 3, 'bob'), bytes(0, 0)), '0000');
});

test('0x04 renew: 1 for an owner or a waiter, 0 when there is no such entry', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  await exchange(client, BOB_REQUEST, bytes(0, 2));
  t.is(await exchange(client, bytes(0x04, 4, 'user', 2, '42', 5, 'alice'), bytes(0)), '01');
  t.is(await exchange(client, bytes(0x04, 4, 'user', 2, '42', 3, 'bob'), bytes(0)), '01');
  t.is(await exchange(client, bytes(0x04, 4, 'user', 2, '42', 3, 'eve'), bytes(0)), '00');
});

test('0x05 release: two-byte count of entries removed (1, then 0)', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  await exchange(client, BOB_REQUEST, bytes(0, 2));
  const releaseAlice = bytes(0x05, 4, 'user', 2, '42', 5, 'alice');
  t.is(await exchange(client, releaseAlice, bytes(0, 0)), '0001');
  t.is(await exchange(client, releaseAlice, bytes(0, 0)), '0000');
  // Bob was promoted.
  t.is(await exchange(client, bytes(0x01, 4, 'user', 2, '42'), bytes(3, 'bob')), hex(bytes(3, 'bob')));
});

test('0x06 release all: every entry of the owner across keys, as a two-byte count', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  t.is(await ask.request(client, 'user', '43', 'alice'), 1);
  t.is(await ask.request(client, 'orders', '7', 'bob'), 1);
  t.is(await ask.request(client, 'orders', '7', 'alice'), 2);
  t.is(await exchange(client, bytes(0x06, 5, 'alice'), bytes(0, 0)), '0003');
  t.is(await exchange(client, bytes(0x06, 5, 'alice'), bytes(0, 0)), '0000');
  t.is(await ask.findOwner(client, 'orders', '7'), 'bob');
});

test('0x07 list contenders: count, then priority, TTL, TTW, index, owner and owner flag per entry', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  await exchange(client, BOB_REQUEST, bytes(0, 2));
  const expected = bytes(0x00, 0x02, 0x0a, 0x00, 0x1e, 0x00, 0x3c, 2, '42', 5, 'alice', 0x01, 0x05, 0x00, 0x1e, 0x00, 0x3c, 2, '42', 3, 'bob', 0x00);
  t.is(await exchange(client, bytes(0x07, 4, 'user'), expected), hex(expected));
  t.is(client.buffered, 0);
  t.is(await exchange(client, bytes(0x07, 4, 'none'), bytes(0, 0)), '0000');
});

test('0x08 stats: 58 bytes, fourteen 4-byte big-endian values and a 2-byte active count', async (t) => {
  const client = await freshClient(t);
  await exchange(client, ALICE_REQUEST, bytes(0, 1));
  client.send([0x08]);
  const reply = await client.read(STATS_REPLY_LENGTH);
  t.is(STATS_REPLY_LENGTH, 58);
  // Exactly 58: the next reply (a free lock's empty owner, 00) follows at once.
  t.is(await exchange(client, bytes(0x01, 4, 'none', 1, 'x'), bytes(0)), '00');
  // The uptime (first four bytes) depends on the clock; everything after it is exact.
  const afterUptime = [
    [0, 0, 0, 1], // lock requests
    [0, 0, 0, 0], // owner lookups
    [0, 0, 0, 0], // contender lookups
    [0, 0, 0, 0], // renewals
    [0, 0, 0, 0], // specific releases
    [0, 0, 0, 0], // general releases
    [0, 0, 0, 0], // lock dumps
    [0, 0, 0, 1], // stats requests: this one
    [0, 0, 0, 1], // accepted connections
    [0, 0, 0, 0], // rejected, not in hosts file
    [0, 0, 0, 0], // rejected, too busy
    [0, 0, 0, 1], // current owners
    [0, 0, 0, 0], // current contenders
    [0, 1], // active connections: the asker
  ].flat();
  t.is(hex(reply.subarray(4)), hex(afterUptime));
  t.is(decodeReply(Command.Stats, reply).lockRequests, 1);
  // No byte beyond the 58: the next reply starts exactly where this one ended.
  client.send([0x08]);
  t.is(decodeReply(Command.Stats, await client.read(STATS_REPLY_LENGTH)).statsRequests, 2);
  t.is(client.buffered, 0);
});

test('keys, indexes and owners are raw bytes: NUL, 0xff, invalid UTF-8 and 255-byte strings round-trip', async (t) => {
  const client = await freshClient(t);
  const key = '\x00\xff\xc3\x28 %#\n';
  const owner = Array.from({ length: 255 }, (_, i) => String.fromCharCode(255 - i)).join('');
  t.is(await ask.request(client, key, '', owner, { ttl: 0xffff, ttw: 0xffff, priority: 0xff }), 1);
  client.send(bytes(0x01, key.length, key, 0));
  t.is(hex(await readReplyBytes(client, Command.FindOwner)), hex(bytes(255, owner)));
  // 0xfe and 0xff are both invalid UTF-8; read as text they would collide into one key.
  t.is(await ask.request(client, '\xff', 'i', 'a'), 1);
  t.is(await ask.request(client, '\xfe', 'i', 'b'), 1);
  t.is(await ask.findOwner(client, '\xff', 'i'), 'a');
  t.is(await ask.findOwner(client, '\xfe', 'i'), 'b');
  const listed = await ask.list(client, key);
  t.deepEqual(listed, [{ priority: 255, ttl: 65535, ttw: 65535, index: '', owner, isOwner: true }]);
  // An empty key, index and owner are legal too.
  t.is(await ask.request(client, '', '', ''), 1);
  t.is(await ask.location(client, '', '', ''), 1);
});
