import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { loadLockFile } from '../../src/files/lockFile.js';
import { FakeClock } from '../doubles/FakeClock.js';
import { Daemon, EXIT_INTERNAL_ERROR } from '../../src/server/Daemon.js';
import { silentLogger } from '../../src/runtime/Logger.js';

async function startDaemon(): Promise<{ daemon: Daemon; lockFile: string; exits: number[] }> {
  const dir = await mkdtemp(join(tmpdir(), 'daemon-'));
  const hostsFile = join(dir, 'hosts');
  await writeFile(hostsFile, '127.0.0.1\n');
  const lockFile = join(dir, 'state', 'locks');
  await mkdir(dirname(lockFile));
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
    { clock: new FakeClock(), logger: silentLogger, exit: (code) => exits.push(code) },
  );
  return { daemon, lockFile, exits };
}

test('a fatal internal error saves every lock, then exits 70', async (t) => {
  const { daemon, lockFile, exits } = await startDaemon();
  await daemon.service.request({ key: 'k', index: 'i', owner: 'survivor', ttl: 0, ttw: 0, priority: 3 }, true);
  await daemon.fatal(new Error('an impossible state'));
  t.deepEqual(exits, [EXIT_INTERNAL_ERROR]);
  t.deepEqual(
    (await loadLockFile(lockFile))?.map((l) => l.owner),
    ['survivor'],
  );
});

test('a failed final save turns a clean shutdown into exit 1', async (t) => {
  const { daemon, lockFile, exits } = await startDaemon();
  // The lock file's directory vanishes while the server runs, so the final save cannot succeed.
  await rm(dirname(lockFile), { recursive: true });
  await daemon.nobleDeath('test', 0);
  t.deepEqual(exits, [1]);
});
