import type { LoadResult } from '../load/runLoad.js';
import type { BenchResults } from '../results.js';
import type { RandomKeysRow } from '../scenarios/randomKeys.js';
import { cpu, mb, num, table } from './format.js';

/** The random-keys workload (issue 10): ours, the null server and Redis under one generator. */
export function renderRandomKeys(results: BenchResults): string[] {
  const out: string[] = [];
  const rows = results.random ?? [];
  out.push(
    `**Random keys** (issue 10): each connection alternates request and release on a key drawn uniformly from a key space shared by all ` +
      `connections (index "row", owner "client<N>"); Redis gets the same generator with SET key owner NX PX 30000, then DEL. ` +
      `Fresh servers per key space; each cell is the median of ${results.config.repeats} round(s), every column right after the others in each round. ` +
      `"Server CPU µs/op": CPU time the server process used per op during the window, which depends far less than ops/s on what else the machine runs. ` +
      `"Contended": replies that found the key held by another connection (queued / SET NX refused), ours then Redis.`,
  );
  out.push('');
  const cellOf = (row: RandomKeysRow, lane: string, c: number, p: number): LoadResult | undefined =>
    row.cells.find((x) => x.lane === lane && x.shape.connections === c && x.shape.depth === p)?.result;
  const lines: string[][] = [];
  for (const row of rows) {
    for (const shape of results.config.randomLoads) {
      const ours = cellOf(row, 'ours', shape.connections, shape.depth);
      const nul = cellOf(row, 'null-server', shape.connections, shape.depth);
      const redis = cellOf(row, 'redis', shape.connections, shape.depth);
      lines.push([
        num(row.keySpace),
        num(shape.connections),
        num(shape.depth),
        num(ours?.opsPerSecond),
        num(ours?.latencyMs.p99, 3),
        cpu(ours?.serverCpuCores),
        num(nul?.opsPerSecond),
        ours && nul ? num(ours.opsPerSecond / nul.opsPerSecond, 2) : '–',
        num(redis?.opsPerSecond),
        ours && redis ? num(ours.opsPerSecond / redis.opsPerSecond, 2) : '–',
        `${num(cpuMicros(ours), 2)} / ${num(cpuMicros(nul), 2)} / ${num(cpuMicros(redis), 2)}`,
        `${num(ours?.contended)} / ${num(redis?.contended)}`,
      ]);
    }
  }
  out.push(
    table(
      [
        'key space',
        'conns',
        'pipeline',
        'ours ops/s',
        'ours p99 ms',
        'server CPU',
        'null server ops/s',
        'ours / null',
        'Redis SET NX PX+DEL ops/s',
        'ours / Redis',
        'server CPU µs/op: ours / null / Redis',
        'contended',
      ],
      lines,
    ),
  );
  out.push('');
  out.push(...renderRandomTargets(results), '');
  for (const row of rows) {
    out.push(
      `- ${num(row.keySpace)} keys: our RSS ${mb(row.rssBytes.started)} MB at start, ${mb(row.rssBytes.afterLoad)} MB when the load stopped, ` +
        `${mb(row.rssBytes.settled)} MB ${num(row.settleMs / 1000)} s later (no lock held).`,
    );
  }
  return out;
}

/** Server CPU time per op in µs, from a load result. */
function cpuMicros(result: LoadResult | undefined): number | undefined {
  if (result === undefined || result.serverCpuCores === undefined || result.opsPerSecond === 0) return undefined;
  return (result.serverCpuCores / result.opsPerSecond) * 1e6;
}

/** Issue 10's targets, from the random-keys rows (and the held-locks rows for the 1M-lock RSS). */
function renderRandomTargets(results: BenchResults): string[] {
  const rows = results.random ?? [];
  const at = (keySpace: number, lane: string, depth: number): LoadResult | undefined =>
    rows.find((r) => r.keySpace === keySpace)?.cells.find((c) => c.lane === lane && c.shape.connections === 50 && c.shape.depth === depth)?.result;
  const ratio = (a: LoadResult | undefined, b: LoadResult | undefined): number | undefined =>
    a === undefined || b === undefined ? undefined : a.opsPerSecond / b.opsPerSecond;
  const check = (goal: string, measured: number | undefined, met: (value: number) => boolean, text: (value: number) => string): string[] => [
    goal,
    measured === undefined ? 'not measured' : text(measured),
    measured === undefined ? '–' : met(measured) ? 'yes' : '**no**',
  ];
  const settled = rows.find((r) => r.keySpace === 10_000_000)?.rssBytes.settled;
  const million = results.held?.find((r) => r.held === 1_000_000)?.rssBytes.filled;
  return [
    '**Targets** (issue 10)',
    '',
    table(
      ['target', 'measured', 'met'],
      [
        check(
          '50×16, 100k random keys: ours / Redis (same cycle, same generator) ≥ 1.0',
          ratio(at(100_000, 'ours', 16), at(100_000, 'redis', 16)),
          (v) => v >= 1,
          (v) => num(v, 2),
        ),
        check(
          '50×1, 100k random keys: ours / null server ≥ 0.95',
          ratio(at(100_000, 'ours', 1), at(100_000, 'null-server', 1)),
          (v) => v >= 0.95,
          (v) => num(v, 2),
        ),
        check(
          'RSS after a 10M-key random run, settled, no lock held ≤ 100 MB',
          settled,
          (v) => v <= 100 * 2 ** 20,
          (v) => `${mb(v)} MB`,
        ),
        check(
          'RSS with 1,000,000 held locks ≤ 300 MB',
          million,
          (v) => v <= 300 * 2 ** 20,
          (v) => `${mb(v)} MB`,
        ),
      ],
    ),
  ];
}
