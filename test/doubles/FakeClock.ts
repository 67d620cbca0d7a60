import type { Clock } from '../../src/runtime/Clock.js';

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
