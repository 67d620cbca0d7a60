import test, { type ExecutionContext } from 'ava';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { BatchEncoder, LogOp } from '../../../src/cluster/LogCodec.js';
import { newNonce } from '../../../src/cluster/peer/PeerAuth.js';
import { encodeHello, encodeProof, PEER_LINK_BYTE, PEER_LINK_VERSION } from '../../../src/cluster/peer/PeerCodec.js';
import { MAX_UNPROVEN_LINKS, PeerListener, type PeerListenerOptions, type PeerRefusal } from '../../../src/cluster/peer/PeerListener.js';
import { SequencerLink, type ForwarderIdentity } from '../../../src/cluster/peer/SequencerLink.js';
import { AppendRefusedError, type BundlePart, type LentLease, type LogPosition } from '../../../src/cluster/ReplicatedLog.js';
import { Sequencer, type BundleAppender } from '../../../src/cluster/Sequencer.js';
import { LocalLockService } from '../../../src/locks/LocalLockService.js';
import { systemClock } from '../../../src/runtime/Clock.js';
import { silentLogger, type Logger } from '../../../src/runtime/Logger.js';
import { realTimers } from '../../../src/runtime/Timers.js';
import { AllowList } from '../../../src/server/AllowList.js';
import { LockServer } from '../../../src/server/LockServer.js';
import { idleTimers } from '../../doubles/idleTimers.js';
import { bounded } from '../../helpers/bounded.js';

// A link between nodes over real loopback sockets, through a real lock server's port: a
// forwarding node's batch reaches the leader's sequencer with its lease, and each outcome comes
// back as an append's would; both ends prove themselves (issue 36), and neither a stranger, an
// impostor at the leader's address nor a flood of unproven links gets anything.

const SECRET = Buffer.alloc(32, 7);
const N2: ForwarderIdentity = { name: 'n2', fenceKey: Buffer.from('/c/fences/0123456789abcdef') };
const encoder = new BatchEncoder();
const batchOf = (proposer: string) => encoder.encode({ proposer, incarnation: 1, seq: 1, commands: [{ op: LogOp.ReleaseAll, owner: 'o' }] });
const batch = batchOf('n2');
const fence = (leftMs = 2_000): LentLease => ({ leaseId: '7587878471628371234', fenceKey: Buffer.alloc(0), endsAt: performance.now() + leftMs });

/** An appender that answers each bundle with what the test queued. */
class ScriptedAppender implements BundleAppender {
  readonly seen: BundlePart[][] = [];
  readonly answers: Array<() => Promise<LogPosition>> = [];
  appendBundle(parts: readonly BundlePart[]): Promise<LogPosition> {
    this.seen.push([...parts]);
    return (this.answers.shift() ?? (() => new Promise<LogPosition>(() => {})))();
  }
}

/** A logger that keeps the `peer-refused` lines. */
function refusalLog(): { logger: Logger; lines: Array<{ reason: PeerRefusal; suppressed?: number }> } {
  const lines: Array<{ reason: PeerRefusal; suppressed?: number }> = [];
  return {
    lines,
    logger: {
      event: (name, fields) => {
        if (name === 'peer-refused') lines.push({ reason: fields?.reason as PeerRefusal, suppressed: fields?.suppressed as number | undefined });
      },
      debug: undefined,
    },
  };
}

interface Leader {
  readonly port: number;
  readonly appender: ScriptedAppender;
  readonly listener: PeerListener;
  readonly server: LockServer;
}

/** Node `name`'s lock port on loopback, its links handed to a PeerListener in front of a sequencer. */
async function leader(t: ExecutionContext, options: Partial<PeerListenerOptions> & { name?: string; hosts?: string } = {}): Promise<Leader> {
  const appender = new ScriptedAppender();
  const sequencer = new Sequencer(appender, systemClock, realTimers, { gatherMs: 0, appendTimeoutMs: 2_000 });
  const listener = new PeerListener(sequencer, {
    name: options.name ?? 'n1',
    secret: options.secret ?? (() => SECRET),
    checkFenceKey: options.checkFenceKey ?? ((key) => (Buffer.from(key).toString().startsWith('/c/fences/') ? undefined : 'not a fence key of this cluster')),
    logger: options.logger ?? silentLogger,
    clock: systemClock,
    proofWaitMs: options.proofWaitMs,
  });
  const server = new LockServer({
    service: new LocalLockService(systemClock, idleTimers),
    allowList: AllowList.parse(options.hosts ?? '127.0.0.1\n', 'test hosts'),
    maxConnections: 1_000,
    frameTimeoutMs: 10_000,
    clock: systemClock,
    logger: silentLogger,
    adoptLink: (socket, buffered) => listener.adopt(socket, buffered),
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(async () => {
    listener.close();
    sequencer.close();
    await server.stopServing();
    server.closeConnections();
    await server.whenAllClosed(1_000);
  });
  return { port, appender, listener, server };
}

function link(
  t: ExecutionContext,
  to: Leader,
  options: { sequencer?: string; secret?: Buffer; identity?: ForwarderIdentity } = {},
): { link: SequencerLink; refusals: string[] } {
  const refusals: string[] = [];
  const l = new SequencerLink(
    options.sequencer ?? 'n1',
    { host: '127.0.0.1', port: to.port },
    options.identity ?? N2,
    () => options.secret ?? SECRET,
    (reason) => refusals.push(reason),
  );
  t.teardown(() => l.close());
  return { link: l, refusals };
}

/** Polls (bounded) until `done`. */
async function until(done: () => boolean, what: string): Promise<void> {
  await bounded(
    (async () => {
      while (!done()) await new Promise((r) => setTimeout(r, 5));
    })(),
    5_000,
    what,
  );
}

/** A raw connection to `port` that asks to be a link, then sends `after` (or nothing). */
async function rawLink(port: number, after?: Buffer): Promise<Socket> {
  const socket = connect({ port, host: '127.0.0.1' });
  socket.on('error', () => {});
  await once(socket, 'connect');
  socket.write(after === undefined ? Buffer.of(PEER_LINK_BYTE) : Buffer.concat([Buffer.of(PEER_LINK_BYTE), after]));
  socket.resume();
  return socket;
}

test('a forward reaches the sequencer with its batch, its lease and the fence key the link proved; each outcome comes back: committed, refused, lease gone, unknown', async (t) => {
  const l = await leader(t);
  const { link: n2 } = link(t, l);
  await until(() => n2.up, 'the link to come up');
  l.appender.answers.push(async () => ({ version: 42, revision: 420 }));
  t.deepEqual(await n2.forward(batch, fence(), 2_000), { version: 42, revision: 420 });
  const [part] = l.appender.seen[0]!;
  t.deepEqual(Buffer.from(part!.value), Buffer.from(batch));
  t.is(part!.lease.leaseId, '7587878471628371234');
  t.deepEqual(Buffer.from(part!.lease.fenceKey), Buffer.from(N2.fenceKey), 'the fence key named (and proved) in the handshake');
  t.true(part!.lease.endsAt <= performance.now() + 2_000, 'the lease is not taken to last longer than the node said');

  l.appender.answers.push(() => Promise.reject(new AppendRefusedError('etcdserver: no leader')));
  const refused = await t.throwsAsync(n2.forward(batch, fence(), 2_000), { instanceOf: AppendRefusedError });
  t.false(refused.leaseGone);
  l.appender.answers.push(() => Promise.reject(new AppendRefusedError('requested lease not found', true)));
  const gone = await t.throwsAsync(n2.forward(batch, fence(), 2_000), { instanceOf: AppendRefusedError });
  t.true(gone.leaseGone);
  l.appender.answers.push(() => Promise.reject(new Error('context deadline exceeded')));
  const unknown = await t.throwsAsync(n2.forward(batch, fence(), 2_000));
  t.false(unknown instanceof AppendRefusedError, 'may still commit: the node waits out its fence');
  const timedOut = await t.throwsAsync(n2.forward(batch, fence(), 200)); // the appender never answers
  t.false(timedOut instanceof AppendRefusedError, 'no outcome in time is an unknown outcome');
});

test('the link lost with a forward out is an unknown outcome; with no link a forward is refused unsent', async (t) => {
  const l = await leader(t);
  const { link: n2 } = link(t, l);
  await until(() => n2.up, 'the link to come up');
  const lost = n2.forward(batch, fence(), 5_000);
  lost.catch(() => {});
  await until(() => l.appender.seen.length === 1, 'the forward to reach the sequencer');
  l.listener.close();
  const error = await t.throwsAsync(lost);
  t.false(error instanceof AppendRefusedError);
  t.regex(error.message, /lost/);
  await t.throwsAsync(n2.forward(batch, fence(), 1_000), { instanceOf: AppendRefusedError, message: /no link/ });
});

test('a forward whose batch names another node (or does not decode) is never appended, and the link is dropped', async (t) => {
  const log = refusalLog();
  const l = await leader(t, { logger: log.logger });
  const { link: n2 } = link(t, l);
  await until(() => n2.up, 'the link to come up');
  await t.throwsAsync(n2.forward(batchOf('n3'), fence(), 2_000), { instanceOf: AppendRefusedError });
  await until(() => !n2.up, 'the link to be dropped');
  t.is(l.appender.seen.length, 0, 'nothing appended');
  t.deepEqual(
    log.lines.map((line) => line.reason),
    ['bad-forward'],
  );
});

test('an impostor on the leader’s address (it does not hold the secret) gets no batch: the forwarder does not forward to it', async (t) => {
  // Issue 36: a process that bound a dead leader's still-declared address received forwarded
  // batches and answered two of them "committed at version 10^12".
  const impostor = await leader(t, { secret: () => Buffer.alloc(32, 9) });
  const { link: n2, refusals } = link(t, impostor);
  await until(() => refusals.length > 0, 'the forwarder to refuse the impostor');
  t.false(n2.up);
  t.regex(refusals[0]!, /does not prove it holds the peer secret/);
  await t.throwsAsync(n2.forward(batch, fence(), 1_000), { instanceOf: AppendRefusedError, message: /no link/ });
  t.is(impostor.appender.seen.length, 0);
});

test('a node holding the secret but not the one taken to lead (a leader that moved on, say) is not forwarded to either', async (t) => {
  const other = await leader(t, { name: 'n3' });
  const { link: n2, refusals } = link(t, other, { sequencer: 'n1' });
  await until(() => refusals.length > 0, 'the forwarder to refuse it');
  t.false(n2.up);
  t.regex(refusals[0]!, /is n3's sequencer, not n1's/);
});

test('a forwarder without the secret gets no link (it cannot check the sequencer’s proof, nor make its own); a wrong proof is refused; every link is, while the sequencer has not read the secret', async (t) => {
  const log = refusalLog();
  let secret: Buffer | undefined;
  const l = await leader(t, { secret: () => secret, logger: log.logger });
  const early = await rawLink(l.port);
  await bounded(once(early, 'close'), 5_000, 'the link to be closed');
  secret = SECRET;
  const { link: wrong, refusals } = link(t, l, { secret: Buffer.alloc(32, 8) });
  await until(() => refusals.length > 0, 'the forwarder to give up on the link');
  t.false(wrong.up);
  // A forwarder that answers the challenge with a proof that does not hold.
  const socket = await rawLink(l.port, encodeHello({ version: PEER_LINK_VERSION, forwarder: 'n2', fenceKey: N2.fenceKey, nonce: newNonce() }));
  await new Promise((resolve) => socket.once('data', resolve)); // the challenge
  socket.write(encodeProof(Buffer.alloc(32, 1)));
  await bounded(once(socket, 'close'), 5_000, 'the wrong proof to be refused');
  t.deepEqual(
    log.lines.map((line) => line.reason),
    ['no-secret-yet', 'bad-proof'],
  );
  t.is(l.appender.seen.length, 0);
});

test('a hello naming a fence key that is not one of the cluster’s is refused', async (t) => {
  const log = refusalLog();
  const l = await leader(t, { logger: log.logger });
  const { link: n2 } = link(t, l, { identity: { name: 'n2', fenceKey: Buffer.from('/other/key') } });
  await until(() => log.lines.length === 1, 'the refusal');
  t.false(n2.up);
  t.deepEqual(log.lines, [{ reason: 'bad-frame', suppressed: undefined }]);
});

test('a link that does not prove itself in time is closed; past MAX_UNPROVEN_LINKS trying at once, the next is closed at once; what is not a frame is dropped', async (t) => {
  const log = refusalLog();
  const l = await leader(t, { logger: log.logger, proofWaitMs: 60_000 });
  const waiting: Socket[] = [];
  for (let i = 0; i < MAX_UNPROVEN_LINKS; i++) waiting.push(await rawLink(l.port));
  const tooMany = await rawLink(l.port);
  await bounded(once(tooMany, 'close'), 5_000, 'the link over the cap to be closed at once');
  t.is(l.listener.refused.get('too-many-unproven'), 1);
  for (const socket of waiting) socket.destroy();
  const garbage = await rawLink(l.port, Buffer.from([0xff, 0xff, 0xff, 0xff, 1]));
  await bounded(once(garbage, 'close'), 5_000, 'the garbage to be dropped');
  t.is(l.listener.refused.get('bad-frame'), 1);
  const slow = await leader(t, { proofWaitMs: 100 });
  const silent = await rawLink(slow.port, encodeHello({ version: PEER_LINK_VERSION, forwarder: 'n2', fenceKey: N2.fenceKey, nonce: newNonce() }));
  await bounded(once(silent, 'close'), 5_000, 'the silent link to be closed');
  t.is(slow.listener.refused.get('no-proof-in-time'), 1);
});

test('a flood of refused links logs one line per kind of refusal a minute, however their texts differ (issue 36: 3,000 lines in 5.4 s)', async (t) => {
  const log = refusalLog();
  const l = await leader(t, { logger: log.logger });
  for (let i = 0; i < 100; i++) {
    // Frames of every length: each refusal's text names it, its kind does not.
    const socket = await rawLink(l.port, Buffer.from([0x7f, 0xff, 0xff, i]));
    await bounded(once(socket, 'close'), 5_000, 'the refusal');
  }
  t.is(l.listener.refused.get('bad-frame'), 100);
  t.deepEqual(log.lines, [{ reason: 'bad-frame', suppressed: undefined }]);
});

test('a node the hosts file does not admit is refused at the lock port (greeting 00) and never links', async (t) => {
  const l = await leader(t, { hosts: '10.9.9.9\n' });
  const { link: n2, refusals } = link(t, l);
  await until(() => refusals.length > 0, 'the refusal');
  t.regex(refusals[0]!, /greeting 00/);
  t.false(n2.up);
});
