import test from 'ava';
import type { MemberSpace, ReplicatedLog } from '../../src/cluster/ReplicatedLog.js';
import { DEFRAGMENT_PAUSE_MS, SPACE_CHECK_MS, SpaceWatch } from '../../src/cluster/SpaceWatch.js';
import type { Logger } from '../../src/runtime/Logger.js';
import { FakeClock } from '../doubles/FakeClock.js';

const QUOTA = 1_000_000;

/** A store whose members say what the test sets, and whose defragmentations the test ends. */
function store(initial: MemberSpace[]) {
  const state = { members: initial, asked: initial.length, defragmenting: [] as Array<{ url: string; end: (ok: boolean) => void }> };
  const log = {
    space: async () => ({ asked: state.asked, members: state.members }),
    defragment: (url: string) =>
      new Promise<void>((resolve, reject) => state.defragmenting.push({ url, end: (ok) => (ok ? resolve() : reject(new Error('permission denied'))) })),
  } as unknown as ReplicatedLog;
  return { state, log };
}

const member = (url: string, dbBytes: number, dbBytesInUse: number, noSpace = false): MemberSpace => ({ url, dbBytes, dbBytesInUse, noSpace });
const settle = () => new Promise((resolve) => setImmediate(resolve));

function watch(log: ReplicatedLog) {
  const clock = new FakeClock(0);
  const events: string[] = [];
  const logger: Logger = { event: (name) => events.push(name), debug: undefined };
  const space = new SpaceWatch(log, clock, logger, QUOTA);
  const check = async (leads: boolean, ms = SPACE_CHECK_MS) => {
    clock.advance(ms);
    space.tick(leads);
    await settle();
  };
  return { clock, events, space, check };
}

test('a NOSPACE alarm on any member is reported (figures, one log line) and its end too', async (t) => {
  const { state, log } = store([member('a', 100, 90), member('b', 200, 150)]);
  const { events, space, check } = watch(log);
  await check(false);
  t.deepEqual(space.figures, { dbBytes: 200, dbBytesInUse: 150, noSpace: false, defragments: 0 });
  state.members = [member('a', 100, 90, true), member('b', 200, 150, true)];
  await check(false);
  await check(false);
  t.true(space.figures.noSpace);
  t.deepEqual(events, ['etcd-nospace']);
  state.members = [member('a', 100, 90), member('b', 200, 150)];
  await check(false);
  t.false(space.figures.noSpace);
  t.deepEqual(events, ['etcd-nospace', 'etcd-nospace-cleared']);
});

test('the leader defragments one member at a time, the largest first, only with every member of three answering, and pauses between', async (t) => {
  const big = (url: string, db = 0.7 * QUOTA) => member(url, db, 0.2 * QUOTA);
  const { state, log } = store([big('a'), big('b', 0.8 * QUOTA), big('c')]);
  const { events, space, check } = watch(log);
  await check(false);
  t.is(state.defragmenting.length, 0, 'a follower does not defragment');
  await check(true);
  t.deepEqual(
    state.defragmenting.map((d) => d.url),
    ['b'],
  );
  await check(true);
  t.is(state.defragmenting.length, 1, 'never a second one while the first runs');
  state.defragmenting.shift()!.end(true);
  await settle();
  state.members = [big('a'), member('b', 0.2 * QUOTA, 0.2 * QUOTA), big('c')];
  await check(true, 1);
  await check(true, SPACE_CHECK_MS);
  t.is(state.defragmenting.length, 0, `not within ${DEFRAGMENT_PAUSE_MS} ms of the last`);
  // One member not answering: none is taken out.
  state.members = [big('a'), big('c')];
  await check(true, DEFRAGMENT_PAUSE_MS);
  t.is(state.defragmenting.length, 0);
  state.members = [big('a'), member('b', 0.2 * QUOTA, 0.2 * QUOTA), big('c')];
  await check(true);
  t.deepEqual(
    state.defragmenting.map((d) => d.url),
    ['a'],
  );
  // A failure (etcd wants the root role) backs off for minutes.
  state.defragmenting.shift()!.end(false);
  await settle();
  await check(true, DEFRAGMENT_PAUSE_MS);
  t.is(state.defragmenting.length, 0);
  t.deepEqual(events, ['etcd-defragmented', 'etcd-defragment-failed']);
  t.is(space.figures.defragments, 1);
});

test('a member with little free space, or a store of fewer than three members, is never defragmented', async (t) => {
  const { state, log } = store([member('a', 0.9 * QUOTA, 0.8 * QUOTA), member('b', 0.4 * QUOTA, 0.05 * QUOTA), member('c', 0.9 * QUOTA, 0.8 * QUOTA)]);
  const { check } = watch(log);
  await check(true);
  t.is(state.defragmenting.length, 0, 'the full ones have too little free, the free one is small');
  const two = store([member('a', 0.9 * QUOTA, 0.1 * QUOTA), member('b', 0.9 * QUOTA, 0.1 * QUOTA)]);
  const other = watch(two.log);
  await other.check(true);
  t.is(two.state.defragmenting.length, 0);
});
