import test from 'ava';
import { readFile } from 'node:fs/promises';
import { parseLockFile } from '../../src/files/lockFile.js';
import { Command, LossReason, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import { decodeReply, type ReplyOf } from '../../src/protocol/decodeReply.js';
import type { FencedPosition, QueueView, Request } from '../../src/protocol/messages.js';
import { get, sample } from '../helpers/metrics.js';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, bytes, call, frames, hex, pipeline, readReply, req } from '../helpers/wire.js';

// Waiting without polling over a real server process: acquire-and-wait (0x0B) answered at the
// grant, the loss notice (0x0C) answered at the loss, the detailed list (0x0D), and --lock-delay.
// A wait is never asserted by timing: a command pipelined behind it on the same connection is
// answered only after it, so the order of the bytes shows that the wait held until its event.

const NO_TOKEN = '0000000000000000';

function acquireWait(
  key: string,
  index: string,
  owner: string,
  { ttl = 0, ttw = 0, priority = 0, waitMs = NO_WAIT_BOUND } = {},
): Request & { command: typeof Command.AcquireWait } {
  return { command: Command.AcquireWait, key, index, owner, ttl, ttw, priority, waitMs };
}

function awaitLoss(key: string, index: string, owner: string): Request & { command: typeof Command.AwaitLoss } {
  return { command: Command.AwaitLoss, key, index, owner };
}

function queues(client: RawClient, key: string): Promise<QueueView[]> {
  return call(client, { command: Command.ListDetailed, key });
}

/**
 * Sends `request` on `client` and returns once the server has read it (its stats counter `field`
 * moved, read on `observer`): a command that waits gives no reply to await, and on a single node
 * a command is counted and carried out in the same turn. Returns the reply to come.
 */
async function sentAndRead<C extends Command>(
  client: RawClient,
  observer: RawClient,
  request: Request & { command: C },
  field: 'lockRequests' | 'contenderLookups',
): Promise<{ reply: Promise<ReplyOf[C]> }> {
  const before = (await ask.stats(observer))[field];
  client.send(frames(request));
  await pollUntil(`${request.command} to be read`, async () => ((await ask.stats(observer))[field] > before ? true : undefined));
  return { reply: readReply(client, request.command) };
}

/** Sends an acquire-and-wait, then a find-owner behind it on the same connection; both replies, in order. */
async function waitThenFindOwner(client: RawClient, wait: Request & { command: typeof Command.AcquireWait }): Promise<[FencedPosition, string]> {
  client.send(frames(wait, req.findOwner(wait.key, wait.index)));
  const granted = await readReply(client, Command.AcquireWait);
  return [granted, await readReply(client, Command.FindOwner)];
}

test('0x0B in literal bytes: a free lock is granted at once with its token; a taken one is answered at the release that grants it, and the replies behind it wait', async (t) => {
  const server = await startServer(t);
  const alice = await server.accepted();
  // 0x0B: the 0x0A layout (key "user", index "42", owner "alice", TTL 30, TTW 60, priority 10), then wait 0xFFFFFFFF (no bound).
  alice.send(bytes(0x0b, 4, 'user', 2, '42', 5, 'alice', 0x00, 0x1e, 0x00, 0x3c, 0x0a, 0xff, 0xff, 0xff, 0xff));
  const granted = await alice.read(10);
  t.is(hex(granted.subarray(0, 2)), '0001');
  const aliceToken = decodeReply(Command.AcquireWait, granted).token;
  t.true(aliceToken > 0);

  const bob = await server.accepted();
  const answers = waitThenFindOwner(bob, acquireWait('user', '42', 'bob'));
  // bob is queued (position 2) while his reply waits; then alice releases.
  await pollUntil('bob to queue', async () => ((await ask.location(alice, 'user', '42', 'bob')) === 2 ? true : undefined));
  t.is(await ask.release(alice, 'user', '42', 'alice'), 1);
  const [bobGranted, ownerBehind] = await answers;
  t.is(bobGranted.position, 1);
  t.true(bobGranted.token > aliceToken);
  t.is(ownerBehind, 'bob', 'the find-owner sent behind the wait is answered after it, with bob');
});

test('0x0B with a bound: when it passes the entry stays queued and the reply says where (position 2, no token); a bound of 0 is 0x0A', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const waiter = await server.accepted();
  waiter.send(frames(acquireWait('k', '1', 'bob', { waitMs: 300 })));
  t.is(hex(await waiter.read(10)), '0002' + NO_TOKEN);
  t.is(await ask.location(c, 'k', '1', 'bob'), 2, 'bob is still in line');
  t.deepEqual(await call(waiter, acquireWait('k', '1', 'carol', { waitMs: 0 })), { position: 3, token: 0 });
  // Waiting again on the same entry (bob re-requests: renewed in place) and then promoted.
  const { reply: again } = await sentAndRead(waiter, c, acquireWait('k', '1', 'bob'), 'lockRequests');
  t.is(await ask.release(c, 'k', '1', 'alice'), 1);
  t.like(await again, { position: 1 });
});

test('0x0B promoted by an expiry, a release-all and a release with *; the owner told at once by 0x0C how it lost (4, 3, 2)', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  for (const [index, end, reason] of [
    ['expiry', async () => 0, LossReason.Expired],
    ['all', () => ask.releaseAll(c, 'alice'), LossReason.ReleasedAll],
    ['star', () => ask.release(c, 'k', '*', 'alice'), LossReason.ReleasedKey],
  ] as const) {
    t.is(await ask.request(c, 'k', index, 'alice', { ttl: index === 'expiry' ? 1 : 0 }), 1);
    const owner = await server.accepted();
    const { reply: loss } = await sentAndRead(owner, c, awaitLoss('k', index, 'alice'), 'contenderLookups');
    const waiter = await server.accepted();
    const grant = waitThenFindOwner(waiter, acquireWait('k', index, 'bob'));
    await pollUntil('bob to queue', async () => ((await ask.location(c, 'k', index, 'bob')) === 2 ? true : undefined));
    await end();
    t.is(await loss, reason, `${index}: the loss reason`);
    const [granted, ownerBehind] = await grant;
    t.is(granted.position, 1, `${index}: bob owns`);
    t.is(ownerBehind, 'bob');
    t.is(await ask.release(c, 'k', index, 'bob'), 1);
  }
  // 0x0C in literal bytes from a non-owner: 0 at once; released by name: 1.
  c.send(bytes(0x0c, 1, 'k', 1, '1', 6, 'nobody'));
  t.is(hex(await c.read(1)), '00');
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const owner = await server.accepted();
  const { reply: loss } = await sentAndRead(owner, c, awaitLoss('k', '1', 'alice'), 'contenderLookups');
  t.is(await ask.release(c, 'k', '1', 'alice'), 1);
  t.is(await loss, LossReason.Released);
});

test('a waiter whose TTW runs out is answered 0; one whose client closes while waiting leaves the queue at once', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const waiter = await server.accepted();
  t.deepEqual(await call(waiter, acquireWait('k', '1', 'bob', { ttw: 1 })), { position: 0, token: 0 });
  t.is(await ask.location(c, 'k', '1', 'bob'), 0);

  const quitter = await server.accepted();
  quitter.send(frames(acquireWait('k', '1', 'carol')));
  await pollUntil('carol to queue', async () => ((await ask.location(c, 'k', '1', 'carol')) === 2 ? true : undefined));
  // dave queued behind carol with a plain 0x02: the close moves him up.
  t.is(await ask.request(c, 'k', '1', 'dave'), 3);
  quitter.destroy();
  await pollUntil('carol to leave', async () => ((await ask.location(c, 'k', '1', 'carol')) === 0 ? true : undefined));
  t.is(await ask.location(c, 'k', '1', 'dave'), 2);
  // An entry granted before its client closed stays: closing cancels only a wait.
  const keeper = await server.accepted();
  t.like(await call(keeper, acquireWait('k', '2', 'erin')), { position: 1 });
  keeper.destroy();
  await pollUntil('the close to be seen', async () => ((await ask.stats(c)).activeConnections === 2 ? true : undefined));
  t.is(await ask.findOwner(c, 'k', '2'), 'erin');
});

test('SIGSYS while waiting: the waiter is still answered at the release, a new 0x0B gets 0 at once, and the drain ends with the last release', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const waiter = await server.accepted();
  const grant = waitThenFindOwner(waiter, acquireWait('k', '1', 'bob'));
  await pollUntil('bob to queue', async () => ((await ask.location(c, 'k', '1', 'bob')) === 2 ? true : undefined));
  const drainStarted = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await drainStarted;
  t.deepEqual(await call(c, acquireWait('k', '2', 'carol')), { position: 0, token: 0 });
  t.is(await ask.release(c, 'k', '1', 'alice'), 1);
  t.like((await grant)[0], { position: 1 });
  const shutdown = server.nextEvent('shutdown');
  t.is(await ask.release(waiter, 'k', '1', 'bob'), 1);
  t.is((await shutdown).fields.reason, 'drained');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
});

test('0x0D in literal bytes: each queue with its lock-delay left, each entry with its time left and token', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  const [alice] = (await pipeline(
    c,
    { command: Command.RequestFenced, key: 'k', index: '1', owner: 'alice', ttl: 0, ttw: 0, priority: 0 },
    req.request('k', '1', 'bob', { ttl: 5, ttw: 0, priority: 3 }),
  )) as [FencedPosition];
  c.send(bytes(0x0d, 1, 'k'));
  const reply = await readReply(c, Command.ListDetailed);
  t.deepEqual(reply, [
    {
      index: '1',
      heldForMs: 0,
      entries: [
        { priority: 0, ttl: 0, ttw: 0, index: '1', owner: 'alice', isOwner: true, remainingMs: null, token: alice.token },
        { priority: 3, ttl: 5, ttw: 0, index: '1', owner: 'bob', isOwner: false, remainingMs: null, token: 0 },
      ],
    },
  ]);
  t.deepEqual(await queues(c, 'nothing'), []);
});

test('--lock-delay: an expired owner holds its lock back (0x0D and the metrics show it), then the waiter is granted; a release holds nothing back', async (t) => {
  const server = await startServer(t, { args: ['--lock-delay', '2', '--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  t.is(server.eventsNamed('started')[0]!.fields.lock_delay_s, '2');
  const metricsPort = Number((await server.event('metrics-started')).fields.port);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice', { ttl: 1 }), 1);
  const waiter = await server.accepted();
  const grant = waitThenFindOwner(waiter, acquireWait('k', '1', 'bob'));
  const held = await pollUntil('alice to expire', async () => {
    const [queue] = await queues(c, 'k');
    return queue !== undefined && queue.entries[0]?.isOwner === false ? queue : undefined;
  });
  // Nobody owns it, bob waits first in line, and the lock is held back for most of the delay.
  t.true(held.heldForMs > 0 && held.heldForMs <= 2_000, `held for ${held.heldForMs} ms`);
  t.is(await ask.findOwner(c, 'k', '1'), '');
  const scrape = await get(metricsPort, '/metrics');
  const stillHeld = (await queues(c, 'k'))[0]?.heldForMs ?? 0;
  if (stillHeld > 0) t.is(sample(scrape.body, 'lockserver_locks_held_back'), 1);
  t.is(sample(scrape.body, 'lockserver_lock_ends_total{how="expired"}'), 1);
  const [granted, ownerBehind] = await grant;
  t.is(granted.position, 1);
  t.is(ownerBehind, 'bob');
  // A release is no expiry: carol is granted bob's lock in the same turn.
  const carol = await server.accepted();
  const carolGrant = waitThenFindOwner(carol, acquireWait('k', '1', 'carol'));
  await pollUntil('carol to queue', async () => ((await ask.location(c, 'k', '1', 'carol')) === 2 ? true : undefined));
  t.is(await ask.release(waiter, 'k', '1', 'bob'), 1);
  t.is((await carolGrant)[1], 'carol');
  const after = (await get(metricsPort, '/metrics')).body;
  t.is(sample(after, 'lockserver_lock_ends_total{how="released"}'), 1);
  t.is(sample(after, 'lockserver_locks_held_back'), 0);
  t.is(sample(after, 'lockserver_lock_wait_seconds_count'), 3, 'alice at once, bob and carol after waiting');
});

test('a client that half-closes while waiting (as `nc -N` does) gives the wait up: the replies before it come, then the close; its entry leaves the queue', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const waiter = await server.accepted();
  waiter.sendAndEnd(frames(req.findOwner('k', '1'), acquireWait('k', '1', 'bob'), req.findOwner('k', '1')));
  const rest = await waiter.readUntilClose();
  t.is(hex(rest), hex(bytes(5, 'alice')), 'the find-owner before the wait, nothing after');
  await pollUntil('bob to leave', async () => ((await ask.location(c, 'k', '1', 'bob')) === 0 ? true : undefined));
  t.is(await ask.release(c, 'k', '1', 'alice'), 1);
  t.is(await ask.findOwner(c, 'k', '1'), '');
});

test('SIGTERM while waiting: the process ends at once, the wait unanswered, and the waiting entry is saved to keep its place', async (t) => {
  const server = await startServer(t);
  const c = await server.accepted();
  t.is(await ask.request(c, 'k', '1', 'alice'), 1);
  const waiter = await server.accepted();
  waiter.send(frames(acquireWait('k', '1', 'bob')));
  await pollUntil('bob to queue', async () => ((await ask.location(c, 'k', '1', 'bob')) === 2 ? true : undefined));
  server.signal('SIGTERM');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  t.is((await waiter.readUntilClose()).length, 0);
  t.deepEqual(
    parseLockFile(await readFile(server.lockFile, 'latin1'), server.lockFile).map((e) => [e.owner, e.isOwner]),
    [
      ['alice', true],
      ['bob', false],
    ],
  );
});
