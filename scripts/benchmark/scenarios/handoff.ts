/**
 * Issue 37's handoff latency: release → the next owner told, and → its command run, for our
 * single node (lockctl hold, raw 0x0B), one etcd member (etcdctl lock, the Go client's Mutex) and
 * our 3-node cluster beside the same four on its 3 etcd members; then, on a fresh cluster, what
 * idle waiters cost etcd (scenarios/idleWaiters.ts). Every row of one setup runs in each try, one
 * right after the other, in an order that turns from try to try, with the same delay.
 */
import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { BenchCluster, clusterUnavailableReason } from '../cluster/BenchCluster.js';
import { buildEtcdGo } from '../cluster/etcdGo.js';
import { lockserverCli } from '../targets/LockServerTarget.js';
import type { BenchConfig, ScenarioName } from '../config.js';
import { etcdctlHandoff, goHandoff, ourHandoff, type EtcdEnds, type HandoffSample, type OurEnds } from '../handoff/ways.js';
import { which } from '../processes.js';
import { seededRandom } from '../random.js';
import type { Target } from '../targets/Target.js';
import { runIdleWaiters, type IdleWaitersResult } from './idleWaiters.js';

export type HandoffSetup = 'single' | 'etcd-1' | 'cluster-3';
export type HandoffWay = 'lockctl-hold' | 'raw-0x0b' | 'etcdctl-lock' | 'go-mutex';

export const SETUP_LABELS: Readonly<Record<HandoffSetup, string>> = {
  single: 'single node (no etcd)',
  'etcd-1': 'one etcd member',
  'cluster-3': '3 nodes on 3 etcd members',
};

export const WAY_LABELS: Readonly<Record<HandoffWay, string>> = {
  'lockctl-hold': 'lockctl hold',
  'raw-0x0b': 'raw 0x0B waiter',
  'etcdctl-lock': 'etcdctl lock',
  'go-mutex': 'Go client concurrency.Mutex',
};

/** Median, least and most of one column of a row's tries (those that measured it). */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly count: number;
}

export interface HandoffRow {
  readonly setup: HandoffSetup;
  readonly way: HandoffWay;
  /** Where the owner and the waiter were connected (node names or member names). */
  readonly ends: string;
  readonly samples: HandoffSample[];
  told?: Spread;
  ran?: Spread;
  /** Until the owner's release was answered (ours, Go). */
  released?: Spread;
  /** Ours: the waiter's lock requests counted by its node between queued and the release (its polls). */
  requestsWhileQueued?: Spread;
  /** Tries that failed (their error is in their sample). */
  failures: number;
  /** Why the row did not run, if so. */
  skipped?: string;
}

export interface HandoffResult {
  readonly tries: number;
  readonly delayMs: { readonly min: number; readonly max: number };
  /** The delay of each try (the same for every row). */
  readonly delaysMs: readonly number[];
  /**
   * Wall clock as this process reads it for the release (performance.timeOrigin + now) minus
   * Date.now(), at the start and end: date's clock and ours agree within about a ms when small.
   */
  readonly clockSkewMs: { readonly start: number; end?: number };
  readonly rows: HandoffRow[];
  /** The 3-node rows: which node led our cluster and which member led etcd (at the start of the rows). */
  lockLeader?: string;
  etcdLeader?: string;
  etcdVersion?: string;
  goVersion?: string;
  waiters?: IdleWaitersResult;
  readonly errors: Array<{ readonly scenario: string; readonly message: string }>;
}

function spread(values: readonly number[]): Spread | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, count: sorted.length };
}

function clockSkew(): number {
  return performance.timeOrigin + performance.now() - Date.now();
}

/** One row of a setup, and how one try of it runs (key: a name of its own; delayMs: the try's delay). */
interface Lane {
  readonly row: HandoffRow;
  readonly run: (key: string, delayMs: number) => Promise<HandoffSample>;
}

function lane(setup: HandoffSetup, way: HandoffWay, ends: string, run: Lane['run'] | string): Lane {
  const row: HandoffRow = { setup, way, ends, samples: [], failures: 0, ...(typeof run === 'string' ? { skipped: run } : {}) };
  return { row, run: typeof run === 'string' ? async () => ({ delayMs: 0 }) : run };
}

/**
 * Every try of every lane of one setup: in try t, each lane once, starting at lane t mod n, all
 * with the try's delay. A try that fails is kept with its error and the next goes on.
 */
async function runLanes(setup: HandoffSetup, lanes: readonly Lane[], delaysMs: readonly number[], log: (line: string) => void): Promise<void> {
  const live = lanes.filter((l) => l.row.skipped === undefined);
  const runId = Date.now().toString(36);
  for (let t = 0; t < delaysMs.length; t++) {
    for (let i = 0; i < live.length; i++) {
      const { row, run } = live[(t + i) % live.length]!;
      const delayMs = delaysMs[t]!;
      const key = `handoff-${runId}-${setup}-${row.way}-${t}`;
      const sample = await run(key, delayMs).catch((error: unknown): HandoffSample => ({ delayMs, error: (error as Error).message.split('\n')[0] }));
      row.samples.push(sample);
      if (sample.error !== undefined) row.failures++;
      const told = sample.toldMs === undefined ? '' : `told ${sample.toldMs.toFixed(1)} ms, `;
      log(
        `handoff ${setup} ${WAY_LABELS[row.way]}, try ${t + 1}/${delaysMs.length} (delay ${delayMs} ms): ` +
          (sample.error !== undefined ? `failed: ${sample.error}` : `${told}ran ${sample.ranMs?.toFixed(1)} ms`),
      );
    }
  }
  for (const { row } of lanes) {
    row.told = spread(row.samples.flatMap((s) => (s.toldMs === undefined ? [] : [s.toldMs])));
    row.ran = spread(row.samples.flatMap((s) => (s.ranMs === undefined ? [] : [s.ranMs])));
    row.released = spread(row.samples.flatMap((s) => (s.releasedMs === undefined ? [] : [s.releasedMs])));
    row.requestsWhileQueued = spread(row.samples.flatMap((s) => (s.requestsWhileQueued === undefined ? [] : [s.requestsWhileQueued])));
  }
}

/** The handoff scenarios selected in `config` (handoff-single, -etcd, -cluster, -waiters). */
export async function runHandoff(ours: Target, config: BenchConfig, log: (line: string) => void): Promise<HandoffResult> {
  const has = (name: ScenarioName): boolean => config.scenarios.has(name);
  const random = seededRandom(config.seed);
  const { min, max } = config.handoffDelayMs;
  const delaysMs = Array.from({ length: config.handoffTries }, () => Math.round(min + random() * (max - min)));
  const result: HandoffResult = { tries: config.handoffTries, delayMs: { min, max }, delaysMs, clockSkewMs: { start: clockSkew() }, rows: [], errors: [] };
  const guarded = async (scenario: string, work: () => Promise<void>): Promise<void> => {
    try {
      await work();
    } catch (error) {
      result.errors.push({ scenario, message: (error as Error).stack ?? String(error) });
      log(`${scenario}: failed: ${(error as Error).message.split('\n')[0]}`);
    }
  };

  if (has('handoff-single')) {
    await guarded('handoff-single', async () => {
      const running = await ours.start();
      try {
        const ends: OurEnds = { owner: running.endpoints[0]!, waiter: running.endpoints[0]! };
        const lanes = [
          lane('single', 'lockctl-hold', 'one connection each to the node', (key, d) => ourHandoff('lockctl', ends, key, d)),
          lane('single', 'raw-0x0b', 'one connection each to the node', (key, d) => ourHandoff('raw', ends, key, d)),
        ];
        result.rows.push(...lanes.map((l) => l.row));
        await runLanes('single', lanes, delaysMs, log);
      } finally {
        await running.stop();
      }
    });
  }

  const wantsEtcd = has('handoff-etcd') || has('handoff-cluster') || has('handoff-waiters');
  const noEtcd = wantsEtcd ? await clusterUnavailableReason() : undefined;
  if (wantsEtcd && noEtcd === undefined) {
    result.etcdVersion = await promisify(execFile)('etcd', ['--version']).then(
      ({ stdout }) => stdout.match(/etcd Version: (\S+)/)?.[1],
      () => undefined,
    );
  }
  const etcdctl = (await which('etcdctl')) === undefined ? 'etcdctl is not on the PATH (Debian: apt-get install etcd-client)' : undefined;
  // Built before any etcd starts, so that the compiler's CPU weighs on no row.
  const build = has('handoff-etcd') || has('handoff-cluster') ? await buildEtcdGo(log) : { skipped: 'not built' };
  if ('goVersion' in build) result.goVersion = build.goVersion;
  /** etcd's two lanes of a setup, each skipped with its reason when it cannot run. */
  const etcdLanes = (setup: HandoffSetup, ends: EtcdEnds, where: string): Lane[] => [
    lane(setup, 'etcdctl-lock', where, etcdctl ?? ((key, d) => etcdctlHandoff(ends, key, d))),
    lane(setup, 'go-mutex', where, 'skipped' in build ? build.skipped : (_key, d) => goHandoff(build.binary, ends, d)),
  ];
  const skippedRows = (setup: HandoffSetup, ways: readonly HandoffWay[], why: string): void => {
    for (const way of ways) result.rows.push({ setup, way, ends: '–', samples: [], failures: 0, skipped: why });
  };

  if (has('handoff-etcd')) {
    if (noEtcd !== undefined) skippedRows('etcd-1', ['etcdctl-lock', 'go-mutex'], noEtcd);
    else
      await guarded('handoff-etcd', async () => {
        log('handoff-etcd: starting one etcd member');
        const single = await BenchCluster.start({ etcdOnly: true }, 1);
        try {
          const url = single.etcdEndpoints[0]!;
          const lanes = etcdLanes('etcd-1', { owner: url, waiter: url }, 'both on the one member');
          result.rows.push(...lanes.map((l) => l.row));
          await runLanes('etcd-1', lanes, delaysMs, log);
        } finally {
          await single.stop();
        }
      });
  }

  if (has('handoff-cluster')) {
    if (noEtcd !== undefined) skippedRows('cluster-3', ['lockctl-hold', 'raw-0x0b', 'etcdctl-lock', 'go-mutex'], noEtcd);
    else
      await guarded('handoff-cluster', async () => {
        log('handoff-cluster: starting 3 etcd members and 3 nodes');
        const cluster = await BenchCluster.start({ nodeFlags: config.serverNodeFlags, nodeLog: config.serverLog, cli: lockserverCli(config.serverRoot) });
        try {
          result.etcdLeader = (await cluster.leader()).name;
          result.lockLeader = cluster.lockLeader;
          const [n1, n2] = cluster.nodes;
          const [m1, m2] = cluster.members;
          const ends: OurEnds = { owner: cluster.endpoints[0]!, waiter: cluster.endpoints[1]! };
          const ourWhere = `owner on ${n1!.name}, waiter on ${n2!.name}`;
          const lanes = [
            lane('cluster-3', 'lockctl-hold', ourWhere, (key, d) => ourHandoff('lockctl', ends, key, d)),
            lane('cluster-3', 'raw-0x0b', ourWhere, (key, d) => ourHandoff('raw', ends, key, d)),
            ...etcdLanes('cluster-3', { owner: m1!.clientUrl, waiter: m2!.clientUrl }, `owner on ${m1!.name}, waiter on ${m2!.name}`),
          ];
          result.rows.push(...lanes.map((l) => l.row));
          log(`handoff-cluster: lockserver leader ${result.lockLeader ?? 'unknown'}, etcd leader ${result.etcdLeader}`);
          await runLanes('cluster-3', lanes, delaysMs, log);
        } finally {
          await cluster.stop();
        }
      });
  }

  if (has('handoff-waiters')) {
    if (noEtcd !== undefined) result.waiters = { skipped: noEtcd };
    else await guarded('handoff-waiters', async () => void (result.waiters = await runIdleWaiters(config, log)));
  }
  result.clockSkewMs.end = clockSkew();
  return result;
}
