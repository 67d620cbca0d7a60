import test from 'ava';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { bounded } from '../../helpers/bounded.js';
import { connectClient } from '../../helpers/lockClient.js';
import { lockctl, startLockctl } from '../../helpers/lockctl.js';
import { pollUntil } from '../../helpers/poll.js';
import { startServer, tempDir } from '../../helpers/serverProcess.js';
import { holdQueuedBehindFirst, killIfRunning, ownerOf, processesUnder, running, stdoutLine } from './holdProcesses.js';

// When `lockctl hold` stops its command, and that nothing of the command runs without the lock.

const node = process.execPath;

/** The times (Date.now()) written one a line to `file`; none if it is not there. */
async function timesIn(file: string): Promise<number[]> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map(Number);
}

/** Test teardown: a process left stopped must not stay so (SIGCONT; gone is fine). */
function continueIfStopped(pid: number): void {
  try {
    process.kill(pid, 'SIGCONT');
  } catch {
    // Gone.
  }
}

test("lockctl stopped (SIGSTOP) while its command runs: the watchdog stops the command before the lock's TTL runs out, so nothing it writes is later than the next owner's grant", async (t) => {
  const server = await startServer(t);
  const file = join(await tempDir(t), 'written');
  // Every 20 ms the time by this machine's clock, as the next owner's grant is timed below.
  const script = `const fs = require('fs'); setInterval(() => fs.appendFileSync(${JSON.stringify(file)}, Date.now() + '\\n'), 20); process.stdout.write('ready ' + process.pid + '\\n');`;
  // TTL 6 and a grace of 2 s: the stop begins 3.75 s after the last renewal's send, leaving a loaded machine 2.25 s
  // for the watchdog's timer and its walk of /proc before the deadline.
  const hold = startLockctl(['-p', String(server.port), 'hold', '--ttl', '6', '--kill-after', '2', 'jobs', 'n', 'me', '--', node, '-e', script]);
  const commandPid = Number((await stdoutLine(hold.child, /^ready \d+$/)).slice('ready '.length));
  t.teardown(() => killIfRunning(commandPid));
  t.teardown(() => continueIfStopped(hold.child.pid!));
  await pollUntil('the command to write', async () => ((await timesIn(file)).length > 0 ? true : undefined));
  hold.child.kill('SIGSTOP');
  const other = await connectClient(t, server.port);
  // Granted when the server expires the stopped lockctl's lock, its TTL after the last renewal it received.
  t.like(await bounded(other.acquire('jobs', 'n', 'other', { ttl: 60, ttw: 60 }), 20_000, 'the expiry to grant the other client the lock'), { position: 1 });
  const grantedAt = Date.now();
  // Ended by then, or else (today's code) it writes on: either is seen at once.
  await pollUntil('the command to have ended, or to write after the grant', async () =>
    !(await running(commandPid)) || (await timesIn(file)).some((time) => time > grantedAt) ? true : undefined,
  );
  const late = (await timesIn(file)).filter((time) => time > grantedAt);
  t.deepEqual(late, [], `written ${late.length} times after the other client's grant at ${grantedAt}`);
  hold.child.kill('SIGCONT');
  const run = await hold.result;
  t.is(run.code, 128 + 15, run.stderr);
  t.regex(run.stderr, /no renewal of the lock on jobs\/n was confirmed in time: the watchdog stops the command before the lock's TTL runs out/);
  t.deepEqual(await other.findOwner('jobs', 'n'), Buffer.from('other'), 'the other client still owns it');
});

test('a lost lock stops the whole tree: a shell that dies on SIGTERM takes no child with it, and the child is stopped too', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const child = `${node} -e "setInterval(() => {}, 1000); process.stdout.write('child ' + process.pid + '\\n');"`;
  // --ttl 300: no renewal within the test; only the loss notice tells.
  const hold = startLockctl(['-p', String(server.port), 'hold', '--ttl', '300', 'jobs', 'n', 'me', '-c', `${child}; echo after`]);
  const childPid = Number((await stdoutLine(hold.child, /^child \d+$/)).slice('child '.length));
  t.teardown(() => killIfRunning(childPid));
  await pollUntil('hold to own the lock', async () => ((await client.location('jobs', 'n', ownerOf('me', hold.child))) === 1 ? true : undefined));
  t.is(await client.releaseAll(ownerOf('me', hold.child)), 1);
  // lockctl's stdout closes once its last holder has ended: the child too (today's code leaves it running).
  const run = await hold.result;
  t.is(run.code, 128 + 15, run.stderr);
  t.regex(run.stderr, /lost the lock on jobs\/n \(.*release-all.*\); stopping the command and what it started \(SIGTERM, SIGKILL after 5 s\)/);
  t.false(run.stdout.includes('after'), run.stdout);
  await pollUntil('the child to be reaped', async () => ((await running(childPid)) ? undefined : true));
});

test('a lost lock stops a command that ignores SIGTERM: SIGKILL after --kill-after, to it and what it started', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const hold = startLockctl([
    '-p',
    String(server.port),
    'hold',
    '--ttl',
    '300',
    '--kill-after',
    '0.5',
    'jobs',
    'n',
    'me',
    '-c',
    'trap "" TERM; echo ready $$; while :; do sleep 0.05; done',
  ]);
  const shellPid = Number((await stdoutLine(hold.child, /^ready \d+$/)).slice('ready '.length));
  t.teardown(() => killIfRunning(shellPid));
  await pollUntil('hold to own the lock', async () => ((await client.location('jobs', 'n', ownerOf('me', hold.child))) === 1 ? true : undefined));
  t.is(await client.release('jobs', 'n', ownerOf('me', hold.child)), 1);
  const run = await hold.result;
  t.is(run.code, 128 + 9, run.stderr);
  t.regex(run.stderr, /SIGKILL after 0\.5 s/);
  t.false(await running(shellPid));
});

test('a lost lock stops what the command left running as it was stopped: a process reparented to init is found by the mark every process of the command carries', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  const script = join(await tempDir(t), 'escape.sh');
  // On SIGTERM the shell starts a background loop and exits 0 at once: the loop's parent is gone, so no walk from the command's pid finds it.
  await writeFile(
    script,
    ['#!/bin/sh', `trap 'sh -c "while :; do sleep 0.05; done" & echo "left $!"; exit 0' TERM`, 'echo "ready $$"', 'while :; do sleep 0.05; done', ''].join(
      '\n',
    ),
    { mode: 0o755 },
  );
  const hold = startLockctl(['-p', String(server.port), 'hold', '--ttl', '300', '--kill-after', '0.5', 'jobs', 'n', 'me', '--', script]);
  const shellPid = Number((await stdoutLine(hold.child, /^ready \d+$/)).slice('ready '.length));
  t.teardown(() => killIfRunning(shellPid));
  const left = stdoutLine(hold.child, /^left \d+$/);
  await pollUntil('hold to own the lock', async () => ((await client.location('jobs', 'n', ownerOf('me', hold.child))) === 1 ? true : undefined));
  t.is(await client.release('jobs', 'n', ownerOf('me', hold.child)), 1);
  const leftPid = Number((await left).slice('left '.length));
  t.teardown(() => killIfRunning(leftPid));
  const run = await hold.result;
  t.regex(run.stderr, /lost the lock on jobs\/n/);
  await pollUntil('the process the command left to be stopped', async () => ((await running(leftPid)) ? undefined : true));
  t.false(await running(leftPid));
});

test('--kill-after more than half the TTL is refused (exit 2): the stop before the deadline must leave time for renewals', async (t) => {
  const run = await lockctl(['-p', '1', 'hold', '--ttl', '4', '--kill-after', '2.5', 'jobs', 'n', 'me', '--', node, '-e', '']);
  t.is(run.code, 2);
  t.regex(run.stderr, /--kill-after 2\.5 is more than half the TTL \(4 s\)/);
});

test("a waiting hold's entry has a finite TTW, renewed while it waits; a waiter that stops (SIGSTOP) is gone after its TTW", async (t) => {
  const { client, hold, owner } = await holdQueuedBehindFirst(t, ['--ttw', '3'], [node, '-e', '']);
  t.teardown(() => continueIfStopped(hold.child.pid!));
  const timeLeft = async (): Promise<number | null | undefined> => {
    const [queue] = await client.queues('jobs');
    return queue?.entries.find((entry) => entry.owner.toString() === owner)?.remainingMs;
  };
  const first = await timeLeft();
  t.true(typeof first === 'number' && first <= 3000, `time left ${first}`);
  // Only a renewal moves the time left up: the wait is sent again every second.
  await pollUntil('the waiting entry to be renewed', async () => {
    const left = await timeLeft();
    return typeof left === 'number' && left > first! ? true : undefined;
  });
  hold.child.kill('SIGSTOP');
  await pollUntil('the stopped waiter to leave the queue', async () => ((await client.location('jobs', 'n', owner)) === 0 ? true : undefined));
  hold.child.kill('SIGKILL');
  t.is(await client.release('jobs', 'n', 'first'), 1);
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0), 'nobody is granted the lock');
});

test('a queued hold lets its command go only at the grant: no marker before the first owner releases, none when hold gives up', async (t) => {
  const dir = await tempDir(t);
  const gaveUp = join(dir, 'gave-up');
  // Given up after --wait: today a gate opened at the request would have let the command write long before.
  const { server, client, hold } = await holdQueuedBehindFirst(t, ['--wait', '2'], ['sh', '-c', `echo ran > ${gaveUp}`]);
  t.is((await hold.result).code, 1);
  await t.throwsAsync(readFile(gaveUp), { code: 'ENOENT' }, 'the command ran though hold gave up');
  const granted = join(dir, 'granted');
  const queued = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'third', '--', 'sh', '-c', `echo ran > ${granted}`]);
  await pollUntil('the command to wait at its gate', async () => ((await processesUnder(queued.child, 'lockctl-hold')).length === 1 ? true : undefined));
  await pollUntil('the hold to queue', async () => ((await client.location('jobs', 'n', ownerOf('third', queued.child))) === 2 ? true : undefined));
  await t.throwsAsync(readFile(granted), { code: 'ENOENT' }, 'the command ran before the first owner released');
  t.is(await client.release('jobs', 'n', 'first'), 1);
  t.is((await queued.result).code, 0);
  t.is(await readFile(granted, 'utf8'), 'ran\n');
});
