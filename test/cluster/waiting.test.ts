import test from 'ava';
import type { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import type { LockRequest } from '../../src/locks/LockService.js';
import { LossReason, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import type { FencedPosition } from '../../src/protocol/messages.js';
import { decodeValue, isRefused, LogOp } from '../../src/cluster/LogCodec.js';
import { memoryCluster, memoryNode, settle, type MemoryCluster } from './memoryCluster.js';

// Waiting without polling on cluster nodes (issue 37): a waiter is answered by the node it waits
// on at the apply that grants its entry, whichever node's command did it, and costs the store
// nothing while it waits; the loss notice likewise; a lock-delay is begun by the leader's expiry
// and lifted by whichever node leads when it runs out.

const lock = (owner: string, fields: Partial<LockRequest> = {}): LockRequest => ({ key: 'k', index: 'i', owner, ttl: 0, ttw: 0, priority: 0, ...fields });

/** The answer of a Later or Waiting once it settles (undefined until then), watched without settling time. */
function watch<T>(answer: PromiseLike<T>): { value: T | undefined; error: unknown } {
  const seen: { value: T | undefined; error: unknown } = { value: undefined, error: undefined };
  answer.then(
    (value) => (seen.value = value),
    (error: unknown) => (seen.error = error),
  );
  return seen;
}

test('a waiter on one node is answered at the apply of a release sent to another, with the token every node tells', async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  const [alice] = await settle<[FencedPosition]>(vt, a.requestFenced(lock('alice'), true));
  t.is(alice.position, 1);
  const bob = watch(b.acquire(lock('bob'), true, NO_WAIT_BOUND));
  await vt.until(2_000, () => b.replica.table.location('k', 'i', 'bob') === 2);
  t.is(bob.value, undefined, 'bob waits');
  await settle(vt, a.release('k', 'i', 'alice'));
  t.true(await vt.until(1_000, () => bob.value !== undefined));
  t.is(bob.value!.position, 1);
  t.true(bob.value!.token > alice.token);
  t.deepEqual(await settle(vt, a.fence('k', 'i', 'bob'), b.fence('k', 'i', 'bob')), [bob.value!.token, bob.value!.token]);
});

test('waiting costs the store nothing: a node with 100 waiters sends it the calls of one with none, over a minute', async (t) => {
  /** The calls each node sent during a quiet minute after 100 requests for a taken lock, waiting or not. */
  const quietMinute = async (wait: boolean): Promise<number[]> => {
    const { vt, nodes, clients } = await memoryCluster(t, ['a', 'b', 'c']);
    const [a, b] = nodes as [ClusterLockService, ClusterLockService];
    await settle(vt, a.request(lock('alice'), true));
    const answers = Array.from({ length: 100 }, (_, n) =>
      wait ? watch(b.acquire(lock(`w${n}`), true, NO_WAIT_BOUND)) : watch(b.requestFenced(lock(`w${n}`), true)),
    );
    await vt.until(5_000, () => b.replica.table.size === 101);
    t.is(b.replica.table.size, 101);
    t.is(answers.filter((answer) => answer.value !== undefined).length, wait ? 0 : 100);
    const before = clients.map((c) => c.callsSent);
    await vt.advance(60_000);
    t.true(answers.every((answer) => answer.error === undefined));
    return clients.map((c, n) => c.callsSent - before[n]!);
  };
  const waiting = await quietMinute(true);
  const idle = await quietMinute(false);
  // The leader reads which nodes are live once a second while waits of another node are tied
  // (OrphanedWaits), one read whatever their number; every other node's calls are the same.
  const withoutLeader = (calls: number[], leader: number): number[] => calls.filter((_, n) => n !== leader);
  const leader = waiting.findIndex((calls, n) => calls !== idle[n]);
  if (leader >= 0) t.true(waiting[leader]! - idle[leader]! <= 61, `the leader's liveness reads: ${waiting[leader]! - idle[leader]!} in a minute`);
  t.deepEqual(withoutLeader(waiting, leader), withoutLeader(idle, leader));
  t.true(
    idle.some((calls) => calls > 0),
    'an idle cluster still makes calls (names kept, expiries looked for): the comparison is not empty',
  );
});

test("the loss notice on one node is answered at the apply that ends the owner's grant: released, released by release-all, expired by the leader", async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  for (const [index, end, reason] of [
    ['released', () => a.release('k', 'released', 'alice'), LossReason.Released],
    ['all', () => a.releaseAll('alice'), LossReason.ReleasedAll],
    ['expired', undefined, LossReason.Expired],
  ] as const) {
    await settle(vt, a.request(lock('alice', { index, ttl: index === 'expired' ? 1 : 0 }), true));
    const loss = watch(b.awaitLoss('k', index, 'alice'));
    await vt.advance(100);
    t.is(loss.value, undefined, `${index}: alice still owns`);
    if (end !== undefined) await settle(vt, end());
    t.true(await vt.until(5_000, () => loss.value !== undefined), `${index}: told`);
    t.is(loss.value, reason, index);
  }
  t.deepEqual(await settle(vt, b.awaitLoss('k', 'nothing', 'alice')), [LossReason.NotOwner]);
});

test('a wait whose bound passes is answered its position by a read, the entry still queued; a cancelled wait takes its entry out of the log on every node', async (t) => {
  const { vt, nodes, store } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  await settle(vt, a.request(lock('alice'), true));
  t.deepEqual(await settle(vt, b.acquire(lock('bob'), true, 500)), [{ position: 2, token: 0 }]);
  const carol = b.acquire(lock('carol'), true, NO_WAIT_BOUND);
  await vt.until(2_000, () => a.replica.table.location('k', 'i', 'carol') === 3);
  carol.cancel();
  t.true(await vt.until(2_000, () => a.replica.table.location('k', 'i', 'carol') === 0 && b.replica.table.location('k', 'i', 'carol') === 0));
  t.is(a.replica.table.location('k', 'i', 'bob'), 2, 'bob, whose bound passed, still waits');
  // Cancelled before its command applied, with a bound of 0: the entry it made goes all the same.
  const dave = b.acquire(lock('dave'), true, 0);
  dave.cancel();
  t.true(await vt.until(2_000, () => store.logHead.version > 0 && a.replica.table.location('k', 'i', 'dave') === 0 && b.waiting.grantWaits === 0));
  await vt.advance(1_000);
  t.is(a.replica.table.location('k', 'i', 'dave'), 0, 'dave is not queued');
  t.is(a.replica.digest(), b.replica.digest());
});

test('a waiter whose node goes away asks again on another: its entry kept its place, and it is answered there at the grant', async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['a', 'b', 'c']);
  const [a, b, c] = nodes as [ClusterLockService, ClusterLockService, ClusterLockService];
  await settle(vt, a.request(lock('alice'), true));
  const first = watch(b.acquire(lock('bob'), true, NO_WAIT_BOUND));
  await vt.until(2_000, () => a.replica.table.location('k', 'i', 'bob') === 2);
  await settle(vt, a.request(lock('carol'), true));
  await settle(vt, b.close());
  t.not(first.error, undefined, 'the wait failed with its node: the client sees its connection close');
  const again = watch(c.acquire(lock('bob'), true, NO_WAIT_BOUND));
  await vt.advance(500);
  t.is(again.value, undefined);
  t.is(c.replica.table.location('k', 'i', 'bob'), 2, 'still ahead of carol');
  await settle(vt, a.release('k', 'i', 'alice'));
  t.true(await vt.until(2_000, () => again.value !== undefined));
  t.is(again.value!.position, 1);
});

test('a lock-delay begun by the leader holds the lock back on every node, and is lifted by the next leader when the first is gone', async (t) => {
  const { vt, nodes, clients } = await memoryCluster(t, ['a', 'b', 'c'], { options: { lockDelayMs: 5_000 } });
  t.true(await vt.until(10_000, () => nodes.some((n) => n.isLeader)));
  const leader = nodes.find((n) => n.isLeader)!;
  const [follower, other] = nodes.filter((n) => n !== leader) as [ClusterLockService, ClusterLockService];
  await settle(vt, follower.request(lock('alice', { ttl: 1 }), true));
  const bob = watch(other.acquire(lock('bob'), true, NO_WAIT_BOUND));
  // Every node applies the expiry, each at its own moment: read the hold once `other` has too.
  t.true(await vt.until(10_000, () => follower.replica.table.location('k', 'i', 'alice') === 0), 'alice expired');
  const expiredAt = vt.now();
  t.true(await vt.until(10_000, () => other.replica.table.location('k', 'i', 'alice') === 0), 'alice expired on every node');
  const [held] = other.replica.table.queues('k', 10);
  t.true(held!.heldForMs > 0, 'held back');
  t.is(held!.entries[0]!.owner, 'bob');
  t.false(held!.entries[0]!.isOwner);
  t.is(bob.value, undefined);
  // The leader that began the hold crashes; another takes over and lifts it when it runs out.
  clients[nodes.indexOf(leader)]!.crash();
  t.true(await vt.until(30_000, () => bob.value !== undefined), 'bob granted');
  t.is(bob.value!.position, 1);
  t.true(vt.now() - expiredAt >= held!.heldForMs, `granted ${vt.now() - expiredAt} ms after the expiry, held ${held!.heldForMs} ms`);
  t.true(nodes.some((n) => n !== leader && n.isLeader));
});

test('a client that stops sending before its 0x0B applies (half-closed) still hears a grant made at once; one that would wait is not queued, on every node', async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  const gone = new Error('the client half-closed');
  const free = b.acquire(lock('alice', { index: 'free' }), true, NO_WAIT_BOUND);
  free.abandon(false, gone);
  const [granted] = await settle<[FencedPosition]>(vt, free);
  t.is(granted.position, 1, 'granted at once: told, not dropped');
  t.true(granted.token > 0);

  await settle(vt, a.request(lock('carol'), true));
  const taken = watch(b.acquire(lock('dave'), true, NO_WAIT_BOUND));
  const daveWait = b.acquire(lock('erin'), true, NO_WAIT_BOUND);
  daveWait.abandon(false, gone);
  const erin = watch(daveWait);
  t.true(await vt.until(5_000, () => erin.error !== undefined), 'the wait that began is ended');
  t.is(erin.error, gone);
  t.true(await vt.until(5_000, () => a.replica.table.location('k', 'i', 'erin') === 0 && b.replica.table.location('k', 'i', 'erin') === 0));
  t.is(a.replica.table.location('k', 'i', 'dave'), 2, 'dave, who did not close, still waits');
  await settle(vt, a.release('k', 'i', 'carol'));
  t.true(await vt.until(2_000, () => taken.value !== undefined));
  t.is(taken.value!.position, 1, 'the lock goes to dave, never to erin, who left');
});

/** Two clients of `via` wait through 0x0B with TTW 0 behind alice's lock, one with TTL 30 and one with TTL 0 (what holdLock sends). */
async function phantomsBehindAlice(cluster: MemoryCluster, owner: ClusterLockService, via: ClusterLockService): Promise<void> {
  const { vt } = cluster;
  await settle(vt, owner.request(lock('alice'), true));
  via.acquire(lock('w30', { ttl: 30 }), true, NO_WAIT_BOUND);
  via.acquire(lock('w0'), true, NO_WAIT_BOUND);
  await vt.until(5_000, () => owner.replica.table.location('k', 'i', 'w0') === 3);
}

/** Once the owner released, a client asking after it is granted at once, and nobody else is queued: no phantom was granted. */
async function nextClientGranted(t: import('ava').ExecutionContext, cluster: MemoryCluster, owner: ClusterLockService): Promise<void> {
  const { vt } = cluster;
  await settle(vt, owner.release('k', 'i', 'alice'));
  const [next] = await settle<[FencedPosition]>(vt, owner.acquire(lock('next'), true, NO_WAIT_BOUND));
  t.is(next.position, 1, 'the next client is granted: neither waiter of the dead node was');
  t.deepEqual(
    owner.replica.table.list('k').map((c) => c.owner),
    ['next'],
  );
}

test('a node killed with two clients waiting (TTW 0, TTL 30 and 0): its restart ends its earlier incarnation’s waits, and the next client is granted', async (t) => {
  // a is no candidate and b the only one: with b dead nobody leads, so only b's restart can end them.
  const cluster = await memoryCluster(t, ['a'], { options: { candidatePriority: undefined } });
  const { vt, store } = cluster;
  const [a] = cluster.nodes as [ClusterLockService];
  const made = memoryNode(store, vt, 'b');
  const b = made.node;
  void b.start();
  t.true(await vt.until(10_000, () => b.isReady && b.isLeader));
  const cancels: string[] = [];
  store.onAppend = (record) => {
    for (const part of decodeValue(record.value)) {
      if (isRefused(part)) continue;
      for (const c of part.commands) if (c.op === LogOp.CancelWaitsOf) cancels.push(`${c.node}/${c.incarnation} by ${part.proposer}/${part.incarnation}`);
    }
  };
  await phantomsBehindAlice(cluster, a, b);
  made.client.crash(); // kill -9: b's connections are gone with it, nothing of b cancels
  await vt.advance(10_000);
  t.is(a.replica.table.location('k', 'i', 'w0'), 3, 'the dead node’s waits stay while nobody can end them');
  const restarted = memoryNode(store, vt, 'b', {}, 0xb2).node;
  t.teardown(async () => {
    let closed = false;
    void Promise.allSettled([restarted.close(), b.close()]).then(() => (closed = true));
    await vt.until(10_000, () => closed);
  });
  void restarted.start();
  t.true(await vt.until(15_000, () => restarted.isReady));
  t.true(await vt.until(5_000, () => a.replica.table.location('k', 'i', 'w30') === 0 && a.replica.table.location('k', 'i', 'w0') === 0), 'the waits ended');
  t.deepEqual(cancels, [`b/${b.incarnation} by b/${restarted.incarnation}`], 'proposed by the restarted node');
  t.true(a.replica.waitsEnded('b', b.incarnation));
  await nextClientGranted(t, cluster, a);
});

test('a node killed with two clients waiting and left dead: the leader ends its waits once its name is gone, and the next client is granted', async (t) => {
  const cluster = await memoryCluster(t, ['a', 'b', 'c']);
  const { vt, nodes, clients } = cluster;
  t.true(await vt.until(10_000, () => nodes.some((n) => n.isLeader)));
  const dying = nodes.find((n) => !n.isLeader)!;
  const owner = nodes.find((n) => n !== dying)!;
  await phantomsBehindAlice(cluster, owner, dying);
  clients[nodes.indexOf(dying)]!.crash();
  // Its name lease (2 s) runs out, then the leader's next look (within a second) ends its waits.
  t.true(
    await vt.until(10_000, () => owner.replica.table.location('k', 'i', 'w30') === 0 && owner.replica.table.location('k', 'i', 'w0') === 0),
    'the waits ended',
  );
  await nextClientGranted(t, cluster, owner);
});

test('a wait cancelled while its node cannot commit is cancelled once it can: the client that left is never granted', async (t) => {
  const cluster = await memoryCluster(t, ['a', 'b']);
  const { vt, nodes, clients } = cluster;
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  await settle(vt, a.request(lock('alice'), true));
  const bob = b.acquire(lock('bob'), true, NO_WAIT_BOUND);
  await vt.until(2_000, () => b.replica.table.location('k', 'i', 'bob') === 2);
  clients[1]!.setPartitioned(true);
  bob.cancel(); // its connection closed: the cancel's round cannot commit (commit timeout 2 s)
  await vt.advance(5_000);
  clients[1]!.setPartitioned(false);
  t.true(await vt.until(10_000, () => a.replica.table.location('k', 'i', 'bob') === 0), 'the cancel was sent again');
  await settle(vt, a.release('k', 'i', 'alice'));
  t.is(a.replica.table.findOwner('k', 'i'), '', 'nobody was granted it');
});

test('a node cut off past its name lease is taken for gone: its waits end (answered 0, never granted); it goes on as a new incarnation, whose waits end with it', async (t) => {
  const cluster = await memoryCluster(t, ['a', 'b', 'c']);
  const { vt, nodes, clients } = cluster;
  t.true(await vt.until(10_000, () => nodes.some((n) => n.isLeader)));
  const cut = nodes.find((n) => !n.isLeader)!;
  const cutName = ['a', 'b', 'c'][nodes.indexOf(cut)]!;
  const owner = nodes.find((n) => n !== cut)!;
  const first = cut.incarnation;
  await settle(vt, owner.request(lock('alice'), true));
  const bob = watch(cut.acquire(lock('bob'), true, NO_WAIT_BOUND));
  await vt.until(5_000, () => owner.replica.table.location('k', 'i', 'bob') === 2);
  clients[nodes.indexOf(cut)]!.setPartitioned(true);
  t.true(await vt.until(10_000, () => owner.replica.waitsEnded(cutName, first)), 'the leader ended its waits');
  t.is(owner.replica.table.location('k', 'i', 'bob'), 0);
  clients[nodes.indexOf(cut)]!.setPartitioned(false);
  t.true(await vt.until(10_000, () => bob.value !== undefined), 'bob is answered once his node hears of it');
  t.deepEqual(bob.value, { position: 0, token: 0 });
  // Its incarnation's waits ended while it lived: it proposes as a new one, and a new wait through it is tied to that.
  t.true(await vt.until(10_000, () => cut.incarnation !== first), 'a new incarnation');
  const carol = watch(cut.acquire(lock('carol'), true, NO_WAIT_BOUND));
  t.true(await vt.until(10_000, () => owner.replica.table.location('k', 'i', 'carol') === 2));
  t.deepEqual(
    owner.replica.tiedWaitsHeld().map((w) => [w.owner, w.node, w.incarnation]),
    [['carol', cutName, cut.incarnation]],
  );
  // The process dies before alice lets go: carol's wait ends with it, and nobody is granted the lock.
  clients[nodes.indexOf(cut)]!.crash();
  t.true(await vt.until(20_000, () => owner.replica.table.location('k', 'i', 'carol') === 0), "the new incarnation's waits ended");
  await settle(vt, owner.release('k', 'i', 'alice'));
  t.is(owner.replica.table.findOwner('k', 'i'), '');
  t.not(carol.value?.position, 1, 'carol was never told she owns');
});

test('a 0x0B that applies after its incarnation’s waits ended does nothing, and its answer says so: an owner asking again is told 0, never 1', async (t) => {
  const cluster = await memoryCluster(t, ['a', 'b', 'c']);
  const { vt, nodes, clients } = cluster;
  t.true(await vt.until(10_000, () => nodes.some((n) => n.isLeader)));
  const cut = nodes.find((n) => !n.isLeader)!;
  const cutName = ['a', 'b', 'c'][nodes.indexOf(cut)]!;
  const other = nodes.find((n) => n !== cut)!;
  await settle(vt, cut.request(lock('alice', { ttl: 30 }), true));
  watch(cut.acquire(lock('bob'), true, NO_WAIT_BOUND));
  await vt.until(5_000, () => other.replica.table.location('k', 'i', 'bob') === 2);
  const first = cut.incarnation;
  clients[nodes.indexOf(cut)]!.setPartitioned(true);
  t.true(await vt.until(10_000, () => other.replica.waitsEnded(cutName, first)), 'the leader ended its waits');
  // alice asks again through it while it cannot know: its batch is of the incarnation whose waits ended.
  const again = watch(cut.acquire(lock('alice', { ttl: 30 }), true, NO_WAIT_BOUND));
  clients[nodes.indexOf(cut)]!.setPartitioned(false);
  t.true(await vt.until(10_000, () => again.value !== undefined || again.error !== undefined));
  t.is(again.error, undefined);
  t.is(again.value!.position, 0, 'the command renewed nothing: alice may not count on a new TTL');
});
