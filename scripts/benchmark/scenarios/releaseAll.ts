import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { asciiBytes } from '../../../src/bytes.js';
import { saveLockFile } from '../../../src/files/lockFile.js';
import type { SavedLock } from '../../../src/locks/LockService.js';
import { Command } from '../../../src/protocol/constants.js';
import { decodeReply } from '../../../src/protocol/decodeReply.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { Histogram } from '../Histogram.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import type { Target } from '../targets/Target.js';

/** Serving load kept up while the release-all runs (as the expiry scenario's). */
const SERVING_LOAD = { connections: 50, depth: 1 };
/** Clients in this process asking one question at a time, each timed: the other clients' latency during the release-all. */
const PROBES = 4;
/** Restoring the lock file (two entries per lock) takes seconds; start-up may take this long. */
const RESTORE_LIMIT_MS = 180_000;
/** The serving load runs this long before the release-all is sent. */
const LEAD_MS = 1_500;
export const RELEASING_OWNER = asciiBytes('mass-owner');

/** Owners and waiters in the table, as the stats command (0x08) tells them. */
export async function tableCounts(client: BenchClient): Promise<{ owners: number; waiters: number }> {
  const [frame] = await client.call([{ command: Command.Stats }]);
  const stats = decodeReply(Command.Stats, frame!);
  return { owners: stats.owners, waiters: stats.contenders };
}

export interface ReleaseAllResult {
  readonly locks: number;
  /** From sending the release-all (0x06) to its reply. */
  readonly releaseMs: number;
  /** The reply's count, which saturates at 65,535. */
  readonly removed: number;
  /** Owners and waiters in the table before the release-all and after its reply (every waiter promoted: N owners, 0 waiters). */
  readonly tableBefore?: { readonly owners: number; readonly waiters: number };
  readonly tableAfter?: { readonly owners: number; readonly waiters: number };
  /** Questions of the probe clients sent and answered while the release-all ran, and their latency. */
  readonly probeCalls: number;
  readonly probeMs: { readonly p50: number; readonly p99: number; readonly max: number };
  /** Questions the probes sent before the release-all, for comparison. */
  readonly probeBeforeMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly load: LoadResult;
}

/**
 * Starts the server from a lock file in which one owner holds `releaseAllCount` locks with a
 * waiter behind each, runs a serving load and probe clients, sends that owner's release-all, and
 * measures how long other clients waited for their answers while it ran.
 *
 * The server's limits stay at their defaults but --max-locks: a lock file is restored whole, only
 * its entry count checked against --max-locks (so that is raised), never --max-locks-per-owner
 * (250,000 by default: the owner's 400,000 are more) nor --max-table-bytes (1 GiB: these 800,000
 * short-named entries are charged about 220 MB). The table counts before and after show that
 * the whole file was loaded and the whole release done.
 */
export async function runReleaseAll(target: Target, config: BenchConfig, log: (line: string) => void): Promise<ReleaseAllResult> {
  const count = config.releaseAllCount;
  const dir = await mkdtemp(join(tmpdir(), 'lockserver-bench-release-all-'));
  try {
    const lockFile = join(dir, 'held.locks');
    await saveLockFile(lockFile, savedLocks(count), 2 * count);
    const running = await target.start({ lockFile, maxLocks: count * 4, readyTimeoutMs: RESTORE_LIMIT_MS });
    try {
      return await measure(running.endpoints, running.pids[0]!, count, config, log);
    } finally {
      await running.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** One owner holding `count` locks (keys `released:<n>`, index `0`), a waiter (`waiter-<n>`) behind each. */
export function* savedLocks(count: number): IterableIterator<SavedLock> {
  for (let n = 0; n < count; n++) {
    const key = asciiBytes(`released:${n}`);
    const index = asciiBytes('0');
    const common = { key, index, priority: 0, ttl: 0, ttw: 0, remainingMs: null };
    yield { ...common, owner: RELEASING_OWNER, isOwner: true, token: n + 1 };
    yield { ...common, owner: asciiBytes(`waiter-${n}`), isOwner: false, token: 0 };
  }
}

async function measure(
  endpoints: Parameters<typeof runLoad>[0]['endpoints'],
  pid: number,
  count: number,
  config: BenchConfig,
  log: (line: string) => void,
): Promise<ReleaseAllResult> {
  const releaser = await BenchClient.connect(endpoints[0]!);
  const tableBefore = await tableCounts(releaser);
  const probes = await Promise.all(Array.from({ length: PROBES }, (_, n) => BenchClient.connect(endpoints[n % endpoints.length]!)));
  const during = new Histogram();
  const before = new Histogram();
  let releasing = false;
  let released = false;
  let stop = false;
  const probing = probes.map(async (probe, n) => {
    const key = asciiBytes(`probe:${n}`);
    while (!stop) {
      const releasingAtSend = releasing;
      const t0 = performance.now();
      await probe.call([{ command: Command.FindOwner, key, index: asciiBytes('0') }]);
      const us = (performance.now() - t0) * 1000;
      if (releasingAtSend && !released) during.record(us);
      else if (!releasingAtSend) before.record(us);
    }
  });
  let releaseMs: number;
  let removed: number;
  let tableAfter: { owners: number; waiters: number };
  const loading = runLoad({
    endpoints,
    protocol: 'lockserver',
    ...SERVING_LOAD,
    workers: config.workers,
    warmupMs: 300,
    durationMs: LEAD_MS + Math.max(3_000, count / 50),
    serverPid: pid,
  });
  try {
    await new Promise((resolve) => setTimeout(resolve, LEAD_MS));
    releasing = true;
    const t0 = performance.now();
    const [reply] = await releaser.call([{ command: Command.ReleaseAll, owner: RELEASING_OWNER }]);
    released = true;
    releaseMs = performance.now() - t0;
    removed = reply!.readUInt16BE(0);
    tableAfter = await tableCounts(releaser);
  } finally {
    stop = true;
    await Promise.all(probing).catch(() => {});
    for (const probe of probes) probe.close();
    releaser.close();
  }
  const load = await loading;
  const ms = (h: Histogram): { p50: number; p99: number; max: number } => ({ p50: h.percentile(50) / 1000, p99: h.percentile(99) / 1000, max: h.max / 1000 });
  const result: ReleaseAllResult = {
    locks: count,
    releaseMs,
    removed,
    tableBefore,
    tableAfter,
    probeCalls: during.count,
    probeMs: ms(during),
    probeBeforeMs: ms(before),
    load,
  };
  log(
    `release-all of ${count} locks with a waiter each: ${releaseMs.toFixed(0)} ms; other clients meanwhile p50 ${result.probeMs.p50.toFixed(2)} ms, ` +
      `p99 ${result.probeMs.p99.toFixed(2)} ms, worst ${result.probeMs.max.toFixed(2)} ms over ${during.count} calls (before: p99 ${result.probeBeforeMs.p99.toFixed(2)} ms); ` +
      `table ${tableBefore.owners}+${tableBefore.waiters} -> ${tableAfter.owners}+${tableAfter.waiters} owners+waiters`,
  );
  return result;
}
