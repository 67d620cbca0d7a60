import type { ByteString } from '../bytes.js';
import { LockQueue } from './LockQueue.js';
import { MAX_LINGERING_VACANCIES, VacancyQueue } from './VacancyQueue.js';

const NO_QUEUES: readonly LockQueue[] = [];

/**
 * Every queue, found by (key, index). Most keys have a single index, so a key maps straight to its
 * lone queue and only gets a Map of its own once a second index appears (and goes back to the bare
 * queue when one is left). A Map per key cost ~180 bytes and an allocation per new key; a million
 * one-index locks are that much smaller and cheaper to create.
 *
 * A queue that falls empty stays filed (and is reused) until it has been empty for a grace period:
 * see VacancyQueue for why deleting at once is slow. Callers treat an empty queue as no queue.
 */
export class QueueDirectory {
  private readonly byKey = new Map<ByteString, LockQueue | Map<ByteString, LockQueue>>();
  private readonly vacancies = new VacancyQueue<LockQueue>();

  get(key: ByteString, index: ByteString): LockQueue | undefined {
    const group = this.byKey.get(key);
    if (group === undefined) return undefined;
    if (group instanceof LockQueue) return group.index === index ? group : undefined;
    return group.get(index);
  }

  /** The queue of (key, index), created empty if there is none. */
  getOrCreate(key: ByteString, index: ByteString): LockQueue {
    const queue = this.get(key, index);
    if (queue === undefined) return this.create(key, index);
    if (queue.isEmpty) this.revive(queue);
    return queue;
  }

  /**
   * An emptied queue whose slot still lingers is taken again: as far as list order goes it is
   * created anew (a key's indexes list in creation order), so it moves behind the key's others.
   */
  revive(queue: LockQueue): void {
    const group = this.byKey.get(queue.key);
    if (!(group instanceof Map) || group.get(queue.index) !== queue) return;
    group.delete(queue.index);
    group.set(queue.index, queue);
  }

  /** A new empty queue for (key, index), which get() just found missing. */
  create(key: ByteString, index: ByteString): LockQueue {
    const group = this.byKey.get(key);
    if (group === undefined) {
      const queue = new LockQueue(key, index);
      this.byKey.set(key, queue);
      return queue;
    }
    if (group instanceof LockQueue) {
      const queue = new LockQueue(key, index);
      // An empty lone queue is simply replaced; its pending vacancy will find it gone.
      this.byKey.set(key, group.isEmpty ? queue : new Map([[group.index, group], [index, queue]]));
      return queue;
    }
    const queue = new LockQueue(key, index);
    group.set(index, queue);
    return queue;
  }

  /** The queue has just fallen empty: it is deleted once it has stayed empty long enough. */
  vacate(queue: LockQueue, now: number): void {
    queue.vacantSince = now;
    if (queue.vacancyPending) return;
    // Too many lingering: the oldest goes now (if still empty), whatever its age.
    if (this.vacancies.size >= MAX_LINGERING_VACANCIES) this.forgetVacant(Number.POSITIVE_INFINITY, 1);
    if (this.vacancies.offer(queue, now)) queue.vacancyPending = true;
    else this.delete(queue);
  }

  /** Deletes queues empty ever since `cutoff` or earlier, looking at most at `budget`; returns how many it looked at. */
  forgetVacant(cutoff: number, budget: number): number {
    this.cutoff = cutoff;
    return this.vacancies.drain(cutoff, budget, this.forgetDue);
  }

  /** The cutoff of the forgetVacant() call under way (kept here so its callback is made once, not per call). */
  private cutoff = 0;

  private readonly forgetDue = (queue: LockQueue): void => {
    queue.vacancyPending = false;
    if (!queue.isEmpty) return;
    // Emptied again since it was queued: wait out its latest vacancy instead (queued straight
    // back, not through vacate(), which may forget the oldest: no drain inside a drain).
    if (queue.vacantSince <= this.cutoff) this.delete(queue);
    else if (this.vacancies.offer(queue, queue.vacantSince)) queue.vacancyPending = true;
    else this.delete(queue);
  };

  /** Number of emptied queues waiting to be deleted. */
  get pendingVacancies(): number {
    return this.vacancies.size;
  }

  delete(queue: LockQueue): void {
    const group = this.byKey.get(queue.key);
    if (group === queue) {
      this.byKey.delete(queue.key);
    } else if (group instanceof Map && group.get(queue.index) === queue) {
      group.delete(queue.index);
      if (group.size === 1) this.byKey.set(queue.key, group.values().next().value!);
    }
  }

  /** The key's queues, indexes in creation order. */
  queuesOf(key: ByteString): Iterable<LockQueue> {
    const group = this.byKey.get(key);
    if (group === undefined) return NO_QUEUES;
    return group instanceof LockQueue ? [group] : group.values();
  }

  /** Every queue, key by key. */
  *all(): IterableIterator<LockQueue> {
    for (const group of this.byKey.values()) {
      if (group instanceof LockQueue) yield group;
      else yield* group.values();
    }
  }
}
