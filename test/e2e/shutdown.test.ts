import test, { type ExecutionContext } from 'ava';
import { readFile } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { parseLockFile } from '../../src/files/lockFile.js';
import type { SavedLock } from '../../src/locks/LockService.js';
import { pollUntil } from '../helpers/poll.js';
import type { RawClient } from '../helpers/rawClient.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask, pipeline, req } from '../helpers/wire.js';

// Noble death (SIGINT, SIGTSTP, SIGTERM): save every lock, close, exit 0; a restart restores them.

const WEIRD_KEY = '\x00#%-\xff \n';

/** Queues with owners, waiters in priority order, TTL/TTW of every kind, and awkward bytes. */
const STATE: ReadonlyArray<[key: string, index: string, owner: string, ttl: number, ttw: number, priority: number]> = [
  ['k', '1', 'alice', 0, 0, 3],
  ['k', '1', 'bob', 30, 40, 1],
  ['k', '1', 'carol', 50, 60, 9],
  ['k', '1', 'dan', 500, 600, 1],
  ['k', '2', 'dave', 100, 0, 0],
  [WEIRD_KEY, '-', '', 65535, 65535, 255],
  [WEIRD_KEY, '*', '#', 7, 8, 0],
];

/** The entries of STATE as the lock file should hold them: queue by queue, owner first (times and tokens checked apart). */
const EXPECTED_SAVED: ReadonlyArray<Omit<SavedLock, 'remainingMs' | 'token'>> = [
  { key: 'k', index: '1', owner: 'alice', priority: 3, ttl: 0, ttw: 0, isOwner: true },
  { key: 'k', index: '1', owner: 'carol', priority: 9, ttl: 50, ttw: 60, isOwner: false },
  { key: 'k', index: '1', owner: 'bob', priority: 1, ttl: 30, ttw: 40, isOwner: false },
  { key: 'k', index: '1', owner: 'dan', priority: 1, ttl: 500, ttw: 600, isOwner: false },
  { key: 'k', index: '2', owner: 'dave', priority: 0, ttl: 100, ttw: 0, isOwner: true },
  { key: WEIRD_KEY, index: '-', owner: '', priority: 255, ttl: 65535, ttw: 65535, isOwner: true },
  { key: WEIRD_KEY, index: '*', owner: '#', priority: 0, ttl: 7, ttw: 8, isOwner: true },
];

async function fillState(t: ExecutionContext, client: RawClient): Promise<void> {
  const positions = await pipeline(client, ...STATE.map(([key, index, owner, ttl, ttw, priority]) => req.request(key, index, owner, { ttl, ttw, priority })));
  t.deepEqual(positions, [1, 2, 2, 4, 1, 1, 1]);
}

/** What a client sees of STATE: both lists and every entry's position. */
async function observe(client: RawClient): Promise<unknown> {
  return {
    k: await ask.list(client, 'k'),
    weird: await ask.list(client, WEIRD_KEY),
    positions: await pipeline(client, ...STATE.map(([key, index, owner]) => req.location(key, index, owner))),
    owners: await pipeline(client, req.findOwner('k', '1'), req.findOwner('k', '2'), req.findOwner(WEIRD_KEY, '-')),
    gauges: await ask.stats(client).then((s) => ({ owners: s.owners, contenders: s.contenders })),
  };
}

async function readSaved(server: ServerProcess): Promise<SavedLock[]> {
  return parseLockFile(await readFile(server.lockFile, 'latin1'), server.lockFile);
}

/** Sends `signal`, checks the orderly end, and returns what the lock file holds. */
async function nobleDeath(t: ExecutionContext, server: ServerProcess, signal: NodeJS.Signals): Promise<SavedLock[]> {
  const shutdown = server.nextEvent('shutdown');
  const saved = server.nextEvent('locks-saved');
  const exitEvent = server.nextEvent('exit');
  server.signal(signal);
  t.is((await shutdown).fields.reason, signal);
  t.is((await exitEvent).fields.code, '0');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  const locks = await readSaved(server);
  t.is((await saved).fields.count, String(locks.length));
  return locks;
}

const survivesRestart = test.macro({
  async exec(t, signal: NodeJS.Signals) {
    const server = await startServer(t);
    const client = await server.accepted();
    await fillState(t, client);
    const before = await observe(client);

    const locks = await nobleDeath(t, server, signal);
    await client.waitForClose();
    t.deepEqual(
      locks.map(({ remainingMs: _, token: __, ...entry }) => entry),
      EXPECTED_SAVED,
    );
    // Each owner's grant has its fencing token, distinct from the others'; a waiter has none.
    const ownerTokens = locks.filter((lock) => lock.isOwner).map((lock) => lock.token);
    t.true(ownerTokens.every((token) => token > 0));
    t.is(new Set(ownerTokens).size, ownerTokens.length);
    t.true(locks.filter((lock) => !lock.isOwner).every((lock) => lock.token === 0));
    for (const lock of locks) {
      // The phase that is running has at most its full time left; 0 means it never ends.
      const phaseSeconds = lock.isOwner ? lock.ttl : lock.ttw;
      if (phaseSeconds === 0) t.is(lock.remainingMs, null);
      else t.true(lock.remainingMs !== null && lock.remainingMs > 0 && lock.remainingMs <= phaseSeconds * 1000);
    }

    const restarted = await startServer(t, { dir: server.dir });
    t.is((await restarted.event('started')).fields.restored, String(EXPECTED_SAVED.length));
    const again = await restarted.accepted();
    t.deepEqual(await observe(again), before);
    // The restored queue behaves: releasing the owner promotes the highest-priority waiter.
    t.is(await ask.release(again, 'k', '1', 'alice'), 1);
    t.is(await ask.findOwner(again, 'k', '1'), 'carol');
  },
  title: (_, signal: NodeJS.Signals) => `${signal}: exit 0, every lock saved, restored on restart`,
});

test(survivesRestart, 'SIGINT');
test(survivesRestart, 'SIGTSTP');
test(survivesRestart, 'SIGTERM');

test('an empty table saves an empty lock file, and restarting from it starts empty', async (t) => {
  const server = await startServer(t);
  t.deepEqual(await nobleDeath(t, server, 'SIGTERM'), []);
  const restarted = await startServer(t, { dir: server.dir });
  t.is((await restarted.event('started')).fields.restored, '0');
  const client = await restarted.accepted();
  t.like(await ask.stats(client), { owners: 0, contenders: 0 });
});

test('a second signal during shutdown changes nothing: one save, one exit, code 0', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await fillState(t, client);
  server.signal('SIGINT');
  server.signal('SIGTERM');
  t.deepEqual(await server.waitForExit(), { code: 0, signal: null });
  t.is(server.eventsNamed('shutdown').length, 1);
  t.is(server.eventsNamed('exit').length, 1);
  t.is((await readSaved(server)).length, EXPECTED_SAVED.length);
});

test('time left is frozen while the server is down, then runs again after the restart', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await pipeline(client, req.request('k', '1', 'erin', { ttl: 2 }), req.request('k', '1', 'frank', { ttl: 0, ttw: 0 }));
  const [erin] = await nobleDeath(t, server, 'SIGTERM');
  t.like(erin, { owner: 'erin', isOwner: true });
  t.true(erin!.remainingMs !== null && erin!.remainingMs <= 2000);
  // Let more than erin's remaining time pass while the server is down: there is no event for
  // "time passes", so this one wait is a plain delay.
  await delay(erin!.remainingMs! + 500);
  const restarted = await startServer(t, { dir: server.dir });
  const again = await restarted.accepted();
  t.is(await ask.findOwner(again, 'k', '1'), 'erin');
  // ... and her clock runs again: she expires and frank is promoted.
  await pollUntil('erin to expire after the restart', async () => ((await ask.findOwner(again, 'k', '1')) === 'frank' ? true : undefined));
});
