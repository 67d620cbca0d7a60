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
/** Dead slots at the front are dropped once there are this many and they are half the arrays. */
const COMPACT_AFTER = 4_096;

export class VacancyQueue<T> {
  private items: Array<T | undefined> = [];
  private since: number[] = [];
  private head = 0;

  get size(): number {
    return this.items.length - this.head;
  }

  /** Remembers that `item` fell empty at `since`; false when full (delete it now instead). */
  offer(item: T, since: number): boolean {
    if (this.size >= MAX_PENDING_VACANCIES) return false;
    this.items.push(item);
    this.since.push(since);
    return true;
  }

  /**
   * Hands every item that fell empty at or before `cutoff` to `due`, oldest first, at most `budget`
   * of them. Returns how many were handed over.
   */
  drain(cutoff: number, budget: number, due: (item: T, since: number) => void): number {
    let handed = 0;
    while (handed < budget && this.head < this.items.length && this.since[this.head]! <= cutoff) {
      const item = this.items[this.head]!;
      const since = this.since[this.head]!;
      this.items[this.head] = undefined;
      this.head++;
      handed++;
      due(item, since);
    }
    if (this.head >= COMPACT_AFTER && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.since = this.since.slice(this.head);
      this.head = 0;
    }
    return handed;
  }
}
