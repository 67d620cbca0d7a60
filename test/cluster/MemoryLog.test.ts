import test from 'ava';
import { MemoryLog, MemoryLogError, MemoryStore, type MemoryStoreOptions } from '../doubles/MemoryLog.js';
import { mulberry32 } from '../../src/runtime/Random.js';
import { AppendRefusedError, appendRequestBytes, electLeader, type LogListener, type LogRecord, type WatchEnd } from '../../src/cluster/ReplicatedLog.js';
import { VirtualTimers } from '../doubles/VirtualTimers.js';

const CALL_MS = 1_000;

function setup(seed = 1, options: Partial<MemoryStoreOptions> = {}): { timers: VirtualTimers; store: MemoryStore } {
  const timers = new VirtualTimers();
  const store = new MemoryStore({ timers, clock: timers, random: mulberry32(seed), ...options });
  return { timers, store };
}

const bytes = (text: string): Uint8Array => Buffer.from(text);
const text = (value: Uint8Array): string => Buffer.from(value).toString();

/** A promise's outcome, readable without awaiting it (time is virtual: nothing settles by itself). */
function track<T>(promise: Promise<T>): { done: boolean; value?: T; error?: unknown } {
  const state: { done: boolean; value?: T; error?: unknown } = { done: false };
  promise.then(
    (value) => Object.assign(state, { done: true, value }),
    (error: unknown) => Object.assign(state, { done: true, error }),
  );
  return state;
}

function kindOf(error: unknown): string {
  return error instanceof MemoryLogError ? error.kind : `not a MemoryLogError: ${String(error)}`;
}

/** A listener that records what it gets, in order, and how watches ended. */
class Recorder implements LogListener {
  readonly records: LogRecord[] = [];
  readonly ends: WatchEnd[] = [];
  calls = 0;

  onRecords(records: readonly LogRecord[]): void {
    this.calls++;
    this.records.push(...records);
  }

  onEnd(why: WatchEnd): void {
    this.ends.push(why);
  }
}

/**
 * A follower as the cluster will be one: restarts a broken watch right after the last batch it
 * took, drops repeats, and counts gaps (a version that is not the next one).
 */
function follower(client: MemoryLog): { versions: number[]; gaps: number; repeats: number; ends: WatchEnd[] } {
  const state = { versions: [] as number[], gaps: 0, repeats: 0, ends: [] as WatchEnd[] };
  let next = 1;
  let lastVersion = 0;
  const listener: LogListener = {
    onRecords(records) {
      for (const r of records) {
        if (r.version <= lastVersion) {
          state.repeats++;
          continue;
        }
        if (r.version !== lastVersion + 1) state.gaps++;
        lastVersion = r.version;
        state.versions.push(r.version);
        next = r.revision + 1;
      }
    },
    onEnd(why) {
      state.ends.push(why);
      if (why === 'broken') client.watch(next, listener);
    },
  };
  client.watch(next, listener);
  return state;
}

async function writer(client: MemoryLog, count: number, errors: string[] = []): Promise<void> {
  for (let i = 0; i < count; i++) {
    try {
      await client.append(bytes(`${client.label}-${i}`), CALL_MS);
    } catch (error) {
      errors.push(kindOf(error));
    }
  }
}

test('VirtualTimers run tasks in due order, same-time ones in scheduling order; cancel works; time jumps', (t) => {
  const timers = new VirtualTimers(100);
  const ran: string[] = [];
  timers.after(5, () => ran.push('b'));
  timers.after(1, () => ran.push('a'));
  timers.after(5, () => ran.push('c'));
  const cancel = timers.after(3, () => ran.push('cancelled'));
  timers.after(-7, () => ran.push('now'));
  cancel();
  t.is(timers.pending, 4);
  t.is(timers.runUntil(104), 2);
  t.deepEqual(ran, ['now', 'a']);
  t.is(timers.now(), 104);
  t.true(timers.step());
  t.is(timers.now(), 105);
  timers.runUntil(1_000);
  t.deepEqual(ran, ['now', 'a', 'b', 'c']);
  t.is(timers.now(), 1_000);
  t.false(timers.step());
  const loop = (): void => void timers.after(0, loop);
  loop();
  t.throws(() => timers.runUntil(2_000, 100), { instanceOf: RangeError });
});

test('appends from several clients get contiguous versions and rising revisions; head and a watch see them in order', async (t) => {
  const { timers, store } = setup(7, { maxRecordsPerDelivery: 8 });
  const clients = ['a', 'b', 'c'].map((l) => store.client(l));
  const recorder = new Recorder();
  store.client('watcher').watch(1, recorder);
  const writers = clients.map((c) => writer(c, 40));
  await timers.advance(60_000);
  await Promise.all(writers);
  t.is(store.logHistory.length, 120);
  t.deepEqual(
    recorder.records.map((r) => r.version),
    Array.from({ length: 120 }, (_, i) => i + 1),
  );
  for (let i = 1; i < recorder.records.length; i++) t.true(recorder.records[i]!.revision > recorder.records[i - 1]!.revision);
  t.true(recorder.calls < recorder.records.length, 'some deliveries carry several records');
  t.deepEqual(recorder.ends, []);
  const head = track(clients[0]!.head(CALL_MS));
  await timers.advance(100);
  const last = recorder.records[119]!;
  // The store's revision at the read: nothing but the log was written, so it is the last batch's.
  t.deepEqual(head.value, { version: 120, revision: last.revision, storeRevision: store.revision });
  t.is(store.revision, last.revision);
  t.deepEqual(store.logHead, { version: 120, revision: last.revision });
  // every client's values are there, each client's in the order it sent them
  const values = recorder.records.map((r) => text(r.value));
  for (const c of ['a', 'b', 'c'])
    t.deepEqual(
      values.filter((v) => v.startsWith(c)),
      Array.from({ length: 40 }, (_, i) => `${c}-${i}`),
    );
});

test('a watch starts at its revision; one past the head waits for the next batch; closed ones get nothing', async (t) => {
  const { timers, store } = setup(3);
  const client = store.client('a');
  const positions = [];
  for (let i = 0; i < 5; i++) {
    const p = track(client.append(bytes(`v${i}`), CALL_MS));
    await timers.advance(50);
    positions.push(p.value!);
  }
  const middle = new Recorder();
  client.watch(positions[2]!.revision, middle);
  const future = new Recorder();
  client.watch(store.revision + 1, future);
  const closed = new Recorder();
  client.watch(1, closed).close();
  await timers.advance(50);
  t.deepEqual(
    middle.records.map((r) => r.version),
    [3, 4, 5],
  );
  t.deepEqual(future.records, []);
  void client.append(bytes('v5'), CALL_MS);
  await timers.advance(50);
  t.deepEqual(
    future.records.map((r) => r.version),
    [6],
  );
  t.deepEqual(closed.records, []);
  t.throws(() => client.watch(0, middle), { instanceOf: RangeError });
});

test('compaction ends a watch still behind it, spares a caught-up one; a watch created before the compacted revision ends at once', async (t) => {
  const { timers, store } = setup(4, { latencyMs: [1, 1] });
  const client = store.client('a');
  for (let i = 0; i < 10; i++) void client.append(bytes(`v${i}`), CALL_MS);
  await timers.advance(50);
  const caughtUp = new Recorder();
  client.watch(1, caughtUp);
  await timers.advance(50);
  t.is(caughtUp.records.length, 10);
  // a slow client's watch has not delivered yet when the compaction lands
  const slowClient = store.client('slow');
  slowClient.extraDelayMs = 100;
  const behind = new Recorder();
  slowClient.watch(1, behind);
  const sixth = store.logHistory[5]!.revision;
  const compacted = track(client.compact(sixth, CALL_MS));
  await timers.advance(10);
  t.true(compacted.done && compacted.error === undefined);
  t.is(store.compactedRevision, sixth);
  t.is(store.logHistory.length, 5, 'history before the compacted revision is gone');
  await timers.advance(500);
  t.deepEqual(behind.records, []);
  t.deepEqual(behind.ends, ['compacted']);
  t.deepEqual(caughtUp.ends, []);
  const late = new Recorder();
  client.watch(sixth - 1, late);
  const atCompacted = new Recorder();
  client.watch(sixth, atCompacted);
  await timers.advance(50);
  t.deepEqual(late.ends, ['compacted']);
  t.deepEqual(late.records, []);
  t.deepEqual(
    atCompacted.records.map((r) => r.version),
    [6, 7, 8, 9, 10],
  );
  // the caught-up watch still gets new batches
  void client.append(bytes('v10'), CALL_MS);
  await timers.advance(50);
  t.is(caughtUp.records.at(-1)!.version, 11);
  // etcd's refusals: a compaction at or before the compacted revision, or in the future
  const again = track(client.compact(sixth, CALL_MS));
  const future = track(client.compact(store.revision + 1, CALL_MS));
  await timers.advance(50);
  t.is(kindOf(again.error), 'compacted');
  t.is(kindOf(future.error), 'future-revision');
});

test('an unknown-outcome append commits although its caller gets an error; a rejected one does not commit', async (t) => {
  const { timers, store } = setup(5);
  const client = store.client('a');
  store.faults.appendUnknownOutcome = 1;
  const lost = track(client.append(bytes('committed'), CALL_MS));
  await timers.advance(50);
  t.is(kindOf(lost.error), 'unknown-outcome');
  t.is(store.logHead.version, 1);
  t.is(text(store.logHistory[0]!.value), 'committed');
  store.faults.appendUnknownOutcome = 0;
  store.faults.appendRejected = 1;
  const refused = track(client.append(bytes('refused'), CALL_MS));
  await timers.advance(50);
  t.is(kindOf(refused.error), 'rejected');
  t.is(store.logHead.version, 1);
  store.faults.appendRejected = 0.5;
  const outcomes = Array.from({ length: 40 }, (_, i) => track(client.append(bytes(`x${i}`), CALL_MS)));
  await timers.advance(100);
  const succeeded = outcomes.filter((o) => o.error === undefined).length;
  t.true(succeeded > 5 && succeeded < 35);
  t.is(store.logHead.version, 1 + succeeded, 'exactly the appends that succeeded committed');
});

test('without quorum calls time out at their deadline and watches deliver nothing; calls still waiting run when it returns', async (t) => {
  const { timers, store } = setup(6);
  const client = store.client('a');
  const recorder = new Recorder();
  client.watch(1, recorder);
  store.setQuorum(false);
  const short = track(client.append(bytes('short'), 100));
  const long = track(client.append(bytes('long'), 5_000));
  const head = track(client.head(100));
  await timers.advance(99);
  t.false(short.done || long.done || head.done, 'neither success nor failure before the deadline');
  await timers.advance(2);
  t.is(kindOf(short.error), 'timeout');
  t.is(kindOf(head.error), 'timeout');
  t.false(long.done);
  t.is(store.logHead.version, 0, 'nothing committed without quorum');
  await timers.advance(1_000);
  store.setQuorum(true);
  await timers.advance(50);
  t.deepEqual(long.value, { version: 1, revision: store.logHead.revision });
  t.deepEqual(
    recorder.records.map((r) => text(r.value)),
    ['long'],
  );
  // a watch stays silent while there is no quorum, and resumes after
  store.setQuorum(false);
  const other = store.client('b');
  void other.append(bytes('late'), 10_000);
  await timers.advance(500);
  t.is(recorder.records.length, 1);
  store.setQuorum(true);
  await timers.advance(50);
  t.deepEqual(
    recorder.records.map((r) => r.version),
    [1, 2],
  );
});

async function claim(timers: VirtualTimers, client: MemoryLog, name: string, priority?: number, seconds = 10) {
  const claimed = track(client.claimName(name, priority, seconds, CALL_MS));
  await timers.advance(50);
  if (!claimed.done || claimed.error !== undefined) throw new Error(`claim of ${name} by ${client.label} failed: ${String(claimed.error)}`);
  return claimed.value!;
}

test('a claimed name stays taken while its holder lives; after a crash it frees once its TTL ran out, not before', async (t) => {
  const { timers, store } = setup(8);
  const a = store.client('node-a');
  const b = store.client('node-b');
  const first = await claim(timers, a, 'alpha', undefined, 10);
  t.true(first.taken);
  const lostWhy: string[] = [];
  if (first.taken) first.session.onLost((why) => lostWhy.push(why));
  // kept alive far past its TTL
  await timers.advance(60_000);
  t.deepEqual(await claim(timers, b, 'alpha'), { taken: false, holder: 'node-a' });
  t.deepEqual(lostWhy, []);
  t.is(store.liveLeases, 1);
  a.crash();
  const crashedAt = timers.now();
  await timers.advance(9_000);
  t.deepEqual(await claim(timers, b, 'alpha'), { taken: false, holder: 'node-a' }, 'the lease outlives the crash until its TTL');
  await timers.advanceTo(crashedAt + 10_100);
  const second = await claim(timers, b, 'alpha');
  t.true(second.taken);
  t.is(store.liveLeases, 1);
  t.deepEqual(lostWhy, [], 'a crashed process is told nothing');
});

test('release frees the name at once; a partitioned holder loses its session within a TTL and the name goes', async (t) => {
  const { timers, store } = setup(9);
  const a = store.client('a');
  const b = store.client('b');
  const held = await claim(timers, a, 'n1', 3, 5);
  if (!held.taken) return t.fail();
  const release = track(held.session.release());
  await timers.advance(50);
  t.true(release.done && release.error === undefined);
  t.true(held.session.lost);
  t.true((await claim(timers, b, 'n1', 3, 5)).taken);
  t.deepEqual(
    (
      await (async () => {
        const c = track(b.candidates(CALL_MS));
        await timers.advance(50);
        return c.value!;
      })()
    ).map((c) => c.name),
    ['n1'],
  );

  const again = await claim(timers, a, 'n2', 2, 5);
  if (!again.taken) return t.fail();
  const lost: Array<[number, string]> = [];
  again.session.onLost((why) => lost.push([timers.now(), why]));
  a.setPartitioned(true);
  const cutAt = timers.now();
  await timers.advance(7_000);
  t.is(lost.length, 1);
  t.true(lost[0]![0] - cutAt <= 5_000, 'the holder knows no later than the store drops it');
  t.true(again.session.lost);
  t.deepEqual(
    store.keys('names/').map((k) => k.key),
    ['names/n1'],
  );
  a.setPartitioned(false);
  await timers.advance(20_000);
  t.is(lost.length, 1, 'told once');
});

test('without quorum leases neither renew nor expire; when it returns they get a full TTL', async (t) => {
  const { timers, store } = setup(10);
  const a = store.client('a');
  await claim(timers, a, 'n', 1, 5);
  a.crash();
  store.setQuorum(false);
  await timers.advance(60_000);
  t.is(store.keys('names/').length, 1, 'nobody leads to expire it');
  store.setQuorum(true);
  await timers.advance(4_900);
  t.is(store.keys('names/').length, 1);
  await timers.advance(200);
  t.is(store.keys('names/').length, 0);
});

test('candidates lists live registrations with their registration revision; electLeader prefers priority, then the earliest', async (t) => {
  const { timers, store } = setup(11);
  const nodes = ['n1', 'n2', 'n3', 'n4'].map((n) => store.client(n));
  await claim(timers, nodes[0]!, 'n1', 5);
  await claim(timers, nodes[1]!, 'n2', 2);
  await claim(timers, nodes[2]!, 'n3', 2);
  await claim(timers, nodes[3]!, 'n4'); // not a candidate
  const read = async () => {
    const c = track(nodes[0]!.candidates(CALL_MS));
    await timers.advance(50);
    return c.value!;
  };
  const all = await read();
  t.deepEqual(
    all.map((c) => [c.name, c.priority]),
    [
      ['n1', 5],
      ['n2', 2],
      ['n3', 2],
    ],
  );
  t.true(all[0]!.since < all[1]!.since && all[1]!.since < all[2]!.since);
  for (const c of all) t.is(c.since, store.keys(`candidates/${c.name}`)[0]!.createRevision);
  t.is(electLeader(all)!.name, 'n2');
  nodes[1]!.crash();
  await timers.advance(11_000);
  t.deepEqual(
    (await read()).map((c) => c.name),
    ['n1', 'n3'],
  );
  t.is(electLeader(await read())!.name, 'n3');
});

test('snapshots: none at first; saved in chunks and loaded whole; a newer one replaces the older and drops its chunks; an older one never wins', async (t) => {
  const { timers, store } = setup(12, { snapshotChunkBytes: 16 });
  const a = store.client('a');
  const b = store.client('b');
  const run = async <T>(p: Promise<T>): Promise<T> => {
    const s = track(p);
    await timers.advance(1_000);
    if (s.error !== undefined) throw s.error instanceof Error ? s.error : new Error(kindOf(s.error));
    t.true(s.done);
    return s.value!;
  };
  t.is(await run(a.loadSnapshot(CALL_MS)), undefined);
  const first = { position: { version: 5, revision: 9 }, bytes: new Uint8Array(Array.from({ length: 100 }, (_, i) => i)) };
  await run(a.saveSnapshot(first, CALL_MS));
  t.is(store.keys('snap/chunk/').length, 7);
  t.deepEqual(await run(b.loadSnapshot(CALL_MS)), first);
  const second = { position: { version: 8, revision: 20 }, bytes: new Uint8Array(40).fill(0xff) };
  await run(b.saveSnapshot(second, CALL_MS));
  t.deepEqual(await run(a.loadSnapshot(CALL_MS)), second);
  t.is(store.keys('snap/chunk/').length, 3, 'the older snapshot’s chunks are gone');
  await run(a.saveSnapshot(first, CALL_MS));
  t.deepEqual(await run(a.loadSnapshot(CALL_MS)), second, 'the pointer never goes back');
  t.is(store.keys('snap/chunk/').length, 3, 'the losing save leaves nothing behind');
  const empty = { position: { version: 9, revision: 30 }, bytes: new Uint8Array(0) };
  await run(a.saveSnapshot(empty, CALL_MS));
  t.deepEqual(await run(b.loadSnapshot(CALL_MS)), empty);
  t.is(store.keys('snap/chunk/').length, 0);
  // a save that times out half-way leaves the previous snapshot in place
  store.setQuorum(false);
  const failed = track(a.saveSnapshot({ position: { version: 12, revision: 40 }, bytes: new Uint8Array(64) }, 200));
  await timers.advance(300);
  t.is(kindOf(failed.error), 'timeout');
  store.setQuorum(true);
  t.deepEqual(await run(b.loadSnapshot(CALL_MS)), empty);
});

test('a crash rejects pending calls and stops watches; a request already sent still reaches the store (within lateCommitMs)', async (t) => {
  const { timers, store } = setup(13, { latencyMs: [5, 5], lateCommitMs: 50 });
  const a = store.client('a');
  const recorder = new Recorder();
  a.watch(1, recorder);
  const append = track(a.append(bytes('in flight'), CALL_MS));
  await timers.advance(1);
  a.crash();
  await timers.advance(0);
  t.is(kindOf(append.error), 'closed');
  await timers.advance(100);
  t.is(store.logHead.version, 1, 'it committed after the crash');
  t.deepEqual(recorder.records, []);
  t.deepEqual(recorder.ends, [], 'a closed client’s listeners are not called');
  const after = track(a.head(CALL_MS));
  await timers.advance(0);
  t.is(kindOf(after.error), 'closed');
});

test('limits: an append above the request limit is refused; over the quota puts fail until compaction frees space', async (t) => {
  // An append's request carries its batch twice: 100-byte batches fit, one more byte does not.
  const { timers, store } = setup(14, { maxRequestBytes: appendRequestBytes(100), quotaBytes: 1_000 });
  const a = store.client('a');
  const big = track(a.append(new Uint8Array(101), CALL_MS));
  await timers.advance(50);
  t.is(kindOf(big.error), 'too-large');
  const fits = Array.from({ length: 12 }, () => track(a.append(new Uint8Array(100), CALL_MS)));
  await timers.advance(50);
  t.is(fits.filter((f) => f.error === undefined).length, 9, 'the key’s value and every batch in history count');
  t.is(kindOf(fits.find((f) => f.error !== undefined)!.error), 'no-space');
  const compacted = track(a.compact(store.logHead.revision, CALL_MS));
  await timers.advance(50);
  t.true(compacted.done && compacted.error === undefined);
  const more = track(a.append(new Uint8Array(100), CALL_MS));
  await timers.advance(50);
  t.is(more.error, undefined);
});

test('watch faults: a break ends the watch and a restart resumes; a silent gap shows as a version gap; repeats repeat', async (t) => {
  const run = async (fault: 'watchBreak' | 'watchSilentGap' | 'watchRepeat') => {
    const { timers, store } = setup(15);
    store.faults[fault] = 0.3;
    const f = follower(store.client('f'));
    await Promise.all([writer(store.client('a'), 50), writer(store.client('b'), 50), timers.advance(30_000)]);
    return f;
  };
  const broken = await run('watchBreak');
  t.true(broken.ends.length > 3);
  t.true(broken.ends.every((e) => e === 'broken'));
  t.deepEqual(
    broken.versions,
    Array.from({ length: 100 }, (_, i) => i + 1),
  );
  t.is(broken.gaps + broken.repeats, 0);
  const gappy = await run('watchSilentGap');
  t.true(gappy.gaps > 0);
  t.true(gappy.versions.length < 100);
  const repeated = await run('watchRepeat');
  t.true(repeated.repeats > 0);
  t.is(repeated.gaps, 0);
  t.is(repeated.versions.length, 100);
});

test('one seed replays the same run exactly; another seed gives another', async (t) => {
  const scenario = async (seed: number) => {
    const { timers, store } = setup(seed);
    Object.assign(store.faults, { appendUnknownOutcome: 0.1, appendRejected: 0.1, watchBreak: 0.1, watchRepeat: 0.1 });
    const f = follower(store.client('f'));
    const errors: string[] = [];
    const nodes = ['a', 'b', 'c'].map((l) => store.client(l));
    const claims = nodes.map((n, i) => n.claimName('leader', i + 1, 2, CALL_MS).catch(() => undefined));
    const work = Promise.all(nodes.map((n) => writer(n, 30, errors)));
    await timers.advance(2_000);
    nodes[0]!.crash();
    store.setQuorum(false);
    await timers.advance(1_500);
    store.setQuorum(true);
    await Promise.all([work, timers.advance(20_000)]);
    await Promise.all(claims);
    return { trace: store.trace.join('\n'), errors, versions: f.versions, revision: store.revision };
  };
  const one = await scenario(42);
  const two = await scenario(42);
  t.true(one.trace.length > 1_000);
  t.deepEqual(one, two);
  const other = await scenario(43);
  t.not(other.trace, one.trace);
});

test('the fence: a given-up append commits within lateCommitMs of its rejection, never later; 0 means never', async (t) => {
  for (const [healAt, commits] of [
    [250, true],
    [450, false],
  ] as const) {
    const { timers, store } = setup(15, { latencyMs: [1, 1], lateCommitMs: 300 });
    const a = store.client('a');
    store.setQuorum(false);
    const append = track(a.append(bytes('late'), 100));
    await timers.advance(healAt);
    t.is(kindOf(append.error), 'timeout');
    store.setQuorum(true);
    await timers.advance(50);
    t.is(store.logHead.version, commits ? 1 : 0, `quorum back ${healAt - 100} ms after the rejection`);
  }
  const { timers, store } = setup(16, { latencyMs: [5, 5] });
  const a = store.client('a');
  track(a.append(bytes('gone'), 100));
  await timers.advance(1);
  a.crash();
  await timers.advance(50);
  t.is(store.logHead.version, 0, 'lateCommitMs 0: a request on its way when its call closed never commits');
});

test('appendLate: appends land late, often after their caller gave up, never past the fence', async (t) => {
  const { timers, store } = setup(17, { latencyMs: [1, 1], lateCommitMs: 400 });
  store.faults.appendLate = 1;
  const a = store.client('a');
  const calls = Array.from({ length: 40 }, (_, i) => track(a.append(bytes(`b${i}`), 200)));
  await timers.advance(5_000);
  const late = calls.filter((c) => kindOf(c.error) === 'timeout').length;
  const fenced = store.trace.filter((line) => line.includes('append fenced')).length;
  t.true(late > 0 && fenced > 0 && store.logHead.version > calls.length - late, `${late} timed out, ${fenced} fenced, ${store.logHead.version} committed`);
  for (const line of store.trace.filter((l) => l.includes('appends v'))) t.true(Number(line.split(' ')[0]) <= 200 + 400 + 1, line);
});

test('seal: appends that rejected before it never land once it executed, even within the fence (without one they do)', async (t) => {
  for (const sealing of [true, false]) {
    const { timers, store } = setup(21, { latencyMs: [1, 1], lateCommitMs: 10_000 });
    const a = store.client('a');
    store.faults.appendLate = 1;
    const calls = Array.from({ length: 20 }, (_, i) => track(a.append(bytes(`b${i}`), 50)));
    await timers.advance(60);
    t.true(calls.every((c) => kindOf(c.error) === 'timeout'));
    store.faults.appendLate = 0;
    const landedBefore = store.logHead.version;
    const sealed = sealing ? track(a.seal(1_000)) : undefined;
    await timers.advance(15_000);
    if (!sealing) {
      t.true(store.logHead.version > landedBefore, 'without a seal held appends land later, within the fence');
      continue;
    }
    t.true(sealed!.done && sealed!.error === undefined, String(sealed!.error));
    t.is(store.logHead.version, landedBefore, `none landed after the seal (${landedBefore} had before it)`);
    t.true(landedBefore < 20);
  }
});

test('newLeaderRenewsFences: a new leader lets a held append land past its fence, as etcd renews leases (without it, it is fenced out)', async (t) => {
  for (const renews of [1, 0]) {
    const { timers, store } = setup(22, { latencyMs: [1, 1], lateCommitMs: 1_000, members: 3 });
    store.faults.newLeaderRenewsFences = renews;
    const a = store.client('a');
    store.setQuorum(false); // the append waits for a leader, as in a paused member
    const held = track(a.append(bytes('held'), 100));
    await timers.advance(900);
    t.is(kindOf(held.error), 'timeout');
    // A new leader 0.9 s after the rejection (fence 1 s): the held append goes on to it.
    store.setQuorum(true);
    store.changeLeader(500);
    await timers.advance(2_000);
    t.deepEqual(
      store.logHistory.map((r) => text(r.value)),
      renews === 1 ? ['held'] : [],
      renews === 1 ? 'landed 1.4 s after its rejection: the new leader renewed its fence' : 'fenced out',
    );
  }
});

test('overdueRevokes: a live client revokes an append a new leader renewed once it is overdue; without it, or with no live client in reach, the append lands past its fence', async (t) => {
  const cases = [
    { revokes: true, bystander: 'live', lands: false },
    { revokes: false, bystander: 'live', lands: true },
    { revokes: true, bystander: 'crashed', lands: true },
  ] as const;
  for (const { revokes, bystander, lands } of cases) {
    const { timers, store } = setup(23, { latencyMs: [1, 1], lateCommitMs: 1_000, members: 3 });
    store.faults.newLeaderRenewsFences = 1;
    store.overdueRevokes = revokes;
    const a = store.client('a');
    const b = store.client('b');
    if (bystander === 'crashed') b.crash();
    a.setPartitioned(true); // cut off alone: its append waits on the way
    const held = track(a.append(bytes('held'), 100));
    await timers.advance(200);
    t.is(kindOf(held.error), 'timeout');
    store.changeLeader(300); // a new leader at 0.5 s renews the fence to 1.5 s
    await timers.advance(1_100); // past the original fence (1.1 s)
    a.setPartitioned(false);
    await timers.advance(2_000);
    t.deepEqual(
      store.logHistory.map((r) => text(r.value)),
      lands ? ['held'] : [],
      `overdueRevokes ${revokes}, the other client ${bystander}: ${lands ? 'landed past its fence' : 'revoked'}`,
    );
  }
});

test('overdueRevokes: an append issued once a rejected append is past its due time revokes it first: the held one cannot land after it (without, it does)', async (t) => {
  for (const revokes of [true, false]) {
    const { timers, store } = setup(24, { latencyMs: [1, 1], lateCommitMs: 1_000, members: 3 });
    store.overdueRevokes = revokes;
    const a = store.client('a');
    const b = store.client('b');
    a.setPartitioned(true); // its append waits on the way
    const held = track(a.append(bytes('held'), 100));
    await timers.advance(900); // rejected at 0.1 s: due at 0.85 s, fenced from 1.1 s
    t.is(kindOf(held.error), 'timeout');
    const other = track(b.append(bytes('other'), 1_000));
    await timers.advance(60);
    t.true(other.done && other.error === undefined, String(other.error));
    a.setPartitioned(false); // within the fence: it lands unless revoked
    await timers.advance(1_000);
    t.deepEqual(
      store.logHistory.map((r) => text(r.value)),
      revokes ? ['other'] : ['other', 'held'],
      revokes ? 'revoked before the other append' : 'landed after the other append',
    );
  }
});

test('members: a client of an isolated member hangs until its deadline; a leader change fails or hangs calls in flight, then a new leader serves', async (t) => {
  const { timers, store } = setup(18, { latencyMs: [1, 1], members: 3 });
  const clients = [store.client('a'), store.client('b'), store.client('c')];
  t.deepEqual(
    clients.map((c) => c.member),
    [0, 1, 2],
  );
  store.isolateMember(2, true);
  const stuck = track(clients[2]!.head(100));
  const fine = track(clients[0]!.head(100));
  await timers.advance(150);
  t.is(kindOf(stuck.error), 'timeout');
  t.true(fine.done && fine.error === undefined);
  t.not(clients[2]!.cutSince, undefined);
  store.isolateMember(2, false);
  const inFlight = clients.slice(0, 2).map((c) => track(c.append(bytes('x'), 2_000)));
  store.changeLeader(300);
  t.false(store.hasLeader);
  await timers.advance(2_500);
  t.true(inFlight.every((c) => c.done));
  const after = track(clients[0]!.append(bytes('y'), 1_000));
  await timers.advance(50);
  t.true(store.hasLeader && after.done && after.error === undefined);
});

test('refuseWithoutLeader: during an election a member refuses requests at once ("no leader"), an append as AppendRefusedError, never executed; an isolated member still hangs', async (t) => {
  const { timers, store } = setup(20, { latencyMs: [1, 1], members: 3, lateCommitMs: 5_000 });
  store.faults.refuseWithoutLeader = 1;
  const [a, b, c] = [store.client('a'), store.client('b'), store.client('c')];
  track(a.append(bytes('first'), 1_000));
  await timers.advance(10);
  t.is(store.logHead.version, 1);
  store.isolateMember(c.member, true);
  store.changeLeader(1_000);
  const append = track(a.append(bytes('refused'), 500));
  const read = track(b.head(500));
  const cutOff = track(c.head(500));
  await timers.advance(10);
  t.true(append.error instanceof AppendRefusedError, String(append.error));
  t.regex(String(append.error), /no leader/);
  t.is(kindOf(read.error), 'no-leader');
  t.false(cutOff.done, 'a member cut off from the others holds the request');
  await timers.advance(2_000);
  t.is(kindOf(cutOff.error), 'timeout');
  t.true(store.hasLeader);
  const after = track(a.append(bytes('after'), 1_000));
  await timers.advance(10);
  t.is(after.error, undefined);
  t.deepEqual(
    store.logHistory.map((r) => text(r.value)),
    ['first', 'after'],
    'the refused append never committed, not even within the fence',
  );
});

test('snapshot savers racing: the pointer moves forward only by compare-and-swap; the loser deletes its own chunks', async (t) => {
  const { timers, store } = setup(19, { latencyMs: [1, 5], snapshotChunkBytes: 8 });
  const a = store.client('a');
  const b = store.client('b');
  const snap = (version: number): { position: { version: number; revision: number }; bytes: Uint8Array } => ({
    position: { version, revision: version },
    bytes: new Uint8Array(20).fill(version),
  });
  const saves = [track(a.saveSnapshot(snap(5), 1_000)), track(b.saveSnapshot(snap(6), 1_000)), track(a.saveSnapshot(snap(4), 1_000))];
  await timers.advance(1_000);
  t.true(saves.every((s) => s.done && s.error === undefined));
  const pointed = async (): Promise<number | undefined> => {
    const loaded = track(a.loadSnapshot(100));
    await timers.advance(100);
    return (loaded.value as { position: { version: number } } | undefined)?.position.version;
  };
  const winner = await pointed();
  t.true(winner !== undefined && [4, 5, 6].includes(winner), `the first swap wins: v${winner}`);
  t.is(store.keys('snap/chunk/').length, 3, 'only the pointed snapshot’s chunks are left');
  const older = track(b.saveSnapshot(snap(winner! - 1), 1_000));
  await timers.advance(1_000);
  t.true(older.done && older.error === undefined);
  t.is(await pointed(), winner, 'never backwards');
  await timers.advance(1_000);
  const newer = track(b.saveSnapshot(snap(9), 1_000));
  await timers.advance(1_000);
  t.true(newer.done && newer.error === undefined);
  t.is(await pointed(), 9);
  t.is(store.keys('snap/chunk/').length, 3);
});

test('a bundle of two clients’ batches, each fenced by the fence its client lent, commits as one value; both fences are used up', async (t) => {
  const { timers, store } = setup(31, { latencyMs: [1, 1], lateCommitMs: 1_000 });
  const [a, b] = [store.client('a'), store.client('b')];
  const [fa, fb] = [track(a.lendLease(CALL_MS)), track(b.lendLease(CALL_MS))];
  await timers.advance(1);
  const appended = track(
    a.appendBundle(
      [
        { value: bytes('A'), lease: fa.value! },
        { value: bytes('B'), lease: fb.value! },
      ],
      CALL_MS,
    ),
  );
  await timers.advance(10);
  t.deepEqual(appended.value, store.logHead);
  t.is(store.logHead.version, 1);
  t.is(a.unexecutedAppends().size + b.unexecutedAppends().size, 0);
});

test('a bundle lands only while every part’s fence holds: a part whose client gave up past lateCommitMs, or sealed, refuses the whole (lease gone)', async (t) => {
  for (const how of ['expired', 'sealed', 'live'] as const) {
    const { timers, store } = setup(32, { latencyMs: [1, 1], lateCommitMs: 1_000 });
    const [a, b] = [store.client('a'), store.client('b')];
    const [fa, fb] = [track(a.lendLease(CALL_MS)), track(b.lendLease(CALL_MS))];
    await timers.advance(1);
    // b's attempt is given up with its outcome unknown (its forward timed out, say).
    b.leaseReturned(fb.value!, 'unsettled');
    if (how === 'sealed') {
      track(b.seal(CALL_MS));
      await timers.advance(10);
    }
    if (how === 'expired') await timers.advance(1_100);
    const appended = track(
      a.appendBundle(
        [
          { value: bytes('A'), lease: fa.value! },
          { value: bytes('B'), lease: fb.value! },
        ],
        5_000,
      ),
    );
    await timers.advance(20);
    if (how === 'live') {
      t.is(store.logHead.version, 1, 'within the fence of a part given up, a bundle still lands');
      continue;
    }
    t.true(appended.error instanceof AppendRefusedError && appended.error.leaseGone, `${how}: ${String(appended.error)}`);
    t.is(store.logHead.version, 0, `${how}: nothing of it committed`);
  }
});
