import type { BenchResults } from './results.js';
import type { LoadResult } from './load/runLoad.js';
import type { ClusterThroughputRow } from './scenarios/clusterThroughput.js';
import type { WaitersCase } from './scenarios/idleWaiters.js';
import { mb, num } from './report/format.js';

/**
 * Every target the bench checks a run against, by the issue that set it (benchmarks only; never
 * asserted in tests). The report marks each met, missed, or not measured.
 */
export const GOALS = {
  /** Issue 3: one node. */
  single: {
    minRatioVsRedis: 1.0,
    minPipelinedOpsPerSecond: 600_000,
    maxP99Ms: 2,
    maxRssBytesAtMillion: 600 * 2 ** 20,
    maxSlowdownAtMillion: 0.2,
    maxListMs: 20,
    maxExpiryStallMs: 100,
  },
  /** Issue 10: random keys, beside Redis and the null server under one generator. */
  randomKeys: {
    minRatioVsRedisAt50x16: 1.0,
    minRatioVsNullAt50x1: 0.95,
    maxSettledRssBytesAfter10M: 100 * 2 ** 20,
    maxRssBytesAtMillion: 300 * 2 ** 20,
  },
  /** Issue 9: the cluster against etcd's lock recipe (the etcd3 npm client), failover and scale. */
  cluster: {
    minRatioVsEtcdLockAt48: 10,
    minRatioVsEtcdLockAt480: 30,
    maxP99MsAt48: 15,
    minPipelinedOpsPerSecond: 100_000,
    maxBackAfterEtcdLeaderKillMs: 2_000,
    maxRestartReadyMs: 15_000,
    maxEtcdBytes: 500 * 2 ** 20,
  },
  /**
   * Issue 36: our nodes as they run by default (every node forwarding its batches to the leader's
   * sequencer), against etcd driven by its own Go client.
   */
  clusterSequencer: {
    minRatioVsGoLockAt48: 1.7,
    minRatioVsGoLockAt480: 5,
    /** p99 strictly under this, at 48 connections unpipelined. */
    maxP99MsAt48: 40,
  },
  /** Issue 37: idle waiters by 0x0B add nothing to an idle cluster's load on etcd. */
  idleWaiters: {
    /** Slack beyond the two idle windows' own spread within which a rate counts as unchanged (per second). */
    slackPerSecond: 0.5,
  },
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

/** Checks each single-node target (issue 3) against what the run measured. */
export function checkGoals(results: BenchResults): GoalCheck[] {
  const checks: GoalCheck[] = [];
  const ours = (connections: number, depth: number) => results.throughput?.find((r) => r.connections === connections && r.depth === depth)?.result;
  const notMeasured = (goal: string, why: string): GoalCheck => ({ goal, measured: `not measured (${why})`, met: undefined });

  const unpipelined = ours(50, 1);
  const redis = results.redis?.redisBenchmark.find((r) => r.connections === 50 && r.pipeline === 1);
  const ratioGoal = `50 connections unpipelined: ops/s ≥ Redis SET NX PX (ratio ≥ ${GOALS.single.minRatioVsRedis})`;
  if (unpipelined === undefined) checks.push(notMeasured(ratioGoal, 'throughput scenario not run'));
  else if (redis === undefined || !('opsPerSecond' in redis)) checks.push(notMeasured(ratioGoal, results.redis?.skipped ?? 'Redis not run'));
  else {
    const ratio = unpipelined.opsPerSecond / redis.opsPerSecond;
    checks.push({
      goal: ratioGoal,
      measured: `${fmt(unpipelined.opsPerSecond)} vs ${fmt(redis.opsPerSecond)} ops/s = ${fmt(ratio, 2)}`,
      met: ratio >= GOALS.single.minRatioVsRedis,
    });
  }

  const pipelined = ours(50, 16);
  const pipelinedGoal = `50 connections pipelined 16: ≥ ${fmt(GOALS.single.minPipelinedOpsPerSecond)} ops/s`;
  if (pipelined === undefined) checks.push(notMeasured(pipelinedGoal, 'throughput scenario not run'));
  else
    checks.push({
      goal: pipelinedGoal,
      measured: `${fmt(pipelined.opsPerSecond)} ops/s`,
      met: pipelined.opsPerSecond >= GOALS.single.minPipelinedOpsPerSecond,
    });

  const p99Goal = `p99 < ${GOALS.single.maxP99Ms} ms at 50 connections (unpipelined)`;
  if (unpipelined === undefined) checks.push(notMeasured(p99Goal, 'throughput scenario not run'));
  else
    checks.push({
      goal: p99Goal,
      measured: `${fmt(unpipelined.latencyMs.p99, 2)} ms`,
      met: unpipelined.latencyMs.p99 < GOALS.single.maxP99Ms,
    });

  const empty = results.held?.find((r) => r.held === 0);
  const million = results.held?.find((r) => r.held >= MILLION);
  const rssGoal = `1M held locks in < ${GOALS.single.maxRssBytesAtMillion / 2 ** 20} MB RSS`;
  const slowGoal = `1M held locks: throughput within ${GOALS.single.maxSlowdownAtMillion * 100}% of the empty table`;
  if (million === undefined) {
    checks.push(notMeasured(rssGoal, 'no 1M-lock run'), notMeasured(slowGoal, 'no 1M-lock run'));
  } else {
    const rss = million.rssBytes.afterLoad ?? million.rssBytes.filled;
    checks.push(
      rss === undefined
        ? notMeasured(rssGoal, 'RSS unreadable')
        : { goal: rssGoal, measured: `${fmt(rss / 2 ** 20)} MB`, met: rss < GOALS.single.maxRssBytesAtMillion },
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
        met: known.length === 0 ? undefined : known.every((r) => r.ratio >= 1 - GOALS.single.maxSlowdownAtMillion),
      });
    }
  }

  const listGoal = `list (0x07) of a 10k-entry key in < ${GOALS.single.maxListMs} ms (median call)`;
  if (results.list === undefined) checks.push(notMeasured(listGoal, 'list scenario not run'));
  else if (results.list.entries < 10_000) checks.push(notMeasured(listGoal, `run with ${results.list.entries} entries`));
  else
    checks.push({
      goal: listGoal,
      measured: `p50 ${fmt(results.list.ms.p50, 1)} ms, max ${fmt(results.list.ms.max, 1)} ms`,
      met: results.list.ms.p50 < GOALS.single.maxListMs,
    });

  const expiryGoal = `expiry of 1M locks without a serving stall > ${GOALS.single.maxExpiryStallMs} ms`;
  const expiry = results.expiry;
  if (expiry === undefined) checks.push(notMeasured(expiryGoal, 'expiry scenario not run'));
  else if (expiry.locks < MILLION) checks.push(notMeasured(expiryGoal, `run with ${fmt(expiry.locks)} locks`));
  else if (expiry.worstDuringSweepMs === undefined || !expiry.allExpired)
    checks.push({ goal: expiryGoal, measured: 'the sweep was not observed to finish', met: false });
  else
    checks.push({
      goal: expiryGoal,
      measured: `worst reply ${fmt(expiry.worstDuringSweepMs, 1)} ms during a ${fmt(expiry.sweepMs ?? 0)} ms sweep`,
      met: expiry.worstDuringSweepMs <= GOALS.single.maxExpiryStallMs,
    });
  return checks;
}

/** Checks each cluster target of issue 9 against what the run measured. */
export function checkClusterGoals(results: BenchResults): GoalCheck[] {
  const cluster = results.cluster;
  const checks: GoalCheck[] = [];
  const notMeasured = (goal: string, why: string): GoalCheck => ({ goal, measured: `not measured (${why})`, met: undefined });
  const skipped = cluster?.skipped;
  const ours = (connections: number, depth: number) => cluster?.throughput?.find((r) => r.connections === connections && r.depth === depth)?.result;
  const etcd = (lockers: number) => cluster?.etcdLock?.find((r) => r.lockers === lockers)?.result;
  const why = (scenario: string): string => skipped ?? `${scenario} not run`;

  for (const [connections, min] of [
    [48, GOALS.cluster.minRatioVsEtcdLockAt48],
    [480, GOALS.cluster.minRatioVsEtcdLockAt480],
  ] as const) {
    const goal = `cluster ops/s ÷ etcd lock recipe ops/s, same run, ${connections} connections / lockers, unpipelined: ≥ ${min}×`;
    const a = ours(connections, 1);
    const b = etcd(connections);
    if (a === undefined || b === undefined) checks.push(notMeasured(goal, why('cluster-throughput and cluster-etcd-lock')));
    else if (b.opsPerSecond === 0)
      checks.push({ goal, measured: `${fmt(a.opsPerSecond)} vs 0 ops/s (no etcd lock cycle finished in the window)`, met: undefined });
    else {
      const ratio = a.opsPerSecond / b.opsPerSecond;
      checks.push({ goal, measured: `${fmt(a.opsPerSecond)} vs ${fmt(b.opsPerSecond)} ops/s = ${fmt(ratio, 1)}×`, met: ratio >= min });
    }
  }
  const p99Goal = `cluster p99 at 48 connections, unpipelined: ≤ ${GOALS.cluster.maxP99MsAt48} ms`;
  const at48 = ours(48, 1);
  checks.push(
    at48 === undefined
      ? notMeasured(p99Goal, why('cluster-throughput'))
      : { goal: p99Goal, measured: `${fmt(at48.latencyMs.p99, 1)} ms`, met: at48.latencyMs.p99 <= GOALS.cluster.maxP99MsAt48 },
  );
  const pipeGoal = `cluster ops/s at 48 connections, pipeline 16: ≥ ${fmt(GOALS.cluster.minPipelinedOpsPerSecond)}`;
  const piped = ours(48, 16);
  checks.push(
    piped === undefined
      ? notMeasured(pipeGoal, why('cluster-throughput'))
      : { goal: pipeGoal, measured: `${fmt(piped.opsPerSecond)} ops/s`, met: piped.opsPerSecond >= GOALS.cluster.minPipelinedOpsPerSecond },
  );
  const failover = cluster?.failover;
  const leaderGoal = `service back after the etcd leader is killed: ≤ ${GOALS.cluster.maxBackAfterEtcdLeaderKillMs / 1000} s (every client served again)`;
  const nodeGoal = `a node is killed: no interruption for the other nodes' clients (none waits > 1 s)`;
  const leaderEvent = failover?.events.find((e) => e.event.startsWith('etcd leader'));
  const nodeEvent = failover?.events.find((e) => e.event.includes('killed (-9), then restarted'));
  checks.push(
    leaderEvent === undefined
      ? notMeasured(leaderGoal, why('cluster-failover'))
      : {
          goal: leaderGoal,
          measured:
            leaderEvent.survivorsBackMs === undefined
              ? 'not every client served again within 30 s'
              : `every client served again ${fmt(leaderEvent.survivorsBackMs)} ms after the kill; longest wait ${fmt(leaderEvent.survivorsWorstWaitMs)} ms`,
          met: leaderEvent.survivorsBackMs !== undefined && leaderEvent.survivorsBackMs <= GOALS.cluster.maxBackAfterEtcdLeaderKillMs,
        },
  );
  checks.push(
    nodeEvent === undefined
      ? notMeasured(nodeGoal, why('cluster-failover'))
      : {
          goal: nodeGoal,
          measured: `longest wait ${fmt(nodeEvent.survivorsWorstWaitMs)} ms (steady load before: ${fmt(nodeEvent.baselineWorstWaitMs)} ms)`,
          met: nodeEvent.survivorsInterrupted === 0,
        },
  );
  const wrongGoal = 'no wrong reply during the failures';
  checks.push(
    failover === undefined
      ? notMeasured(wrongGoal, why('cluster-failover'))
      : { goal: wrongGoal, measured: `${fmt(failover.wrongReplies)} wrong of ${fmt(failover.cycles)} cycles`, met: failover.wrongReplies === 0 },
  );
  const scale = cluster?.scale;
  const readyGoal = `a node restarted into a cluster holding 1M locks is ready: ≤ ${GOALS.cluster.maxRestartReadyMs / 1000} s`;
  if (scale === undefined) checks.push(notMeasured(readyGoal, why('cluster-scale')));
  else if (scale.restartReadyMs === undefined) checks.push({ goal: readyGoal, measured: 'the restarted node never became ready', met: false });
  else {
    const measured = `${fmt(scale.restartReadyMs / 1000, 1)} s with ${fmt(scale.held)} locks`;
    checks.push({ goal: readyGoal, measured, met: scale.held >= MILLION ? scale.restartReadyMs <= GOALS.cluster.maxRestartReadyMs : undefined });
  }
  const dbGoal = `etcd database after 10 minutes of full load: ≤ ${GOALS.cluster.maxEtcdBytes / 2 ** 20} MB`;
  if (scale === undefined) checks.push(notMeasured(dbGoal, why('cluster-scale')));
  else {
    const dir = Math.max(...scale.soak.etcdBytesAfter);
    // Results of runs before the db file was measured on its own have only the data dir.
    const dbKnown = scale.soak.etcdDbBytesAfter !== undefined;
    const db = dbKnown ? Math.max(...scale.soak.etcdDbBytesAfter) : dir;
    const measured = dbKnown
      ? `bbolt db ${fmt(db / 2 ** 20)} MB (data dir ${fmt(dir / 2 ** 20)} MB), largest member, after ${fmt(scale.soak.seconds)} s`
      : `data dir ${fmt(dir / 2 ** 20)} MB (db file not measured separately), largest member, after ${fmt(scale.soak.seconds)} s`;
    // bbolt's file never shrinks without a defrag: past the limit early is past it at 10 minutes too.
    const met = db > GOALS.cluster.maxEtcdBytes ? false : scale.soak.seconds >= 600 ? true : undefined;
    checks.push({ goal: dbGoal, measured, met });
  }
  return checks;
}

/**
 * Checks each issue-36 target against what the run measured (same run, same etcd, same windows),
 * each line with the figure of the null nodes committing through one sequencer beside ours: the
 * ceiling of the design at that shape, so a miss reads as ours or as the platform.
 */
export function checkClusterSequencerGoals(results: BenchResults): GoalCheck[] {
  const cluster = results.cluster;
  const notMeasured = (goal: string, why: string): GoalCheck => ({ goal, measured: `not measured (${why})`, met: undefined });
  const go = cluster?.etcdGo;
  const unpipelined = (rows: readonly ClusterThroughputRow[] | undefined, connections: number): ClusterThroughputRow | undefined =>
    rows?.find((r) => r.connections === connections && r.depth === 1);
  const oursWhy = (connections: number): string =>
    cluster?.skipped ?? (cluster?.throughput === undefined ? 'cluster-throughput not run' : `no ${connections}-connection × pipeline 1 row in this run`);
  const goWhy = (connections: number): string =>
    cluster?.skipped ?? go?.skipped ?? (go === undefined ? 'cluster-etcd-go not run' : `no Go-client lock row at ${connections} in this run`);
  /** The one-sequencer null nodes at `connections` × 1, as `of` puts their result: " (one-sequencer ceiling …)". */
  const ceiling = (connections: number, of: (r: LoadResult) => string): string => {
    const row = unpipelined(cluster?.sequencedCeiling, connections);
    const said =
      row?.result !== undefined
        ? of(row.result)
        : row?.error !== undefined
          ? 'failed in this run'
          : cluster?.sequencedCeilingError !== undefined
            ? 'failed to start'
            : 'not measured (cluster-ceiling-sequenced not run)';
    return ` (null nodes, one sequencer: ${said})`;
  };
  const versusGoLock = (connections: number, min: number): GoalCheck => {
    const goal = `${connections} connections unpipelined: ours ops/s ≥ ${min}× etcd's lock with the Go client, ${connections} lockers (2 ops per cycle)`;
    const ours = unpipelined(cluster?.throughput, connections)?.result;
    const lock = go?.lock.find((r) => r.concurrency === connections)?.result;
    if (ours === undefined) return notMeasured(goal, oursWhy(connections));
    if (lock === undefined) return notMeasured(goal, goWhy(connections));
    if (lock.opsPerSecond === 0)
      return { goal, measured: `${fmt(ours.opsPerSecond)} vs 0 ops/s (no Go-client lock cycle finished in the window)`, met: undefined };
    const ratio = ours.opsPerSecond / lock.opsPerSecond;
    const beside = ceiling(connections, (r) => `${fmt(r.opsPerSecond)} ops/s = ${fmt(r.opsPerSecond / lock.opsPerSecond, 2)}×`);
    return { goal, measured: `${fmt(ours.opsPerSecond)} vs ${fmt(lock.opsPerSecond)} ops/s = ${fmt(ratio, 2)}×${beside}`, met: ratio >= min };
  };
  const p99Goal = `48 connections unpipelined: ours p99 < ${GOALS.clusterSequencer.maxP99MsAt48} ms`;
  const at48 = unpipelined(cluster?.throughput, 48)?.result;
  return [
    versusGoLock(48, GOALS.clusterSequencer.minRatioVsGoLockAt48),
    versusGoLock(480, GOALS.clusterSequencer.minRatioVsGoLockAt480),
    at48 === undefined
      ? notMeasured(p99Goal, oursWhy(48))
      : {
          goal: p99Goal,
          measured: `${fmt(at48.latencyMs.p99, 1)} ms${ceiling(48, (r) => `${fmt(r.latencyMs.p99, 1)} ms`)}`,
          met: at48.latencyMs.p99 < GOALS.clusterSequencer.maxP99MsAt48,
        },
  ];
}

/** Checks issue 10's targets, from the random-keys rows (and the held-locks rows for the 1M-lock RSS). */
export function checkRandomGoals(results: BenchResults): GoalCheck[] {
  const goals = GOALS.randomKeys;
  const rows = results.random ?? [];
  const at = (keySpace: number, lane: string, depth: number): LoadResult | undefined =>
    rows.find((r) => r.keySpace === keySpace)?.cells.find((c) => c.lane === lane && c.shape.connections === 50 && c.shape.depth === depth)?.result;
  const ratio = (a: LoadResult | undefined, b: LoadResult | undefined): number | undefined =>
    a === undefined || b === undefined ? undefined : a.opsPerSecond / b.opsPerSecond;
  const check = (goal: string, measured: number | undefined, met: (value: number) => boolean, text: (value: number) => string): GoalCheck =>
    measured === undefined ? { goal, measured: 'not measured', met: undefined } : { goal, measured: text(measured), met: met(measured) };
  const settled = rows.find((r) => r.keySpace === 10_000_000)?.rssBytes.settled;
  const million = results.held?.find((r) => r.held === MILLION)?.rssBytes.filled;
  return [
    check(
      `50×16, 100k random keys: ours / Redis (same cycle, same generator) ≥ ${num(goals.minRatioVsRedisAt50x16, 1)}`,
      ratio(at(100_000, 'ours', 16), at(100_000, 'redis', 16)),
      (v) => v >= goals.minRatioVsRedisAt50x16,
      (v) => num(v, 2),
    ),
    check(
      `50×1, 100k random keys: ours / null server ≥ ${num(goals.minRatioVsNullAt50x1, 2)}`,
      ratio(at(100_000, 'ours', 1), at(100_000, 'null-server', 1)),
      (v) => v >= goals.minRatioVsNullAt50x1,
      (v) => num(v, 2),
    ),
    check(
      `RSS after a 10M-key random run, settled, no lock held ≤ ${mb(goals.maxSettledRssBytesAfter10M)} MB`,
      settled,
      (v) => v <= goals.maxSettledRssBytesAfter10M,
      (v) => `${mb(v)} MB`,
    ),
    check(
      `RSS with ${num(MILLION)} held locks ≤ ${mb(goals.maxRssBytesAtMillion)} MB`,
      million,
      (v) => v <= goals.maxRssBytesAtMillion,
      (v) => `${mb(v)} MB`,
    ),
  ];
}

/**
 * Issue 37's promise, that waiting adds nothing to an idle cluster's load: the 0x0B window's
 * requests/s and proposals/s each at most the higher of the two idle windows plus their spread
 * and the slack. Undefined when a window is missing.
 */
export function checkWaitingAddsNothing(cases: readonly WaitersCase[]): GoalCheck | undefined {
  const slack = GOALS.idleWaiters.slackPerSecond;
  const rates = (name: WaitersCase['name']) => cases.find((c) => c.name === name)?.rates;
  const [idle, after, waiting] = [rates('idle'), rates('idle-again'), rates('waiting-0x0b')];
  if (idle === undefined || after === undefined || waiting === undefined) return undefined;
  const judge = (field: 'requestsPerSecond' | 'proposalsPerSecond'): [boolean, string] => {
    const high = Math.max(idle[field], after[field]);
    const limit = high + Math.abs(idle[field] - after[field]) + slack;
    return [waiting[field] <= limit, `${num(waiting[field], 1)} against idle ${num(idle[field], 1)} and ${num(after[field], 1)} (limit ${num(limit, 1)})`];
  };
  const [requestsMet, requests] = judge('requestsPerSecond');
  const [proposalsMet, proposals] = judge('proposalsPerSecond');
  return {
    goal: `waiting adds nothing to the idle baseline (the 0x0B window at most the higher idle window plus the two idle windows' spread and ${slack}/s)`,
    measured: `requests/s ${requests}, proposals/s ${proposals}`,
    met: requestsMet && proposalsMet,
  };
}
