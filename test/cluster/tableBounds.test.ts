import test from 'ava';
import { BatchEncoder, decodeBatch, LogOp, TABLE_BOUNDS_FORMAT, type Batch, type LogCommand } from '../../src/cluster/LogCodec.js';
import { ReplicaState } from '../../src/cluster/ReplicaState.js';
import { NO_ID } from '../../src/locks/HashIndex.js';
import { Refusal } from '../../src/locks/TableLimits.js';
import { FakeClock } from '../doubles/FakeClock.js';
import { memoryCluster, settle } from './memoryCluster.js';

// A cluster is bounded as a single node is: the table's bytes and one owner's entries by the bounds
// each batch carries (every replica refuses alike), one connection's entries by the node that serves
// it, before it proposes.

const at = (version: number) => ({ version, revision: 10 * version + 3 });
const name = (n: number | string, length = 255): string => `${n}:`.padEnd(length, 'x');

function request(key: string, owner: string, index = '1'): LogCommand {
  return { op: LogOp.Request, key, index, owner, ttl: 0, ttw: 0, priority: 0, allowCreate: true, maxEntries: 1_000_000 };
}

test('a batch carries the table bounds in format 7, and every replica refuses at them alike; a batch without them is bounded by --max-locks alone', (t) => {
  const encoder = new BatchEncoder();
  const commands = [
    // Two entries of 672 bytes (one 255-byte name), then one of 1,168 (three) would pass 2 KiB:
    // refused for bytes; then the first owner's third for its cap of 2; another owner's short one fits.
    request('k0', name('o')),
    request('k1', name('o')),
    request(name(2), name('p'), name(2)),
    request('a', name('o')),
    request('b', 'q'),
  ];
  const bounded: Batch = { proposer: 'A', incarnation: 1, seq: 1, commands, tableBytesBound: 2 * 1024, ownerEntriesBound: 2 };
  const bytes = encoder.encode(bounded);
  t.is(bytes[1], TABLE_BOUNDS_FORMAT);
  const decoded = decodeBatch(bytes);
  t.is(decoded.tableBytesBound, 2 * 1024);
  t.is(decoded.ownerEntriesBound, 2);
  t.is(decoded.entryBytesBound, undefined);
  const replicas = [new ReplicaState(new FakeClock()), new ReplicaState(new FakeClock())];
  const refusals: Refusal[][] = [];
  for (const state of replicas) {
    const seen: Refusal[] = [];
    const results = state.apply(decoded, at(1), (i) => {
      if (i > 0) seen.push(state.table.lastRefusal);
    })!;
    t.deepEqual(results, [1, 1, 0, 0, 1]);
    refusals.push(seen);
  }
  t.deepEqual(refusals[0]!.slice(2, 4), [Refusal.MaxTableBytes, Refusal.MaxLocksPerOwner]);
  t.deepEqual(refusals[0], refusals[1]);
  t.is(replicas[0]!.digest(), replicas[1]!.digest());
  // Without bounds the header is an older format's, and only --max-locks applies.
  const unbounded = encoder.encode({ proposer: 'A', incarnation: 1, seq: 2, commands: [request(name(2), name('p')), request('c', name('o'))] });
  t.not(unbounded[1], TABLE_BOUNDS_FORMAT);
  t.deepEqual(replicas[0]!.apply(decodeBatch(unbounded), at(2)), [1, 1]);
});

test("a node counts the entries each of its connections created, as it applies them: renewals and others' entries not, releases give back", (t) => {
  const state = new ReplicaState(new FakeClock());
  let seq = 0;
  // The node's own commands, each claimed for `client` right after it applied (as ClusterLockService does).
  const own = (version: number, client: number, commands: LogCommand[]): number[] =>
    state.apply({ proposer: 'A', incarnation: 1, seq: ++seq, commands }, at(version), (i) => {
      if (commands[i - 1]?.op === LogOp.Request) state.claimAddedForConnection(client);
    })!;
  t.deepEqual(own(1, 7, [request('a', 'x'), request('b', 'x'), request('a', 'y')]), [1, 1, 2]);
  t.is(state.entriesOfConnection(7), 3);
  // A renewal creates nothing; another node's entries are not this connection's.
  t.deepEqual(own(2, 7, [request('a', 'x')]), [1]);
  state.apply({ proposer: 'B', incarnation: 1, seq: 1, commands: [request('c', 'z')] }, at(3));
  t.is(state.entriesOfConnection(7), 3);
  t.is(state.entriesOfConnection(8), 0);
  // A release, by anyone, gives the entry back; so does release-all.
  state.apply({ proposer: 'B', incarnation: 1, seq: 2, commands: [{ op: LogOp.Release, key: 'a', index: '1', owner: 'x' }] }, at(4));
  t.is(state.entriesOfConnection(7), 2);
  state.apply({ proposer: 'B', incarnation: 1, seq: 3, commands: [{ op: LogOp.ReleaseAll, owner: 'x' }] }, at(5));
  t.is(state.entriesOfConnection(7), 1);
  t.not(state.table.entryOf('a', '1', 'y'), NO_ID);
});

test('a connection at --max-locks-per-connection is refused (0) by its node before proposing; renewals and other connections go on; the refusal is told and counted', async (t) => {
  const told: Array<[Refusal, string, number]> = [];
  const { vt, nodes } = await memoryCluster(t, ['A', 'B'], {
    options: { maxEntriesPerConnection: 2, onRefused: (why, r, client) => told.push([why, r.key, client]) },
  });
  const a = nodes[0]!;
  const r = (key: string) => ({ key, index: '1', owner: 'o', ttl: 0, ttw: 0, priority: 0 });
  const [first, second] = await settle(vt, a.request(r('k1'), true, undefined, 5), a.request(r('k2'), true, undefined, 5));
  t.deepEqual([first, second], [1, 1]);
  const [third, renewal, other, fenced] = await settle(
    vt,
    a.request(r('k3'), true, undefined, 5),
    a.request(r('k1'), true, undefined, 5),
    a.request(r('k3'), true, undefined, 6),
    a.requestFenced(r('k4'), true, undefined, 5),
  );
  t.deepEqual([third, renewal, other, fenced.position], [0, 1, 1, 0]);
  t.deepEqual(told, [
    [Refusal.MaxLocksPerConnection, 'k3', 5],
    [Refusal.MaxLocksPerConnection, 'k4', 5],
  ]);
  t.is(a.limitFigures().refused.find(([limit]) => limit === 'max-locks-per-connection')?.[1], 2);
  // Its entry released (through the other node), the connection has room again.
  t.is((await settle(vt, nodes[1]!.release('k1', '1', 'o')))[0], 1);
  await settle(vt, a.counts());
  t.is((await settle(vt, a.request(r('k3'), true, undefined, 5)))[0], 1);
});

test('the table bounds go into every batch once every live node reads them: a cluster refuses at --max-locks-per-owner on every node', async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['A', 'B', 'C'], { options: { maxEntriesPerOwner: 2 } });
  const r = (key: string) => ({ key, index: '1', owner: 'o', ttl: 0, ttw: 0, priority: 0 });
  const results = await settle(vt, nodes[0]!.request(r('k1'), true), nodes[1]!.request(r('k2'), true), nodes[2]!.request(r('k3'), true));
  t.deepEqual([...results].sort(), [0, 1, 1]);
  await settle(vt, ...nodes.map((n) => n.counts()));
  for (const node of nodes) {
    t.is(node.replica.table.size, 2);
    t.is(node.limitFigures().refused.find(([limit]) => limit === 'max-locks-per-owner')?.[1], 1);
  }
});
