import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { asciiBytes } from '../../../src/bytes.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchCluster } from '../cluster/BenchCluster.js';
import type { BenchConfig } from '../config.js';
import { fillLocks } from '../fill.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import { rssBytes } from '../processes.js';

/** Filling connections per node (each pipelines 4,096 requests at a time). */
const FILL_CONNECTIONS_PER_NODE = 2;
/** How long to wait for the leader's first snapshot holding the whole table (it snapshots at least every 60 s). */
const SNAPSHOT_WAIT_MS = 90_000;
/** The load of the soak: every connection pipelined, spread over the nodes. */
const SOAK_CONNECTIONS = 48;
const SOAK_DEPTH = 16;

export interface SnapshotEvent {
  readonly node: string;
  readonly entries: number;
  readonly bytes: number;
  readonly ms: number;
  readonly at: number;
}

export interface ClusterScaleResult {
  readonly held: number;
  readonly fillSeconds: number;
  readonly fillPerSecond: number;
  /** RSS of each node (n1…) once the table was filled and settled. */
  readonly nodeRssBytes: ReadonlyArray<number | undefined>;
  /** The first snapshot written after the fill that holds the whole table. */
  readonly snapshot?: SnapshotEvent;
  /** ms from spawning a killed node again to its event=ready. */
  readonly restartReadyMs?: number;
  readonly restartedNode: string;
  readonly soak: {
    readonly seconds: number;
    readonly load?: LoadResult;
    /** Bytes in each member's data dir before and after the soak. */
    readonly etcdBytesBefore: readonly number[];
    readonly etcdBytesAfter: readonly number[];
    /** Of that, each member's bbolt database file, before and after. */
    readonly etcdDbBytesBefore?: readonly number[];
    readonly etcdDbBytesAfter?: readonly number[];
    readonly snapshotsDuring: number;
    readonly error?: string;
  };
}

/**
 * A million held locks in the cluster (each its own key and owner, no expiry), filled through
 * every node: RSS per node, the leader's snapshot of that table (size and time, from its
 * event=snapshot-written line), the time a node killed and restarted takes to be ready again,
 * then `clusterSoakMs` of full load and etcd's data dir size after it.
 */
export async function runClusterScale(
  cluster: BenchCluster,
  snapshots: SnapshotEvent[],
  config: BenchConfig,
  log: (line: string) => void,
): Promise<ClusterScaleResult> {
  const held = config.clusterHeld;
  const endpoints = cluster.endpoints;
  const fillers = endpoints.length * FILL_CONNECTIONS_PER_NODE;
  const t0 = performance.now();
  const clients = await Promise.all(Array.from({ length: fillers }, (_, i) => BenchClient.connect(endpoints[i % endpoints.length]!)));
  try {
    await Promise.all(
      clients.map((client, i) => {
        const share = Math.floor(held / fillers) + (i < held % fillers ? 1 : 0);
        return fillLocks(client, share, (n) => ({
          command: Command.Request,
          key: asciiBytes(`held:${i}:${n}`),
          index: asciiBytes('0'),
          owner: asciiBytes(`holder-${i}-${n}`),
          ttl: 0,
          ttw: 0,
          priority: 0,
        }));
      }),
    );
  } finally {
    for (const c of clients) c.close();
  }
  const fillSeconds = (performance.now() - t0) / 1000;
  const filledAt = Date.now();
  log(`cluster scale: ${held} locks held after ${fillSeconds.toFixed(1)} s (${Math.round(held / fillSeconds)}/s)`);
  await delay(1_000);
  const nodeRssBytes = await Promise.all(cluster.nodePids().map((pid) => (pid === undefined ? Promise.resolve(undefined) : rssBytes(pid))));

  const deadline = Date.now() + SNAPSHOT_WAIT_MS;
  let snapshot: SnapshotEvent | undefined;
  while (Date.now() < deadline) {
    snapshot = snapshots.find((s) => s.at >= filledAt && s.entries >= held);
    if (snapshot !== undefined) break;
    await delay(200);
  }
  log(snapshot === undefined ? 'cluster scale: no snapshot of the full table seen' : `cluster scale: snapshot ${snapshot.bytes} bytes in ${snapshot.ms} ms`);

  const restarted = cluster.nodes[cluster.nodes.length - 1]!;
  await cluster.killNode(restarted);
  let restartReadyMs: number | undefined;
  try {
    restartReadyMs = await cluster.startNode(restarted);
    log(`cluster scale: ${restarted.name} ready ${restartReadyMs} ms after its restart`);
  } catch (error) {
    log(`cluster scale: ${restarted.name} restart failed: ${(error as Error).message.split('\n')[0]}`);
  }

  const etcdBytesBefore = await cluster.memberDataBytes();
  const etcdDbBytesBefore = await cluster.memberDbBytes();
  const snapshotsBefore = snapshots.length;
  let load: LoadResult | undefined;
  let error: string | undefined;
  try {
    load = await runLoad({
      endpoints: cluster.endpoints,
      protocol: 'lockserver',
      connections: SOAK_CONNECTIONS,
      depth: SOAK_DEPTH,
      workers: config.workers,
      warmupMs: 0,
      durationMs: config.clusterSoakMs,
      cpuPids: [...cluster.nodePids(), ...cluster.memberPids()],
    });
  } catch (e) {
    error = (e as Error).message;
  }
  const etcdBytesAfter = await cluster.memberDataBytes();
  const etcdDbBytesAfter = await cluster.memberDbBytes();
  log(`cluster scale: etcd data dirs ${etcdBytesAfter.map((b) => (b / 2 ** 20).toFixed(0)).join('/')} MB after ${config.clusterSoakMs / 1000} s of load`);
  return {
    held,
    fillSeconds,
    fillPerSecond: held / fillSeconds,
    nodeRssBytes,
    ...(snapshot !== undefined ? { snapshot } : {}),
    ...(restartReadyMs !== undefined ? { restartReadyMs } : {}),
    restartedNode: restarted.name,
    soak: {
      seconds: config.clusterSoakMs / 1000,
      ...(load !== undefined ? { load } : {}),
      etcdBytesBefore,
      etcdBytesAfter,
      etcdDbBytesBefore,
      etcdDbBytesAfter,
      snapshotsDuring: snapshots.length - snapshotsBefore,
      ...(error !== undefined ? { error } : {}),
    },
  };
}
