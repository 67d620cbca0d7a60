import test from 'ava';
import { withLock } from '../../src/client/holdLock.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';

// The README's storage check ("Client library"), its code with a bounded wait and the test's checks
// added, against a real server: a holder that stalls past its TTL (1 s, run out on the server's own
// clock) writes after the next holder, and its write is refused.

test("a stalled holder's late write, with its older token, is refused", async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const written: string[] = [];

  let highest = 0; // the resource keeps the highest token it has seen
  const write = (token: number, value: string): void => {
    if (token < highest) throw new Error(`token ${token} is stale: ${highest} has written`);
    highest = token; // … and stores the value
    written.push(value);
  };
  const a = await client.requestFenced('report', 'daily', 'worker-a', { ttl: 1 }); // then a stalls past its TTL
  // worker-b waits (polling) until a's lock has run out on the server.
  const b = withLock(client, 'report', 'daily', 'worker-b', {}, async (_lost, lock) => write(lock.token!, 'b'));
  await bounded(b, 10_000, "worker-b's write");
  t.throws(() => write(a.token, 'a'), { message: /^token \d+ is stale: \d+ has written$/ }); // a's late write is refused

  t.is(a.position, 1);
  t.true(a.token > 0);
  t.deepEqual(written, ['b']);
  t.true(highest > a.token, "b's lock came with a greater token");
  t.is(await client.fence('report', 'daily', 'worker-a'), 0, 'worker-a no longer owns the lock');
});
