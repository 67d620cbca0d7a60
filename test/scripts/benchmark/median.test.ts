import test from 'ava';
import { median } from '../../../scripts/benchmark/scenarios/matrix.js';

test('the median repeat is picked by its rate, whatever order the repeats ran in', (t) => {
  const runs = [{ ops: 90 }, { ops: 110 }, { ops: 100 }];
  t.is(
    median(runs, (r) => r.ops),
    runs[2],
  );
  t.is(median([{ ops: 5 }], (r) => r.ops)?.ops, 5);
  t.is(median([{ ops: 7 }, { ops: 3 }], (r) => r.ops)?.ops, 3, 'the lower middle for an even count');
  t.is(
    median([], (r: { ops: number }) => r.ops),
    undefined,
  );
  t.deepEqual(
    runs.map((r) => r.ops),
    [90, 110, 100],
    'the input is left as it was',
  );
});
