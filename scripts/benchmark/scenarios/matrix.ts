import { execFile } from 'node:child_process';
import type { BenchConfig } from '../config.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import { which } from '../processes.js';
import { runRedisBenchmark, type RedisBenchmarkResult } from '../redisBenchmark.js';
import type { RedisTarget } from '../targets/RedisTarget.js';
import type { RunningTarget, Target } from '../targets/Target.js';

export interface ThroughputRow {
  readonly target: string;
  readonly connections: number;
  readonly depth: number;
  /** The repeat with the median rate. */
  readonly result?: LoadResult;
  /** ops/s of every repeat, in the order run. */
  readonly runs?: readonly number[];
  readonly error?: string;
}

export type RedisBenchmarkRow =
  (RedisBenchmarkResult & { readonly runs: readonly number[] }) | { readonly connections: number; readonly pipeline: number; readonly error: string };

export interface RedisResult {
  readonly skipped?: string;
  readonly version?: string;
  /** redis-benchmark, SET key val NX PX (one command per op). */
  readonly redisBenchmark: RedisBenchmarkRow[];
  /** Our load generator, SET NX PX + DEL cycles: the same client cost as against our server. */
  readonly ourGenerator: ThroughputRow[];
}

export interface MatrixResult {
  throughput?: ThroughputRow[];
  ceiling?: ThroughputRow[];
  redis?: RedisResult;
}

/** The element whose `value` is the median (the lower middle one for an even count). */
export function median<T>(items: readonly T[], value: (item: T) => number): T | undefined {
  const sorted = [...items].sort((a, b) => value(a) - value(b));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

/** One way of loading one shape, repeated and reduced to its median. */
interface Lane {
  readonly name: string;
  measure(connections: number, depth: number): Promise<{ readonly opsPerSecond: number }>;
}

/**
 * The throughput/latency matrix, side by side: for every (connections, pipeline depth) each
 * selected lane runs right after the others (our server, the null server, redis-benchmark, Redis
 * under our generator), and the whole round is repeated, so that drift in the machine's speed
 * between minutes lands on every lane alike. Each cell reports its median repeat.
 */
export async function runMatrix(
  targets: { readonly ours?: Target; readonly ceiling?: Target; readonly redis?: RedisTarget },
  config: BenchConfig,
  log: (line: string) => void,
): Promise<MatrixResult> {
  const result: MatrixResult = {};
  const started: RunningTarget[] = [];
  const lanes: Array<Lane & { readonly cells: Map<string, Array<{ opsPerSecond: number }>>; readonly errors: Map<string, string> }> = [];
  const maxConnections = Math.max(...config.connections) + 100;
  const start = async (target: Target): Promise<RunningTarget> => {
    const running = await target.start({ maxConnections });
    started.push(running);
    return running;
  };
  const loadLane = (name: string, target: Target, running: RunningTarget): Lane => ({
    name,
    measure: (connections, depth) =>
      runLoad({
        endpoints: running.endpoints,
        protocol: target.protocol,
        connections,
        depth,
        workers: config.workers,
        warmupMs: config.warmupMs,
        durationMs: config.durationMs,
        serverPid: running.pids[0],
      }),
  });
  const addLane = (lane: Lane): void => void lanes.push({ ...lane, cells: new Map(), errors: new Map() });

  try {
    if (targets.ours !== undefined) addLane(loadLane('ours', targets.ours, await start(targets.ours)));
    if (targets.ceiling !== undefined) addLane(loadLane('ceiling', targets.ceiling, await start(targets.ceiling)));
    let redisVersionText: string | undefined;
    if (targets.redis !== undefined) {
      const unavailable = await targets.redis.unavailableReason();
      const benchmark = config.redisBenchmark ?? (await which('redis-benchmark'));
      if (unavailable !== undefined || benchmark === undefined) {
        const skipped = unavailable ?? 'redis-benchmark is not installed';
        log(`redis: skipped (${skipped})`);
        result.redis = { skipped, redisBenchmark: [], ourGenerator: [] };
      } else {
        redisVersionText = await redisVersion(await targets.redis.binary());
        const running = await start(targets.redis);
        addLane({
          name: 'redis-benchmark',
          measure: (connections, depth) => runRedisBenchmark(benchmark, running.endpoints[0]!, connections, depth, config.durationMs),
        });
        addLane(loadLane('redis', targets.redis, running));
      }
    }

    for (const connections of config.connections) {
      for (const depth of config.pipelines) {
        const cell = `${connections}x${depth}`;
        for (let repeat = 0; repeat < config.repeats; repeat++) {
          for (const lane of lanes) {
            if (lane.errors.has(cell)) continue;
            try {
              const measured = await lane.measure(connections, depth);
              lane.cells.set(cell, [...(lane.cells.get(cell) ?? []), measured]);
              log(`${lane.name} c=${connections} P=${depth} #${repeat + 1}: ${Math.round(measured.opsPerSecond)} ops/s`);
            } catch (error) {
              lane.errors.set(cell, (error as Error).message);
              log(`${lane.name} c=${connections} P=${depth}: failed: ${(error as Error).message}`);
            }
          }
        }
      }
    }

    const rowsOf = (name: string, target: string): ThroughputRow[] => {
      const lane = lanes.find((l) => l.name === name)!;
      const rows: ThroughputRow[] = [];
      for (const connections of config.connections) {
        for (const depth of config.pipelines) {
          const cell = `${connections}x${depth}`;
          const runs = lane.cells.get(cell) ?? [];
          const error = lane.errors.get(cell);
          rows.push({
            target,
            connections,
            depth,
            result: median(runs, (r) => r.opsPerSecond) as LoadResult | undefined,
            runs: runs.map((r) => r.opsPerSecond),
            ...(error !== undefined ? { error } : {}),
          });
        }
      }
      return rows;
    };
    if (targets.ours !== undefined) result.throughput = rowsOf('ours', targets.ours.name);
    if (targets.ceiling !== undefined) result.ceiling = rowsOf('ceiling', targets.ceiling.name);
    if (targets.redis !== undefined && result.redis === undefined) {
      const benchmarkRows: RedisBenchmarkRow[] = rowsOf('redis-benchmark', 'redis-benchmark').map((row) => {
        const chosen = row.result as unknown as RedisBenchmarkResult | undefined;
        return chosen === undefined
          ? { connections: row.connections, pipeline: row.depth, error: row.error ?? 'no result' }
          : { ...chosen, runs: row.runs ?? [] };
      });
      result.redis = { version: redisVersionText, redisBenchmark: benchmarkRows, ourGenerator: rowsOf('redis', 'redis') };
    }
    return result;
  } finally {
    for (const running of started) await running.stop();
  }
}

function redisVersion(binary: string | undefined): Promise<string | undefined> {
  if (binary === undefined) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    execFile(binary, ['--version'], (error, stdout) => resolve(error ? undefined : stdout.match(/v=(\S+)/)?.[1]));
  });
}
