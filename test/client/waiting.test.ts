import test from 'ava';
import { ConnectionClosedError, ExtensionUnsupportedError, FencingUnsupportedError, RequestTimeoutError } from '../../src/client/errors.js';
import { LockClient } from '../../src/client/LockClient.js';
import { LossReason, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import { bounded } from '../helpers/bounded.js';
import { connectClient, fakeServer, oldServerInFrontOf } from '../helpers/lockClient.js';
import { pollUntil } from '../helpers/poll.js';
import { startServer } from '../helpers/serverProcess.js';
import { standIn } from '../helpers/standIns.js';

// LockClient's side of waiting without polling: acquire (0x0B), awaitLoss (0x0C), queues (0x0D)
// against a real server process. A wait is shown to hold by what is answered after it, never by
// how long anything took.

const WAIT_MS = 10_000;

/** Resolves once `owner` is queued at `position` (asked on `observer`): a wait gives no reply to await. */
function queued(observer: LockClient, key: string, index: string, owner: string, position = 2): Promise<true> {
  return pollUntil(`${owner} at position ${position}`, async () => ((await observer.location(key, index, owner)) === position ? true : undefined));
}

test('acquire: a free lock at once with its token; a taken one at the release that grants it; a passed bound answers the position and leaves the entry queued', async (t) => {
  const server = await startServer(t);
  const alice = await connectClient(t, server.port);
  const first = await alice.acquire('k', 'i', 'alice', { ttl: 30 });
  t.is(first.position, 1);
  t.true(first.token > 0);
  t.is(await alice.fence('k', 'i', 'alice'), first.token);

  const bob = await connectClient(t, server.port);
  const granted = bob.acquire('k', 'i', 'bob', { ttl: 30 });
  await queued(alice, 'k', 'i', 'bob');
  t.is(await alice.release('k', 'i', 'alice'), 1);
  const bobs = await bounded(granted, WAIT_MS, "bob's grant");
  t.is(bobs.position, 1);
  t.true(bobs.token > first.token);

  const carol = await connectClient(t, server.port);
  t.deepEqual(await carol.acquire('k', 'i', 'carol', { waitMs: 100 }), { position: 2, token: 0 });
  t.is(await carol.location('k', 'i', 'carol'), 2, 'still queued');
  t.deepEqual(await carol.acquire('k', 'i', 'dave', { waitMs: 0 }), { position: 3, token: 0 }, 'waitMs 0 answers at once');
});

test('awaitLoss: NotOwner at once for a non-owner; otherwise the reason, when the grant ends', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const watcher = await connectClient(t, server.port);
  t.is(await watcher.awaitLoss('k', 'i', 'nobody'), LossReason.NotOwner);
  t.is(await client.request('k', 'i', 'me'), 1);
  // The stats count a 0x0C with the lookups (0x03) it extends: once counted, the server has read it.
  const lookups = (await client.stats()).contenderLookups;
  const loss = watcher.awaitLoss('k', 'i', 'me');
  // Answered after the wait: the connection is held, so this one tells that the notice was outstanding.
  const behind = watcher.findOwner('k', 'i');
  await pollUntil('the notice to be read', async () => ((await client.stats()).contenderLookups > lookups ? true : undefined));
  t.is(await client.releaseAll('me'), 1);
  t.is(await bounded(loss, WAIT_MS, 'the loss notice'), LossReason.ReleasedAll);
  t.deepEqual(await behind, Buffer.alloc(0), 'asked after the release: nobody owns it');
});

test("queues: each queue with its lock-delay left, each entry with its time left and token; names are the bytes' Buffers", async (t) => {
  const server = await startServer(t, { args: ['--lock-delay', '30'] });
  const client = await connectClient(t, server.port);
  const owner = await client.requestFenced('k', '\x00\xff', 'alice', { ttl: 0, ttw: 0 });
  t.is(await client.request('k', '\x00\xff', 'bob', { ttl: 5, ttw: 0, priority: 3 }), 2);
  t.is(await client.request('k', 'gone', 'carol', { ttl: 1 }), 1);
  t.is(await client.request('k', 'gone', 'dave', { ttl: 0, ttw: 0 }), 2);
  await pollUntil('carol to expire', async () => ((await client.location('k', 'gone', 'carol')) === 0 ? true : undefined));
  const [held, ...rest] = (await client.queues('k')).reverse();
  t.deepEqual(rest.reverse(), [
    {
      index: Buffer.from([0x00, 0xff]),
      heldForMs: 0,
      entries: [
        {
          index: Buffer.from([0x00, 0xff]),
          owner: Buffer.from('alice'),
          priority: 0,
          ttl: 0,
          ttw: 0,
          isOwner: true,
          position: 1,
          remainingMs: null,
          token: owner.token,
        },
        { index: Buffer.from([0x00, 0xff]), owner: Buffer.from('bob'), priority: 3, ttl: 5, ttw: 0, isOwner: false, position: 2, remainingMs: null, token: 0 },
      ],
    },
  ]);
  // carol's lock expired: held back for most of the 30 s lock-delay, dave first in line (2, as location answers) with nobody owning it.
  t.deepEqual(held!.index, Buffer.from('gone'));
  t.true(held!.heldForMs > 0 && held!.heldForMs <= 30_000, `held for ${held!.heldForMs} ms`);
  t.like(held!.entries, [{ owner: Buffer.from('dave'), isOwner: false, position: 2, token: 0 }]);
  t.is(held!.entries.length, 1);
  t.is(await client.location('k', 'gone', 'dave'), 2);
  t.like((await client.list('k')).at(-1), { owner: Buffer.from('dave'), isOwner: false, position: 2 }, 'list (0x07) counts places alike');
  t.deepEqual(await client.queues('nothing'), []);
});

test("a request issued behind a wait is answered after it, and its reply limit counts from the wait's answer", async (t) => {
  const server = await startServer(t);
  const holder = await connectClient(t, server.port);
  // The holder's lock lasts at least its 1 s TTL, twice the waiter's reply limit.
  t.is(await holder.request('k', 'i', 'holder', { ttl: 1 }), 1);
  const waiter = await connectClient(t, server.port, { requestTimeoutMs: 500 });
  const granted = waiter.acquire('k', 'i', 'waiter');
  const behind = waiter.findOwner('k', 'i');
  t.like(await bounded(granted, WAIT_MS, 'the grant at the expiry'), { position: 1 });
  t.deepEqual(await behind, Buffer.from('waiter'));
  // A bound longer than the reply limit: the wait's own limit is the two together.
  const other = await waiter.acquire('k', 'j', 'other', { waitMs: 0 });
  t.is(other.position, 1);
  t.deepEqual(await waiter.acquire('k', 'j', 'waiter', { waitMs: 1_500 }), { position: 2, token: 0 });
  t.true(waiter.isOpen);
});

test('behind a wait, a request the server never answers still times out, counted from the wait', async (t) => {
  // A stand-in that answers the first request (a grant: position 1, token 7) and nothing after it.
  const port = await fakeServer(t, (socket) => {
    socket.write(Buffer.from([0x01]));
    socket.once('data', () => socket.write(Buffer.from('0001' + '0000000000000007', 'hex')));
  });
  const client = await LockClient.connect({ port, requestTimeoutMs: 200 });
  t.teardown(() => client.destroy());
  const granted = client.acquire('k', 'i', 'o');
  const behind = client.findOwner('k', 'i');
  t.deepEqual(await granted, { position: 1, token: 7 });
  await t.throwsAsync(bounded(behind, WAIT_MS, 'the timeout behind the wait'), {
    instanceOf: RequestTimeoutError,
    message: /no reply to find-owner within 200 ms/,
  });
});

test('close() while waiting ends the wait: ConnectionClosedError, and the server takes the waiting entry out of the queue', async (t) => {
  const server = await startServer(t);
  const holder = await connectClient(t, server.port);
  t.is(await holder.request('k', 'i', 'holder'), 1);
  const waiter = await connectClient(t, server.port);
  const waiting = waiter.acquire('k', 'i', 'waiter');
  await queued(holder, 'k', 'i', 'waiter');
  await waiter.close();
  const error = await t.throwsAsync(waiting, { instanceOf: ConnectionClosedError });
  t.false(error instanceof ExtensionUnsupportedError, error.message);
  await pollUntil('the waiting entry to leave', async () => ((await holder.location('k', 'i', 'waiter')) === 0 ? true : undefined));
  t.is(await holder.release('k', 'i', 'holder'), 1);
  t.deepEqual(await holder.findOwner('k', 'i'), Buffer.alloc(0));
});

test('a server without the extensions (0.9b) closes the connection on 0x0B, 0x0C and 0x0D: ExtensionUnsupportedError naming the command', async (t) => {
  const server = await startServer(t);
  const old = await oldServerInFrontOf(t, server.port);
  for (const [command, ask] of [
    ['acquire-wait', (c: LockClient) => c.acquire('k', 'i', 'o')],
    ['await-loss', (c: LockClient) => c.awaitLoss('k', 'i', 'o')],
    ['list-detailed', (c: LockClient) => c.queues('k')],
  ] as const) {
    const client = await connectClient(t, old);
    const [before, asked] = await Promise.allSettled([client.stats(), ask(client)]);
    t.is(before.status, 'fulfilled', `${command}: the reply before it arrives`);
    const error = (asked as PromiseRejectedResult).reason as ExtensionUnsupportedError;
    t.true(error instanceof ExtensionUnsupportedError && !(error instanceof FencingUnsupportedError), command);
    t.is(error.command, command);
    t.regex(error.message, new RegExp(`closed the connection instead of answering ${command}: a server without it \\(LockServer 0\\.9b`));
  }
  const fencing = await connectClient(t, old);
  const error = await t.throwsAsync(fencing.fence('k', 'i', 'o'), { instanceOf: FencingUnsupportedError });
  t.true(error instanceof ExtensionUnsupportedError, 'the fencing error is one of them, as before');
  t.is(error.command, 'fence');
});

test('acquire checks its bound before sending: an integer of milliseconds below 2^32, or none', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  for (const waitMs of [-1, 1.5, 2 ** 32]) {
    await t.throwsAsync(client.acquire('k', 'i', 'o', { waitMs }), { instanceOf: RangeError, message: /waitMs/ });
  }
  t.like(await client.acquire('k', 'i', 'o', { waitMs: Infinity }), { position: 1 });
  t.like(await client.acquire('k', 'i', 'o', { waitMs: NO_WAIT_BOUND }), { position: 1 });
  t.is(client.inFlight, 0);
});

test("another() connects to this connection's host first; reconnect() to the next", async (t) => {
  const log: string[] = [];
  const a = await standIn(t, 'a', 'accepting', log);
  const b = await standIn(t, 'b', 'accepting', log);
  const client = await LockClient.connect({ hosts: [a.address, b.address], hostOrder: 'as-listed' });
  t.teardown(() => client.destroy());
  const second = await client.another();
  t.teardown(() => second.destroy());
  t.is(second.address, a.address);
  const next = await client.reconnect();
  t.teardown(() => next.destroy());
  t.is(next.address, b.address);
  t.deepEqual(log, ['a', 'a', 'b']);
  t.true(client.isOpen);
});
