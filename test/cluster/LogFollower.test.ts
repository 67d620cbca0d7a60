import test from 'ava';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// The follower's watchdog restarts a watch that delivers nothing while etcd holds batches we lack.
// A watch just started has delivered nothing yet because it is new, not because it stalled: a
// restart then costs RETRY_MS for nothing, and a node importing a lock file (nothing listening
// yet, every timer unref'd) could find its event loop empty meanwhile and exit.

test('a node that just became ready on an empty log does not take its first batch for a stalled watch', async (t) => {
  // The process has run for a while before the node starts (a monotonic clock never starts at 0).
  const vt = new VirtualTimers(3_600_000);
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(5) });
  const events: string[] = [];
  const log = store.client('n1');
  const service = new ClusterLockService(
    { nodeName: 'n1', candidatePriority: 1, commitTimeoutMs: 2_000, maxEntries: 100, leaseSeconds: 2 },
    { log, clock: vt, timers: vt, random: mulberry32(1), logger: { event: (name) => void events.push(name), debug: undefined } },
  );
  let granted: number | undefined;
  void service.start().then(() => {
    // The first batch comes back a little late (a watch stream still being set up), well within the watchdog's second.
    log.stallStream(200);
    return service.request({ key: 'k', index: 'i', owner: 'o', ttl: 0, ttw: 0, priority: 0 }, true).then((p) => (granted = p));
  });
  for (let waited = 0; granted === undefined && waited < 10_000; waited += 10) await vt.advance(10);
  t.is(granted, 1);
  t.deepEqual(
    events.filter((e) => e === 'log-watch-restart'),
    [],
  );
  let closed = false;
  void service.close().then(() => (closed = true));
  for (let waited = 0; !closed && waited < 10_000; waited += 10) await vt.advance(10);
  t.true(closed);
});
