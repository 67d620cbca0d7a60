import test from 'ava';
import { withLock } from '../../src/client/holdLock.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';

// The README's storage check ("Client library"), run against a real server: a holder that stalls
// past its TTL writes late, after the next holder, and its write is refused.

/** A resource that keeps the highest fencing token it has seen and refuses a write with a lower one. */
class FencedStore {
  private highest = 0;
  readonly values = new Map<string, string>();
  write(token: number, key: string, value: string): void {
    if (token < this.highest) throw new Error(`token ${token} is stale: ${this.highest} has written`);
    this.highest = token;
    this.values.set(key, value);
  }
}

test("a stalled holder's late write, with its older token, is refused", async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);

  const store = new FencedStore();
  const a = await client.requestFenced('report', 'daily', 'worker-a', { ttl: 1 }); // { position: 1, token }
  t.is(a.position, 1);
  store.write(a.token, 'sum', 'a, on time');
  // worker-a stalls: it renews nothing, and its lock runs out after 1 s. worker-b waits for it
  // (polling), gets it with a greater token, and writes.
  const written = withLock(client, 'report', 'daily', 'worker-b', {}, async (_lost, lock) => {
    t.true(lock.token! > a.token);
    store.write(lock.token!, 'sum', 'b');
  });
  await bounded(written, 10_000, "worker-b's write");
  t.throws(() => store.write(a.token, 'sum', 'a, late'), { message: /is stale/ });
  t.is(store.values.get('sum'), 'b');
  t.is(await client.fence('report', 'daily', 'worker-a'), 0, 'worker-a no longer owns the lock');
});
