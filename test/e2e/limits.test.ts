import test from 'ava';
import { get, sample } from '../helpers/metrics.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// The table's limits on a real server process: bytes (--max-table-bytes), one owner's entries
// (--max-locks-per-owner) and one connection's (--max-locks-per-connection). Each refuses a new
// entry as a full table does, position 0; each refusal is counted by limit and logged (throttled).

const LONG = 255;
const long = (prefix: string, i: number): string => `${prefix}${i}`.padEnd(LONG, '.');

async function limitedServer(t: Parameters<typeof startServer>[0]): Promise<{ server: ServerProcess; metricsPort: number }> {
  const server = await startServer(t, {
    args: ['--max-table-bytes', '8K', '--max-locks-per-owner', '3', '--max-locks-per-connection', '4', '--metrics-port', '0', '--metrics-listen', '127.0.0.1'],
  });
  return { server, metricsPort: Number((await server.event('metrics-started')).fields.port) };
}

test('--max-table-bytes 8K holds seven entries of 255-byte names (1,168 bytes each): the eighth gets position 0, logged and counted; a release makes room', async (t) => {
  const { server, metricsPort } = await limitedServer(t);
  const clients = await Promise.all([server.accepted(), server.accepted(), server.accepted()]);
  for (let i = 0; i < 7; i++) t.is(await ask.request(clients[i % 3]!, long('k', i), long('i', i), long('o', i)), 1, `entry ${i}`);
  const logged = server.nextEvent('request-refused');
  t.is(await ask.request(clients[2], long('k', 7), long('i', 7), long('o', 7)), 0);
  t.like((await logged).fields, { limit: 'max-table-bytes' });
  const body = (await get(metricsPort, '/metrics')).body;
  t.is(sample(body, 'lockserver_table_bytes'), 7 * 1168);
  t.is(sample(body, 'lockserver_table_bytes_limit'), 8192);
  t.is(sample(body, 'lockserver_requests_refused_total{limit="max-table-bytes"}'), 1);
  t.is(sample(body, 'lockserver_requests_refused_total{limit="max-locks"}'), 0);
  t.is(await ask.release(clients[0], long('k', 0), long('i', 0), long('o', 0)), 1);
  t.is(await ask.request(clients[2], long('k', 7), long('i', 7), long('o', 7)), 1);
});

test('--max-locks-per-owner 3: an owner with three entries is refused a fourth (position 0) on any connection; other owners are not', async (t) => {
  const { server, metricsPort } = await limitedServer(t);
  const [a, b] = await Promise.all([server.accepted(), server.accepted()]);
  for (const key of ['a', 'b', 'c']) t.is(await ask.request(a, key, '1', 'alice'), 1);
  const logged = server.nextEvent('request-refused');
  t.is(await ask.request(b, 'd', '1', 'alice'), 0);
  t.like((await logged).fields, { limit: 'max-locks-per-owner', owner: 'alice', key: 'd' });
  t.is(await ask.request(b, 'a', '1', 'alice'), 1, 'renewing one of its own is no new entry');
  t.is(await ask.request(b, 'a', '1', 'bob'), 2);
  const body = (await get(metricsPort, '/metrics')).body;
  t.is(sample(body, 'lockserver_requests_refused_total{limit="max-locks-per-owner"}'), 1);
});

test('--max-locks-per-connection 4: a connection whose four entries are still held is refused a fifth; another connection is not, and a release gives room back', async (t) => {
  const { server, metricsPort } = await limitedServer(t);
  const [a, b] = await Promise.all([server.accepted(), server.accepted()]);
  for (const owner of ['o1', 'o2', 'o3', 'o4']) t.is(await ask.request(a, 'k', owner, owner), 1);
  const logged = server.nextEvent('request-refused');
  t.is(await ask.request(a, 'k', 'o5', 'o5'), 0);
  t.like((await logged).fields, { limit: 'max-locks-per-connection' });
  t.is(await ask.request(b, 'k', 'o5', 'o5'), 1);
  // Released through the other connection: the entry counted against the first one goes all the same.
  t.is(await ask.release(b, 'k', 'o1', 'o1'), 1);
  t.is(await ask.request(a, 'k', 'o6', 'o6'), 1);
  const body = (await get(metricsPort, '/metrics')).body;
  t.is(sample(body, 'lockserver_requests_refused_total{limit="max-locks-per-connection"}'), 1);
});

test('--max-table-bytes takes sizes with K, M, G suffixes and refuses what is not one', async (t) => {
  const ok = await startServer(t, { args: ['--max-table-bytes', '2GiB', '--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  const port = Number((await ok.event('metrics-started')).fields.port);
  t.is(sample((await get(port, '/metrics')).body, 'lockserver_table_bytes_limit'), 2 ** 31);
  await t.throwsAsync(startServer(t, { args: ['--max-table-bytes', '1.5G'] }), { message: /not a size in bytes/ });
});
