import { execFile } from 'node:child_process';
import type { BenchConfig } from '../config.js';
import { which } from '../processes.js';
import { runRedisBenchmark, type RedisBenchmarkResult } from '../redisBenchmark.js';
import type { RedisTarget } from '../targets/RedisTarget.js';
import { runThroughputMatrix, type ThroughputRow } from './throughput.js';

export interface RedisResult {
  readonly skipped?: string;
  readonly version?: string;
  /** redis-benchmark, SET key val NX PX (one command per op). */
  readonly redisBenchmark: Array<RedisBenchmarkResult | { readonly connections: number; readonly pipeline: number; readonly error: string }>;
  /** Our load generator, SET NX PX + DEL cycles: the same client cost as against our server. */
  readonly ourGenerator: ThroughputRow[];
}

/** Redis at the same connection counts and pipelining; skipped (not failed) when not installed. */
export async function runRedis(target: RedisTarget, config: BenchConfig, log: (line: string) => void): Promise<RedisResult> {
  const unavailable = await target.unavailableReason();
  const benchmark = config.redisBenchmark ?? (await which('redis-benchmark'));
  if (unavailable !== undefined || benchmark === undefined) {
    const skipped = unavailable ?? 'redis-benchmark is not installed';
    log(`redis: skipped (${skipped})`);
    return { skipped, redisBenchmark: [], ourGenerator: [] };
  }
  const version = await redisVersion(await target.binary());
  const rows: RedisResult['redisBenchmark'] = [];
  const running = await target.start();
  try {
    for (const connections of config.connections) {
      for (const pipeline of config.pipelines) {
        try {
          const row = await runRedisBenchmark(benchmark, running.endpoints[0]!, connections, pipeline, config.durationMs);
          rows.push(row);
          log(`redis-benchmark c=${connections} P=${pipeline}: ${Math.round(row.opsPerSecond)} ops/s`);
        } catch (error) {
          rows.push({ connections, pipeline, error: (error as Error).message });
          log(`redis-benchmark c=${connections} P=${pipeline}: failed: ${(error as Error).message}`);
        }
      }
    }
  } finally {
    await running.stop();
  }
  const ourGenerator = await runThroughputMatrix(target, config, log);
  return { version, redisBenchmark: rows, ourGenerator };
}

async function redisVersion(binary: string | undefined): Promise<string | undefined> {
  if (binary === undefined) return undefined;
  return new Promise((resolve) => {
    execFile(binary, ['--version'], (error, stdout) => resolve(error ? undefined : stdout.match(/v=(\S+)/)?.[1]));
  });
}
