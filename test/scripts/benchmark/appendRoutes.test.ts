import test from 'ava';
import { describeAppendRoutes } from '../../../scripts/benchmark/report/clusterThroughput.js';
import type { ClusterThroughputRow } from '../../../scripts/benchmark/scenarios/clusterThroughput.js';

const designed = ['n1 forwarded 127.0.0.1:4002', 'n2 own-sequencer', 'n3 forwarded 127.0.0.1:4002'];
const row = (depth: number, extra: Partial<ClusterThroughputRow> = {}): ClusterThroughputRow => ({
  connections: 48,
  depth,
  appendRoutes: designed,
  routeChangesInWindow: 0,
  linkTrouble: [],
  ...extra,
});

test('one sentence when every row ran through one sequencer with the others forwarding to it', (t) => {
  const text = describeAppendRoutes([row(1), row(16)])!;
  t.regex(text, /in every row n2 led and appended through its own sequencer/);
  t.regex(text, /forwarded their batches to it over its lock port \(127\.0\.0\.1:4002\)/);
});

test('each row when a node appended directly, a route changed in the window or a link failed', (t) => {
  const direct = describeAppendRoutes([row(1), row(16, { appendRoutes: ['n1 direct', 'n2 own-sequencer', 'n3 forwarded 127.0.0.1:4002'] })])!;
  t.regex(direct, /48×16: n1 direct, n2 own-sequencer/);
  t.regex(describeAppendRoutes([row(1, { routeChangesInWindow: 2 })])!, /48×1: .*; 2 change\(s\) in the window/);
  t.regex(describeAppendRoutes([row(1, { linkTrouble: ['n1 event=peer-link-failed leader=n2'] })])!, /peer-link-failed/);
});

test('nothing to say without our rows', (t) => {
  t.is(describeAppendRoutes([]), undefined);
  t.is(describeAppendRoutes([{ connections: 48, depth: 1 }]), undefined);
});
