import test, { type ExecutionContext } from 'ava';
import type { Contender } from '../../src/protocol/messages.js';
import { needsEtcd, startCluster, untilAnswered } from '../helpers/etcdCluster.js';
import type { RawClient } from '../helpers/rawClient.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// S2: acknowledged locks and their queue order survive kill -9 of any node and of the etcd leader.
// S3: stopping every node and every etcd member and starting them all again loses nothing.

const etcdTest = needsEtcd(test);
const KEYS = ['s-a', 's-b'];

type Table = Record<string, Array<[string, string, boolean, number]>>;

/** What `list` says of every test key: [index, owner, isOwner, ttl] in queue order. */
async function table(client: RawClient): Promise<Table> {
  const result: Table = {};
  for (const key of KEYS) {
    result[key] = (await ask.list(client, key)).map((e: Contender) => [e.index, e.owner, e.isOwner, e.ttl]);
  }
  return result;
}

/**
 * Requests through every node in turn; each acknowledged position is checked against the queue
 * it implies, and the table the acknowledgements promise is returned.
 */
async function fill(t: ExecutionContext, nodes: readonly ServerProcess[], tag: string, expected: Table = { 's-a': [], 's-b': [] }): Promise<Table> {
  const clients = await Promise.all(nodes.map((n) => n.accepted()));
  for (let i = 0; i < 9; i++) {
    const key = KEYS[i % 2]!;
    const index = i % 3 === 0 ? 'x' : 'y';
    const owner = `${tag}${i}`;
    const ttl = i % 4 === 0 ? 3600 : 0;
    const position = await ask.request(clients[i % clients.length]!, key, index, owner, { ttl });
    const sameIndex = expected[key]!.filter(([ix]) => ix === index).length;
    t.is(position, sameIndex + 1, `${owner} acknowledged at the end of ${key}/${index}`);
    // list groups a key's entries by index, in the order the indexes were first requested.
    const row: [string, string, boolean, number] = [index, owner, sameIndex === 0, ttl];
    const lastOfIndex = expected[key]!.map(([ix]) => ix).lastIndexOf(index);
    if (lastOfIndex < 0) expected[key]!.push(row);
    else expected[key]!.splice(lastOfIndex + 1, 0, row);
  }
  for (const c of clients) c.destroy();
  return expected;
}

/** The leader node, as its own log says (event=leader self=true), awaited (bounded). */
async function leaderNode(nodes: readonly ServerProcess[]): Promise<ServerProcess> {
  return Promise.any(nodes.map((n) => n.event('leader', (e) => e.fields.self === 'true', 30_000).then(() => n)));
}

async function sameEverywhere(t: ExecutionContext, nodes: readonly ServerProcess[], expected: Table, when: string): Promise<void> {
  for (const node of nodes) t.deepEqual(await untilAnswered(node, table), expected, `${when}: the table seen from port ${node.port}`);
}

etcdTest.serial('S2: acknowledged locks and their queue order survive kill -9 of the leader node, of another node and of the etcd leader', async (t) => {
  t.timeout(150_000);
  const { etcd, cluster, nodes } = await startCluster(t);
  let expected = await fill(t, nodes, 'a');

  // kill -9 the node that leads the cluster (it proposes expiries and writes snapshots).
  const leader = await leaderNode(nodes);
  leader.signal('SIGKILL');
  await leader.waitForExit();
  const alive = nodes.filter((n) => n !== leader);
  await sameEverywhere(t, alive, expected, 'leader node killed');
  expected = await fill(t, alive, 'b', expected);

  // kill -9 the etcd leader; what was acknowledged before and after is there, and more can be added.
  const etcdLeader = await etcd.leader();
  await etcd.kill(etcdLeader);
  await etcd.leader();
  await sameEverywhere(t, alive, expected, 'etcd leader killed');
  expected = await untilFilled(t, alive, 'c', expected);

  // kill -9 one more node; bring every process back; the restarted ones catch up.
  const other = alive[0]!;
  other.signal('SIGKILL');
  await other.waitForExit();
  await sameEverywhere(t, [alive[1]!], expected, 'second node killed');
  await etcd.restart(etcdLeader);
  const back = await Promise.all([cluster.restart(leader), cluster.restart(other)]);
  await sameEverywhere(t, [...back, alive[1]!], expected, 'after the restarts');
});

/** fill() once the cluster accepts writes again (a commit may time out while etcd elects). */
async function untilFilled(t: ExecutionContext, nodes: readonly ServerProcess[], tag: string, expected: Table): Promise<Table> {
  // A barrier: one acknowledged write through each node before the checked ones.
  for (const node of nodes) await untilAnswered(node, (c) => ask.request(c, 'warm-up', node.port.toString(), 'w'));
  return fill(t, nodes, tag, expected);
}

etcdTest.serial('S3: every node and every etcd member stopped, then started again on the same data: nothing is lost', async (t) => {
  t.timeout(150_000);
  const { etcd, cluster, nodes } = await startCluster(t, { fsync: true });
  const expected = await fill(t, nodes, 'r');
  await sameEverywhere(t, nodes, expected, 'before');

  await Promise.all(
    nodes.map(async (n) => {
      n.signal('SIGTERM');
      t.deepEqual(await n.waitForExit(20_000), { code: 0, signal: null });
    }),
  );
  for (const member of etcd.members) await etcd.stop(member);

  await etcd.launch();
  const restarted = await Promise.all(nodes.map((n) => cluster.restart(n)));
  for (const node of restarted) t.is(node.eventsNamed('lock-file-not-loaded').length, 1);
  await sameEverywhere(t, restarted, expected, 'after the full restart');
  const client = await restarted[2]!.accepted();
  t.is(await ask.request(client, 's-a', 'x', 'late'), expected['s-a']!.filter(([ix]) => ix === 'x').length + 1);
});
