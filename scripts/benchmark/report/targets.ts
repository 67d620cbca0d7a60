import { checkClusterGoals, checkClusterSequencerGoals, checkGoals } from '../goals.js';
import type { BenchResults } from '../results.js';
import { table } from './format.js';

const singleNode = ['throughput', 'contention', 'held', 'list', 'fairness', 'expiry', 'release-all', 'entry-bytes', 'idle', 'redis', 'ceiling'];
const met = (g: { met: boolean | undefined }): string => (g.met === undefined ? '–' : g.met ? 'met' : '**missed**');

/** The single-node targets (issue 3), when a single-node scenario ran. */
export function renderTargets(results: BenchResults): string[] {
  const out: string[] = [];
  if (results.config.scenarios.some((s) => singleNode.includes(s))) {
    const goals = checkGoals(results);
    out.push('**Targets** (issue 3)');
    out.push('');
    out.push(
      table(
        ['target', 'measured', 'met'],
        goals.map((g) => [g.goal, g.measured, met(g)]),
      ),
    );
    out.push('');
  }
  return out;
}

/** The cluster targets: issue 9's against etcd's lock recipe, issue 36's against etcd's Go client. */
export function renderClusterTargets(results: BenchResults): string[] {
  const out: string[] = [];
  out.push('**Cluster targets** (issue 9)');
  out.push('');
  out.push(
    table(
      ['target', 'measured', 'met'],
      checkClusterGoals(results).map((g) => [g.goal, g.measured, met(g)]),
    ),
  );
  out.push('');
  out.push(
    "**Cluster targets against etcd's Go client** (issue 36; ours as every node runs by default, forwarding to the leader's sequencer; " +
      "beside each, the null nodes committing through one sequencer: our design's ceiling, same run)",
  );
  out.push('');
  out.push(
    table(
      ['target', 'measured', 'met'],
      checkClusterSequencerGoals(results).map((g) => [g.goal, g.measured, met(g)]),
    ),
  );
  return out;
}
