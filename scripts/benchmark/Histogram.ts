/**
 * A latency histogram in whole microseconds with log-linear buckets (the HdrHistogram idea): values
 * below 2^SUB_BUCKET_BITS are exact, larger ones land in buckets whose width is under 1/64 of the
 * value, so any percentile is reported within 1.6% while recording costs one array increment.
 * Histograms from several worker threads merge by adding counts.
 */
const SUB_BUCKET_BITS = 7;
const EXACT_LIMIT = 1 << SUB_BUCKET_BITS; // 128: values below are their own bucket
const HALF = EXACT_LIMIT >> 1; // 64 buckets per power of two above the exact range
/** Largest recordable value (about 35 minutes); larger values are clamped to it. */
export const MAX_TRACKABLE_US = 2 ** 31 - 1;
const BUCKET_COUNT = bucketOf(MAX_TRACKABLE_US) + 1;

function bucketOf(value: number): number {
  if (value < EXACT_LIMIT) return value;
  const shift = 31 - Math.clz32(value) - SUB_BUCKET_BITS + 1;
  return EXACT_LIMIT + (shift - 1) * HALF + ((value >>> shift) - HALF);
}

/** The largest value that falls into bucket `index`. */
export function bucketUpperBound(index: number): number {
  if (index < EXACT_LIMIT) return index;
  const shift = Math.floor((index - EXACT_LIMIT) / HALF) + 1;
  const mantissa = ((index - EXACT_LIMIT) % HALF) + HALF;
  return (mantissa + 1) * 2 ** shift - 1;
}

/** A histogram as sent between threads and written to JSON: only the non-empty buckets. */
export interface HistogramData {
  readonly buckets: ReadonlyArray<readonly [index: number, count: number]>;
  readonly count: number;
  readonly min: number;
  readonly max: number;
  readonly sum: number;
}

export class Histogram {
  private readonly counts = new Float64Array(BUCKET_COUNT);
  count = 0;
  min = Number.POSITIVE_INFINITY;
  max = 0;
  sum = 0;

  /** Records one value in microseconds (fractions are truncated, negatives count as 0). */
  record(microseconds: number): void {
    let value = microseconds > 0 ? Math.floor(microseconds) : 0;
    if (value > MAX_TRACKABLE_US) value = MAX_TRACKABLE_US;
    this.counts[bucketOf(value)]!++;
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }

  /**
   * The value at percentile p (0–100]: the upper bound of the bucket holding the ceil(p% × count)-th
   * smallest value, never above the largest value seen. 0 when empty.
   */
  percentile(p: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil((p / 100) * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKET_COUNT; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(bucketUpperBound(i), this.max);
    }
    return this.max;
  }

  get mean(): number {
    return this.count === 0 ? 0 : this.sum / this.count;
  }

  merge(other: HistogramData): void {
    for (const [index, count] of other.buckets) this.counts[index]! += count;
    this.count += other.count;
    this.sum += other.sum;
    if (other.count > 0) {
      this.min = Math.min(this.min, other.min);
      this.max = Math.max(this.max, other.max);
    }
  }

  toData(): HistogramData {
    const buckets: Array<[number, number]> = [];
    for (let i = 0; i < BUCKET_COUNT; i++) if (this.counts[i]! > 0) buckets.push([i, this.counts[i]!]);
    return { buckets, count: this.count, min: this.count === 0 ? 0 : this.min, max: this.max, sum: this.sum };
  }

  static from(data: HistogramData): Histogram {
    const histogram = new Histogram();
    histogram.merge(data);
    return histogram;
  }
}
