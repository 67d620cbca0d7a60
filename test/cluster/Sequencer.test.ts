import test from 'ava';
import { setImmediate as turn } from 'node:timers/promises';
import { BatchEncoder, LogOp, type LogCommand } from '../../src/cluster/LogCodec.js';
import { AppendRefusedError, MAX_APPEND_BYTES, type BundlePart, type LentLease, type LogPosition } from '../../src/cluster/ReplicatedLog.js';
import {
  ACTIVE_MS,
  BatchRefusedError,
  MAX_BUNDLE_PARTS,
  MAX_WAITING_PARTS,
  MIN_LEASE_LEFT_MS,
  Sequencer,
  type BundleAppender,
} from '../../src/cluster/Sequencer.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

const GATHER_MS = 5;
const encoder = new BatchEncoder();

/** An appender whose every call the test settles by hand. */
class HandAppender implements BundleAppender {
  readonly calls: Array<{ parts: readonly BundlePart[]; resolve: (p: LogPosition) => void; reject: (e: Error) => void }> = [];

  appendBundle(parts: readonly BundlePart[]): Promise<LogPosition> {
    return new Promise((resolve, reject) => this.calls.push({ parts, resolve, reject }));
  }

  /** The nodes (fence keys) of call `i`'s parts, in order. */
  nodes(i: number): string[] {
    return this.calls[i]!.parts.map((p) => Buffer.from(p.lease.fenceKey).toString());
  }
}

function setup() {
  const vt = new VirtualTimers(1_000);
  const appender = new HandAppender();
  /** Batches per append as the metrics hear of them. */
  const sent: number[] = [];
  const sequencer = new Sequencer(appender, vt, vt, { gatherMs: GATHER_MS, appendTimeoutMs: 2_000, onSend: (batches) => sent.push(batches) });
  const fence = (node: string, leftMs = 2_000): LentLease => ({ leaseId: '7', fenceKey: Buffer.from(node), endsAt: vt.now() + leftMs });
  const batch = (node: string, seq = 1, commands: readonly LogCommand[] = [{ op: LogOp.ReleaseAll, owner: 'o' }]) =>
    encoder.encode({ proposer: node, incarnation: 1, seq, commands });
  /** Submits a batch of `node` and keeps its outcome for the test to read. */
  const submit = (node: string, options: { seq?: number; leftMs?: number; value?: Uint8Array } = {}) => {
    const outcome: { position?: LogPosition; error?: Error } = {};
    sequencer.submit(options.value ?? batch(node, options.seq), fence(node, options.leftMs), node).then(
      (position) => (outcome.position = position),
      (error: unknown) => (outcome.error = error as Error),
    );
    return outcome;
  };
  return { vt, appender, sequencer, submit, batch, fence, sent };
}

const at = (version: number): LogPosition => ({ version, revision: version * 10 });

test('the first batch goes at once; the next append waits for a batch from every node heard from lately, then carries them all', async (t) => {
  const { vt, appender, submit, sent } = setup();
  submit('a');
  t.is(appender.calls.length, 1, 'nobody else is known: no wait');
  submit('b');
  submit('c');
  appender.calls[0]!.resolve(at(1));
  await turn();
  t.is(appender.calls.length, 1, 'b and c wait for a, active, to come back');
  await vt.advance(GATHER_MS);
  t.is(appender.calls.length, 2, 'a did not within the gather time');
  t.deepEqual(appender.nodes(1), ['b', 'c']);
  // While that append is out, b and c come back; a does too, later but within the gather time.
  submit('b', { seq: 2 });
  submit('c', { seq: 2 });
  appender.calls[1]!.resolve(at(2));
  await turn();
  t.is(appender.calls.length, 2, 'gathering: a has not sent yet');
  await vt.advance(GATHER_MS - 1);
  submit('a', { seq: 2 });
  t.is(appender.calls.length, 3, 'sent the moment every active node is in');
  t.deepEqual(appender.nodes(2), ['b', 'c', 'a']);
  t.deepEqual(sent, [1, 2, 3], 'each append told with its batches as it is sent');
});

test('a node that does not come back within the gather time is not waited for longer', async (t) => {
  const { vt, appender, submit } = setup();
  submit('a');
  submit('b');
  appender.calls[0]!.resolve(at(1));
  await vt.advance(GATHER_MS - 1);
  t.is(appender.calls.length, 1);
  await vt.advance(1);
  t.deepEqual(appender.nodes(1), ['b'], 'b waited the gather time for a, no more');
  submit('b', { seq: 2 });
  appender.calls[1]!.resolve(at(2));
  await vt.advance(GATHER_MS - 1);
  t.is(appender.calls.length, 2);
  await vt.advance(1);
  t.is(appender.calls.length, 3);
  t.deepEqual(appender.nodes(2), ['b']);
  // Once a has been silent for ACTIVE_MS it is no longer waited for at all.
  await vt.advance(ACTIVE_MS);
  submit('b', { seq: 3 });
  appender.calls[2]!.resolve(at(3));
  await turn();
  t.is(appender.calls.length, 4, 'no wait for a node silent this long');
});

test('a batch that finds the sequencer idle goes at once: there is nothing to gather, only latency to add', async (t) => {
  const { vt, appender, submit } = setup();
  submit('a');
  appender.calls[0]!.resolve(at(1));
  await turn();
  submit('b');
  t.is(appender.calls.length, 2, 'a is active, yet b does not wait for it');
  appender.calls[1]!.resolve(at(2));
  await turn();
  await vt.advance(1);
  submit('a', { seq: 2 });
  t.is(appender.calls.length, 3);
});

test('every part of a bundle gets its outcome: the position, the refusal, or the unknown outcome, the same for all', async (t) => {
  const { vt, appender, submit } = setup();
  const first = submit('a');
  const [b, c] = [submit('b'), submit('c')];
  appender.calls[0]!.resolve(at(1));
  await vt.advance(GATHER_MS);
  t.deepEqual(first.position, at(1));
  // Submitted while b and c's append is out: they gather after it.
  const [d, e] = [submit('b', { seq: 2 }), submit('c', { seq: 2 })];
  // b and c share an append that etcd refuses for a gone lease: neither committed.
  appender.calls[1]!.reject(new AppendRefusedError('requested lease not found', true));
  await turn();
  t.true(b.error instanceof AppendRefusedError && c.error instanceof AppendRefusedError);
  t.is(b.error, c.error);
  await vt.advance(GATHER_MS);
  t.is(appender.calls.length, 3);
  t.deepEqual(appender.nodes(2), ['b', 'c']);
  const unknown = new Error('deadline exceeded');
  appender.calls.at(-1)!.reject(unknown);
  await turn();
  t.is(d.error, unknown, 'may still commit: not a refusal');
  t.is(e.error, unknown);
});

test("a node's second batch (a retry) waits for the next bundle: one fence put per node and transaction", async (t) => {
  const { vt, appender, submit } = setup();
  submit('x');
  submit('a');
  submit('a', { seq: 1 });
  submit('b');
  appender.calls[0]!.resolve(at(1));
  await vt.advance(GATHER_MS);
  t.deepEqual(appender.nodes(1), ['a', 'b']);
  appender.calls[1]!.resolve(at(2));
  await vt.advance(GATHER_MS);
  t.deepEqual(appender.nodes(2), ['a']);
});

test('a batch whose lease is about to end is refused unsent (it would have the whole bundle refused); the others go', async (t) => {
  const { vt, appender, submit } = setup();
  submit('x');
  const short = submit('a', { leftMs: MIN_LEASE_LEFT_MS + 100 });
  const fine = submit('b');
  await vt.advance(150); // a's lease now has less than MIN_LEASE_LEFT_MS left
  appender.calls[0]!.resolve(at(1));
  await vt.advance(GATHER_MS);
  t.deepEqual(appender.nodes(1), ['b']);
  t.true(short.error instanceof AppendRefusedError);
  t.regex(short.error!.message, /ran short/);
  t.is(fine.error, undefined);
});

test('a bundle stays within one append: by bytes, and by parts (a version numbers 65,536 commands)', async (t) => {
  const { vt, appender, submit, batch } = setup();
  submit('x');
  // A batch of each of a, b, c, about half of what one append carries: two never fit one bundle.
  const longRelease = { op: LogOp.ReleaseAll, owner: 'o'.repeat(255) } as const;
  const big = (node: string) =>
    batch(
      node,
      1,
      Array.from({ length: Math.ceil(MAX_APPEND_BYTES / 2 / 257) }, () => longRelease),
    );
  for (const node of ['a', 'b', 'c']) submit(node, { value: big(node) });
  for (let i = 0; i < MAX_BUNDLE_PARTS + 2; i++) submit(`small${i}`);
  appender.calls[0]!.resolve(at(1));
  await vt.advance(GATHER_MS);
  t.deepEqual(appender.nodes(1).slice(0, 2), ['a', 'small0'], 'b would not fit after a: the small ones fill in');
  t.is(appender.nodes(1).length, MAX_BUNDLE_PARTS);
  const bytes = appender.calls[1]!.parts.reduce((sum, p) => sum + 4 + p.value.length, 4);
  t.true(bytes <= MAX_APPEND_BYTES);
});

test('what does not decode whole, a batch of more commands than a node may send, or one naming another node, is refused unsent', async (t) => {
  const { appender, submit, batch } = setup();
  const garbage = submit('a', { value: Buffer.from('hello') });
  const huge = submit('b', {
    value: batch(
      'b',
      1,
      Array.from({ length: 4_097 }, () => ({ op: LogOp.ReleaseAll, owner: 'o' }) as const),
    ),
  });
  // Issue 36: a forged batch of one command with a byte apply does not know (0xEE) was bundled,
  // committed, and stopped every node for good; and a batch that names another node as proposer
  // would be answered by that node from the commands it holds, while every other node applied these.
  const unknownCommand = Buffer.from(batch('c'));
  unknownCommand[unknownCommand.length - 3] = 0xee;
  const unknown = submit('c', { value: unknownCommand });
  const posing = submit('d', { value: batch('a') });
  await turn();
  for (const outcome of [garbage, huge, unknown, posing]) t.true(outcome.error instanceof BatchRefusedError, outcome.error?.message);
  t.regex(unknown.error!.message, /unknown command 238/);
  t.regex(posing.error!.message, /a batch of "a" from "d"/);
  t.is(appender.calls.length, 0);
});

test('closed or full, it refuses at once; closing refuses what waits, and an append out still settles', async (t) => {
  const { appender, sequencer, submit } = setup();
  const out = submit('a');
  const parts = Array.from({ length: MAX_WAITING_PARTS }, (_, i) => submit(`n${i}`));
  const over = submit('over');
  await turn();
  t.true(over.error instanceof AppendRefusedError);
  t.regex(over.error!.message, /full/);
  sequencer.close();
  await turn();
  t.true(parts.every((p) => p.error instanceof AppendRefusedError));
  appender.calls[0]!.resolve(at(1));
  await turn();
  t.deepEqual(out.position, at(1));
  const late = submit('b');
  await turn();
  t.true(late.error instanceof AppendRefusedError);
  t.is(appender.calls.length, 1);
});

test('until every live node reads bundles, each batch goes alone, without waiting to gather', async (t) => {
  const vt = new VirtualTimers(1_000);
  const appender = new HandAppender();
  let everyNodeReadsBundles = false;
  const sequencer = new Sequencer(appender, vt, vt, { gatherMs: GATHER_MS, appendTimeoutMs: 2_000, bundling: () => everyNodeReadsBundles });
  const fence = (node: string): LentLease => ({ leaseId: '7', fenceKey: Buffer.from(node), endsAt: vt.now() + 2_000 });
  const submit = (node: string) =>
    void sequencer.submit(encoder.encode({ proposer: node, incarnation: 1, seq: 1, commands: [] }), fence(node), node).catch(() => {});
  submit('a');
  submit('b');
  submit('c');
  appender.calls[0]!.resolve(at(1));
  await turn();
  t.deepEqual(appender.nodes(1), ['b'], 'no gathering, one batch');
  appender.calls[1]!.resolve(at(2));
  await turn();
  t.deepEqual(appender.nodes(2), ['c']);
  everyNodeReadsBundles = true;
  submit('a');
  submit('b');
  appender.calls[2]!.resolve(at(3));
  await vt.advance(GATHER_MS);
  t.deepEqual(appender.nodes(3), ['a', 'b']);
});
