import test from 'ava';
import { connectClient } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';

test('each signal is logged as event=signal with what it leads to', async (t) => {
  const server = await startServer(t);
  for (const [signal, action, then] of [
    ['SIGHUP', 'reload-hosts', 'hosts-reloaded'],
    ['SIGUSR1', 'dump-stats', 'stats-written'],
  ] as const) {
    const logged = server.nextEvent('signal', (e) => e.fields.signal === signal);
    const outcome = server.nextEvent(then);
    server.signal(signal);
    t.is((await logged).fields.action, action);
    await outcome;
  }
  const logged = server.nextEvent('signal', (e) => e.fields.signal === 'SIGTERM');
  server.signal('SIGTERM');
  t.is((await logged).fields.action, 'shutdown');
  t.is((await server.waitForExit()).code, 0);
});

test('drain reports what is left as entries go away, then shuts down', async (t) => {
  const server = await startServer(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('k', '1', 'a'), 1);
  t.is(await client.request('k', '1', 'b'), 2);
  t.is(await client.request('k', '2', 'c'), 1);

  const first = server.nextEvent('drain-progress');
  server.signal('SIGSYS');
  t.like((await first).fields, { owners: '2', waiters: '1' });
  t.is(server.eventsNamed('signal').at(-1)?.fields.action, 'drain');

  const afterRelease = server.nextEvent('drain-progress');
  t.is(await client.release('k', '1', 'a'), 1);
  t.like((await afterRelease).fields, { owners: '2', waiters: '0' });

  const drained = server.nextEvent('drain-progress', (e) => e.fields.owners === '0');
  const shutdown = server.nextEvent('shutdown');
  t.is(await client.releaseAll('b'), 1);
  t.is(await client.releaseAll('c'), 1);
  t.like((await drained).fields, { owners: '0', waiters: '0' });
  t.is((await shutdown).fields.reason, 'drained');
  t.is((await server.waitForExit()).code, 0);
});

test('refusals are logged with their reason', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n', args: ['--max-connections', '1'] });
  const notInHosts = server.nextEvent('refused', (e) => e.fields.reason === 'not-in-hosts-file');
  await connectClient(t, server.port, { localAddress: '127.0.0.2' }).catch(() => {});
  t.is((await notInHosts).fields.peer, '127.0.0.2');
  await connectClient(t, server.port);
  const tooBusy = server.nextEvent('refused', (e) => e.fields.reason === 'too-busy');
  await connectClient(t, server.port).catch(() => {});
  t.is((await tooBusy).fields.active, '1');
});
