import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { pidFilePath } from '../../src/files/PidFile.js';
import { connectClient } from '../helpers/lockClient.js';
import { LoggedProcess, serverArgs, serverFiles, tempDir, LOOPBACK_HOSTS } from '../helpers/serverProcess.js';

// Under `npm start` the server is npm's child, not npm: npm passes SIGINT and SIGTERM on, SIGHUP
// kills npm. The server must never outlive npm, and its own pid (in the lock file's .pid file)
// is where the other signals go.

/** Whether `pid` runs (a zombie, dead but not yet reaped by whoever inherited it, does not). */
async function running(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
    return state !== 'Z' && state !== 'X';
  } catch {
    return false; // gone since
  }
}

/** `npm start -- <test server options>` in the package; npm and the server are killed when the test ends. */
async function npmStart(t: ExecutionContext): Promise<{ npm: LoggedProcess; dir: string; serverPid: number; port: number }> {
  const dir = await tempDir(t);
  await writeFile(serverFiles(dir).hostsFile, LOOPBACK_HOSTS);
  const npm = new LoggedProcess(spawn('npm', ['start', '--silent', '--', ...serverArgs(dir)], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'ignore', 'pipe'] }));
  let serverPid: number | undefined;
  t.teardown(async () => {
    await npm.kill();
    // Were the server to outlive npm, never leave it running.
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
  return { npm, dir, serverPid, port: Number(started.fields.port) };
}

test('npm start -- --port N: SIGTERM to npm reaches the server, which saves and exits 0', async (t) => {
  const { npm, dir } = await npmStart(t);
  const exit = npm.nextEvent('exit');
  npm.signal('SIGTERM');
  t.is((await exit).fields.code, '0');
  t.regex(await readFile(serverFiles(dir).lockFile, 'latin1'), /^lockserver-locks 4\nhighest-token \d+\n[^]*\nend 0\n$/);
});

test('SIGHUP kills npm; the server sees its parent gone, saves every lock and exits 0, leaving nothing running', async (t) => {
  const { npm, dir, serverPid, port } = await npmStart(t);
  const client = await connectClient(t, port);
  t.is(await client.request('jobs', 'nightly', 'alice', { ttl: 0 }), 1);
  const shutdown = npm.nextEvent('shutdown');
  npm.signal('SIGHUP');
  t.is((await shutdown).fields.reason, 'parent-exited');
  // npm's stderr pipe closes once its last writer, the server, has exited too.
  const npmExit = await npm.waitForExit();
  t.is(npmExit.signal, 'SIGHUP', 'npm itself died of the SIGHUP');
  t.is(npm.eventsNamed('exit')[0]?.fields.code, '0');
  t.regex(await readFile(serverFiles(dir).lockFile, 'latin1'), /\njobs nightly alice 0 0 30 owner never \d+\nend 1\n$/);
  t.false(await running(serverPid), 'no server left running');
});

test('kill -HUP $(cat <lock file>.pid) under npm start reloads the hosts file; npm runs on', async (t) => {
  const { npm, dir, serverPid } = await npmStart(t);
  const pidFile = pidFilePath(serverFiles(dir).lockFile);
  t.is(Number(await readFile(pidFile, 'latin1')), serverPid, 'the pid file names the server, as the started line does');
  await writeFile(serverFiles(dir).hostsFile, LOOPBACK_HOSTS + '10.0.0.0/8\n');
  const reloaded = npm.nextEvent('hosts-reloaded');
  process.kill(serverPid, 'SIGHUP');
  t.is((await reloaded).fields.entries, '3');
  t.true(npm.running);
});
