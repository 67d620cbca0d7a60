import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { BenchCluster, clusterUnavailableReason, type ClusterOptions } from '../cluster/BenchCluster.js';
import { buildEtcdGo, type EtcdGoBuild } from '../cluster/etcdGo.js';
import { lockserverCli } from '../targets/LockServerTarget.js';
import type { BenchConfig, ScenarioName } from '../config.js';
import type { RunningTarget, Target } from '../targets/Target.js';
import { runClusterFailover, type FailoverResult } from './clusterFailover.js';
import { prepareClusterReleaseAll, runClusterReleaseAll, type ClusterReleaseAllResult } from './clusterReleaseAll.js';
import { runClusterScale, type ClusterScaleResult, type SnapshotEvent } from './clusterScale.js';
import { runClusterThroughput, type ClusterThroughputResult } from './clusterThroughput.js';
import { runContention, type ContentionResult } from './contention.js';

export interface ClusterResult extends ClusterThroughputResult {
  /** Why no cluster row ran (etcd missing), if so. */
  skipped?: string;
  etcdVersion?: string;
  contention?: ContentionResult;
  failover?: FailoverResult;
  scale?: ClusterScaleResult;
  releaseAll?: ClusterReleaseAllResult;
  errors: Array<{ readonly scenario: string; readonly message: string }>;
}

/** A quick run cannot wait the 60 s after which the leader snapshots a table changed by few batches. */
const QUICK_SNAPSHOT_ARGS = ['--snapshot-every', '200'];

/** A running cluster seen as a Target, so the single-node scenarios (contention) run on it unchanged. */
function asTarget(cluster: BenchCluster): Target {
  const running: RunningTarget = {
    endpoints: cluster.endpoints,
    pids: cluster.nodePids().filter((p): p is number => p !== undefined),
    readyAt: Date.now(),
    stop: async () => {},
  };
  return { name: 'lockserver cluster', protocol: 'lockserver', unavailableReason: async () => undefined, start: async () => running };
}

/**
 * The cluster scenarios, each on a fresh cluster of 3 etcd members and 3 nodes (so that a failure
 * or the million locks of one never weigh on the next); every cluster is stopped, pass or fail.
 */
export async function runClusterScenarios(config: BenchConfig, log: (line: string) => void): Promise<ClusterResult> {
  const result: ClusterResult = { errors: [] };
  const has = (name: ScenarioName): boolean => config.scenarios.has(name);
  const skipped = await clusterUnavailableReason();
  if (skipped !== undefined) {
    log(`cluster: skipped (${skipped})`);
    result.skipped = skipped;
    return result;
  }
  result.etcdVersion = await promisify(execFile)('etcd', ['--version']).then(
    ({ stdout }) => stdout.match(/etcd Version: (\S+)/)?.[1],
    () => undefined,
  );
  const snapshots: SnapshotEvent[] = [];
  const onNodeLine = (node: string, line: string): void => {
    if (!/\bevent=snapshot-written\b/.test(line)) return;
    const field = (name: string): number => Number(line.match(new RegExp(`\\b${name}=(\\d+)`))?.[1] ?? NaN);
    snapshots.push({ node, entries: field('entries'), bytes: field('bytes'), ms: field('ms'), at: Date.now() });
  };
  const onCluster = async (
    name: string,
    work: (cluster: BenchCluster) => Promise<void>,
    nodeArgs: readonly string[] = [],
    more: ClusterOptions = {},
  ): Promise<void> => {
    log(`${name}: starting 3 etcd members and 3 nodes`);
    let cluster: BenchCluster | undefined;
    try {
      cluster = await BenchCluster.start({
        nodeFlags: config.serverNodeFlags,
        nodeLog: config.serverLog,
        cli: lockserverCli(config.serverRoot),
        onNodeLine,
        nodeArgs,
        ...more,
      });
      await work(cluster);
    } catch (error) {
      result.errors.push({ scenario: name, message: (error as Error).stack ?? String(error) });
      log(`${name}: failed: ${(error as Error).message.split('\n')[0]}`);
    } finally {
      await cluster?.stop();
    }
  };

  if (has('cluster-throughput') || has('cluster-etcd-lock') || has('cluster-etcd-go') || has('cluster-ceiling') || has('cluster-ceiling-sequenced')) {
    // Built before the cluster starts, so that the compiler's CPU weighs on no row.
    let etcdGo: EtcdGoBuild | undefined;
    if (has('cluster-etcd-go')) {
      etcdGo = await buildEtcdGo(log);
      if ('skipped' in etcdGo) log(`etcd Go client rows: skipped: ${etcdGo.skipped}`);
      else log(`etcd Go client: ${etcdGo.cached ? 'reusing' : 'built'} ${etcdGo.binary}`);
    }
    await onCluster('cluster-throughput', async (cluster) => {
      Object.assign(
        result,
        await runClusterThroughput(
          cluster,
          config,
          {
            ours: has('cluster-throughput'),
            ceiling: has('cluster-ceiling'),
            sequencedCeiling: has('cluster-ceiling-sequenced'),
            etcdLock: has('cluster-etcd-lock'),
            etcdGo,
          },
          log,
        ),
      );
    });
  }
  if (has('cluster-contention')) {
    await onCluster('cluster-contention', async (cluster) => {
      result.contention = await runContention(asTarget(cluster), config, log);
    });
  }
  if (has('cluster-failover')) {
    await onCluster('cluster-failover', async (cluster) => {
      result.failover = await runClusterFailover(cluster, config, log);
    });
  }
  if (has('cluster-scale')) {
    await onCluster(
      'cluster-scale',
      async (cluster) => {
        snapshots.length = 0;
        result.scale = await runClusterScale(cluster, snapshots, config, log);
      },
      config.quick ? QUICK_SNAPSHOT_ARGS : [],
    );
  }
  if (has('cluster-release-all')) {
    const setup = await prepareClusterReleaseAll(config);
    try {
      snapshots.length = 0;
      setup.startedAt = performance.now();
      await onCluster(
        'cluster-release-all',
        async (cluster) => {
          result.releaseAll = await runClusterReleaseAll(cluster, setup, snapshots, config, log);
        },
        [],
        setup.clusterOptions,
      );
    } finally {
      await setup.cleanup();
    }
  }
  return result;
}
