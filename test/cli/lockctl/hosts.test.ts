import test from 'ava';
import { lockctlWithEnv } from '../../helpers/lockctlProcess.js';
import { startServer } from '../../helpers/serverProcess.js';
import { stalledPort } from '../../helpers/stalledListener.js';
import { closedPort, standIn } from '../../helpers/standIns.js';

test('--host a,b,c: a refusing node and a closed port are passed over, in list order', async (t) => {
  const server = await startServer(t);
  const refusing = await standIn(t, 'refusing', 'refusing');
  const closed = await closedPort();
  const hosts = `${refusing.address},127.0.0.1:${closed},127.0.0.1:${server.port}`;
  const run = await lockctlWithEnv(['--host', hosts, '--host-order', 'as-listed', '--json', 'request', 'k', 'i', 'me']);
  t.is(run.code, 0, run.stderr);
  t.like(JSON.parse(run.stdout), { position: 1, isOwner: true, refused: false });
  t.is(refusing.connections(), 1);
});

test('entries without a port take --port', async (t) => {
  const server = await startServer(t);
  const run = await lockctlWithEnv(['-H', `127.0.0.1:${await closedPort()},127.0.0.1`, '-p', String(server.port), '--host-order', 'as-listed', 'stats']);
  t.is(run.code, 0, run.stderr);
});

test('no node answers: exit 3 naming each, or exit 4 when every one timed out', async (t) => {
  const refusing = await standIn(t, 'refusing', 'refusing');
  const closed = await closedPort();
  const unreachable = await lockctlWithEnv(['-H', `${refusing.address},127.0.0.1:${closed}`, 'stats']);
  t.is(unreachable.code, 3);
  t.regex(unreachable.stderr, /^lockctl: no host accepted a connection: /);
  t.true(unreachable.stderr.includes(`${refusing.address} refused`) && unreachable.stderr.includes(`127.0.0.1:${closed}`));
  const [s1, s2] = [await stalledPort(t), await stalledPort(t)];
  const timedOut = await lockctlWithEnv(['-t', '0.3', '-H', `127.0.0.1:${s1},127.0.0.1:${s2}`, 'stats']);
  t.is(timedOut.code, 4, timedOut.stderr);
});

test('a bad host list is a usage error', async (t) => {
  for (const hosts of ['a,,b', 'a:0', 'a:x']) {
    const run = await lockctlWithEnv(['-H', hosts, 'stats']);
    t.is(run.code, 2, hosts);
    t.regex(run.stderr, /^lockctl: (empty entry|bad port)/);
  }
});

test('LOCKCTL_HOST and LOCKCTL_PORT are read from the environment; flags win', async (t) => {
  const server = await startServer(t);
  const closed = await closedPort();
  const port = String(server.port);
  t.like(await lockctlWithEnv(['stats'], { LOCKCTL_HOST: '127.0.0.1', LOCKCTL_PORT: port }), { code: 0 });
  t.like(await lockctlWithEnv(['stats'], { LOCKCTL_HOST: `127.0.0.1:${closed},127.0.0.1:${port}` }), { code: 0 });
  t.like(await lockctlWithEnv(['-p', port, 'stats'], { LOCKCTL_PORT: String(closed) }), { code: 0 });
  t.like(await lockctlWithEnv(['-H', `127.0.0.1:${port}`, 'stats'], { LOCKCTL_HOST: `127.0.0.1:${closed}` }), { code: 0 });
  const envOnly = await lockctlWithEnv(['stats'], { LOCKCTL_HOST: `127.0.0.1:${closed}` });
  t.is(envOnly.code, 3, 'the environment is used when no flag is given');
  const badEnv = await lockctlWithEnv(['stats'], { LOCKCTL_PORT: 'x' });
  t.is(badEnv.code, 2);
  t.regex(badEnv.stderr, /LOCKCTL_PORT/);
});
