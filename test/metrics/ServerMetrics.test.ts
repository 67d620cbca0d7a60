import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { ServerMetrics, type MetricsSource } from '../../src/metrics/ServerMetrics.js';
import { EndReason } from '../../src/locks/LockTable.js';
import { Command } from '../../src/protocol/constants.js';
import { ServerStats } from '../../src/server/ServerStats.js';

function fakeSource(): MetricsSource {
  const stats = new ServerStats(new FakeClock(5_000));
  stats.commands[Command.Renew] = 7;
  stats.accepted = 4;
  stats.rejectedTooBusy = 2;
  return {
    server: { stats, draining: true, commandObserver: undefined },
    service: { counts: async () => ({ owners: 3, waiters: 9 }), waiting: { heldBack: 2, oldestWaitMs: 1_500, grantWaits: 3, lossWaits: 1 } },
  };
}

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('before a daemon is attached, only the cluster role and process metrics have values', async (t) => {
  const metrics = new ServerMetrics();
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_commands_total{command="renew"}'), undefined);
  t.is(value(text, 'lockserver_cluster_role{role="standalone"}'), 1);
});

test('attach() reads the daemon at scrape time and becomes its command observer', async (t) => {
  const metrics = new ServerMetrics();
  const source = fakeSource();
  metrics.attach(source);
  t.is(source.server.commandObserver, metrics);
  metrics.commandDone(Command.Renew, 0.2);
  metrics.commandDone(Command.Renew, 3);
  metrics.commandDone(0x99, 1);
  metrics.countExpired(5);
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_commands_total{command="renew"}'), 7);
  t.is(value(text, 'lockserver_connections_accepted_total'), 4);
  t.is(value(text, 'lockserver_connections_rejected_total{reason="too-busy"}'), 2);
  t.is(value(text, 'lockserver_lock_owners'), 3);
  t.is(value(text, 'lockserver_lock_waiters'), 9);
  t.is(value(text, 'lockserver_draining'), 1);
  t.is(value(text, 'lockserver_lock_expiries_total'), 5);
  t.is(value(text, 'lockserver_command_duration_seconds_count{command="renew"}'), 2);
  t.is(value(text, 'lockserver_command_duration_seconds_bucket{le="0.00025",command="renew"}'), 1);
  t.is(value(text, 'lockserver_command_duration_seconds_bucket{le="0.0025",command="renew"}'), 1);
  t.is(value(text, 'lockserver_command_duration_seconds_bucket{le="0.005",command="renew"}'), 2);
});

test('waiting: the time to each grant, how locks and waits end (every label shown from 0), locks held back, the oldest wait', async (t) => {
  const metrics = new ServerMetrics();
  metrics.attach(fakeSource());
  metrics.granted(0);
  metrics.granted(4_000);
  metrics.ended(EndReason.Released, true);
  metrics.ended(EndReason.Expired, true);
  metrics.ended(EndReason.Expired, true);
  metrics.ended(EndReason.Canceled, false);
  metrics.ended(EndReason.ReleasedAll, false);
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_lock_wait_seconds_count'), 2);
  t.is(value(text, 'lockserver_lock_wait_seconds_bucket{le="0.001"}'), 1);
  t.is(value(text, 'lockserver_lock_wait_seconds_bucket{le="5"}'), 2);
  t.is(value(text, 'lockserver_lock_ends_total{how="released"}'), 1);
  t.is(value(text, 'lockserver_lock_ends_total{how="expired"}'), 2);
  t.is(value(text, 'lockserver_lock_ends_total{how="released-key"}'), 0);
  t.is(value(text, 'lockserver_lock_ends_total{how="released-all"}'), 0);
  t.is(value(text, 'lockserver_lock_ends_total{how="canceled"}'), undefined, 'an owner is never canceled');
  t.is(value(text, 'lockserver_wait_ends_total{how="canceled"}'), 1);
  t.is(value(text, 'lockserver_wait_ends_total{how="released-all"}'), 1);
  t.is(value(text, 'lockserver_wait_ends_total{how="expired"}'), 0);
  t.is(value(text, 'lockserver_locks_held_back'), 2);
  t.is(value(text, 'lockserver_oldest_waiter_seconds'), 1.5);
  t.is(value(text, 'lockserver_clients_waiting{for="grant"}'), 3);
  t.is(value(text, 'lockserver_clients_waiting{for="loss"}'), 1);
});

test('a cluster core can report its role and leader changes', async (t) => {
  const metrics = new ServerMetrics();
  metrics.setCluster({ role: () => 'follower', leaderChanges: () => 3 });
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_cluster_role{role="follower"}'), 1);
  t.is(value(text, 'lockserver_cluster_role{role="standalone"}'), undefined);
  t.is(value(text, 'lockserver_cluster_leader_changes_total'), 3);
});

test('the extension commands have their own series: fence (0x09) and request-fenced (0x0A)', async (t) => {
  const metrics = new ServerMetrics();
  const source = fakeSource();
  source.server.stats.commands[Command.Fence] = 2;
  source.server.stats.commands[Command.RequestFenced] = 5;
  metrics.attach(source);
  metrics.commandDone(Command.RequestFenced, 0.1);
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_commands_total{command="fence"}'), 2);
  t.is(value(text, 'lockserver_commands_total{command="request-fenced"}'), 5);
  t.is(value(text, 'lockserver_command_duration_seconds_count{command="request-fenced"}'), 1);
});

/** Every series name (without labels) the registry exports with a sample. */
async function seriesNames(metrics: ServerMetrics): Promise<Set<string>> {
  const text = await metrics.registry.metrics();
  return new Set(
    text
      .split('\n')
      .filter((line) => line.startsWith('lockserver_'))
      .map((line) => line.replace(/[{ ].*$/, '')),
  );
}

test('a single node exports no cluster-mode series: only its role (standalone) and leader changes (0)', async (t) => {
  const metrics = new ServerMetrics();
  metrics.attach(fakeSource());
  const cluster = [...(await seriesNames(metrics))].filter((name) => name.startsWith('lockserver_cluster_'));
  t.deepEqual(cluster, ['lockserver_cluster_role', 'lockserver_cluster_leader_changes_total']);
});

test('cluster mode exports its series, with no figure from a node still joining but readiness 0', async (t) => {
  const metrics = new ServerMetrics({ clusterMode: true });
  const names = await seriesNames(metrics);
  for (const name of [
    'lockserver_cluster_ready',
    'lockserver_cluster_etcd_reachable',
    'lockserver_cluster_applied_version',
    'lockserver_cluster_lag_batches',
    'lockserver_cluster_snapshot_age_seconds',
    'lockserver_cluster_snapshot_bytes',
    'lockserver_cluster_expiries_proposed_total',
    'lockserver_cluster_commit_duration_seconds_count',
    'lockserver_cluster_batch_commands_count',
    'lockserver_cluster_append_attempts_total',
    'lockserver_cluster_sequencer_append_batches_count',
  ]) {
    t.true(names.has(name), name);
  }
  const text = await metrics.registry.metrics();
  t.is(value(text, 'lockserver_cluster_ready'), 0);
  t.is(value(text, 'lockserver_cluster_append_attempts_total{route="forwarded",outcome="failed"}'), 0);
});
