import type { LoadResult } from '../load/runLoad.js';
import type { BenchResults } from '../results.js';
import type { ThroughputRow } from '../scenarios/matrix.js';
import { cpu, mb, num, table } from './format.js';

function rowFor(rows: ThroughputRow[] | undefined, connections: number, depth: number): LoadResult | undefined {
  return rows?.find((r) => r.connections === connections && r.depth === depth)?.result;
}

/** The single-node matrix: ours beside Redis and the null server at every connection count and pipeline. */
export function renderThroughput(results: BenchResults): string[] {
  const out: string[] = [];
  out.push(
    `**Throughput and latency**: request+release cycles on distinct keys, closed loop; one op = one command and its reply. ` +
      `Each cell is the median of ${results.config.repeats} round(s); in each round every column ran right after the others.`,
  );
  out.push('');
  const shapes: Array<[number, number]> = [];
  for (const c of results.config.connections) for (const p of results.config.pipelines) shapes.push([c, p]);
  const redisSkipped = results.redis?.skipped;
  out.push(
    table(
      [
        'conns',
        'pipeline',
        'ops/s',
        'p50 ms',
        'p99 ms',
        'p99.9 ms',
        'server CPU',
        'gen CPU',
        'stolen',
        'Redis SET NX PX (redis-benchmark) ops/s',
        'ours / Redis',
        'Redis SET NX PX+DEL (our generator) ops/s',
        'null server (generator ceiling) ops/s',
      ],
      shapes.map(([c, p]) => {
        const ours = rowFor(results.throughput, c, p);
        const bench = results.redis?.redisBenchmark.find((r) => r.connections === c && r.pipeline === p);
        const benchOps = bench !== undefined && 'opsPerSecond' in bench ? bench.opsPerSecond : undefined;
        const gen = rowFor(results.redis?.ourGenerator, c, p);
        const ceiling = rowFor(results.ceiling, c, p);
        const skipped = redisSkipped !== undefined ? 'skipped' : '–';
        return [
          num(c),
          num(p),
          num(ours?.opsPerSecond),
          num(ours?.latencyMs.p50, 3),
          num(ours?.latencyMs.p99, 3),
          num(ours?.latencyMs.p999, 3),
          cpu(ours?.serverCpuCores),
          cpu(ours?.generatorCpuCores),
          cpu(ours?.hostStolenShare),
          benchOps === undefined ? skipped : num(benchOps),
          ours !== undefined && benchOps !== undefined ? num(ours.opsPerSecond / benchOps, 2) : skipped,
          gen === undefined ? skipped : num(gen.opsPerSecond),
          num(ceiling?.opsPerSecond),
        ];
      }),
    ),
  );
  if (redisSkipped !== undefined) out.push('', `Redis: skipped (${redisSkipped}).`);
  const errors = (results.throughput ?? []).reduce((sum, r) => sum + (r.result?.errors ?? 0), 0);
  out.push(
    '',
    `Unexpected replies in our runs: ${num(errors)}. CPU columns: share of one core used by our server and by the load generator during the window; stolen: share of the machine's CPU time the hypervisor gave to others in that window.`,
  );
  out.push('');
  return out;
}

/** Held locks: fill rate, RSS, and the loads on other keys beside the empty table's. */
export function renderHeld(results: BenchResults): string[] {
  const out: string[] = [];
  const held = results.held ?? [];
  out.push('**Scale: held locks** (each on its own key with its own owner, no expiry), then the loads on other keys.');
  out.push('');
  const shapes = results.config.heldLoads;
  const empty = held.find((r) => r.held === 0);
  out.push(
    table(
      [
        'held locks',
        'fill ops/s',
        'RSS after fill MB',
        'RSS after load MB',
        ...shapes.flatMap((s) => [`${s.connections}×${s.depth} ops/s`, `${s.connections}×${s.depth} p99 ms`, 'vs empty']),
      ],
      held.map((r) => [
        num(r.held),
        r.held === 0 ? '–' : num(r.fillPerSecond),
        mb(r.rssBytes.filled),
        mb(r.rssBytes.afterLoad),
        ...shapes.flatMap((s) => {
          const load = r.loads.find((l) => l.shape.connections === s.connections && l.shape.depth === s.depth)?.result;
          const base = empty?.loads.find((l) => l.shape.connections === s.connections && l.shape.depth === s.depth)?.result;
          return [num(load?.opsPerSecond), num(load?.latencyMs.p99, 2), load && base ? `${num((load.opsPerSecond / base.opsPerSecond) * 100)}%` : '–'];
        }),
      ]),
    ),
  );
  out.push('');
  return out;
}

/** One line each for list, fairness, mass expiry, release-all and idle connections, as far as they ran. */
export function scaleFacts(results: BenchResults): string[] {
  const facts: string[] = [];
  if (results.list !== undefined) {
    const l = results.list;
    facts.push(
      `List (0x07) of one key with ${num(l.entries)} entries (${num(l.indexes)} indexes): p50 ${num(l.ms.p50, 2)} ms, max ${num(l.ms.max, 2)} ms over ${l.calls} calls, reply ${num(l.replyBytes)} bytes.`,
    );
  }
  if (results.fairness !== undefined) {
    const f = results.fairness;
    facts.push(
      `Fairness: one connection pipelines ${num(f.listRequests)} lists of a ${num(f.entries)}-entry key (${num(f.listReplyBytes)} bytes each) in one write and reads at full speed (${num(f.heavyMs / 1000, 1)} s); ` +
        `another sending stats every 10 ms waited p50 ${num(f.statsMs.p50, 2)} ms, p99 ${num(f.statsMs.p99, 2)} ms, worst ${num(f.statsMs.max, 2)} ms over ${num(f.statsCalls)} calls.`,
    );
  }
  if (results.expiry !== undefined) {
    const e = results.expiry;
    facts.push(
      `Expiry of ${num(e.locks)} locks due in the same millisecond: ${e.allExpired ? `table empty after ${num(e.sweepMs)} ms` : 'the sweep did not finish in the window'}; ` +
        `worst reply of a 50-connection serving load during the sweep ${num(e.worstDuringSweepMs, 1)} ms (before it: ${num(e.worstBeforeSweepMs, 1)} ms); ` +
        `serving ${num(e.opsPerSecondDuringSweep)} ops/s during vs ${num(e.opsPerSecondBeforeSweep)} before.`,
    );
  }
  if (results.releaseAll !== undefined) {
    const r = results.releaseAll;
    facts.push(
      `Release-all of ${num(r.locks)} locks with a waiter behind each: answered after ${num(r.releaseMs)} ms; meanwhile, beside a 50-connection serving load, ` +
        `other clients were answered p50 ${num(r.probeMs.p50, 2)} ms, p99 ${num(r.probeMs.p99, 2)} ms, worst ${num(r.probeMs.max, 2)} ms over ${num(r.probeCalls)} calls ` +
        `(before it: p99 ${num(r.probeBeforeMs.p99, 2)} ms)` +
        (r.tableBefore !== undefined && r.tableAfter !== undefined
          ? `; owners + waiters ${num(r.tableBefore.owners)} + ${num(r.tableBefore.waiters)} before, ${num(r.tableAfter.owners)} + ${num(r.tableAfter.waiters)} after.`
          : '.'),
    );
  }
  if (results.idle !== undefined) {
    const i = results.idle;
    facts.push(
      `${num(i.opened)} idle connections: RSS ${mb(i.rssBytes.before)} → ${mb(i.rssBytes.idle)} MB (${num((i.bytesPerConnection ?? NaN) / 1024, 1)} KiB each); ` +
        `a busy client meanwhile: p50 ${num(i.probeMs.p50, 3)} ms, p99 ${num(i.probeMs.p99, 3)} ms.`,
    );
  }
  return facts;
}
