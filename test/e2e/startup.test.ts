import test, { type ExecutionContext } from 'ava';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LOOPBACK_HOSTS, serverArgs, serverFiles, spawnCli, startServer, tempDir } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// Start-up failures: bad files exit 1 naming file and line; bad command lines exit 2.

interface Outcome {
  readonly code: number | null;
  readonly stderr: string;
}

/** Runs the CLI with the standard test files plus `extra` arguments, and waits for it to exit. */
async function runToExit(t: ExecutionContext, dir: string, extra: readonly string[] = []): Promise<Outcome> {
  const proc = spawnCli(t, [...serverArgs(dir), ...extra], dir);
  const exit = await proc.waitForExit();
  return { code: exit.code, stderr: proc.stderr };
}

async function dirWithHosts(t: ExecutionContext, hosts = LOOPBACK_HOSTS): Promise<string> {
  const dir = await tempDir(t);
  await writeFile(serverFiles(dir).hostsFile, hosts);
  return dir;
}

function oneLine(t: ExecutionContext, stderr: string): string {
  const lines = stderr.split('\n').filter((line) => line.trim() !== '');
  t.is(lines.length, 1, `expected a one-line message, got:\n${stderr}`);
  return lines[0] ?? '';
}

test('a corrupt lock file stops the start with exit 1, naming the file and line, and is left alone', async (t) => {
  const dir = await dirWithHosts(t);
  const { lockFile } = serverFiles(dir);
  const corrupt = 'lockserver-locks 2\n# key index owner priority ttl ttw role remaining-ms\nk 1 alice 0 0 0 owner never\nk 1 bob 0 0\n';
  await writeFile(lockFile, corrupt);
  const { code, stderr } = await runToExit(t, dir);
  t.is(code, 1);
  t.true(stderr.includes(`${lockFile}:4`), stderr);
  t.false(stderr.includes('event=started'));
  t.is(await readFile(lockFile, 'utf8'), corrupt, 'the locks are not silently dropped');
});

test('a lock file without the header is refused at line 1', async (t) => {
  const dir = await dirWithHosts(t);
  const { lockFile } = serverFiles(dir);
  await writeFile(lockFile, 'this is not a lock file\n');
  const { code, stderr } = await runToExit(t, dir);
  t.is(code, 1);
  t.true(stderr.includes(`${lockFile}:1`), stderr);
});

test('an unreadable lock file (a directory) stops the start with exit 1, naming it', async (t) => {
  const dir = await dirWithHosts(t);
  const { lockFile } = serverFiles(dir);
  await mkdir(lockFile);
  const { code, stderr } = await runToExit(t, dir);
  t.is(code, 1);
  t.true(stderr.includes(lockFile), stderr);
});

test('a lock file written by hand (README format) is loaded', async (t) => {
  const dir = await dirWithHosts(t);
  await writeFile(
    serverFiles(dir).lockFile,
    'lockserver-locks 2\n# key index owner priority ttl ttw role remaining\nusers 42 alice 10 30 60 owner never\nusers 42 bob 5 30 60 waiter never\nodd%00key - %2D 1 2 3 owner never\nend 3\n',
  );
  const server = await startServer(t, { dir });
  t.is((await server.event('started')).fields.restored, '3');
  t.is(server.eventsNamed('lock-file-unverified').length, 0);
  const client = await server.accepted();
  t.deepEqual(await ask.list(client, 'users'), [
    { priority: 10, ttl: 30, ttw: 60, index: '42', owner: 'alice', isOwner: true },
    { priority: 5, ttl: 30, ttw: 60, index: '42', owner: 'bob', isOwner: false },
  ]);
  t.is(await ask.findOwner(client, 'odd\x00key', ''), '-');
});

test('a bad hosts file line stops the start with exit 1, naming the file and line', async (t) => {
  const dir = await dirWithHosts(t, '# allowlist\n127.0.0.1\n\n300.1.2.3\n');
  const { code, stderr } = await runToExit(t, dir);
  t.is(code, 1);
  // Two lines: the reason, then the exit, like every other end.
  const [failed, exit, ...rest] = stderr.split('\n').filter((line) => line.trim() !== '');
  t.regex(failed ?? '', new RegExp(`^ts=\\S+ event=start-failed error="${serverFiles(dir).hostsFile}:4: .*300\\.1\\.2\\.3`));
  t.regex(exit ?? '', /^ts=\S+ event=exit code=1$/);
  t.deepEqual(rest, []);
});

test('a missing hosts file stops the start with exit 1, naming it', async (t) => {
  const dir = await tempDir(t);
  const { code, stderr } = await runToExit(t, dir);
  t.is(code, 1);
  t.true(stderr.includes(serverFiles(dir).hostsFile), stderr);
});

const badCommandLine = test.macro({
  async exec(t, args: readonly string[], mention: string) {
    const dir = await dirWithHosts(t);
    const { code, stderr } = await runToExit(t, dir, args);
    t.is(code, 2);
    const line = oneLine(t, stderr);
    t.true(line.includes(mention), line);
  },
  title: (_, args: readonly string[]) => `exit 2 with a one-line message: ${args.join(' ')}`,
});

test(badCommandLine, ['--port', '70000'], '70000');
test(badCommandLine, ['--port', 'abc'], 'abc');
test(badCommandLine, ['--port', '-1'], '-1 is not between 0 and 65535');
test(badCommandLine, ['--port', '1x'], '"1x" is not a whole number from 0 to 65535');
test(badCommandLine, ['--max-connections', 'many'], 'many');
test(badCommandLine, ['--frame-timeout', '0'], '0');
test(badCommandLine, ['--no-such-option'], '--no-such-option');

test('a port in use stops the start with exit 1, naming the address and port', async (t) => {
  const dir = await dirWithHosts(t);
  const taken = createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const port = (taken.address() as AddressInfo).port;
  const proc = spawnCli(t, [...serverArgs(dir), '--port', String(port)], dir);
  t.is((await proc.waitForExit()).code, 1);
  t.regex((await proc.event('start-failed')).fields.error!, new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
  t.is(proc.events.at(-1)?.event, 'exit');
});

test('a final save that fails exits 1 with locks-save-failed (real process)', async (t) => {
  const dir = await dirWithHosts(t);
  const stateDir = join(dir, 'state');
  await mkdir(stateDir);
  const server = await startServer(t, { dir, args: ['--lock-file', join(stateDir, 'locks')] });
  t.is(await ask.request(await server.accepted(), 'k', '1', 'alice'), 1);
  // The lock file's directory vanishes while the server runs.
  await rm(stateDir, { recursive: true });
  const failed = server.nextEvent('locks-save-failed');
  server.signal('SIGTERM');
  t.is((await failed).fields.file, join(stateDir, 'locks'));
  t.is((await server.waitForExit()).code, 1);
  t.is(server.events.at(-1)?.line.replace(/^ts=\S+ /, ''), 'event=exit code=1');
});
