import { performance } from 'node:perf_hooks';
import { asciiBytes } from '../../../src/bytes.js';
import { Command } from '../../../src/protocol/constants.js';
import type { Request } from '../../../src/protocol/messages.js';
import { BenchClient, encodeRequests } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { scoreFairness, type FairnessScore, type Waiter } from '../fairness.js';
import { Histogram } from '../Histogram.js';
import { seededRandom } from '../random.js';
import type { Target } from '../targets/Target.js';

const KEY = asciiBytes('contended');
const INDEX = asciiBytes('row-1');
/** Long enough that no entry expires during a round; polling renews them anyway. */
const HOLD_SECONDS = 120;
/** Distinct priorities handed out, so both rules (priority, then arrival) are exercised. */
const PRIORITY_LEVELS = [0, 1, 2, 3];

export interface ContentionRound {
  readonly contenders: number;
  /** Ownership changes observed after the first owner let go. */
  readonly handovers: number;
  readonly elapsedMs: number;
  readonly handoversPerSecond: number;
  /** Time from one owner seeing "1" to the next owner seeing "1". */
  readonly handoverMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly polls: number;
  readonly pollsPerSecond: number;
  readonly completed: boolean;
  readonly fairness: FairnessScore;
}

export interface ContentionResult {
  readonly contenders: number;
  readonly rounds: ContentionRound[];
}

interface Contender {
  readonly id: number;
  readonly client: BenchClient;
  readonly priority: number;
  readonly requestFrame: Buffer;
  readonly releaseFrame: Buffer;
}

function position(reply: Buffer): number {
  return reply.readUInt16BE(0);
}

/**
 * `contenders` clients poll one (key, index) with request (0x02) until the reply says they own it
 * (1), then release. Each round first queues everyone one by one (so the server's arrival order is
 * known), then lets them all poll at once and records who became owner when.
 */
export async function runContention(target: Target, config: BenchConfig, log: (line: string) => void): Promise<ContentionResult> {
  const running = await target.start({ maxConnections: config.contenders + 100 });
  const random = seededRandom(config.seed);
  const contenders: Contender[] = [];
  try {
    for (let id = 0; id < config.contenders; id++) {
      const owner = asciiBytes(`contender-${id}`);
      const priority = PRIORITY_LEVELS[Math.floor(random() * PRIORITY_LEVELS.length)]!;
      const client = await BenchClient.connect(running.endpoints[id % running.endpoints.length]!);
      const request = { command: Command.Request, key: KEY, index: INDEX, owner, ttl: HOLD_SECONDS, ttw: HOLD_SECONDS, priority } as const;
      const release = { command: Command.Release, key: KEY, index: INDEX, owner } as const;
      contenders.push({ id, client, priority, requestFrame: encodeOne(request), releaseFrame: encodeOne(release) });
    }
    const rounds: ContentionRound[] = [];
    for (let r = 0; r < config.rounds; r++) {
      const round = await runRound(shuffled(contenders, random), config.roundLimitMs);
      rounds.push(round);
      log(
        `contention round ${r + 1}: ${round.handovers} handovers, ${round.handoversPerSecond.toFixed(0)}/s, ` +
          `concordance ${round.fairness.concordance.toFixed(3)}${round.completed ? '' : ' (cut short by the time limit)'}`,
      );
    }
    return { contenders: config.contenders, rounds };
  } finally {
    for (const c of contenders) c.client.close();
    await running.stop();
  }
}

async function runRound(order: Contender[], limitMs: number): Promise<ContentionRound> {
  const [first, ...rest] = order;
  if (first === undefined) throw new Error('contention needs at least one contender');
  const deadline = performance.now() + limitMs;
  // Queue everyone, one at a time, behind the first owner: arrival order is exactly `order`.
  const firstReply = await first.client.send(first.requestFrame, [Command.Request]);
  if (position(firstReply[0]!) !== 1) throw new Error(`the contended lock was not free (position ${position(firstReply[0]!)})`);
  const waiters: Waiter[] = [];
  for (const [arrival, c] of rest.entries()) {
    const reply = await c.client.send(c.requestFrame, [Command.Request]);
    if (position(reply[0]!) < 2) throw new Error(`contender ${c.id} was not queued (position ${position(reply[0]!)})`);
    waiters.push({ id: c.id, priority: c.priority, arrival });
  }

  const owners: number[] = [];
  const ownedAt: number[] = [];
  let polls = 0;
  const started = performance.now();
  const poll = async (c: Contender): Promise<void> => {
    while (performance.now() < deadline) {
      const reply = await c.client.send(c.requestFrame, [Command.Request]);
      polls++;
      if (position(reply[0]!) === 1) {
        owners.push(c.id);
        ownedAt.push(performance.now());
        await c.client.send(c.releaseFrame, [Command.Release]);
        return;
      }
    }
  };
  const polling = rest.map(poll);
  await first.client.send(first.releaseFrame, [Command.Release]);
  await Promise.all(polling);
  const elapsedMs = (ownedAt.at(-1) ?? performance.now()) - started;

  const gaps = new Histogram();
  for (let i = 1; i < ownedAt.length; i++) gaps.record((ownedAt[i]! - ownedAt[i - 1]!) * 1000);
  if (ownedAt.length > 0) gaps.record((ownedAt[0]! - started) * 1000);
  // Whoever is still queued after a cut-short round is released so the next round starts clean.
  for (const c of rest) if (!owners.includes(c.id)) await c.client.send(c.releaseFrame, [Command.Release]);
  return {
    contenders: order.length,
    handovers: owners.length,
    elapsedMs,
    handoversPerSecond: owners.length / (elapsedMs / 1000),
    handoverMs: { p50: gaps.percentile(50) / 1000, p99: gaps.percentile(99) / 1000, max: gaps.max / 1000 },
    polls,
    pollsPerSecond: polls / (elapsedMs / 1000),
    completed: owners.length === rest.length,
    fairness: scoreFairness(waiters, owners),
  };
}

function encodeOne(request: Request): Buffer {
  return encodeRequests([request]);
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}
