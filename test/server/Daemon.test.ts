import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { loadLockFile, loadLockFileVersioned } from '../../src/files/lockFile.js';
import { TOKENS_PER_MS } from '../../src/locks/LocalLockService.js';
import type { FencedPosition } from '../../src/protocol/messages.js';
import { FakeClock } from '../doubles/FakeClock.js';
import { Daemon, EXIT_INTERNAL_ERROR } from '../../src/server/Daemon.js';
import { silentLogger } from '../../src/runtime/Logger.js';

/** Starts a daemon on loopback; it is shut down (if it has not ended already) when the test ends. */
async function startDaemon(
  t: ExecutionContext,
  { dir, wallClockMs }: { dir?: string; wallClockMs?: () => number } = {},
): Promise<{
  daemon: Daemon;
  dir: string;
  lockFile: string;
  exits: number[];
}> {
  dir ??= await mkdtemp(join(tmpdir(), 'daemon-'));
  const hostsFile = join(dir, 'hosts');
  await writeFile(hostsFile, '127.0.0.1\n');
  const lockFile = join(dir, 'state', 'locks');
  await mkdir(dirname(lockFile), { recursive: true });
  const exits: number[] = [];
  const daemon = await Daemon.start(
    {
      port: 0,
      listen: '127.0.0.1',
      hostsFile,
      lockFile,
      statFile: join(dir, 'stats'),
      maxConnections: 10,
      frameTimeoutSeconds: 10,
      maxLocks: 100,
    },
    { clock: new FakeClock(), logger: silentLogger, exit: (code) => exits.push(code), wallClockMs },
  );
  t.teardown(() => daemon.nobleDeath('test-ended', 0));
  return { daemon, dir, lockFile, exits };
}

test('a fatal internal error saves every lock, then exits 70', async (t) => {
  const { daemon, lockFile, exits } = await startDaemon(t);
  await daemon.service.request({ key: 'k', index: 'i', owner: 'survivor', ttl: 0, ttw: 0, priority: 3 }, true);
  await daemon.fatal(new Error('an impossible state'));
  t.deepEqual(exits, [EXIT_INTERNAL_ERROR]);
  t.deepEqual(
    (await loadLockFile(lockFile))?.map((l) => l.owner),
    ['survivor'],
  );
});

test('a failed final save turns a clean shutdown into exit 1', async (t) => {
  const { daemon, lockFile, exits } = await startDaemon(t);
  // The lock file's directory vanishes while the server runs, so the final save cannot succeed.
  await rm(dirname(lockFile), { recursive: true });
  await daemon.nobleDeath('test', 0);
  t.deepEqual(exits, [1]);
});

/** A request with fence (0x0A) for `owner` on key k, index `index`, that never expires. */
async function requestFenced(daemon: Daemon, index: string, owner: string): Promise<FencedPosition> {
  return daemon.service.requestFenced({ key: 'k', index, owner, ttl: 0, ttw: 0, priority: 0 }, true);
}

const FLOOR_AT_1S = 1_000 * TOKENS_PER_MS;

test('fencing tokens start above the wall clock times TOKENS_PER_MS, and are saved with their high-water', async (t) => {
  const { daemon, dir, lockFile } = await startDaemon(t, { wallClockMs: () => 1_000 });
  t.deepEqual(await requestFenced(daemon, 'a', 'a'), { position: 1, token: FLOOR_AT_1S + 1 });
  t.deepEqual(await requestFenced(daemon, 'b', 'b'), { position: 1, token: FLOOR_AT_1S + 2 });
  await daemon.service.release('k', 'b', 'b');
  await daemon.nobleDeath('test', 0);
  const saved = await loadLockFileVersioned(lockFile);
  t.is(saved?.highestToken, FLOOR_AT_1S + 2, 'the released grant counts too');
  t.deepEqual(
    saved?.locks.map((l) => [l.owner, l.token]),
    [['a', FLOOR_AT_1S + 1]],
  );

  // A wall clock set back: the restored owner keeps its token, and the next grant goes on above the file's high-water.
  const { daemon: restarted } = await startDaemon(t, { dir, wallClockMs: () => 10 });
  t.is(await restarted.service.fence('k', 'a', 'a'), FLOOR_AT_1S + 1);
  t.deepEqual(await requestFenced(restarted, 'b', 'c'), { position: 1, token: FLOOR_AT_1S + 3 });
});

test('a restart whose wall clock moved on starts its tokens above it, whatever the lock file says', async (t) => {
  const { daemon, dir } = await startDaemon(t, { wallClockMs: () => 1_000 });
  t.deepEqual(await requestFenced(daemon, 'i', 'a'), { position: 1, token: FLOOR_AT_1S + 1 });
  await daemon.nobleDeath('test', 0);
  const { daemon: restarted } = await startDaemon(t, { dir, wallClockMs: () => 2_000 });
  t.is(await restarted.service.fence('k', 'i', 'a'), FLOOR_AT_1S + 1);
  t.deepEqual(await requestFenced(restarted, 'j', 'b'), { position: 1, token: 2_000 * TOKENS_PER_MS + 1 });
});
