import test from 'ava';
import { LogOp, type Batch, type LogCommand } from '../../src/cluster/LogCodec.js';
import { ReplicaState, type Sliced } from '../../src/cluster/ReplicaState.js';
import { FakeClock } from '../doubles/FakeClock.js';

const LOCKS = 3_000;
const at = (version: number) => ({ version, revision: 10 * version + 3 });

function staged(key: string, owner: string, isOwner: boolean, first = false): LogCommand {
  return {
    op: LogOp.ImportStagedFenced,
    importId: 9,
    key,
    index: 'i',
    owner,
    ttl: 0,
    ttw: 0,
    priority: 0,
    isOwner,
    token: 0,
    highestToken: 0,
    remainingMs: 5_000,
    first,
  };
}

function request(key: string, owner: string, op: typeof LogOp.Request | typeof LogOp.AcquireWait = LogOp.Request): LogCommand {
  return { op, key, index: 'i', owner, ttl: 30, ttw: 60, priority: 0, allowCreate: true, maxEntries: 1_000_000 };
}

/** X owns LOCKS locks with a waiter W<n> behind each (an import), then X releases all, and W0 every lock under its key. */
function batches(): Batch[] {
  const file: LogCommand[] = [];
  for (let n = 0; n < LOCKS; n++) file.push(staged(`k${n}`, 'X', true, n === 0), staged(`k${n}`, `W${n}`, false));
  const commands: LogCommand[][] = [
    file,
    [{ op: LogOp.ImportCommit, importId: 9 }],
    [request('k1', 'X'), { op: LogOp.ReleaseAll, owner: 'X' }, request('k2', 'X'), { op: LogOp.ReleaseKey, key: 'k0', owner: 'W0' }],
  ];
  return commands.map((c, i) => ({ proposer: 'A', incarnation: 1, seq: i + 1, commands: c }));
}

/** A replica that records every grant (lock, owner, token) in the order it is made. */
function replica(): { state: ReplicaState; grants: string[] } {
  const state = new ReplicaState(new FakeClock(1_000));
  const grants: string[] = [];
  state.table.observe({
    granted: (entry) => grants.push(`${state.table.positionOfEntry(entry)}:${state.table.tokenOf(entry)}`),
    ended: () => {},
    moved: () => {},
  });
  return { state, grants };
}

/** Runs `work` slice by slice, checking between slices that nothing may see the state half-done; returns the slices. */
function slices<T>(t: { true(v: boolean): void; throws(f: () => unknown): unknown }, state: ReplicaState, work: Sliced<T>): { slices: number; value: T } {
  for (let n = 1; ; n++) {
    const slice = work.next();
    if (slice.done === true) return { slices: n, value: slice.value };
    t.true(state.applying);
    t.throws(() => state.encode());
  }
}

test('replicas applying in slices of different sizes end with the same digest, results and grants in the same order', (t) => {
  const small = replica();
  const large = replica();
  const whole = replica();
  const results: Array<{ small: unknown; large: unknown; whole: unknown }> = [];
  let smallSlices = 0;
  let largeSlices = 0;
  batches().forEach((batch, i) => {
    const a = slices(t, small.state, small.state.applyInSlices(batch, at(i + 1), undefined, undefined, 7));
    const b = slices(t, large.state, large.state.applyInSlices(batch, at(i + 1), undefined, undefined, 1_000));
    smallSlices += a.slices;
    largeSlices += b.slices;
    results.push({ small: a.value, large: b.value, whole: whole.state.apply(batch, at(i + 1)) });
  });
  for (const r of results) {
    t.deepEqual(r.small, r.whole);
    t.deepEqual(r.large, r.whole);
  }
  t.deepEqual(results[2]!.whole, [1, LOCKS, 2, 1]);
  t.true(smallSlices > (2 * LOCKS) / 7, `${smallSlices} slices of 7`);
  t.true(largeSlices < smallSlices && largeSlices > 3, `${largeSlices} slices of 1,000`);
  t.false(small.state.applying);
  t.is(small.state.digest(), whole.state.digest());
  t.is(large.state.digest(), whole.state.digest());
  t.is(small.grants.length, whole.grants.length);
  t.deepEqual(small.grants, whole.grants);
  t.deepEqual(large.grants, whole.grants);
});

test('a snapshot decoded in slices is the same state as one decoded at once', (t) => {
  const { state } = replica();
  batches().forEach((batch, i) => state.apply(batch, at(i + 1)));
  const bytes = state.encode();
  const work = ReplicaState.decodeInSlices(bytes, new FakeClock(5), undefined, 100);
  let n = 0;
  let step = work.next();
  for (; step.done !== true; step = work.next()) n++;
  t.true(n >= Math.floor(state.table.size / 100) - 1, `${n} slices`);
  t.is(step.value.digest(), ReplicaState.decode(bytes, new FakeClock(5)).digest());
  t.is(step.value.digest(), state.digest());
});

test("the end of a dead incarnation's waits goes in slices too, to the same state; drain counts follow", (t) => {
  const tied = 500;
  const commands = (): Batch[] => [
    { proposer: 'A', incarnation: 1, seq: 1, commands: Array.from({ length: tied }, (_, n) => request(`k${n}`, 'X')) },
    {
      proposer: 'B',
      incarnation: 7,
      seq: 1,
      commands: Array.from({ length: tied }, (_, n) => request(`k${n}`, `W${n}`, LogOp.AcquireWait)),
    },
    { proposer: 'A', incarnation: 1, seq: 2, commands: [{ op: LogOp.CancelWaitsOf, node: 'B', incarnation: 7 }] },
  ];
  const sliced = replica();
  const whole = replica();
  let last: { slices: number; value: unknown } | undefined;
  commands().forEach((batch, i) => {
    if (i === 2) t.deepEqual(sliced.state.countsFrom('B'), { owners: 0, waiters: tied });
    last = slices(t, sliced.state, sliced.state.applyInSlices(batch, at(i + 1), undefined, undefined, 7));
    whole.state.apply(batch, at(i + 1));
  });
  t.deepEqual(last!.value, [tied]);
  t.true(last!.slices > tied / 7, `${last!.slices} slices of 7`);
  t.deepEqual(sliced.state.countsFrom('B'), { owners: 0, waiters: 0 });
  t.deepEqual(sliced.state.countsFrom('A'), { owners: tied, waiters: 0 });
  t.is(sliced.state.digest(), whole.state.digest());
});

test('a snapshot encoded in slices is the bytes of one encoded at once, and nothing applies in between', (t) => {
  const { state } = replica();
  batches().forEach((batch, i) => state.apply(batch, at(i + 1)));
  const whole = state.encode();
  const work = state.encodeInSlices(100);
  let n = 0;
  let step = work.next();
  for (; step.done !== true; step = work.next()) {
    n++;
    t.true(state.applying);
    t.throws(() => state.apply({ proposer: 'A', incarnation: 1, seq: 99, commands: [] }, at(4)));
  }
  t.true(n >= Math.floor(state.table.size / 100), `${n} slices`);
  t.false(state.applying);
  t.deepEqual(step.value, whole);
});
