import test from 'ava';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { BatchEncoder, LogOp } from '../../src/cluster/LogCodec.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { silentLogger } from '../../src/runtime/Logger.js';
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
  await vt.until(10_000, () => granted !== undefined);
  t.is(granted, 1);
  t.deepEqual(
    events.filter((e) => e === 'log-watch-restart'),
    [],
  );
  let closed = false;
  void service.close().then(() => (closed = true));
  t.true(await vt.until(10_000, () => closed));
});

test('a node without clients whose watch stalls silently still catches up: it reads the head itself when nothing names it', async (t) => {
  const vt = new VirtualTimers(3_600_000);
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(7) });
  const nodes = ['n1', 'n2'].map(
    (name, i) =>
      new ClusterLockService(
        { nodeName: name, candidatePriority: i + 1, commitTimeoutMs: 2_000, maxEntries: 100, leaseSeconds: 2 },
        { log: store.client(name), clock: vt, timers: vt, random: mulberry32(i + 1), logger: silentLogger },
      ),
  );
  const [busy, idle] = nodes as [ClusterLockService, ClusterLockService];
  for (const node of nodes) void node.start();
  t.true(await vt.until(10_000, () => nodes.every((node) => node.isReady)));

  // The next delivery to each watch stalls it for good: open, silent, no error.
  store.faults.watchStall = 1;
  let granted: number | undefined;
  void busy.request({ key: 'k', index: 'i', owner: 'o', ttl: 0, ttw: 0, priority: 0 }, true).then((p) => (granted = p));
  const idleStalled = (): boolean => store.trace.some((line) => line.includes(`watch n2 stalls`));
  t.true(await vt.until(10_000, idleStalled), "the idle node's watch stalled");
  store.faults.watchStall = 0;

  // The busy node learns the head from its own append and restarts its watch; the idle node has
  // no client, so nothing it sends names the head: only its own reading of it shows it is behind.
  const head = store.logHead.version;
  await vt.until(60_000, () => idle.replica.position.version >= head && granted !== undefined);
  t.is(granted, 1);
  t.is(idle.replica.position.version, head, 'the idle node applied the batch its stalled watch never delivered');
  t.is(idle.replica.table.findOwner('k', 'i'), 'o');

  let closed = 0;
  for (const node of nodes) void node.close().then(() => closed++);
  t.true(await vt.until(10_000, () => closed === 2));
});

test('a log value no node can read is refused alike on every node, logged and counted; the log goes on past it, also for a node that starts over it', async (t) => {
  const vt = new VirtualTimers(3_600_000);
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(11) });
  const events: string[] = [];
  const node = (name: string, priority: number): ClusterLockService =>
    new ClusterLockService(
      { nodeName: name, candidatePriority: priority, commitTimeoutMs: 2_000, maxEntries: 100, leaseSeconds: 2 },
      {
        log: store.client(name),
        clock: vt,
        timers: vt,
        random: mulberry32(priority),
        logger: { event: (event, fields) => void events.push(`${name} ${event} ${String(fields?.reason ?? '')}`), debug: undefined },
      },
    );
  const [n1, n2] = [node('n1', 1), node('n2', 2)];
  for (const n of [n1, n2]) void n.start();
  t.true(await vt.until(10_000, () => n1.isReady && n2.isReady));
  const request = (n: ClusterLockService, owner: string) => {
    let position: number | undefined;
    void n.request({ key: 'k', index: 'i', owner, ttl: 0, ttw: 0, priority: 0 }, true).then((p) => (position = p));
    return () => position;
  };
  const first = request(n1, 'alice');
  t.true(await vt.until(10_000, () => first() !== undefined));
  // Issue 36: one command whose op byte no version knows (0xEE), written straight into the log
  // (as one who can write etcd, or a broken node, could): every node exited, and a restarted one
  // died again catching up over it.
  const forged = Buffer.from(new BatchEncoder().encode({ proposer: 'forger', incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'alice' }] }));
  forged[forged.length - 1 - 1 - 'alice'.length] = 0xee;
  store.appendLog(forged);
  const second = request(n2, 'bob');
  t.true(await vt.until(10_000, () => second() !== undefined));
  t.is(second(), 2, 'bob waits behind alice: nothing of the refused value was applied');
  t.is(n1.replica.digest(), n2.replica.digest());
  t.deepEqual(
    events.filter((e) => e.includes('log-value-refused')),
    ['n1 log-value-refused unknown command 238', 'n2 log-value-refused unknown command 238'],
  );
  t.deepEqual(
    [n1, n2].map((n) => n.figures().logValuesRefused),
    [1, 1],
  );
  // A third node, started after it, catches up over it to the same state.
  const n3 = node('n3', 3);
  void n3.start();
  t.true(await vt.until(10_000, () => n3.isReady && n3.replica.position.version === n1.replica.position.version));
  t.is(n3.replica.digest(), n1.replica.digest());
  let closed = 0;
  for (const n of [n1, n2, n3]) void n.close().then(() => closed++);
  t.true(await vt.until(10_000, () => closed === 3));
});
