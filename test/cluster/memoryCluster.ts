import { ClusterLockService, type ClusterOptions } from '../../src/cluster/ClusterLockService.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore, type MemoryLog } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

/** A few cluster nodes on one in-memory store under virtual time, for tests of the service as clients see it. */
export interface MemoryCluster {
  readonly vt: VirtualTimers;
  readonly store: MemoryStore;
  readonly nodes: ClusterLockService[];
  /** Each node's store client, in the order of `nodes` (to count its calls, to crash it). */
  readonly clients: MemoryLog[];
}

/**
 * A node named `name` on `store`: candidate priority 1, commit timeout 2 s, name lease 2 s, and `options`.
 * `seed` draws its incarnation (another seed: a restarted process).
 */
export function memoryNode(
  store: MemoryStore,
  vt: VirtualTimers,
  name: string,
  options: Partial<ClusterOptions> = {},
  seed = name.charCodeAt(0),
): { node: ClusterLockService; client: MemoryLog } {
  const client = store.client(name);
  const node = new ClusterLockService(
    { nodeName: name, candidatePriority: 1, commitTimeoutMs: 2_000, maxEntries: 1_000, leaseSeconds: 2, ...options },
    { log: client, clock: vt, timers: vt, random: mulberry32(seed), logger: { event: () => {}, debug: undefined } },
  );
  return { node, client };
}

/** Moves virtual time on until every promise has settled (bounded), and gives their values. */
export async function settle<T extends readonly unknown[]>(vt: VirtualTimers, ...promises: { [K in keyof T]: PromiseLike<T[K]> }): Promise<T> {
  let values: T | undefined;
  let failure: unknown;
  Promise.all(promises).then(
    (v) => (values = v as unknown as T),
    (error: unknown) => (failure = error ?? new Error('rejected')),
  );
  await vt.until(10_000, () => values !== undefined || failure !== undefined);
  if (failure !== undefined) throw failure as Error;
  if (values === undefined) throw new Error('not settled within 10 s of virtual time');
  return values;
}

/**
 * Nodes `names` on a fresh store, started and ready; closed when the test ends. `bundled`: the
 * store bundles appends on a fixed draw. `options` apply to every node.
 */
export async function memoryCluster(
  t: { teardown(fn: () => Promise<void>): void },
  names: string[],
  { bundled = false, options = {} }: { bundled?: boolean; options?: Partial<ClusterOptions> } = {},
): Promise<MemoryCluster> {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(3) });
  if (bundled) {
    // Draws (MemoryStore.bundleAppends): two batches before each, an empty one then a no-op; no copy, none after.
    const draws = [0.9, 0.8, 0.2, 0.5, 0.9];
    let next = 0;
    store.bundleAppends = () => draws[next++ % draws.length]!;
  }
  const made = names.map((name) => memoryNode(store, vt, name, options));
  const nodes = made.map((m) => m.node);
  for (const n of nodes) void n.start();
  await vt.until(10_000, () => nodes.every((n) => n.isReady));
  t.teardown(async () => {
    let closed = false;
    void Promise.allSettled(nodes.map((n) => n.close())).then(() => (closed = true));
    await vt.until(10_000, () => closed);
  });
  return { vt, store, nodes, clients: made.map((m) => m.client) };
}
