import test from 'ava';
import { AppendRouter, SEQUENCER_REST_MS, type Appended, type LocalSequencer, type SequencerChannel } from '../../src/cluster/AppendRouter.js';
import { BatchEncoder, LogOp } from '../../src/cluster/LogCodec.js';
import { PEER_VIEW_EVERY_MS, PeerDeclarations, type PeerView } from '../../src/cluster/PeerDeclarations.js';
import { AppendRefusedError, type LentLease, type LogPosition } from '../../src/cluster/ReplicatedLog.js';
import { Sequencer } from '../../src/cluster/Sequencer.js';
import type { Logger } from '../../src/runtime/Logger.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { MemoryStore } from '../doubles/MemoryLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

// Each append attempt goes where the sequencer is (its own while this node leads, the leader's
// over a link, or etcd), with a writer lease lent by this node's log and returned with the
// attempt's outcome, so the attempt keeps append's promises whichever way it went. A forward's
// "committed" is the sequencer's word, returned unconfirmed for the committer to check.

const CALL_MS = 1_000;
const batch = (seq: number) => new BatchEncoder().encode({ proposer: 'n1', incarnation: 1, seq, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });

/** A channel that answers each forward as the test says, and counts them. */
class StubChannel implements SequencerChannel {
  up = true;
  forwards = 0;
  closed = false;
  constructor(private readonly answer: (fence: LentLease) => Promise<LogPosition>) {}
  forward(_value: Uint8Array, fence: LentLease): Promise<LogPosition> {
    this.forwards++;
    return this.answer(fence);
  }
  close(): void {
    this.closed = true;
  }
}

function setup(options: { local?: LocalSequencer; channel?: StubChannel } = {}) {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(5), latencyMs: [1, 1], lateCommitMs: 1_000 });
  const client = store.client('n1');
  const leadership: { isLeader: boolean; leader: string | undefined } = { isLeader: false, leader: undefined };
  const peers = new Map<string, string>();
  const dialled: string[] = [];
  const channels: StubChannel[] = [];
  /** Each attempt's route and outcome, as the metrics hear them; and the route changes logged. */
  const attempts: string[] = [];
  const events: string[] = [];
  const logger: Logger = {
    event: (name, fields) => events.push(`${name} ${String(fields?.via)} ${String(fields?.to)} (${String(fields?.why)})`),
    debug: undefined,
  };
  const router = new AppendRouter({
    name: 'n1',
    log: client,
    addresses: { known: true, addressOf: (node) => peers.get(node) },
    dial: (leader, address) => {
      dialled.push(`${leader}@${address}`);
      const channel = options.channel ?? new StubChannel(() => Promise.resolve({ version: 1, revision: 1 }));
      channels.push(channel);
      return channel;
    },
    local: options.local,
    clock: vt,
    timers: vt,
    logger,
    observer: { appendAttempted: (route, committed) => attempts.push(`${route} ${committed ? 'committed' : 'failed'}`) },
  });
  router.follow(leadership);
  return { vt, store, client, router, leadership, peers, dialled, channels, attempts, events };
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

test('direct: the batch commits, confirmed by the store, and the lease is used up', async (t) => {
  const { vt, store, client, router, attempts } = setup();
  t.deepEqual((await settle(vt, router.append(batch(1), CALL_MS))).value, { confirmed: true, position: { version: 1, revision: store.logHead.revision } });
  t.is(client.unexecutedAppends().size, 0, 'no lease left outstanding');
  t.deepEqual(attempts, ['direct committed']);
});

test('the leader sends through its own sequencer; the store confirms the position', async (t) => {
  const vt = new VirtualTimers();
  const store = new MemoryStore({ timers: vt, clock: vt, random: mulberry32(5), latencyMs: [1, 1], lateCommitMs: 1_000 });
  const client = store.client('n1');
  const attempts: string[] = [];
  const router = new AppendRouter({
    name: 'n1',
    log: client,
    addresses: { known: true, addressOf: () => undefined },
    dial: () => {
      throw new Error('not dialled');
    },
    local: new Sequencer(client, vt, vt, { gatherMs: 0, appendTimeoutMs: CALL_MS }),
    clock: vt,
    timers: vt,
    logger: { event: () => {}, debug: undefined },
    observer: { appendAttempted: (route, committed) => attempts.push(`${route} ${committed ? 'committed' : 'failed'}`) },
  });
  router.follow({ isLeader: true, leader: 'n1' });
  const out = await settle(vt, router.append(batch(1), CALL_MS));
  t.true(out.value?.confirmed);
  t.is(store.logHead.version, 1);
  t.is(client.unexecutedAppends().size, 0);
  t.deepEqual(attempts, ['own-sequencer committed']);
});

test("a forward's committed comes back unconfirmed; its lease is returned only once the committer settles it: held, used up; not held, it may still land and the route rests", async (t) => {
  const channel = new StubChannel(() => Promise.resolve({ version: 10 ** 12, revision: 10 ** 12 }));
  const { vt, client, router, leadership, peers, attempts } = setup({ channel });
  leadership.leader = 'n2';
  peers.set('n2', '10.0.0.2:7734');
  const out = await settle(vt, router.append(batch(1), CALL_MS));
  const claimed = out.value as Appended & { confirmed: false };
  t.false(claimed.confirmed, 'the sequencer’s word, not the store’s');
  t.deepEqual(claimed.position, { version: 10 ** 12, revision: 10 ** 12 });
  t.is(client.unexecutedAppends().size, 1, 'the lease is still out');
  claimed.settle(false);
  t.not([...client.unexecutedAppends()][0]?.failedAt, undefined, 'returned unsettled: it bounds a late landing as an unknown outcome does');
  // Refuted: the next attempts go direct for a while.
  t.true((await settle(vt, router.append(batch(2), CALL_MS))).value?.confirmed);
  t.is(channel.forwards, 1);
  await vt.advance(SEQUENCER_REST_MS);
  const again = (await settle(vt, router.append(batch(3), CALL_MS))).value as Appended & { confirmed: false };
  t.is(channel.forwards, 2);
  again.settle(true);
  t.deepEqual(attempts, ['forwarded committed', 'direct committed', 'forwarded committed']);
});

test('a forward with no known outcome returns its lease unsettled (it may still land, until the fence or a seal), and the next attempts go direct for a while', async (t) => {
  const channel = new StubChannel(() => Promise.reject(new Error('no outcome within 500 ms')));
  const { vt, store, client, router, leadership, peers, attempts } = setup({ channel });
  leadership.leader = 'n2';
  peers.set('n2', '10.0.0.2:7734');
  const first = await settle(vt, router.append(batch(1), CALL_MS));
  t.false(first.error instanceof AppendRefusedError);
  const [lease] = [...client.unexecutedAppends()];
  t.not(lease?.failedAt, undefined, 'the lent lease failed with the attempt: it bounds a late landing as an append would');
  t.true((await settle(vt, router.append(batch(2), CALL_MS))).value?.confirmed);
  t.is(channel.forwards, 1);
  await vt.advance(SEQUENCER_REST_MS);
  await settle(vt, router.append(batch(3), CALL_MS));
  t.is(channel.forwards, 2);
  t.is(store.logHead.version, 1);
  t.deepEqual(attempts, ['forwarded failed', 'direct committed', 'forwarded failed']);
});

test('a forward refused for a gone lease, or refused for good, settles its lease: nothing of it can land', async (t) => {
  for (const error of [new AppendRefusedError('requested lease not found', true), new AppendRefusedError('etcdserver: no leader')]) {
    const { vt, client, router, leadership, peers } = setup({ channel: new StubChannel(() => Promise.reject(error)) });
    leadership.leader = 'n2';
    peers.set('n2', '10.0.0.2:7734');
    const out = await settle(vt, router.append(batch(1), CALL_MS));
    t.is(out.error, error);
    t.is(client.unexecutedAppends().size, 0);
  }
});

test('the sequencer on this node that gives no outcome in time: unknown, its lease unsettled', async (t) => {
  const { vt, client, router, leadership } = setup({ local: { submit: () => new Promise<LogPosition>(() => {}) } });
  leadership.isLeader = true;
  const out = await settle(vt, router.append(batch(1), 300));
  t.regex(String(out.error), /no outcome/);
  t.false(out.error instanceof AppendRefusedError);
  t.not([...client.unexecutedAppends()][0]?.failedAt, undefined);
});

test('a follower forwards to the address the leader declared, one link per leader and address, dropped when the leader moves or has none', async (t) => {
  const { vt, router, leadership, peers, dialled, channels, events } = setup();
  leadership.leader = 'n1';
  peers.set('n1', '10.0.0.1:7734');
  peers.set('n3', '10.0.0.3:7734');
  await settle(vt, router.append(batch(1), CALL_MS));
  await settle(vt, router.append(batch(2), CALL_MS));
  t.deepEqual(dialled, ['n1@10.0.0.1:7734'], 'one link, kept');
  leadership.leader = 'n3';
  await settle(vt, router.append(batch(3), CALL_MS));
  t.deepEqual(dialled, ['n1@10.0.0.1:7734', 'n3@10.0.0.3:7734']);
  t.true(channels[0]!.closed, 'the old leader’s link closed');
  leadership.leader = 'n2';
  await settle(vt, router.append(batch(4), CALL_MS));
  t.true(channels[1]!.closed);
  t.deepEqual(events, [
    'append-route forwarded 10.0.0.1:7734 (leader n1)',
    'append-route forwarded 10.0.0.3:7734 (leader n3)',
    'append-route direct undefined (leader n2 declared no address)',
  ]);
});

test('the declarations are read again every PEER_VIEW_EVERY_MS; a failed read keeps the last view; close stops the reads', async (t) => {
  const vt = new VirtualTimers();
  let view: PeerView | Error = { peers: new Map(), readsBundles: false };
  const declarations = new PeerDeclarations({ peerView: () => (view instanceof Error ? Promise.reject(view) : Promise.resolve(view)) }, vt);
  t.false(declarations.known);
  t.false(declarations.readsBundles, 'not before a read says so');
  declarations.start();
  await vt.advance(0);
  t.true(declarations.known);
  view = { peers: new Map([['n1', '10.0.0.1:7734']]), readsBundles: true, secret: Buffer.alloc(32, 1) };
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.true(declarations.readsBundles);
  t.is(declarations.addressOf('n1'), '10.0.0.1:7734');
  t.deepEqual(declarations.secret, Buffer.alloc(32, 1));
  view = new Error('etcd unreachable');
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.true(declarations.readsBundles, 'kept');
  t.is(declarations.addressOf('n1'), '10.0.0.1:7734', 'kept');
  view = { peers: new Map([['n1', '10.0.0.1:7734']]), readsBundles: false };
  await vt.advance(PEER_VIEW_EVERY_MS);
  t.false(declarations.readsBundles, 'a node that does not read bundles joined');
  declarations.close();
  t.is(vt.pending, 0, 'no read scheduled after close');
});
