import test from 'ava';
import { pollUntil } from '../helpers/poll.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, enqueue, pipeline, req } from '../helpers/wire.js';

// The lock model as seen over the wire: priority order, promotion, releases, expiry.

test('waiters are ordered by priority (higher first), then arrival; the owner is never preempted', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice', { priority: 0 }), 1);
  t.is(await ask.request(c, 'k', '1', 'bob', { priority: 1 }), 2);
  t.is(await ask.request(c, 'k', '1', 'carol', { priority: 9 }), 2);
  t.is(await ask.request(c, 'k', '1', 'dave', { priority: 9 }), 3);
  t.is(await ask.request(c, 'k', '1', 'erin', { priority: 0 }), 5);
  t.is(await ask.request(c, 'k', '1', 'boss', { priority: 255 }), 2);
  t.is(await ask.findOwner(c, 'k', '1'), 'alice');
  const order = ['alice', 'boss', 'carol', 'dave', 'bob', 'erin'];
  t.deepEqual(await pipeline(c, ...order.map((o) => req.location('k', '1', o))), [1, 2, 3, 4, 5, 6]);
  const listed = await ask.list(c, 'k');
  t.deepEqual(
    listed.map((e) => [e.owner, e.priority, e.isOwner]),
    [
      ['alice', 0, true],
      ['boss', 255, false],
      ['carol', 9, false],
      ['dave', 9, false],
      ['bob', 1, false],
      ['erin', 0, false],
    ],
  );
});

test('releasing the owner promotes the first in line; releasing a waiter closes the gap', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  await pipeline(
    c,
    req.request('k', '1', 'alice'),
    req.request('k', '1', 'bob', { priority: 1 }),
    req.request('k', '1', 'carol', { priority: 5 }),
    req.request('k', '1', 'dave', { priority: 1 }),
  );
  t.is(await ask.release(c, 'k', '1', 'alice'), 1);
  t.is(await ask.findOwner(c, 'k', '1'), 'carol');
  t.deepEqual(await pipeline(c, req.location('k', '1', 'carol'), req.location('k', '1', 'bob'), req.location('k', '1', 'dave')), [1, 2, 3]);
  t.is(await ask.release(c, 'k', '1', 'bob'), 1);
  t.is(await ask.location(c, 'k', '1', 'dave'), 2);
  t.is(await ask.release(c, 'k', '1', 'carol'), 1);
  t.is(await ask.findOwner(c, 'k', '1'), 'dave');
  t.is(await ask.release(c, 'k', '1', 'dave'), 1);
  t.is(await ask.findOwner(c, 'k', '1'), '');
  t.deepEqual(await ask.list(c, 'k'), []);
  t.like(await ask.stats(c), { owners: 0, contenders: 0 });
});

test('re-request renews in place: new TTL/TTW show in the list, priority and position stay', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  await pipeline(c, req.request('k', '1', 'alice', { ttl: 10, ttw: 20 }), req.request('k', '1', 'bob', { ttl: 10, ttw: 20, priority: 4 }));
  t.is(await ask.request(c, 'k', '1', 'bob', { ttl: 11, ttw: 22, priority: 200 }), 2);
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 33, ttw: 44, priority: 9 }), 1);
  t.deepEqual(await ask.list(c, 'k'), [
    { priority: 0, ttl: 33, ttw: 44, index: '1', owner: 'alice', isOwner: true },
    { priority: 4, ttl: 11, ttw: 22, index: '1', owner: 'bob', isOwner: false },
  ]);
  t.like(await ask.stats(c), { owners: 1, contenders: 1, lockRequests: 4 });
});

test("release with index '*' removes the owner's entries under that key across indexes, nothing else", async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  const positions = await enqueue(
    c,
    ['k', '1', 'alice'],
    ['k', '2', 'alice'],
    ['k', '3', 'bob'],
    ['k', '3', 'alice'],
    ['k', '1', 'bob'],
    ['other', '1', 'alice'],
    ['k', '4', 'bob'],
  );
  t.deepEqual(positions, [1, 1, 1, 2, 2, 1, 1]);
  t.is(await ask.release(c, 'k', '*', 'alice'), 3);
  t.is(await ask.findOwner(c, 'k', '1'), 'bob');
  t.is(await ask.findOwner(c, 'k', '2'), '');
  t.is(await ask.location(c, 'k', '3', 'alice'), 0);
  t.is(await ask.findOwner(c, 'other', '1'), 'alice');
  t.deepEqual(
    (await ask.list(c, 'k')).map((e) => [e.index, e.owner, e.isOwner]),
    [
      ['1', 'bob', true],
      ['3', 'bob', true],
      ['4', 'bob', true],
    ],
  );
  t.is(await ask.release(c, 'k', '*', 'alice'), 0);
});

test('release all (0x06) removes every entry of the owner across keys and promotes the next in line', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.deepEqual(await enqueue(c, ['a', '1', 'alice'], ['a', '1', 'bob'], ['b', '1', 'bob'], ['b', '1', 'alice'], ['c', 'x', 'alice']), [1, 2, 1, 2, 1]);
  t.is(await ask.releaseAll(c, 'alice'), 3);
  t.is(await ask.findOwner(c, 'a', '1'), 'bob');
  t.deepEqual(
    (await ask.list(c, 'b')).map((e) => e.owner),
    ['bob'],
  );
  t.deepEqual(await ask.list(c, 'c'), []);
  t.like(await ask.stats(c), { owners: 2, contenders: 0 });
});

test('list (0x07) covers every index under the key, each in queue order, with the owner flag', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  await pipeline(
    c,
    req.request('k', 'row-1', 'alice', { ttl: 1000, ttw: 2000, priority: 7 }),
    req.request('k', 'row-1', 'bob', { ttl: 3, ttw: 4, priority: 8 }),
    req.request('k', 'row-2', 'carol', { ttl: 0, ttw: 0, priority: 0 }),
    req.request('other', 'row-1', 'dave'),
  );
  t.deepEqual(await ask.list(c, 'k'), [
    { priority: 7, ttl: 1000, ttw: 2000, index: 'row-1', owner: 'alice', isOwner: true },
    { priority: 8, ttl: 3, ttw: 4, index: 'row-1', owner: 'bob', isOwner: false },
    { priority: 0, ttl: 0, ttw: 0, index: 'row-2', owner: 'carol', isOwner: true },
  ]);
});

test('an owner whose TTL runs out disappears and the next waiter is promoted; TTL 0 never expires', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  await pipeline(
    c,
    req.request('k', 'forever', 'zoe', { ttl: 0, ttw: 0 }),
    req.request('k', '1', 'alice', { ttl: 1, ttw: 0 }),
    req.request('k', '1', 'bob', { ttl: 0, ttw: 0 }),
  );
  await pollUntil('alice to expire', async () => ((await ask.findOwner(c, 'k', '1')) === 'bob' ? true : undefined));
  t.is(await ask.location(c, 'k', '1', 'alice'), 0);
  t.is(await ask.location(c, 'k', '1', 'bob'), 1);
  // zoe (TTL 0) was requested before alice (TTL 1): were 0 a zero-second TTL, she would be gone too.
  t.is(await ask.findOwner(c, 'k', 'forever'), 'zoe');
});

test('a waiter whose TTW runs out leaves the queue; the others keep their order', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  await pipeline(
    c,
    req.request('k', '1', 'alice', { ttl: 0, ttw: 0 }),
    req.request('k', '1', 'bob', { ttl: 0, ttw: 1, priority: 5 }),
    req.request('k', '1', 'carol', { ttl: 0, ttw: 0 }),
  );
  t.is(await ask.location(c, 'k', '1', 'carol'), 3);
  await pollUntil('bob to stop waiting', async () => ((await ask.location(c, 'k', '1', 'bob')) === 0 ? true : undefined));
  t.deepEqual(
    (await ask.list(c, 'k')).map((e) => e.owner),
    ['alice', 'carol'],
  );
  t.is(await ask.location(c, 'k', '1', 'carol'), 2);
  t.like(await ask.stats(c), { owners: 1, contenders: 1 });
});

test('renew (0x04) restarts the timer: a renewed owner outlives a lock requested after it', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  // alice's first deadline is before bob's; only renewals keep her alive past bob's expiry.
  t.is(await ask.request(c, 'k', 'alice-row', 'alice', { ttl: 2 }), 1);
  t.is(await ask.request(c, 'k', 'bob-row', 'bob', { ttl: 2 }), 1);
  await pollUntil('bob to expire', async () => {
    // One batch: the renewal and the look-up are answered together, between two expiry sweeps.
    const [renewed, bobAt] = await pipeline(c, req.renew('k', 'alice-row', 'alice'), req.location('k', 'bob-row', 'bob'));
    t.true(renewed, 'alice was renewed every time');
    return bobAt === 0 ? true : undefined;
  });
  t.is(await ask.findOwner(c, 'k', 'alice-row'), 'alice');
});

test('re-request with TTL 0 replaces a TTL of 1: the entry no longer expires', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 1 }), 1);
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 0 }), 1);
  t.is(await ask.request(c, 'k', '2', 'bob', { ttl: 1 }), 1);
  await pollUntil('bob to expire', async () => ((await ask.findOwner(c, 'k', '2')) === '' ? true : undefined));
  t.is(await ask.findOwner(c, 'k', '1'), 'alice');
  t.deepEqual(await ask.list(c, 'k'), [{ priority: 0, ttl: 0, ttw: 0, index: '1', owner: 'alice', isOwner: true }]);
});

test("a promoted waiter's TTL starts at promotion, not at its arrival", async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 0 }), 1);
  t.is(await ask.request(c, 'k', '1', 'bob', { ttl: 2, ttw: 0 }), 2);
  // Once carol (TTL 2, requested after bob queued) has expired, bob has waited longer than his TTL.
  t.is(await ask.request(c, 'k', '2', 'carol', { ttl: 2 }), 1);
  await pollUntil('carol to expire', async () => ((await ask.findOwner(c, 'k', '2')) === '' ? true : undefined));
  t.deepEqual(await pipeline(c, req.release('k', '1', 'alice'), req.findOwner('k', '1')), [1, 'bob']);
  // A marker with TTL 1 requested after the promotion expires before bob's TTL 2 from promotion.
  t.is(await ask.request(c, 'k', 'marker', 'm', { ttl: 1 }), 1);
  await pollUntil('the marker to expire', async () => ((await ask.findOwner(c, 'k', 'marker')) === '' ? true : undefined));
  t.is(await ask.findOwner(c, 'k', '1'), 'bob');
});

test('list order is queue creation order, not sorted: indexes as first requested, each queue in its order', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  // Created z, a, m, 0 — neither sorted nor reverse-sorted — with waiters interleaved.
  t.deepEqual(await enqueue(c, ['k', 'z', 'u1'], ['k', 'a', 'u2'], ['k', 'z', 'u3'], ['k', 'm', 'u4'], ['k', 'a', 'u5'], ['k', '0', 'u6']), [1, 1, 2, 1, 2, 1]);
  t.deepEqual(
    (await ask.list(c, 'k')).map((e) => `${e.index}:${e.owner}`),
    ['z:u1', 'z:u3', 'a:u2', 'a:u5', 'm:u4', '0:u6'],
  );
});

test('an index emptied and taken again lists as newly created, behind the indexes created meanwhile', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.deepEqual(await enqueue(c, ['k', 'a', 'u1'], ['k', 'b', 'u2'], ['k', 'c', 'u3']), [1, 1, 1]);
  // Released and taken again at once (well within the second an emptied slot lingers).
  t.is(await ask.release(c, 'k', 'a', 'u1'), 1);
  t.is(await ask.request(c, 'k', 'a', 'u4'), 1);
  t.deepEqual(
    (await ask.list(c, 'k')).map((e) => `${e.index}:${e.owner}`),
    ['b:u2', 'c:u3', 'a:u4'],
  );
});

test("an index that is literally '*' can be released only with '*', which takes every index of the key", async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.deepEqual(await enqueue(c, ['k', '*', 'alice'], ['k', 'x', 'alice']), [1, 1]);
  t.is(await ask.release(c, 'k', '*', 'alice'), 2);
  t.is(await ask.findOwner(c, 'k', '*'), '');
  t.is(await ask.findOwner(c, 'k', 'x'), '');
});
