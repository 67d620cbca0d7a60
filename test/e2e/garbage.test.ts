import test from 'ava';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command } from '../../src/protocol/constants.js';
import { encodeRequest } from '../../src/protocol/encodeRequest.js';
import type { Request } from '../../src/protocol/messages.js';
import { pollUntil } from '../helpers/poll.js';
import { mulberry32 } from '../helpers/random.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask, pipeline, req } from '../helpers/wire.js';

// Random bytes from a seeded PRNG on many connections. A failure replays with the same seed.

const SEED = 0x5eed_1ab5;
const CONNECTIONS = 300;
const CONCURRENCY = 25;
const MAX_GARBAGE_BYTES = 4096;

type Random = () => number;

const below = (random: Random, n: number): number => Math.floor(random() * n);

function randomBytes(random: Random, length: number): Buffer {
  const out = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) out[i] = below(random, 256);
  return out;
}

function randomString(random: Random): string {
  return randomBytes(random, below(random, 256)).toString('latin1');
}

/** A well-formed request with random contents, so the garbage also reaches deep into the server. */
function randomRequest(random: Random): Request {
  const command = 1 + below(random, 8);
  const s = (): string => randomString(random);
  switch (command) {
    case Command.FindOwner:
      return req.findOwner(s(), s());
    case Command.Request:
      return req.request(s(), s(), s(), { ttl: below(random, 65536), ttw: below(random, 65536), priority: below(random, 256) });
    case Command.FindLocation:
      return req.location(s(), s(), s());
    case Command.Renew:
      return req.renew(s(), s(), s());
    case Command.Release:
      return req.release(s(), below(random, 4) === 0 ? '*' : s(), s());
    case Command.ReleaseAll:
      return req.releaseAll(s());
    case Command.List:
      return req.list(s());
    default:
      return req.stats();
  }
}

/** Random bytes; or a command byte then random bytes; or valid requests then random bytes. */
function garbage(random: Random): Buffer {
  const tail = randomBytes(random, below(random, MAX_GARBAGE_BYTES));
  switch (below(random, 3)) {
    case 0:
      return Buffer.concat([randomBytes(random, 1), tail]);
    case 1:
      return Buffer.concat([Buffer.from([1 + below(random, 8)]), tail]);
    default: {
      const out = new BufferWriter();
      const count = 1 + below(random, 20);
      for (let i = 0; i < count; i++) encodeRequest(out, randomRequest(random));
      return Buffer.concat([out.flush(), tail]);
    }
  }
}

/** One abusive connection: writes its garbage in random pieces, then half-closes or vanishes. */
async function abuse(server: ServerProcess, random: Random): Promise<void> {
  const client = await server.connect();
  const bytes = garbage(random);
  for (let offset = 0; offset < bytes.length && !client.isClosed;) {
    const piece = 1 + below(random, 512);
    client.send(bytes.subarray(offset, offset + piece));
    offset += piece;
    if (below(random, 4) === 0) await nextTurn();
  }
  if (below(random, 3) === 0) {
    client.destroy();
  } else {
    client.end();
    await client.waitForClose();
  }
}

test(`random bytes on ${CONNECTIONS} connections (seed 0x${SEED.toString(16)}) neither crash the server nor touch other locks`, async (t) => {
  const server = await startServer(t);
  const keeper = await server.accepted();
  t.deepEqual(
    await pipeline(
      keeper,
      req.request('garbage-proof', 'row', 'alice', { ttl: 0, ttw: 0, priority: 7 }),
      req.request('garbage-proof', 'row', 'bob', { ttl: 0, ttw: 0, priority: 3 }),
    ),
    [1, 2],
  );
  const before = await ask.list(keeper, 'garbage-proof');

  const random = mulberry32(SEED);
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < CONNECTIONS) {
      started++;
      await abuse(server, mulberry32(below(random, 2 ** 32)));
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));

  t.true(server.running);
  t.deepEqual(server.eventsNamed('fatal'), []);
  t.deepEqual(server.eventsNamed('connection-error'), []);

  // A fresh client is served correctly, and the lock taken before the run is intact.
  const fresh = await server.accepted();
  t.deepEqual(await ask.list(fresh, 'garbage-proof'), before);
  t.is(await ask.findOwner(fresh, 'garbage-proof', 'row'), 'alice');
  t.is(await ask.location(fresh, 'garbage-proof', 'row', 'bob'), 2);
  t.is(await ask.request(fresh, 'after', 'row', 'carol'), 1);
  t.is(await ask.findOwner(keeper, 'after', 'row'), 'carol');
  // Every abusive connection is gone; only the keeper and the fresh client remain.
  const stats = await pollUntil('abusive connections to close', async () => {
    const s = await ask.stats(fresh);
    return s.activeConnections === 2 ? s : undefined;
  });
  t.is(stats.acceptedConnections, CONNECTIONS + 2);
  t.log(
    `the garbage held ${stats.lockRequests} lock requests, ${stats.releases} releases, ${stats.listRequests} lists; ${stats.owners + stats.contenders} entries now`,
  );
});
