import { checkRandomGoals, type GoalCheck } from '../goals.js';
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

/** Issue 10's targets, marked yes or no. */
function renderRandomTargets(results: BenchResults): string[] {
  const met = (g: GoalCheck): string => (g.met === undefined ? '–' : g.met ? 'yes' : '**no**');
  return [
    '**Targets** (issue 10)',
    '',
    table(
      ['target', 'measured', 'met'],
      checkRandomGoals(results).map((g) => [g.goal, g.measured, met(g)]),
    ),
  ];
}
