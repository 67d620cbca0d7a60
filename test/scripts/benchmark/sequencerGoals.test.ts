import test from 'ava';
import { checkClusterSequencerGoals } from '../../../scripts/benchmark/goals.js';
import type { LoadResult } from '../../../scripts/benchmark/load/runLoad.js';
import type { BenchResults } from '../../../scripts/benchmark/results.js';
import type { ClusterResult } from '../../../scripts/benchmark/scenarios/cluster.js';
import type { EtcdGoResult } from '../../../scripts/benchmark/cluster/etcdGo.js';

const load = (opsPerSecond: number, p99: number): LoadResult =>
  ({ opsPerSecond, latencyMs: { p50: 1, p99, p999: p99, max: p99, mean: 1 } }) as unknown as LoadResult;
const goLock = (opsPerSecond: number): EtcdGoResult => ({ mode: 'lock', opsPerSecond }) as unknown as EtcdGoResult;
const results = (cluster: Partial<ClusterResult>): BenchResults => ({ cluster: { errors: [], ...cluster } }) as unknown as BenchResults;

test("issue 36's three lines judge ours, each with the one-sequencer null nodes' figure beside it", (t) => {
  const checks = checkClusterSequencerGoals(
    results({
      throughput: [
        { connections: 48, depth: 1, result: load(3_400, 39.9) },
        { connections: 480, depth: 1, result: load(4_000, 90) },
      ],
      sequencedCeiling: [
        { connections: 48, depth: 1, result: load(5_000, 12.5) },
        { connections: 480, depth: 1, result: load(9_000, 80) },
      ],
      etcdGo: {
        lock: [
          { concurrency: 48, result: goLock(2_000) },
          { concurrency: 480, result: goLock(1_000) },
        ],
        put: [],
      },
    }),
  );
  t.is(checks.length, 3);
  const [at48, at480, p99] = checks;
  t.regex(at48!.goal, /^48 connections unpipelined: ours ops\/s ≥ 1\.7× etcd's lock with the Go client/);
  t.is(at48!.measured, '3,400 vs 2,000 ops/s = 1.70× (null nodes, one sequencer: 5,000 ops/s = 2.50×)');
  t.true(at48!.met);
  t.regex(at480!.goal, /^480 connections unpipelined: ours ops\/s ≥ 5× /);
  t.is(at480!.measured, '4,000 vs 1,000 ops/s = 4.00× (null nodes, one sequencer: 9,000 ops/s = 9.00×)');
  t.false(at480!.met);
  t.is(p99!.goal, '48 connections unpipelined: ours p99 < 40 ms');
  t.is(p99!.measured, '39.9 ms (null nodes, one sequencer: 12.5 ms)');
  t.true(p99!.met);
});

test('a missing row or ceiling says why, and judges nothing', (t) => {
  const [at48, at480, p99] = checkClusterSequencerGoals(
    results({ throughput: [{ connections: 48, depth: 1, result: load(3_000, 40) }], etcdGo: { lock: [{ concurrency: 48, result: goLock(1_000) }], put: [] } }),
  );
  t.is(at48!.measured, '3,000 vs 1,000 ops/s = 3.00× (null nodes, one sequencer: not measured (cluster-ceiling-sequenced not run))');
  t.is(at480!.met, undefined);
  t.regex(at480!.measured, /no 480-connection × pipeline 1 row in this run/);
  t.false(p99!.met, '40 ms is not under 40 ms');
  const none = checkClusterSequencerGoals(results({ skipped: 'etcd is not on the PATH' }));
  t.true(none.every((c) => c.met === undefined && c.measured === 'not measured (etcd is not on the PATH)'));
});
