import test from 'ava';
import type { ClusterLockService } from '../../src/cluster/ClusterLockService.js';
import { commandPosition } from '../../src/cluster/LogCodec.js';
import type { LockRequest, SavedLock } from '../../src/locks/LockService.js';
import type { FencedPosition } from '../../src/protocol/messages.js';
import { memoryCluster, settle } from './memoryCluster.js';

// Fencing tokens through the cluster's service: a request with fence is answered from the apply
// of its own command, whatever the rest of its batch does; any node tells the same token; an
// import keeps its owners' tokens and every later grant goes above the file's.

const lock = (owner: string, fields: Partial<LockRequest> = {}): LockRequest => ({ key: 'k', index: 'i', owner, ttl: 0, ttw: 0, priority: 0, ...fields });

test('a request with fence answers the token its own command granted, though later commands of its batch release the lock', async (t) => {
  const { vt, store, nodes } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  // One round, so one batch: alice is granted, releases, bob is granted, carol waits.
  const [alice, released, bob, carol] = await settle<[FencedPosition, number, FencedPosition, FencedPosition]>(
    vt,
    a.requestFenced(lock('alice'), true),
    a.release('k', 'i', 'alice'),
    a.requestFenced(lock('bob'), true),
    a.requestFenced(lock('carol', { ttw: 30 }), true),
  );
  const version = store.logHead.version;
  t.deepEqual(alice, { position: 1, token: commandPosition(version, 0) });
  t.is(released, 1);
  t.deepEqual(bob, { position: 1, token: commandPosition(version, 2) });
  t.deepEqual(carol, { position: 2, token: 0 }, 'a waiter gets no token');
  // Any node tells the owner's token; a non-owner gets 0; a renewal answers the same token.
  t.deepEqual(await settle(vt, b.fence('k', 'i', 'bob'), a.fence('k', 'i', 'bob'), b.fence('k', 'i', 'alice'), b.fence('k', 'i', 'carol')), [
    bob.token,
    bob.token,
    0,
    0,
  ]);
  t.deepEqual(await settle(vt, b.requestFenced(lock('bob', { ttl: 30 }), true)), [bob]);
  const [highest] = await settle(vt, b.highestToken());
  t.true(highest > bob.token);
  // The next grant, by promotion, is above every earlier one.
  await settle(vt, b.release('k', 'i', 'bob'));
  const [carolNow] = await settle(vt, a.fence('k', 'i', 'carol'));
  t.is(carolNow, commandPosition(store.logHead.version, 0));
  t.true(carolNow >= highest, 'highestToken was at or above every token granted so far, and this grant came later');
});

test("a node's batch read from a bundle, after an empty batch and one of one command, is answered alike: its reads in place and its tokens numbered on", async (t) => {
  const { vt, store, nodes } = await memoryCluster(t, ['a', 'b'], { bundled: true });
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  const [alice, aliceOwns, released, bob, owner] = await settle<[FencedPosition, number, number, FencedPosition, string]>(
    vt,
    a.requestFenced(lock('alice'), true),
    a.location('k', 'i', 'alice'),
    a.release('k', 'i', 'alice'),
    a.requestFenced(lock('bob'), true),
    a.findOwner('k', 'i'),
  );
  const version = store.logHead.version;
  // Each node's batch comes after an empty batch and a batch of one command.
  t.deepEqual(alice, { position: 1, token: commandPosition(version, 1) });
  t.deepEqual([aliceOwns, released, owner], [1, 1, 'bob'], 'each read sees exactly the writes sent before it');
  t.deepEqual(bob, { position: 1, token: commandPosition(version, 3) });
  t.deepEqual(await settle(vt, b.fence('k', 'i', 'bob')), [bob.token], 'the other node numbers it alike');
});

test('an import keeps its owners’ tokens and every later grant is above the file’s high-water', async (t) => {
  const { vt, nodes } = await memoryCluster(t, ['a', 'b']);
  const [a, b] = nodes as [ClusterLockService, ClusterLockService];
  const saved = (owner: string, index: string, isOwner: boolean, token: number): SavedLock => ({
    key: 'k',
    index,
    owner,
    priority: 0,
    ttl: 0,
    ttw: 0,
    isOwner,
    token,
    remainingMs: null,
  });
  const highWater = 5_000_000_000_000;
  const [imported] = await settle(
    vt,
    a.importLocks([saved('alice', 'i', true, 4_000_000_000_000), saved('bob', 'i', false, 0), saved('dave', 'j', true, 3)], highWater),
  );
  t.is(imported, 3);
  t.deepEqual(await settle(vt, b.fence('k', 'i', 'alice'), b.fence('k', 'j', 'dave')), [4_000_000_000_000, 3]);
  const [fresh] = await settle(vt, b.requestFenced(lock('erin', { index: 'new' }), true));
  t.true(fresh.token > highWater, `${fresh.token} above ${highWater}`);
  await settle(vt, a.release('k', 'i', 'alice'));
  const [bob] = await settle(vt, b.fence('k', 'i', 'bob'));
  t.true(bob > fresh.token);
  const [highest] = await settle(vt, a.highestToken());
  t.true(highest >= bob);
});
