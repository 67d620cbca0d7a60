import test from 'ava';
import { bounded } from '../../helpers/bounded.js';
import { connectClient } from '../../helpers/lockClient.js';
import { LOCKCTL_PATH, lockctl, startLockctl } from '../../helpers/lockctl.js';
import { pollUntil } from '../../helpers/poll.js';
import { startServer } from '../../helpers/serverProcess.js';

const node = process.execPath;

test('hold runs the command while owning the lock, releases it after, and exits with its code', async (t) => {
  const server = await startServer(t);
  const port = String(server.port);
  // The command asks the server (through a nested lockctl) who owns the lock, then exits 3.
  const script = `const r = require('child_process').spawnSync(process.execPath, [${JSON.stringify(LOCKCTL_PATH)}, '-p', '${port}', 'owner', 'jobs', 'nightly'], { encoding: 'utf8' }); process.stdout.write('owner seen: ' + r.stdout); process.exit(3);`;
  const run = await lockctl(['-p', port, 'hold', 'jobs', 'nightly', 'worker-1', '--', node, '-e', script]);
  t.is(run.code, 3, run.stderr);
  t.regex(run.stdout, /^owner seen: worker-1 \(token \d+\)\n$/);
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'nightly'), Buffer.alloc(0), 'released after the command');
  t.like(await lockctl(['-p', port, 'hold', 'jobs', 'nightly', 'w', '--', node, '-e', 'process.exit(0)']), { code: 0 });
});

test('hold waits for the current owner to let go before running the command', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'second', '--', node, '-e', 'process.exit(0)']);
  await pollUntil('hold to queue', async () => ((await client.location('jobs', 'n', 'second')) === 2 ? true : undefined));
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
  t.is(await client.location('jobs', 'n', 'second'), 0);
  // A limit is told back in the seconds it was given in.
  const later = await lockctl(['-p', String(server.port), 'hold', '--wait', '0.3', 'jobs', 'n', 'second', '--', node, '-e', '']);
  t.is(later.code, 1);
  t.is(later.stderr, 'lockctl: jobs/n was not ours within --wait 0.3 s\n');
});

test("hold --json prints that the lock was acquired, with its token, then the command's exit status", async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['-p', String(server.port), '--json', 'hold', 'jobs', 'n', 'me', '--', node, '-e', 'process.exit(5)']);
  t.is(run.code, 5, run.stderr);
  const lines = run.stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  const token = lines[0]!.token as number;
  t.true(token > 0);
  t.deepEqual(lines, [
    { acquired: true, token },
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
  const run = await lockctl(['-p', String(server.port), '--json', 'hold', 'jobs', 'n\\x00', 'o\\x5c', '--', 'sh', '-c', script]);
  t.is(run.code, 0, run.stderr);
  const [acquired, echoed] = run.stdout.split('\n');
  const { token } = JSON.parse(acquired!) as { token: number };
  t.is(echoed, `${token} jobs n\\x00 o\\x5c`);
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
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('jobs', 'n', 'first'), 1);
  const hold = startLockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'second', '--', node, '-e', '']);
  await pollUntil('hold to queue', async () => ((await client.location('jobs', 'n', 'second')) === 2 ? true : undefined));
  hold.child.kill('SIGINT');
  t.like(await hold.result, { code: 130 });
  t.is(await client.location('jobs', 'n', 'second'), 0);
});

test('a command that cannot be found exits 127, and the lock is released', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['-p', String(server.port), 'hold', 'jobs', 'n', 'me', '--', 'no-such-command-for-lockctl-tests']);
  t.is(run.code, 127);
  t.regex(run.stderr, /cannot run no-such-command-for-lockctl-tests/);
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'n'), Buffer.alloc(0));
});

test('losing the lock while the command runs sends it SIGTERM', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  // The command would run forever; with --ttl 3 the lock is renewed every second, which notices the loss.
  const args = ['-p', String(server.port), 'hold', '--ttl', '3', 'jobs', 'n', 'me', '--', node, '-e', 'setInterval(() => {}, 1000)'];
  const hold = startLockctl(args);
  await pollUntil('hold to own the lock', async () => ((await client.location('jobs', 'n', 'me')) === 1 ? true : undefined));
  await client.release('jobs', 'n', 'me');
  const run = await hold.result;
  t.is(run.code, 128 + 15);
  t.regex(run.stderr, /lost the lock on jobs\/n .*sending SIGTERM/);
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
