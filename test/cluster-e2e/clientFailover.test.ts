import { createServer, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import test, { type ExecutionContext } from 'ava';
import { holdLock } from '../../src/client/holdLock.js';
import { LockClient } from '../../src/client/LockClient.js';
import { bounded } from '../helpers/bounded.js';
import { needsEtcd, startCluster } from '../helpers/etcdCluster.js';
import { startLockctlWith } from '../helpers/lockctlProcess.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';

// Clients that know every node of a real cluster (3 etcd members, 3 nodes, loopback): a node
// killed -9 while they hold a lock does not take the lock with it. Nothing here asserts how long
// anything took; every wait is bounded.

const etcdTest = needsEtcd(test);
/** TTL of the held locks: renewed every 2 s; lost if no renewal is confirmed for 6 s. */
const TTL_S = 6;
/** Renewals through the new node that span more than a TTL: the failover's own, then 3 at TTL/3 apart. */
const RENEWALS_SPANNING_A_TTL = 4;
const WAIT_MS = 60_000;

const address = (node: ServerProcess): string => `127.0.0.1:${node.port}`;

async function client(t: ExecutionContext, node: ServerProcess): Promise<LockClient> {
  // Long reply limit: commits are slow on a loaded machine, and no answer here may be missed.
  const c = await LockClient.connect({ host: '127.0.0.1', port: node.port, requestTimeoutMs: 30_000 });
  t.teardown(() => c.destroy());
  return c;
}

async function kill9(node: ServerProcess): Promise<void> {
  node.signal('SIGKILL');
  await node.waitForExit();
}

/** Until stopped: `other` asks for the lock through its node, recording each position. */
function contend(c: LockClient, key: string, index: string, other: string) {
  const positions: number[] = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      positions.push(await c.request(key, index, other, { ttl: TTL_S, ttw: TTL_S }));
      await delay(200); // pacing between polls, not a wait for anything
    }
  })();
  return {
    positions,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

etcdTest.serial('holdLock keeps its lock through another node when its node is killed -9; a client on a third node never owns it meanwhile', async (t) => {
  t.timeout(180_000);
  const { nodes } = await startCluster(t);
  const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];
  const holder = await LockClient.connect({ hosts: nodes.map(address), hostOrder: 'as-listed', requestTimeoutMs: 30_000 });
  t.teardown(() => holder.destroy());
  let failedOver!: (pair: [string, string]) => void;
  const failover = new Promise<[string, string]>((resolve) => (failedOver = resolve));
  const lock = await holdLock(holder, 'jobs', 'nightly', 'holder', { ttl: TTL_S, onFailover: (from, to) => failedOver([from, to]) });
  t.is(lock.client.address, address(n1));

  const onN3 = await client(t, n3);
  const contender = contend(onN3, 'jobs', 'nightly', 'other');
  const onN2 = await client(t, n2);
  const renewalsBefore = (await onN2.stats()).renewals;

  await kill9(n1);
  t.deepEqual(await bounded(failover, WAIT_MS, 'the holder to fail over'), [address(n1), address(n2)]);
  t.is(lock.client.address, address(n2));
  await pollUntil(
    'renewals through n2 spanning a TTL',
    async () => ((await onN2.stats()).renewals >= renewalsBefore + RENEWALS_SPANNING_A_TTL ? true : undefined),
    WAIT_MS,
  );
  t.false(lock.signal.aborted, lock.lostError?.message);
  t.deepEqual(await onN3.findOwner('jobs', 'nightly'), Buffer.from('holder'));
  await contender.stop();
  t.true(contender.positions.length > 0);
  t.deepEqual(
    contender.positions.filter((p) => p !== 2),
    [],
    'the contender on n3 was only ever second in line',
  );

  t.is(await lock.release(), 1, 'released through n2');
  t.is(await onN3.request('jobs', 'nightly', 'other', { ttl: TTL_S }), 1, 'and then the contender gets it');
});

etcdTest.serial('lockctl hold --host a,b,c: the command keeps running under the lock when its node is killed -9, and its exit code comes back', async (t) => {
  t.timeout(180_000);
  const { nodes } = await startCluster(t);
  const [n1, n2, n3] = nodes as [ServerProcess, ServerProcess, ServerProcess];

  // The command connects to the test once it runs (so, under the lock), and exits with the code it is sent.
  let commandConnected!: (socket: Socket) => void;
  const command = new Promise<Socket>((resolve) => (commandConnected = resolve));
  const control = createServer((socket) => commandConnected(socket));
  await new Promise<void>((resolve) => control.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => control.close(() => resolve())));
  const controlPort = (control.address() as { port: number }).port;
  const script = `require('net').connect(${controlPort}, '127.0.0.1').on('data', (d) => process.exit(Number(String(d))));`;

  const hosts = nodes.map(address).join(',');
  const hold = startLockctlWith(
    ['--host', hosts, '--host-order', 'as-listed', 'hold', '--ttl', String(TTL_S), 'jobs', 'nightly', 'me', '--', process.execPath, '-e', script],
    { limitMs: 150_000 },
  );
  const socket = await bounded(command, WAIT_MS, 'the command to run under the lock');
  t.teardown(() => socket.destroy());

  const onN2 = await client(t, n2);
  const onN3 = await client(t, n3);
  // hold makes the owner unique to its lockctl process.
  const owner = Buffer.from(`me@${hold.child.pid}.${hostname()}`);
  t.deepEqual(await onN3.findOwner('jobs', 'nightly'), owner);
  const renewalsBefore = (await onN2.stats()).renewals;
  await kill9(n1);
  await hold.stderrMatch(new RegExp(`lost the connection to 127\\.0\\.0\\.1:${n1.port}; carrying on through 127\\.0\\.0\\.1:${n2.port}`));
  await pollUntil(
    'renewals through n2 spanning a TTL',
    async () => ((await onN2.stats()).renewals >= renewalsBefore + RENEWALS_SPANNING_A_TTL ? true : undefined),
    WAIT_MS,
  );
  t.deepEqual(await onN3.findOwner('jobs', 'nightly'), owner, 'still the owner, a TTL after the kill');

  socket.write('7');
  const run = await hold.result;
  t.is(run.code, 7, run.stderr);
  t.notRegex(run.stderr, /lost the lock/);
  t.deepEqual(await onN3.findOwner('jobs', 'nightly'), Buffer.alloc(0), 'released after the command, through n2');
});
