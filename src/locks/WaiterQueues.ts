import { OrderedSet } from 'js-sdsl';
import type { EntryRecords } from './EntryRecords.js';
import { combineHashes } from './hashByteString.js';
import { HashIndex, NO_ID } from './HashIndex.js';
import { grownCapacity, resized } from './records.js';

/**
 * The waiters of every queue: per queue an order-statistics tree of entry ids (higher priority
 * first, then lower ticket), so that adding, removing and finding a waiter's position are
 * O(log n); and one hash index by (queue, owner record) to find a waiter by name in O(1). Most
 * locks never have a waiter, so a queue costs nothing here until its first one arrives.
 */
export class WaiterQueues {
  private readonly trees = new Map<number, OrderedSet<number>>();
  /** Waiters per queue id (0 past the end). */
  private counts = new Int32Array(64);
  private readonly index = new HashIndex((entry) => this.hashOf(this.entries.queue[entry]!, this.entries.owner[entry]!));
  /** Queue order of waiters: higher priority first, then the lower ticket (earlier arrival). */
  private readonly order = (a: number, b: number): number => {
    const entries = this.entries;
    return entries.priority[b]! - entries.priority[a]! || entries.ticket[a]! - entries.ticket[b]!;
  };

  constructor(private readonly entries: EntryRecords) {}

  countOf(queue: number): number {
    return queue < this.counts.length ? this.counts[queue]! : 0;
  }

  /** Adds the entry (its queue, owner, priority and ticket set) to its queue's waiters. */
  add(queue: number, entry: number): void {
    let tree = this.trees.get(queue);
    if (tree === undefined) {
      tree = new OrderedSet<number>([], this.order, true);
      this.trees.set(queue, tree);
    }
    tree.insert(entry);
    this.index.add(this.hashOf(queue, this.entries.owner[entry]!), entry);
    if (queue >= this.counts.length) this.counts = resized(this.counts, grownCapacity(this.counts.length, queue + 1));
    this.counts[queue]!++;
  }

  remove(queue: number, entry: number): void {
    const tree = this.trees.get(queue)!;
    tree.eraseElementByKey(entry);
    this.index.remove(this.hashOf(queue, this.entries.owner[entry]!), entry);
    if (--this.counts[queue]! === 0) this.trees.delete(queue);
  }

  /** Removes and returns the first waiter (the one to promote), or NO_ID. */
  shift(queue: number): number {
    if (this.countOf(queue) === 0) return NO_ID;
    const first = this.trees.get(queue)!.front()!;
    this.remove(queue, first);
    return first;
  }

  /** The waiter of the queue with that owner record, or NO_ID. */
  find(queue: number, owner: number): number {
    const hash = this.hashOf(queue, owner);
    const entries = this.entries;
    let entry = this.index.first(hash);
    while (entry !== NO_ID && (entries.queue[entry] !== queue || entries.owner[entry] !== owner)) {
      entry = this.index.next(hash);
    }
    return entry;
  }

  /** 2 for the first waiter, 3 for the next, … (the owner is 1). */
  positionOf(queue: number, entry: number): number {
    return 2 + this.trees.get(queue)!.find(entry).index;
  }

  /** The queue's waiters in order. */
  *entriesOf(queue: number): IterableIterator<number> {
    const tree = this.trees.get(queue);
    if (tree !== undefined) yield* tree;
  }

  private hashOf(queue: number, owner: number): number {
    return combineHashes(queue, owner);
  }
}
