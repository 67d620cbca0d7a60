import test from 'ava';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import type { Timers } from '../../src/runtime/Timers.js';

// README: "Expired entries disappear within a fraction of a second of their deadline." The
// service is driven exactly as the real scheduler would drive it: its periodic task runs at the
// interval the service itself asks for, on a fake clock, so no wall time is involved.

/** Runs the periodic task every `interval` ms of fake time, as setInterval would. */
class IntervalScheduler implements Timers {
  after(): () => void {
    throw new Error('the local service sets no one-shot timers');
  }

  interval: number | undefined;
  private task: (() => void) | undefined;
  private readonly soonQueue: Array<() => void> = [];

  constructor(private readonly clock: FakeClock) {}

  every(ms: number, task: () => void): () => void {
    this.interval = ms;
    this.task = task;
    return () => {
      this.task = undefined;
    };
  }

  soon(task: () => void): void {
    this.soonQueue.push(task);
  }

  /** Moves fake time on by one interval and runs what is due then. */
  step(): void {
    this.clock.advance(this.interval!);
    this.task?.();
    for (let i = 0; this.soonQueue.length > 0 && i < 10_000; i++) this.soonQueue.shift()!();
  }
}

const FRACTION_OF_A_SECOND_MS = 1000;

for (const ttl of [1, 2, 7]) {
  test(`an owner with TTL ${ttl} s is gone less than a second after its deadline`, async (t) => {
    const clock = new FakeClock(12_345.6);
    const scheduler = new IntervalScheduler(clock);
    const service = new LocalLockService(clock, scheduler);
    t.teardown(() => service.close());
    t.true(scheduler.interval !== undefined && scheduler.interval > 0, 'the service registers a periodic sweep');
    service.request({ key: 'k', index: 'i', owner: 'o', ttl, ttw: 0, priority: 0 }, true);
    const deadline = clock.now() + ttl * 1000;
    // Bounded: far more steps than any sensible interval needs to reach deadline + 1 s.
    for (let steps = 0; (await service.snapshot()).length > 0 && steps < 100_000; steps++) {
      scheduler.step();
    }
    t.deepEqual(await service.snapshot(), [], 'the entry expired');
    const late = clock.now() - deadline;
    t.true(late >= 0, 'not before its deadline');
    t.true(late < FRACTION_OF_A_SECOND_MS, `gone ${late} ms after its deadline (sweep every ${scheduler.interval} ms)`);
  });
}

test('a waiter whose TTW passed is gone less than a second after its deadline', async (t) => {
  const clock = new FakeClock();
  const scheduler = new IntervalScheduler(clock);
  const service = new LocalLockService(clock, scheduler);
  t.teardown(() => service.close());
  service.request({ key: 'k', index: 'i', owner: 'holder', ttl: 0, ttw: 0, priority: 0 }, true);
  service.request({ key: 'k', index: 'i', owner: 'waiter', ttl: 0, ttw: 1, priority: 0 }, true);
  const deadline = clock.now() + 1000;
  for (let steps = 0; (await service.snapshot()).length > 1 && steps < 100_000; steps++) scheduler.step();
  t.is((await service.snapshot()).length, 1, 'only the holder is left');
  const late = clock.now() - deadline;
  t.true(late >= 0 && late < FRACTION_OF_A_SECOND_MS, `gone ${late} ms after its deadline`);
});
