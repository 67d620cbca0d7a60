import test, { type ExecutionContext } from 'ava';
import { AllHostsFailedError, ConnectError, ConnectTimeoutError, LockLostError, ServerRefusedError } from '../../src/client/errors.js';
import { holdLock, type HeldLock } from '../../src/client/holdLock.js';
import { LockClient } from '../../src/client/LockClient.js';
import { bounded } from '../helpers/bounded.js';
import type { SavedLock } from '../../src/locks/LockService.js';
import { connectClient, oldServerInFrontOf, startInProcessServer } from '../helpers/lockClient.js';
import { pollUntil } from '../helpers/poll.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { stalledPort } from '../helpers/stalledListener.js';
import { closedPort, standIn, type ArrivalLog } from '../helpers/standIns.js';

const WAIT_MS = 10_000;

/** Tests with a stalled port give it a short connect timeout; the others keep the default. */
async function connectHosts(
  t: ExecutionContext,
  hosts: string[],
  { order = 'as-listed', connectTimeoutMs }: { order?: 'as-listed' | 'random-start'; connectTimeoutMs?: number } = {},
): Promise<LockClient> {
  const client = await LockClient.connect({ hosts, hostOrder: order, connectTimeoutMs });
  t.teardown(() => client.destroy());
  return client;
}

// Choosing a node

test('as-listed: a refusing node (0x00), a closed port and one that never completes TCP are passed over, in list order', async (t) => {
  const log: ArrivalLog = [];
  const refusing = await standIn(t, 'refusing', 'refusing', log);
  const good = await standIn(t, 'good', 'accepting', log);
  const later = await standIn(t, 'later', 'accepting', log);
  const closed = await closedPort();
  const stalled = await stalledPort(t);
  const client = await connectHosts(t, [refusing.address, `127.0.0.1:${closed}`, `127.0.0.1:${stalled}`, good.address, later.address], {
    connectTimeoutMs: 2_000,
  });
  t.is(client.address, good.address);
  t.deepEqual(log, ['refusing', 'good'], 'each node before the good one tried once, in order; none after it');
  t.deepEqual(client.hosts, [refusing.address, `127.0.0.1:${closed}`, `127.0.0.1:${stalled}`, good.address, later.address]);
});

test('when no node gives a connection: AllHostsFailedError with what each did, in the order tried', async (t) => {
  const refusing = await standIn(t, 'refusing', 'refusing');
  const closed = await closedPort();
  const stalled = await stalledPort(t);
  const hosts = [refusing.address, `127.0.0.1:${closed}`, `127.0.0.1:${stalled}`];
  const error = await t.throwsAsync(connectHosts(t, hosts, { connectTimeoutMs: 2_000 }), {
    instanceOf: AllHostsFailedError,
  });
  t.true(error.errors[0] instanceof ServerRefusedError);
  t.true(error.errors[1] instanceof ConnectError);
  t.true(error.errors[2] instanceof ConnectTimeoutError);
  t.regex(
    error.message,
    new RegExp(
      `^no host accepted a connection: ${refusing.address} refused: .*; cannot connect to 127\\.0\\.0\\.1:${closed}: .*; no TCP connection to 127\\.0\\.0\\.1:${stalled} within 2000 ms$`,
    ),
  );
});

test('a single host fails with its own error, as before (no AllHostsFailedError)', async (t) => {
  const refusing = await standIn(t, 'refusing', 'refusing');
  await t.throwsAsync(LockClient.connect({ hosts: [refusing.address] }), { instanceOf: ServerRefusedError });
  await t.throwsAsync(LockClient.connect({ port: refusing.port }), { instanceOf: ServerRefusedError });
});

test('random-start: connections start at every node, and go on from there in list order', async (t) => {
  // r1 is followed by g1 in the list, r2 by g2: whichever node a connection starts at, the
  // node after it is the next one tried.
  const log: ArrivalLog = [];
  const r1 = await standIn(t, 'r1', 'refusing', log);
  const g1 = await standIn(t, 'g1', 'accepting', log);
  const r2 = await standIn(t, 'r2', 'refusing', log);
  const g2 = await standIn(t, 'g2', 'accepting', log);
  const hosts = [r1.address, g1.address, r2.address, g2.address];
  const sequences = new Set<string>();
  for (let i = 0; i < 80; i++) {
    log.length = 0;
    const client = await connectHosts(t, hosts, { order: 'random-start' });
    sequences.add(log.join(','));
    t.is(client.address, log.at(-1) === 'g1' ? g1.address : g2.address);
    client.destroy();
  }
  // 80 random starts over 4 nodes: each start comes up (a miss has odds below 4 × (3/4)^80 ≈ 4e-10).
  t.deepEqual([...sequences].sort(), ['g1', 'g2', 'r1,g1', 'r2,g2']);
});

test('reconnect() tries the node after this one first, wrapping around the list', async (t) => {
  const log: ArrivalLog = [];
  const a = await standIn(t, 'a', 'accepting', log);
  const b = await standIn(t, 'b', 'refusing', log);
  const c = await standIn(t, 'c', 'accepting', log);
  const first = await connectHosts(t, [a.address, b.address, c.address]);
  t.is(first.address, a.address);
  const second = await first.reconnect();
  t.teardown(() => second.destroy());
  t.is(second.address, c.address);
  const third = await second.reconnect();
  t.teardown(() => third.destroy());
  t.is(third.address, a.address);
  t.deepEqual(log, ['a', 'b', 'c', 'a']);
  t.true(first.isOpen, 'reconnect leaves the old connection alone');
});

test('hosts and host together, an empty list, a bad port or a bad hostOrder are RangeErrors', async (t) => {
  await t.throwsAsync(LockClient.connect({ hosts: ['a'], host: 'b' }), { instanceOf: RangeError });
  await t.throwsAsync(LockClient.connect({ hosts: [] }), { instanceOf: RangeError });
  await t.throwsAsync(LockClient.connect({ hosts: ['a:0'] }), { instanceOf: RangeError });
  await t.throwsAsync(LockClient.connect({ hosts: ['a'], hostOrder: 'sorted' as never }), { instanceOf: RangeError });
});

// holdLock over several single-node servers. They share no table, so where the test wants the
// entry to be "the cluster's", it puts the same entry, with its token, on the next server itself:
// a server in this process (startInProcessServer) whose table the test restores it into.

/** The held entry k/i of owner "me" as saved: the owner, with this token. */
function heldEntry(token: number): SavedLock {
  return { key: 'k', index: 'i', owner: 'me', priority: 0, ttl: 30, ttw: 30, isOwner: true, token, remainingMs: 30_000 };
}

async function killed(server: ServerProcess): Promise<void> {
  server.signal('SIGKILL');
  await server.waitForExit();
}

function failedOver(): { onFailover: (from: string, to: string) => void; seen: Promise<[string, string]> } {
  let resolve!: (value: [string, string]) => void;
  const seen = new Promise<[string, string]>((r) => (resolve = r));
  return { onFailover: (from, to) => resolve([from, to]), seen };
}

function lost(lock: HeldLock): Promise<LockLostError> {
  return new Promise((resolve) => {
    if (lock.lostError !== undefined) resolve(lock.lostError);
    lock.signal.addEventListener('abort', () => resolve(lock.lostError!), { once: true });
  });
}

test('a held lock whose node dies is renewed through the next node that still has the entry', async (t) => {
  const a = await startServer(t);
  const b = await startInProcessServer(t);
  const onB = await connectClient(t, b.port);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const failover = failedOver();
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 3, onFailover: failover.onFailover });
  t.is(lock.client.address, `127.0.0.1:${a.port}`);
  await b.service.restore([heldEntry(lock.token!)]);
  t.is(await onB.fence('k', 'i', 'me'), lock.token!, 'the entry as the cluster would have it on b, token included');
  const renewalsBefore = (await onB.stats()).renewals;
  await killed(a);
  t.deepEqual(await bounded(failover.seen, WAIT_MS, 'the failover'), [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  t.is(lock.client.address, `127.0.0.1:${b.port}`);
  // Renewed there a second time later on (a renewal every second with --ttl 3): it goes on.
  await pollUntil('renewals through b', async () => ((await onB.stats()).renewals >= renewalsBefore + 3 ? true : undefined));
  t.false(lock.signal.aborted);
  t.is(await lock.release(), 1, 'released through b');
  t.deepEqual(await onB.findOwner('k', 'i'), Buffer.alloc(0));
  await lock.client.closed;
});

test('a held lock whose next node has no entry is lost, and no entry is made there', async (t) => {
  const a = await startServer(t);
  const b = await startServer(t);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  const loss = lost(lock);
  await killed(a);
  const error = await bounded(loss, WAIT_MS, 'the loss');
  t.regex(error.message, new RegExp(`after 127\\.0\\.0\\.1:${a.port} failed, 127\\.0\\.0\\.1:${b.port} has no entry`));
  const onB = await connectClient(t, b.port);
  t.is(await onB.location('k', 'i', 'me'), 0);
  t.is(await lock.release(), 0);
});

test('a held lock whose next node has it under another token (lost and granted again meanwhile) is lost', async (t) => {
  const a = await startServer(t);
  const b = await startInProcessServer(t);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  const regranted = lock.token! + 1;
  await b.service.restore([heldEntry(regranted)]);
  const loss = lost(lock);
  await killed(a);
  const error = await bounded(loss, WAIT_MS, 'the loss');
  t.regex(
    error.message,
    new RegExp(`after 127\\.0\\.0\\.1:${a.port} failed, 127\\.0\\.0\\.1:${b.port} has the lock under fencing token ${regranted}, not ${lock.token}`),
  );
  t.is(await lock.release(), 0);
});

test('a held lock with no node answering within its TTL is lost', async (t) => {
  const a = await startServer(t);
  const refusing = await standIn(t, 'refusing', 'refusing');
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, refusing.address, `127.0.0.1:${await closedPort()}`]);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 1 });
  const loss = lost(lock);
  await killed(a);
  t.regex((await bounded(loss, WAIT_MS, 'the loss')).message, /no node confirmed a renewal within the lock's TTL \(1 s\)/);
  t.true(refusing.connections() >= 1, 'the other nodes were tried meanwhile');
  t.is(await lock.release(), 0);
});

test('waiting for a lock goes on through the next node when the node waited on dies', async (t) => {
  const a = await startServer(t);
  const b = await startServer(t);
  const onA = await connectClient(t, a.port);
  t.is(await onA.request('k', 'i', 'first'), 1);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const failover = failedOver();
  const acquiring = holdLock(client, 'k', 'i', 'me', { ttl: 30, pollMaxMs: 100, onFailover: failover.onFailover });
  await pollUntil('the waiter to queue on a', async () => ((await onA.location('k', 'i', 'me')) === 2 ? true : undefined));
  await killed(a);
  const lock = await bounded(acquiring, WAIT_MS, 'the lock through b');
  t.deepEqual(await failover.seen, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const onB = await connectClient(t, b.port);
  t.deepEqual(await onB.findOwner('k', 'i'), Buffer.from('me'));
  t.is(await onB.fence('k', 'i', 'me'), lock.token!, "b's token");
  t.is(await lock.release(), 1);
});

test('waiting without polling goes on through the next node when the node waited on dies: the 0x0B is sent again there, and answered at its grant', async (t) => {
  const a = await startServer(t);
  const b = await startServer(t);
  const onA = await connectClient(t, a.port);
  const onB = await connectClient(t, b.port);
  // Both nodes have the lock taken, as a cluster's nodes would.
  t.is(await onA.request('k', 'i', 'first'), 1);
  t.is(await onB.request('k', 'i', 'first'), 1);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const failover = failedOver();
  // Polls, were there any, too far apart to come within the test.
  const acquiring = holdLock(client, 'k', 'i', 'me', { ttl: 30, pollInitialMs: 600_000, pollMaxMs: 600_000, onFailover: failover.onFailover });
  await pollUntil('the waiter to queue on a', async () => ((await onA.location('k', 'i', 'me')) === 2 ? true : undefined));
  await killed(a);
  t.deepEqual(await bounded(failover.seen, WAIT_MS, 'the wait to move'), [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  await pollUntil('the waiter to queue on b', async () => ((await onB.location('k', 'i', 'me')) === 2 ? true : undefined));
  t.is(await onB.release('k', 'i', 'first'), 1);
  const lock = await bounded(acquiring, WAIT_MS, 'the lock through b');
  t.is(lock.client.address, `127.0.0.1:${b.port}`, 'renewed through the node that granted it');
  t.is(await onB.fence('k', 'i', 'me'), lock.token!);
  t.is((await onB.stats()).lockRequests, 2, "first's request and one 0x0B: no polls");
  t.is(await lock.release(), 1);
});

test("a held lock's loss notice on a node that dies says nothing: renewals move to the next node, and the notice follows them there", async (t) => {
  const a = await startServer(t);
  const b = await startInProcessServer(t);
  const onB = await connectClient(t, b.port);
  const client = await connectHosts(t, [`127.0.0.1:${a.port}`, `127.0.0.1:${b.port}`]);
  const failover = failedOver();
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30, onFailover: failover.onFailover });
  await b.service.restore([heldEntry(lock.token!)]);
  await killed(a);
  await bounded(failover.seen, WAIT_MS, 'the failover');
  // The notice is back, on b: a release there is told at once, with how.
  await pollUntil('the notice on b', async () => ((await onB.stats()).contenderLookups >= 2 ? true : undefined));
  const loss = lost(lock);
  t.is(await onB.release('k', 'i', 'me'), 1);
  const error = await bounded(loss, WAIT_MS, 'the loss');
  t.is(error.message, 'the lock was released (0x05) by someone else');
});

test('with a single host, a dropped connection loses the lock at once, as before (no other node to ask)', async (t) => {
  const a = await startServer(t);
  const client = await connectClient(t, a.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  const loss = lost(lock);
  await killed(a);
  t.regex((await bounded(loss, WAIT_MS, 'the loss')).message, /^renewal failed: connection to 127\.0\.0\.1:\d+ closed/);
  t.is(await lock.release(), 0);
});

test('with several hosts, a node closing the connection on 0x0A is passed over like a failed one: no fallback to 0x02', async (t) => {
  const a = await startServer(t);
  const b = await startServer(t);
  const client = await connectHosts(t, [`127.0.0.1:${await oldServerInFrontOf(t, a.port)}`, `127.0.0.1:${b.port}`]);
  const lock = await holdLock(client, 'k', 'i', 'me');
  t.is(lock.client.address, `127.0.0.1:${b.port}`);
  t.true(lock.token! > 0);
  t.is(await lock.release(), 1);
});
