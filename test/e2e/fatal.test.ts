import test from 'ava';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseLockFile } from '../../src/files/lockFile.js';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { LOOPBACK_HOSTS, ServerProcess, serverFiles, tempDir } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// README: "A fatal internal error (an uncaught exception) logs event=fatal, attempts the same
// save, and exits 70." There is no way to make the shipped daemon throw without a backdoor, so
// a test-only launcher (test/helpers/fatalDaemon.ts) starts the compiled Daemon as the CLI does
// and throws an uncaught error when told to on stdin: the real process handlers do the rest.

const LAUNCHER = join(PACKAGE_ROOT, 'dist', 'test', 'helpers', 'fatalDaemon.js');

test('an uncaught exception in a real process logs event=fatal, saves every lock, and exits 70', async (t) => {
  const dir = await tempDir(t);
  const { hostsFile, lockFile, statFile } = serverFiles(dir);
  await writeFile(hostsFile, LOOPBACK_HOSTS);
  const child = spawn(process.execPath, [LAUNCHER, hostsFile, lockFile, statFile], { cwd: dir, stdio: ['pipe', 'ignore', 'pipe'] });
  const server = new ServerProcess(child, t, dir, hostsFile, lockFile, statFile);
  t.teardown(() => server.kill());
  server.port = Number((await server.event('started')).fields.port);
  const client = await server.accepted();
  t.is(await ask.request(client, 'k', '1', 'alice', { ttl: 0, ttw: 0 }), 1);
  t.is(await ask.request(client, 'k', '1', 'bob', { ttl: 0, ttw: 0 }), 2);

  child.stdin.write('throw\n');
  t.deepEqual(await server.waitForExit(), { code: 70, signal: null });
  const fatal = server.eventsNamed('fatal');
  t.is(fatal.length, 1);
  t.regex(fatal[0]!.fields.error ?? '', /an impossible state/);
  t.like(server.eventsNamed('locks-saved')[0]?.fields, { count: '2' });
  t.like(server.eventsNamed('exit')[0]?.fields, { code: '70' });
  const saved = parseLockFile(await readFile(lockFile, 'latin1'), lockFile);
  t.deepEqual(
    saved.map((lock) => [lock.owner, lock.isOwner]),
    [
      ['alice', true],
      ['bob', false],
    ],
  );
});
