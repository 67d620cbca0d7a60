import test from 'ava';
import { AppendRouter, type SequencerChannel } from '../../src/cluster/AppendRouter.js';
import { TICK_MS } from '../../src/cluster/ClusterOptions.js';
import { Committer } from '../../src/cluster/Committer.js';
import { decodeValue, LogOp } from '../../src/cluster/LogCodec.js';
import { AppendRefusedError, type LentLease, type LogPosition, type ReplicatedLog } from '../../src/cluster/ReplicatedLog.js';
import { StoreContact } from '../../src/cluster/StoreContact.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore, type MemoryLog } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// A forward whose outcome is unknown keeps its fence, whichever way the round goes on: the
// router returns its lent lease unsettled, so the committer's seal stops it. Here the leader's
// sequencer holds each forwarded batch and appends it late, after n1's direct retries were refused
// and n1 gave the round up: that late append must find its lease revoked by the seal, and the
// round must not have been given up before the seal was confirmed.

const COMMIT_TIMEOUT_MS = 2_000;
const LATE_COMMIT_MS = 3_000;

/**
 * `client` as etcd treats a lent writer lease returned 'settled': nothing is done to it, and it lives
 * out its TTL (WriterLeases), long enough for a held forward to land. The in-memory etcd takes a
 * settled fence as used up, which would refuse the late append whatever the router returned.
 */
function settledLeasesLive(client: MemoryLog): ReplicatedLog {
  return new Proxy(client, {
    get(target, name) {
      if (name === 'leaseReturned') {
        return (lease: LentLease, outcome: 'settled' | 'lease-gone' | 'unsettled') => {
          if (outcome !== 'settled') target.leaseReturned(lease, outcome);
        };
      }
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

/** The leader's end of n1's link: keeps what it is given and answers nothing but "link lost". */
class HoardingChannel implements SequencerChannel {
  readonly up = true;
  readonly held: Array<{ value: Uint8Array; lease: LentLease }> = [];
  constructor(private readonly vt: VirtualTimers) {}
  forward(value: Uint8Array, lease: LentLease): Promise<LogPosition> {
    this.held.push({ value, lease });
    return new Promise((_, reject) => this.vt.after(100, () => reject(new Error('link to the sequencer lost'))));
  }
  close(): void {}
}

test('a forward with an unknown outcome landing late, after direct retries and a give-up, finds its lease revoked by the seal that came before the give-up', async (t) => {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(11), latencyMs: [1, 1], lateCommitMs: LATE_COMMIT_MS });
  const n1 = settledLeasesLive(store.client('n1'));
  const sequencerNode = store.client('n2');
  const channel = new HoardingChannel(vt);
  const events: string[] = [];
  const logger = {
    event: (name: string, fields?: Record<string, unknown>) => void events.push(`${vt.now()} ${name} sealed=${String(fields?.sealed)}`),
    debug: undefined,
  };
  const router = new AppendRouter({
    name: 'n1',
    log: n1,
    addresses: { known: true, addressOf: (node) => (node === 'n2' ? '127.0.0.1:1' : undefined) },
    dial: () => channel,
    local: undefined,
    clock: vt,
    timers: vt,
    logger: { event: () => {}, debug: undefined },
  });
  router.follow({ isLeader: false, leader: 'n2' });
  const committer = new Committer(
    { nodeName: 'n1', incarnation: 1 },
    COMMIT_TIMEOUT_MS,
    { log: n1, router, clock: vt, timers: vt, random: mulberry32(1), logger },
    new StoreContact(),
  );
  vt.every(TICK_MS, () => committer.tick(vt.now()));

  // Every direct attempt (the router rests the sequencer after the lost forward) is refused.
  store.faults.appendRejected = 1;
  let givenUpAt: number | undefined;
  committer.submit({ op: LogOp.Release, key: 'k', index: 'i', owner: 'x' }, { resolve: () => t.fail('answered'), reject: () => (givenUpAt = vt.now()) });
  await vt.until(COMMIT_TIMEOUT_MS + LATE_COMMIT_MS + 1_000, () => givenUpAt !== undefined);
  t.true(channel.held.length >= 1, 'forwarded; the retries after it went direct while the route rested');
  t.not(givenUpAt, undefined, 'given up');
  t.true(givenUpAt! < LATE_COMMIT_MS, `given up at ${givenUpAt} ms on a confirmed seal, not at the time fence`);
  t.deepEqual(
    events.map((e) => e.split(' ').slice(1).join(' ')),
    ['commit-timeout sealed=true'],
    'given up only once the seal was confirmed',
  );

  // The sequencer appends what it held, late: refused, its lease revoked by that seal.
  store.faults.appendRejected = 0;
  for (const held of channel.held) {
    let late: unknown;
    sequencerNode.appendBundle([{ value: held.value, lease: held.lease }], 1_000).then(
      (position) => (late = position),
      (error: unknown) => (late = error),
    );
    await vt.until(2_000, () => late !== undefined);
    t.true(late instanceof AppendRefusedError, `the late forward was not refused: ${JSON.stringify(late)}`);
  }
  t.false(
    store.logHistory.some((r) => decodeValue(r.value).some((part) => 'proposer' in part && part.proposer === 'n1')),
    'no batch of n1 in the log after it gave the round up',
  );
});
