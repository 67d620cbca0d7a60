import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService, SWEEP_BUDGET } from '../../src/locks/LocalLockService.js';
import type { Timers } from '../../src/runtime/Timers.js';

/** A scheduler the test turns by hand: tick() runs the periodic task, then every "soon" task. */
class ManualScheduler implements Timers {
  after(): () => void {
    throw new Error('the local service sets no one-shot timers');
  }

  private periodic: Array<() => void> = [];
  private queue: Array<() => void> = [];

  every(_ms: number, task: () => void): () => void {
    this.periodic.push(task);
    return () => {
      this.periodic = this.periodic.filter((t) => t !== task);
    };
  }

  soon(task: () => void): void {
    this.queue.push(task);
  }

  tick(): void {
    for (const task of this.periodic) task();
  }

  runSoon(): number {
    let ran = 0;
    while (this.queue.length > 0 && ran < 10_000) {
      this.queue.shift()!();
      ran++;
    }
    return ran;
  }
}

test('a mass expiry is spread over turns of SWEEP_BUDGET entries each', async (t) => {
  const clock = new FakeClock();
  const scheduler = new ManualScheduler();
  const expired: number[] = [];
  const service = new LocalLockService(clock, scheduler, { onExpired: (n) => expired.push(n) });
  const total = SWEEP_BUDGET * 2 + 7;
  for (let i = 0; i < total; i++) {
    service.request({ key: `k${i}`, index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }, true);
  }
  clock.advance(1000);
  scheduler.tick();
  t.deepEqual(expired, [SWEEP_BUDGET], 'one budget in the first turn');
  t.is(scheduler.runSoon(), 2, 'then one more turn per budget, until none is left');
  t.deepEqual(expired, [SWEEP_BUDGET, SWEEP_BUDGET, 7]);
  t.deepEqual(await service.counts(), { owners: 0, waiters: 0 });
});

test('after close, no sweep runs and the state stays readable', async (t) => {
  const clock = new FakeClock();
  const scheduler = new ManualScheduler();
  const service = new LocalLockService(clock, scheduler);
  service.request({ key: 'k', index: 'i', owner: 'o', ttl: 1, ttw: 1, priority: 0 }, true);
  await service.close();
  clock.advance(5000);
  scheduler.tick();
  t.is((await service.snapshot()).length, 1);
});

test('every entry whose time ran out is counted as expired, waiters dropped at a promotion too', async (t) => {
  const clock = new FakeClock();
  const scheduler = new ManualScheduler();
  const expired: number[] = [];
  const service = new LocalLockService(clock, scheduler, { onExpired: (n) => expired.push(n) });
  const request = (key: string, owner: string, ttl: number, ttw: number) => service.request({ key, index: 'i', owner, ttl, ttw, priority: 0 }, true);
  // k1: owner and waiter run out together; the owner's expiry drops the waiter as it promotes.
  request('k1', 'a', 1, 1);
  request('k1', 'b', 1, 1);
  // k2: the waiter's wait runs out, then the owner releases before any sweep: the waiter is dropped.
  request('k2', 'a', 10, 1);
  request('k2', 'b', 10, 1);
  clock.advance(1000);
  t.is(service.release('k2', 'i', 'a'), 1);
  t.is(service.findOwner('k2', 'i'), '', 'a waiter whose wait ran out is not promoted');
  scheduler.tick();
  t.is(
    expired.reduce((sum, n) => sum + n, 0),
    3,
    'a at k1, b at k1, b at k2',
  );
  t.deepEqual(await service.counts(), { owners: 0, waiters: 0 });
});
