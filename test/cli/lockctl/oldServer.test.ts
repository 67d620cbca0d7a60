import test from 'ava';
import { connectClient, oldServerInFrontOf } from '../../helpers/lockClient.js';
import { hostname } from 'node:os';
import { lockctlWithEnv, startLockctlWith } from '../../helpers/lockctlProcess.js';
import { startServer } from '../../helpers/serverProcess.js';

// Against a LockServer 0.9b, which closes the connection on the extension commands (0x09–0x0D),
// lockctl does what it did before them, without tokens, times left or waiting without polling;
// only `fence` cannot.

test('request, owner and hold work as before, without tokens; fence exits 3 saying why', async (t) => {
  const server = await startServer(t);
  const old = String(await oldServerInFrontOf(t, server.port));
  const run = (...args: string[]) => lockctlWithEnv(['-p', old, ...args]);

  t.like(await run('request', 'jobs', 'n', 'alice'), { code: 0, stdout: '1 owner\n' });
  t.like(await run('request', 'jobs', 'n', 'bob'), { code: 1, stdout: '2 waiting (1 ahead)\n' });
  t.like(await run('--json', 'request', 'jobs', 'n', 'alice'), { code: 0, stdout: '{"position":1,"isOwner":true,"refused":false}\n' });
  t.like(await run('owner', 'jobs', 'n'), { code: 0, stdout: 'alice\n' });
  t.like(await run('--json', 'owner', 'jobs', 'n'), { code: 0, stdout: '{"owner":"alice","ownerHex":"616c696365","free":false}\n' });
  const fence = await run('fence', 'jobs', 'n', 'alice');
  t.is(fence.code, 3);
  t.regex(fence.stderr, /closed the connection instead of answering fence: a server without fencing tokens/);

  // An outer hold's token is not passed off as this lock's.
  const script = 'printf "%s\\n" "${LOCKCTL_TOKEN-unset} $LOCKCTL_KEY"';
  const holding = startLockctlWith(['-p', old, '--json', 'hold', 'jobs', 'other', 'me', '--', 'sh', '-c', script], { env: { LOCKCTL_TOKEN: '999' } });
  const hold = await holding.result;
  t.is(hold.code, 0, hold.stderr);
  const owner = `me@${holding.child.pid}.${hostname()}`;
  const acquired = JSON.stringify({ acquired: true, owner, ownerHex: Buffer.from(owner).toString('hex') });
  t.is(hold.stdout, `${acquired}\nunset jobs\n{"exitCode":0,"lockLost":false}\n`);
  const client = await connectClient(t, server.port);
  t.deepEqual(await client.findOwner('jobs', 'other'), Buffer.alloc(0), 'released after the command');
});

test('list and watch show what list (0x07) tells, as before: no time left, token or held-back lock', async (t) => {
  const server = await startServer(t);
  const old = String(await oldServerInFrontOf(t, server.port));
  const run = (...args: string[]) => lockctlWithEnv(['-p', old, ...args]);
  await run('request', 'users', '42', 'alice', '--ttl', '30', '--ttw', '60', '--priority', '10');
  await run('request', 'users', '42', 'bob', '--priority', '5');
  const table = [
    'INDEX  POS  ROLE     OWNER  PRIORITY  TTL  TTW',
    '42       1  owner    alice        10   30   60',
    '42       2  waiting  bob           5   30   30',
    '',
  ].join('\n');
  t.like(await run('list', 'users'), { code: 0, stdout: table });
  t.like(await run('list', 'nothing'), { code: 0, stdout: 'no entries under nothing\n' });
  t.deepEqual(JSON.parse((await run('--json', 'list', 'users')).stdout), {
    key: 'users',
    keyHex: '7573657273',
    entries: [
      { index: '42', indexHex: '3432', owner: 'alice', ownerHex: '616c696365', position: 1, isOwner: true, priority: 10, ttl: 30, ttw: 60 },
      { index: '42', indexHex: '3432', owner: 'bob', ownerHex: '626f62', position: 2, isOwner: false, priority: 5, ttl: 30, ttw: 30 },
    ],
  });
  // watch finds out once, and lists with 0x07 through its second connection from then on.
  const watch = await run('watch', 'users', '--count', '3', '--interval', '0.01');
  t.is(watch.code, 0, watch.stderr);
  const refreshes = watch.stdout.split('\n\n');
  t.is(refreshes.length, 3);
  for (const refresh of refreshes) t.is(refresh.slice(refresh.indexOf('\n') + 1).trimEnd(), table.trimEnd());
  const client = await connectClient(t, server.port);
  t.is((await client.stats()).listRequests, 6, 'list: 1 + 1 + 1; watch: 3 (the 0x0D never reached the server)');
});
