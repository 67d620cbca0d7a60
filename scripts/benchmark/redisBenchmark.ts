import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { CYCLE_TTL_SECONDS } from './load/cycles.js';
import type { Endpoint } from './load/messages.js';

const run = promisify(execFile);
/** Keys drawn at random from this many, so SET NX almost always finds its key free. */
const KEYSPACE = 100_000_000;
/** Requests in the short first run that estimates the rate, so the real run lasts about as asked. */
const CALIBRATION_REQUESTS = 20_000;
const MIN_REQUESTS = 2_000;
const MAX_REQUESTS = 50_000_000;

/** One result row of `redis-benchmark --csv`. */
export interface RedisBenchmarkRow {
  readonly test: string;
  readonly rps: number;
  /** Latency columns in milliseconds, as redis-benchmark names them (p50_latency_ms, …). */
  readonly latencyMs: Readonly<Record<string, number>>;
}

/** Splits one CSV line whose fields are all double-quoted (what redis-benchmark writes). */
function csvFields(line: string): string[] {
  const fields: string[] = [];
  const pattern = /"((?:[^"]|"")*)"|([^,]+)/g;
  for (const match of line.matchAll(pattern)) fields.push(match[1] !== undefined ? match[1].replace(/""/g, '"') : match[2]!);
  return fields;
}

/** Parses `redis-benchmark --csv` output: a header line, then one line per test. */
export function parseRedisBenchmarkCsv(output: string): RedisBenchmarkRow[] {
  const lines = output.split(/\r?\n/).filter((l) => l.startsWith('"'));
  const header = lines.findIndex((l) => l.startsWith('"test"'));
  if (header < 0) throw new Error(`no CSV header in redis-benchmark output: ${output.slice(0, 200)}`);
  const names = csvFields(lines[header]!);
  return lines.slice(header + 1).map((line) => {
    const fields = csvFields(line);
    const latencyMs: Record<string, number> = {};
    names.forEach((name, i) => {
      if (name.endsWith('_latency_ms')) latencyMs[name] = Number(fields[i]);
    });
    return { test: fields[0]!, rps: Number(fields[names.indexOf('rps')]), latencyMs };
  });
}

export interface RedisBenchmarkResult {
  readonly connections: number;
  readonly pipeline: number;
  readonly requests: number;
  readonly opsPerSecond: number;
  readonly latencyMs: Readonly<Record<string, number>>;
}

/**
 * `redis-benchmark … SET key val NX PX ttl` at the given connections and pipelining, sized to run
 * for about `durationMs` (a short calibration run measures the rate first).
 */
export async function runRedisBenchmark(
  binary: string,
  endpoint: Endpoint,
  connections: number,
  pipeline: number,
  durationMs: number,
): Promise<RedisBenchmarkResult> {
  const once = async (requests: number, limitMs: number): Promise<RedisBenchmarkRow> => {
    const args = [
      '-h',
      endpoint.host,
      '-p',
      String(endpoint.port),
      '-c',
      String(connections),
      '-P',
      String(pipeline),
      '-n',
      String(requests),
      '-r',
      String(KEYSPACE),
      '--csv',
      'SET',
      'lock:__rand_int__',
      'owner',
      'NX',
      'PX',
      String(CYCLE_TTL_SECONDS * 1000),
    ];
    const { stdout } = await run(binary, args, { timeout: limitMs, killSignal: 'SIGKILL', maxBuffer: 1 << 20 });
    const row = parseRedisBenchmarkCsv(stdout)[0];
    if (row === undefined || !(row.rps > 0)) throw new Error(`redis-benchmark gave no result: ${stdout.slice(0, 200)}`);
    return row;
  };
  const clamp = (n: number): number => Math.round(Math.min(MAX_REQUESTS, Math.max(MIN_REQUESTS, n)));
  const probe = await once(clamp(Math.max(connections * pipeline * 20, CALIBRATION_REQUESTS)), 60_000);
  const requests = clamp(probe.rps * (durationMs / 1000));
  // Allow a generous margin over the expected time, but never an unbounded wait.
  const row = await once(requests, durationMs * 4 + 30_000);
  return { connections, pipeline, requests, opsPerSecond: row.rps, latencyMs: row.latencyMs };
}
