import type { BenchConfig, LoadShape } from '../config.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import { rssBytes } from '../processes.js';
import type { RunningTarget, Target } from '../targets/Target.js';
import { median } from './matrix.js';

/** One (key space, shape) cell of one lane: the median repeat, and every repeat's rate. */
export interface RandomKeysCell {
  readonly lane: string;
  readonly shape: LoadShape;
  readonly result?: LoadResult;
  readonly runs: readonly number[];
  readonly error?: string;
}

export interface RandomKeysRow {
  readonly keySpace: number;
  readonly cells: readonly RandomKeysCell[];
  /** Our server's RSS when it started, right after the last load, and `settleMs` later (no lock held). */
  readonly rssBytes: { readonly started?: number; readonly afterLoad?: number; readonly settled?: number };
  readonly settleMs: number;
}

/** Lanes of the random-keys workload, in the order each round runs them. */
export const RANDOM_LANES = ['ours', 'null-server', 'redis'] as const;

/**
 * Keys spread as real users spread them: every connection alternates request and release on a key
 * drawn uniformly from `keySpace` keys shared by all connections (index "row", owner
 * "client<N>"); Redis gets the same generator with SET key owner NX PX 30000, then DEL. For each
 * key space a fresh server of each kind; each round runs every lane right after the others, and
 * each cell reports its median round. Then our server's RSS once the load has stopped and
 * `settleMs` later: emptied keys must not pin memory.
 */
export async function runRandomKeys(
  targets: { readonly ours: Target; readonly ceiling?: Target; readonly redis?: Target },
  config: BenchConfig,
  log: (line: string) => void,
): Promise<RandomKeysRow[]> {
  const rows: RandomKeysRow[] = [];
  const redisAvailable = targets.redis !== undefined && (await targets.redis.unavailableReason()) === undefined;
  for (const keySpace of config.keySpaces) {
    const started: RunningTarget[] = [];
    try {
      const maxConnections = Math.max(...config.randomLoads.map((s) => s.connections)) + 100;
      const lanes: Array<{ name: string; target: Target; running: RunningTarget }> = [];
      const ours = await targets.ours.start({ maxConnections });
      started.push(ours);
      lanes.push({ name: 'ours', target: targets.ours, running: ours });
      const startedRss = await rssBytes(ours.pids[0]!);
      if (targets.ceiling !== undefined) {
        const running = await targets.ceiling.start({ maxConnections });
        started.push(running);
        lanes.push({ name: 'null-server', target: targets.ceiling, running });
      }
      if (redisAvailable) {
        const running = await targets.redis.start({ maxConnections });
        started.push(running);
        lanes.push({ name: 'redis', target: targets.redis, running });
      }
      const cells = new Map<string, { runs: LoadResult[]; error?: string }>();
      const cellKey = (lane: string, shape: LoadShape): string => `${lane}:${shape.connections}x${shape.depth}`;
      for (const shape of config.randomLoads) {
        for (let repeat = 0; repeat < config.repeats; repeat++) {
          for (const lane of lanes) {
            const cell = cells.get(cellKey(lane.name, shape)) ?? { runs: [] };
            cells.set(cellKey(lane.name, shape), cell);
            if (cell.error !== undefined) continue;
            try {
              const result = await runLoad({
                endpoints: lane.running.endpoints,
                protocol: lane.target.protocol,
                connections: shape.connections,
                depth: shape.depth,
                workers: config.workers,
                warmupMs: config.warmupMs,
                durationMs: config.durationMs,
                serverPid: lane.running.pids[0],
                keySpace,
                seed: config.seed + repeat,
              });
              cell.runs.push(result);
              log(
                `random ${keySpace} keys ${lane.name} c=${shape.connections} P=${shape.depth} #${repeat + 1}: ` +
                  `${Math.round(result.opsPerSecond)} ops/s, server CPU ${result.serverCpuCores === undefined ? '?' : ((result.serverCpuCores / result.opsPerSecond) * 1e6).toFixed(2)} µs/op ` +
                  `(contended ${result.contended}, errors ${result.errors})`,
              );
            } catch (error) {
              cell.error = (error as Error).message;
              log(`random ${keySpace} keys ${lane.name} c=${shape.connections} P=${shape.depth}: failed: ${cell.error}`);
            }
          }
        }
      }
      const afterLoad = await rssBytes(ours.pids[0]!);
      // The other servers go first, so that the settle time is ours alone.
      for (const running of started.splice(1)) await running.stop();
      await new Promise((resolve) => setTimeout(resolve, config.rssSettleMs));
      const settled = await rssBytes(ours.pids[0]!);
      log(`random ${keySpace} keys: our RSS ${mbText(afterLoad)} MB after the load, ${mbText(settled)} MB ${config.rssSettleMs / 1000} s later`);
      rows.push({
        keySpace,
        cells: lanes.flatMap((lane) =>
          config.randomLoads.map((shape) => {
            const cell = cells.get(cellKey(lane.name, shape))!;
            return {
              lane: lane.name,
              shape,
              result: median(cell.runs, (r) => r.opsPerSecond),
              runs: cell.runs.map((r) => r.opsPerSecond),
              ...(cell.error !== undefined ? { error: cell.error } : {}),
            };
          }),
        ),
        rssBytes: { started: startedRss, afterLoad, settled },
        settleMs: config.rssSettleMs,
      });
    } finally {
      for (const running of started) await running.stop();
    }
  }
  return rows;
}

function mbText(bytes: number | undefined): string {
  return bytes === undefined ? '?' : (bytes / 2 ** 20).toFixed(0);
}
