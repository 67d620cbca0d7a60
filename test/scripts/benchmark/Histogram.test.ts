import test from 'ava';
import { bucketUpperBound, Histogram, MAX_TRACKABLE_US } from '../../../scripts/benchmark/Histogram.js';

test('small values are exact and percentiles follow the nearest-rank rule', (t) => {
  const h = new Histogram();
  for (let v = 1; v <= 100; v++) h.record(v);
  t.is(h.count, 100);
  t.is(h.min, 1);
  t.is(h.max, 100);
  t.is(h.percentile(50), 50);
  t.is(h.percentile(99), 99);
  t.is(h.percentile(99.9), 100);
  t.is(h.percentile(100), 100);
  t.is(h.percentile(0), 1);
  t.is(h.mean, 50.5);
});

test('large values are reported within 1/64 above their true value, never below', (t) => {
  for (const value of [128, 129, 1_000, 4_321, 65_535, 1_000_000, 123_456_789]) {
    const h = new Histogram();
    h.record(value);
    h.record(0);
    const reported = h.percentile(100);
    t.true(reported >= value, `${value} reported as ${reported}`);
    t.true(reported <= value * (1 + 1 / 64), `${value} reported as ${reported}`);
    const p50 = h.percentile(50);
    t.is(p50, 0);
  }
});

test('bucket bounds tile the number line without gaps or overlaps', (t) => {
  let previous = -1;
  for (let index = 0; index < 600; index++) {
    const upper = bucketUpperBound(index);
    t.true(upper > previous, `bucket ${index}`);
    previous = upper;
  }
  t.is(bucketUpperBound(127), 127);
  t.is(bucketUpperBound(128), 129);
});

test('fractions truncate, negatives count as zero, huge values clamp', (t) => {
  const h = new Histogram();
  h.record(2.9);
  h.record(-5);
  h.record(Number.MAX_SAFE_INTEGER);
  t.is(h.min, 0);
  t.is(h.percentile(50), 2);
  t.is(h.max, MAX_TRACKABLE_US);
});

test('an empty histogram reports zeros', (t) => {
  const h = new Histogram();
  t.is(h.percentile(99), 0);
  t.is(h.mean, 0);
  t.deepEqual(h.toData(), { buckets: [], count: 0, min: 0, max: 0, sum: 0 });
});

test('merging per-thread histograms equals recording everything in one', (t) => {
  const all = new Histogram();
  const parts = [new Histogram(), new Histogram(), new Histogram()];
  for (let i = 0; i < 3_000; i++) {
    const value = (i * 7919) % 50_000;
    all.record(value);
    parts[i % 3]!.record(value);
  }
  const merged = new Histogram();
  for (const part of parts) merged.merge(part.toData());
  for (const p of [1, 50, 90, 99, 99.9, 100]) t.is(merged.percentile(p), all.percentile(p), `p${p}`);
  t.deepEqual(merged.toData(), all.toData());
  t.deepEqual(Histogram.from(all.toData()).toData(), all.toData());
});
