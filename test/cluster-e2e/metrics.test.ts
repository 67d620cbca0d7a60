import test from 'ava';
import { EtcdCluster, LockCluster, needsEtcd } from '../helpers/etcdCluster.js';
import { get, sample } from '../helpers/metrics.js';
import { pollUntil } from '../helpers/poll.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask } from '../helpers/wire.js';

// The metrics endpoint of a cluster node: role, readiness, etcd reachability, applied position and
// lag, group-commit histograms, snapshots and expiry proposals.

const etcdTest = needsEtcd(test);

async function metricsPort(node: ServerProcess): Promise<number> {
  return Number((await node.event('metrics-started')).fields.port);
}

etcdTest.serial('role, readiness, position, commit latency and batch size, snapshots and expiries are scraped from each node', async (t) => {
  t.timeout(120_000);
  const etcd = await EtcdCluster.start(t, {});
  const cluster = new LockCluster(t, etcd);
  const metrics = ['--metrics-port', '0', '--metrics-listen', '127.0.0.1', '--snapshot-every', '5'];
  const leader = await cluster.startNode({ name: 'n1', args: [...metrics, '--candidate-priority', '1'] });
  const follower = await cluster.startNode({ name: 'n2', args: [...metrics, '--candidate-priority', '2'] });
  const [leaderPort, followerPort] = [await metricsPort(leader), await metricsPort(follower)];
  await leader.event('leader', (e) => e.fields.self === 'true');

  const client = await follower.accepted();
  for (let i = 0; i < 8; i++) t.is(await ask.request(client, `k${i}`, 'i', 'o', { ttl: 1, ttw: 0, priority: 0 }), 1);
  // The leader proposes the expiries of the 1-second locks, and snapshots after 5 batches.
  await leader.event('snapshot-written');
  await pollUntil('the 1 s locks expiring', async () => ((await ask.stats(client)).owners === 0 ? true : undefined), 30_000);

  const lead = (await get(leaderPort, '/metrics')).body;
  const follow = (await get(followerPort, '/metrics')).body;
  t.is(sample(lead, 'lockserver_cluster_role{role="leader"}'), 1);
  t.is(sample(follow, 'lockserver_cluster_role{role="follower"}'), 1);
  for (const body of [lead, follow]) {
    t.is(sample(body, 'lockserver_cluster_ready'), 1);
    t.is(sample(body, 'lockserver_cluster_etcd_reachable'), 1);
    t.true(sample(body, 'lockserver_cluster_applied_version')! >= 9, 'eight requests and at least one expiry batch applied');
    t.true(sample(body, 'lockserver_cluster_leader_changes_total')! >= 1);
  }
  t.true(sample(lead, 'lockserver_cluster_expiries_proposed_total')! >= 8);
  t.is(sample(follow, 'lockserver_cluster_expiries_proposed_total'), 0);
  t.true(sample(lead, 'lockserver_cluster_snapshot_bytes')! > 0);
  t.true(sample(lead, 'lockserver_cluster_snapshot_age_seconds')! >= 0);
  // The follower appended the eight requests itself: its commit histogram counts them.
  t.true(sample(follow, 'lockserver_cluster_commit_duration_seconds_count')! >= 1);
  t.is(sample(follow, 'lockserver_cluster_batch_commands_sum'), 8);
  // Each of its appends went to the leader's sequencer, or, before it had read where the leader
  // takes links (a second after it started), to etcd directly.
  const routed = ['direct', 'forwarded'].map((route) => sample(follow, `lockserver_cluster_append_attempts_total{route="${route}",outcome="committed"}`)!);
  t.is(routed[0]! + routed[1]!, 8, `direct ${routed[0]}, forwarded ${routed[1]}`);
});
