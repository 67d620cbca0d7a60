/** Something with a deadline that the heap can find again in O(1): it stores its own slot. */
export interface Expiring {
  deadline: number;
  heapIndex: number;
}

export const NOT_IN_HEAP = -1;

/**
 * A binary min-heap on deadline whose items remember their slot, so that insert, remove,
 * reschedule and pop are all O(log n). One heap serves every lock: there is no timer per lock.
 */
export class ExpiryHeap<T extends Expiring> {
  private readonly items: T[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  /** Adds the item, or moves it if its deadline changed while it was in the heap. */
  schedule(item: T): void {
    if (item.heapIndex === NOT_IN_HEAP) {
      item.heapIndex = this.items.length;
      this.items.push(item);
      this.siftUp(item.heapIndex);
    } else {
      this.siftUp(item.heapIndex);
      this.siftDown(item.heapIndex);
    }
  }

  remove(item: T): void {
    const index = item.heapIndex;
    if (index === NOT_IN_HEAP) return;
    const last = this.items.pop()!;
    item.heapIndex = NOT_IN_HEAP;
    if (last === item) return;
    this.items[index] = last;
    last.heapIndex = index;
    this.siftUp(index);
    this.siftDown(last.heapIndex);
  }

  private siftUp(index: number): void {
    const items = this.items;
    const item = items[index]!;
    while (index > 0) {
      const parentIndex = (index - 1) >> 1;
      const parent = items[parentIndex]!;
      if (parent.deadline <= item.deadline) break;
      items[index] = parent;
      parent.heapIndex = index;
      index = parentIndex;
    }
    items[index] = item;
    item.heapIndex = index;
  }

  private siftDown(index: number): void {
    const items = this.items;
    const length = items.length;
    const item = items[index]!;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= length) break;
      const right = left + 1;
      const child = right < length && items[right]!.deadline < items[left]!.deadline ? right : left;
      const smallest = items[child]!;
      if (smallest.deadline >= item.deadline) break;
      items[index] = smallest;
      smallest.heapIndex = index;
      index = child;
    }
    items[index] = item;
    item.heapIndex = index;
  }
}
