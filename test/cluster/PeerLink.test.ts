import test from 'ava';
import { once } from 'node:events';
import { performance } from 'node:perf_hooks';
import { BatchEncoder, LogOp } from '../../src/cluster/LogCodec.js';
import type { PeerAddress } from '../../src/cluster/PeerAddress.js';
import { SequencerLink, SequencerListener, type ListenerOptions } from '../../src/cluster/PeerLink.js';
import { AppendRefusedError, type BundlePart, type LentFence, type LogPosition } from '../../src/cluster/ReplicatedLog.js';
import { Sequencer, type BundleAppender } from '../../src/cluster/Sequencer.js';
import { systemClock } from '../../src/runtime/Clock.js';
import { realTimers } from '../../src/runtime/Timers.js';
import { bounded } from '../helpers/bounded.js';

// The link over real loopback sockets: a node's forward reaches the sequencer with its fence,
// and each outcome comes back as the same kind of answer an append gives.

const batch = new BatchEncoder().encode({ proposer: 'n2', incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });
const fence = (leftMs = 2_000): LentFence => ({ leaseId: '694d7c4f8a1b2c3d', fenceKey: Buffer.from('/c/fences/n2'), endsAt: performance.now() + leftMs });

/** An appender that answers each bundle with what the test queued. */
class ScriptedAppender implements BundleAppender {
  readonly seen: BundlePart[][] = [];
  readonly answers: Array<() => Promise<LogPosition>> = [];
  appendBundle(parts: readonly BundlePart[]): Promise<LogPosition> {
    this.seen.push([...parts]);
    return (this.answers.shift() ?? (() => new Promise<LogPosition>(() => {})))();
  }
}

const SECRET = Buffer.alloc(32, 7);

/** Listener options admitting every address, with SECRET, every fence taken as the cluster's. */
function admitting(): ListenerOptions {
  return { admits: () => true, secret: () => SECRET, address: (port) => `127.0.0.1:${port}`, checkFence: () => undefined };
}

/** Where a link dials `listener` (as admitting() declares it). */
function at(listener: SequencerListener): PeerAddress {
  return { host: '127.0.0.1', port: listener.port };
}

/** Resolves once `refused` holds `count` reasons (bounded). */
function untilRefused(refused: readonly string[], count: number): Promise<void> {
  return bounded(
    (async () => {
      while (refused.length < count) await new Promise((r) => setTimeout(r, 5));
    })(),
    5_000,
    `${count} refusals`,
  );
}

/** A listener on a free loopback port, closed at the test's end. */
async function listening(t: { teardown(f: () => void): void }, options: ListenerOptions): Promise<SequencerListener> {
  const listener = new SequencerListener(options);
  await listener.listen(0, '127.0.0.1');
  t.teardown(() => listener.close());
  return listener;
}

/** Connects to `listener` and resolves once it closed the connection (bounded). */
async function closedAtOnce(listener: SequencerListener): Promise<void> {
  const { connect } = await import('node:net');
  const socket = connect({ port: listener.port, host: '127.0.0.1' });
  socket.on('error', () => {});
  socket.resume(); // whatever comes (a challenge) is read and dropped, so the close is seen
  await bounded(once(socket, 'close'), 5_000, 'the listener to close the connection');
}

/** Resolves once the link is connected (bounded). */
function untilUp(link: SequencerLink): Promise<void> {
  return bounded(
    (async () => {
      while (!link.up) await new Promise((r) => setTimeout(r, 5));
    })(),
    5_000,
    'the link to come up',
  );
}

async function linked(t: { teardown(f: () => void): void }, options: ListenerOptions = admitting()) {
  const appender = new ScriptedAppender();
  const sequencer = new Sequencer(appender, systemClock, realTimers, { gatherMs: 0, appendTimeoutMs: 2_000 });
  const listener = new SequencerListener(options);
  await listener.listen(0, '127.0.0.1');
  listener.serve(sequencer);
  const link = new SequencerLink(at(listener), () => SECRET);
  t.teardown(() => {
    link.close();
    listener.close();
    sequencer.close();
  });
  await untilUp(link);
  return { appender, link, listener };
}

test('a forward reaches the sequencer with its batch and fence, and its outcome comes back: committed, refused, lease gone, unknown', async (t) => {
  const { appender, link } = await linked(t);
  appender.answers.push(async () => ({ version: 42, revision: 420 }));
  t.deepEqual(await link.forward(batch, fence(), 2_000), { version: 42, revision: 420 });
  const [part] = appender.seen[0]!;
  t.deepEqual(Buffer.from(part!.value), Buffer.from(batch));
  t.is(part!.fence.leaseId, '694d7c4f8a1b2c3d');
  t.deepEqual(Buffer.from(part!.fence.fenceKey), Buffer.from('/c/fences/n2'));
  t.true(part!.fence.endsAt <= performance.now() + 2_000, 'the lease is not taken to last longer than the node said');

  appender.answers.push(() => Promise.reject(new AppendRefusedError('etcdserver: no leader')));
  const refused = await t.throwsAsync(link.forward(batch, fence(), 2_000), { instanceOf: AppendRefusedError });
  t.false(refused.leaseGone);
  appender.answers.push(() => Promise.reject(new AppendRefusedError('requested lease not found', true)));
  const gone = await t.throwsAsync(link.forward(batch, fence(), 2_000), { instanceOf: AppendRefusedError });
  t.true(gone.leaseGone);
  appender.answers.push(() => Promise.reject(new Error('context deadline exceeded')));
  const unknown = await t.throwsAsync(link.forward(batch, fence(), 2_000));
  t.false(unknown instanceof AppendRefusedError, 'may still commit: the node waits out its fence');
  // A lease about to end at the sequencer is never sent.
  const short = await t.throwsAsync(link.forward(batch, fence(100), 2_000), { instanceOf: AppendRefusedError });
  t.regex(short.message, /refused by the sequencer/);
});

test('no outcome in time is an unknown outcome', async (t) => {
  const { link } = await linked(t);
  const timedOut = await t.throwsAsync(link.forward(batch, fence(), 200)); // the appender never answers
  t.false(timedOut instanceof AppendRefusedError);
});

test('the link lost with a forward out is an unknown outcome; with no link a forward is refused unsent', async (t) => {
  const { appender, link, listener } = await linked(t);
  const lost = link.forward(batch, fence(), 5_000);
  lost.catch(() => {});
  await bounded(
    (async () => {
      while (appender.seen.length < 1) await new Promise((r) => setTimeout(r, 5));
    })(),
    5_000,
    'the forward to reach the sequencer',
  );
  listener.close();
  const error = await t.throwsAsync(lost);
  t.false(error instanceof AppendRefusedError);
  t.regex(error.message, /lost/);
  await t.throwsAsync(link.forward(batch, fence(), 1_000), { instanceOf: AppendRefusedError, message: /no link/ });
});

test('a peer that sends what is not a frame is dropped', async (t) => {
  const { listener } = await linked(t);
  const { connect } = await import('node:net');
  const socket = connect({ port: listener.port, host: '127.0.0.1' });
  await once(socket, 'connect');
  socket.resume(); // the challenge is read and dropped
  socket.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 1]));
  await bounded(once(socket, 'close'), 5_000, 'the sequencer to drop the peer');
  t.pass();
});

test('a connection from an address the hosts file does not allow is closed at once, and said so', async (t) => {
  const refused: Array<string | undefined> = [];
  const listener = await listening(t, { ...admitting(), admits: () => false, onRefused: (address) => refused.push(address) });
  await closedAtOnce(listener);
  t.deepEqual(refused, ['127.0.0.1']);
});

test('before it serves a sequencer, the listener refuses each forward (its node appends it itself)', async (t) => {
  const listener = new SequencerListener(admitting());
  await listener.listen(0, '127.0.0.1');
  const link = new SequencerLink(at(listener), () => SECRET);
  t.teardown(() => {
    link.close();
    listener.close();
  });
  await untilUp(link);
  await t.throwsAsync(link.forward(batch, fence(), 2_000), { instanceOf: AppendRefusedError, message: /refused by the sequencer/ });
});

test('a node that does not know the cluster’s peer secret is refused before it can forward anything; so is every node while the sequencer has not read it', async (t) => {
  const refused: string[] = [];
  let secret: Buffer | undefined;
  const listener = await listening(t, { ...admitting(), secret: () => secret, onRefused: (_address, reason) => refused.push(reason) });
  await closedAtOnce(listener); // not read yet: refused at once
  secret = SECRET;
  // A wrong secret: the proof fails, the connection is closed, nothing was sent.
  const wrong = new SequencerLink(at(listener), () => Buffer.alloc(32, 8));
  t.teardown(() => wrong.close());
  await untilRefused(refused, 2);
  t.deepEqual(refused, ['peer secret not read from etcd yet', 'a wrong proof of the peer secret']);
  await t.throwsAsync(wrong.forward(batch, fence(), 1_000), { instanceOf: AppendRefusedError, message: /no link/ });
});

test('a forward whose fence is not one of the cluster’s is refused unsent', async (t) => {
  const { appender, link } = await linked(t, { ...admitting(), checkFence: (leaseId) => (leaseId === '0' ? 'no lease' : undefined) });
  await t.throwsAsync(link.forward(batch, { ...fence(), leaseId: '0' }, 2_000), { instanceOf: AppendRefusedError, message: /refused by the sequencer/ });
  t.is(appender.seen.length, 0, 'nothing appended');
});

test('a connection that does not prove the secret in time is closed, and said so', async (t) => {
  const refused: string[] = [];
  const listener = await listening(t, { ...admitting(), proofWaitMs: 100, onRefused: (_address, reason) => refused.push(reason) });
  await closedAtOnce(listener); // connects and sends nothing
  t.deepEqual(refused, ['no proof of the peer secret within 100 ms']);
});

test('a proof names the address the sequencer is declared at: one made for another address is refused (a relayed proof is worthless)', async (t) => {
  const refused: string[] = [];
  // Declared at 127.0.0.2: the link below dials it as 127.0.0.1 and so proves for that address.
  const listener = await listening(t, { ...admitting(), address: (port) => `127.0.0.2:${port}`, onRefused: (_address, reason) => refused.push(reason) });
  const link = new SequencerLink(at(listener), () => SECRET);
  t.teardown(() => link.close());
  await untilRefused(refused, 1);
  t.deepEqual(refused, ['a wrong proof of the peer secret']);
  t.false(link.up);
});
