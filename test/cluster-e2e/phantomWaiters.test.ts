import test from 'ava';
import { Command, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';
import { needsEtcd, startCluster, type LockCluster } from '../helpers/etcdCluster.js';
import { get, sample } from '../helpers/metrics.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask, call, frames, readReply } from '../helpers/wire.js';

// No phantom waiters, on a real cluster (3 etcd members, 3 nodes, loopback): two clients wait
// through 0x0B with TTW 0 (what holdLock and lockctl hold send) through n3, one with TTL 30 and
// one with TTL 0; n3 is killed -9 and its clients are gone with it. Their waiting entries end in
// the cluster, by n3's restart (its earlier incarnation's waits) or, with n3 left dead, by the
// leader once n3's name is gone; the owner's release then grants the next client, who asked
// after it, and the listing holds neither phantom.

const etcdTest = needsEtcd(test);
const WAIT_MS = 60_000;
const METRICS = ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'];

function acquireWait(owner: string, ttl: number): Request & { command: typeof Command.AcquireWait } {
  return { command: Command.AcquireWait, key: 'k', index: '1', owner, ttl, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND };
}

/** Until `node` has `count` clients waiting for a grant (its metrics say so). */
async function waitingForGrant(node: ServerProcess, count: number): Promise<void> {
  const port = Number((await node.event('metrics-started')).fields.port);
  await pollUntil(
    `${count} client(s) waiting on port ${node.port}`,
    async () => (sample((await get(port, '/metrics')).body, 'lockserver_clients_waiting{for="grant"}') === count ? true : undefined),
    WAIT_MS,
  );
}

/** The owners queued on k/1, as `via` lists them (0x07). */
async function queued(via: ServerProcess): Promise<string[]> {
  const client = await via.accepted();
  try {
    return (await call(client, { command: Command.List, key: 'k' })).filter((c) => c.index === '1').map((c) => c.owner);
  } finally {
    client.destroy();
  }
}

/**
 * alice owns k/1 through `ownerNode`; w30 and w0 wait for it through `victim`, which is then
 * killed -9 (after its waits were tied to its incarnation: the `waits-tied` event).
 */
async function killWithTwoWaiters(ownerNode: ServerProcess, victim: ServerProcess): Promise<Awaited<ReturnType<ServerProcess['accepted']>>> {
  await victim.event('waits-tied', () => true, WAIT_MS);
  const alice = await ownerNode.accepted();
  if ((await ask.request(alice, 'k', '1', 'alice')) !== 1) throw new Error('alice was not granted k/1');
  const w30 = await victim.accepted();
  w30.send(frames(acquireWait('w30', 30)));
  const w0 = await victim.accepted();
  w0.send(frames(acquireWait('w0', 0)));
  await waitingForGrant(victim, 2);
  victim.signal('SIGKILL');
  await victim.waitForExit();
  await w30.waitForClose();
  await w0.waitForClose();
  return alice;
}

/** The phantoms gone, alice releases; the next client, asking after that, is granted at once; only it is listed. */
async function nextClientGranted(
  t: import('ava').ExecutionContext,
  ownerNode: ServerProcess,
  alice: Awaited<ReturnType<ServerProcess['accepted']>>,
): Promise<void> {
  await pollUntil('the dead node’s waits to end', async () => ((await queued(ownerNode)).join(',') === 'alice' ? true : undefined), WAIT_MS);
  t.is(await ask.release(alice, 'k', '1', 'alice'), 1);
  const next = await ownerNode.accepted();
  next.send(frames(acquireWait('next', 30)));
  t.like(await readReply(next, Command.AcquireWait), { position: 1 }, 'granted at once: neither phantom owns it');
  t.deepEqual(await queued(ownerNode), ['next']);
}

etcdTest.serial(
  'two clients waiting (0x0B, TTW 0, TTL 30 and 0) through a node killed -9: its restart ends their waits, and the next client is granted',
  async (t) => {
    t.timeout(180_000);
    // n3 is the only candidate: while it is dead nobody leads, so only its restart can end the waits.
    const { cluster, nodes } = await startThree(t, ['off', 'off', '1']);
    const [n1, , n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const alice = await killWithTwoWaiters(n1, n3);
    t.deepEqual(await queued(n1), ['alice', 'w30', 'w0'], 'nobody ends them while n3 is dead');
    const again = await cluster.restart(n3);
    const ended = await again.event('waits-ended', () => true, WAIT_MS);
    t.is(ended.fields.why, 'restarted');
    t.is(ended.fields.removed, '2');
    await nextClientGranted(t, n1, alice);
  },
);

etcdTest.serial(
  'two clients waiting (0x0B, TTW 0, TTL 30 and 0) through a node killed -9 and left dead: the leader ends their waits once its name is gone',
  async (t) => {
    t.timeout(180_000);
    const { nodes } = await startThree(t, ['1', '2', '3']);
    const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const alice = await killWithTwoWaiters(n2, n3);
    const ended = await n1.event('waits-ended', () => true, WAIT_MS);
    t.is(ended.fields.why, 'node-gone');
    t.is(ended.fields.removed, '2');
    await nextClientGranted(t, n2, alice);
  },
);

/** Three nodes with these candidate priorities (n1 leads when it stands: priority 1). */
async function startThree(t: import('ava').ExecutionContext, priorities: readonly string[]): Promise<{ cluster: LockCluster; nodes: ServerProcess[] }> {
  const { cluster } = await startCluster(t, { nodes: 0 });
  const nodes = await Promise.all(priorities.map((p, i) => cluster.startNode({ name: `n${i + 1}`, args: [...METRICS, '--candidate-priority', p] })));
  return { cluster, nodes };
}
