import { randomInt } from 'node:crypto';
import type { BenchConfig } from '../config.js';
import type { BenchCluster } from '../cluster/BenchCluster.js';
import { runEtcdGo, type EtcdGoBuild, type EtcdGoMode, type EtcdGoResult } from '../cluster/etcdGo.js';
import { runEtcdLock, type EtcdLockResult } from '../cluster/etcdLock.js';
import type { Endpoint } from '../load/messages.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import { startNullCluster, type NullCluster } from '../cluster/NullCluster.js';

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
  /**
   * Our rows only: where each node's appends went at the end of the row, as it logged it
   * (`n1 own-sequencer`, `n2 forwarded 127.0.0.1:…`, `n3 direct`), how many times a node's route
   * changed inside the measured window, and the lines about links between nodes that failed or
   * were refused during the row.
   */
  readonly appendRoutes?: readonly string[];
  readonly routeChangesInWindow?: number;
  readonly linkTrouble?: readonly string[];
}

export interface EtcdLockRow {
  readonly lockers: number;
  readonly result?: EtcdLockResult;
  readonly error?: string;
}

export interface EtcdGoRow {
  /** Lockers (lock), writers (put), 1 (serial). */
  readonly concurrency: number;
  readonly result?: EtcdGoResult;
  readonly error?: string;
}

/** etcd driven by etcd's own Go client (scripts/benchmark/etcdgo): the strongest form of the peer. */
export interface EtcdGoRows {
  /** Why these rows did not run (Go or etcd's Go sources missing, or the build failed), if so. */
  skipped?: string;
  goVersion?: string;
  /** ms the build took in this run; 0 when an earlier run's binary was reused. */
  buildMs?: number;
  /** One writer, serial Puts: etcd's commit latency with nothing else in flight (once per run). */
  serial?: EtcdGoRow;
  /** concurrency.Mutex Lock then Unlock, as many lockers as connections, at each count. */
  lock: EtcdGoRow[];
  /** Raw Puts, as many writers as connections, at each count: the floor. */
  put: EtcdGoRow[];
}

export interface ClusterThroughputResult {
  throughput?: ClusterThroughputRow[];
  /**
   * The same loads against three null cluster nodes on the same etcd (targets/nullClusterNode.ts),
   * each appending its own batches: a round's platform work without our code when every node
   * appends for itself, the ceiling of the old default. Their CPU is in nodeCpuCores.
   */
  ceiling?: ClusterThroughputRow[];
  /** Why the ceiling rows did not run, if they were asked for and could not. */
  ceilingError?: string;
  /**
   * The same loads against three null cluster nodes that commit through one sequencer (one
   * append in flight for the whole cluster), as our nodes do by default: the ceiling of our design,
   * which each of our rows is read against first.
   */
  sequencedCeiling?: ClusterThroughputRow[];
  sequencedCeilingError?: string;
  etcdLock?: EtcdLockRow[];
  etcdGo?: EtcdGoRows;
}

/** The log line of one Go-client row. */
function describeGo(mode: EtcdGoMode, r: EtcdGoResult): string {
  const latency = `p50 ${r.latencyMs.p50.toFixed(2)} ms, p99 ${r.latencyMs.p99.toFixed(2)} ms`;
  const errors = `${r.errors} errors${r.lastError !== undefined ? ` (last: ${r.lastError})` : ''}`;
  if (mode === 'lock') return `${Math.round(r.cyclesPerSecond)} cycles/s (${Math.round(r.opsPerSecond)} ops/s), cycle ${latency}, ${errors}`;
  return `${Math.round(r.opsPerSecond)} puts/s, ${latency}, ${errors}`;
}

/** Every order of `items` (2 for two, 6 for three). */
function everyOrder<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) => everyOrder([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}

/** Null cluster nodes of one kind, started, and the rows they get. */
interface NullLane {
  readonly label: string;
  readonly nulls: NullCluster;
  readonly rows: ClusterThroughputRow[];
}

/**
 * Request+release cycles on random keys, connections spread over the 3 nodes (which forward their
 * batches to the leader's sequencer, as every node does by default), each shape right away against
 * three null cluster nodes with one sequencer too (the ceiling of that design) and three appending
 * each for itself (the ceiling of the old default); and, at
 * each connection count right after ours, on the same etcd: etcd's lock with etcd's Go client,
 * raw Puts with it (as many writers), etcd's lock recipe with the etcd3 npm client. Before all of
 * them, once, etcd's serial commit latency (one writer, Go client).
 */
export async function runClusterThroughput(
  cluster: BenchCluster,
  config: BenchConfig,
  want: {
    readonly ours: boolean;
    readonly ceiling: boolean;
    readonly sequencedCeiling: boolean;
    readonly etcdLock: boolean;
    readonly etcdGo?: EtcdGoBuild;
  },
  log: (line: string) => void,
): Promise<ClusterThroughputResult> {
  const result: ClusterThroughputResult = {};
  if (want.ours) result.throughput = [];
  if (want.etcdLock) result.etcdLock = [];
  const goBuild = want.etcdGo;
  const binary = goBuild !== undefined && 'binary' in goBuild ? goBuild.binary : undefined;
  if (goBuild !== undefined) {
    result.etcdGo =
      'skipped' in goBuild ? { skipped: goBuild.skipped, lock: [], put: [] } : { goVersion: goBuild.goVersion, buildMs: goBuild.buildMs, lock: [], put: [] };
  }
  const goRow = async (mode: EtcdGoMode, concurrency: number): Promise<EtcdGoRow> => {
    const label =
      mode === 'serial' ? 'etcd serial commit, Go client, 1 writer' : `etcd ${mode}, Go client, ${concurrency} ${mode === 'lock' ? 'lockers' : 'writers'}`;
    try {
      // The same windows as our rows.
      const measured = await runEtcdGo({
        binary: binary!,
        endpoints: cluster.etcdEndpoints,
        mode,
        concurrency,
        warmupMs: config.warmupMs,
        durationMs: config.durationMs,
        etcdPids: cluster.memberPids(),
      });
      log(`${label}: ${describeGo(mode, measured)}`);
      return { concurrency, result: measured };
    } catch (error) {
      log(`${label}: failed: ${(error as Error).message}`);
      return { concurrency, error: (error as Error).message };
    }
  };
  /** One load on `nodes` (ours or the null ones), with the CPU of each node and member in its window. */
  const loadRow = async (label: string, nodes: readonly Endpoint[], nodePids: ReadonlyArray<number | undefined>, connections: number, depth: number) => {
    try {
      const memberPids = cluster.memberPids();
      const measured = await runLoad({
        endpoints: [...nodes],
        protocol: 'lockserver',
        connections,
        depth,
        workers: config.workers,
        warmupMs: config.warmupMs,
        durationMs: config.durationMs,
        cpuPids: [...nodePids, ...memberPids],
      });
      const cpu = measured.pidCpuCores ?? [];
      log(
        `${label} c=${connections} P=${depth}: ${Math.round(measured.opsPerSecond)} ops/s, p99 ${measured.latencyMs.p99.toFixed(2)} ms, ${measured.errors} errors`,
      );
      return { connections, depth, result: measured, nodeCpuCores: cpu.slice(0, nodePids.length), etcdCpuCores: cpu.slice(nodePids.length) };
    } catch (error) {
      log(`${label} c=${connections} P=${depth}: failed: ${(error as Error).message}`);
      return { connections, depth, error: (error as Error).message };
    }
  };
  /** A null-node row; failed if a null node died in it (a lower rate would otherwise pass for the ceiling). */
  const ceilingRow = async ({ label, nulls }: NullLane, connections: number, depth: number): Promise<ClusterThroughputRow> => {
    const row = await loadRow(label, nulls.endpoints, nulls.pids, connections, depth);
    const failure = nulls.failure();
    await nulls.clear().catch((error: unknown) => log(`${label}: clearing their keys failed: ${(error as Error).message}`));
    if (failure === undefined) return row;
    log(`${label} c=${connections} P=${depth}: ${failure}`);
    return { connections, depth, error: failure };
  };
  const lanes: NullLane[] = [];
  for (const sequenced of [false, true]) {
    if (!(sequenced ? want.sequencedCeiling : want.ceiling)) continue;
    const label = sequenced ? 'null cluster nodes, one sequencer' : 'null cluster nodes, each appending';
    try {
      const nulls = await startNullCluster(cluster.etcdEndpoints, config.serverNodeFlags, sequenced);
      const rows: ClusterThroughputRow[] = [];
      if (sequenced) result.sequencedCeiling = rows;
      else result.ceiling = rows;
      lanes.push({ label, nulls, rows });
    } catch (error) {
      const message = (error as Error).message;
      if (sequenced) result.sequencedCeilingError = message;
      else result.ceilingError = message;
      log(`${label}: failed to start: ${message.split('\n')[0]}`);
    }
  }
  const ourRow = async (connections: number, depth: number): Promise<ClusterThroughputRow> => {
    const from = Date.now();
    const row = await loadRow('cluster', cluster.endpoints, cluster.nodePids(), connections, depth);
    const window = row.result === undefined ? undefined : { from: row.result.measureFrom, to: row.result.measureFrom + row.result.durationMs };
    const appendRoutes = cluster.currentRoutes();
    const routeChangesInWindow = window === undefined ? undefined : cluster.appendRoutes.filter((e) => e.at >= window.from && e.at <= window.to).length;
    const linkTrouble = cluster.linkTrouble.filter((e) => e.at >= from).map((e) => `${e.node} ${e.line}`);
    log(
      `cluster c=${connections} P=${depth}: append routes ${appendRoutes.join(', ')}${routeChangesInWindow ? `; ${routeChangesInWindow} route change(s) in the window` : ''}`,
    );
    return { ...row, appendRoutes, routeChangesInWindow, linkTrouble };
  };
  // Ours and the other lanes one right after the other, in every order in turn (from a start that
  // differs from run to run): none always goes first, and none always runs right after the same
  // one (a null row ends by clearing etcd; ours leaves its batches there).
  const orders = everyOrder<NullLane | 'ours'>([...(want.ours ? (['ours'] as const) : []), ...lanes]);
  let shape = randomInt(orders.length);
  try {
    if (binary !== undefined) result.etcdGo!.serial = await goRow('serial', 1);
    for (const connections of config.clusterConnections) {
      for (const depth of config.pipelines) {
        for (const lane of orders[shape++ % orders.length]!) {
          if (lane === 'ours') result.throughput!.push(await ourRow(connections, depth));
          else lane.rows.push(await ceilingRow(lane, connections, depth));
        }
      }
      if (binary !== undefined) {
        result.etcdGo!.lock.push(await goRow('lock', connections));
        result.etcdGo!.put.push(await goRow('put', connections));
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
  } finally {
    await Promise.all(lanes.map((lane) => lane.nulls.stop()));
  }
  return result;
}
