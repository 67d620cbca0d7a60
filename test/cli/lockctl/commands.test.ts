import test, { type ExecutionContext } from 'ava';
import { lockctl, lockctlJson, type LockctlResult } from '../../helpers/lockctl.js';
import { pollUntil } from '../../helpers/poll.js';
import { startServer } from '../../helpers/serverProcess.js';

/** The fencing token in a line that ends with `(token N)`; fails the test when there is none. */
function tokenIn(t: ExecutionContext, run: LockctlResult): number {
  const match = /\(token (\d+)\)\n$/.exec(run.stdout);
  t.truthy(match, `a token in ${JSON.stringify(run.stdout)}`);
  return Number(match?.[1]);
}

test('request, owner, location, renew, release, release-all: human output and exit codes', async (t) => {
  const server = await startServer(t);
  const run = (...args: string[]) => lockctl(['-p', String(server.port), ...args]);

  const alice = await run('request', 'users', '42', 'alice', '--ttl', '30', '--ttw', '60', '--priority', '10');
  t.like(alice, { code: 0 });
  t.regex(alice.stdout, /^1 owner \(token \d+\)\n$/);
  const aliceToken = tokenIn(t, alice);
  t.true(aliceToken > 0);
  t.like(await run('request', 'users', '42', 'bob', '--priority', '5'), { code: 1, stdout: '2 waiting (1 ahead)\n' });
  t.like(await run('owner', 'users', '42'), { code: 0, stdout: `alice (token ${aliceToken})\n` });
  t.like(await run('request', 'users', '42', 'alice'), { code: 0, stdout: `1 owner (token ${aliceToken})\n` }, 'a renewal keeps the token');
  t.like(await run('owner', 'users', '43'), { code: 1, stdout: '', stderr: 'lockctl: users/43 has no owner\n' });
  t.like(await run('location', 'users', '42', 'bob'), { code: 0, stdout: '2 waiting (1 ahead)\n' });
  t.like(await run('location', 'users', '42', 'carol'), { code: 1, stdout: '0 not queued\n' });
  t.like(await run('renew', 'users', '42', 'alice'), { code: 0, stdout: 'renewed\n' });
  t.like(await run('renew', 'users', '42', 'carol'), { code: 1, stdout: 'no such entry\n' });
  t.like(await run('release', 'users', '42', 'alice'), { code: 0, stdout: 'released 1\n' });
  const bob = await run('owner', 'users', '42');
  t.like(bob, { code: 0 });
  t.regex(bob.stdout, /^bob \(token \d+\)\n$/);
  t.true(tokenIn(t, bob) > aliceToken, 'the promoted waiter has a greater token');
  t.like(await run('request', 'users', '7', 'bob'), { code: 0 });
  t.like(await run('release', 'users', '*', 'bob'), { code: 0, stdout: 'released 2\n' });
  t.like(await run('release', 'users', '*', 'bob'), { code: 1, stdout: 'released 0\n' });
  t.like(await run('request', 'a', '1', 'dave'), { code: 0 });
  t.like(await run('request', 'b', '1', 'dave'), { code: 0 });
  t.like(await run('release-all', 'dave'), { code: 0, stdout: 'released 2\n' });
  t.like(await run('release-all', 'dave'), { code: 1, stdout: 'released 0\n' });
});

test('list prints an aligned table with each queue in order, each entry with its time left and token; non-printable bytes are escaped', async (t) => {
  const server = await startServer(t);
  const run = (...args: string[]) => lockctl(['-p', String(server.port), ...args]);
  const alice = tokenIn(t, await run('request', 'users', '42', 'alice', '--ttl', '0', '--ttw', '60', '--priority', '10'));
  await run('request', 'users', '42', 'bob', '--priority', '5', '--ttl', '0', '--ttw', '0');
  const cafe = tokenIn(t, await run('request', 'users', '\\x00\\xff', 'caf\u00e9', '--ttl', '0'));
  // Tokens are issued from wall-clock ms x 1024: these two have as many digits.
  const width = String(alice).length;
  t.is(String(cafe).length, width);
  t.like(await run('list', 'users'), {
    code: 0,
    stdout: [
      `INDEX     POS  ROLE     OWNER        PRIORITY  TTL  TTW   LEFT  ${'TOKEN'.padStart(width)}`,
      `42          1  owner    alice              10    0   60  never  ${alice}`,
      `42          2  waiting  bob                 5    0    0  never  ${'-'.padStart(width)}`,
      `\\x00\\xff    1  owner    caf\\xc3\\xa9         0    0   30  never  ${cafe}`,
      '',
    ].join('\n'),
  });
  t.like(await run('list', 'nothing'), { code: 0, stdout: 'no entries under nothing\n' });
  // What list prints can be typed back: the escaped owner names the same bytes.
  const owner = await run('owner', 'users', '\\x00\\xff');
  t.is(owner.code, 0);
  t.regex(owner.stdout, /^caf\\xc3\\xa9 \(token \d+\)\n$/);
  t.like(await run('release', 'users', '\\x00\\xff', 'caf\\xc3\\xa9'), { code: 0 });
});

test("list shows an entry's time left in its phase, and a lock held back after its owner's TTL ran out (--lock-delay) with the delay left, before its waiters", async (t) => {
  const server = await startServer(t, { args: ['--lock-delay', '30'] });
  const run = (...args: string[]) => lockctl(['-p', String(server.port), ...args]);
  await run('request', 'jobs', 'a', 'alice', '--ttl', '1');
  await run('request', 'jobs', 'a', 'bob', '--ttl', '0', '--ttw', '0');
  await run('request', 'jobs', 'b', 'carol', '--ttl', '600');
  await pollUntil('alice to expire', async () => ((await run('location', 'jobs', 'a', 'alice')).code === 1 ? true : undefined));
  const listed = await run('list', 'jobs');
  t.is(listed.code, 0, listed.stderr);
  const rows = listed.stdout.trimEnd().split('\n');
  t.regex(rows[0]!, /^INDEX +POS +ROLE +OWNER +PRIORITY +TTL +TTW +LEFT +TOKEN$/);
  // Held back for most of the 30 s; bob first in line (2) with nobody owning it; carol with most of her 600 s left.
  const held = /^a +- +held back +- +- +- +- +(\d+\.\d)s +-$/.exec(rows[1]!);
  t.truthy(held, rows[1]);
  t.true(Number(held?.[1]) > 0 && Number(held?.[1]) <= 30, rows[1]);
  t.regex(rows[2]!, /^a +2 +waiting +bob +0 +0 +0 +never +-$/);
  const carol = /^b +1 +owner +carol +0 +600 +30 +(\d+\.\d)s +\d+$/.exec(rows[3]!);
  t.truthy(carol, rows[3]);
  t.true(Number(carol?.[1]) > 0 && Number(carol?.[1]) <= 600, rows[3]);
  t.is(rows.length, 4);

  const json = await lockctlJson(server.port, ['list', 'jobs']);
  const value = json.value as { entries: Array<Record<string, unknown>>; heldBack: Array<Record<string, unknown>> };
  t.like(value, { key: 'jobs', keyHex: '6a6f6273' });
  t.like(value.entries, [
    { index: 'a', owner: 'bob', position: 2, isOwner: false, remainingMs: null, token: 0 },
    { index: 'b', owner: 'carol', position: 1, isOwner: true, ttl: 600 },
  ]);
  t.true((value.entries[1]!.token as number) > 0);
  t.true((value.entries[1]!.remainingMs as number) > 0 && (value.entries[1]!.remainingMs as number) <= 600_000);
  t.is(value.heldBack.length, 1);
  t.like(value.heldBack[0], { index: 'a', indexHex: '61' });
  t.true((value.heldBack[0]!.heldForMs as number) > 0 && (value.heldBack[0]!.heldForMs as number) <= 30_000);
});

test('--json: every subcommand prints one object that scripts can parse', async (t) => {
  const server = await startServer(t);
  const json = (...args: string[]) => lockctlJson(server.port, args);

  const alice = await json('request', 'k', 'i', 'alice', '--priority', '3');
  const token = alice.value.token as number;
  t.true(token > 0);
  t.deepEqual(alice, { code: 0, value: { position: 1, isOwner: true, refused: false, token } });
  t.deepEqual(await json('request', 'k', 'i', 'b\\x01b'), { code: 1, value: { position: 2, isOwner: false, refused: false, token: 0 } });
  t.deepEqual(await json('owner', 'k', 'i'), { code: 0, value: { owner: 'alice', ownerHex: '616c696365', free: false, token } });
  t.deepEqual(await json('owner', 'k', 'x'), { code: 1, value: { owner: '', ownerHex: '', free: true, token: 0 } });
  t.deepEqual(await json('fence', 'k', 'i', 'alice'), { code: 0, value: { token, isOwner: true } });
  t.deepEqual(await json('fence', 'k', 'i', 'b\\x01b'), { code: 1, value: { token: 0, isOwner: false } });
  t.deepEqual(await json('location', 'k', 'i', 'b\\x01b'), { code: 0, value: { position: 2 } });
  t.deepEqual(await json('renew', 'k', 'i', 'alice'), { code: 0, value: { renewed: true } });
  const listed = await json('list', 'k');
  const left = (listed.value.entries as Array<{ remainingMs: number }>).map((e) => e.remainingMs);
  t.true(
    left.every((ms) => ms > 0 && ms <= 30_000),
    `the time each has left of its 30 s: ${left.join(', ')}`,
  );
  t.deepEqual(listed, {
    code: 0,
    value: {
      key: 'k',
      keyHex: '6b',
      entries: [
        {
          index: 'i',
          indexHex: '69',
          owner: 'alice',
          ownerHex: '616c696365',
          position: 1,
          isOwner: true,
          priority: 3,
          ttl: 30,
          ttw: 30,
          remainingMs: left[0],
          token,
        },
        {
          index: 'i',
          indexHex: '69',
          owner: 'b\\x01b',
          ownerHex: '620162',
          position: 2,
          isOwner: false,
          priority: 0,
          ttl: 30,
          ttw: 30,
          remainingMs: left[1],
          token: 0,
        },
      ],
      heldBack: [],
    },
  });
  t.deepEqual(await json('release', 'k', 'i', 'alice'), { code: 0, value: { released: 1 } });
  t.deepEqual(await json('release-all', 'b\\x01b'), { code: 0, value: { released: 1 } });
  const stats = await json('stats');
  t.is(stats.code, 0);
  // request went as request with fence (0x0A), which the stats reply does not count (the metrics do).
  t.like(stats.value, { lockRequests: 2, ownerLookups: 2, contenderLookups: 1, renewals: 1, releases: 1, releaseAlls: 1 });
  t.like(stats.value, { listRequests: 1, statsRequests: 1, owners: 0, contenders: 0, activeConnections: 1 });
  t.is(typeof stats.value.uptimeSeconds, 'number');
});

test("fence prints the token of the owner's grant (exit 0), or 0 for anyone else (exit 1)", async (t) => {
  const server = await startServer(t);
  const run = (...args: string[]) => lockctl(['-p', String(server.port), ...args]);
  const token = tokenIn(t, await run('request', 'jobs', 'n', 'alice'));
  await run('request', 'jobs', 'n', 'bob');
  t.like(await run('fence', 'jobs', 'n', 'alice'), { code: 0, stdout: `${token}\n` });
  t.like(await run('fence', 'jobs', 'n', 'bob'), { code: 1, stdout: '0 not the owner\n' });
  t.like(await run('fence', 'jobs', 'other', 'alice'), { code: 1, stdout: '0 not the owner\n' });
});

test('stats prints the same figures as the stat file', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['--port', String(server.port), 'stats']);
  t.is(run.code, 0);
  t.regex(run.stdout, /^LockServer statistics at \S+\n/);
  t.regex(run.stdout, /\nstatistics requests: +1\n/);
  t.regex(run.stdout, /\nactive connections: +1\n$/);
});

test('a request refused by a draining server prints position 0 and exits 1', async (t) => {
  const server = await startServer(t);
  const run = (...args: string[]) => lockctl(['-p', String(server.port), ...args]);
  await run('request', 'keep', 'alive', 'x');
  const draining = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await draining;
  t.like(await run('request', 'new', '1', 'y'), {
    code: 1,
    stdout: '0 refused: the server is draining or its table is full\n',
  });
  t.deepEqual(await lockctlJson(server.port, ['request', 'new', '1', 'y']), {
    code: 1,
    value: { position: 0, isOwner: false, refused: true, token: 0 },
  });
});

test('global options are accepted after the subcommand too', async (t) => {
  const server = await startServer(t);
  const run = await lockctl(['stats', '--json', '--host', '127.0.0.1', '--port', String(server.port), '--timeout', '2.5']);
  t.is(run.code, 0);
  t.is((JSON.parse(run.stdout) as { statsRequests: number }).statsRequests, 1);
});
