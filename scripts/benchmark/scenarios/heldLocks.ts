import { performance } from 'node:perf_hooks';
import { asciiBytes } from '../../../src/bytes.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import type { BenchConfig, LoadShape } from '../config.js';
import { fillLocks } from '../fill.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import { rssBytes } from '../processes.js';
import type { Target } from '../targets/Target.js';

/** Pause after filling, so the RSS read is of the settled heap, not of a collection in progress. */
const SETTLE_MS = 1_000;

export interface HeldLocksRow {
  readonly held: number;
  readonly fillSeconds: number;
  readonly fillPerSecond: number;
  /** Server RSS after start, after filling, and after the loads ran. */
  readonly rssBytes: { readonly started?: number; readonly filled?: number; readonly afterLoad?: number };
  readonly loads: ReadonlyArray<{ readonly shape: LoadShape; readonly result: LoadResult }>;
}

/**
 * For each table size: a fresh server, `held` locks taken (each its own key and owner, no expiry —
 * the most memory per lock), then the throughput loads on other keys with the table that full.
 */
export async function runHeldLocks(target: Target, config: BenchConfig, log: (line: string) => void): Promise<HeldLocksRow[]> {
  const rows: HeldLocksRow[] = [];
  for (const held of config.held) {
    const running = await target.start({ maxLocks: Math.max(held * 2, 1_000_000) });
    try {
      const pid = running.pids[0]!;
      const started = await rssBytes(pid);
      const client = await BenchClient.connect(running.endpoints[0]!);
      const t0 = performance.now();
      try {
        await fillLocks(client, held, (n) => ({
          command: Command.Request,
          key: asciiBytes(`held:${n}`),
          index: asciiBytes('0'),
          owner: asciiBytes(`holder-${n}`),
          ttl: 0,
          ttw: 0,
          priority: 0,
        }));
      } finally {
        client.close();
      }
      const fillSeconds = (performance.now() - t0) / 1000;
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      const filled = await rssBytes(pid);
      const loads: Array<{ shape: LoadShape; result: LoadResult }> = [];
      for (const shape of config.heldLoads) {
        const result = await runLoad({
          endpoints: running.endpoints,
          protocol: target.protocol,
          connections: shape.connections,
          depth: shape.depth,
          workers: config.workers,
          warmupMs: config.warmupMs,
          durationMs: config.durationMs,
          serverPid: pid,
        });
        loads.push({ shape, result });
      }
      const afterLoad = await rssBytes(pid);
      rows.push({
        held,
        fillSeconds,
        fillPerSecond: held / fillSeconds,
        rssBytes: { started, filled, afterLoad },
        loads,
      });
      log(
        `held ${held}: RSS ${mb(filled)} MB, ` +
          loads.map((l) => `${l.shape.connections}x${l.shape.depth} ${Math.round(l.result.opsPerSecond)} ops/s`).join(', '),
      );
    } finally {
      await running.stop();
    }
  }
  return rows;
}

function mb(bytes: number | undefined): string {
  return bytes === undefined ? '?' : (bytes / 2 ** 20).toFixed(0);
}
