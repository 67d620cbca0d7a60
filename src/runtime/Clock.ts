import { performance } from 'node:perf_hooks';

/**
 * Where lock logic reads the time. Milliseconds on a monotonic scale: only differences matter,
 * so a wall-clock step (NTP, DST) never expires or extends a lock.
 */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => performance.now() };
