import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { asciiBytes } from '../../../src/bytes.js';
import { saveLockFile } from '../../../src/files/lockFile.js';
import type { SavedLock } from '../../../src/locks/LockService.js';
import { Command, STAT_VALUE_LENGTH, STATS_REPLY_LENGTH } from '../../../src/protocol/constants.js';
import { STATS_FIELDS } from '../../../src/protocol/messages.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchConfig } from '../config.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import type { Target } from '../targets/Target.js';

/** Serving load kept up while the locks expire: the shape of the main latency target. */
const PROBE_LOAD = { connections: 50, depth: 1 };
const STATS_POLL_MS = 20;
const TIMELINE_SLOT_MS = 100;
/** Restoring a million saved locks takes seconds; start-up may take this long. */
const RESTORE_LIMIT_MS = 180_000;
const OWNERS_OFFSET = STATS_FIELDS.indexOf('owners') * STAT_VALUE_LENGTH;

export interface ExpiryResult {
  readonly locks: number;
  /** From the first expiry seen to the table being empty (stats polled every STATS_POLL_MS). */
  readonly sweepMs: number | undefined;
  readonly allExpired: boolean;
  /** Worst reply time of the serving load during the sweep, and before it (the baseline). */
  readonly worstDuringSweepMs: number | undefined;
  readonly worstBeforeSweepMs: number | undefined;
  /** Serving throughput during the sweep and before it. */
  readonly opsPerSecondDuringSweep: number | undefined;
  readonly opsPerSecondBeforeSweep: number | undefined;
  readonly worstStatsReplyMs: number;
  readonly load: LoadResult;
}

/**
 * Starts the server from a lock file in which every one of `expireCount` owners has the same few
 * seconds left, so they all expire in the same second, and measures how serving fares meanwhile.
 */
export async function runExpiry(target: Target, config: BenchConfig, log: (line: string) => void): Promise<ExpiryResult> {
  const count = config.expireCount;
  // Seconds left per lock: enough for the server to come up and the load to settle first.
  const remainingMs = count >= 500_000 ? 10_000 : 5_000;
  const dir = await mkdtemp(join(tmpdir(), 'lockserver-bench-expiry-'));
  try {
    const lockFile = join(dir, 'expiring.locks');
    await saveLockFile(lockFile, savedLocks(count, remainingMs), count);
    const running = await target.start({ lockFile, maxLocks: count * 2, readyTimeoutMs: RESTORE_LIMIT_MS });
    try {
      return await measure(running.endpoints, running.pids[0]!, running.readyAt, count, remainingMs, config, log);
    } finally {
      await running.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function* savedLocks(count: number, remainingMs: number): IterableIterator<SavedLock> {
  for (let n = 0; n < count; n++) {
    yield {
      key: asciiBytes(`expiring:${n}`),
      index: asciiBytes('0'),
      owner: asciiBytes(`holder-${n}`),
      priority: 0,
      ttl: Math.ceil(remainingMs / 1000),
      ttw: 0,
      isOwner: true,
      token: n + 1,
      remainingMs,
    };
  }
}

async function measure(
  endpoints: Parameters<typeof runLoad>[0]['endpoints'],
  pid: number,
  readyAt: number,
  count: number,
  remainingMs: number,
  config: BenchConfig,
  log: (line: string) => void,
): Promise<ExpiryResult> {
  const statsClient = await BenchClient.connect(endpoints[0]!);
  const samples: Array<{ at: number; owners: number }> = [];
  let worstStatsReplyMs = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const t0 = Date.now();
      const [reply] = await statsClient.call([{ command: Command.Stats }]);
      if (reply!.length !== STATS_REPLY_LENGTH) throw new Error('short stats reply');
      const at = Date.now();
      worstStatsReplyMs = Math.max(worstStatsReplyMs, at - t0);
      samples.push({ at, owners: reply!.readUInt32BE(OWNERS_OFFSET) });
      await new Promise((r) => setTimeout(r, STATS_POLL_MS));
    }
  })();
  let load: LoadResult;
  try {
    const windowEnd = readyAt + remainingMs + Math.max(5_000, count / 100);
    load = await runLoad({
      endpoints,
      protocol: 'lockserver',
      ...PROBE_LOAD,
      workers: config.workers,
      warmupMs: 300,
      durationMs: Math.max(1_000, windowEnd - Date.now() - 300),
      serverPid: pid,
      timelineSlotMs: TIMELINE_SLOT_MS,
    });
  } finally {
    polling = false;
    await poller.catch(() => {});
    statsClient.close();
  }

  // The serving load itself holds up to one lock per connection at any moment.
  const loadHolds = PROBE_LOAD.connections * PROBE_LOAD.depth;
  const firstExpiry = samples.find((s) => s.owners < count)?.at;
  const emptied = samples.find((s) => s.owners <= loadHolds)?.at;
  // The sweep began somewhere between the last full sample and the first short one.
  const lastFull = firstExpiry === undefined ? undefined : samples.filter((s) => s.at < firstExpiry).at(-1)?.at;
  const sweepFrom = lastFull ?? firstExpiry;
  const timeline = load.timeline!;
  const slotStart = (i: number): number => load.measureFrom + i * timeline.slotMs;
  const during: number[] = [];
  const before: number[] = [];
  timeline.ops.forEach((_, i) => {
    if (sweepFrom === undefined) return;
    const from = slotStart(i);
    const until = from + timeline.slotMs;
    if (until <= sweepFrom) before.push(i);
    else if (from <= (emptied ?? Number.POSITIVE_INFINITY)) during.push(i);
  });
  const worst = (slots: number[]): number | undefined => (slots.length === 0 ? undefined : Math.max(...slots.map((i) => timeline.worstUs[i] ?? 0)) / 1000);
  const rate = (slots: number[]): number | undefined =>
    slots.length === 0 ? undefined : slots.reduce((sum, i) => sum + (timeline.ops[i] ?? 0), 0) / ((slots.length * timeline.slotMs) / 1000);
  const result: ExpiryResult = {
    locks: count,
    sweepMs: sweepFrom !== undefined && emptied !== undefined ? emptied - sweepFrom : undefined,
    allExpired: emptied !== undefined,
    worstDuringSweepMs: worst(during),
    worstBeforeSweepMs: worst(before),
    opsPerSecondDuringSweep: rate(during),
    opsPerSecondBeforeSweep: rate(before),
    worstStatsReplyMs,
    load,
  };
  log(
    `expiry of ${count}: sweep ${result.sweepMs ?? '?'} ms, worst reply during sweep ${result.worstDuringSweepMs?.toFixed(1) ?? '?'} ms ` +
      `(before: ${result.worstBeforeSweepMs?.toFixed(1) ?? '?'} ms)`,
  );
  return result;
}
