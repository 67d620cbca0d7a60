import test from 'ava';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { LoggedProcess, serverArgs, serverFiles, tempDir, LOOPBACK_HOSTS } from '../helpers/serverProcess.js';
import { writeFile } from 'node:fs/promises';

// `npm start &` then `kill $!` signals npm: the server must get the signal and die nobly.

test('npm start -- --port N: SIGTERM to npm reaches the server, which saves and exits 0', async (t) => {
  const dir = await tempDir(t);
  await writeFile(serverFiles(dir).hostsFile, LOOPBACK_HOSTS);
  const npm = new LoggedProcess(spawn('npm', ['start', '--silent', '--', ...serverArgs(dir)], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'ignore', 'pipe'] }));
  let serverPid: number | undefined;
  t.teardown(async () => {
    await npm.kill();
    // Were the signal lost, the server would outlive npm: never leave it running.
    if (serverPid !== undefined) {
      try {
        process.kill(serverPid, 'SIGKILL');
      } catch {
        // Already gone, as it should be.
      }
    }
  });
  const started = await npm.event('started', () => true, 20_000);
  serverPid = Number(started.fields.pid);
  const exit = npm.nextEvent('exit');
  npm.signal('SIGTERM');
  t.is((await exit).fields.code, '0');
  t.regex(await readFile(serverFiles(dir).lockFile, 'latin1'), /^lockserver-locks 3\nhighest-token \d+\n[^]*\nend 0\n$/);
});
