import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CLUSTER_SCENARIOS = [
  'cluster-throughput',
  'cluster-etcd-lock',
  'cluster-etcd-go',
  'cluster-ceiling',
  'cluster-ceiling-sequenced',
  'cluster-contention',
  'cluster-failover',
  'cluster-scale',
  'cluster-release-all',
] as const;
/** Issue 37: handoff latency on one node, one etcd member and the 3-node cluster; what idle waiters cost etcd. */
export const HANDOFF_SCENARIOS = ['handoff-single', 'handoff-etcd', 'handoff-cluster', 'handoff-waiters'] as const;
export const SCENARIOS = [
  'throughput',
  'contention',
  'held',
  'list',
  'fairness',
  'expiry',
  'release-all',
  'entry-bytes',
  'idle',
  'redis',
  'ceiling',
  'random',
  ...CLUSTER_SCENARIOS,
  ...HANDOFF_SCENARIOS,
] as const;
export type ScenarioName = (typeof SCENARIOS)[number];
/** Names --only/--skip also take, each standing for several scenarios. */
export const SCENARIO_GROUPS: Readonly<Record<string, readonly ScenarioName[]>> = { cluster: CLUSTER_SCENARIOS, handoff: HANDOFF_SCENARIOS };

/** `--only`/`--skip`: comma-separated selectors, groups expanded; throws on an unknown one. */
export function parseScenarios(value: string): ScenarioName[] {
  return value.split(',').flatMap((item): ScenarioName[] => {
    const name = item.trim();
    const group = SCENARIO_GROUPS[name];
    if (group !== undefined) return [...group];
    if (!(SCENARIOS as readonly string[]).includes(name)) {
      throw new Error(`"${name}" is not one of ${[...SCENARIOS, ...Object.keys(SCENARIO_GROUPS)].join(', ')}.`);
    }
    return [name as ScenarioName];
  });
}

/** A load shape: how many connections, how many commands in flight on each. */
export interface LoadShape {
  readonly connections: number;
  readonly depth: number;
}

/** Everything a run is told; defaults are the full run, --quick shrinks them. */
export interface BenchConfig {
  readonly quick: boolean;
  readonly scenarios: ReadonlySet<ScenarioName>;
  readonly connections: readonly number[];
  readonly pipelines: readonly number[];
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Rounds of the throughput matrix; each cell reports its median round. */
  readonly repeats: number;
  /** Load-generator worker threads. */
  readonly workers: number;
  readonly contenders: number;
  readonly rounds: number;
  readonly roundLimitMs: number;
  readonly held: readonly number[];
  readonly heldLoads: readonly LoadShape[];
  readonly listEntries: number;
  readonly listCalls: number;
  /** Fairness: entries under the listed key (200-byte owners) and list requests pipelined at once. */
  readonly fairnessEntries: number;
  readonly fairnessRequests: number;
  readonly expireCount: number;
  /** Locks one owner holds, a waiter behind each, when it releases all (release-all scenario). */
  readonly releaseAllCount: number;
  /** The same in the cluster (cluster-release-all). */
  readonly clusterReleaseAllCount: number;
  /** Entries filled for each figure of the entry-bytes scenario, and the lengths of their names. */
  readonly entryBytesCount: number;
  readonly entryBytesNames: readonly number[];
  /** The package whose dist/src/cli/lockserver.js runs as our server and as every cluster node (default: this one). */
  readonly serverRoot: string | undefined;
  readonly idleConnections: number;
  readonly serverNodeFlags: readonly string[];
  readonly serverLog: string | undefined;
  readonly jsonPath: string;
  readonly redisServer: string | undefined;
  readonly redisBenchmark: string | undefined;
  readonly seed: number;
  /** Random-keys workload: key spaces (each its own fresh servers), loads run at each. */
  readonly keySpaces: readonly number[];
  readonly randomLoads: readonly LoadShape[];
  /** How long after the random load our server's RSS is read again. */
  readonly rssSettleMs: number;
  /** Cluster: connection counts (and etcd lockers) of the throughput rows; pipelines are `pipelines`. */
  readonly clusterConnections: readonly number[];
  /** Cluster scale: locks held, and how long the full load runs before etcd's data dir is measured. */
  readonly clusterHeld: number;
  readonly clusterSoakMs: number;
  /** Cluster failover: clients, steady load before the first event, time watched after each, SIGSTOP length. */
  readonly failoverClients: number;
  readonly failoverBaselineMs: number;
  readonly failoverObserveMs: number;
  readonly failoverPauseMs: number;
  /** Handoff: tries of every row, and the range the owner's delay (after the waiter queued) is drawn from. */
  readonly handoffTries: number;
  readonly handoffDelayMs: { readonly min: number; readonly max: number };
  /** Idle waiters: how many, the measured window, and the polling waiters' interval. */
  readonly waiters: number;
  readonly waitersWindowMs: number;
  readonly waitersPollMs: number;
}

export function defaultJsonPath(now = new Date()): string {
  return join(tmpdir(), 'lockserver-bench', `bench-${now.toISOString().replace(/[:.]/g, '-')}.json`);
}

export const FULL_DEFAULTS = {
  connections: [1, 50, 500],
  pipelines: [1, 16],
  warmupMs: 1_000,
  durationMs: 3_000,
  repeats: 3,
  contenders: 200,
  rounds: 3,
  roundLimitMs: 60_000,
  held: [0, 100_000, 1_000_000],
  listEntries: 10_000,
  listCalls: 20,
  fairnessEntries: 1_000,
  fairnessRequests: 20_000,
  expireCount: 1_000_000,
  releaseAllCount: 400_000,
  clusterReleaseAllCount: 400_000,
  entryBytesCount: 200_000,
  entryBytesNames: [255, 12],
  idleConnections: 10_000,
  keySpaces: [100_000, 10_000_000],
  rssSettleMs: 10_000,
  clusterConnections: [48, 480],
  clusterHeld: 1_000_000,
  clusterSoakMs: 600_000,
  failoverClients: 48,
  failoverBaselineMs: 3_000,
  failoverObserveMs: 5_000,
  failoverPauseMs: 10_000,
  handoffTries: 6,
  handoffDelayMs: { min: 200, max: 1_000 },
  waiters: 1_000,
  waitersWindowMs: 10_000,
  waitersPollMs: 1_000,
};

/** A smoke run of about a minute: the same scenarios, shorter and smaller. */
export const QUICK_DEFAULTS: typeof FULL_DEFAULTS = {
  ...FULL_DEFAULTS,
  warmupMs: 300,
  durationMs: 1_000,
  repeats: 1,
  contenders: 50,
  rounds: 1,
  roundLimitMs: 20_000,
  held: [0, 100_000],
  listCalls: 5,
  fairnessRequests: 2_000,
  expireCount: 100_000,
  releaseAllCount: 100_000,
  clusterReleaseAllCount: 100_000,
  entryBytesCount: 20_000,
  idleConnections: 1_000,
  keySpaces: [100_000],
  rssSettleMs: 3_000,
  clusterHeld: 100_000,
  clusterSoakMs: 20_000,
  failoverBaselineMs: 2_000,
  failoverObserveMs: 4_000,
  handoffTries: 3,
  waitersWindowMs: 3_000,
};
