import test from 'ava';
import { appendPuts } from '../../../src/cluster/etcd/appendTransaction.js';
import type { BundlePart } from '../../../src/cluster/ReplicatedLog.js';

// Issue 36: put only the first part's fence key in a bundle's transaction, and nothing failed;
// the simulation's etcd fenced each part by itself. Both now take their puts from here.

const part = (node: string, lease: string): BundlePart => ({
  value: Buffer.from(`batch of ${node}`),
  lease: { leaseId: lease, fenceKey: Buffer.from(`/c/fences/${node}`), endsAt: 0 },
});

test("a bundle's transaction puts every part's fence key on that part's writer lease, and the log value and its retained copy on none", (t) => {
  const parts = [part('a', '11'), part('b', '22'), part('c', '33')];
  const puts = appendPuts(Buffer.from('/c/log'), Buffer.from('ref'), Buffer.from('/c/batches/x/0'), Buffer.from('bundle'), parts);
  t.deepEqual(
    puts.map((p) => [p.key.toString(), p.value.toString(), p.lease]),
    [
      ['/c/log', 'ref', undefined],
      ['/c/batches/x/0', 'bundle', undefined],
      ['/c/fences/a', '', '11'],
      ['/c/fences/b', '', '22'],
      ['/c/fences/c', '', '33'],
    ],
  );
});
