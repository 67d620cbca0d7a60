import { OrderedSet } from 'js-sdsl';
import type { ByteString } from '../bytes.js';
import { compareWaiters, type LockEntry } from './LockEntry.js';

/**
 * The queue of one (key, index): position 1 is the owner, then the waiters in priority/arrival
 * order. Waiters live in an order-statistics tree, so adding, removing and finding a waiter's
 * position are O(log n). Most locks never have a waiter, so the tree and the by-name map are
 * only created when the first waiter arrives.
 */
export class LockQueue {
  owner: LockEntry | undefined;
  /** When the queue last fell empty (clock ms); an empty queue lingers a while, see VacancyQueue. */
  vacantSince = 0;
  /** Whether the directory's VacancyQueue holds this queue (so it is queued once, however often it empties). */
  vacancyPending = false;
  private waiters: OrderedSet<LockEntry> | undefined;
  private waitersByName: Map<ByteString, LockEntry> | undefined;

  constructor(
    readonly key: ByteString,
    readonly index: ByteString,
  ) {}

  get waiterCount(): number {
    return this.waitersByName?.size ?? 0;
  }

  get isEmpty(): boolean {
    return this.owner === undefined && this.waiterCount === 0;
  }

  find(owner: ByteString): LockEntry | undefined {
    if (this.owner?.owner === owner) return this.owner;
    return this.waitersByName?.get(owner);
  }

  addWaiter(entry: LockEntry): void {
    if (this.waiters === undefined || this.waitersByName === undefined) {
      this.waiters = new OrderedSet<LockEntry>([], compareWaiters, true);
      this.waitersByName = new Map();
    }
    this.waiters.insert(entry);
    this.waitersByName.set(entry.owner, entry);
  }

  removeWaiter(entry: LockEntry): void {
    if (this.waitersByName?.get(entry.owner) !== entry) return;
    this.waitersByName.delete(entry.owner);
    this.waiters!.eraseElementByKey(entry);
    if (this.waitersByName.size === 0) {
      this.waiters = undefined;
      this.waitersByName = undefined;
    }
  }

  /** Removes and returns the first waiter, the one to promote. */
  shiftWaiter(): LockEntry | undefined {
    const first = this.waiters?.front();
    if (first !== undefined) this.removeWaiter(first);
    return first;
  }

  /** 1 for the owner, 2 for the first waiter, …; 0 when absent. */
  positionOf(entry: LockEntry): number {
    if (entry === this.owner) return 1;
    if (this.waiters === undefined || this.waitersByName?.get(entry.owner) !== entry) return 0;
    return 2 + this.waiters.find(entry).index;
  }

  /** Owner first, then waiters in queue order. */
  *entries(): IterableIterator<LockEntry> {
    if (this.owner !== undefined) yield this.owner;
    if (this.waiters !== undefined) yield* this.waiters;
  }
}
