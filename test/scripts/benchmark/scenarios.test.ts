import test from 'ava';
import { CLUSTER_SCENARIOS, HANDOFF_SCENARIOS, parseScenarios } from '../../../scripts/benchmark/config.js';

test('selectors are split on commas and "cluster" stands for every cluster scenario', (t) => {
  t.deepEqual(parseScenarios('held, expiry'), ['held', 'expiry']);
  t.deepEqual(parseScenarios('cluster'), [...CLUSTER_SCENARIOS]);
  t.deepEqual(parseScenarios('handoff'), [...HANDOFF_SCENARIOS]);
  t.deepEqual([...HANDOFF_SCENARIOS], ['handoff-single', 'handoff-etcd', 'handoff-cluster', 'handoff-waiters']);
  t.deepEqual(parseScenarios('cluster-throughput,cluster-ceiling-sequenced'), ['cluster-throughput', 'cluster-ceiling-sequenced']);
  t.true(parseScenarios('cluster').includes('cluster-release-all'));
  t.deepEqual(parseScenarios('release-all,entry-bytes'), ['release-all', 'entry-bytes']);
  t.false(parseScenarios('cluster').includes('entry-bytes'));
});

test('an unknown selector is refused with the list of known ones', (t) => {
  const error = t.throws(() => parseScenarios('nope'));
  t.regex(error.message, /"nope" is not one of .*cluster-ceiling-sequenced/);
});
