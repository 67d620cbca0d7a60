import test, { type ExecutionContext } from 'ava';
import { spawn } from 'node:child_process';
import { access, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bounded } from '../helpers/bounded.js';
import { DEFAULT_WAIT_MS, LOOPBACK_HOSTS, serverArgs, serverFiles, spawnCli, startServer, tempDir } from '../helpers/serverProcess.js';
import { ask, req, pipeline } from '../helpers/wire.js';

// The server's files at start: damaged lock files refused, unwritable files found before serving,
// one server per lock file (pid file), leftovers of killed saves removed.

async function dirWithHosts(t: ExecutionContext): Promise<string> {
  const dir = await tempDir(t);
  await writeFile(serverFiles(dir).hostsFile, LOOPBACK_HOSTS);
  return dir;
}

/** Runs the CLI to its exit; `args` replace the standard file arguments' values where given. */
async function runToExit(t: ExecutionContext, dir: string, extra: readonly string[] = []) {
  const proc = spawnCli(t, [...serverArgs(dir), ...extra], dir);
  const exit = await proc.waitForExit();
  return { code: exit.code, proc };
}

/** The pid of a process that has certainly exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
  await bounded(new Promise((resolve) => child.once('exit', resolve)), DEFAULT_WAIT_MS, 'a short process to exit');
  return child.pid!;
}

const exists = (path: string): Promise<boolean> =>
  access(path).then(
    () => true,
    () => false,
  );

test('a 0-byte lock file stops the start (exit 1, file:1), and ends with event=exit code=1', async (t) => {
  const dir = await dirWithHosts(t);
  const { lockFile } = serverFiles(dir);
  await writeFile(lockFile, '');
  const { code, proc } = await runToExit(t, dir);
  t.is(code, 1);
  const failed = await proc.event('start-failed');
  t.true(failed.fields.error!.startsWith(`${lockFile}:1: `), failed.line);
  t.is(proc.events.at(-1)?.line.replace(/^ts=\S+ /, ''), 'event=exit code=1');
  t.is(proc.eventsNamed('started').length, 0);
});

test('a saved lock file cut at a line boundary stops the start and is left alone', async (t) => {
  const server = await startServer(t);
  const client = await server.accepted();
  await pipeline(client, req.request('k', '1', 'alice'), req.request('k', '2', 'bob'), req.request('k', '3', 'carol'));
  server.signal('SIGTERM');
  t.is((await server.waitForExit()).code, 0);
  const whole = await readFile(server.lockFile, 'latin1');
  t.regex(whole, /\nend 3\n$/);
  // The last entry and the end line lost, as a crash of the disk or a careless edit would.
  const cut = whole.split('\n').slice(0, -3).join('\n') + '\n';
  await writeFile(server.lockFile, cut, 'latin1');
  const { code, proc } = await runToExit(t, server.dir);
  t.is(code, 1);
  t.regex((await proc.event('start-failed')).fields.error!, new RegExp(`^${server.lockFile}:\\d+: .*cut short`));
  t.is(await readFile(server.lockFile, 'latin1'), cut);
});

test('a version 1 lock file (no end line) is loaded, and the log says it could not be checked', async (t) => {
  const dir = await dirWithHosts(t);
  await writeFile(serverFiles(dir).lockFile, 'lockserver-locks 1\nusers 42 alice 10 30 60 owner never\n');
  const server = await startServer(t, { dir });
  const unverified = await server.event('lock-file-unverified');
  t.like(unverified.fields, { file: server.lockFile, version: '1', entries: '1' });
  t.is(await ask.findOwner(await server.accepted(), 'users', '42'), 'alice');
  server.signal('SIGTERM');
  await server.waitForExit();
  t.regex(await readFile(server.lockFile, 'latin1'), /^lockserver-locks 4\nhighest-token \d+\n[^]*\nend 1\n$/);
});

test('a lock file in a missing directory stops the start before serving, naming it', async (t) => {
  const dir = await dirWithHosts(t);
  const lockFile = join(dir, 'missing', 'locks');
  const { code, proc } = await runToExit(t, dir, ['--lock-file', lockFile]);
  t.is(code, 1);
  const { error } = (await proc.event('start-failed')).fields;
  t.is(error, `cannot write lock file ${lockFile}: directory ${join(dir, 'missing')} does not exist`);
  t.is(proc.eventsNamed('started').length, 0);
});

test('a stat file that cannot be written stops the start before serving, naming it', async (t) => {
  const dir = await dirWithHosts(t);
  // A regular file where the directory should be: refused even for root, unlike a chmod.
  await writeFile(join(dir, 'plain'), '');
  const statFile = join(dir, 'plain', 'stats');
  const { code, proc } = await runToExit(t, dir, ['--stat-file', statFile]);
  t.is(code, 1);
  t.is((await proc.event('start-failed')).fields.error, `cannot write stat file ${statFile}: ${join(dir, 'plain')} is not a directory`);
  t.false(await exists(serverFiles(dir).lockFile + '.pid'), 'nothing was claimed');
});

test('a second server on the same lock file refuses to start, naming the file and the holder', async (t) => {
  const first = await startServer(t);
  const pidFile = first.lockFile + '.pid';
  t.is(await readFile(pidFile, 'utf8'), `${first.child.pid}\n`);
  const { code, proc } = await runToExit(t, first.dir);
  t.is(code, 1);
  t.is(
    (await proc.event('start-failed')).fields.error,
    `lock file ${first.lockFile} is in use by another lockserver (pid ${first.child.pid}, recorded in ${pidFile})`,
  );
  // The first one is untouched: it still serves and still owns the pid file, until its end.
  t.deepEqual(await ask.stats(await first.accepted()).then((s) => s.acceptedConnections), 1);
  first.signal('SIGTERM');
  t.is((await first.waitForExit()).code, 0);
  t.false(await exists(pidFile), 'noble death gives the lock file up');
});

test('the pid file of a server killed by SIGKILL is stale: the next server replaces it and says so', async (t) => {
  const first = await startServer(t);
  const client = await first.accepted();
  await pipeline(client, req.request('k', '1', 'alice'));
  first.signal('SIGUSR1');
  await first.nextEvent('locks-saved');
  const deadPid = first.child.pid!;
  await first.kill();
  t.true(await exists(first.lockFile + '.pid'), 'SIGKILL leaves the pid file');
  const second = await startServer(t, { dir: first.dir });
  t.like((await second.event('stale-pid-file-replaced')).fields, { file: first.lockFile + '.pid', dead_pid: String(deadPid) });
  t.is((await second.event('started')).fields.restored, '1');
  t.is(await readFile(first.lockFile + '.pid', 'utf8'), `${second.child.pid}\n`);
});

test('temporary files left by saves of dead processes are removed at start; others are left', async (t) => {
  const dir = await dirWithHosts(t);
  const dead = await deadPid();
  const leftovers = [`.locks.${dead}.0.tmp`, `.locks.${dead}.7.tmp`, `.stats.${dead}.3.tmp`];
  const kept = [`.locks.${process.pid}.0.tmp`, '.locks.x.0.tmp', `.other.${dead}.0.tmp`, 'locks.bak'];
  for (const name of [...leftovers, ...kept]) await writeFile(join(dir, name), 'half a save');
  await mkdir(join(dir, 'sub'));
  const server = await startServer(t, { dir });
  const removed = await server.event('leftovers-removed');
  t.like(removed.fields, { count: '3', bytes: String(3 * 'half a save'.length) });
  t.deepEqual(removed.fields.files!.split(',').sort(), [...leftovers].sort());
  t.deepEqual((await readdir(dir)).sort(), [...kept, 'hosts', 'locks.pid', 'sub'].sort());
});
