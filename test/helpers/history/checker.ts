import { describeOp, type ListEntry, type Op } from './history.js';

/**
 * Checks of a recorded history (history.ts). Pure: no clock, no network; every time is a
 * client-side time of the one test process (a send time, or the time a reply was received).
 */

export type CheckName = 'S1' | 'stale-read' | 'early-expiry' | 'lost' | 'unavailable';

export interface Violation {
  readonly check: CheckName;
  readonly message: string;
  /** The operations that show it (ids in the history). */
  readonly ops: readonly number[];
}

/** An interval [from, to) during which `client` may rightly believe it owns key/index. */
export interface Ownership {
  readonly client: string;
  readonly key: string;
  readonly index: string;
  readonly from: number;
  readonly to: number;
  /** The reply that told the client it owns. */
  readonly evidence: number;
  /** The renewing send its end was computed from, if any. */
  readonly renewal: number | undefined;
}

const entryId = (key: string, index: string): string => `${key}\u0000${index}`;
const forever = (seconds: number | undefined): number => (seconds === undefined || seconds === 0 ? Infinity : seconds * 1000);
const answered = (op: Op): boolean => op.replied !== undefined;

function listEntry(op: Op, index: string, owner: string): ListEntry | undefined {
  return Array.isArray(op.reply) ? (op.reply as readonly ListEntry[]).find((e) => e.index === index && e.owner === owner) : undefined;
}

/** Whether `op` (by `client`) releases key/index: a 0x05 for that index or "*", or a 0x06. */
function releases(op: Op, client: string, key: string, index: string): boolean {
  if (op.client !== client) return false;
  if (op.cmd === 'releaseAll') return op.owner === client;
  return op.cmd === 'release' && op.owner === client && op.key === key && (op.index === index || op.index === '*');
}

/** Whether op's reply tells its own client that it owns key/index. */
function ownershipEvidence(op: Op): { key: string; index: string }[] {
  if (!answered(op)) return [];
  switch (op.cmd) {
    case 'request':
    case 'location':
      return op.reply === 1 && op.owner === op.client ? [{ key: op.key!, index: op.index! }] : [];
    case 'owner':
      return op.reply === op.client ? [{ key: op.key!, index: op.index! }] : [];
    case 'list':
      return (op.reply as readonly ListEntry[]).filter((e) => e.owner === op.client && e.isOwner).map((e) => ({ key: op.key!, index: e.index }));
    default:
      return [];
  }
}

/** The entries (key/index) the client renews with this op, with the TTL that applies, if confirmed. */
function confirmedRenewal(op: Op, ownerOnly: boolean): boolean {
  if (!answered(op)) return false;
  if (op.cmd === 'request') return ownerOnly ? op.reply === 1 : (op.reply as number) >= 1;
  return op.cmd === 'renew' && op.reply === true;
}

/**
 * S1's ownership intervals, from the client's side. A client owns key/index from the moment it
 * received a reply telling it so (0x02 or 0x03 answering 1, 0x01 naming it, 0x07 flagging it as
 * owner) until the earlier of:
 *  - the send time of its next release covering that entry (0x05 of the index or "*", 0x06),
 *    whatever became of it;
 *  - s + TTL, where s is the send time of its last CONFIRMED renewing command: a 0x02 of the
 *    entry answered ≥ 1 or a 0x04 answered 1, sent before the evidence, then extended by each
 *    confirmed renewal sent while the interval still ran (a 0x02 answered 1 or a 0x04 answered
 *    1). TTL is that 0x02's TTL (for a 0x04, the TTL of the client's latest 0x02 of the entry
 *    before it); TTL 0 never ends. A renewal whose outcome is unknown (no reply) is NOT counted:
 *    it may not have happened, and counting it could only lengthen the interval. A renewal sent
 *    while waiting counts because the server starts the TTL at the promotion, after that send.
 *    Without any confirmed renewal before the evidence, s is the client's earliest unanswered
 *    0x02 of the entry (the shortest interval the evidence allows).
 */
export function ownerships(ops: readonly Op[]): Ownership[] {
  const byClient = new Map<string, Op[]>();
  for (const op of ops) (byClient.get(op.client) ?? byClient.set(op.client, []).get(op.client)!).push(op);
  const out: Ownership[] = [];
  for (const [client, mine] of byClient) {
    mine.sort((a, b) => a.sent - b.sent);
    for (const evidenceOp of mine) {
      for (const { key, index } of ownershipEvidence(evidenceOp)) {
        const r = evidenceOp.replied!;
        const ofEntry = mine.filter((o) => o.key === key && o.index === index && o.owner === client && (o.cmd === 'request' || o.cmd === 'renew'));
        const ttlOf = (o: Op): number => {
          const request = o.cmd === 'request' ? o : ofEntry.filter((q) => q.cmd === 'request' && q.sent <= o.sent).at(-1);
          return forever(request?.ttl);
        };
        const before = ofEntry.filter((o) => o.sent <= r);
        let base = before.filter((o) => confirmedRenewal(o, false)).at(-1) ?? before.find((o) => o.cmd === 'request' && !answered(o));
        let end = base === undefined ? r : base.sent + ttlOf(base);
        const release = mine.find((o) => o.sent >= r && releases(o, client, key, index));
        const stop = release?.sent ?? Infinity;
        for (const o of ofEntry) {
          if (o.sent <= r || o.sent >= Math.min(end, stop) || !confirmedRenewal(o, true)) continue;
          base = o;
          end = Math.max(end, o.sent + ttlOf(o));
        }
        end = Math.min(end, stop);
        if (end > r) out.push({ client, key, index, from: r, to: end, evidence: evidenceOp.id, renewal: base?.id });
      }
    }
  }
  return out;
}

/** S1: no two clients' ownership intervals of one key/index overlap. */
export function checkMutualExclusion(ops: readonly Op[]): Violation[] {
  const byEntry = new Map<string, Ownership[]>();
  for (const o of ownerships(ops)) (byEntry.get(entryId(o.key, o.index)) ?? byEntry.set(entryId(o.key, o.index), []).get(entryId(o.key, o.index))!).push(o);
  const violations: Violation[] = [];
  const reported = new Set<string>();
  for (const list of byEntry.values()) {
    list.sort((a, b) => a.from - b.from);
    for (let i = 0; i < list.length; i++) {
      for (let j = i + 1; j < list.length && list[j]!.from < list[i]!.to; j++) {
        const [a, b] = [list[i]!, list[j]!];
        const pair = [a.client, b.client].sort().join(' ');
        if (a.client === b.client || reported.has(`${a.key}/${a.index}/${pair}`)) continue;
        reported.add(`${a.key}/${a.index}/${pair}`);
        const show = (o: Ownership): string =>
          `${o.client} owns from ${o.from} (reply of #${o.evidence}) to ${o.to === Infinity ? 'forever' : o.to}${o.renewal === undefined ? '' : ` (renewal #${o.renewal})`}`;
        violations.push({
          check: 'S1',
          message: `S1: ${a.key}/${a.index}: ${show(a)}; ${show(b)}: overlap ${b.from}–${Math.min(a.to, b.to)}\n  ${describe(ops, a.evidence)}\n  ${describe(ops, b.evidence)}`,
          ops: [a.evidence, b.evidence, ...(a.renewal === undefined ? [] : [a.renewal]), ...(b.renewal === undefined ? [] : [b.renewal])],
        });
      }
    }
  }
  return violations;
}

function describe(ops: readonly Op[], id: number): string {
  const op = ops.find((o) => o.id === id);
  return op === undefined ? `#${id}` : describeOp(op);
}

/** Whether op's reply names `client` as the owner of key/index. */
function namesOwner(op: Op, client: string, key: string, index: string): boolean {
  if (!answered(op) || op.key !== key) return false;
  if (op.cmd === 'owner') return op.index === index && op.reply === client;
  if (op.cmd === 'list') return listEntry(op, index, client)?.isOwner === true;
  if (op.cmd === 'location') return op.index === index && op.owner === client && op.reply === 1;
  return false;
}

/**
 * No stale read. Once a client's entry is known gone — its release of it was answered, or its
 * own 0x03 answered 0 — a reply to a command SENT after that (so the reply was made after it)
 * must not name it as owner, unless the client asked for the entry again: a 0x02 of it sent after
 * the gone event's send, or one that was never answered (a command with no reply may take effect
 * at any later time: linearizability allows it, S1 still holds, and late commits of such
 * commands are judged by S1, not here).
 */
export function checkStaleReads(ops: readonly Op[]): Violation[] {
  const violations: Violation[] = [];
  const gone = ops.filter((o) => answered(o) && ((o.cmd === 'release' && o.index !== '*') || (o.cmd === 'location' && o.reply === 0)));
  for (const g of gone) {
    const client = g.owner!;
    const requests = ops.filter((o) => o.client === client && o.cmd === 'request' && o.key === g.key && o.index === g.index);
    const stale = ops.find(
      (o) => o.sent > g.replied! && namesOwner(o, client, g.key!, g.index!) && !requests.some((q) => q.sent < o.replied! && (q.sent > g.sent || !answered(q))),
    );
    if (stale !== undefined) {
      violations.push({
        check: 'stale-read',
        message: `stale read: ${client} left ${g.key}/${g.index} (${describeOp(g)}), yet a later command was told it owns it: ${describeOp(stale)}`,
        ops: [g.id, stale.id],
      });
    }
  }
  return violations;
}

/**
 * Expiry never early. A confirmed renewal sent at s keeps the entry until s + T at least: T is
 * the TTL for a 0x02 answered 1 (owner); otherwise (a 0x02 answered ≥ 2, a waiter, which may be
 * promoted and then runs on its TTL; or a 0x04 answered 1, phase unknown) the smaller non-zero
 * of TTL and TTW; 0 = forever. A reply received before
 * s + T to a command sent after the renewal's reply may not report the client absent (its 0x03
 * answering 0; a 0x07 of the key without it; and for an owner, 0x01 naming another or nobody,
 * or a 0x07 not flagging it), unless the client sent a release covering the entry before that
 * reply.
 */
export function checkEarlyExpiry(ops: readonly Op[]): Violation[] {
  const violations: Violation[] = [];
  for (const renewal of ops) {
    if (!confirmedRenewal(renewal, false)) continue;
    const client = renewal.client;
    const request =
      renewal.cmd === 'request'
        ? renewal
        : ops.filter((o) => o.client === client && o.cmd === 'request' && o.key === renewal.key && o.index === renewal.index && o.sent <= renewal.sent).at(-1);
    if (request === undefined) continue;
    const owner = renewal.cmd === 'request' && renewal.reply === 1;
    const t = owner ? forever(request.ttl) : Math.min(forever(request.ttl), forever(request.ttw));
    const until = renewal.sent + t;
    const [key, index] = [renewal.key!, renewal.index!];
    const absent = (o: Op): boolean => {
      if (!answered(o) || o.key !== key || o.sent < renewal.replied! || o.replied! >= until) return false;
      if (o.cmd === 'location') return o.index === index && o.owner === client && o.reply === 0;
      if (o.cmd === 'list') return owner ? listEntry(o, index, client)?.isOwner !== true : listEntry(o, index, client) === undefined;
      if (o.cmd === 'owner') return owner && o.index === index && o.reply !== client;
      return false;
    };
    const early = ops.find((o) => absent(o) && !ops.some((r) => releases(r, client, key, index) && r.sent > renewal.sent && r.sent < o.replied!));
    if (early !== undefined) {
      violations.push({
        check: 'early-expiry',
        message: `early expiry: ${client} renewed ${key}/${index} (${describeOp(renewal)}), good until ${until}, but ${describeOp(early)}`,
        ops: [renewal.id, early.id],
      });
    }
  }
  return violations;
}

/**
 * Nothing acknowledged lost: a grant confirmed with TTL 0 (0x02 answered 1) that its owner never
 * released must still be there in the final reads — the 0x01 and 0x07 commands sent at or after
 * `finalFrom` (once every fault was healed). An entry without a final read is not judged.
 */
export function checkLost(ops: readonly Op[], finalFrom: number): Violation[] {
  const violations: Violation[] = [];
  for (const grant of ops) {
    if (grant.cmd !== 'request' || grant.reply !== 1 || grant.ttl !== 0 || grant.owner !== grant.client) continue;
    const [client, key, index] = [grant.client, grant.key!, grant.index!];
    if (ops.some((o) => o.sent > grant.sent && releases(o, client, key, index))) continue;
    const finals = ops.filter((o) => o.sent >= finalFrom && answered(o) && o.key === key && (o.cmd === 'list' || (o.cmd === 'owner' && o.index === index)));
    const missing = finals.find((o) => !namesOwner(o, client, key, index));
    if (missing !== undefined) {
      violations.push({
        check: 'lost',
        message: `lost: ${describeOp(grant)} (TTL 0, never released), but after healing ${describeOp(missing)}`,
        ops: [grant.id, missing.id],
      });
    }
  }
  return violations;
}

/** A time window in which every node should keep serving (quorum intact, node not faulty). */
export interface ServiceWindow {
  readonly from: number;
  readonly to: number;
  readonly nodes: readonly string[];
  readonly label: string;
}

/**
 * Liveness during a fault that leaves the quorum and the node intact: at every moment t of the
 * window (up to its end minus the bound), the node answers some command sent at or after t
 * within `boundMs` of t. Checked at the window's start and just after each of the node's replies
 * (the moments that matter). A bounded wait, not a threshold on how fast: windows shorter than
 * the bound are not judged.
 */
export function checkAvailability(ops: readonly Op[], windows: readonly ServiceWindow[], boundMs: number): Violation[] {
  const violations: Violation[] = [];
  for (const w of windows) {
    for (const node of w.nodes) {
      const mine = ops.filter((o) => o.node === node && answered(o));
      const moments = [w.from, ...mine.map((o) => o.replied!).filter((r) => r > w.from)].filter((t) => t + boundMs <= w.to);
      const stuck = moments.find((t) => !mine.some((o) => o.sent >= t && o.replied! <= t + boundMs));
      if (stuck !== undefined) {
        violations.push({
          check: 'unavailable',
          message: `unavailable: node ${node} answered nothing sent in the ${boundMs} ms after ${Math.round(stuck)}, during ${w.label} (${Math.round(w.from)}–${Math.round(w.to)})`,
          ops: [],
        });
      }
    }
  }
  return violations;
}

/** Every check but availability (which needs the fault windows). */
export function checkHistory(ops: readonly Op[], finalFrom: number): Violation[] {
  return [...checkMutualExclusion(ops), ...checkStaleReads(ops), ...checkEarlyExpiry(ops), ...checkLost(ops, finalFrom)];
}

/**
 * The longest stretch in [from, to] during which `node` delivered no reply (measured figure,
 * never asserted): the gaps between the reply times of its answered commands, and the window's
 * ends.
 */
export function longestSilence(ops: readonly Op[], node: string, from: number, to: number): number {
  const times = ops
    .filter((o) => o.node === node && answered(o) && o.replied! >= from && o.replied! <= to)
    .map((o) => o.replied!)
    .sort((a, b) => a - b);
  let longest = 0;
  let last = from;
  for (const t of [...times, to]) {
    longest = Math.max(longest, t - last);
    last = t;
  }
  return longest;
}

/** How long after `at` the node first answered a command sent at or after `at` (undefined: never). */
export function firstServedAfter(ops: readonly Op[], node: string, at: number): number | undefined {
  const replies = ops.filter((o) => o.node === node && o.sent >= at && answered(o)).map((o) => o.replied! - at);
  return replies.length === 0 ? undefined : Math.min(...replies);
}
