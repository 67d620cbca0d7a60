import type { ContentionResult } from '../scenarios/contention.js';
import { num, table } from './format.js';

/** One row per contention round: speed of the handovers and whether the order was kept. */
export function contentionTable(contention: ContentionResult): string {
  return table(
    [
      'round',
      'handovers',
      'handovers/s',
      'handover p50 ms',
      'handover p99 ms',
      'polls/s',
      'order concordance',
      'in promised place',
      'priority inversions',
      'arrival inversions',
    ],
    contention.rounds.map((r, i) => [
      `${i + 1}${r.completed ? '' : ' (cut short)'}`,
      num(r.handovers),
      num(r.handoversPerSecond),
      num(r.handoverMs.p50, 2),
      num(r.handoverMs.p99, 2),
      num(r.pollsPerSecond),
      num(r.fairness.concordance, 3),
      `${num(r.fairness.inPlace)}/${num(r.fairness.compared)}`,
      num(r.fairness.priorityInversions),
      num(r.fairness.arrivalInversions),
    ]),
  );
}
