import test from 'ava';
import type { ClusterFigures } from '../../src/cluster/ClusterOptions.js';
import { DRAINING, ETCD_UNREACHABLE, NOT_CAUGHT_UP, NOT_LISTENING, Readiness, type ReadinessSource } from '../../src/metrics/Readiness.js';
import { FakeClock } from '../doubles/FakeClock.js';

const LIMIT_MS = 5_000;

class FakeNode implements ReadinessSource {
  listening = true;
  readonly server = { draining: false };
}

function figures(overrides: Partial<ClusterFigures> = {}): ClusterFigures {
  return {
    ready: true,
    etcdReachable: true,
    appliedVersion: 10,
    lagBatches: 0,
    snapshotAgeSeconds: undefined,
    snapshotBytes: undefined,
    expiriesProposed: 0,
    logValuesRefused: 0,
    ...overrides,
  };
}

function singleNode(clock = new FakeClock()): { readiness: Readiness; node: FakeNode } {
  const readiness = new Readiness(clock, { clusterMode: false, catchUpLimitMs: LIMIT_MS });
  const node = new FakeNode();
  readiness.attach(node);
  return { readiness, node };
}

function clusterNode(clock: FakeClock): { readiness: Readiness; node: FakeNode; cluster: { figures: ClusterFigures } } {
  const { readiness, node } = singleNode(clock);
  const cluster = { figures: figures() };
  readiness.setCluster(() => cluster.figures);
  return { readiness, node, cluster };
}

test('a single node is ready while listening and not draining', (t) => {
  const { readiness, node } = singleNode();
  t.deepEqual(readiness.problems(), []);
  node.server.draining = true;
  t.deepEqual(readiness.problems(), [DRAINING]);
  node.listening = false;
  t.deepEqual(readiness.problems(), [NOT_LISTENING, DRAINING]);
});

test('before the daemon is attached: not listening; a cluster node has not caught up either', (t) => {
  const clock = new FakeClock();
  t.deepEqual(new Readiness(clock, { clusterMode: false, catchUpLimitMs: LIMIT_MS }).problems(), [NOT_LISTENING]);
  t.deepEqual(new Readiness(clock, { clusterMode: true, catchUpLimitMs: LIMIT_MS }).problems(), [NOT_LISTENING, NOT_CAUGHT_UP]);
});

test('a cluster node is not ready while etcd did not answer its last call, and ready again once it does', (t) => {
  const { readiness, cluster } = clusterNode(new FakeClock());
  t.deepEqual(readiness.problems(), []);
  cluster.figures = figures({ etcdReachable: false });
  t.deepEqual(readiness.problems(), [ETCD_UNREACHABLE]);
  cluster.figures = figures();
  t.deepEqual(readiness.problems(), []);
});

test('a cluster node that has not finished catching up is not ready', (t) => {
  const { readiness, cluster } = clusterNode(new FakeClock());
  cluster.figures = figures({ ready: false, etcdReachable: false });
  t.deepEqual(readiness.problems(), [NOT_CAUGHT_UP, ETCD_UNREACHABLE]);
});

test('a node that applies batches as they come stays ready, however far behind the head each probe finds it', (t) => {
  const clock = new FakeClock();
  const { readiness, cluster } = clusterNode(clock);
  for (let applied = 10; applied < 100; applied += 10) {
    // Each probe finds it 3 behind, but past the head the previous probe saw.
    cluster.figures = figures({ appliedVersion: applied, lagBatches: 3 });
    t.deepEqual(readiness.problems(), []);
    clock.advance(LIMIT_MS * 2);
  }
});

test('a batch etcd held still unapplied after the limit: not caught up, until it is applied', (t) => {
  const clock = new FakeClock();
  const { readiness, cluster } = clusterNode(clock);
  cluster.figures = figures({ appliedVersion: 10, lagBatches: 2 });
  t.deepEqual(readiness.problems(), [], 'behind the head for the first time');
  clock.advance(LIMIT_MS - 1);
  cluster.figures = figures({ appliedVersion: 11, lagBatches: 4 });
  t.deepEqual(readiness.problems(), [], 'batch 12 is not applied yet, but the limit has not passed');
  clock.advance(1);
  t.deepEqual(readiness.problems(), [NOT_CAUGHT_UP], 'batch 12, known since the first probe, is still not applied');
  cluster.figures = figures({ appliedVersion: 12, lagBatches: 3 });
  t.deepEqual(readiness.problems(), [], 'batch 12 applied: the node keeps up again');
  clock.advance(LIMIT_MS);
  t.deepEqual(readiness.problems(), [NOT_CAUGHT_UP], 'batch 15, known since the last probe, is still not applied');
  cluster.figures = figures({ appliedVersion: 15, lagBatches: 0 });
  t.deepEqual(readiness.problems(), []);
});

test('every failing check is given, one reason each', (t) => {
  const clock = new FakeClock();
  const { readiness, node, cluster } = clusterNode(clock);
  node.listening = false;
  node.server.draining = true;
  cluster.figures = figures({ ready: false, etcdReachable: false });
  t.deepEqual(readiness.problems(), [NOT_LISTENING, DRAINING, NOT_CAUGHT_UP, ETCD_UNREACHABLE]);
});
