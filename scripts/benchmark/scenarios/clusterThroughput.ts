import type { BenchConfig } from '../config.js';
import type { BenchCluster } from '../cluster/BenchCluster.js';
import { runEtcdLock, type EtcdLockResult } from '../cluster/etcdLock.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';

const ETCD_LOCK_MIN_WARMUP_MS = 1_000;
const ETCD_LOCK_MIN_DURATION_MS = 3_000;

export interface ClusterThroughputRow {
  readonly connections: number;
  readonly depth: number;
  readonly result?: LoadResult;
  /** Share of one core used by each node (n1…) and each etcd member (m1…) during the window. */
  readonly nodeCpuCores?: ReadonlyArray<number | undefined>;
  readonly etcdCpuCores?: ReadonlyArray<number | undefined>;
  readonly error?: string;
}

export interface EtcdLockRow {
  readonly lockers: number;
  readonly result?: EtcdLockResult;
  readonly error?: string;
}

export interface ClusterThroughputResult {
  throughput?: ClusterThroughputRow[];
  etcdLock?: EtcdLockRow[];
}

/**
 * Request+release cycles on random keys, connections spread over the 3 nodes; and, at each
 * connection count right after ours, etcd's lock recipe with as many lockers on the same etcd.
 */
export async function runClusterThroughput(
  cluster: BenchCluster,
  config: BenchConfig,
  want: { readonly ours: boolean; readonly etcdLock: boolean },
  log: (line: string) => void,
): Promise<ClusterThroughputResult> {
  const result: ClusterThroughputResult = {};
  if (want.ours) result.throughput = [];
  if (want.etcdLock) result.etcdLock = [];
  for (const connections of config.clusterConnections) {
    if (want.ours) {
      for (const depth of config.pipelines) {
        try {
          const nodePids = cluster.nodePids();
          const memberPids = cluster.memberPids();
          const measured = await runLoad({
            endpoints: cluster.endpoints,
            protocol: 'lockserver',
            connections,
            depth,
            workers: config.workers,
            warmupMs: config.warmupMs,
            durationMs: config.durationMs,
            cpuPids: [...nodePids, ...memberPids],
          });
          const cpu = measured.pidCpuCores ?? [];
          result.throughput!.push({
            connections,
            depth,
            result: measured,
            nodeCpuCores: cpu.slice(0, nodePids.length),
            etcdCpuCores: cpu.slice(nodePids.length),
          });
          log(
            `cluster c=${connections} P=${depth}: ${Math.round(measured.opsPerSecond)} ops/s, p99 ${measured.latencyMs.p99.toFixed(2)} ms, ${measured.errors} errors`,
          );
        } catch (error) {
          result.throughput!.push({ connections, depth, error: (error as Error).message });
          log(`cluster c=${connections} P=${depth}: failed: ${(error as Error).message}`);
        }
      }
    }
    if (want.etcdLock) {
      try {
        const measured = await runEtcdLock({
          endpoints: cluster.etcdEndpoints,
          lockers: connections,
          // A cycle of etcd's recipe takes hundreds of ms at 480 lockers: a 1 s window would hold almost none.
          warmupMs: Math.max(config.warmupMs, ETCD_LOCK_MIN_WARMUP_MS),
          durationMs: Math.max(config.durationMs, ETCD_LOCK_MIN_DURATION_MS),
          etcdPids: cluster.memberPids(),
        });
        result.etcdLock!.push({ lockers: connections, result: measured });
        log(
          `etcd lock recipe, ${connections} lockers: ${Math.round(measured.cyclesPerSecond)} cycles/s (${Math.round(measured.opsPerSecond)} ops/s), ${measured.failures} failures`,
        );
      } catch (error) {
        result.etcdLock!.push({ lockers: connections, error: (error as Error).message });
        log(`etcd lock recipe, ${connections} lockers: failed: ${(error as Error).message}`);
      }
    }
  }
  return result;
}
