import test from 'ava';
import { get, sample } from '../helpers/metrics.js';
import { connectClient } from '../helpers/lockClient.js';
import { pollUntil } from '../helpers/poll.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';

async function startWithMetrics(t: Parameters<typeof startServer>[0]): Promise<{ server: ServerProcess; metricsPort: number }> {
  const server = await startServer(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  const started = await server.event('metrics-started');
  t.is(started.fields.address, '127.0.0.1');
  t.is(started.fields.path, '/metrics');
  return { server, metricsPort: Number(started.fields.port) };
}

test('the endpoint serves the stats counters, lock gauges, latency histograms and cluster role', async (t) => {
  const { server, metricsPort } = await startWithMetrics(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('k', 'i', 'a'), 1);
  t.is(await client.request('k', 'i', 'b'), 2);
  t.is(await client.request('k', 'j', 'c'), 1);
  await client.findOwner('k', 'i');
  await client.stats();

  const scrape = await get(metricsPort, '/metrics');
  t.is(scrape.status, 200);
  t.regex(scrape.contentType, /^text\/plain; version=0\.0\.4/);
  const { body } = scrape;
  t.is(sample(body, 'lockserver_commands_total{command="request"}'), 3);
  t.is(sample(body, 'lockserver_commands_total{command="find-owner"}'), 1);
  t.is(sample(body, 'lockserver_commands_total{command="stats"}'), 1);
  t.is(sample(body, 'lockserver_commands_total{command="list"}'), 0);
  t.is(sample(body, 'lockserver_connections_accepted_total'), 1);
  t.is(sample(body, 'lockserver_connections_rejected_total{reason="not-in-hosts-file"}'), 0);
  t.is(sample(body, 'lockserver_connections_rejected_total{reason="too-busy"}'), 0);
  t.is(sample(body, 'lockserver_connections_active'), 1);
  t.is(sample(body, 'lockserver_lock_owners'), 2);
  t.is(sample(body, 'lockserver_lock_waiters'), 1);
  t.is(sample(body, 'lockserver_lock_expiries_total'), 0);
  t.is(sample(body, 'lockserver_draining'), 0);
  t.is(sample(body, 'lockserver_command_duration_seconds_count{command="request"}'), 3);
  t.is(sample(body, 'lockserver_command_duration_seconds_bucket{le="+Inf",command="request"}'), 3);
  t.is(sample(body, 'lockserver_command_duration_seconds_count{command="stats"}'), 1);
  t.is(sample(body, 'lockserver_cluster_role{role="standalone"}'), 1);
  t.is(sample(body, 'lockserver_cluster_leader_changes_total'), 0);
  // Cluster mode's own series are not there at all: a 0 would read as "not ready", "etcd unreachable".
  t.is(sample(body, 'lockserver_cluster_ready'), undefined);
  t.is(sample(body, 'lockserver_cluster_etcd_reachable'), undefined);
  t.notRegex(body, /^lockserver_cluster_(?!role\{|leader_changes_total )/m);
  t.regex(body, /^# TYPE lockserver_commands_total counter$/m);
  t.regex(body, /^# TYPE lockserver_command_duration_seconds histogram$/m);
  t.regex(body, /^process_cpu_user_seconds_total /m);
});

test('figures are live: expiries, releases and drain mode show up in the next scrape', async (t) => {
  const { server, metricsPort } = await startWithMetrics(t);
  const client = await connectClient(t, server.port);
  t.is(await client.request('short', 'lived', 'a', { ttl: 1 }), 1);
  t.is(await client.request('keep', 'it', 'b', { ttl: 0 }), 1);
  const expired = await pollUntil('the expiry to be counted', async () => {
    const { body } = await get(metricsPort, '/metrics');
    return sample(body, 'lockserver_lock_expiries_total') === 1 ? body : undefined;
  });
  t.is(sample(expired, 'lockserver_lock_owners'), 1);

  const draining = server.nextEvent('drain-started');
  server.signal('SIGSYS');
  await draining;
  t.is(sample((await get(metricsPort, '/metrics')).body, 'lockserver_draining'), 1);
});

test('other paths are 404, other methods 405, HEAD has no body', async (t) => {
  const { metricsPort } = await startWithMetrics(t);
  t.is((await get(metricsPort, '/')).status, 404);
  t.is((await get(metricsPort, '/metrics/x')).status, 404);
  t.is((await get(metricsPort, '/metrics', 'POST')).status, 405);
  t.like(await get(metricsPort, '/metrics', 'HEAD'), { status: 200, body: '' });
  t.is((await get(metricsPort, '/metrics?x=1')).status, 200);
});
