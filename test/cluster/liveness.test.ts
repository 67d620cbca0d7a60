import test, { type ExecutionContext } from 'ava';
import { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { NodeLiveness } from '../../src/cluster/NodeLiveness.js';
import type { LockRequest } from '../../src/locks/LockService.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore, type MemoryLog } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';
import { settle } from './memoryCluster.js';

// Liveness only the live can prove: a node's liveness is its heartbeat (a rewrite of its name key,
// which needs write access), judged by the others on their own clocks, never a lease's existence
// (any etcd client may keep any lease alive). Under virtual time, over the in-memory etcd with a
// read-only user keeping every lease alive.

const lock = (owner: string, fields: Partial<LockRequest> = {}): LockRequest => ({ key: 'k', index: 'i', owner, ttl: 0, ttw: 0, priority: 0, ...fields });
/** The nodes' name lease: the silence bound. */
const LEASE_S = 2;

test('NodeLiveness: a beat that stands still for the bound while this node writes proves silence; a move, a gap or a failure of its own writes proves nothing', (t) => {
  const liveness = new NodeLiveness(2_000, 1_000);
  const read = (at: number, beats: Record<string, number>): void =>
    liveness.observed(
      Object.entries(beats).map(([name, beat]) => ({ name, beat })),
      at,
      at + 5,
    );
  for (let at = 0; at <= 2_500; at += 500) liveness.wrote(true, at);
  read(0, { a: 10, b: 11 });
  read(1_000, { a: 10, b: 12 });
  read(2_000, { a: 10, b: 13 });
  t.false(liveness.isSilent('a'), 'unmoved for 1,995 ms of the 2,000');
  read(2_500, { a: 10, b: 14 });
  t.true(liveness.isSilent('a'));
  t.false(liveness.isSilent('b'));
  t.deepEqual(liveness.silentNames(), ['a']);
  read(3_000, { a: 15, b: 14 });
  t.false(liveness.isSilent('a'), 'it beat again');

  // etcd took no writes of this node (an election, a lost quorum): standing still then proves nothing.
  liveness.wrote(false, 3_100);
  for (let at = 3_500; at <= 9_000; at += 500) read(at, { a: 15, b: 16 });
  t.false(liveness.isSilent('a'), 'no write of its own confirmed since the failure');
  liveness.wrote(true, 9_000);
  liveness.wrote(true, 9_800);
  read(10_000, { a: 15, b: 16 });
  t.false(liveness.isSilent('a'), 'counted from its first write after the failure');
  liveness.wrote(true, 10_600);
  liveness.wrote(true, 11_000);
  read(11_000, { a: 15, b: 16 });
  t.true(liveness.isSilent('a'));
  // A gap over writeGapMs between its own writes (a pause of this node) starts the count again.
  liveness.wrote(true, 14_000);
  read(14_000, { a: 15, b: 16 });
  t.false(liveness.isSilent('a'));
  read(14_500, { b: 16 });
  t.is(liveness.beatOf('a'), undefined, 'a name no longer registered is forgotten');
});

interface LoggedNode {
  readonly node: ClusterLockService;
  readonly client: MemoryLog;
  /** Its log events, with the virtual time of each. */
  readonly events: Array<{ readonly name: string; readonly fields: Record<string, unknown>; readonly at: number }>;
}

function startNode(store: MemoryStore, vt: VirtualTimers, name: string, seed: number): LoggedNode {
  const client = store.client(name);
  const events: LoggedNode['events'] = [];
  const node = new ClusterLockService(
    { nodeName: name, candidatePriority: 1, commitTimeoutMs: 2_000, maxEntries: 1_000, leaseSeconds: LEASE_S },
    {
      log: client,
      clock: vt,
      timers: vt,
      random: mulberry32(seed),
      logger: { event: (event, fields = {}) => events.push({ name: event, fields, at: vt.now() }), debug: undefined },
    },
  );
  void node.start();
  return { node, client, events };
}

async function cluster(t: ExecutionContext, names: string[]): Promise<{ vt: VirtualTimers; store: MemoryStore; nodes: LoggedNode[] }> {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(7) });
  store.readerKeepsLeasesAlive = true;
  const nodes = names.map((name, i) => startNode(store, vt, name, 100 + i));
  t.true(await vt.until(10_000, () => nodes.every((n) => n.node.isReady)), 'every node ready');
  t.teardown(async () => {
    let closed = false;
    void Promise.allSettled(nodes.map((n) => n.node.close())).then(() => (closed = true));
    await vt.until(10_000, () => closed);
  });
  return { vt, store, nodes };
}

test('a crashed leader whose name lease a reader keeps alive: its owner expires and the waiter is granted, another node leads, the restarted node takes its name over', async (t) => {
  const { vt, store, nodes } = await cluster(t, ['a', 'b', 'c']);
  t.true(await vt.until(10_000, () => nodes.some((n) => n.node.isLeader)));
  const leader = nodes.find((n) => n.node.isLeader)!;
  const [first, second] = nodes.filter((n) => n !== leader) as [LoggedNode, LoggedNode];
  const leaderName = leader.client.label;
  await settle(vt, first.node.request(lock('alice', { ttl: 3 }), true));
  const [bobAt] = await settle(vt, second.node.request(lock('bob', { ttl: 60, ttw: 60 }), true));
  t.is(bobAt, 2);
  const lease = store.keys(`names/${leaderName}`)[0]!.lease;

  leader.client.crash();
  const crashedAt = vt.now();
  t.true(await vt.until(30_000, () => first.node.replica.table.findOwner('k', 'i') === 'bob'), 'bob owns: alice expired');
  t.true(await vt.until(30_000, () => [first, second].every((n) => n.node.leader !== undefined && n.node.leader !== leaderName)), 'a survivor leads');
  t.is(store.keys(`names/${leaderName}`)[0]?.lease, lease, 'the reader kept the dead leader’s name lease alive throughout');
  for (const n of [first, second]) {
    t.true(n.events.some((e) => e.name === 'node-silent' && e.fields.name === leaderName));
  }

  const back = startNode(store, vt, leaderName, 200);
  t.true(await vt.until(30_000, () => back.node.isReady), 'the restarted node becomes ready');
  const takeover = back.events.find((e) => e.name === 'name-taken-over');
  t.truthy(takeover);
  t.true(Number(takeover!.fields.silent_ms) >= LEASE_S * 1000, 'only once its incarnation was silent for the bound on this node’s clock');
  t.not(store.keys(`names/${leaderName}`)[0]!.lease, lease, 'the name moved to the new lease');
  t.true(vt.now() - crashedAt < 30_000);
  t.true(await vt.until(10_000, () => first.events.some((e) => e.name === 'node-beating' && e.fields.name === leaderName)), 'its new incarnation beats');
  t.is(back.node.replica.table.findOwner('k', 'i'), 'bob');
  back.node.close().catch(() => {});
});

test('a name whose holder still beats is never taken over, however long another process of that name waits', async (t) => {
  const { vt, store, nodes } = await cluster(t, ['a', 'b']);
  const twin = startNode(store, vt, 'a', 300);
  await vt.advance(20_000);
  t.false(twin.node.isReady);
  t.true(twin.events.some((e) => e.name === 'name-held'));
  t.false(twin.events.some((e) => e.name === 'name-taken-over'));
  t.false(nodes.some((n) => n.events.some((e) => e.name === 'node-silent' || e.name === 'name-lost')));
  twin.client.crash();
});

test('an etcd outage three times the bound proves nobody silent: a node is judged silent only once etcd took writes again for the bound', async (t) => {
  const { vt, store, nodes } = await cluster(t, ['a', 'b', 'c']);
  t.true(await vt.until(10_000, () => nodes.every((n) => n.node.leader !== undefined)));
  await vt.advance(3_000);
  store.setQuorum(false);
  await vt.advance(3 * LEASE_S * 1000);
  store.setQuorum(true);
  const backAt = vt.now();
  await vt.advance(5 * LEASE_S * 1000);
  // The in-memory sessions lapse in the outage (no keep-alive answered for a TTL) and each node takes
  // its name back from its own silent lease: silent then, but never counted from before etcd came back.
  for (const n of nodes) {
    for (const e of n.events.filter((event) => event.name === 'node-silent')) {
      t.true(e.at - backAt >= LEASE_S * 1000, `${n.client.label} judged ${String(e.fields.name)} silent ${e.at - backAt} ms after etcd came back`);
    }
  }
  t.true(nodes.every((n) => n.node.isReady));
  const leaders = new Set(nodes.map((n) => n.node.leader));
  t.is(leaders.size, 1, 'one leader, named alike');
  t.not([...leaders][0], undefined);
});
