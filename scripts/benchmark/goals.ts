import type { BenchResults } from './results.js';

/** The performance targets of issue 3 (benchmarks only; never asserted in tests). */
export const GOALS = {
  minRatioVsRedis: 1.0,
  minPipelinedOpsPerSecond: 600_000,
  maxP99Ms: 2,
  maxRssBytesAtMillion: 600 * 2 ** 20,
  maxSlowdownAtMillion: 0.2,
  maxListMs: 20,
  maxExpiryStallMs: 100,
} as const;

export interface GoalCheck {
  readonly goal: string;
  readonly measured: string;
  /** undefined when the run did not measure it (scenario skipped or run at another size). */
  readonly met: boolean | undefined;
}

const MILLION = 1_000_000;

function fmt(value: number, digits = 0): string {
  return value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

/** Checks each target against what the run measured. */
export function checkGoals(results: BenchResults): GoalCheck[] {
  const checks: GoalCheck[] = [];
  const ours = (connections: number, depth: number) =>
    results.throughput?.find((r) => r.connections === connections && r.depth === depth)?.result;
  const notMeasured = (goal: string, why: string): GoalCheck => ({ goal, measured: `not measured (${why})`, met: undefined });

  const unpipelined = ours(50, 1);
  const redis = results.redis?.redisBenchmark.find((r) => r.connections === 50 && r.pipeline === 1);
  const ratioGoal = `50 connections unpipelined: ops/s ≥ Redis SET NX PX (ratio ≥ ${GOALS.minRatioVsRedis})`;
  if (unpipelined === undefined) checks.push(notMeasured(ratioGoal, 'throughput scenario not run'));
  else if (redis === undefined || !('opsPerSecond' in redis)) checks.push(notMeasured(ratioGoal, results.redis?.skipped ?? 'Redis not run'));
  else {
    const ratio = unpipelined.opsPerSecond / redis.opsPerSecond;
    checks.push({
      goal: ratioGoal,
      measured: `${fmt(unpipelined.opsPerSecond)} vs ${fmt(redis.opsPerSecond)} ops/s = ${fmt(ratio, 2)}`,
      met: ratio >= GOALS.minRatioVsRedis,
    });
  }

  const pipelined = ours(50, 16);
  const pipelinedGoal = `50 connections pipelined 16: ≥ ${fmt(GOALS.minPipelinedOpsPerSecond)} ops/s`;
  if (pipelined === undefined) checks.push(notMeasured(pipelinedGoal, 'throughput scenario not run'));
  else
    checks.push({
      goal: pipelinedGoal,
      measured: `${fmt(pipelined.opsPerSecond)} ops/s`,
      met: pipelined.opsPerSecond >= GOALS.minPipelinedOpsPerSecond,
    });

  const p99Goal = `p99 < ${GOALS.maxP99Ms} ms at 50 connections (unpipelined)`;
  if (unpipelined === undefined) checks.push(notMeasured(p99Goal, 'throughput scenario not run'));
  else
    checks.push({
      goal: p99Goal,
      measured: `${fmt(unpipelined.latencyMs.p99, 2)} ms`,
      met: unpipelined.latencyMs.p99 < GOALS.maxP99Ms,
    });

  const empty = results.held?.find((r) => r.held === 0);
  const million = results.held?.find((r) => r.held >= MILLION);
  const rssGoal = `1M held locks in < ${GOALS.maxRssBytesAtMillion / 2 ** 20} MB RSS`;
  const slowGoal = `1M held locks: throughput within ${GOALS.maxSlowdownAtMillion * 100}% of the empty table`;
  if (million === undefined) {
    checks.push(notMeasured(rssGoal, 'no 1M-lock run'), notMeasured(slowGoal, 'no 1M-lock run'));
  } else {
    const rss = million.rssBytes.afterLoad ?? million.rssBytes.filled;
    checks.push(
      rss === undefined
        ? notMeasured(rssGoal, 'RSS unreadable')
        : { goal: rssGoal, measured: `${fmt(rss / 2 ** 20)} MB`, met: rss < GOALS.maxRssBytesAtMillion },
    );
    if (empty === undefined) checks.push(notMeasured(slowGoal, 'no empty-table run'));
    else {
      const ratios = million.loads.map((load) => {
        const base = empty.loads.find((l) => l.shape.connections === load.shape.connections && l.shape.depth === load.shape.depth);
        return { shape: load.shape, ratio: base === undefined ? undefined : load.result.opsPerSecond / base.result.opsPerSecond };
      });
      const known = ratios.filter((r): r is { shape: (typeof r)['shape']; ratio: number } => r.ratio !== undefined);
      checks.push({
        goal: slowGoal,
        measured: known.map((r) => `${r.shape.connections}x${r.shape.depth}: ${fmt(r.ratio * 100)}%`).join(', ') || 'no comparable load',
        met: known.length === 0 ? undefined : known.every((r) => r.ratio >= 1 - GOALS.maxSlowdownAtMillion),
      });
    }
  }

  const listGoal = `list (0x07) of a 10k-entry key in < ${GOALS.maxListMs} ms (median call)`;
  if (results.list === undefined) checks.push(notMeasured(listGoal, 'list scenario not run'));
  else if (results.list.entries < 10_000) checks.push(notMeasured(listGoal, `run with ${results.list.entries} entries`));
  else
    checks.push({
      goal: listGoal,
      measured: `p50 ${fmt(results.list.ms.p50, 1)} ms, max ${fmt(results.list.ms.max, 1)} ms`,
      met: results.list.ms.p50 < GOALS.maxListMs,
    });

  const expiryGoal = `expiry of 1M locks without a serving stall > ${GOALS.maxExpiryStallMs} ms`;
  const expiry = results.expiry;
  if (expiry === undefined) checks.push(notMeasured(expiryGoal, 'expiry scenario not run'));
  else if (expiry.locks < MILLION) checks.push(notMeasured(expiryGoal, `run with ${fmt(expiry.locks)} locks`));
  else if (expiry.worstDuringSweepMs === undefined || !expiry.allExpired)
    checks.push({ goal: expiryGoal, measured: 'the sweep was not observed to finish', met: false });
  else
    checks.push({
      goal: expiryGoal,
      measured: `worst reply ${fmt(expiry.worstDuringSweepMs, 1)} ms during a ${fmt(expiry.sweepMs ?? 0)} ms sweep`,
      met: expiry.worstDuringSweepMs <= GOALS.maxExpiryStallMs,
    });
  return checks;
}
