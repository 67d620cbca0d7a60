import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { asciiBytes } from '../../../src/bytes.js';
import { saveLockFile } from '../../../src/files/lockFile.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import { freePorts, type BenchCluster, type ClusterOptions } from '../cluster/BenchCluster.js';
import type { BenchConfig } from '../config.js';
import { Histogram } from '../Histogram.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import type { SnapshotEvent } from './clusterScale.js';
import { RELEASING_OWNER, savedLocks, tableCounts } from './releaseAll.js';

/** Serving load kept up on every node while the release-all runs (16 connections a node, unpipelined). */
const SERVING_LOAD = { connections: 48, depth: 1 };
/** Clients per node asking find-owner (0x01) one at a time, each call timed. */
const PROBES_PER_NODE = 2;
/** A node imports 2 N entries before it is ready, and the others load them: this may take minutes. */
const READY_LIMIT_MS = 600_000;
/** How long every node may take to show the whole imported table, and later the whole release. */
const TABLE_WAIT_MS = 300_000;
/** The leader snapshots the imported table (by log volume, or 60 s after): waited for, so no snapshot falls in the measurement. */
const SNAPSHOT_WAIT_MS = 120_000;
/**
 * The importing node's --commit-timeout. An import submits every staged entry at once, each round
 * due within --commit-timeout of that moment (5 s): an import bigger than what commits in 5 s
 * fails with "the import's commit got no answer" (100,000 locks did on this machine). n1 imports
 * with this and is then restarted with the others' defaults, so all three are measured alike.
 */
const IMPORT_COMMIT_TIMEOUT_S = 600;
/** The probes and the load run this long before the release-all is sent… */
const LEAD_MS = 2_000;
/** …and are watched this long after the last node applied it. */
const AFTER_MS = 2_000;
/** Between two stats polls of a node, from the release's send until it shows the release applied. */
const DONE_POLL_MS = 20;

/** Percentiles of one window, in ms. */
export interface WindowMs {
  readonly calls: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface ClusterReleaseAllNode {
  readonly node: string;
  /** The lockserver leader when the release was sent; the release went through another node. */
  readonly leader: boolean;
  readonly releaser: boolean;
  /** ms from the release's send until this node's stats (0x08) showed every waiter promoted. */
  readonly appliedMs?: number;
  /** find-owner probes of this node: before the send; from the send until the node applied it; the AFTER_MS after the last node did. */
  readonly probe: { readonly before: WindowMs; readonly during: WindowMs; readonly after: WindowMs; readonly errors: number };
  /** GET /livez on the node's metrics port (its event loop answering at all), in the same windows. */
  readonly livez: { readonly before: WindowMs; readonly during: WindowMs; readonly after: WindowMs; readonly errors: number };
  /** Of this node's lines saying it refused input as stale, gave a commit up or dropped output: how many in the scenario, and in the release's windows. */
  readonly staleInputRefused: number;
  readonly commitTimeouts: number;
  readonly troubleDuringRelease: readonly string[];
}

export interface ClusterReleaseAllResult {
  readonly locks: number;
  /** ms from starting the cluster (n1 importing the lock file) until every node showed the whole table. */
  readonly importMs: number;
  /** The leader's snapshot of the imported table, waited for before the measurement. */
  readonly importSnapshot?: SnapshotEvent;
  /**
   * Per node, while the bench waited for that snapshot (from every node showing the whole table to
   * the leader's snapshot-written line): /livez, and the node's lines about leadership and its name
   * (node-silent, leader, name-lost) in that time.
   */
  readonly snapshotWait: ReadonlyArray<{ readonly node: string; readonly livez: WindowMs; readonly errors: number; readonly lines: readonly string[] }>;
  /** ms from the send to the releaser's reply (its node has applied the last slice). */
  readonly releaseMs: number;
  readonly removed: number;
  readonly tableBefore: { readonly owners: number; readonly waiters: number };
  readonly tableAfter: ReadonlyArray<{ readonly node: string; readonly owners: number; readonly waiters: number }>;
  readonly nodes: readonly ClusterReleaseAllNode[];
  /** Every node line of stale input, commit timeouts or dropped output in the whole scenario (import included), ms relative to the send. */
  readonly clientTrouble: readonly string[];
  readonly load?: LoadResult;
  readonly loadError?: string;
}

/** What the cluster is started with, and the lock file's directory (removed by cleanup). */
export interface ClusterReleaseAllSetup {
  readonly count: number;
  readonly metricsPorts: readonly number[];
  readonly clusterOptions: ClusterOptions;
  /** n1's own arguments once it imported: the same as the others'. */
  readonly n1Args: readonly string[];
  /** When the cluster's start was begun (set by the caller right before it). */
  startedAt: number;
  cleanup(): Promise<void>;
}

/**
 * The lock file (one owner holding `count` locks, a waiter behind each, as the single-node
 * release-all restores) and the cluster options: n1 seeds the empty cluster from it with
 * --import-lock-file, the others start without (as README's "from one box to a cluster" says).
 * An import is not held to the etcd entry-bytes bound, and a cluster node applies neither
 * --max-table-bytes nor --max-locks-per-owner, so no limit but --max-locks (the bench's 5 M)
 * needs raising; every node serves metrics, for the /livez probes.
 */
export async function prepareClusterReleaseAll(config: BenchConfig): Promise<ClusterReleaseAllSetup> {
  const count = config.clusterReleaseAllCount;
  const dir = await mkdtemp(join(tmpdir(), 'lockserver-bench-cluster-release-all-'));
  const lockFile = join(dir, 'held.locks');
  await saveLockFile(lockFile, savedLocks(count), 2 * count);
  const metricsPorts = await freePorts(3);
  const metrics = (n: number): string[] => ['--metrics-port', String(metricsPorts[n]), '--metrics-listen', '127.0.0.1'];
  return {
    count,
    metricsPorts,
    clusterOptions: {
      readyTimeoutMs: READY_LIMIT_MS,
      nodeArgsByName: {
        n1: ['--import-lock-file', lockFile, '--commit-timeout', String(IMPORT_COMMIT_TIMEOUT_S), ...metrics(0)],
        n2: metrics(1),
        n3: metrics(2),
      },
    },
    n1Args: metrics(0),
    startedAt: performance.now(),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

interface Sample {
  readonly at: number;
  readonly ms: number;
}

/** GET /livez on each node's metrics port in a loop, every call timed (an error counted at its send). */
class LivezProbes {
  readonly samples: Sample[][];
  readonly errors: number[][];
  private stopped = false;
  private readonly loops: Array<Promise<void>>;

  constructor(ports: readonly number[]) {
    this.samples = ports.map(() => []);
    this.errors = ports.map(() => []);
    this.loops = ports.map(async (port, node) => {
      while (!this.stopped) {
        const at = performance.now();
        try {
          const response = await fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(10_000) });
          await response.text();
          this.samples[node]!.push({ at, ms: performance.now() - at });
        } catch {
          // The node down (n1's restart) or not answering within 10 s.
          this.errors[node]!.push(at);
          await delay(50);
        }
        await delay(5);
      }
    });
  }

  errorsIn(node: number, from: number, to: number): number {
    return this.errors[node]!.filter((at) => at >= from && at < to).length;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }
}

/** p50/p99/max of the samples sent in [from, to). */
function windowOf(samples: readonly Sample[], from: number, to: number): WindowMs {
  const h = new Histogram();
  for (const s of samples) if (s.at >= from && s.at < to) h.record(s.ms * 1000);
  return { calls: h.count, p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000, max: h.max / 1000 };
}

/** Polls every node's stats until `done` holds on each (bounded); resolves with each node's ms from `from`. */
async function untilEveryNode(
  clients: readonly BenchClient[],
  done: (c: { owners: number; waiters: number }) => boolean,
  from: number,
  pollMs: number,
  limitMs: number,
): Promise<Array<{ ms: number; owners: number; waiters: number }>> {
  return Promise.all(
    clients.map(async (client, i) => {
      for (;;) {
        const counts = await tableCounts(client);
        const ms = performance.now() - from;
        if (done(counts)) return { ms, ...counts };
        if (ms > limitMs) throw new Error(`node n${i + 1} still shows ${counts.owners} owners and ${counts.waiters} waiters after ${Math.round(ms)} ms`);
        await delay(pollMs);
      }
    }),
  );
}

/**
 * One owner's release-all (0x06) of `count` locks, each with a waiter, in a 3-node cluster under a
 * 48-connection serving load, with find-owner probes and /livez probes on every node: how long
 * other clients waited, node by node, before, while and after each node applied it, and whether
 * any node refused a client's input as stale.
 */
export async function runClusterReleaseAll(
  cluster: BenchCluster,
  setup: ClusterReleaseAllSetup,
  snapshots: readonly SnapshotEvent[],
  config: BenchConfig,
  log: (line: string) => void,
): Promise<ClusterReleaseAllResult> {
  const count = setup.count;
  const endpoints = cluster.endpoints;
  const stats: BenchClient[] = await Promise.all(endpoints.map((e) => BenchClient.connect(e)));
  const livez = new LivezProbes(setup.metricsPorts);
  try {
    const full = await untilEveryNode(stats, (c) => c.owners === count && c.waiters === count, setup.startedAt, 500, TABLE_WAIT_MS);
    const importMs = Math.max(...full.map((f) => f.ms));
    log(`cluster release-all: ${count} owners and ${count} waiters on every node ${(importMs / 1000).toFixed(1)} s after the start`);
    const importedAt = Date.now();
    const waitFrom = performance.now();
    let importSnapshot: SnapshotEvent | undefined;
    const deadline = Date.now() + SNAPSHOT_WAIT_MS;
    while (Date.now() < deadline) {
      importSnapshot = snapshots.find((s) => s.entries >= 2 * count);
      if (importSnapshot !== undefined) break;
      await delay(200);
    }
    const waitTo = performance.now();
    // The leader encodes and writes the whole table: what the nodes' event loops did meanwhile.
    const snapshotWait = cluster.nodes.map((n, i) => ({
      node: n.name,
      livez: windowOf(livez.samples[i]!, waitFrom, waitTo),
      errors: livez.errorsIn(i, waitFrom, waitTo),
      lines: cluster.leadershipLines.filter((e) => e.node === n.name && e.at >= importedAt).map((e) => e.line),
    }));
    log(
      importSnapshot === undefined
        ? `cluster release-all: no snapshot of the imported table within ${SNAPSHOT_WAIT_MS / 1000} s (measuring anyway)`
        : `cluster release-all: the leader's snapshot of the imported table: ${importSnapshot.bytes} bytes, ${importSnapshot.ms} ms` +
            (importSnapshot.at < importedAt ? '' : `, ${((importSnapshot.at - importedAt) / 1000).toFixed(1)} s after the import was seen`) +
            `; /livez meanwhile: ${snapshotWait.map((w) => `${w.node} max ${w.livez.max.toFixed(0)} ms, ${w.errors} errors`).join(', ')}`,
    );
    // n1 again as the others run (without the import's long --commit-timeout), loading the table as a restarted node does.
    const n1 = cluster.nodes[0]!;
    cluster.nodeOnlyArgs.set(n1.name, setup.n1Args);
    await cluster.killNode(n1);
    const restartMs = await cluster.startNode(n1);
    stats[0]!.close();
    stats[0] = await BenchClient.connect(endpoints[0]!);
    await untilEveryNode([stats[0]], (c) => c.owners === count && c.waiters === count, performance.now(), 500, TABLE_WAIT_MS);
    log(`cluster release-all: n1 restarted without --commit-timeout ${IMPORT_COMMIT_TIMEOUT_S}, ready after ${restartMs} ms`);
    const leader = cluster.lockLeader;
    const releaserIndex = Math.max(
      0,
      cluster.nodes.findIndex((n) => n.name !== leader),
    );
    const measured = await measure(cluster, stats, livez, releaserIndex, count, config, log);
    return { ...measured, importMs, ...(importSnapshot !== undefined ? { importSnapshot } : {}), snapshotWait };
  } finally {
    await livez.stop();
    for (const s of stats) s.close();
  }
}

async function measure(
  cluster: BenchCluster,
  stats: readonly BenchClient[],
  livez: LivezProbes,
  releaserIndex: number,
  count: number,
  config: BenchConfig,
  log: (line: string) => void,
): Promise<Omit<ClusterReleaseAllResult, 'importMs' | 'importSnapshot' | 'snapshotWait'>> {
  const endpoints = cluster.endpoints;
  const leader = cluster.lockLeader;
  const releaser = await BenchClient.connect(endpoints[releaserIndex]!);
  const tableBefore = await tableCounts(releaser);
  const probeSamples: Sample[][] = endpoints.map(() => []);
  const probeErrors = endpoints.map(() => 0);
  let stop = false;
  const probing = endpoints.flatMap((endpoint, node) =>
    Array.from({ length: PROBES_PER_NODE }, async (_, n) => {
      const key = asciiBytes(`probe:${node}:${n}`);
      let client: BenchClient | undefined;
      while (!stop) {
        try {
          client ??= await BenchClient.connect(endpoint);
          const at = performance.now();
          await client.call([{ command: Command.FindOwner, key, index: asciiBytes('0') }]);
          probeSamples[node]!.push({ at, ms: performance.now() - at });
        } catch {
          // A closed connection (stale input refused, a commit given up): counted, and opened again.
          probeErrors[node]!++;
          client?.close();
          client = undefined;
          await delay(50);
        }
      }
      client?.close();
    }),
  );
  const troubleFrom = cluster.clientTrouble.length;
  let loadError: string | undefined;
  const loading = runLoad({
    endpoints,
    protocol: 'lockserver',
    ...SERVING_LOAD,
    workers: config.workers,
    warmupMs: 300,
    durationMs: LEAD_MS + AFTER_MS + Math.max(5_000, count / 20),
    cpuPids: [...cluster.nodePids(), ...cluster.memberPids()],
  }).catch((error: unknown) => {
    loadError = (error as Error).message;
    return undefined;
  });
  let sentAt: number;
  let releaseMs: number;
  let removed: number;
  let applied: Array<{ ms: number; owners: number; waiters: number }>;
  try {
    await delay(300 + LEAD_MS);
    sentAt = performance.now();
    const replying = releaser.call([{ command: Command.ReleaseAll, owner: RELEASING_OWNER }]).then(([reply]) => {
      releaseMs = performance.now() - sentAt;
      removed = reply!.readUInt16BE(0);
    });
    applied = await untilEveryNode(stats, (c) => c.waiters === 0, sentAt, DONE_POLL_MS, TABLE_WAIT_MS);
    await replying;
    await delay(AFTER_MS);
  } finally {
    stop = true;
    await Promise.all(probing);
    releaser.close();
  }
  const load = await loading;
  const lastApplied = sentAt + Math.max(...applied.map((a) => a.ms));
  const trouble = cluster.clientTrouble.slice(troubleFrom);
  const sentEpoch = Date.now() - (performance.now() - sentAt);
  const relative = (e: { node: string; line: string; at: number }): string => `${e.node} +${e.at - sentEpoch} ms ${e.line}`;
  const nodes: ClusterReleaseAllNode[] = cluster.nodes.map((n, i) => {
    const appliedAt = sentAt + applied[i]!.ms;
    const windows = (samples: readonly Sample[]) => ({
      before: windowOf(samples, sentAt - LEAD_MS, sentAt),
      during: windowOf(samples, sentAt, appliedAt),
      after: windowOf(samples, lastApplied, lastApplied + AFTER_MS),
    });
    const mine = cluster.clientTrouble.filter((e) => e.node === n.name);
    return {
      node: n.name,
      leader: n.name === leader,
      releaser: i === releaserIndex,
      appliedMs: applied[i]!.ms,
      probe: { ...windows(probeSamples[i]!), errors: probeErrors[i]! },
      livez: { ...windows(livez.samples[i]!), errors: livez.errorsIn(i, sentAt - LEAD_MS, lastApplied + AFTER_MS) },
      staleInputRefused: mine.filter((e) => e.line.startsWith('event=stale-input-refused')).length,
      commitTimeouts: mine.filter((e) => e.line.startsWith('event=commit-timeout')).length,
      troubleDuringRelease: trouble.filter((e) => e.node === n.name).map(relative),
    };
  });
  const result = {
    locks: count,
    releaseMs: releaseMs!,
    removed: removed!,
    tableBefore,
    tableAfter: applied.map((a, i) => ({ node: cluster.nodes[i]!.name, owners: a.owners, waiters: a.waiters })),
    nodes,
    clientTrouble: cluster.clientTrouble.map(relative),
    ...(load !== undefined ? { load } : {}),
    ...(loadError !== undefined ? { loadError } : {}),
  };
  log(
    `cluster release-all of ${count} locks with a waiter each through ${cluster.nodes[releaserIndex]!.name} (leader ${leader}): answered after ${releaseMs!.toFixed(0)} ms`,
  );
  for (const n of nodes) {
    const f = (w: WindowMs): string => `p50 ${w.p50.toFixed(2)} p99 ${w.p99.toFixed(2)} max ${w.max.toFixed(2)} ms (${w.calls})`;
    log(
      `  ${n.node}${n.leader ? ' (leader)' : ''}${n.releaser ? ' (releaser)' : ''}: applied after ${n.appliedMs?.toFixed(0)} ms; ` +
        `find-owner before ${f(n.probe.before)}, during ${f(n.probe.during)}, after ${f(n.probe.after)}, ${n.probe.errors} errors; ` +
        `livez before ${f(n.livez.before)}, during ${f(n.livez.during)}; stale-input-refused ${n.staleInputRefused}`,
    );
  }
  return result;
}
