import { performance } from 'node:perf_hooks';

/**
 * Where lock logic reads the time. Milliseconds on a monotonic scale: only differences matter,
 * so a wall-clock step (NTP, DST) never expires or extends a lock.
 */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => performance.now() };

/** A clock that moves only when told to; for tests and simulations. */
export class FakeClock implements Clock {
  constructor(private current = 0) {}

  now(): number {
    return this.current;
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError('a clock only moves forward');
    this.current += ms;
  }
}
