import test from 'ava';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { MemoryStore } from '../doubles/MemoryLog.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';
import type { Logger } from '../../src/runtime/Logger.js';

// Compaction is store-wide: another cluster sharing the etcd, or etcd's own auto-compaction, can
// compact past a follower's position when no snapshot of ours covers it. Every batch is also
// retained under a key of its own until a snapshot covers it, so a follower any number of
// batches behind catches up from one read, and no node waits for a snapshot nobody will write.

function node(store: MemoryStore, vt: VirtualTimers, name: string, events: string[]): ClusterLockService {
  const logger: Logger = { event: (event, fields) => void events.push(`${name} ${event} ${JSON.stringify(fields ?? {})}`), debug: undefined };
  return new ClusterLockService(
    { nodeName: name, candidatePriority: 1, commitTimeoutMs: 2_000, maxEntries: 1_000, leaseSeconds: 2 },
    { log: store.client(name), clock: vt, timers: vt, random: mulberry32(name.length), logger },
  );
}

test('a fresh node whose batches were all compacted away by someone else catches up from one read of the retained batches, with no snapshot to wait for', async (t) => {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(7) });
  const events: string[] = [];
  const first = node(store, vt, 'a', events);
  void first.start();
  t.true(await vt.until(10_000, () => first.isReady));
  for (const owner of ['alice', 'bob', 'carol']) {
    let granted: number | undefined;
    void first.request({ key: 'k', index: 'i', owner, ttl: 0, ttw: 0, priority: 0 }, true).then((p) => (granted = p));
    t.true(await vt.until(5_000, () => granted !== undefined));
  }
  t.is(store.logHead.version, 3, 'three batches, no snapshot');
  // Another cluster's leader compacts the whole store; no snapshot of ours exists.
  store.compactTo(store.revision);
  const second = node(store, vt, 'b', events);
  void second.start();
  t.true(await vt.until(10_000, () => second.isReady), `b never became ready:\n${events.join('\n')}`);
  t.deepEqual(
    second.replica.table.list('k').map((c) => c.owner),
    ['alice', 'bob', 'carol'],
  );
  t.is(second.replica.digest(), first.replica.digest());
  const restarts = events.filter((e) => e.startsWith('b log-watch-restart'));
  t.true(restarts.length <= 1, `one compacted watch, then one read: ${restarts.join('\n')}`);
  let closed = false;
  void Promise.all([first.close(), second.close()]).then(() => (closed = true));
  t.true(await vt.until(10_000, () => closed));
});
