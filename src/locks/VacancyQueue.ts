/**
 * Why the lock table does not delete a key from its Maps the moment the key falls empty: V8's Map
 * never reuses a deleted slot before its next rehash, and the dead entry stays in its bucket's
 * chain, so one key deleted and re-added thousands of times between rehashes (an owner taking and
 * giving back one lock after another, in a big table) grows a chain that every lookup miss in that
 * bucket walks. Measured in a 100k-entry Map: ~20 µs per miss, against ~0.5 µs when the key stays.
 * So an emptied key keeps its slot for a grace period and is only deleted once it has stayed empty
 * that long; a key that comes back in time costs nothing.
 *
 * This queue remembers, oldest first, what fell empty and when. The owner of the Map checks, when
 * an item comes due, that it is still empty since that very moment before deleting it.
 */

/** Emptied keys remembered at most; beyond this the caller deletes at once (as without a queue). */
export const MAX_PENDING_VACANCIES = 1 << 20;
/**
 * Emptied keys (and owners) the lock table lets linger at once; past this, the one that fell empty
 * longest ago goes early, before its grace period is out. Keys spread over a big space (row ids)
 * fall empty at the request rate and are seldom taken again within a second: lingering for the
 * whole grace period, 250k of them at 250k releases/s kept the key Map at 250k entries whose
 * lookups all missed the CPU caches (1 µs each here, against ~0.1 µs in a Map of a few thousand),
 * and pinned their queues' memory. A key taken and given back over and over (the case the grace
 * period is for) comes back long before 16k other keys fall empty, so it still keeps its slot;
 * and a Map this small rehashes every few thousand additions, which clears any dead slots.
 */
export const MAX_LINGERING_VACANCIES = 1 << 14;
/** Smallest ring; the ring doubles when full and halves when three quarters empty. */
const MIN_CAPACITY = 1_024;

/**
 * A ring buffer, oldest first: the lock table offers and drains one item per release under a steady
 * load, so neither may allocate (an array shifted by slicing copied itself every few thousand
 * items). It gives memory back once it has drained.
 */
export class VacancyQueue<T> {
  private items: Array<T | undefined> = new Array<T | undefined>(MIN_CAPACITY).fill(undefined);
  private since = new Float64Array(MIN_CAPACITY);
  private head = 0;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Remembers that `item` fell empty at `since`; false when full (delete it now instead). */
  offer(item: T, since: number): boolean {
    if (this.count >= MAX_PENDING_VACANCIES) return false;
    if (this.count === this.items.length) this.resize(this.items.length * 2);
    const slot = (this.head + this.count) & (this.items.length - 1);
    this.items[slot] = item;
    this.since[slot] = since;
    this.count++;
    return true;
  }

  /**
   * Hands every item that fell empty at or before `cutoff` to `due`, oldest first, at most `budget`
   * of them. Returns how many were handed over.
   */
  drain(cutoff: number, budget: number, due: (item: T, since: number) => void): number {
    let handed = 0;
    while (handed < budget && this.count > 0 && this.since[this.head]! <= cutoff) {
      const item = this.items[this.head]!;
      const since = this.since[this.head]!;
      this.items[this.head] = undefined;
      this.head = (this.head + 1) & (this.items.length - 1);
      this.count--;
      handed++;
      due(item, since);
    }
    if (this.items.length > MIN_CAPACITY && this.count * 4 < this.items.length) this.resize(this.items.length / 2);
    return handed;
  }

  private resize(capacity: number): void {
    const items = new Array<T | undefined>(capacity).fill(undefined);
    const since = new Float64Array(capacity);
    const mask = this.items.length - 1;
    for (let i = 0; i < this.count; i++) {
      const from = (this.head + i) & mask;
      items[i] = this.items[from];
      since[i] = this.since[from]!;
    }
    this.items = items;
    this.since = since;
    this.head = 0;
  }
}
