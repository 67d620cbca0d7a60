import test from 'ava';
import { bounded } from '../../helpers/bounded.js';
import { connectClient } from '../../helpers/lockClient.js';
import { lockctl, startLockctl } from '../../helpers/lockctl.js';
import { startServer } from '../../helpers/serverProcess.js';

test('watch --count N lists the key N times, then exits 0', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('users', '42', 'alice'), 1);
  const run = await lockctl(['-p', String(server.port), 'watch', 'users', '--count', '2', '--interval', '0.05']);
  t.is(run.code, 0);
  const refreshes = run.stdout.split('\n\n');
  t.is(refreshes.length, 2);
  for (const refresh of refreshes) {
    const lines = refresh.trimEnd().split('\n');
    t.regex(lines[0]!, /^\S+Z {2}127\.0\.0\.1:\d+ {2}key users: 1 entry$/);
    t.regex(lines[1]!, /^INDEX +POS +ROLE +OWNER +PRIORITY +TTL +TTW +LEFT +TOKEN$/);
    t.regex(lines[2]!, /^42 +1 +owner +alice +0 +30 +30 +\d+\.\ds +\d+$/);
  }
  // The detailed list (0x0D), counted as the list (0x07) it extends: asked anew at each refresh.
  t.is((await client.stats()).listRequests, 2);
});

test('watch --json prints one JSON object per refresh (NDJSON)', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['-p', String(server.port), '--json', 'watch', 'empty', '-n', '3', '-i', '0.01']);
  t.is(run.code, 0);
  const lines = run.stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as { ts: string; key: string; entries: unknown[] });
  t.is(lines.length, 3);
  for (const line of lines) t.like(line, { key: 'empty', keyHex: '656d707479', entries: [] });
  t.true(lines.every((line) => !Number.isNaN(Date.parse(line.ts))));
});

test('watch without --count runs until Ctrl-C, then exits 0', async (t) => {
  const server = await startServer(t);
  const watch = startLockctl(['-p', String(server.port), '--json', 'watch', 'k', '--interval', '0.05']);
  const firstRefresh = new Promise<void>((resolve) => watch.child.stdout!.once('data', () => resolve()));
  await bounded(firstRefresh, 10_000, 'the first refresh');
  watch.child.kill('SIGINT');
  const run = await watch.result;
  t.is(run.code, 0);
  // At least the first refresh, every one a whole JSON line (Ctrl-C never cuts one in half).
  t.regex(run.stdout, /^(\{.*\}\n)+$/);
  for (const line of run.stdout.trimEnd().split('\n')) t.like(JSON.parse(line), { key: 'k', keyHex: '6b', entries: [] });
});
