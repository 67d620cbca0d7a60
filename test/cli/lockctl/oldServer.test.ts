import test from 'ava';
import { connectClient, oldServerInFrontOf } from '../../helpers/lockClient.js';
import { hostname } from 'node:os';
import { lockctlWithEnv, startLockctlWith } from '../../helpers/lockctlProcess.js';
import { startServer } from '../../helpers/serverProcess.js';

// Against a LockServer 0.9b, which closes the connection on the fencing commands (0x09, 0x0A),
// lockctl does what it did before them, without tokens; only `fence` cannot.

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
