import { grownCapacity, resized } from './records.js';

const MIN_CAPACITY = 64;

/**
 * The entries that releases done in slices (see LockTable.beginReleaseAll) have taken and not yet
 * removed: by entry id the number of the release that took it (0: none), and by queue id how many
 * such entries the queue holds, so whoever touches a queue can tell in O(1) whether a release must
 * finish there first. A record id is marked only while its entry lives: forget() runs whenever an
 * entry leaves, so an id handed out again starts unmarked.
 */
export class PendingReleases {
  private releaseOf = new Int32Array(MIN_CAPACITY);
  private perQueue = new Int32Array(MIN_CAPACITY);
  /** Entries marked, over every queue. */
  count = 0;

  /** Marks `entry` (in `queue`) as taken by release number `release` (above 0). */
  mark(entry: number, queue: number, release: number): void {
    if (entry >= this.releaseOf.length) this.releaseOf = resized(this.releaseOf, grownCapacity(this.releaseOf.length, entry + 1));
    if (queue >= this.perQueue.length) this.perQueue = resized(this.perQueue, grownCapacity(this.perQueue.length, queue + 1));
    this.releaseOf[entry] = release;
    this.perQueue[queue]!++;
    this.count++;
  }

  /** The release that took `entry`, or 0. */
  releaseOfEntry(entry: number): number {
    return entry < this.releaseOf.length ? this.releaseOf[entry]! : 0;
  }

  /** Entries of `queue` that a release has taken and not yet removed. */
  inQueue(queue: number): number {
    return queue < this.perQueue.length ? this.perQueue[queue]! : 0;
  }

  /** `entry` (in `queue`) leaves the table: unmarked, if it was marked. */
  forget(entry: number, queue: number): void {
    if (this.count === 0 || this.releaseOfEntry(entry) === 0) return;
    this.releaseOf[entry] = 0;
    this.perQueue[queue]!--;
    this.count--;
  }
}
