import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LossReason } from '../../src/protocol/constants.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import type { Timers } from '../../src/runtime/Timers.js';
import type { LockRequest } from '../../src/locks/LockService.js';

/** Timers turned by hand: `turn()` runs the "soon" tasks queued before it (one turn of the loop). */
class TurnByTurn implements Timers {
  private queue: Array<() => void> = [];
  after(): () => void {
    return () => {};
  }
  every(): () => void {
    return () => {};
  }
  soon(task: () => void): void {
    this.queue.push(task);
  }
  /** Runs one turn; false when nothing was queued. */
  turn(): boolean {
    const tasks = this.queue.splice(0);
    for (const task of tasks) task();
    return tasks.length > 0;
  }
}

const LOCKS = 1_000;
const SLICE = 64;

function req(key: string, owner: string): LockRequest {
  return { key, index: 'i', owner, ttl: 0, ttw: 0, priority: 0 };
}

/** A service where X owns LOCKS locks with a waiter W<n> behind each, waiting with 0x0B; grants are recorded in order. */
function filled(sliceEntries: number): { service: LocalLockService; timers: TurnByTurn; grants: string[] } {
  const timers = new TurnByTurn();
  const service = new LocalLockService(new FakeClock(), timers, { sliceEntries });
  const grants: string[] = [];
  for (let n = 0; n < LOCKS; n++) {
    service.request(req(`k${n}`, 'X'), true);
    const answer = service.acquire(req(`k${n}`, `W${n}`), true, 0xffffffff);
    void Promise.resolve(answer).then(({ position }) => grants.push(`k${n}:W${n}:${position}`));
  }
  return { service, timers, grants };
}

async function table(service: LocalLockService): Promise<string[]> {
  return (await service.snapshot()).map((s) => `${s.key}/${s.index}/${s.owner}/${s.isOwner ? 'owner' : 'waiter'}`);
}

test('a release-all of many entries runs in several slices with other clients answered between them, and ends as an unsliced one', async (t) => {
  const sliced = filled(SLICE);
  const whole = filled(Number.POSITIVE_INFINITY);

  const answer = sliced.service.releaseAll('X');
  t.not(typeof answer, 'number', 'not answered in the turn it arrived');
  let settled = false;
  void Promise.resolve(answer).then(() => (settled = true));
  let turns = 0;
  let othersAnswered = 0;
  while (!settled && turns < 10 * LOCKS) {
    // Another client's commands between two slices, answered at once.
    t.is(sliced.service.request(req(`other${turns}`, 'O'), true), 1);
    t.is(sliced.service.findOwner(`other${turns}`, 'i'), 'O');
    othersAnswered++;
    sliced.timers.turn();
    turns++;
    await Promise.resolve();
  }
  t.true(settled);
  t.is(await answer, LOCKS);
  t.true(turns >= Math.floor(LOCKS / SLICE) - 1, `${turns} turns`);
  t.true(othersAnswered > 1);

  t.is(whole.service.releaseAll('X'), LOCKS, 'one slice: answered at once, as before');
  for (let n = 0; n < turns; n++) whole.service.request(req(`other${n}`, 'O'), true);
  await new Promise((resolve) => setImmediate(resolve));
  t.deepEqual(await table(sliced.service), await table(whole.service));
  t.deepEqual(sliced.grants, whole.grants, 'the same grants, in the same order');
  t.is(sliced.grants.length, LOCKS);
});

test('a release-all in slices takes effect at once for every command that names one of its locks, or its owner', async (t) => {
  const { service, timers } = filled(SLICE);
  const loss = service.awaitLoss(`k${LOCKS - 1}`, 'i', 'X');
  const answer = service.releaseAll('X');
  t.not(typeof answer, 'number');
  // The last lock's turn would come last: a command naming it finds the release done there.
  t.is(service.findOwner(`k${LOCKS - 1}`, 'i'), `W${LOCKS - 1}`);
  t.is(service.location(`k${LOCKS - 2}`, 'i', 'X'), 0);
  t.is(service.request(req(`k${LOCKS - 3}`, 'X'), true), 2, 'X asks again: behind the waiter promoted');
  t.deepEqual(
    service.list(`k${LOCKS - 4}`, 10).map((c) => c.owner),
    [`W${LOCKS - 4}`],
  );
  t.is(await loss, LossReason.ReleasedAll);
  // A second release-all of X finds only what X asked for since.
  t.is(service.releaseAll('X'), 1);
  // The lock file is saved only once it is done: no half-done release in it.
  const saved = await Promise.all([
    service.snapshot(),
    (async () => {
      while (timers.turn()) await Promise.resolve();
    })(),
  ]);
  t.is(await answer, LOCKS);
  t.false(saved[0].some((s) => s.owner === 'X'));
  t.is(saved[0].filter((s) => s.isOwner).length, LOCKS);
});
