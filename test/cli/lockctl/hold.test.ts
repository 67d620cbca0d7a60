import test from 'ava';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { bounded } from '../../helpers/bounded.js';
import { connectClient } from '../../helpers/lockClient.js';
import { LOCKCTL_PATH, lockctl, startLockctl } from '../../helpers/lockctl.js';
import { lockctlWithEnv } from '../../helpers/lockctlProcess.js';
import { pollUntil } from '../../helpers/poll.js';
import { startServer, tempDir } from '../../helpers/serverProcess.js';
import { processTree } from '../../../src/cli/lockctl/processTree.js';
import { gone, holdQueuedBehindFirst, killIfRunning, ownerOf, processesUnder, stdoutLine, watchdogOf } from './holdProcesses.js';

const node = process.execPath;

test('hold runs the command while owning the lock, releases it after, and exits with its code', async (t) => {
  const server = await startServer(t);
  const port = String(server.port);
  // The command asks the server (through a nested lockctl) who owns the lock, then exits 3.
  const script = `const r = require('child_process').spawnSync(process.execPath, [${JSON.stringify(LOCKCTL_PATH)}, '-p', '${port}', 'owner', 'jobs', 'nightly'], { encoding: 'utf8' }); process.stdout.write('owner seen: ' + r.stdout); process.exit(3);`;
  const hold = startLockctl(['-p', port, 'hold', 'jobs', 'nightly', 'worker-1', '--', node, '-e', script]);
  const run = await hold.result;
  t.is(run.code, 3, run.stderr);
  t.regex(run.stdout, new RegExp(`^owner seen: ${ownerOf('worker-1', hold.child)} \\(token \\d+\\)\\n$`));
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'nightly'), Buffer.alloc(0), 'released after the command');
  t.like(await lockctl(['-p', port, 'hold', 'jobs', 'nightly', 'w', '--', node, '-e', 'process.exit(0)']), { code: 0 });
});

test('hold waits for the current owner to let go before running the command', async (t) => {
  const { client, hold } = await holdQueuedBehindFirst(t, [], [node, '-e', 'process.exit(0)']);
  t.is(await client.release('jobs', 'n', 'first'), 1);
  t.like(await hold.result, { code: 0 });
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0));
});

test('hold --wait gives up with exit 1 when the lock stays taken, leaving no waiting entry', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const run = await lockctl(['-p', String(server.port), 'hold', '--wait', '0', 'jobs', 'n', 'second', '--', node, '-e', '']);
  t.is(run.code, 1);
  t.is(run.stderr, 'lockctl: jobs/n is taken (--wait 0: no waiting)\n');
  t.deepEqual(
    (await client.list('jobs')).map((entry) => entry.owner.toString()),
    ['first'],
  );
  // A limit is told back in the seconds it was given in.
  const later = await lockctl(['-p', String(server.port), 'hold', '--wait', '0.3', 'jobs', 'n', 'second', '--', node, '-e', '']);
  t.is(later.code, 1);
  t.is(later.stderr, 'lockctl: jobs/n was not ours within --wait 0.3 s\n');
});

test("hold --json prints that the lock was acquired, with its token, then the command's exit status", async (t) => {
  const server = await startServer(t);
  const hold = startLockctl(['-p', String(server.port), '--json', 'hold', 'jobs', 'n', 'me', '--', node, '-e', 'process.exit(5)']);
  const run = await hold.result;
  t.is(run.code, 5, run.stderr);
  const owner = ownerOf('me', hold.child);
  const lines = run.stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const token = lines[0]!.token as number;
  t.true(token > 0);
  t.deepEqual(lines, [
    { acquired: true, token, owner, ownerHex: Buffer.from(owner).toString('hex') },
    { exitCode: 5, lockLost: false },
  ]);
});

test('hold gives the command the lock in LOCKCTL_TOKEN, LOCKCTL_KEY, LOCKCTL_INDEX and LOCKCTL_OWNER', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const earlier = await client.requestFenced('jobs', 'n\x00', 'o\\');
  t.is(await client.release('jobs', 'n\x00', 'o\\'), 1);
  const script = 'printf "%s\\n" "$LOCKCTL_TOKEN $LOCKCTL_KEY $LOCKCTL_INDEX $LOCKCTL_OWNER"';
  // Bytes as lockctl prints them: a NUL and the backslash as \xHH.
  const hold = startLockctl(['-p', String(server.port), '--json', 'hold', 'jobs', 'n\\x00', 'o\\x5c', '--', 'sh', '-c', script]);
  const run = await hold.result;
  t.is(run.code, 0, run.stderr);
  const [acquired, echoed] = run.stdout.split('\n');
  const { token } = JSON.parse(acquired!) as { token: number };
  t.is(echoed, `${token} jobs n\\x00 ${ownerOf('o\\x5c', hold.child)}`);
  t.true(token > earlier.token, 'the grant after an earlier one has a greater token');
});

test('hold --json says why the lock was not acquired', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const run = await lockctl(['-p', String(server.port), '--json', 'hold', '--wait', '0', 'jobs', 'n', 'me', '--', node, '-e', '']);
  t.is(run.code, 1);
  t.deepEqual(JSON.parse(run.stdout), { acquired: false, reason: 'timeout' });
});

test('Ctrl-C while waiting exits 130 and leaves no waiting entry', async (t) => {
  const { client, hold, owner } = await holdQueuedBehindFirst(t, [], [node, '-e', '']);
  hold.child.kill('SIGINT');
  t.like(await hold.result, { code: 130 });
  t.is(await client.location('jobs', 'n', owner), 0);
});

test('the watchdog is started while hold waits, so the command starts at the grant without starting Node; it goes when hold gives up', async (t) => {
  const { client, hold, owner } = await holdQueuedBehindFirst(t, [], [node, '-e', '']);
  const watchdog = await watchdogOf(hold.child);
  hold.child.kill('SIGINT');
  t.like(await hold.result, { code: 130 });
  await pollUntil('the watchdog to end with hold', async () =>
    (await processTree(watchdog)) === undefined || (await processTree(watchdog))!.size === 0 ? true : undefined,
  );
  t.is(await client.location('jobs', 'n', owner), 0);
});

test('a command that cannot be found exits 127, and the lock is released', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '--', 'no-such-command-for-lockctl-tests']);
  t.is(run.code, 127);
  t.regex(run.stderr, /cannot run no-such-command-for-lockctl-tests/);
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0));
});

test('a watchdog killed while hold waits: at the grant the command does not run (it would be unwatched); exit 70, the lock released', async (t) => {
  const marker = join(await tempDir(t), 'ran');
  const { client, hold } = await holdQueuedBehindFirst(t, [], ['sh', '-c', `echo ran > ${marker}`]);
  const watchdog = await watchdogOf(hold.child);
  const [trampoline] = await pollUntil('the command to wait at its gate', async () => {
    const found = await processesUnder(hold.child, 'lockctl-hold');
    return found.length === 1 ? found : undefined;
  });
  process.kill(watchdog, 'SIGKILL');
  await pollUntil('hold to reap its watchdog', async () => ((await gone(watchdog)) ? true : undefined));
  t.is(await client.release('jobs', 'n', 'first'), 1);
  const run = await hold.result;
  t.is(run.code, 70);
  t.regex(run.stderr, /watchdog running sh ended \(SIGKILL\)/);
  await pollUntil('the command at its gate to end without running', async () => ((await gone(trampoline!)) ? true : undefined));
  await t.throwsAsync(readFile(marker), { code: 'ENOENT' }, 'the command never ran');
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0), 'released');
});

test('a watchdog killed while the command runs: lockctl stops the command and what it started, then releases the lock; exit 70', async (t) => {
  const server = await startServer(t);
  // The command is a shell; the node process under it is what a SIGTERM to the shell alone would miss.
  const shellCommand = `${node} -e "${waitingCommand('exit').replaceAll('"', '\\"')}"`;
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '-c', shellCommand]);
  const ready = await stdoutLine(hold.child, /^ready \d+$/);
  const commandPid = Number(ready.slice('ready '.length));
  t.teardown(() => killIfRunning(commandPid));
  process.kill(await watchdogOf(hold.child), 'SIGKILL');
  // lockctl's stdout closes once its last holder has ended: lockctl and the node process too.
  const run = await hold.result;
  t.is(run.code, 70);
  t.regex(run.stderr, /watchdog running \S+ ended \(SIGKILL\) before reporting on it; stopping pid \d+ and what it started/);
  t.true(run.stdout.includes(`SIGTERM ${commandPid}\n`), run.stdout);
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0), 'released');
});

test('a command found on the PATH but not executable exits 126, saying so', async (t) => {
  const server = await startServer(t);
  const bin = join(server.dir, 'bin');
  await mkdir(bin);
  await writeFile(join(bin, 'not-executable-for-lockctl-tests'), 'echo ran\n', { mode: 0o644 });
  const run = await lockctlWithEnv(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '--', 'not-executable-for-lockctl-tests'], {
    PATH: `${bin}:${process.env.PATH ?? ''}`,
  });
  t.is(run.code, 126);
  t.regex(run.stderr, /cannot run not-executable-for-lockctl-tests: not executable/);
});

test('a command that exits 127 itself is its exit code, not "cannot run"', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '--', 'sh', '-c', 'exit 127']);
  t.is(run.code, 127);
  t.notRegex(run.stderr, /cannot run/);
});

test("losing the lock while the command runs sends it SIGTERM at once, at the server's loss notice, saying how", async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  // --ttl 300: a renewal every 100 s, none within the test; only the loss notice can tell.
  const args = ['-p', String(server.port), 'hold', '--ttl', '300', 'jobs', 'n', 'me', '--', node, '-e', 'setInterval(() => {}, 1000)'];
  const hold = startLockctl(args);
  const owner = ownerOf('me', hold.child);
  let locations = 0;
  await pollUntil('hold to own the lock', async () => (locations++, (await client.location('jobs', 'n', owner)) === 1 ? true : undefined));
  // The notice is counted with the lookups (0x03) it extends: our location calls, then the notice.
  await pollUntil('the loss notice to be read', async () => ((await client.stats()).contenderLookups > locations ? true : undefined));
  t.is(await client.releaseAll(owner), 1);
  const run = await hold.result;
  t.is(run.code, 128 + 15);
  t.regex(
    run.stderr,
    /lost the lock on jobs\/n \(the lock was released by someone else's release-all \(0x06\) of its owner\); stopping the command and what it started \(SIGTERM, SIGKILL after 5 s\)/,
  );
});

test('hold waits without polling: one acquire-and-wait (0x0B) while the lock is taken, however long', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  // Held for at least its 1 s TTL: polls from 50 ms, doubling, would be five or more by then.
  t.is(await client.request('jobs', 'n', 'first', { ttl: 1 }), 1);
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'second', '--', node, '-e', 'process.exit(0)']);
  t.like(await hold.result, { code: 0 });
  t.is((await client.stats()).lockRequests, 2, "first's request and hold's 0x0B");
});

test('kill -9 of lockctl while it waits: the server takes its waiting entry out of the queue (it asked with TTW 0, for as long as its connection)', async (t) => {
  // --ttw 0: were it polling, its entry would stay queued for ever.
  const { client, hold, owner } = await holdQueuedBehindFirst(t, ['--ttw', '0'], [node, '-e', '']);
  hold.child.kill('SIGKILL');
  t.is((await hold.result).signal, 'SIGKILL');
  await pollUntil('the waiting entry to leave', async () => ((await client.location('jobs', 'n', owner)) === 0 ? true : undefined));
  t.is(await client.release('jobs', 'n', 'first'), 1);
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0));
});

test('SIGTERM to lockctl is passed on to the command, and the lock is released after', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const script = "process.on('SIGTERM', () => process.exit(42)); setInterval(() => {}, 1000); process.stdout.write('ready\\n');";
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '--', node, '-e', script]);
  const ready = new Promise<void>((resolve) => {
    hold.child.stdout!.on('data', (text: string) => {
      if (text.includes('ready')) resolve();
    });
  });
  await bounded(ready, 10_000, 'the command to start');
  hold.child.kill('SIGTERM');
  t.like(await hold.result, { code: 42 });
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0));
});

// flock's promise: two holds given the same arguments never run their commands at once.

/** A command that records `start NAME`, waits for the file `go` to appear, then records `end NAME`. */
function recordingCommand(dir: string, name: string): string[] {
  const script = `
    const fs = require('fs');
    const path = require('path');
    const log = (line) => fs.appendFileSync(path.join(${JSON.stringify(dir)}, 'events'), line + '\\n');
    log('start ${name}');
    const go = path.join(${JSON.stringify(dir)}, 'go');
    const limit = Date.now() + 20000;
    const wait = () => (fs.existsSync(go) || Date.now() > limit ? (log('end ${name}'), process.exit(0)) : setTimeout(wait, 20));
    wait();`;
  return [node, '-e', script];
}

test('two holds with the same arguments: the second waits for the first command to end', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const hold = (name: string) => startLockctl(['-p', String(server.port), 'hold', 'jobs', 'nightly', 'worker', '--', ...recordingCommand(server.dir, name)]);
  const events = async (): Promise<string[]> => (await readFile(join(server.dir, 'events'), 'utf8').catch(() => '')).split('\n').filter(Boolean);

  const first = hold('first');
  await pollUntil('the first command to start', async () => ((await events()).includes('start first') ? true : undefined));
  const second = hold('second');
  // The second is queued behind the first (or, were the two one entry, its command has started).
  await pollUntil('the second hold to queue', async () => {
    const entries = await client.list('jobs');
    return entries.some((e) => !e.isOwner) || (await events()).includes('start second') ? true : undefined;
  });
  t.deepEqual(
    (await client.list('jobs')).map((e) => [e.owner.toString(), e.isOwner]),
    [
      [ownerOf('worker', first.child), true],
      [ownerOf('worker', second.child), false],
    ],
  );
  await writeFile(join(server.dir, 'go'), '');
  t.like(await first.result, { code: 0 });
  t.like(await second.result, { code: 0 });
  t.deepEqual(await events(), ['start first', 'end first', 'start second', 'end second']);
});

test('-E (--conflict-exit-code) is the exit code when the lock was not ours within --wait', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const run = await lockctl(['-p', String(server.port), 'hold', '-E', '75', '--wait', '0', 'jobs', 'n', 'me', '--', node, '-e', 'process.exit(0)']);
  t.is(run.code, 75);
  t.is(run.stderr, 'lockctl: jobs/n is taken (--wait 0: no waiting)\n');
  t.like(await lockctl(['-p', String(server.port), 'hold', '--conflict-exit-code', '256', 'jobs', 'n', 'me', '-c', 'true']), { code: 2 });
});

test('-c runs a command line through /bin/sh -c, with the lock in its environment', async (t) => {
  const server = await startServer(t);
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '-c', 'printf "%s|%s\\n" "$LOCKCTL_OWNER" "$0"; exit 7']);
  const run = await hold.result;
  t.is(run.code, 7, run.stderr);
  t.is(run.stdout, `${ownerOf('me', hold.child)}|/bin/sh\n`);
  const both = await lockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '-c', 'true', '--', 'true']);
  t.is(both.code, 2);
  t.is(both.stderr, "lockctl: give the command after '--' or with -c, not both\n");
});

test('an owner with no room left for the suffix is refused (exit 2), saying how long it may be', async (t) => {
  const given = 'x'.repeat(250);
  const hold = startLockctl(['hold', 'jobs', 'n', given, '-c', 'true']);
  const run = await hold.result;
  t.is(run.code, 2);
  const suffix = Buffer.byteLength(`@${hold.child.pid}.${hostname()}`);
  t.is(
    run.stderr,
    `lockctl: hold makes the owner unique by adding "@${hold.child.pid}.${hostname()}" (${suffix} bytes); ` +
      `"${given}" (250 bytes) leaves no room for it: give an owner of at most ${255 - suffix} bytes\n`,
  );
});

test('hold without a command says which lock it holds, holds it until SIGTERM or SIGINT, then releases it and exits 0', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me']);
    const owner = ownerOf('me', hold.child);
    const line = await stdoutLine(hold.child, /held by/);
    const token = await client.fence('jobs', 'n', owner);
    t.true(token > 0, 'the lock is ours while lockctl holds it');
    t.is(line, `jobs/n held by ${owner} (token ${token}); SIGINT (Ctrl-C), SIGTERM or SIGHUP releases it`);
    hold.child.kill(signal);
    t.like(await hold.result, { code: 0, stderr: '' }, signal);
    t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0), `released after ${signal}`);
  }
  const json = startLockctl(['-p', String(server.port), '--json', 'hold', 'jobs', 'n', 'me']);
  const acquired = JSON.parse(await stdoutLine(json.child, /acquired/)) as { token: number; owner: string };
  t.is(acquired.owner, ownerOf('me', json.child));
  json.child.kill('SIGTERM');
  const run = await json.result;
  t.is(run.code, 0);
  t.is(run.stdout.split('\n')[1], '{"exitCode":0,"lockLost":false}');
});

test('hold without a command: losing the lock ends it with exit 1', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const hold = startLockctl(['-p', String(server.port), 'hold', '--ttl', '3', 'jobs', 'n', 'me']);
  await stdoutLine(hold.child, /held by/);
  t.is(await client.release('jobs', 'n', ownerOf('me', hold.child)), 1);
  const run = await hold.result;
  t.is(run.code, 1);
  t.regex(run.stderr, /^lockctl: lost the lock on jobs\/n \(/);
});

// kill -9 of lockctl: its command must not run on while the lock, renewed by nobody, expires.

/** A node command that prints `ready PID` and, on SIGTERM, `SIGTERM PID` before exiting (or not, with `ignore`). */
function waitingCommand(onTerm: 'exit' | 'ignore'): string {
  const handler = onTerm === 'exit' ? "process.stdout.write('SIGTERM ' + process.pid + '\\n', () => process.exit(143))" : '';
  return `process.on('SIGTERM', () => { ${handler} }); setInterval(() => {}, 1000); process.stdout.write('ready ' + process.pid + '\\n');`;
}

test('kill -9 of lockctl: the command, and what it started, get SIGTERM from the watchdog', async (t) => {
  const server = await startServer(t);
  // The command is a shell; the node process that matters is its child, which a kill of the shell alone would miss.
  const shellCommand = `${node} -e "${waitingCommand('exit').replaceAll('"', '\\"')}"; echo shell-after`;
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '-c', shellCommand]);
  const ready = await stdoutLine(hold.child, /^ready \d+$/);
  t.teardown(() => killIfRunning(Number(ready.slice('ready '.length))));
  hold.child.kill('SIGKILL');
  // lockctl's stdout closes once its last holder has ended: lockctl, the watchdog, the shell and node.
  const run = await hold.result;
  t.is(run.signal, 'SIGKILL');
  t.true(run.stdout.includes(`SIGTERM ${ready.slice('ready '.length)}\n`), run.stdout);
});

test('kill -9 of lockctl: a command that ignores SIGTERM gets SIGKILL after the grace (a third of the TTL)', async (t) => {
  const server = await startServer(t);
  const hold = startLockctl(['-p', String(server.port), 'hold', '--ttl', '3', 'jobs', 'n', 'me', '--', node, '-e', waitingCommand('ignore')]);
  const ready = await stdoutLine(hold.child, /^ready \d+$/);
  t.teardown(() => killIfRunning(Number(ready.slice('ready '.length))));
  hold.child.kill('SIGKILL');
  const run = await hold.result;
  t.is(run.signal, 'SIGKILL');
});
