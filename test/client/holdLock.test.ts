import test from 'ava';
import { readFile } from 'node:fs/promises';
import { LockClientError, LockLostError, LockRefusedError, LockWaitTimeoutError } from '../../src/client/errors.js';
import { holdLock, withLock, type HeldLock } from '../../src/client/holdLock.js';
import { parseLockFile } from '../../src/files/lockFile.js';
import type { LockClient } from '../../src/client/LockClient.js';
import { LossReason } from '../../src/protocol/constants.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient, oldServerInFrontOf, serverBeforeWaitingInFrontOf, startCountingServer } from '../helpers/lockClient.js';
import { pollUntil } from '../helpers/poll.js';
import { startServer } from '../helpers/serverProcess.js';

const WAIT_MS = 10_000;
/** Polls, if there were any, so far apart that a test would time out before the second one. */
const NO_POLLS = { pollInitialMs: 600_000, pollMaxMs: 600_000 };
/** Renewals so far apart that none comes within a test. */
const NO_RENEWALS = { renewIntervalMs: 600_000 };

/**
 * Resolves once the server has read `count` loss notices (0x0C), which its stats count with the
 * lookups (0x03) they extend (the tests that use this send no 0x03): an end before that would be
 * told as NotOwner.
 */
function noticesRead(observer: LockClient, count = 1): Promise<true> {
  return pollUntil('the loss notice to be read', async () => ((await observer.stats()).contenderLookups >= count ? true : undefined));
}

/** The lock's loss, once its signal aborts (bounded). */
function lost(lock: HeldLock): Promise<LockLostError> {
  const aborted = new Promise<LockLostError>((resolve) => {
    if (lock.lostError !== undefined) resolve(lock.lostError);
    lock.signal.addEventListener('abort', () => resolve(lock.lostError!), { once: true });
  });
  return bounded(aborted, WAIT_MS, 'the loss to be noticed');
}

test('a free lock is taken at once, and release() gives it back', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  t.deepEqual(await client.findOwner('k', 'i'), Buffer.from('me'));
  t.false(lock.signal.aborted);
  t.true(lock.token! > 0);
  t.is(await client.fence('k', 'i', 'me'), lock.token!, "the grant's fencing token");
  t.is(await lock.release(), 1);
  t.is(await lock.release(), 1, 'a second release() is the same release');
  t.deepEqual(await client.findOwner('k', 'i'), Buffer.alloc(0));
  t.is(lock.lostError, undefined);
});

test('waits in line without polling: one acquire-and-wait (0x0B), answered at the release, then a renewal', async (t) => {
  const { server, received } = await startCountingServer(t);
  const other = await connectClient(t, server.port);
  const client = await connectClient(t, server.port);
  t.is(await other.request('k', 'i', 'first'), 1);
  // Were it polling, its second poll would come long after the bounded wait below gives up; TTW 600: the wait is sent again only every 200 s.
  const acquiring = holdLock(client, 'k', 'i', 'second', { ttl: 30, ttw: 600, ...NO_POLLS });
  await pollUntil('the waiter to queue', async () => ((await other.location('k', 'i', 'second')) === 2 ? true : undefined));
  const [queue] = await other.queues('k');
  t.like(queue!.entries[1], { owner: Buffer.from('second'), ttw: 600 }, 'asked with its TTW, not for as long as its connection');
  t.true(queue!.entries[1]!.remainingMs! <= 600_000);
  const renewalsBefore = (await other.stats()).renewals;
  t.is(await other.release('k', 'i', 'first'), 1);
  const lock = await bounded(acquiring, WAIT_MS, 'the lock at the release');
  t.deepEqual(await other.findOwner('k', 'i'), Buffer.from('second'));
  t.is(await received('acquire-wait'), 1);
  t.is(await received('request-fenced'), 0);
  t.is(await received('request'), 1, "the other's request only");
  t.is((await other.stats()).renewals, renewalsBefore + 1, 'renewed once at the grant: its TTL counts from then');
  t.is(await other.fence('k', 'i', 'second'), lock.token!, 'the token came with the grant');
  t.is(lock.client, client, "renewals go through the caller's connection");
  t.is(client.inFlight, 0, "the caller's connection stayed free");
  await lock.release();
});

test('onOwned is called once with the token before holdLock resolves, waiting or polling; never when it rejects', async (t) => {
  const { server } = await startCountingServer(t);
  const other = await connectClient(t, server.port);
  for (const port of [server.port, await serverBeforeWaitingInFrontOf(t, server.port)]) {
    const client = await connectClient(t, port);
    t.is(await other.request('k', 'i', 'first'), 1);
    const owned: [number | undefined, boolean][] = [];
    let resolved = false;
    const acquiring = holdLock(client, 'k', 'i', 'second', { ttl: 30, pollMaxMs: 100, onOwned: (token) => owned.push([token, resolved]) });
    void acquiring.then(() => (resolved = true));
    await pollUntil('the waiter to queue', async () => ((await other.location('k', 'i', 'second')) === 2 ? true : undefined));
    t.deepEqual(owned, [], 'not before the grant');
    t.is(await other.release('k', 'i', 'first'), 1);
    await pollUntil('onOwned', async () => (owned.length > 0 ? true : undefined));
    const lock = await bounded(acquiring, WAIT_MS, 'the lock');
    t.deepEqual(owned, [[lock.token, false]], "once, with the grant's token, before holdLock resolved");
    await lock.release();
  }
  const client = await connectClient(t, server.port);
  t.is(await other.request('k', 'i', 'first'), 1);
  let called = false;
  await t.throwsAsync(holdLock(client, 'k', 'i', 'second', { waitTimeoutMs: 100, onOwned: () => (called = true) }), { instanceOf: LockWaitTimeoutError });
  t.false(called);
});

test('where the server has no acquire-and-wait, waits in line by polling with request with fence (0x0A)', async (t) => {
  const { server, received } = await startCountingServer(t);
  const other = await connectClient(t, server.port);
  const client = await connectClient(t, await serverBeforeWaitingInFrontOf(t, server.port));
  t.is(await other.request('k', 'i', 'first'), 1);
  const acquiring = holdLock(client, 'k', 'i', 'second', { ttl: 30, ttw: 30, pollMaxMs: 100 });
  await pollUntil('the waiter to queue', async () => ((await other.location('k', 'i', 'second')) === 2 ? true : undefined));
  t.is(await other.release('k', 'i', 'first'), 1);
  const lock = await bounded(acquiring, WAIT_MS, 'the lock');
  t.deepEqual(await other.findOwner('k', 'i'), Buffer.from('second'));
  t.true((await received('request-fenced')) >= 2, 'the waiter polled with request with fence');
  t.is(await received('acquire-wait'), 0);
  t.is(await other.fence('k', 'i', 'second'), lock.token!, 'the token came with the grant');
  t.is(lock.client, client);
  t.true(client.isOpen, "the caller's connection is untouched: the 0x0B went on a connection of its own");
  await lock.release();
});

test('while held, the lock is renewed, so it outlives its TTL', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const observer = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 2 });
  // A renewal every third of the TTL: after four of them more than a TTL has passed.
  await pollUntil('four renewals', async () => ((await observer.stats()).renewals >= 4 ? true : undefined));
  t.deepEqual(await observer.findOwner('k', 'i'), Buffer.from('me'));
  t.false(lock.signal.aborted);
  await lock.release();
});

test('waitTimeoutMs: gives up with LockWaitTimeoutError and leaves no waiting entry', async (t) => {
  const { server, received } = await startCountingServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('k', 'i', 'owner'), 1);
  await t.throwsAsync(holdLock(client, 'k', 'i', 'waiter', { waitTimeoutMs: 100, ...NO_POLLS }), { instanceOf: LockWaitTimeoutError });
  t.is(await client.location('k', 'i', 'waiter'), 0);
  t.is(await received('acquire-wait'), 1, 'one wait, bounded by the server');
  // 0: the server answers at once where the lock is taken.
  await t.throwsAsync(holdLock(client, 'k', 'i', 'waiter', { waitTimeoutMs: 0 }), { instanceOf: LockWaitTimeoutError, message: /not free/ });
  t.is(await client.location('k', 'i', 'waiter'), 0);
});

test('aborting the signal while waiting rejects with its reason and removes the waiting entry', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('k', 'i', 'owner'), 1);
  const controller = new AbortController();
  const acquiring = holdLock(client, 'k', 'i', 'waiter', { signal: controller.signal, pollMaxMs: 100 });
  await pollUntil('the waiter to queue', async () => ((await client.location('k', 'i', 'waiter')) === 2 ? true : undefined));
  const reason = new Error('no longer needed');
  controller.abort(reason);
  t.is(await t.throwsAsync(acquiring), reason);
  t.is(await client.location('k', 'i', 'waiter'), 0);
});

test('aborting the signal once held releases the lock', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const controller = new AbortController();
  await holdLock(client, 'k', 'i', 'me', { signal: controller.signal });
  controller.abort();
  await pollUntil('the release', async () => ((await client.findOwner('k', 'i')).length === 0 ? true : undefined));
  t.is(await client.location('k', 'i', 'me'), 0, 'no entry left, not even a waiting one');
  t.like(await client.stats(), { owners: 0, contenders: 0, releases: 1 });
});

test('a draining server refuses the new entry: LockRefusedError', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('keep', 'alive', 'someone'), 1);
  const draining = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await draining;
  await t.throwsAsync(holdLock(client, 'k', 'i', 'me'), { instanceOf: LockRefusedError });
});

test('a lock removed behind our back is reported lost at once by the loss notice, not at a renewal: signal aborts, onLost is called', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const other = await connectClient(t, server.port);
  let reported: LockLostError | undefined;
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30, ...NO_RENEWALS, onLost: (error) => (reported = error) });
  const loss = lost(lock);
  await noticesRead(other);
  t.is(await other.release('k', 'i', 'me'), 1);
  const error = await loss;
  t.true(error instanceof LockLostError);
  t.is(reported, error);
  t.is(error.message, 'the lock was released (0x05) by someone else');
  t.is(error.lossReason, LossReason.Released);
  t.is(await lock.release(), 0);
});

test('the loss notice tells how: expired (a TTL shortened behind our back), released with *, released by release-all', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const other = await connectClient(t, server.port);
  let notices = 0;
  for (const [index, end, reason, message] of [
    // Re-requested with TTL 1 by someone else: the server expires it a second later, long before our own reckoning (30 s) or a renewal.
    [
      'expiry',
      async () => t.is(await other.request('k', 'expiry', 'me', { ttl: 1 }), 1),
      LossReason.Expired,
      /^the server expired the lock: its TTL \(30 s\) ran out/,
    ],
    ['star', async () => t.is(await other.release('k', '*', 'me'), 1), LossReason.ReleasedKey, /^the lock was released with index \* /],
    ['all', async () => t.is(await other.releaseAll('me'), 1), LossReason.ReleasedAll, /^the lock was released by someone else's release-all/],
  ] as const) {
    const lock = await holdLock(client, 'k', index, 'me', { ttl: 30, ...NO_RENEWALS });
    const loss = lost(lock);
    await noticesRead(other, ++notices);
    await end();
    const error = await loss;
    t.is(error.lossReason, reason, index);
    t.regex(error.message, message, index);
    t.is(await lock.release(), 0);
  }
});

test("our own release is no loss: the notice's connection closes with the lock, and the signal never aborts", async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  await pollUntil('the notice to be outstanding', async () => ((await client.stats()).activeConnections === 2 ? true : undefined));
  t.is(await lock.release(), 1);
  await pollUntil('the notice connection to close', async () => ((await client.stats()).activeConnections === 1 ? true : undefined));
  t.false(lock.signal.aborted);
  t.is(lock.lostError, undefined);
});

test('where the server has no loss notice, a lock removed behind our back is noticed by the next renewal', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, await serverBeforeWaitingInFrontOf(t, server.port));
  const other = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30, renewIntervalMs: 20 });
  const loss = lost(lock);
  t.is(await other.release('k', 'i', 'me'), 1);
  t.regex((await loss).message, /no entry/);
  t.is((await loss).lossReason, undefined);
  t.is(await lock.release(), 0);
});

test('withLock runs the work under the lock and releases it afterwards, even when the work throws', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const owner = await withLock(client, 'k', 'i', 'me', {}, async () => client.findOwner('k', 'i'));
  t.deepEqual(owner, Buffer.from('me'));
  t.deepEqual(await client.findOwner('k', 'i'), Buffer.alloc(0));
  await t.throwsAsync(
    withLock(client, 'k', 'i', 'me', {}, async () => {
      throw new Error('work failed');
    }),
    { message: 'work failed' },
  );
  t.deepEqual(await client.findOwner('k', 'i'), Buffer.alloc(0));
});

test('withLock passes the lock, with its token, to the work', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const [token, fence] = await withLock(client, 'k', 'i', 'me', {}, async (_lost, lock) => [lock.token, await client.fence('k', 'i', 'me')]);
  t.true(token! > 0);
  t.is(token, fence);
});

test('renewals keep the token; the next grant has a greater one', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const first = await holdLock(client, 'k', 'i', 'me', { ttl: 30, renewIntervalMs: 20 });
  const token = first.token!;
  await pollUntil('two renewals', async () => ((await client.stats()).renewals >= 2 ? true : undefined));
  t.is(first.token, token);
  t.is(await client.fence('k', 'i', 'me'), token);
  await first.release();
  const second = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  t.true(second.token! > token);
  await second.release();
});

test('fencing: false polls with request (0x02) and the lock has no token', async (t) => {
  const { server, received } = await startCountingServer(t);
  const client = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { fencing: false });
  t.is(lock.token, undefined);
  t.is(await received('request'), 1);
  t.is(await received('request-fenced'), 0);
  await lock.release();
});

test('a LockServer 0.9b (closes the connection on 0x0A): holdLock carries on with 0x02 through a new connection, without a token', async (t) => {
  const server = await startServer(t);
  const old = await oldServerInFrontOf(t, server.port);
  const client = await connectClient(t, old);
  const observer = await connectClient(t, server.port);
  const lock = await holdLock(client, 'k', 'i', 'me', { ttl: 30 });
  t.is(lock.token, undefined);
  t.false(client.isOpen, 'the old server closed the connection passed in');
  t.true(lock.client !== client && lock.client.isOpen);
  t.deepEqual(await observer.findOwner('k', 'i'), Buffer.from('me'));
  t.is(await lock.release(), 1);
  await bounded(lock.client.closed, WAIT_MS, 'the connection holdLock opened to close with the lock');
  // With fencing: false the connection passed in is not touched.
  const plain = await connectClient(t, old);
  const second = await holdLock(plain, 'k', 'i', 'me', { fencing: false });
  t.is(second.client, plain);
  t.is(await second.release(), 1);
  t.true(plain.isOpen);
});

test('a single server stopping (SIGTERM) while holdLock waits: it rejects with a connection error, and the server has saved the waiting entry with its TTW', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('k', 'i', 'owner'), 1);
  const acquiring = holdLock(client, 'k', 'i', 'waiter', { ttl: 30 });
  await pollUntil('the waiter to queue', async () => ((await client.location('k', 'i', 'waiter')) === 2 ? true : undefined));
  server.signal('SIGTERM');
  const error = await bounded(t.throwsAsync(acquiring), WAIT_MS, 'holdLock to give up');
  t.true(error instanceof LockClientError, String(error));
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  const saved = parseLockFile(await readFile(server.lockFile, 'latin1'), server.lockFile);
  t.deepEqual(
    saved.map((e) => [e.owner, e.isOwner, e.ttw]),
    [
      ['owner', true, 30],
      // Not renewed after the restart, it leaves the queue a TTW later instead of being granted to nobody.
      ['waiter', false, 30],
    ],
  );
});
