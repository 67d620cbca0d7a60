/**
 * Three null cluster nodes (targets/nullClusterNode.ts) on the bench cluster's etcd, under a key
 * prefix of their own: the ceiling every cluster row is read against (see that file); or, with
 * `sequenced`, three whose first node appends for all three (the ceiling of one commit per round
 * for the whole cluster).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import type { Endpoint } from '../load/messages.js';
import { PROFILED_STOP_GRACE_MS, spawnServer, stopServer, type ServerProcess } from '../processes.js';

const NULL_CLUSTER_NODE = join(PACKAGE_ROOT, 'dist', 'scripts', 'benchmark', 'targets', 'nullClusterNode.js');
const LOOPBACK = '127.0.0.1';
const READY_MS = 30_000;
const CALL_DEADLINE_MS = 10_000;
const SIZE = 3;

export interface NullCluster {
  readonly endpoints: Endpoint[];
  readonly pids: number[];
  /** Why a null node is gone (it exits at the first append or watch that fails), if one is. */
  failure(): string | undefined;
  /**
   * Deletes every key the null nodes wrote (their log, retained batches and fences) and compacts
   * etcd's history up to then, so that the rows after one of theirs do not run on an etcd holding
   * its batches. Our nodes are idle meanwhile and their watches live, which compaction leaves be.
   */
  clear(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * @param nodeFlags extra flags for each null node's node, as our nodes get them (--server-node-flags: a profiler, say).
 * @param sequenced the first node appends for all three; the others forward their batches to it.
 */
export async function startNullCluster(etcdEndpoints: readonly string[], nodeFlags: readonly string[], sequenced: boolean): Promise<NullCluster> {
  const cluster = `null${randomBytes(4).toString('hex')}`;
  const spawn = (i: number, roleArgs: readonly string[]): Promise<ServerProcess> =>
    spawnServer(
      process.execPath,
      [...nodeFlags, NULL_CLUSTER_NODE, '--etcd', etcdEndpoints.join(','), '--cluster', cluster, '--name', `x${i + 1}`, ...roleArgs],
      {
        readyPattern: /event=ready .*? port=(\d+)(?: sequencer-port=(\d+))?/,
        readyTimeoutMs: READY_MS,
      },
    );
  let started: Array<PromiseSettledResult<ServerProcess>>;
  if (!sequenced) {
    started = await Promise.allSettled(Array.from({ length: SIZE }, (_, i) => spawn(i, [])));
  } else {
    // The sequencer first: the others connect to the port it names when ready.
    started = await Promise.allSettled([spawn(0, ['--sequencer-port', '0'])]);
    const [sequencer] = started;
    if (sequencer?.status === 'fulfilled') {
      const forwardTo = sequencer.value.ready[2];
      if (forwardTo === undefined) started.push({ status: 'rejected', reason: new Error('the sequencer named no sequencer-port when ready') });
      else started.push(...(await Promise.allSettled(Array.from({ length: SIZE - 1 }, (_, i) => spawn(i + 1, ['--forward-to', forwardTo])))));
    }
  }
  const servers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((s) => stopServer(s, nodeFlags.length > 0 ? PROFILED_STOP_GRACE_MS : 0)));
  };
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) {
    await stop();
    throw failed.reason;
  }
  const exited = (s: ServerProcess): boolean => s.child.exitCode !== null || s.child.signalCode !== null;
  return {
    endpoints: servers.map((s) => ({ host: LOOPBACK, port: Number(s.ready[1]) })),
    pids: servers.map((s) => s.pid),
    failure: () => {
      const gone = servers.filter(exited);
      return gone.length === 0 ? undefined : gone.map((s) => `null cluster node ${s.pid} exited: ${s.tail().split('\n').slice(-3).join(' | ')}`).join('; ');
    },
    clear: async () => {
      const client = new Etcd3({ hosts: [...etcdEndpoints], defaultCallOptions: () => ({ deadline: Date.now() + CALL_DEADLINE_MS }) });
      try {
        const deleted = await client.delete().prefix(`/${cluster}/`).exec();
        await client.kv.compact({ revision: deleted.header.revision });
      } finally {
        client.close();
      }
    },
    stop,
  };
}
