import test from 'ava';
import type { Request } from '../../src/protocol/messages.js';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import type { RawClient } from '../helpers/rawClient.js';
import { ask, bytes, frames, hex, pipeline, readReplyBytes, req } from '../helpers/wire.js';

// One lock table seen at once from every node of a 3-node cluster over a real 3-member etcd.

const etcdTest = needsEtcd(test);

/** One request; the raw bytes of its reply (replies are compared byte for byte across nodes). */
async function raw(client: RawClient, request: Request): Promise<string> {
  client.send(frames(request));
  return hex(await readReplyBytes(client, request.command));
}

/** The same request on every client: the replies, which must be byte-identical. */
async function everywhere(clients: RawClient[], request: Request): Promise<string[]> {
  const replies: string[] = [];
  for (const client of clients) replies.push(await raw(client, request));
  return replies;
}

etcdTest.serial('a request on one node is seen byte for byte from the others; a release on a third promotes the waiter of a second', async (t) => {
  t.timeout(90_000);
  const { nodes } = await startCluster(t);
  const [a, b, c] = await Promise.all(nodes.map((n) => n.accepted()));
  const all = [a!, b!, c!];

  // alice owns k/1 through A (position 1: 00 01); bob waits through B (position 2).
  a!.send(bytes(0x02, 1, 'k', 1, '1', 5, 'alice', 0, 0, 0, 0, 0));
  t.is(hex(await a!.read(2)), '0001');
  t.is(await raw(b!, req.request('k', '1', 'bob', { ttl: 0, ttw: 0, priority: 3 })), '0002');

  const owner = hex(bytes(5, 'alice'));
  t.deepEqual(await everywhere(all, req.findOwner('k', '1')), [owner, owner, owner]);
  t.deepEqual(await everywhere(all, req.location('k', '1', 'bob')), ['0002', '0002', '0002']);
  t.deepEqual(await everywhere(all, req.location('k', '1', 'nobody')), ['0000', '0000', '0000']);
  const lists = await everywhere(all, req.list('k'));
  t.is(lists[1], lists[0]);
  t.is(lists[2], lists[0]);
  t.deepEqual(
    (await ask.list(c!, 'k')).map((e) => [e.owner, e.priority, e.isOwner]),
    [
      ['alice', 0, true],
      ['bob', 3, false],
    ],
  );

  // The stats' owners and contenders are the cluster's; the request counters are this node's.
  t.like(await ask.stats(c!), { owners: 1, contenders: 1, lockRequests: 0 });
  t.like(await ask.stats(a!), { owners: 1, contenders: 1, lockRequests: 1 });

  // C releases alice's lock (owners are names, not connections): bob, who asked B, is promoted.
  t.is(await raw(c!, req.release('k', '1', 'alice')), '0001');
  const bob = hex(bytes(3, 'bob'));
  t.deepEqual(await everywhere(all, req.findOwner('k', '1')), [bob, bob, bob]);
  t.deepEqual(await everywhere(all, req.location('k', '1', 'bob')), ['0001', '0001', '0001']);
  t.deepEqual(await everywhere(all, req.location('k', '1', 'alice')), ['0000', '0000', '0000']);

  // Release-all through A empties the key everywhere.
  t.is(await ask.releaseAll(a!, 'bob'), 1);
  const empty = await everywhere(all, req.list('k'));
  t.deepEqual(empty, [empty[0], empty[0], empty[0]]);
  t.deepEqual(await ask.list(b!, 'k'), []);
});

etcdTest.serial('pipelined requests on one connection are answered in order, while another node pipelines on the same key', async (t) => {
  t.timeout(90_000);
  const { nodes } = await startCluster(t);
  const [a, b] = await Promise.all([nodes[0]!.accepted(), nodes[1]!.accepted()]);

  // Every reply below depends on the commands before it on the same connection.
  const onA: Request[] = [
    req.request('p', '1', 'a1'),
    req.location('p', '1', 'a1'),
    req.request('p', '1', 'a2'),
    req.location('p', '1', 'a2'),
    req.findOwner('p', '1'),
    req.release('p', '1', 'a1'),
    req.location('p', '1', 'a1'),
    req.renew('p', '1', 'a2'),
    req.release('p', '1', 'a2'),
    req.findOwner('p', '1'),
  ];
  // B works under other indexes of the same key at the same moment.
  const onB: Request[] = [];
  for (let i = 0; i < 20; i++) onB.push(req.request('p', `b${i}`, 'b'), req.location('p', `b${i}`, 'b'));
  onB.push(req.releaseAll('b'), req.location('p', 'b0', 'b'));

  const [repliesA, repliesB] = await Promise.all([pipeline(a, ...onA), pipeline(b, ...onB)]);
  t.deepEqual(repliesA, [1, 1, 2, 2, 'a1', 1, 0, true, 1, '']);
  const expectedB: unknown[] = [];
  for (let i = 0; i < 20; i++) expectedB.push(1, 1);
  expectedB.push(20, 0);
  t.deepEqual(repliesB, expectedB);
  t.is(a.buffered, 0, 'no reply beyond those asked for');

  // A long pipeline of requests for one lock from two nodes: positions 1..n, queue order = ticket order.
  const many = 40;
  const asks = Array.from({ length: many }, (_, i) => req.request('q', '1', `o${String(i).padStart(2, '0')}`));
  const [first, second] = await Promise.all([pipeline(a, ...asks.slice(0, many / 2)), pipeline(b, ...asks.slice(many / 2))]);
  const positions = [...(first as number[]), ...(second as number[])];
  t.deepEqual(
    [...positions].sort((x, y) => x - y),
    Array.from({ length: many }, (_, i) => i + 1),
    'every position handed out once',
  );
  const isIncreasing = (xs: number[]): boolean => xs.every((x, i) => i === 0 || x > xs[i - 1]!);
  t.true(isIncreasing(first as number[]) && isIncreasing(second as number[]), 'each connection sees its own requests in order');
  const queue = (await ask.list(a, 'q')).map((e) => e.owner);
  const byPosition = asks.map((r, i) => [positions[i]!, (r as { owner: string }).owner] as const).sort((x, y) => x[0] - y[0]);
  t.deepEqual(
    queue,
    byPosition.map(([, owner]) => owner),
    'the queue is in the order the positions said',
  );
});

etcdTest.serial(
  'a cluster is bounded per connection by the node serving it, and per owner on every node alike; each refusal is position 0 and a log line',
  async (t) => {
    t.timeout(120_000);
    const { nodes } = await startCluster(t, { nodes: 2, args: ['--max-locks-per-connection', '2', '--max-locks-per-owner', '3'] });
    const [a, b] = await Promise.all(nodes.map((n) => n.accepted()));
    // One connection's third new entry is refused by its node; its renewals are not.
    t.is(await ask.request(a!, 'k1', '1', 'alice'), 1);
    t.is(await ask.request(a!, 'k2', '1', 'alice'), 1);
    t.is(await ask.request(a!, 'k3', '1', 'alice'), 0);
    t.is(await ask.request(a!, 'k1', '1', 'alice'), 1);
    t.like((await nodes[0]!.event('request-refused')).fields, { limit: 'max-locks-per-connection', key: 'k3' });
    t.is(await ask.request(b!, 'k3', '1', 'alice'), 1);
    // The owner's bound goes into the batches once both nodes declared they read it (a second or two
    // after the start): until then a fourth entry may still be granted, and is given back.
    const deadline = Date.now() + 60_000;
    let fourth: number;
    for (;;) {
      const fresh = await nodes[1]!.accepted();
      fourth = await ask.request(fresh, 'k4', '1', 'alice');
      if (fourth === 0 || Date.now() > deadline) break;
      t.is(await ask.release(fresh, 'k4', '1', 'alice'), 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    t.is(fourth, 0, 'the owner bound was never carried');
    t.like((await nodes[1]!.event('request-refused', (e) => e.fields.limit === 'max-locks-per-owner')).fields, { key: 'k4' });
    // Both nodes applied the refusal alike: the same three entries everywhere.
    for (const client of [a!, b!]) t.deepEqual((await ask.list(client, 'k4')).length, 0);
    t.is(await ask.request(a!, 'k4', '1', 'bob'), 0, "the connection is still at its cap, whoever's the entry");
  },
);
