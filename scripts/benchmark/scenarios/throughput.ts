import type { BenchConfig } from '../config.js';
import { runLoad, type LoadResult } from '../load/runLoad.js';
import type { Target } from '../targets/Target.js';

export interface ThroughputRow {
  readonly target: string;
  readonly connections: number;
  readonly depth: number;
  readonly result?: LoadResult;
  readonly error?: string;
}

/**
 * Request+release cycles on distinct keys at every (connections, pipeline depth) pair, against one
 * started instance of the target. A failing pair is reported as such; the others still run.
 */
export async function runThroughputMatrix(target: Target, config: BenchConfig, log: (line: string) => void): Promise<ThroughputRow[]> {
  const rows: ThroughputRow[] = [];
  const running = await target.start({ maxConnections: Math.max(...config.connections) + 100 });
  try {
    for (const connections of config.connections) {
      for (const depth of config.pipelines) {
        try {
          const result = await runLoad({
            endpoints: running.endpoints,
            protocol: target.protocol,
            connections,
            depth,
            workers: config.workers,
            warmupMs: config.warmupMs,
            durationMs: config.durationMs,
            serverPid: running.pids[0],
          });
          rows.push({ target: target.name, connections, depth, result });
          log(
            `${target.name} c=${connections} P=${depth}: ${Math.round(result.opsPerSecond)} ops/s, ` +
              `p50 ${result.latencyMs.p50.toFixed(3)} ms, p99 ${result.latencyMs.p99.toFixed(3)} ms, errors ${result.errors}`,
          );
        } catch (error) {
          rows.push({ target: target.name, connections, depth, error: (error as Error).message });
          log(`${target.name} c=${connections} P=${depth}: failed: ${(error as Error).message}`);
        }
      }
    }
  } finally {
    await running.stop();
  }
  return rows;
}
