import test, { type ExecutionContext } from 'ava';
import { FakeClock } from '../../src/locks/Clock.js';
import { LocalLockService, type Scheduler } from '../../src/locks/LocalLockService.js';
import type { LockService } from '../../src/locks/LockService.js';
import { AllowList } from '../../src/server/AllowList.js';
import { LockServer } from '../../src/server/LockServer.js';
import { silentLogger } from '../../src/server/Logger.js';
import { RawClient } from '../helpers/rawClient.js';
import { frames, req } from '../helpers/wire.js';

/** No sweeps: the test drives nothing by time. */
const idleScheduler: Scheduler = { every: () => () => {}, soon: () => {} };

/**
 * The table answers at once; a replicated core will answer later. This one answers every command
 * on a later turn of the event loop, reading the table only then, as a remote core would.
 */
function later(local: LocalLockService): LockService {
  const defer = <T>(answer: () => T): Promise<T> => new Promise((resolve) => setImmediate(() => resolve(answer())));
  return {
    findOwner: (key, index) => defer(() => local.findOwner(key, index)),
    request: (r, allowCreate) => defer(() => local.request(r, allowCreate)),
    location: (key, index, owner) => defer(() => local.location(key, index, owner)),
    renew: (key, index, owner) => defer(() => local.renew(key, index, owner)),
    release: (key, index, owner) => defer(() => local.release(key, index, owner)),
    releaseKey: (key, owner) => defer(() => local.releaseKey(key, owner)),
    releaseAll: (owner) => defer(() => local.releaseAll(owner)),
    list: (key, limit) => defer(() => local.list(key, limit)),
    counts: () => local.counts(),
    drainCounts: () => local.drainCounts(),
    snapshot: () => local.snapshot(),
    restore: (saved) => local.restore(saved),
    close: () => local.close(),
  };
}

async function repliesFrom(t: ExecutionContext, service: LockService, batch: Buffer): Promise<Buffer> {
  const clock = new FakeClock();
  const server = new LockServer({
    service,
    allowList: AllowList.parse('127.0.0.1\n', 'test hosts'),
    maxConnections: 4,
    frameTimeoutMs: 10_000,
    clock,
    logger: silentLogger,
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(async () => {
    await server.stopServing();
    server.closeConnections();
    await server.whenAllClosed(1_000);
  });
  const client = await RawClient.connect(t, { port });
  t.deepEqual([...(await client.read(1))], [1], 'greeted');
  client.sendAndEnd(batch);
  return client.readUntilClose();
}

test('a service that answers later gets the same replies, in the same order, as one that answers at once', async (t) => {
  const batch = frames(
    req.findOwner('k', '1'),
    req.request('k', '1', 'alice', { ttl: 30, ttw: 60, priority: 3 }),
    req.request('k', '1', 'bob', { ttl: 30, ttw: 60, priority: 1 }),
    req.request('k', '1', 'carol', { ttl: 30, ttw: 60, priority: 9 }),
    req.location('k', '1', 'bob'),
    req.renew('k', '1', 'bob'),
    req.list('k'),
    req.release('k', '1', 'alice'),
    req.findOwner('k', '1'),
    req.request('k', '2', 'bob'),
    req.release('k', '*', 'bob'),
    req.releaseAll('carol'),
    req.list('k'),
  );
  const atOnce = await repliesFrom(t, new LocalLockService(new FakeClock(), idleScheduler), batch);
  const deferred = await repliesFrom(t, later(new LocalLockService(new FakeClock(), idleScheduler)), batch);
  t.true(atOnce.length > 40, `a full set of replies (${atOnce.length} bytes)`);
  t.deepEqual(deferred.toString('hex'), atOnce.toString('hex'));
});
