/**
 * What waiting costs etcd (issue 37's promise: waiting adds nothing to an idle cluster's load). On
 * a fresh 3-node cluster, `--waiters` locks are held (TTL 0, so their owners send nothing more);
 * then, one window each, the requests and Raft proposals etcd counts (its members' /metrics) with
 * no waiter, with a waiter queued behind each lock by acquire-and-wait (0x0B, no bound, TTW 0),
 * with no waiter again (so that the 0x0B window lies between two idle ones), and with a waiter
 * behind each polling the old way (0x02 every `--waiters-poll`, TTW 30 s, as a 0.9b client or
 * today's holdLock at its 1 s cap does). Polling comes last: its writes make the leader write a
 * snapshot and compact afterwards, which would weigh on an idle window after it.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { asciiBytes, type ByteString } from '../../../src/bytes.js';
import { WRITER_LEASE_WARM_MS } from '../../../src/cluster/etcd/WriterLeases.js';
import { Command, NO_WAIT_BOUND } from '../../../src/protocol/constants.js';
import type { Request } from '../../../src/protocol/messages.js';
import { BenchClient } from '../BenchClient.js';
import { BenchCluster } from '../cluster/BenchCluster.js';
import { etcdRates, readEtcdCounters, type EtcdRates } from '../cluster/etcdMetrics.js';
import { lockserverCli } from '../targets/LockServerTarget.js';
import type { BenchConfig } from '../config.js';
import { cpuBetween, readCpu } from '../processes.js';
import { seededRandom } from '../random.js';

/**
 * Quiet time before each window: the commits of whatever the previous step changed are done, and
 * the nodes that wrote have stopped keeping a writer lease ready (they do for WRITER_LEASE_WARM_MS
 * after their last write): each window sees the steady state of its case, not the tail of setting it up.
 */
const SETTLE_MS = WRITER_LEASE_WARM_MS + 2_000;
/** Longest wait for every waiter to be queued, or for every waiter to be gone. */
const QUEUE_LIMIT_MS = 60_000;
const QUEUE_POLL_MS = 100;
/** Clients connected at once while setting up. */
const CONNECT_BATCH = 100;
/** TTW (s) of a polling waiter's entry, and TTL of every waiter's (should one be granted). */
const POLLER_SECONDS = 30;
const INDEX = asciiBytes('i');

export type WaitersCaseName = 'idle' | 'waiting-0x0b' | 'idle-again' | 'polling-0x02';

export const WAITERS_CASE_LABELS: Readonly<Record<WaitersCaseName, string>> = {
  idle: 'no waiters (baseline)',
  'waiting-0x0b': 'waiting with 0x0B',
  'idle-again': 'no waiters again (the 0x0B waiters gone)',
  'polling-0x02': 'polling with 0x02',
};

export interface WaitersCase {
  readonly name: WaitersCaseName;
  /** Waiters queued during the window. */
  readonly waiters: number;
  readonly rates?: EtcdRates;
  /** Share of one core each node (n1…) and each member (m1…) used in the window. */
  readonly cpuCores?: { readonly nodes: ReadonlyArray<number | undefined>; readonly members: ReadonlyArray<number | undefined> };
  /** Polling: polls answered in the window. 0x0B: waits answered by the end of the window (none should be). */
  readonly clientCalls?: number;
  readonly error?: string;
}

export interface IdleWaitersResult {
  /** Why it did not run (etcd missing), if so. */
  readonly skipped?: string;
  readonly waiters?: number;
  readonly windowMs?: number;
  readonly pollMs?: number;
  readonly lockLeader?: string;
  readonly etcdLeader?: string;
  readonly cases?: WaitersCase[];
  /** Polls whose connection failed (each such poller stopped). */
  readonly pollErrors?: number;
}

const key = (i: number): ByteString => asciiBytes(`waiting-${i}`);

/** The waiter of lock `i`, as `who` (waiter, poller): 0x0B with TTW 0 and no bound, or 0x02 with a TTW of 30 s. */
function waiterRequest(command: typeof Command.AcquireWait | typeof Command.Request, who: string, i: number): Request {
  const fields = { key: key(i), index: INDEX, owner: asciiBytes(`${who}-${i}`), ttl: POLLER_SECONDS, priority: 0 };
  return command === Command.AcquireWait ? { command, ...fields, ttw: 0, waitMs: NO_WAIT_BOUND } : { command, ...fields, ttw: POLLER_SECONDS };
}

async function connectAll(cluster: BenchCluster, count: number): Promise<BenchClient[]> {
  const clients: BenchClient[] = [];
  for (let from = 0; from < count; from += CONNECT_BATCH) {
    const batch = Array.from({ length: Math.min(CONNECT_BATCH, count - from) }, (_, j) =>
      BenchClient.connect(cluster.endpoints[(from + j) % cluster.endpoints.length]!),
    );
    clients.push(...(await Promise.all(batch)));
  }
  return clients;
}

/** Resolves once `count` of the locks have `entries` entries each, as lists (0x07) through the owners' connections say. */
async function queuesAt(owners: readonly BenchClient[], count: number, entries: number, what: string): Promise<void> {
  const deadline = performance.now() + QUEUE_LIMIT_MS;
  for (;;) {
    const lists = await Promise.all(
      owners.map((client, n) => {
        const mine = Array.from({ length: count }, (_, i) => i).filter((i) => i % owners.length === n);
        return client.call(mine.map((i): Request => ({ command: Command.List, key: key(i) })));
      }),
    );
    const ready = lists.flat().filter((reply) => reply.readUInt16BE(0) === entries).length;
    if (ready === count) return;
    if (performance.now() >= deadline) throw new Error(`${what}: ${ready} of ${count} locks had ${entries} entries after ${QUEUE_LIMIT_MS} ms`);
    await delay(QUEUE_POLL_MS);
  }
}

export async function runIdleWaiters(config: BenchConfig, log: (line: string) => void): Promise<IdleWaitersResult> {
  const count = config.waiters;
  const windowMs = config.waitersWindowMs;
  const pollMs = config.waitersPollMs;
  log(`handoff-waiters: starting 3 etcd members and 3 nodes`);
  const cluster = await BenchCluster.start({ nodeFlags: config.serverNodeFlags, nodeLog: config.serverLog, cli: lockserverCli(config.serverRoot) });
  const cases: WaitersCase[] = [];
  const open: BenchClient[] = [];
  try {
    const etcdLeader = (await cluster.leader()).name;
    const lockLeader = cluster.lockLeader;
    const owners = await connectAll(cluster, cluster.endpoints.length);
    open.push(...owners);
    // Each lock held through the node its waiters will use, with TTL 0: its owner sends nothing more.
    const granted = await Promise.all(
      owners.map((client, n) =>
        client.call(
          Array.from({ length: count }, (_, i) => i)
            .filter((i) => i % owners.length === n)
            .map((i): Request => ({ command: Command.Request, key: key(i), index: INDEX, owner: asciiBytes(`owner-${i}`), ttl: 0, ttw: 0, priority: 0 })),
        ),
      ),
    );
    const notOwned = granted.flat().filter((reply) => reply.readUInt16BE(0) !== 1).length;
    if (notOwned > 0) throw new Error(`${notOwned} of ${count} owners were not granted their lock`);

    const measure = async (name: WaitersCaseName, waiters: number, calls?: () => number): Promise<void> => {
      await delay(SETTLE_MS);
      const pids = [...cluster.nodePids(), ...cluster.memberPids()];
      const [countersBefore, cpuBefore] = await Promise.all([readEtcdCounters(cluster.etcdEndpoints), readCpu(pids)]);
      const t0 = performance.now();
      const callsBefore = calls?.() ?? 0;
      await delay(windowMs);
      const callsAfter = calls?.() ?? 0;
      const [countersAfter, cpuAfter] = await Promise.all([readEtcdCounters(cluster.etcdEndpoints), readCpu(pids)]);
      const seconds = (performance.now() - t0) / 1000;
      const rates = etcdRates(countersBefore, countersAfter, seconds);
      const { cores } = cpuBetween(cpuBefore, cpuAfter, seconds);
      const nodes = cluster.nodes.length;
      cases.push({
        name,
        waiters,
        rates,
        cpuCores: { nodes: cores.slice(0, nodes), members: cores.slice(nodes) },
        ...(calls !== undefined ? { clientCalls: name === 'waiting-0x0b' ? callsAfter : callsAfter - callsBefore } : {}),
      });
      log(
        `handoff-waiters ${WAITERS_CASE_LABELS[name]}: etcd ${rates.requestsPerSecond.toFixed(1)} requests/s, ` +
          `${rates.messagesPerSecond.toFixed(1)} messages/s, ${rates.proposalsPerSecond.toFixed(1)} proposals/s`,
      );
    };

    await measure('idle', 0);

    // count waiters by acquire-and-wait, each on a connection of its own, no bound, TTW 0.
    const waiting = await connectAll(cluster, count);
    open.push(...waiting);
    let answered = 0;
    waiting.forEach((client, i) => {
      client.call([waiterRequest(Command.AcquireWait, 'waiter', i)]).then(
        () => answered++,
        () => {},
      );
    });
    await queuesAt(owners, count, 2, '0x0B waiters queued');
    await measure('waiting-0x0b', count, () => answered);
    // Closing a waiting connection takes its entry out of the queue.
    for (const client of waiting) client.close();
    await queuesAt(owners, count, 1, '0x0B waiters gone');
    await measure('idle-again', 0);

    // count waiters polling with request (0x02) every pollMs, from a random phase each.
    const pollers = await connectAll(cluster, count);
    open.push(...pollers);
    const random = seededRandom(config.seed);
    let polls = 0;
    let pollErrors = 0;
    let stopped = false;
    const loops = pollers.map(async (client, i) => {
      const request = waiterRequest(Command.Request, 'poller', i);
      let next = performance.now() + random() * pollMs;
      while (!stopped) {
        await delay(Math.max(0, next - performance.now()));
        if (stopped) break;
        try {
          await client.call([request]);
        } catch {
          // Its connection failed (or was closed after a failure elsewhere): this poller is done.
          pollErrors++;
          return;
        }
        polls++;
        next += pollMs;
      }
    });
    const pollingDone = Promise.all(loops);
    await queuesAt(owners, count, 2, 'polling waiters queued');
    await delay(pollMs);
    await measure('polling-0x02', count, () => polls);
    stopped = true;
    await pollingDone;
    await Promise.all(pollers.map((client, i) => client.call([{ command: Command.Release, key: key(i), index: INDEX, owner: asciiBytes(`poller-${i}`) }])));
    for (const client of pollers) client.close();
    await queuesAt(owners, count, 1, 'polling waiters gone');
    return { waiters: count, windowMs, pollMs, lockLeader, etcdLeader, cases, pollErrors };
  } finally {
    for (const client of open) client.close();
    await cluster.stop();
  }
}
