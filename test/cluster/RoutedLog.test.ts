import test from 'ava';
import type { AppendRouteKind } from '../../src/cluster/ClusterOptions.js';
import { AppendRefusedError, type LentFence, type LogPosition } from '../../src/cluster/ReplicatedLog.js';
import { SEQUENCER_REST_MS, RoutedLog, type AppendRoute, type SequencerChannel } from '../../src/cluster/RoutedLog.js';
import { BatchEncoder, LogOp } from '../../src/cluster/LogCodec.js';
import { Sequencer } from '../../src/cluster/Sequencer.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// Each append attempt goes where the sequencer is, with a fence lent by this node's log and
// returned with the attempt's outcome, so the attempt keeps append's promises whichever way it went.

const CALL_MS = 1_000;
const batch = (seq: number) => new BatchEncoder().encode({ proposer: 'n1', incarnation: 1, seq, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });

function setup() {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(5), latencyMs: [1, 1], lateCommitMs: 1_000 });
  const client = store.client('n1');
  let route: AppendRoute = { kind: 'direct' };
  /** Each attempt's route and outcome, as the metrics hear them. */
  const attempts: string[] = [];
  const observer = { appendAttempted: (kind: AppendRouteKind, committed: boolean) => attempts.push(`${kind} ${committed ? 'committed' : 'failed'}`) };
  const log = new RoutedLog(client, { route: () => route, close: () => {} }, vt, vt, observer);
  return { vt, store, client, log, attempts, setRoute: (r: AppendRoute) => (route = r) };
}

/** A channel that answers each forward as the test says, and counts them. */
class StubChannel implements SequencerChannel {
  up = true;
  forwards = 0;
  constructor(private readonly answer: (fence: LentFence) => Promise<LogPosition>) {}
  forward(_value: Uint8Array, fence: LentFence): Promise<LogPosition> {
    this.forwards++;
    return this.answer(fence);
  }
}

async function settle<T>(vt: VirtualTimers, promise: Promise<T>): Promise<{ value?: T; error?: unknown }> {
  const out: { value?: T; error?: unknown; done?: boolean } = {};
  promise.then(
    (value) => Object.assign(out, { value, done: true }),
    (error: unknown) => Object.assign(out, { error, done: true }),
  );
  await vt.until(5_000, () => out.done === true);
  return out;
}

test('direct, or through the sequencer on this node: the batch commits and the fence is used up', async (t) => {
  const { vt, store, client, log, attempts, setRoute } = setup();
  t.deepEqual((await settle(vt, log.append(batch(1), CALL_MS))).value?.version, 1);
  setRoute({ kind: 'here', sequencer: new Sequencer(client, vt, vt, { gatherMs: 0, appendTimeoutMs: CALL_MS }) });
  t.deepEqual((await settle(vt, log.append(batch(2), CALL_MS))).value?.version, 2);
  t.is(store.logHead.version, 2);
  t.is(client.unexecutedAppends().size, 0, 'no fence left outstanding');
  t.deepEqual(attempts, ['direct committed', 'own-sequencer committed']);
});

test('a forward with no known outcome returns its fence unsettled (it may still land, until the fence or a seal), and the next attempts go direct for a while', async (t) => {
  const { vt, store, client, log, attempts, setRoute } = setup();
  const channel = new StubChannel(() => Promise.reject(new Error('no outcome within 500 ms')));
  setRoute({ kind: 'forward', channel });
  const first = await settle(vt, log.append(batch(1), CALL_MS));
  t.false(first.error instanceof AppendRefusedError);
  const [fence] = [...client.unexecutedAppends()];
  t.not(fence?.failedAt, undefined, 'the lent fence failed with the attempt: it bounds a late landing as an append would');
  // Within SEQUENCER_REST_MS the node appends itself; after it, it forwards again.
  t.is((await settle(vt, log.append(batch(2), CALL_MS))).value?.version, 1);
  t.is(channel.forwards, 1);
  await vt.advance(SEQUENCER_REST_MS);
  await settle(vt, log.append(batch(3), CALL_MS));
  t.is(channel.forwards, 2);
  t.is(store.logHead.version, 1);
  t.deepEqual(attempts, ['forwarded failed', 'direct committed', 'forwarded failed']);
});

test('a forward refused for a gone lease, or refused for good, settles its fence: nothing of it can land', async (t) => {
  for (const error of [new AppendRefusedError('requested lease not found', true), new AppendRefusedError('etcdserver: no leader')]) {
    const { vt, client, log, setRoute } = setup();
    setRoute({ kind: 'forward', channel: new StubChannel(() => Promise.reject(error)) });
    const out = await settle(vt, log.append(batch(1), CALL_MS));
    t.is(out.error, error);
    t.is(client.unexecutedAppends().size, 0);
  }
});

test('the sequencer on this node that gives no outcome in time: unknown, its fence unsettled', async (t) => {
  const { vt, client, log, setRoute } = setup();
  setRoute({ kind: 'here', sequencer: { submit: () => new Promise<LogPosition>(() => {}) } });
  const out = await settle(vt, log.append(batch(1), 300));
  t.regex(String(out.error), /no outcome/);
  t.false(out.error instanceof AppendRefusedError);
  t.not([...client.unexecutedAppends()][0]?.failedAt, undefined);
});
