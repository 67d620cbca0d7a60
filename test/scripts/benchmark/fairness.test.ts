import test from 'ava';
import { promisedOrder, scoreFairness, type Waiter } from '../../../scripts/benchmark/fairness.js';

const waiters: Waiter[] = [
  { id: 10, priority: 0, arrival: 0 },
  { id: 11, priority: 3, arrival: 1 },
  { id: 12, priority: 0, arrival: 2 },
  { id: 13, priority: 3, arrival: 3 },
  { id: 14, priority: 1, arrival: 4 },
];

test('the promised order is priority first, then arrival', (t) => {
  t.deepEqual(
    promisedOrder(waiters).map((w) => w.id),
    [11, 13, 14, 10, 12],
  );
});

test('serving in the promised order scores perfectly', (t) => {
  t.deepEqual(scoreFairness(waiters, [11, 13, 14, 10, 12]), {
    compared: 5,
    inPlace: 5,
    concordance: 1,
    priorityInversions: 0,
    arrivalInversions: 0,
  });
});

test('plain arrival order (FIFO ignoring priority) shows priority inversions', (t) => {
  const score = scoreFairness(waiters, [10, 11, 12, 13, 14]);
  // Pairs served low-before-high: 10<11, 10<13, 10<14, 12<13, 12<14.
  t.is(score.priorityInversions, 5);
  t.is(score.arrivalInversions, 0);
  t.is(score.concordance, 5 / 10);
});

test('a swap within one priority is an arrival inversion', (t) => {
  const score = scoreFairness(waiters, [13, 11, 14, 10, 12]);
  t.is(score.arrivalInversions, 1);
  t.is(score.priorityInversions, 0);
  t.is(score.inPlace, 3);
  t.is(score.concordance, 9 / 10);
});

test('a round cut short is scored on the waiters that were served', (t) => {
  const score = scoreFairness(waiters, [11, 13]);
  t.is(score.compared, 2);
  t.is(score.inPlace, 2);
  t.is(score.concordance, 1);
});

test('an owner that was never queued is an error in the benchmark', (t) => {
  t.throws(() => scoreFairness(waiters, [99]), { instanceOf: RangeError });
});
