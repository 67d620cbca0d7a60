import { mulberry32, type Random } from '../../../src/runtime/Random.js';

/**
 * One fault, on one link or one process. Nodes are numbered from 0 (n1 is 0), as are members;
 * member BUSIEST is the one the nodes hold the most connections to when the fault starts, member
 * ETCD_LEADER the one that leads the etcd cluster then.
 */
export type Fault =
  | { readonly kind: 'cut-node'; readonly node: number }
  | { readonly kind: 'isolate-member'; readonly member: number }
  | { readonly kind: 'pause-member'; readonly member: number }
  | { readonly kind: 'delay-link'; readonly node: number; readonly member: number; readonly ms: number }
  | { readonly kind: 'pause-leader-node' }
  | { readonly kind: 'kill-node'; readonly node: number };

/** The kinds in drawing order (drawFault's cases 0–4, then a kill with another fault). */
export const FAULT_KINDS = ['cut-node', 'isolate-member', 'pause-member', 'delay-link', 'pause-leader-node', 'kill-node'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** Faults applied together at `at` (ms after the load started) and healed together `duration` ms later. */
export interface Episode {
  readonly at: number;
  readonly duration: number;
  readonly faults: readonly Fault[];
}

export const NODES = 3;
export const BUSIEST = -1;
export const ETCD_LEADER = -2;
export const MEMBERS = 3;
/** The delay of a delayed link (the issue's ~200 ms). */
export const LINK_DELAY_MS = 200;
/** How long the load runs after the last heal, so that late effects land while clients are busy. */
export const SETTLE_MS = 8_000;
const WARM_UP_MS = 2_000;

const pick = (random: Random, n: number): number => Math.floor(random() * n);
const between = (random: Random, low: number, high: number): number => low + Math.floor(random() * (high - low + 1));

/** One fault of kind 0–4 with its duration. */
function drawFault(random: Random, kind: number): { fault: Fault; duration: number } {
  switch (kind) {
    case 0:
      return { fault: { kind: 'cut-node', node: pick(random, NODES) }, duration: between(random, 6_000, 10_000) };
    case 1:
      return { fault: { kind: 'isolate-member', member: pick(random, MEMBERS) }, duration: between(random, 10_000, 14_000) };
    case 2:
      return { fault: { kind: 'pause-member', member: pick(random, MEMBERS) }, duration: between(random, 10_000, 14_000) };
    case 3:
      return {
        fault: { kind: 'delay-link', node: pick(random, NODES), member: pick(random, MEMBERS), ms: LINK_DELAY_MS },
        duration: between(random, 8_000, 12_000),
      };
    default:
      // Past the leader's 5 s lease.
      return { fault: { kind: 'pause-leader-node' }, duration: between(random, 7_000, 9_000) };
  }
}

/** One fault, or (one time in six) kill -9 of a node, restarted at the heal, with another fault elsewhere. */
function drawEpisode(random: Random, kinds: readonly number[]): { faults: Fault[]; duration: number } {
  const kind = kinds[pick(random, kinds.length)]!;
  if (kind < 5) {
    const { fault, duration } = drawFault(random, kind);
    return { faults: [fault], duration };
  }
  const { fault, duration } = drawFault(random, pick(random, 5));
  const busy = fault.kind === 'cut-node' || fault.kind === 'delay-link' ? fault.node : undefined;
  const victim = busy === undefined ? pick(random, NODES) : (busy + 1 + pick(random, NODES - 1)) % NODES;
  return { faults: [fault, { kind: 'kill-node', node: victim }], duration };
}

/**
 * The fault schedule of a seed: episodes one after another over `seconds` of load, each 6–14 s
 * (a paused leader node 7–9 s, past its lease), 3–5 s of quiet between them, one etcd member at
 * most faulty at a time (the quorum stays), and SETTLE_MS of load after the last heal. `only`
 * restricts the kinds drawn ("kill-node" is a kill with another fault of any kind).
 */
export function drawSchedule(seed: number, seconds: number, only?: readonly FaultKind[]): Episode[] {
  const kinds = only === undefined ? [0, 1, 2, 3, 4, 5] : only.map((k) => FAULT_KINDS.indexOf(k));
  const random = mulberry32(seed);
  const episodes: Episode[] = [];
  let at = WARM_UP_MS;
  for (;;) {
    const { faults, duration } = drawEpisode(random, kinds);
    if (at + duration + SETTLE_MS > seconds * 1000) break;
    episodes.push({ at, duration, faults });
    at += duration + between(random, 3_000, 5_000);
  }
  return episodes;
}

const memberName = (j: number): string => (j === BUSIEST ? 'the busiest' : j === ETCD_LEADER ? 'the leader' : `m${j}`);

export function describeFault(fault: Fault): string {
  switch (fault.kind) {
    case 'cut-node':
      return `node n${fault.node + 1} cut off from every etcd member (blackhole)`;
    case 'isolate-member':
      return `etcd member ${memberName(fault.member)} isolated from members and nodes (blackhole)`;
    case 'pause-member':
      return `etcd member ${memberName(fault.member)} paused (SIGSTOP)`;
    case 'delay-link':
      return `link n${fault.node + 1}→m${fault.member} delayed ${fault.ms} ms each way (relay)`;
    case 'pause-leader-node':
      return 'the leader node paused (SIGSTOP)';
    case 'kill-node':
      return `node n${fault.node + 1} killed (kill -9), restarted at the heal`;
  }
}

export function describeSchedule(episodes: readonly Episode[]): string {
  return episodes
    .map((e) => `  ${(e.at / 1000).toFixed(1)}s–${((e.at + e.duration) / 1000).toFixed(1)}s: ${e.faults.map(describeFault).join(' + ')}`)
    .join('\n');
}
