import { NO_ID } from './HashIndex.js';
import { grownCapacity, resized } from './records.js';

/** The deadline of an id that is not in the heap: its current phase never expires. */
export const NO_DEADLINE = Number.POSITIVE_INFINITY;

const MIN_CAPACITY = 64;

/**
 * A binary min-heap of record ids by deadline, where each id knows its slot, so that schedule,
 * reschedule, remove and peek are O(log n) or better. One heap serves every lock: there is no
 * timer per lock. The deadlines live in the heap beside the ids (sifting reads no other record),
 * and nothing here is a JavaScript object per item: a million deadlines are 16 bytes each and
 * nothing for the garbage collector to trace.
 */
export class DeadlineHeap {
  private ids: Int32Array = new Int32Array(MIN_CAPACITY);
  private deadlines: Float64Array = new Float64Array(MIN_CAPACITY);
  /** Per id: its slot + 1, or 0 when it is not in the heap. Grows with the ids scheduled. */
  private slotOf: Int32Array = new Int32Array(MIN_CAPACITY);
  private count = 0;

  get size(): number {
    return this.count;
  }

  has(id: number): boolean {
    return id < this.slotOf.length && this.slotOf[id] !== 0;
  }

  /** The id's deadline, or NO_DEADLINE when it is not in the heap. */
  deadlineOf(id: number): number {
    const slot = id < this.slotOf.length ? this.slotOf[id]! - 1 : -1;
    return slot < 0 ? NO_DEADLINE : this.deadlines[slot]!;
  }

  /** The id with the earliest deadline, or NO_ID when empty. */
  peekId(): number {
    return this.count === 0 ? NO_ID : this.ids[0]!;
  }

  /** The earliest deadline, or NO_DEADLINE when empty. */
  peekDeadline(): number {
    return this.count === 0 ? NO_DEADLINE : this.deadlines[0]!;
  }

  /** Adds the id with this deadline, or moves it there if it is in the heap already. */
  schedule(id: number, deadline: number): void {
    if (id >= this.slotOf.length) this.slotOf = resized(this.slotOf, grownCapacity(this.slotOf.length, id + 1));
    const slot = this.slotOf[id]! - 1;
    if (slot < 0) {
      if (this.count === this.ids.length) this.resize(this.ids.length * 2);
      this.siftUp(this.count++, id, deadline);
    } else if (deadline < this.deadlines[slot]!) {
      this.siftUp(slot, id, deadline);
    } else {
      this.siftDown(slot, id, deadline);
    }
  }

  remove(id: number): void {
    if (id >= this.slotOf.length) return;
    const slot = this.slotOf[id]! - 1;
    if (slot < 0) return;
    this.slotOf[id] = 0;
    const last = --this.count;
    if (slot !== last) {
      // The last item fills the hole and goes up or down from there.
      const movedId = this.ids[last]!;
      const movedDeadline = this.deadlines[last]!;
      if (movedDeadline < this.deadlines[slot]!) this.siftUp(slot, movedId, movedDeadline);
      else this.siftDown(slot, movedId, movedDeadline);
    }
    if (this.ids.length > MIN_CAPACITY && this.count * 4 < this.ids.length) this.resize(this.ids.length / 2);
  }

  /** Places (id, deadline) at `slot` or above it, moving larger parents down. */
  private siftUp(slot: number, id: number, deadline: number): void {
    const ids = this.ids;
    const deadlines = this.deadlines;
    const slotOf = this.slotOf;
    while (slot > 0) {
      const parent = (slot - 1) >> 1;
      const parentDeadline = deadlines[parent]!;
      if (parentDeadline <= deadline) break;
      const parentId = ids[parent]!;
      ids[slot] = parentId;
      deadlines[slot] = parentDeadline;
      slotOf[parentId] = slot + 1;
      slot = parent;
    }
    ids[slot] = id;
    deadlines[slot] = deadline;
    slotOf[id] = slot + 1;
  }

  /** Places (id, deadline) at `slot` or below it, moving smaller children up. */
  private siftDown(slot: number, id: number, deadline: number): void {
    const ids = this.ids;
    const deadlines = this.deadlines;
    const slotOf = this.slotOf;
    const count = this.count;
    for (;;) {
      const left = 2 * slot + 1;
      if (left >= count) break;
      const right = left + 1;
      const child = right < count && deadlines[right]! < deadlines[left]! ? right : left;
      const childDeadline = deadlines[child]!;
      if (childDeadline >= deadline) break;
      const childId = ids[child]!;
      ids[slot] = childId;
      deadlines[slot] = childDeadline;
      slotOf[childId] = slot + 1;
      slot = child;
    }
    ids[slot] = id;
    deadlines[slot] = deadline;
    slotOf[id] = slot + 1;
  }

  private resize(capacity: number): void {
    this.ids = resized(this.ids, capacity);
    this.deadlines = resized(this.deadlines, capacity);
  }
}
