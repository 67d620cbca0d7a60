import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { LogOp } from '../../src/cluster/LogCodec.js';
import { EtcdHistory } from '../../src/cluster/replay/EtcdHistory.js';
import { replayHistory, type ReplayedCommand } from '../../src/cluster/replay/replayHistory.js';
import { Command, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import type { QueueView, Request } from '../../src/protocol/messages.js';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { lockDelayInForce } from '../helpers/lockDelay.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask, call, frames, readReply, req } from '../helpers/wire.js';

// The log replay (scripts/replay, src/cluster/replay/) on a real cluster (3 etcd members, 3
// nodes, loopback): what it prints of a key's history agrees with what the clients were told, and
// a lock-delay's end is a command in the log that every node applies.

const etcdTest = needsEtcd(test);
const WAIT_MS = 60_000;
const REPLAY = join(PACKAGE_ROOT, 'scripts', 'replay');

function fencedRequest(key: string, index: string, owner: string): Request & { command: typeof Command.RequestFenced } {
  return { command: Command.RequestFenced, key, index, owner, ttl: 0, ttw: 0, priority: 0 };
}

/** Each node's detailed list of `key`, without the time left (each node's own clock). */
async function tables(nodes: readonly ServerProcess[], key: string): Promise<unknown[]> {
  return Promise.all(
    nodes.map(async (node) => {
      const queues: QueueView[] = await call(await node.accepted(), { command: Command.ListDetailed, key });
      return queues.map((q) => ({ index: q.index, held: q.heldForMs > 0, entries: q.entries.map(({ remainingMs: _, ...e }) => e) }));
    }),
  );
}

etcdTest.serial('scripts/replay prints a key’s history as the clients saw it: proposer, results, tokens, the queue after each command', async (t) => {
  t.timeout(180_000);
  const { etcd, cluster, nodes } = await startCluster(t);
  const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
  const alice = await n1.accepted();
  const bob = await n2.accepted();
  const granted = await call(alice, fencedRequest('k', '1', 'alice'));
  t.is(granted.position, 1);
  t.is(await ask.request(bob, 'k', '1', 'bob'), 2);
  t.is(await ask.request(bob, 'k', '2', 'bob'), 1);
  t.is(await ask.request(alice, 'other', '1', 'alice'), 1);
  t.is(await ask.release(alice, 'k', '1', 'alice'), 1);
  const bobsToken = await call(bob, { command: Command.Fence, key: 'k', index: '1', owner: 'bob' });
  t.is(await ask.releaseAll(await n3.accepted(), 'bob'), 2);

  const { stdout } = await promisify(execFile)(REPLAY, ['--etcd', etcd.endpoints, '--cluster', cluster.name, 'k', '1'], { timeout: WAIT_MS });
  t.log(stdout);
  const lines = stdout.trimEnd().split('\n');
  const commands = lines.filter((line) => /^v\d+:\d+ /.test(line));
  t.is(commands.length, 4, 'request alice, request bob, release alice, release-all bob; nothing of k/2 or other keys');
  t.regex(commands[0]!, /^v\d+:0 rev \d+ n1#[0-9a-f]{8} seq \d+ {2}request k\/1 owner alice ttl 0 ttw 0 priority 0 -> 1 {2}after: 1: alice\* \(token (\d+)\)$/);
  t.is(Number(/token (\d+)/.exec(commands[0]!)![1]), granted.token, 'the token alice was told');
  t.regex(commands[1]!, / n2#[0-9a-f]{8} .*request k\/1 owner bob .*-> 2 {2}after: 1: alice\* \(token \d+\), bob$/);
  t.regex(commands[2]!, / n1#.*release k\/1 owner alice -> 1 {2}after: 1: bob\* \(token (\d+)\)$/);
  t.is(Number(/token (\d+)/.exec(commands[2]!)![1]), bobsToken, 'the token the promotion gave bob');
  t.regex(commands[3]!, / n3#.*release-all owner bob -> 2 {2}after: \(none\)$/);
  t.regex(lines.at(-2)!, /^replayed from an empty table to the head, version \d+/);
  t.is(lines.at(-1), 'snapshot: not checked: the cluster has written no snapshot');
});

etcdTest.serial(
  'a lock-delay with no crash: the leader lifts the hold through the log, the waiter on another node is granted there, every node holds the same table',
  async (t) => {
    t.timeout(180_000);
    const { etcd, cluster, nodes } = await startCluster(t, { args: ['--lock-delay', '2'] });
    const leader = await Promise.any(nodes.map((n) => n.event('leader', (e) => e.fields.self === 'true', 30_000).then(() => n)));
    const [first, second] = nodes.filter((n) => n !== leader) as [ServerProcess, ServerProcess];
    const owner = await leader.accepted();
    await lockDelayInForce(owner, WAIT_MS);
    t.is(await ask.request(owner, 'k', '1', 'alice', { ttl: 1 }), 1);
    const waiter = await second.accepted();
    waiter.send(
      frames({ command: Command.AcquireWait, key: 'k', index: '1', owner: 'bob', ttl: 0, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND }, req.findOwner('k', '1')),
    );
    await pollUntil('bob to wait', async () => ((await ask.location(owner, 'k', '1', 'bob')) === 2 ? true : undefined), WAIT_MS);
    const granted = await readReply(waiter, Command.AcquireWait);
    t.is(granted.position, 1, 'granted on the node it waits on, not the leader');
    t.is(await readReply(waiter, Command.FindOwner), 'bob');
    await pollUntil(
      'every node to hold bob as owner',
      async () => {
        const seen = await tables([leader, first, second], 'k');
        return seen.every((table) => JSON.stringify(table) === JSON.stringify(seen[0])) ? true : undefined;
      },
      WAIT_MS,
    );
    const [onLeader, onFirst, onSecond] = await tables([leader, first, second], 'k');
    t.deepEqual(onFirst, onLeader);
    t.deepEqual(onSecond, onLeader);
    t.like(onLeader, [{ index: '1', held: false, entries: [{ owner: 'bob', isOwner: true, token: granted.token }] }]);

    const history = new EtcdHistory({ endpoints: etcd.endpointList, cluster: cluster.name });
    const seen: ReplayedCommand[] = [];
    try {
      await replayHistory(history, { key: 'k', index: '1' }, { command: (c) => seen.push(c) });
    } finally {
      await history.close();
    }
    // Bob's 0x0B goes as an AcquireWait once every node reads the format that ties waits, as a plain request before.
    const ops = seen.map((c) => (c.command.op === LogOp.AcquireWait ? LogOp.Request : c.command.op));
    t.deepEqual(ops, [LogOp.Request, LogOp.Request, LogOp.ExpireAndHold, LogOp.LiftHold], 'alice, bob, her expiry holding the lock back, its lift');
    const [, , expiry, lift] = seen as [ReplayedCommand, ReplayedCommand, ReplayedCommand, ReplayedCommand];
    t.true(expiry.queues[0]!.heldForMs > 0, 'held back after the expiry');
    t.is(lift.result, 1);
    t.is(lift.proposer, cluster.nameOf(leader), 'the leader proposed the lift');
    t.like(lift.queues, [{ heldForMs: 0, entries: [{ owner: 'bob', isOwner: true, token: granted.token }] }], 'the lift granted bob the token he was told');
  },
);
