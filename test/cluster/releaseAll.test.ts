import test from 'ava';
import { NO_ID } from '../../src/locks/HashIndex.js';
import type { Later } from '../../src/locks/Later.js';
import { memoryCluster, settle } from './memoryCluster.js';

// A release-all of many entries is applied at once in meaning and removes them in slices after,
// while the log goes on: the commands after it are answered without waiting for the last removal.

const LOCKS = 20_000;
const r = (key: string, owner: string) => ({ key, index: 'i', owner, ttl: 0, ttw: 0, priority: 0 });

/** The answer, and what `probe` said in the turn it came (a promise's continuation would come later). */
function answered<T>(later: Later<T>, probe: () => boolean): Promise<{ value: T; during: boolean }> {
  return new Promise((resolve, reject) => {
    later.listen({ resolved: (_, value: T) => resolve({ value, during: probe() }), rejected: (_, error) => reject(error as Error) }, undefined);
  });
}

test('a release-all of 20,000 locks holds up no command after it: another client is answered while the release still removes entries, and every node ends alike', async (t) => {
  // Background slices 5 ms apart in virtual time: what a slice's work costs on a real node.
  const { vt, nodes } = await memoryCluster(t, ['A', 'B'], { options: { maxEntries: 100_000, releaseSliceGapMs: 5 } });
  const [a, b] = [nodes[0]!, nodes[1]!];
  const taken: Array<Later<number>> = [];
  for (let n = 0; n < LOCKS; n++) taken.push(a.request(r(`k${n}`, 'X'), true));
  t.true((await settle(vt, ...taken)).every((p) => p === 1));
  // A waiter behind the last lock the release reaches, told of its grant through the other node.
  const last = `k${LOCKS - 1}`;
  const grant = b.acquire(r(last, 'W'), true, 60_000);
  await vt.until(10_000, () => b.replica.table.entryOf(last, 'i', 'W') !== NO_ID && a.replica.table.entryOf(last, 'i', 'W') !== NO_ID);

  const release = answered(a.releaseAll('X'), () => a.replica.releasing);
  const other = answered(b.request(r('other', 'Y'), true), () => b.replica.releasing);
  const [released, requested] = await settle(vt, release, other);
  t.is(released.value, LOCKS);
  t.true(released.during, 'release-all answered before its last removal');
  t.is(requested.value, 1);
  t.true(requested.during, "another client's request answered while the release still removed entries on its node");
  // What the release took is gone at once, as every client sees it.
  t.is(b.replica.table.size, 2);

  const [granted] = await settle(vt, grant);
  t.is(granted.position, 1);
  await vt.until(10_000, () => !a.replica.releasing && !b.replica.releasing);
  t.false(b.replica.releasing, 'the release finished by its slices alone');
  // The grant the release made on its last slice carries the same token on both nodes.
  for (const node of nodes) t.is(node.replica.table.tokenOf(node.replica.table.entryOf(last, 'i', 'W')), granted.token);
  t.is(a.replica.digest(), b.replica.digest());
});
