import test, { type ExecutionContext } from 'ava';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Command } from '../../src/protocol/constants.js';
import { decodeReply, replyFrameLength } from '../../src/protocol/decodeReply.js';
import type { Request } from '../../src/protocol/messages.js';
import { batchesPerValue, needsEtcd, startCluster, untilAnswered, type EtcdCluster, type LockCluster } from '../helpers/etcdCluster.js';
import { mulberry32 } from '../helpers/random.js';
import { RawClient } from '../helpers/rawClient.js';
import type { ServerProcess } from '../helpers/serverProcess.js';
import { ask, frames, req } from '../helpers/wire.js';

// S1: for one (key, index), no two clients' ownership intervals overlap, whichever nodes they
// ask, while a node or an etcd member is killed or paused. A client's interval runs from its
// position-1 reply to the earliest of: the send time of its release, the moment it gave up on
// a connection, and (send time of its last acknowledged renewing request) + TTL. All times are
// this process's monotonic clock; nothing here asserts how long anything took.

const etcdTest = needsEtcd(test);
const KEY = 'mutex';
const INDEX = '1';
const TTL_S = 2;
const TTW_S = 2;
const CONTENDERS = 6;
/** A client gives up on a connection whose reply has not come in this long (then tries another node). */
const REPLY_WAIT_MS = 3_000;

interface Interval {
  readonly client: number;
  readonly start: number;
  readonly end: number;
  readonly phase: string;
}

interface Run {
  stop: boolean;
  phase: string;
  readonly intervals: Interval[];
  readonly ports: () => number[];
}

async function exchange<C extends Command>(client: RawClient, request: Request & { command: C }) {
  client.send(frames(request));
  const frame = await client.readFrame((b) => replyFrameLength(request.command, b, 0, b.length), REPLY_WAIT_MS);
  return decodeReply(request.command, frame);
}

/** One client competing for KEY/INDEX through the nodes, moving to the next node on any failure. */
async function contender(t: ExecutionContext, id: number, run: Run, seed: number): Promise<void> {
  const random = mulberry32(seed + id);
  const owner = `c${id}`;
  let node = id % 3;
  let client: RawClient | undefined;
  let held: { start: number; renewedAt: number } | undefined;
  const record = (end: number): void => {
    if (held === undefined) return;
    run.intervals.push({ client: id, start: held.start, end: Math.min(end, held.renewedAt + TTL_S * 1000), phase: run.phase });
    held = undefined;
  };
  while (!run.stop) {
    try {
      if (client === undefined) {
        client = await RawClient.connect(t, { port: run.ports()[node]! });
        const greeting = await client.read(1, REPLY_WAIT_MS);
        if (greeting[0] !== 0x01) throw new Error('refused');
      }
      // Waiting is polling: a re-request renews the wait (TTW) and tells the position.
      const sent = performance.now();
      const position = await exchange(client, req.request(KEY, INDEX, owner, { ttl: TTL_S, ttw: TTW_S }));
      if (position !== 1) {
        await delay(20 + random() * 60);
        continue;
      }
      held = { start: performance.now(), renewedAt: sent };
      await delay(10 + random() * 80);
      if (random() < 0.5) {
        const renewSent = performance.now();
        if (await exchange(client, req.renew(KEY, INDEX, owner))) {
          held.renewedAt = renewSent;
          await delay(10 + random() * 80);
        } else {
          record(performance.now()); // lost it (expired): it believed so only until now
          continue;
        }
      }
      record(performance.now()); // the release is sent now; from here on it does not touch the resource
      await exchange(client, req.release(KEY, INDEX, owner));
      await delay(random() * 40);
    } catch {
      record(performance.now()); // gave up on this connection: stops believing it owns the lock
      client?.destroy();
      client = undefined;
      node = (node + 1) % 3;
      await delay(50);
    }
  }
  record(performance.now());
  client?.destroy();
}

/** Pairs of intervals of different clients that overlap. */
function overlaps(intervals: readonly Interval[]): Array<[Interval, Interval]> {
  const sorted = intervals.filter((i) => i.end > i.start).sort((a, b) => a.start - b.start);
  const found: Array<[Interval, Interval]> = [];
  let latest: Interval | undefined;
  for (const interval of sorted) {
    if (latest !== undefined && interval.start < latest.end && interval.client !== latest.client) found.push([latest, interval]);
    if (latest === undefined || interval.end > latest.end) latest = interval;
  }
  return found;
}

/** The node that last said it leads (`event=leader … self=true` as its latest leader line); the first if none did. */
function leaderIndex(nodes: readonly ServerProcess[]): number {
  const found = nodes.findIndex((n) => /\bself=true\b/.test([...n.lines].reverse().find((line) => /\bevent=leader\b/.test(line)) ?? ''));
  return Math.max(found, 0);
}

/**
 * S1 under kills and pauses of nodes and etcd members; the node killed, and later the one paused,
 * is the one leading then (the sequencer's).
 */
async function s1UnderFaults(t: ExecutionContext): Promise<{ etcd: EtcdCluster; cluster: LockCluster }> {
  t.timeout(240_000);
  const seed = Number(process.env.S1_SEED ?? Math.floor(Math.random() * 2 ** 31));
  t.log(`seed ${seed} (replay the clients' choices with S1_SEED=${seed})`);
  const { etcd, cluster, nodes } = await startCluster(t, { args: ['--commit-timeout', '2'] });
  const current: ServerProcess[] = [...nodes];
  const run: Run = { stop: false, phase: 'warm-up', intervals: [], ports: () => current.map((n) => n.port) };
  const clients = Array.from({ length: CONTENDERS }, (_, id) => contender(t, id, run, seed));
  /** A bounded load phase: contention goes on for `ms` while the fault lasts. */
  const phase = async (name: string, ms: number): Promise<void> => {
    run.phase = name;
    await delay(ms);
  };

  await phase('warm-up', 2_000);

  // The node leading (the sequencer) is the one killed, and later the one paused.
  const killed = leaderIndex(current);
  const victim = current[killed]!;
  victim.signal('SIGKILL');
  await victim.waitForExit();
  await phase(`leading node n${killed + 1} killed -9`, 3_000);
  current[killed] = await cluster.restart(victim);
  await phase(`node n${killed + 1} restarted`, 1_500);

  const etcdLeader = await etcd.leader();
  await etcd.kill(etcdLeader);
  await phase('etcd leader killed -9', 4_000);
  await etcd.restart(etcdLeader);
  await phase('etcd member restarted', 1_500);

  const pausedIndex = leaderIndex(current);
  const paused = current[pausedIndex]!;
  paused.signal('SIGSTOP');
  await phase(`leading node n${pausedIndex + 1} paused`, 4_000);
  paused.signal('SIGCONT');
  await phase(`node n${pausedIndex + 1} resumed`, 1_500);

  const etcdPaused = await etcd.leader();
  etcd.pause(etcdPaused);
  await phase('etcd leader paused', 4_000);
  etcd.resume(etcdPaused);
  await phase('healed', 2_000);

  run.stop = true;
  await Promise.all(clients);

  const byPhase = new Map<string, number>();
  for (const i of run.intervals) byPhase.set(i.phase, (byPhase.get(i.phase) ?? 0) + 1);
  t.log(`ownership intervals per phase: ${[...byPhase].map(([p, n]) => `${p}: ${n}`).join(', ')}`);
  const bad = overlaps(run.intervals);
  t.deepEqual(bad, [], `overlapping ownership intervals (seed ${seed})`);
  t.true(run.intervals.length > 0, 'someone owned the lock at some point');

  // Liveness once healed: a newcomer gets the lock through every node in turn (bounded waits;
  // the contenders' leftover entries expire within their TTL/TTW).
  for (const [i, node] of current.entries()) {
    const owner = `final-${i}`;
    await untilAnswered(node, async (c) => {
      for (;;) {
        if ((await ask.request(c, KEY, INDEX, owner, { ttl: 0, ttw: TTW_S })) === 1) return;
        await delay(100);
      }
    });
    t.is(await untilAnswered(current[(i + 1) % 3]!, (c) => ask.findOwner(c, KEY, INDEX)), owner);
    t.is(await untilAnswered(node, (c) => ask.release(c, KEY, INDEX, owner)), 1);
  }
  return { etcd, cluster };
}

etcdTest.serial(
  'S1: one (key, index), six clients on three nodes with 2 s TTLs, every node forwarding its batches to the leader’s sequencer: no two ownership intervals overlap while nodes (the leader among them) and etcd members are killed and paused',
  async (t) => {
    const { etcd, cluster } = await s1UnderFaults(t);
    const sizes = await batchesPerValue(etcd.endpointList, cluster.name);
    t.true(
      sizes.some((n) => n > 1),
      'the sequencer appended batches of several nodes together',
    );
  },
);
