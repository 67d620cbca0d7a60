import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { mulberry32 } from '../../../src/runtime/Random.js';
import { bounded } from '../../helpers/bounded.js';
import { checkAvailability, checkHistory, firstServedAfter, longestSilence, type ServiceWindow, type Violation } from '../../helpers/history/checker.js';
import { FailoverClient, type ClientOptions, type Endpoint } from '../../helpers/history/client.js';
import { History, type Op } from '../../helpers/history/history.js';
import { INDEXES, KEEP_KEY, KEY, runBusy, runProbe, runWorker } from '../../helpers/history/workload.js';
import { LOCK_PORT, NetCluster, type NetMember, type NetNode } from '../../helpers/netns/netCluster.js';
import { NetLab } from '../../helpers/netns/network.js';
import {
  BUSIEST,
  describeFault,
  ETCD_LEADER,
  describeSchedule,
  drawSchedule,
  MEMBERS,
  NODES,
  SETTLE_MS,
  type Episode,
  type Fault,
  type FaultKind,
} from './schedule.js';

/** A client's bound on one reply; above --commit-timeout (2 s), so a node that gives up is seen to. */
const REPLY_BOUND_MS = 4_000;
const CONNECT_BOUND_MS = 2_000;
const COMMIT_TIMEOUT_S = 2;
/**
 * How long a command a client gave up on may still take effect (README, Guarantees): a stalled
 * node refuses input older than 1 s (+0.1 s of its watch), then --commit-timeout (2 s), then the
 * log's lateCommitMs (writer-lease TTL + 1 s: 4 s on these etcd members, election timeout 2 s).
 * The clients wait that long before touching the key again, as the README asks.
 */
const UNANSWERED_MAY_LAND_MS = 1_100 + COMMIT_TIMEOUT_S * 1_000 + 4_000 + 400;
/** Every node must answer within this once every fault is healed (a bounded wait). */
export const HEALED_BOUND_MS = 30_000;
/** During a fault that leaves the quorum and a node intact, the node answers within this. */
export const SERVE_BOUND_MS = 8_000;
const WORKERS = 6;

export interface NemesisOptions {
  readonly seed: number;
  /** Seconds of load (faults + settling); the schedule is drawn from the seed to fit. */
  readonly seconds: number;
  /** Only these kinds of fault in the seed's schedule. */
  readonly only?: readonly FaultKind[];
  /** A fixed schedule instead of the seed's (the targeted tests). */
  readonly schedule?: readonly Episode[];
  /** Clients per node adding unchecked write load (runBusy), so that batches of several nodes meet at a sequencer; none by default. */
  readonly busy?: number;
  /** Progress lines. */
  readonly log?: (line: string) => void;
  /** Registers a cleanup that must also run if the caller is torn down early (ava's t.teardown). */
  readonly teardown?: (cleanup: () => Promise<void>) => void;
}

/** What one episode did to the nodes, measured from the history (figures, never asserted). */
export interface EpisodeFigures {
  readonly episode: string;
  /** Per node: the longest stretch without any reply during the fault, ms. */
  readonly silentMs: Record<string, number>;
  /** Per node: from the heal to the first reply to a command sent after it, ms. */
  readonly servedAfterHealMs: Record<string, number | undefined>;
}

export interface NemesisReport {
  readonly seed: number;
  readonly schedule: string;
  readonly violations: readonly Violation[];
  readonly figures: readonly EpisodeFigures[];
  /** Per node: from the final heal until it answered (bounded by HEALED_BOUND_MS), ms. */
  readonly healedServeMs: Record<string, number>;
  readonly ops: number;
  readonly answered: number;
  readonly runMs: number;
  readonly replay: string;
  /** The whole history (for a failing run's dump). */
  readonly history: readonly Op[];
  /** Every node's last log lines. */
  readonly nodeLogs: string;
  /** Times a node turned to forwarding its appends to a sequencer (`event=append-route via=forwarded …`). */
  readonly forwardRoutes: number;
  /** Appends carrying several nodes' batches, by the running nodes' sequencers in their present lives (metrics, at the end). */
  readonly sequencerBundles: number;
}

/** A fault as applied: the node or member it fell on when chosen at run time (leader, busiest). */
interface Applied {
  readonly fault: Fault;
  readonly node?: NetNode;
  readonly member?: NetMember;
}

async function memberOf(cluster: NetCluster, j: number): Promise<NetMember> {
  if (j === BUSIEST) return cluster.busiestMember();
  if (j !== ETCD_LEADER) return cluster.members[j]!;
  // Bounded: the members agree on a leader within an election or two of the run's start.
  for (const until = Date.now() + 15_000; Date.now() < until;) {
    const leader = await cluster.leaderMember();
    if (leader !== undefined) return leader;
    await delay(200);
  }
  throw new Error('no etcd member was agreed to lead within 15 s');
}

async function apply(cluster: NetCluster, fault: Fault): Promise<Applied> {
  switch (fault.kind) {
    case 'cut-node':
      cluster.cutNode(cluster.nodes[fault.node]!);
      return { fault };
    case 'isolate-member': {
      const member = await memberOf(cluster, fault.member);
      cluster.isolateMember(member);
      return { fault, member };
    }
    case 'pause-member': {
      const member = await memberOf(cluster, fault.member);
      cluster.pauseMember(member);
      return { fault, member };
    }
    case 'delay-link':
      cluster.delayLink(cluster.nodes[fault.node]!, cluster.members[fault.member]!, fault.ms);
      return { fault };
    case 'pause-leader-node': {
      const node = cluster.leaderNode() ?? cluster.nodes[0]!;
      cluster.pauseNode(node);
      return { fault, node };
    }
    case 'kill-node':
      await cluster.killNode(cluster.nodes[fault.node]!);
      return { fault };
  }
}

async function heal(cluster: NetCluster, applied: Applied): Promise<void> {
  const { fault } = applied;
  switch (fault.kind) {
    case 'cut-node':
      cluster.healNode(cluster.nodes[fault.node]!);
      break;
    case 'isolate-member':
      cluster.rejoinMember(applied.member!);
      break;
    case 'pause-member':
      cluster.resumeMember(applied.member!);
      break;
    case 'delay-link':
      cluster.delayLink(cluster.nodes[fault.node]!, cluster.members[fault.member]!, 0);
      break;
    case 'pause-leader-node':
      cluster.resumeNode(applied.node!);
      break;
    case 'kill-node':
      // Restarted in the background: ready once caught up (bounded inside startNode).
      void cluster.startNode(cluster.nodes[fault.node]!).catch(() => undefined);
  }
}

/** The nodes a fault leaves able to serve if the cluster is right (the quorum stays in every episode). */
function unaffectedNodes(applied: readonly Applied[]): string[] {
  const out = new Set(Array.from({ length: NODES }, (_, i) => `n${i + 1}`));
  for (const { fault, node } of applied) {
    if (fault.kind === 'cut-node' || fault.kind === 'kill-node') out.delete(`n${fault.node + 1}`);
    if (node !== undefined) out.delete(node.host.name);
  }
  return [...out];
}

/**
 * One nemesis run: a lab of namespaces (3 nodes, 3 etcd members), WORKERS workers and one probe
 * per node on the client network, the seed's fault schedule (or the one given), then the final
 * heal, the liveness wait, the final reads and the checks. Everything is removed at the end, pass
 * or fail (and by the lab's exit hook if the process dies first).
 */
export async function runNemesis(options: NemesisOptions): Promise<NemesisReport> {
  const started = Date.now();
  const log = options.log ?? (() => undefined);
  const schedule = options.schedule ?? drawSchedule(options.seed, options.seconds, options.only);
  const only = options.only === undefined ? '' : ` --only ${options.only.join(',')}`;
  const busy = (options.busy ?? 0) > 0 ? ` --busy ${options.busy}` : '';
  const replay = options.schedule === undefined ? `scripts/nemesis --seed ${options.seed} --seconds ${options.seconds}${only}${busy}` : 'the same test';
  log(`nemesis seed ${options.seed}${busy}, ${options.seconds} s of load, schedule:\n${describeSchedule(schedule)}`);
  const lab = NetLab.create({ nodes: NODES, members: MEMBERS });
  let cluster: NetCluster | undefined;
  let done = false;
  const destroy = async (): Promise<void> => {
    if (done) return;
    done = true;
    await cluster?.destroy().catch(() => undefined);
    lab.destroy();
  };
  options.teardown?.(destroy);
  const clients: FailoverClient[] = [];
  let stop = false;
  try {
    cluster = await NetCluster.start(lab, ['--commit-timeout', String(COMMIT_TIMEOUT_S)]);
    const history = new History();
    const endpoints: Endpoint[] = cluster.nodes.map((n) => ({ name: n.host.name, host: n.host.clientAddress!, port: LOCK_PORT }));
    const clientOptions: ClientOptions = {
      history,
      nodes: endpoints,
      localAddress: lab.root.clientAddress,
      replyBoundMs: REPLY_BOUND_MS,
      unansweredMayLandMs: UNANSWERED_MAY_LAND_MS,
      connectBoundMs: CONNECT_BOUND_MS,
      stopped: () => stop,
    };
    const random = mulberry32(options.seed ^ 0x5eed);
    const loops: Promise<void>[] = [];
    for (let i = 0; i < WORKERS; i++) {
      const client = new FailoverClient(`c${i + 1}`, clientOptions, i % NODES);
      clients.push(client);
      const seed = Math.floor(random() * 2 ** 32);
      loops.push(runWorker(client, mulberry32(seed), () => stop));
    }
    for (let i = 0; i < NODES; i++) {
      const probe = new FailoverClient(`probe-n${i + 1}`, clientOptions, i, true);
      clients.push(probe);
      loops.push(runProbe(probe, () => stop));
    }
    // Load only: its own history, never checked (the checked workers' commands share its batches).
    const busyOptions: ClientOptions = { ...clientOptions, history: new History() };
    for (let i = 0; i < NODES; i++) {
      for (let j = 0; j < (options.busy ?? 0); j++) {
        const busy = new FailoverClient(`busy-n${i + 1}-${j}`, busyOptions, i, true);
        clients.push(busy);
        loops.push(runBusy(busy, () => stop));
      }
    }
    const loadStart = history.now();
    const windows: ServiceWindow[] = [];
    const healTimes: Array<{ episode: Episode; from: number; to: number; applied: Applied[] }> = [];
    const applied: Applied[] = [];
    try {
      for (const episode of schedule) {
        const wait = loadStart + episode.at - history.now();
        if (wait > 0) await delay(wait);
        const from = history.now();
        const now: Applied[] = [];
        for (const fault of episode.faults) now.push(await apply(cluster, fault));
        applied.push(...now);
        const chosen = now.flatMap((a) => [a.node?.host.name, a.member?.host.name]).filter((n) => n !== undefined);
        log(`${(from / 1000).toFixed(1)}s: ${episode.faults.map(describeFault).join(' + ')}${chosen.length === 0 ? '' : ` (${chosen.join(', ')})`}`);
        await delay(episode.duration);
        const to = history.now();
        for (const a of now) await heal(cluster, a);
        applied.length = 0;
        log(`${(to / 1000).toFixed(1)}s: healed`);
        windows.push({ from, to, nodes: unaffectedNodes(now), label: episode.faults.map(describeFault).join(' + ') });
        healTimes.push({ episode, from, to, applied: now });
      }
      await delay(Math.max(0, loadStart + options.seconds * 1000 - history.now() - SETTLE_MS) + SETTLE_MS);
    } finally {
      // Heal anything still applied (a failure mid-episode), then restart killed nodes.
      cluster.healAll();
      for (const node of cluster.nodes) if (node.proc?.running !== true) await cluster.startNode(node).catch(() => undefined);
    }
    const healedAt = history.now();
    // Liveness after healing: every node answers a fresh connection (bounded wait, measured).
    const healedServeMs: Record<string, number> = {};
    const unhealed: Violation[] = [];
    await Promise.all(
      endpoints.map(async (endpoint, i) => {
        const checker = new FailoverClient(`live-n${i + 1}`, clientOptions, i, true);
        clients.push(checker);
        const answered = bounded(
          (async () => {
            while ((await checker.call({ cmd: 'owner', key: KEY, index: INDEXES[0]! })) === undefined && !stop) await delay(100);
          })(),
          HEALED_BOUND_MS,
          `node ${endpoint.name} to answer after every fault was healed`,
        );
        try {
          await answered;
          healedServeMs[endpoint.name] = Math.round(history.now() - healedAt);
        } catch (error) {
          unhealed.push({ check: 'unavailable', message: `liveness after healing: ${(error as Error).message}`, ops: [] });
        } finally {
          checker.close();
        }
      }),
    );
    stop = true;
    await bounded(Promise.all(loops), 3 * REPLY_BOUND_MS + 5_000, 'the clients to stop');
    // Final reads on every node: every TTL-0 grant and the shared key.
    const finalFrom = history.now();
    for (const [i] of endpoints.entries()) {
      const reader = new FailoverClient(`final-n${i + 1}`, { ...clientOptions, stopped: () => false }, i, true);
      clients.push(reader);
      for (let w = 1; w <= WORKERS; w++) await reader.call({ cmd: 'owner', key: KEEP_KEY, index: `c${w}` });
      await reader.call({ cmd: 'list', key: KEEP_KEY });
      await reader.call({ cmd: 'list', key: KEY });
      reader.close();
    }
    const ops = history.ops;
    const violations = [...unhealed, ...checkHistory(ops, finalFrom), ...checkAvailability(ops, windows, SERVE_BOUND_MS)];
    const figures = healTimes.map(({ episode, from, to }) => figuresOf(ops, episode, from, to));
    return {
      seed: options.seed,
      schedule: describeSchedule(schedule),
      violations,
      figures,
      healedServeMs,
      ops: ops.length,
      answered: ops.filter((o: Op) => o.replied !== undefined).length,
      runMs: Date.now() - started,
      replay,
      history: ops,
      nodeLogs: cluster.nodeLogs(60),
      forwardRoutes: cluster.countLines(/\bevent=append-route via=forwarded\b/),
      sequencerBundles: await cluster.sequencerBundles(),
    };
  } catch (error) {
    if (cluster !== undefined) log(cluster.nodeLogs());
    throw error;
  } finally {
    stop = true;
    for (const client of clients) client.close();
    await destroy();
  }
}

function figuresOf(ops: readonly Op[], episode: Episode, from: number, to: number): EpisodeFigures {
  const silentMs: Record<string, number> = {};
  const servedAfterHealMs: Record<string, number | undefined> = {};
  for (let i = 1; i <= NODES; i++) {
    const node = `n${i}`;
    silentMs[node] = Math.round(longestSilence(ops, node, from, to));
    const served = firstServedAfter(ops, node, to);
    servedAfterHealMs[node] = served === undefined ? undefined : Math.round(served);
  }
  return { episode: episode.faults.map(describeFault).join(' + '), silentMs, servedAfterHealMs };
}

/** A failing run's text: what broke, the seed, the schedule, how to replay. */
export function describeFailure(report: NemesisReport): string {
  return [
    `nemesis seed ${report.seed}: ${report.violations.length} violation(s)`,
    ...report.violations.slice(0, 10).map((v) => v.message),
    `schedule:\n${report.schedule}`,
    `replay: ${report.replay}`,
  ].join('\n');
}

/**
 * Writes a failing run's violations and whole history (one operation a line) and the nodes' last
 * log lines under the temp dir; returns a line naming both files.
 */
export function dumpFailure(report: NemesisReport, name = `seed-${report.seed}`): string {
  const history = join(tmpdir(), `nemesis-${name}-history.json`);
  const logs = join(tmpdir(), `nemesis-${name}-nodes.log`);
  writeFileSync(
    history,
    `{"violations": ${JSON.stringify(report.violations)},\n"history": [\n${report.history.map((op) => JSON.stringify(op)).join(',\n')}\n]}\n`,
  );
  writeFileSync(logs, report.nodeLogs);
  return `history: ${history}; node logs: ${logs}`;
}
