import { performance } from 'node:perf_hooks';

/**
 * One clock for lockctl and its watchdog, two processes: CLOCK_MONOTONIC (process.hrtime), which
 * every process on the machine reads alike and no wall-clock step moves. performance.now(), the
 * client library's clock, counts from each process's own start, so a time passed from one process
 * to the other goes in this clock's terms. A deadline sent as an instant, not as a time left, stays
 * right however late the message is read.
 */

const NS_PER_MS = 1_000_000n;

/** Milliseconds on CLOCK_MONOTONIC (since boot). */
export function monotonicNow(): number {
  const ns = process.hrtime.bigint();
  return Number(ns / NS_PER_MS) + Number(ns % NS_PER_MS) / 1e6;
}

/** A performance.now() time of this process on CLOCK_MONOTONIC; null for Infinity (no deadline). */
export function monotonicFromPerformance(time: number): number | null {
  if (time === Infinity) return null;
  return time + (monotonicNow() - performance.now());
}
