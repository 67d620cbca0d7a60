import test from 'ava';
import { holdLock } from '../../src/client/holdLock.js';
import { LockClient } from '../../src/client/LockClient.js';
import { bounded } from '../helpers/bounded.js';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';

// holdLock waiting without polling on a real cluster (3 etcd members, 3 nodes, loopback): the
// node it waits on is killed -9, and it asks again on the next one, where its entry — the
// cluster's — has kept its place. Nothing here asserts how long anything took; every wait is bounded.

const etcdTest = needsEtcd(test);
const WAIT_MS = 60_000;

const address = (node: ServerProcess): string => `127.0.0.1:${node.port}`;

async function connect(hosts: ServerProcess[]): Promise<LockClient> {
  // Long reply limit: commits are slow on a loaded machine, and no answer here may be missed.
  return LockClient.connect({ hosts: hosts.map(address), hostOrder: 'as-listed', requestTimeoutMs: 30_000 });
}

etcdTest.serial(
  'a waiter whose node is killed -9 asks again on the next node, keeps its place ahead of a later waiter, and is granted at the release',
  async (t) => {
    t.timeout(180_000);
    const { nodes } = await startCluster(t);
    const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
    const onN3 = await connect([n3]);
    t.teardown(() => onN3.destroy());
    t.is(await onN3.request('k', 'i', 'holder', { ttl: 0, ttw: 0 }), 1);

    const waiter = await connect(nodes);
    t.teardown(() => waiter.destroy());
    let failedOver!: (pair: [string, string]) => void;
    const failover = new Promise<[string, string]>((resolve) => (failedOver = resolve));
    // Polls, were there any, too far apart to come within the test.
    const acquiring = holdLock(waiter, 'k', 'i', 'me', {
      ttl: 30,
      pollInitialMs: 600_000,
      pollMaxMs: 600_000,
      onFailover: (from, to) => failedOver([from, to]),
    });
    acquiring.catch(() => {});
    await pollUntil('the waiter to queue', async () => ((await onN3.location('k', 'i', 'me')) === 2 ? true : undefined), WAIT_MS);
    t.is(await onN3.request('k', 'i', 'later', { ttl: 0, ttw: 0 }), 3);

    const onN2 = await connect([n2]);
    t.teardown(() => onN2.destroy());
    const lockRequestsOnN2 = (await onN2.stats()).lockRequests;
    n1.signal('SIGKILL');
    await n1.waitForExit();
    t.deepEqual(await bounded(failover, WAIT_MS, 'the wait to move'), [address(n1), address(n2)]);
    await pollUntil('the 0x0B sent again on n2', async () => ((await onN2.stats()).lockRequests > lockRequestsOnN2 ? true : undefined), WAIT_MS);
    t.is(await onN3.location('k', 'i', 'me'), 2, 'still first in line');
    t.is(await onN3.location('k', 'i', 'later'), 3);

    t.is(await onN3.release('k', 'i', 'holder'), 1);
    const lock = await bounded(acquiring, WAIT_MS, 'the lock at the release');
    t.is(lock.client.address, address(n2), 'renewed through the node that granted it');
    t.deepEqual(await onN3.findOwner('k', 'i'), Buffer.from('me'));
    t.is(await onN3.fence('k', 'i', 'me'), lock.token!);
    t.is(await lock.release(), 1);
    t.deepEqual(await onN3.findOwner('k', 'i'), Buffer.from('later'));
  },
);
