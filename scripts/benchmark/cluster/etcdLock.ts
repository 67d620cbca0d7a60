/**
 * etcd's own lock as a Node user would take it: the `etcd3` client's lock recipe,
 * `client.lock(name).acquire()` then `.release()`, in a closed loop per locker. The recipe fails
 * at once when the name is held (it does not wait), so each locker has its own name: this
 * measures etcd's lock at its best, with no contention at all.
 */
import { performance } from 'node:perf_hooks';
import { Etcd3 } from 'etcd3';
import { Histogram } from '../Histogram.js';
import { cpuBetween, readCpu } from '../processes.js';

/** Longest one acquire or release may take before the cycle counts as failed. */
const CALL_DEADLINE_MS = 10_000;

export interface EtcdLockResult {
  readonly lockers: number;
  readonly durationMs: number;
  readonly cycles: number;
  readonly cyclesPerSecond: number;
  /** Two operations (acquire, release) per cycle, as the issue counts them. */
  readonly opsPerSecond: number;
  readonly failures: number;
  /** Latency of one whole cycle (acquire + release). */
  readonly cycleMs: { readonly p50: number; readonly p99: number; readonly p999: number };
  /** Share of one core used by each etcd member, and by this process (the etcd3 client), in the window. */
  readonly etcdCpuCores: ReadonlyArray<number | undefined>;
  readonly clientCpuCores: number;
  /** Share of the machine's CPU time the hypervisor took in the window (see LoadResult). */
  readonly hostStolenShare?: number;
}

let runs = 0;

export async function runEtcdLock(spec: {
  readonly endpoints: readonly string[];
  readonly lockers: number;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly etcdPids: ReadonlyArray<number | undefined>;
}): Promise<EtcdLockResult> {
  const client = new Etcd3({ hosts: [...spec.endpoints], defaultCallOptions: () => ({ deadline: Date.now() + CALL_DEADLINE_MS }) });
  const run = `${process.pid.toString(36)}-${(runs++).toString(36)}`;
  const histogram = new Histogram();
  let cycles = 0;
  let failures = 0;
  const t0 = performance.now();
  const from = t0 + spec.warmupMs;
  const until = from + spec.durationMs;
  const cpuFrom = (async () => {
    await new Promise((r) => setTimeout(r, spec.warmupMs));
    return { cpu: await readCpu(spec.etcdPids), own: process.cpuUsage() };
  })();
  const cpuUntil = (async () => {
    await new Promise((r) => setTimeout(r, spec.warmupMs + spec.durationMs));
    return { cpu: await readCpu(spec.etcdPids), at: performance.now() };
  })();
  const locker = async (i: number): Promise<void> => {
    const name = `bench-etcd-lock/${run}/${i}`;
    while (performance.now() < until) {
      const started = performance.now();
      try {
        const lock = client.lock(name);
        await lock.acquire();
        await lock.release();
      } catch {
        failures++;
        continue;
      }
      const now = performance.now();
      if (now >= from && now < until) {
        cycles++;
        histogram.record((now - started) * 1000);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: spec.lockers }, (_, i) => locker(i)));
  } finally {
    client.close();
  }
  const a = await cpuFrom;
  const b = await cpuUntil;
  const seconds = spec.durationMs / 1000;
  const own = process.cpuUsage(a.own);
  const cyclesPerSecond = cycles / seconds;
  const { cores, stolen } = cpuBetween(a.cpu, b.cpu, seconds);
  return {
    lockers: spec.lockers,
    durationMs: spec.durationMs,
    cycles,
    cyclesPerSecond,
    opsPerSecond: cyclesPerSecond * 2,
    failures,
    cycleMs: { p50: histogram.percentile(50) / 1000, p99: histogram.percentile(99) / 1000, p999: histogram.percentile(99.9) / 1000 },
    etcdCpuCores: cores,
    // Includes the few ms after the window until the last cycles finished: close enough for a share.
    clientCpuCores: (own.user + own.system) / 1e6 / ((b.at - from) / 1000),
    ...(stolen !== undefined ? { hostStolenShare: stolen } : {}),
  };
}
