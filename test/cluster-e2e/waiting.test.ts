import test from 'ava';
import { Command, LossReason, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { get, sample } from '../helpers/metrics.js';
import { lockDelayInForce } from '../helpers/lockDelay.js';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask, call, frames, readReply, req } from '../helpers/wire.js';

// Waiting without polling on a real cluster (3 etcd members, 3 nodes, loopback, the default
// write path): a waiter on one node is answered at the apply of a release sent to another; the
// loss notice likewise; a waiter whose node is killed asks again elsewhere and keeps its place; a
// lock-delay begun by one leader is ended by the next. Each wait is observed through the metrics
// (lockserver_clients_waiting), never by timing.

const etcdTest = needsEtcd(test);
const WAIT_MS = 60_000;

function acquireWait(key: string, index: string, owner: string): Request & { command: typeof Command.AcquireWait } {
  return { command: Command.AcquireWait, key, index, owner, ttl: 0, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND };
}

function awaitLoss(key: string, index: string, owner: string): Request & { command: typeof Command.AwaitLoss } {
  return { command: Command.AwaitLoss, key, index, owner };
}

/** The node's metrics port (its `metrics-started` event). */
async function metricsPort(node: ServerProcess): Promise<number> {
  return Number((await node.event('metrics-started')).fields.port);
}

/** Until `node` has `count` clients waiting for `what` (its metrics say so). */
async function waiting(node: ServerProcess, what: 'grant' | 'loss', count: number): Promise<void> {
  const port = await metricsPort(node);
  await pollUntil(
    `${count} client(s) waiting for a ${what} on port ${node.port}`,
    async () => (sample((await get(port, '/metrics')).body, `lockserver_clients_waiting{for="${what}"}`) === count ? true : undefined),
    WAIT_MS,
  );
}

etcdTest.serial(
  'a waiter on one node is answered at the release sent to another, and the loss notice on a third; a waiter whose node is killed keeps its place through another',
  async (t) => {
    t.timeout(180_000);
    const { nodes } = await startCluster(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
    const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const alice = await n1.accepted();
    t.like(await call(alice, { command: Command.RequestFenced, key: 'k', index: '1', owner: 'alice', ttl: 0, ttw: 0, priority: 0 }), { position: 1 });

    const bob = await n2.accepted();
    bob.send(frames(acquireWait('k', '1', 'bob'), req.findOwner('k', '1')));
    const carol = await n3.accepted();
    carol.send(frames(awaitLoss('k', '1', 'alice')));
    await waiting(n2, 'grant', 1);
    await waiting(n3, 'loss', 1);

    t.is(await ask.release(alice, 'k', '1', 'alice'), 1);
    const granted = await readReply(bob, Command.AcquireWait);
    t.is(granted.position, 1);
    t.is(await readReply(bob, Command.FindOwner), 'bob', 'the command behind the wait runs after it');
    t.is(await readReply(carol, Command.AwaitLoss), LossReason.Released);
    t.is(await call(alice, { command: Command.Fence, key: 'k', index: '1', owner: 'bob' }), granted.token, 'every node tells the same token');

    // dave waits on n3, which is killed -9: his entry stays; asked again on n1, he keeps his place.
    const dave = await n3.accepted();
    dave.send(frames(acquireWait('k', '1', 'dave')));
    await waiting(n3, 'grant', 1);
    t.is(await ask.request(alice, 'k', '1', 'erin'), 3, 'erin queues behind dave');
    n3.signal('SIGKILL');
    await n3.waitForExit();
    await dave.waitForClose();
    const daveAgain = await n1.accepted();
    daveAgain.send(frames(acquireWait('k', '1', 'dave')));
    await waiting(n1, 'grant', 1);
    t.is(await ask.location(alice, 'k', '1', 'dave'), 2, 'still ahead of erin');
    t.is(await ask.release(bob, 'k', '1', 'bob'), 1);
    t.like(await readReply(daveAgain, Command.AcquireWait), { position: 1 });
  },
);

etcdTest.serial(
  'a lock-delay begun by one leader holds the lock back on every node, and the next leader ends it: the waiter is granted though the leader that began it was killed',
  async (t) => {
    t.timeout(180_000);
    const { nodes } = await startCluster(t, { args: ['--lock-delay', '4', '--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
    const leader = await Promise.any(nodes.map((n) => n.event('leader', (e) => e.fields.self === 'true', 30_000).then(() => n)));
    const [first, second] = nodes.filter((n) => n !== leader) as [ServerProcess, ServerProcess];
    const owner = await first.accepted();
    await lockDelayInForce(owner, WAIT_MS);
    t.is(await ask.request(owner, 'k', '1', 'alice', { ttl: 1 }), 1);
    const waiter: RawClient = await second.accepted();
    waiter.send(frames(acquireWait('k', '1', 'bob'), req.findOwner('k', '1')));
    await waiting(second, 'grant', 1);
    // alice's TTL runs out: the leader's expiry holds the lock back; every node shows it.
    const held = await pollUntil(
      'alice to expire',
      async () => {
        const [queue] = await call(owner, { command: Command.ListDetailed, key: 'k' });
        return queue !== undefined && queue.entries[0]?.owner === 'bob' ? queue : undefined;
      },
      WAIT_MS,
    );
    t.true(held.heldForMs > 0, 'held back');
    t.false(held.entries[0]!.isOwner);
    const [onSecond] = await call(await second.accepted(), { command: Command.ListDetailed, key: 'k' });
    t.true(onSecond!.heldForMs > 0, 'the waiter’s node holds it back too');
    leader.signal('SIGKILL');
    await leader.waitForExit();
    const granted = await readReply(waiter, Command.AcquireWait);
    t.is(granted.position, 1);
    t.is(await readReply(waiter, Command.FindOwner), 'bob');
  },
);

etcdTest.serial(
  'half-closing right after sending (nc -N): a 0x0B granted at once is answered, one that would wait leaves no entry, a 0x0C from a non-owner gets 00',
  async (t) => {
    t.timeout(120_000);
    const { nodes } = await startCluster(t, { nodes: 2 });
    const [n1, n2] = nodes as [ServerProcess, ServerProcess];
    const granted = await n1.connect();
    granted.sendAndEnd(frames(acquireWait('free', '1', 'alice')));
    const reply = await granted.readUntilClose();
    t.is(reply.subarray(0, 3).toString('hex'), '010001', 'greeting, then position 1');
    t.is(reply.length, 1 + 10, 'and the token');

    const owner = await n2.accepted();
    t.is(await ask.request(owner, 'k', '1', 'carol'), 1);
    const waiter = await n1.connect();
    waiter.sendAndEnd(frames(acquireWait('k', '1', 'bob')));
    t.is((await waiter.readUntilClose()).toString('hex'), '01', 'the greeting, no reply: the wait ended');
    await pollUntil('bob to be gone', async () => ((await ask.location(owner, 'k', '1', 'bob')) === 0 ? true : undefined), WAIT_MS);
    t.is(await ask.release(owner, 'k', '1', 'carol'), 1);
    t.is(await ask.findOwner(owner, 'k', '1'), '', 'nobody was granted it');

    const notice = await n1.connect();
    notice.sendAndEnd(frames(awaitLoss('k', '1', 'nobody')));
    t.is((await notice.readUntilClose()).toString('hex'), '0100');
  },
);
