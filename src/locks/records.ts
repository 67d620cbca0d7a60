import type { ByteString } from '../bytes.js';

/**
 * Helpers for the lock table's records, which are kept as columns (one typed array per field,
 * indexed by record id) rather than as one JavaScript object per record: without pointer
 * compression (Node's default build) every object field is 8 bytes plus headers, and a million
 * locks were a few million objects for the garbage collector to trace; as columns they are a few
 * dozen bytes each and nothing to trace.
 */

type Column = Int32Array | Uint8Array | Uint16Array | Float64Array;

/** The column copied into a new one of `capacity` slots (the new slots zero). */
export function resized<T extends Column>(column: T, capacity: number): T {
  const next = new (column.constructor as new (length: number) => T)(capacity);
  next.set(column.length <= capacity ? column : column.subarray(0, capacity));
  return next;
}

/** A column of byte strings (names), resized; new slots hold the empty string. */
export function resizedNames(names: ByteString[], capacity: number): ByteString[] {
  const next = names.slice(0, capacity);
  while (next.length < capacity) next.push('');
  return next;
}

/** A column of `capacity` empty names (a packed array, which V8 reads fastest). */
export function emptyNames(capacity: number): ByteString[] {
  return resizedNames([], capacity);
}

/**
 * Hands out record ids: the most recently freed first (its record is likely still in the CPU's
 * caches), else the next never used. Ids stay below `highWater`, the size the columns need.
 */
export class IdAllocator {
  private free = new Int32Array(64);
  private freeCount = 0;
  private next = 0;

  /** One more than the highest id ever handed out: the columns hold at least this many slots. */
  get highWater(): number {
    return this.next;
  }

  /** Ids handed out and not given back. */
  get live(): number {
    return this.next - this.freeCount;
  }

  allocate(): number {
    return this.freeCount > 0 ? this.free[--this.freeCount]! : this.next++;
  }

  release(id: number): void {
    if (this.freeCount === this.free.length) this.free = resized(this.free, this.free.length * 2);
    this.free[this.freeCount++] = id;
  }
}

/** Capacity to grow a column set to so that it holds `needed` records: doubling from `current`. */
export function grownCapacity(current: number, needed: number): number {
  let capacity = current;
  while (capacity < needed) capacity *= 2;
  return capacity;
}
