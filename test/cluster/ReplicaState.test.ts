import test from 'ava';
import {
  commandPosition,
  LogFormatError,
  LogOp,
  writeImportStaged,
  type Batch,
  type ImportStagedCommand,
  type LogCommand,
} from '../../src/cluster/LogCodec.js';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { mulberry32, type Random } from '../../src/runtime/Random.js';
import { LogGapError, ReplicaState } from '../../src/cluster/ReplicaState.js';
import { FakeClock } from '../doubles/FakeClock.js';

const int = (random: Random, below: number): number => Math.floor(random() * below);
const pick = <T>(random: Random, items: readonly T[]): T => items[int(random, items.length)]!;

function request(
  key: string,
  index: string,
  owner: string,
  fields: Partial<Omit<Extract<LogCommand, { op: 1 }>, 'op'>> & { op?: typeof LogOp.Request | typeof LogOp.AcquireWait } = {},
): LogCommand {
  return { op: LogOp.Request, key, index, owner, ttl: 30, ttw: 60, priority: 0, allowCreate: true, maxEntries: 1_000, ...fields };
}

const at = (version: number) => ({ version, revision: 10 * version + 3 });

/** Feeds batches at consecutive versions, each proposer's seq counting up unless told. */
class Feed {
  version = 0;
  private readonly seqs = new Map<string, number>();

  batch(proposer: string, commands: readonly LogCommand[], incarnation = 1, seq?: number): Batch {
    const id = `${proposer}/${incarnation}`;
    const next = seq ?? (this.seqs.get(id) ?? 0) + 1;
    this.seqs.set(id, Math.max(next, this.seqs.get(id) ?? 0));
    return { proposer, incarnation, seq: next, commands };
  }

  apply(state: ReplicaState, batch: Batch): number[] | undefined {
    return state.apply(batch, at(++this.version));
  }
}

const KEYS = ['k0', 'k1', '\x00\xff'];
const INDEXES = ['i0', ''];
const OWNERS = ['o0', 'o1', 'o2', '\xfe'];
const NODES = ['A', 'B', 'C'];

/** A random batch on a small key space, so that commands meet: promotions, stale expiries, renewals. */
function randomBatch(random: Random, view: ReplicaState, seqs: Map<string, number>): Batch {
  const proposer = pick(random, NODES);
  const incarnation = 1 + int(random, 2);
  const id = `${proposer}/${incarnation}`;
  const last = seqs.get(id) ?? 0;
  // now and then a retried copy of a batch already applied
  const seq = last > 0 && random() < 0.1 ? last - int(random, Math.min(last, 2)) : last + 1;
  seqs.set(id, Math.max(seq, last));
  const entries = [...view.table.replicaEntries()];
  const commands: LogCommand[] = [];
  for (let n = int(random, 7); n > 0; n--) {
    const key = pick(random, KEYS);
    const index = pick(random, INDEXES);
    const owner = pick(random, OWNERS);
    const roll = random();
    if (roll < 0.55) {
      commands.push(
        request(key, index, owner, {
          // One owner asks through 0x0B: a waiting entry it leaves is tied to the batch's incarnation
          // (chosen without a draw, so the other tests' random streams stay as they were).
          op: owner === 'o1' ? LogOp.AcquireWait : LogOp.Request,
          ttl: int(random, 3),
          ttw: int(random, 3),
          priority: int(random, 3),
          allowCreate: random() < 0.9,
          maxEntries: 4 + int(random, 20),
        }),
      );
    } else if (roll < 0.62) commands.push({ op: LogOp.Renew, key, index, owner });
    else if (roll < 0.7) commands.push({ op: LogOp.Release, key, index, owner });
    else if (roll < 0.73) commands.push({ op: LogOp.ReleaseKey, key, owner });
    else if (roll < 0.75) commands.push({ op: LogOp.ReleaseAll, owner });
    else if (roll < 0.78) {
      // Now and then the end of an incarnation's waits (a node died or restarted; no draw, as above).
      if (key === 'k1' && index === '') commands.push({ op: LogOp.CancelWaitsOf, node: proposer, incarnation: 3 - incarnation });
      else commands.push({ op: LogOp.CancelWait, key, index, owner });
    } else if (roll < 0.84) {
      // The end of a lock-delay: mostly of one held now, now and then of none (or an older one).
      const held = [...view.table.holdsHeld()];
      const hold = held.length > 0 && random() < 0.8 ? pick(random, held) : { key, index, version: int(random, 2 ** 20) };
      commands.push({ op: LogOp.LiftHold, key: hold.key, index: hold.index, version: hold.version });
    } else if (entries.length > 0) {
      const e = pick(random, entries);
      const version = random() < 0.7 ? e.version : e.version - 1;
      // Half the owners' expiries hold their lock back (a lock-delay), as a leader with --lock-delay proposes.
      if (random() < 0.5) commands.push({ op: LogOp.Expire, key: e.key, index: e.index, owner: e.owner, version });
      else commands.push({ op: LogOp.ExpireAndHold, key: e.key, index: e.index, owner: e.owner, version, holdMs: 1 + int(random, 5_000) });
    }
  }
  return { proposer, incarnation, seq, commands };
}

/** Everything a client could ask of the table, plus per-node counts: two equal answers agree on all. */
function answers(state: ReplicaState): unknown {
  return {
    lists: KEYS.map((k) => state.table.list(k)),
    owners: KEYS.flatMap((k) => INDEXES.map((i) => state.table.findOwner(k, i))),
    locations: KEYS.flatMap((k) => INDEXES.flatMap((i) => OWNERS.map((o) => state.table.location(k, i, o)))),
    counts: state.counts(),
    origins: NODES.map((n) => [state.entriesFrom(n), state.countsFrom(n)]),
    position: state.position,
  };
}

test('two replicas fed the same batches hold the same state (digest and answers), whatever their clocks say', (t) => {
  const random = mulberry32(21);
  const clockA = new FakeClock(0);
  const clockB = new FakeClock(5e9);
  const a = new ReplicaState(clockA);
  const b = new ReplicaState(clockB);
  const seqs = new Map<string, number>();
  let duplicates = 0;
  let changes = 0;
  let mostWaiters = 0;
  let mostHeld = 0;
  for (let version = 1; version <= 400; version++) {
    const batch = randomBatch(random, a, seqs);
    const before = a.digest();
    const ra = a.apply(batch, at(version));
    const rb = b.apply(batch, at(version));
    if (ra === undefined) duplicates++;
    t.deepEqual(ra, rb);
    t.is(a.digest(), b.digest());
    if (a.digest() !== before) changes++;
    mostWaiters = Math.max(mostWaiters, a.counts().waiters);
    mostHeld = Math.max(mostHeld, a.table.heldBack);
    clockA.advance(int(random, 3_000));
    clockB.advance(int(random, 10));
  }
  t.deepEqual(answers(a), answers(b));
  t.true(duplicates > 10 && changes > 300);
  t.true(mostWaiters > 2, 'locks had waiters to promote');
  t.true(mostHeld > 0, 'locks were held back');
  const c = new ReplicaState(new FakeClock());
  c.apply({ proposer: 'A', incarnation: 9, seq: 1, commands: [request('k0', 'i0', 'other')] }, at(1));
  t.not(c.digest(), a.digest());
});

test('encode then decode gives the same digest and answers, and the copy goes on exactly as the original', (t) => {
  const random = mulberry32(22);
  const original = new ReplicaState(new FakeClock(0));
  const seqs = new Map<string, number>();
  let version = 0;
  // At least 200 batches, then on to a moment with a lock held back (a lock-delay), at most 300.
  for (; version < 200 || (original.table.heldBack === 0 && version < 300); version++) original.apply(randomBatch(random, original, seqs), at(version + 1));
  t.true(original.table.size > 3);
  t.true(original.table.heldBack > 0, 'the snapshot carries locks held back');
  const copy = ReplicaState.decode(original.encode(), new FakeClock(123_456));
  t.is(copy.digest(), original.digest());
  t.deepEqual(answers(copy), answers(original));
  t.deepEqual(copy.encode(), original.encode());
  for (const end = version + 200; version < end; version++) {
    const batch = randomBatch(random, original, seqs);
    t.deepEqual(copy.apply(batch, at(version + 1)), original.apply(batch, at(version + 1)));
  }
  t.is(copy.digest(), original.digest());
  t.deepEqual(answers(copy), answers(original));
});

/** A request through 0x0B (AcquireWait) with TTW 0, as holdLock sends it. */
function acquireWait(key: string, index: string, owner: string, ttl = 30): LogCommand {
  return request(key, index, owner, { op: LogOp.AcquireWait, ttl, ttw: 0 });
}

test('the end of an incarnation’s waits removes the entries its 0x0B left waiting, in every replica alike; owners, 0x02 waiters and other incarnations’ waits stay', (t) => {
  const a = new ReplicaState(new FakeClock());
  const b = new ReplicaState(new FakeClock(7e9));
  const feed = new Feed();
  const both = (batch: Batch): number[] | undefined => {
    const version = ++feed.version;
    const ra = a.apply(batch, at(version));
    t.deepEqual(b.apply(batch, at(version)), ra);
    t.is(a.digest(), b.digest());
    return ra;
  };
  t.deepEqual(both(feed.batch('n1', [request('k', '1', 'owner', { ttl: 0, ttw: 0 })])), [1]);
  // Through n3 (incarnation 5): two waits with TTW 0 (TTL 30 and TTL 0), one granted at once elsewhere.
  t.deepEqual(both(feed.batch('n3', [acquireWait('k', '1', 'w30'), acquireWait('k', '1', 'w0', 0), acquireWait('free', '1', 'got')], 5)), [2, 3, 1]);
  // A 0x02 waiter through n3, and a 0x0B waiter through n2.
  t.deepEqual(both(feed.batch('n3', [request('k', '1', 'polls', { ttw: 0 })], 5)), [4]);
  t.deepEqual(both(feed.batch('n2', [acquireWait('k', '1', 'other')], 9)), [5]);
  t.deepEqual(
    [...a.waitingIncarnations()].map((w) => `${w.node}/${w.incarnation}`),
    ['n3/5', 'n2/9'],
  );
  t.false(a.waitsEnded('n3', 5));
  // n3 restarted (incarnation 6) and ends its earlier one's waits.
  t.deepEqual(both(feed.batch('n3', [{ op: LogOp.CancelWaitsOf, node: 'n3', incarnation: 5 }], 6)), [2]);
  t.true(a.waitsEnded('n3', 5));
  t.deepEqual(
    a.table.list('k').map((c) => c.owner),
    ['owner', 'polls', 'other'],
  );
  t.is(a.table.findOwner('free', '1'), 'got', 'a grant stays: its TTL rules');
  t.deepEqual(
    [...a.waitingIncarnations()].map((w) => `${w.node}/${w.incarnation}`),
    ['n2/9'],
  );
  // A late batch of the ended incarnation (its append landing after the cancel): its 0x0B does nothing.
  t.deepEqual(both(feed.batch('n3', [acquireWait('k', '1', 'late'), request('k', '1', 'late-02')], 5)), [0, 4]);
  t.is(a.table.location('k', '1', 'late'), 0);
  // Ending it again, or one never seen, changes nothing in the table.
  t.deepEqual(
    both(
      feed.batch('n1', [
        { op: LogOp.CancelWaitsOf, node: 'n3', incarnation: 5 },
        { op: LogOp.CancelWaitsOf, node: 'n9', incarnation: 1 },
      ]),
    ),
    [0, 0],
  );
  // The owner releases: the next waiter (a live client's) is granted, no phantom.
  t.deepEqual(both(feed.batch('n1', [{ op: LogOp.Release, key: 'k', index: '1', owner: 'owner' }])), [1]);
  t.is(a.table.findOwner('k', '1'), 'polls');
});

test('a wait granted before its incarnation’s end is a grant; one asked again through another node is tied to that node', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('n1', [request('k', '1', 'owner', { ttl: 0, ttw: 0 })]));
  feed.apply(state, feed.batch('n3', [acquireWait('k', '1', 'granted'), acquireWait('k', '1', 'moved'), acquireWait('k', '1', 'cancelled')], 5));
  // The release applies before the cancel: 'granted' owns, for its TTL.
  feed.apply(state, feed.batch('n1', [{ op: LogOp.Release, key: 'k', index: '1', owner: 'owner' }]));
  t.is(state.table.findOwner('k', '1'), 'granted');
  // 'moved' asks again through n2 before n3's end: its entry (same place) is n2's wait now.
  t.deepEqual(feed.apply(state, feed.batch('n2', [acquireWait('k', '1', 'moved')], 2)), [2]);
  // n3's own cancel of 'moved' (its connection there closed) comes late: the newer wait through n2 stays.
  t.deepEqual(feed.apply(state, feed.batch('n3', [{ op: LogOp.CancelWait, key: 'k', index: '1', owner: 'moved' }], 5)), [0]);
  t.deepEqual(feed.apply(state, feed.batch('n1', [{ op: LogOp.CancelWaitsOf, node: 'n3', incarnation: 5 }])), [1]);
  t.deepEqual(
    state.table.list('k').map((c) => [c.owner, c.isOwner]),
    [
      ['granted', true],
      ['moved', false],
    ],
  );
  // n2's own cancel of it (the client left n2 too) removes it.
  t.deepEqual(feed.apply(state, feed.batch('n2', [{ op: LogOp.CancelWait, key: 'k', index: '1', owner: 'moved' }], 2)), [1]);
  t.is(state.table.location('k', '1', 'moved'), 0);
});

test('a snapshot carries the waits tied to incarnations and the incarnations ended; the copy ends them alike', (t) => {
  const original = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(original, feed.batch('n1', [request('k', '1', 'owner', { ttl: 0, ttw: 0 }), acquireWait('k', '1', 'n1-waiter')]));
  feed.apply(original, feed.batch('n3', [acquireWait('k', '1', 'a'), acquireWait('k', '2', 'b'), acquireWait('k', '1', 'c')], 5));
  feed.apply(original, feed.batch('n2', [{ op: LogOp.CancelWaitsOf, node: 'n2', incarnation: 1 }], 4));
  // A tie that no longer holds (its entry granted) is not part of the state.
  feed.apply(original, feed.batch('n1', [{ op: LogOp.Release, key: 'k', index: '2', owner: 'b' }]));
  const bytes = original.encode();
  t.is(bytes[1], 5, 'layout 5');
  const copy = ReplicaState.decode(bytes, new FakeClock(99));
  t.is(copy.digest(), original.digest());
  t.deepEqual(copy.tiedWaitsHeld(), original.tiedWaitsHeld());
  t.true(copy.waitsEnded('n2', 1));
  const end = feed.batch('n1', [{ op: LogOp.CancelWaitsOf, node: 'n3', incarnation: 5 }]);
  const version = ++feed.version;
  t.deepEqual(copy.apply(end, at(version)), original.apply(end, at(version)));
  t.is(copy.digest(), original.digest());
  t.deepEqual(
    copy.table.list('k').map((c) => c.owner),
    ['owner', 'n1-waiter'],
  );
  // Without ties or ends, the layout is an older one (an older node reads it).
  const plain = new ReplicaState(new FakeClock());
  plain.apply({ proposer: 'n1', incarnation: 1, seq: 1, commands: [request('k', '1', 'x')] }, at(1));
  t.is(plain.encode()[1], 3);
});

test('damaged snapshots are LogFormatErrors', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b')]));
  const bytes = state.encode();
  for (let cut = 0; cut < bytes.length; cut++) {
    t.throws(() => ReplicaState.decode(bytes.subarray(0, cut), new FakeClock()), { instanceOf: LogFormatError });
  }
  t.throws(() => ReplicaState.decode(Buffer.concat([bytes, Buffer.from([0])]), new FakeClock()), { instanceOf: LogFormatError });
  // the waiter's "is owner" flag set too: two owners for one lock (from the end: the staging
  // flag, its origin "A", its token, version and ticket)
  const twoOwners = Buffer.from(bytes);
  twoOwners[bytes.length - 1 - 2 - 8 - 8 - 8 - 1] = 1;
  t.throws(() => ReplicaState.decode(twoOwners, new FakeClock()), { instanceOf: LogFormatError, message: /two owners/ });
});

test('a copy of a batch already applied (same proposer and incarnation, seq not above the last) changes nothing but the position', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const first = feed.batch('A', [request('k', 'i', 'a')]);
  t.deepEqual(feed.apply(state, first), [1]);
  const second = feed.batch('A', [request('k', 'i', 'b')]);
  t.deepEqual(feed.apply(state, second), [2]);
  const listed = state.table.list('k');
  for (const again of [first, second, { ...second, commands: [request('k', 'i', 'c')] }]) {
    const steps: number[] = [];
    t.is(
      state.apply(again, at(++feed.version), (i) => steps.push(i)),
      undefined,
    );
    t.deepEqual(state.position, at(feed.version));
    t.deepEqual(state.table.list('k'), listed);
    t.deepEqual(steps, []);
  }
  // another incarnation of the same node, or a higher seq, is new
  t.deepEqual(feed.apply(state, feed.batch('A', [request('k', 'i', 'c')], 2, 1)), [3]);
  t.deepEqual(feed.apply(state, feed.batch('A', [request('k', 'i', 'd')], 1, 3)), [4]);
  t.true(state.isDuplicate({ proposer: 'A', incarnation: 1, seq: 3, commands: [] }));
  t.false(state.isDuplicate({ proposer: 'A', incarnation: 1, seq: 4, commands: [] }));
});

test('a batch that is not the next version throws LogGapError and changes nothing', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a')]));
  const digest = state.digest();
  const next = feed.batch('A', [request('k', 'i', 'b')]);
  for (const version of [3, 10, 1, 0]) {
    t.throws(() => state.apply(next, at(version)), { instanceOf: LogGapError });
    t.is(state.digest(), digest);
  }
  t.deepEqual(state.apply(next, at(2)), [2]);
});

test('an expiry naming a stale phase does nothing; the current one removes the owner and promotes the next waiter', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b'), request('k', 'i', 'c', { priority: 5 })]));
  const entry = (owner: string) => [...state.table.replicaEntries()].find((e) => e.owner === owner)!;
  const firstPhase = entry('a').version;
  t.is(firstPhase, commandPosition(1, 0));
  t.is(entry('b').ticket, commandPosition(1, 1));
  feed.apply(state, feed.batch('B', [{ op: LogOp.Renew, key: 'k', index: 'i', owner: 'a' }]));
  const renewed = entry('a').version;
  t.is(renewed, commandPosition(2, 0));
  const expire = (owner: string, version: number): LogCommand => ({ op: LogOp.Expire, key: 'k', index: 'i', owner, version });
  t.deepEqual(feed.apply(state, feed.batch('L', [expire('a', firstPhase), expire('nobody', renewed)])), [0, 0]);
  t.is(state.table.findOwner('k', 'i'), 'a');
  t.deepEqual(feed.apply(state, feed.batch('L', [expire('a', renewed)])), [1]);
  t.is(state.table.findOwner('k', 'i'), 'c', 'the waiter with the higher priority goes first');
  t.is(entry('c').version, commandPosition(4, 0), 'its owner phase began at the expiry');
  t.deepEqual(feed.apply(state, feed.batch('L', [expire('c', entry('c').version - 1), expire('b', entry('b').version)])), [0, 1]);
  t.deepEqual(
    state.table.list('k').map((c) => c.owner),
    ['c'],
  );
});

test('entries are counted per origin node through requests, releases, expiries and promotions', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'j', 'a'), request('k', 'i', 'w1')]));
  feed.apply(state, feed.batch('B', [request('k', 'i', 'w2'), request('x', 'i', 'b')]));
  // a renewing request through another node does not move the entry's origin
  feed.apply(state, feed.batch('C', [request('k', 'i', 'a')]));
  t.deepEqual([state.entriesFrom('A'), state.entriesFrom('B'), state.entriesFrom('C')], [3, 2, 0]);
  t.deepEqual(state.countsFrom('A'), { owners: 2, waiters: 1 });
  t.deepEqual(state.countsFrom('C'), { owners: 0, waiters: 0 });
  // release through C of an entry requested through A: A's count goes down; w1 (A's) is promoted
  feed.apply(state, feed.batch('C', [{ op: LogOp.Release, key: 'k', index: 'i', owner: 'a' }]));
  t.deepEqual(state.countsFrom('A'), { owners: 2, waiters: 0 });
  t.deepEqual(state.countsFrom('B'), { owners: 1, waiters: 1 });
  const w1 = [...state.table.replicaEntries()].find((e) => e.owner === 'w1')!;
  feed.apply(state, feed.batch('L', [{ op: LogOp.Expire, key: 'k', index: 'i', owner: 'w1', version: w1.version }]));
  t.deepEqual(state.countsFrom('A'), { owners: 1, waiters: 0 });
  t.deepEqual(state.countsFrom('B'), { owners: 2, waiters: 0 }, 'w2 promoted, still B’s');
  feed.apply(
    state,
    feed.batch('A', [
      { op: LogOp.ReleaseAll, owner: 'a' },
      { op: LogOp.ReleaseKey, key: 'x', owner: 'b' },
    ]),
  );
  t.deepEqual([state.entriesFrom('A'), state.entriesFrom('B')], [0, 1]);
  t.is(state.table.size, 1);
});

test('per-origin counts stay right for a node that goes 0, 1, 0 again and again, and for thousands of nodes that come and go', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('keep', [request('held', 'i', 'h')]));
  for (let round = 0; round < 3; round++) {
    feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), { op: LogOp.Release, key: 'k', index: 'i', owner: 'a' }, request('k', 'i', 'a')]));
    t.is(state.entriesFrom('A'), 1);
    feed.apply(state, feed.batch('B', [{ op: LogOp.Release, key: 'k', index: 'i', owner: 'a' }]));
    t.is(state.entriesFrom('A'), 0);
  }
  // More nodes than counters are kept for, each leaving no entry but every tenth: the emptied
  // counters go, the others stay exact.
  for (let n = 0; n < 2_500; n++) {
    const node = `node${n}`;
    const commands: LogCommand[] = [request(node, 'i', 'o')];
    if (n % 10 !== 0) commands.push({ op: LogOp.Release, key: node, index: 'i', owner: 'o' });
    feed.apply(state, feed.batch(node, commands));
  }
  for (let n = 0; n < 2_500; n++) t.is(state.entriesFrom(`node${n}`), n % 10 === 0 ? 1 : 0, `node${n}`);
  t.is(state.entriesFrom('keep'), 1);
  t.deepEqual(state.countsFrom('keep'), { owners: 1, waiters: 0 });
});

test('apply reads the clock once per batch: every phase a batch begins is dated alike; outside apply the clock is live', (t) => {
  let reads = 0;
  let time = 1_000;
  const clock = { now: () => (reads++, time++) }; // a clock that moves 1 ms at every reading
  const state = new ReplicaState(clock);
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k1', 'i', 'a', { ttl: 1 }), request('k2', 'i', 'a', { ttl: 1 }), request('k3', 'i', 'a', { ttl: 2 })]));
  t.is(reads, 1, 'one reading for the three commands');
  time = 3_500;
  const due = [state.table.takeDue(), state.table.takeDue(), state.table.takeDue()];
  t.deepEqual(
    due.map((d) => d && [d.key, d.deadline]),
    [
      ['k1', 2_000],
      ['k2', 2_000],
      ['k3', 3_000],
    ],
  );
  t.true(reads > 1, 'the deadline watch reads the live clock');
});

test('allowCreate=false refuses a new entry (0) but renews an existing one', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b')]));
  const before = [...state.table.replicaEntries()].find((e) => e.owner === 'b')!;
  const results = feed.apply(state, feed.batch('A', [request('k', 'i', 'c', { allowCreate: false }), request('k', 'i', 'b', { allowCreate: false, ttw: 7 })]));
  t.deepEqual(results, [0, 2]);
  const after = [...state.table.replicaEntries()].find((e) => e.owner === 'b')!;
  t.is(after.ttw, 7);
  t.is(after.version, commandPosition(2, 1));
  t.not(after.version, before.version);
  t.is(state.table.location('k', 'i', 'c'), 0);
});

test('the table limit is the one carried in each request', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const results = feed.apply(
    state,
    feed.batch('A', [
      request('k', '1', 'a', { maxEntries: 2 }),
      request('k', '2', 'a', { maxEntries: 2 }),
      request('k', '3', 'a', { maxEntries: 2 }),
      request('k', '3', 'a', { maxEntries: 3 }),
      request('k', '1', 'a', { maxEntries: 0 }), // a renewal is not refused by the limit
    ]),
  );
  t.deepEqual(results, [1, 1, 0, 1, 1]);
  t.is(state.table.size, 3);
});

test('ApplyStep runs before each command and once after the last, each seeing the commands before it', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const seen: Array<[number, string, number]> = [];
  const commands = [request('k', 'i', 'a'), request('k', 'i', 'b'), { op: LogOp.Release, key: 'k', index: 'i', owner: 'a' } as const];
  state.apply(feed.batch('A', commands), at(++feed.version), (i) => seen.push([i, state.table.findOwner('k', 'i'), state.table.location('k', 'i', 'b')]));
  t.deepEqual(seen, [
    [0, '', 0],
    [1, 'a', 0],
    [2, 'a', 2],
    [3, 'b', 1],
  ]);
  const empty: number[] = [];
  state.apply(feed.batch('A', []), at(++feed.version), (i) => empty.push(i));
  t.deepEqual(empty, [0]);
});

function imported(key: string, index: string, owner: string, isOwner: boolean, first = false, priority = 0): LogCommand {
  return { op: LogOp.Import, key, index, owner, ttl: 30, ttw: 60, priority, isOwner, token: 0, remainingMs: 5_000, first };
}

test('an import fills an empty table in file order; one whose first entry finds entries is refused whole', (t) => {
  const clock = new FakeClock(1_000);
  const state = new ReplicaState(clock);
  const feed = new Feed();
  const file = [
    imported('k', 'i', 'alice', true, true, 1),
    imported('k', 'i', 'carol', false, false, 9),
    imported('k', 'i', 'bob', false, false, 1),
    imported('k', 'j', 'dave', false), // a waiter without an owner takes the lock
  ];
  t.deepEqual(feed.apply(state, feed.batch('A', file)), [1, 1, 1, 1]);
  t.deepEqual(
    state.table.list('k').map((c) => [c.index, c.owner, c.isOwner, c.priority]),
    [
      ['i', 'alice', true, 1],
      ['i', 'carol', false, 9],
      ['i', 'bob', false, 1],
      ['j', 'dave', true, 0],
    ],
  );
  // The time the file said was left counts from this node's apply.
  t.deepEqual(
    [...state.table.snapshot()].map((s) => s.remainingMs),
    [5_000, 5_000, 5_000, 5_000],
  );
  t.is(state.entriesFrom('A'), 4);
  const before = state.digest();
  t.deepEqual(feed.apply(state, feed.batch('B', [imported('x', 'y', 'zed', true, true), imported('k', 'z', 'eve', true)])), [0, 0]);
  t.not(state.digest(), before, 'the position moved');
  t.deepEqual(state.table.list('x'), []);
  t.is(state.table.size, 4);
});

for (const ttl of [30, 0]) {
  test(`a waiter promoted after its wait ran out keeps its full TTL (${ttl}) from its promotion: any node may have told it it owns`, (t) => {
    const clock = new FakeClock();
    const state = new ReplicaState(clock);
    const feed = new Feed();
    feed.apply(state, feed.batch('A', [request('k', 'i', 'a', { ttl: 1 })]));
    clock.advance(500);
    feed.apply(state, feed.batch('A', [request('k', 'i', 'b', { ttl, ttw: 1 })]));
    clock.advance(1_500); // both phases ran out; the leader's sweep takes both
    const dueOwner = state.table.takeDue()!;
    const dueWaiter = state.table.takeDue()!;
    t.deepEqual([dueOwner.owner, dueWaiter.owner], ['a', 'b']);
    const expire = (due: typeof dueOwner): LogCommand => ({ op: LogOp.Expire, key: due.key, index: due.index, owner: due.owner, version: due.version });
    t.deepEqual(feed.apply(state, feed.batch('L', [expire(dueOwner), expire(dueWaiter)])), [1, 0], "b's waiting phase is stale: b was promoted");
    t.is(state.table.findOwner('k', 'i'), 'b');
    t.is(state.table.location('k', 'i', 'b'), 1, 'b is told it owns');
    t.is(state.table.takeDue(), undefined, 'its owner phase is not due at once');
    if (ttl === 0) {
      clock.advance(3_600_000);
      t.is(state.table.takeDue(), undefined, 'TTL 0 never expires');
      return;
    }
    clock.advance(ttl * 1000 - 1);
    t.is(state.table.takeDue(), undefined, 'not before its TTL from the promotion');
    clock.advance(1);
    const promoted = state.table.takeDue();
    t.is(promoted?.owner, 'b', 'due once its TTL has passed since the promotion');
    t.deepEqual(feed.apply(state, feed.batch('L', [expire(promoted!)])), [1]);
    t.is(state.table.findOwner('k', 'i'), '');
  });
}

function staged(importId: number, key: string, index: string, owner: string, isOwner: boolean, first = false, token = 0, highestToken = 0): LogCommand {
  return { op: LogOp.ImportStagedFenced, importId, key, index, owner, ttl: 30, ttw: 60, priority: 0, isOwner, token, highestToken, remainingMs: 5_000, first };
}

const commit = (importId: number): LogCommand => ({ op: LogOp.ImportCommit, importId });

test('a staged import spanning several batches shows nothing until its commit, then everything at once, in file order', (t) => {
  const state = new ReplicaState(new FakeClock(1_000));
  const feed = new Feed();
  t.deepEqual(feed.apply(state, feed.batch('A', [staged(7, 'k', 'i', 'alice', true, true), staged(7, 'k', 'i', 'bob', false)])), [1, 1]);
  t.deepEqual(feed.apply(state, feed.batch('A', [staged(7, 'k', 'j', 'carol', true)])), [1]);
  t.is(state.table.size, 0, 'staged entries are not in the table');
  t.is(state.stagedImportEntries, 3);
  t.deepEqual(feed.apply(state, feed.batch('A', [commit(7)])), [3]);
  t.deepEqual(
    state.table.list('k').map((c) => [c.index, c.owner, c.isOwner]),
    [
      ['i', 'alice', true],
      ['i', 'bob', false],
      ['j', 'carol', true],
    ],
  );
  t.is(state.stagedImportEntries, 0);
  t.deepEqual(feed.apply(state, feed.batch('A', [commit(7)])), [0], 'a commit applies once');
});

test('an import is all or nothing: a write before its commit, a refused first entry or a later importer leaves none of it', (t) => {
  const feed = new Feed();
  // A client's request lands between the first batch and the commit: the commit is refused whole.
  const written = new ReplicaState(new FakeClock());
  feed.apply(written, feed.batch('A', [staged(1, 'k', 'i', 'alice', true, true)]));
  feed.apply(written, feed.batch('B', [request('x', 'y', 'zed')]));
  t.deepEqual(feed.apply(written, feed.batch('A', [staged(1, 'k', 'j', 'bob', true), commit(1)])), [1, 0]);
  t.deepEqual(written.table.list('k'), []);
  // The first entry finds the table in use: it and every later one of that import are refused.
  t.deepEqual(feed.apply(written, feed.batch('C', [staged(2, 'k', 'i', 'carol', true, true), staged(2, 'k', 'j', 'dave', true), commit(2)])), [0, 0, 0]);
  t.deepEqual(written.table.list('k'), []);
  // Two importers racing: the later first entry replaces the earlier staging; only it can commit.
  const raced = new ReplicaState(new FakeClock());
  const race = new Feed();
  race.apply(raced, race.batch('A', [staged(3, 'k', 'i', 'alice', true, true)]));
  race.apply(raced, race.batch('B', [staged(4, 'k', 'i', 'bob', true, true)]));
  t.deepEqual(race.apply(raced, race.batch('A', [staged(3, 'k', 'j', 'alice', true), commit(3)])), [0, 0], "A's import was replaced");
  t.deepEqual(race.apply(raced, race.batch('B', [commit(4)])), [1]);
  t.deepEqual(
    raced.table.list('k').map((c) => c.owner),
    ['bob'],
  );
});

test('a snapshot taken in the middle of an import carries its staged entries, and the commit applies alike after loading it', (t) => {
  const clock = new FakeClock();
  const state = new ReplicaState(clock);
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [staged(9, 'k', 'i', 'alice', true, true), staged(9, '\x00\xff', '', '\xfe', true)]));
  const bytes = state.encode();
  t.is(bytes[1], 3, 'format 3');
  const loaded = ReplicaState.decode(bytes, clock);
  t.is(loaded.digest(), state.digest());
  t.is(loaded.stagedImportEntries, 2);
  const next = feed.batch('A', [commit(9)]);
  const version = ++feed.version;
  t.deepEqual(state.apply(next, at(version)), [2]);
  t.deepEqual(loaded.apply(next, at(version)), [2]);
  t.is(loaded.digest(), state.digest());
  t.is(state.stagedImportEntries, 0);
  t.is(state.encode().at(-1), 0, 'nothing staged once committed');
});

// Fencing tokens: a grant's token is the token base plus the log position of the command that
// grants; it never goes down for a lock, through renewals, promotions, snapshots and imports.

/** The owner's token on every lock of the small key space, as 0x09 answers it ('' when free). */
function tokens(state: ReplicaState): string[] {
  return KEYS.flatMap((k) => INDEXES.map((i) => `${state.table.findOwner(k, i)}:${state.table.fence(k, i, state.table.findOwner(k, i))}`));
}

test('a grant’s token is the log position of the command that grants: a renewal keeps it, a promotion gets the releasing command’s', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b'), request('k', 'j', 'c')]));
  t.is(state.table.fence('k', 'i', 'a'), commandPosition(1, 0));
  t.is(state.table.fence('k', 'j', 'c'), commandPosition(1, 2));
  t.is(state.table.fence('k', 'i', 'b'), 0, 'a waiter has no token');
  t.is(state.table.fence('k', 'i', 'nobody'), 0);
  feed.apply(state, feed.batch('B', [{ op: LogOp.Renew, key: 'k', index: 'i', owner: 'a' }, request('k', 'i', 'a', { ttl: 5 })]));
  t.is(state.table.fence('k', 'i', 'a'), commandPosition(1, 0), 'renewed twice, the same grant');
  feed.apply(state, feed.batch('C', [request('x', 'y', 'z'), { op: LogOp.Release, key: 'k', index: 'i', owner: 'a' }]));
  t.is(state.table.fence('k', 'i', 'b'), commandPosition(3, 1), 'promoted by the release');
  const b = [...state.table.replicaEntries()].find((e) => e.owner === 'b')!;
  feed.apply(state, feed.batch('L', [{ op: LogOp.Expire, key: 'k', index: 'i', owner: 'b', version: b.version }, request('k', 'i', 'a')]));
  t.is(state.table.fence('k', 'i', 'a'), commandPosition(4, 1), 'granted again, above every earlier grant');
  t.true(state.highestToken > commandPosition(4, 65_535));
  t.true(state.highestToken <= commandPosition(5, 0));
});

test('tokens never go down for a lock, command by command, and a snapshot at any point carries them and the base', (t) => {
  const random = mulberry32(23);
  const state = new ReplicaState(new FakeClock());
  const seqs = new Map<string, number>();
  // Start from an import (tokens up to 5e9, high-water 7e9), so the base is not 0.
  const file = [
    staged(1, 'k0', 'i0', 'o0', true, true, 4e9, 7e9),
    staged(1, 'k0', 'i0', 'o1', false, false, 0, 7e9),
    staged(1, 'k1', '', 'o2', true, false, 5e9, 7e9),
  ];
  t.deepEqual(state.apply({ proposer: 'A', incarnation: 1, seq: 1, commands: [...file, commit(1)] }, at(1)), [1, 1, 1, 3]);
  const highest = new Map<string, { owner: string; token: number }>();
  let grants = 0;
  let renewalsSeen = 0;
  const look = (): void => {
    for (const k of KEYS) {
      for (const i of INDEXES) {
        const owner = state.table.findOwner(k, i);
        if (owner === '') continue;
        const token = state.table.fence(k, i, owner);
        const lock = `${k}/${i}`;
        const last = highest.get(lock);
        if (last !== undefined && last.owner === owner && last.token === token) {
          renewalsSeen++;
          continue;
        }
        if (last !== undefined && token <= last.token) t.fail(`${lock}: ${owner} has token ${token}, not above ${last.owner}'s ${last.token}`);
        if (token > state.highestToken) t.fail(`${lock}: token ${token} above highestToken ${state.highestToken}`);
        highest.set(lock, { owner, token });
        grants++;
      }
    }
  };
  look();
  t.is(state.table.fence('k0', 'i0', 'o0'), 4e9, 'an imported owner keeps its token');
  for (let version = 2; version <= 400; version++) {
    const batch = randomBatch(random, state, seqs);
    state.apply(batch, at(version), look);
    const copy = ReplicaState.decode(state.encode(), new FakeClock());
    t.is(copy.digest(), state.digest());
    t.deepEqual(tokens(copy), tokens(state));
    t.is(copy.highestToken, state.highestToken);
  }
  t.true(grants > 100 && renewalsSeen > 100, `${grants} grants, ${renewalsSeen} looks at the same grant`);
  t.true([...highest.values()].every((h) => h.token > 7e9 || h.token === 4e9 || h.token === 5e9));
});

test('an import keeps its owners’ tokens and raises the base: every later grant is above the file’s tokens and high-water', (t) => {
  for (const [label, fileHighest] of [
    ['high-water above the tokens', 9e12],
    ['no high-water (0): the highest token', 0],
  ] as const) {
    const state = new ReplicaState(new FakeClock());
    const feed = new Feed();
    feed.apply(state, feed.batch('A', [request('gone', 'i', 'x')]));
    feed.apply(state, feed.batch('A', [{ op: LogOp.Release, key: 'gone', index: 'i', owner: 'x' }]));
    const file = [
      staged(5, 'k', 'i', 'alice', true, true, 3e12, fileHighest),
      staged(5, 'k', 'i', 'bob', false, false, 0, fileHighest),
      staged(5, 'k', 'j', 'carol', false, false, 0, fileHighest), // a waiter whose lock is free: granted now
      staged(5, 'k', 'm', 'dave', true, false, 0, fileHighest), // an owner saved without a token: granted now
    ];
    feed.apply(state, feed.batch('A', file.slice(0, 2)));
    // A snapshot in the middle of the import carries the staged tokens: the copy commits alike.
    const middle = ReplicaState.decode(state.encode(), new FakeClock());
    const rest = feed.batch('A', [...file.slice(2), commit(5)]);
    const version = ++feed.version;
    t.deepEqual(state.apply(rest, at(version)), [1, 1, 4], label);
    t.deepEqual(middle.apply(rest, at(version)), [1, 1, 4], label);
    t.is(middle.digest(), state.digest(), label);
    const floor = Math.max(fileHighest, 3e12);
    t.is(state.table.fence('k', 'i', 'alice'), 3e12, `${label}: alice keeps the token the file gives her`);
    t.is(state.table.fence('k', 'j', 'carol'), floor + commandPosition(version, 2), label);
    t.is(state.table.fence('k', 'm', 'dave'), floor + commandPosition(version, 2), label);
    // From a snapshot after the import (base carried), alice's release promotes bob above the file.
    const after = ReplicaState.decode(state.encode(), new FakeClock());
    const release = feed.batch('B', [{ op: LogOp.Release, key: 'k', index: 'i', owner: 'alice' }, request('gone', 'i', 'x')]);
    const next = ++feed.version;
    state.apply(release, at(next));
    after.apply(release, at(next));
    t.is(after.digest(), state.digest(), label);
    t.is(state.table.fence('k', 'i', 'bob'), floor + commandPosition(next, 0), label);
    t.is(state.table.fence('gone', 'i', 'x'), floor + commandPosition(next, 1), `${label}: above its grant before the import`);
    t.true(state.highestToken >= floor + commandPosition(next, 1), label);
  }
});

test('an import refused at its commit leaves the token base as it was', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [staged(1, 'k', 'i', 'alice', true, true, 8e12, 9e12)]));
  feed.apply(state, feed.batch('B', [request('x', 'y', 'zed')]));
  t.deepEqual(feed.apply(state, feed.batch('A', [commit(1)])), [0]);
  feed.apply(state, feed.batch('B', [request('x', 'z', 'zed')]));
  t.is(state.table.fence('x', 'z', 'zed'), commandPosition(4, 0));
});

/**
 * A snapshot as versions before fencing tokens wrote it: format 1 (position, proposers, entries
 * without tokens), or format 2 when an import's entries (the op without tokens) are staged.
 */
function unfencedSnapshot(state: ReplicaState, staging?: { id: number; entries: Array<{ ticket: number; command: ImportStagedCommand }> }): Buffer {
  const out = new BufferWriter(4096, 0);
  out.u8(0x53).u8(staging === undefined ? 1 : 2);
  out.f64(state.position.version).f64(state.position.revision);
  out.u32(0); // no proposer remembered
  const entries = [...state.table.replicaEntries()];
  out.u32(entries.length);
  for (const e of entries) {
    for (const name of [e.key, e.index, e.owner]) out.string(name);
    out
      .u8(e.priority)
      .u16(e.ttl)
      .u16(e.ttw)
      .u8(e.isOwner ? 1 : 0);
    out.f64(e.ticket).f64(e.version).string(e.origin);
  }
  if (staging !== undefined) {
    out.u32(staging.id).u32(staging.entries.length);
    for (const { ticket, command } of staging.entries) writeImportStaged(out.f64(ticket), command);
  }
  return out.flush();
}

test('a snapshot from before tokens (formats 1 and 2) loads: an owner’s token is its phase’s position, and later grants go above it', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  feed.apply(state, feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b'), request('k', 'j', 'c')]));
  feed.apply(state, feed.batch('A', [{ op: LogOp.Renew, key: 'k', index: 'j', owner: 'c' }]));
  const old = ReplicaState.decode(unfencedSnapshot(state), new FakeClock());
  t.deepEqual(
    old.table.list('k').map((c) => [c.index, c.owner, c.isOwner]),
    state.table.list('k').map((c) => [c.index, c.owner, c.isOwner]),
  );
  t.is(old.table.fence('k', 'i', 'a'), commandPosition(1, 0));
  t.is(old.table.fence('k', 'j', 'c'), commandPosition(2, 0), 'its renewal’s position: above its grant’s, below any later grant’s');
  t.is(old.encode()[1], 3, 'written again in the current format');
  const release = feed.batch('B', [
    { op: LogOp.Release, key: 'k', index: 'i', owner: 'a' },
    { op: LogOp.Release, key: 'k', index: 'j', owner: 'c' },
    request('k', 'j', 'd'),
  ]);
  old.apply(release, at(++feed.version));
  t.is(old.table.fence('k', 'i', 'b'), commandPosition(3, 0));
  t.is(old.table.fence('k', 'j', 'd'), commandPosition(3, 2));

  // Format 2: an import staged by a version without tokens commits with tokens granted at the commit.
  const empty = new ReplicaState(new FakeClock());
  const unfenced = (owner: string, isOwner: boolean, first: boolean): ImportStagedCommand => ({
    op: LogOp.ImportStaged,
    importId: 4,
    key: 'k',
    index: 'i',
    owner,
    ttl: 30,
    ttw: 60,
    priority: 0,
    isOwner,
    token: 0,
    highestToken: 0,
    remainingMs: 5_000,
    first,
  });
  const stagedOld = ReplicaState.decode(
    unfencedSnapshot(empty, {
      id: 4,
      entries: [
        { ticket: commandPosition(1, 0), command: unfenced('alice', true, true) },
        { ticket: commandPosition(1, 1), command: unfenced('bob', false, false) },
      ],
    }),
    new FakeClock(),
  );
  t.is(stagedOld.stagedImportEntries, 2);
  t.deepEqual(stagedOld.apply({ proposer: 'A', incarnation: 1, seq: 1, commands: [commit(4)] }, at(1)), [2]);
  t.is(stagedOld.table.fence('k', 'i', 'alice'), commandPosition(1, 0), 'saved without a token: granted one at the commit');
});

test("a bundle's batches apply at one version in order, their commands numbered on across them, a duplicate's included", (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const first = feed.batch('A', [request('k', 'i', 'a')]);
  feed.apply(state, first);
  // Version 2 holds B's two commands, a copy of A's batch, then C's two.
  const b = feed.batch('B', [request('x', 'i', 'b'), request('y', 'i', 'b')]);
  const c = feed.batch('C', [request('z', 'i', 'c'), { op: LogOp.Release, key: 'k', index: 'i', owner: 'a' }]);
  const steps: number[] = [];
  t.deepEqual(state.apply(b, at(2), undefined, { place: 0, first: true }), [1, 1]);
  t.is(
    state.apply(first, at(2), (i) => steps.push(i), { place: 2, first: false }),
    undefined,
    'the copy changes nothing',
  );
  t.deepEqual(
    state.apply(c, at(2), (i) => steps.push(i), { place: 3, first: false }),
    [1, 1],
  );
  t.deepEqual(steps, [0, 1, 2], 'steps count within the batch');
  t.deepEqual(state.position, at(2));
  t.is(state.table.fence('y', 'i', 'b'), commandPosition(2, 1));
  t.is(state.table.fence('z', 'i', 'c'), commandPosition(2, 3), "C's first command comes after the copy's place");
  t.deepEqual([state.entriesFrom('A'), state.entriesFrom('B'), state.entriesFrom('C')], [0, 2, 1], 'each batch its own origin');
  t.true(state.highestToken <= commandPosition(3, 0));
  // The next version begins at place 0 again.
  t.deepEqual(state.apply(feed.batch('A', [request('k', 'i', 'a')]), at(3)), [1]);
  t.is(state.table.fence('k', 'i', 'a'), commandPosition(3, 0));
});

test("a bundle's later batch at another place or version is refused (not a log gap) and changes nothing", (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  t.deepEqual(state.apply(feed.batch('A', [request('k', 'i', 'a'), request('k', 'i', 'b')]), at(1)), [1, 2]);
  const digest = state.digest();
  const next = feed.batch('B', [request('k', 'i', 'c')]);
  for (const [version, place] of [
    [1, 1],
    [1, 3],
    [1, 0],
    [2, 2],
    [0, 2],
  ] as const) {
    const error = t.throws(() => state.apply(next, at(version), undefined, { place, first: false }));
    t.false(error instanceof LogGapError, `${version}:${place}`);
    t.is(state.digest(), digest);
  }
  t.deepEqual(state.apply(next, at(1), undefined, { place: 2, first: false }), [3]);
});

test('a bundle whose first batch is empty: the next batch comes at the same version and place 0, not as a gap', (t) => {
  const state = new ReplicaState(new FakeClock());
  const feed = new Feed();
  const empty = feed.batch('A', []);
  const x = feed.batch('B', [request('k', 'i', 'b')]);
  t.deepEqual(state.apply(empty, at(1), undefined, { place: 0, first: true }), []);
  t.deepEqual(state.apply(x, at(1), undefined, { place: 0, first: false }), [1]);
  t.is(state.table.fence('k', 'i', 'b'), commandPosition(1, 0));
  t.deepEqual(state.position, at(1));
  // A value's first batch is the one that must come at the next version.
  t.throws(() => state.apply(feed.batch('C', []), at(1), undefined, { place: 0, first: true }), { instanceOf: LogGapError });
});
