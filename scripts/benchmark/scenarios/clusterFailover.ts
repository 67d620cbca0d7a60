import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { asciiBytes } from '../../../src/bytes.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient, encodeRequests } from '../BenchClient.js';
import type { BenchCluster, Node } from '../cluster/BenchCluster.js';
import type { BenchConfig } from '../config.js';

const RECONNECT_MS = 100;
const CONNECT_TIMEOUT_MS = 2_000;
/** Longest the clients of a restarted or resumed node may take to be served again. */
const AFFECTED_LIMIT_MS = 30_000;
/** A client of a surviving node that waited longer than this for a reply was interrupted. */
export const INTERRUPTION_MS = 1_000;

export interface FailoverEvent {
  readonly event: string;
  /** Longest any client of a surviving node waited for a reply, counted from the event (not before) to the end of its window. */
  readonly survivorsWorstWaitMs: number;
  /** Surviving clients that waited longer than INTERRUPTION_MS. */
  readonly survivorsInterrupted: number;
  readonly survivors: number;
  /**
   * ms from the event until every client of a surviving node was served again for good: the end of
   * the last wait longer than INTERRUPTION_MS that any of them had (0: none waited that long).
   */
  readonly survivorsBackMs: number | undefined;
  /** The same worst wait in the steady load before the first event, for comparison. */
  readonly baselineWorstWaitMs: number;
  /** For a killed or paused node: ms from its restart's readiness (or SIGCONT) until each of its clients was served again. */
  readonly affectedBackMs?: number;
  /** For a killed node: ms from spawn to event=ready. */
  readonly restartReadyMs?: number;
  readonly wrongReplies: number;
  readonly note?: string;
}

export interface FailoverResult {
  readonly clients: number;
  readonly cycles: number;
  readonly wrongReplies: number;
  readonly wrongExamples: string[];
  readonly reconnects: number;
  readonly events: FailoverEvent[];
}

interface Probe {
  readonly id: number;
  readonly node: number;
  readonly completions: number[];
  client: BenchClient | undefined;
}

/**
 * With request+release cycles running on every node (one client per connection, each on its own
 * key, reconnecting to its node when the connection drops), kills a node (-9), kills etcd's
 * leader (-9), and SIGSTOPs a node for a while; measures how long the clients of the other nodes
 * waited for a reply, and checks every reply (a request must make its client owner, a release
 * must remove one entry).
 */
export async function runClusterFailover(cluster: BenchCluster, config: BenchConfig, log: (line: string) => void): Promise<FailoverResult> {
  const endpoints = cluster.endpoints;
  const probes: Probe[] = Array.from({ length: config.failoverClients }, (_, id) => ({ id, node: id % endpoints.length, completions: [], client: undefined }));
  let stopped = false;
  let cycles = 0;
  let reconnects = 0;
  const wrong: Array<{ at: number; text: string }> = [];
  const loop = async (p: Probe): Promise<void> => {
    const key = asciiBytes(`failover:${p.id}`);
    const owner = asciiBytes(`failover-client-${p.id}`);
    const index = asciiBytes('0');
    const request = encodeRequests([{ command: Command.Request, key, index, owner, ttl: 60, ttw: 0, priority: 0 }]);
    const release = encodeRequests([{ command: Command.Release, key, index, owner }]);
    while (!stopped) {
      try {
        p.client ??= await BenchClient.connect(endpoints[p.node]!, CONNECT_TIMEOUT_MS);
        const [granted] = await p.client.send(request, [Command.Request]);
        const position = granted!.readUInt16BE(0);
        if (position !== 1) wrong.push({ at: performance.now(), text: `client ${p.id} (node ${p.node + 1}): request got position ${position}` });
        const [released] = await p.client.send(release, [Command.Release]);
        const removed = released!.readUInt16BE(0);
        if (removed !== 1) wrong.push({ at: performance.now(), text: `client ${p.id} (node ${p.node + 1}): release removed ${removed}` });
        p.completions.push(performance.now());
        cycles++;
      } catch {
        p.client?.close();
        p.client = undefined;
        if (stopped) return;
        reconnects++;
        await delay(RECONNECT_MS);
      }
    }
  };
  const running = probes.map(loop);
  const events: FailoverEvent[] = [];
  const clientsOf = (node: number): Probe[] => probes.filter((p) => p.node === node);
  const worstWait = (group: Probe[], from: number, until: number): { worst: number; interrupted: number } => {
    let worst = 0;
    let interrupted = 0;
    for (const p of group) {
      // Waits are counted from the event: one still running from an earlier event is not this one's.
      let previous = from;
      let longest = 0;
      for (const t of p.completions) {
        if (t < from) continue;
        if (t > until) break;
        longest = Math.max(longest, t - previous);
        previous = t;
      }
      longest = Math.max(longest, until - previous);
      worst = Math.max(worst, longest);
      if (longest > INTERRUPTION_MS) interrupted++;
    }
    return { worst, interrupted };
  };
  /**
   * Waits at least `minimumMs` after `at`, then until every probe of the group had a reply within
   * the last INTERRUPTION_MS (bounded); returns ms from `at` to the end of the last long wait.
   */
  const recovery = async (group: Probe[], at: number, minimumMs: number): Promise<number | undefined> => {
    await delay(minimumMs);
    const deadline = at + AFFECTED_LIMIT_MS;
    while (performance.now() < deadline) {
      const now = performance.now();
      if (group.every((p) => (p.completions.at(-1) ?? 0) > now - INTERRUPTION_MS / 2)) break;
      await delay(50);
    }
    const now = performance.now();
    if (!group.every((p) => (p.completions.at(-1) ?? 0) > now - INTERRUPTION_MS)) return undefined;
    let back = 0;
    for (const p of group) {
      let previous = at;
      for (const t of p.completions) {
        if (t < at) {
          previous = t;
          continue;
        }
        if (t - previous > INTERRUPTION_MS) back = Math.max(back, t - at);
        previous = t;
      }
    }
    return back;
  };
  /** ms from `since` until every probe in the group completed a cycle (bounded). */
  const allServedAfter = async (group: Probe[], since: number): Promise<number | undefined> => {
    const deadline = since + AFFECTED_LIMIT_MS;
    while (performance.now() < deadline) {
      const firsts = group.map((p) => p.completions.find((t) => t > since));
      if (firsts.every((t) => t !== undefined)) return Math.max(...firsts) - since;
      await delay(20);
    }
    return undefined;
  };
  const wrongBetween = (from: number, until: number): number => wrong.filter((w) => w.at >= from && w.at < until).length;

  try {
    const t0 = performance.now();
    await delay(config.failoverBaselineMs);
    const baseline = worstWait(probes, t0 + config.failoverBaselineMs / 2, performance.now()).worst;
    // The lockserver leader is the worst case for both (it also proposes expiries and snapshots).
    const leaderIndex = (): number =>
      Math.max(
        0,
        cluster.nodes.findIndex((n) => n.name === cluster.lockLeader),
      );
    const victim = leaderIndex();

    // 1. kill -9 a node; its clients come back once it is restarted.
    {
      const node: Node = cluster.nodes[victim]!;
      const role = cluster.lockLeader === node.name ? 'the lockserver leader' : 'a follower';
      const at = performance.now();
      await cluster.killNode(node);
      log(`failover: killed node ${node.name} (-9)`);
      const survivors = probes.filter((p) => p.node !== victim);
      const back = await recovery(survivors, at, config.failoverObserveMs);
      const w = worstWait(survivors, at, performance.now());
      const restartReadyMs = await cluster.startNode(node);
      const ownBack = await allServedAfter(clientsOf(victim), performance.now());
      events.push({
        event: `node ${node.name} (${role}) killed (-9), then restarted`,
        survivorsWorstWaitMs: w.worst,
        survivorsInterrupted: w.interrupted,
        survivors: survivors.length,
        survivorsBackMs: back,
        baselineWorstWaitMs: baseline,
        restartReadyMs,
        ...(ownBack !== undefined ? { affectedBackMs: ownBack } : { note: `its clients not all served within ${AFFECTED_LIMIT_MS} ms of its restart` }),
        wrongReplies: wrongBetween(at, performance.now()),
      });
      log(`failover: node kill: survivors' worst wait ${w.worst.toFixed(0)} ms; restarted node ready after ${restartReadyMs} ms`);
    }

    // 2. kill -9 etcd's leader; every client is a survivor.
    {
      const leader = await cluster.leader();
      const at = performance.now();
      await cluster.killMember(leader);
      log(`failover: killed etcd leader ${leader.name} (-9)`);
      const back = await recovery(probes, at, config.failoverObserveMs);
      const w = worstWait(probes, at, performance.now());
      await cluster.startMember(leader);
      events.push({
        event: `etcd leader ${leader.name} killed (-9)`,
        survivorsWorstWaitMs: w.worst,
        survivorsInterrupted: w.interrupted,
        survivors: probes.length,
        survivorsBackMs: back,
        baselineWorstWaitMs: baseline,
        wrongReplies: wrongBetween(at, performance.now()),
      });
      log(`failover: etcd leader kill: worst wait ${w.worst.toFixed(0)} ms`);
    }

    // 3. SIGSTOP a node, SIGCONT it after a while.
    {
      const paused = leaderIndex();
      const node = cluster.nodes[paused]!;
      const role = cluster.lockLeader === node.name ? 'the lockserver leader' : 'a follower';
      const at = performance.now();
      cluster.pauseNode(node);
      log(`failover: SIGSTOP node ${node.name} for ${config.failoverPauseMs} ms`);
      await delay(config.failoverPauseMs);
      cluster.resumeNode(node);
      const resumedAt = performance.now();
      const back = await allServedAfter(clientsOf(paused), resumedAt);
      await delay(Math.max(0, config.failoverObserveMs - (performance.now() - resumedAt)));
      const survivors = probes.filter((p) => p.node !== paused);
      const survivorsBack = await recovery(survivors, at, 0);
      const w = worstWait(survivors, at, performance.now());
      events.push({
        event: `node ${node.name} (${role}) stopped (SIGSTOP) for ${(config.failoverPauseMs / 1000).toFixed(0)} s`,
        survivorsWorstWaitMs: w.worst,
        survivorsInterrupted: w.interrupted,
        survivors: survivors.length,
        survivorsBackMs: survivorsBack,
        baselineWorstWaitMs: baseline,
        ...(back !== undefined ? { affectedBackMs: back } : { note: `its clients not all served within ${AFFECTED_LIMIT_MS} ms of SIGCONT` }),
        wrongReplies: wrongBetween(at, performance.now()),
      });
      log(`failover: pause: survivors' worst wait ${w.worst.toFixed(0)} ms`);
    }
  } finally {
    stopped = true;
    for (const p of probes) p.client?.close();
    await Promise.all(running);
  }
  return { clients: probes.length, cycles, wrongReplies: wrong.length, wrongExamples: wrong.slice(0, 5).map((w) => w.text), reconnects, events };
}
