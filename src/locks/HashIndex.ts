/** What lookups return when nothing is filed under a hash (record ids are ≥ 0). */
export const NO_ID = -1;

/** Smallest table, in slots; a power of two. */
const MIN_SLOTS = 16;

/**
 * A hash index from 32-bit hashes to record ids (small non-negative integers), for the lock
 * table's records (keys, owners, waiters). It holds no keys: a lookup walks the ids filed under a
 * hash (`first`, then `next`) and the caller checks each candidate against its own record, so one
 * index serves records of any shape, and a record's name is stored once, in the record.
 *
 * Why not a JavaScript Map: V8's Map never reuses a deleted slot before its next rehash, so a key
 * deleted and added again thousands of times (a lock taken and given back) grows a bucket chain
 * that every miss walks, and each new key is a heap entry that a cache-missing lookup must chase.
 * Here the table is one Int32Array of [hash, id + 1] pairs (0: empty), probed linearly from
 * `hash & mask`; a removal shifts the rest of its probe run back (no tombstones), so an index that
 * sees a million adds and removes is as fast as a fresh one. It holds at most half its slots, grows
 * by doubling and halves once an eighth full, so after a burst it gives its memory back.
 */
export class HashIndex {
  /** [hash, id + 1] per slot; id + 1 = 0 marks an empty slot. */
  private table: Int32Array;
  private mask: number;
  private count = 0;
  /** Slot of the candidate last returned by first()/next(). */
  private cursor = 0;

  constructor() {
    this.table = new Int32Array(MIN_SLOTS * 2);
    this.mask = MIN_SLOTS - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Slots allocated (for memory accounting and tests). */
  get capacity(): number {
    return this.mask + 1;
  }

  /** The first id filed under `hash`, or NO_ID. Ask next(hash) for more while it is not the one. */
  first(hash: number): number {
    return this.probe(hash, hash & this.mask);
  }

  /** The next id filed under `hash` after the one first()/next() returned last, or NO_ID. */
  next(hash: number): number {
    return this.probe(hash, (this.cursor + 1) & this.mask);
  }

  private probe(hash: number, from: number): number {
    const table = this.table;
    const mask = this.mask;
    // Ends: at most half the slots are taken, so an empty one is always ahead.
    for (let slot = from; ; slot = (slot + 1) & mask) {
      const stored = table[(slot << 1) + 1]!;
      if (stored === 0) return NO_ID;
      if (table[slot << 1] === hash) {
        this.cursor = slot;
        return stored - 1;
      }
    }
  }

  /** Files `id` under `hash`. The caller knows it is not filed yet. */
  add(hash: number, id: number): void {
    if ((this.count + 1) * 2 > this.mask + 1) this.resize((this.mask + 1) * 2);
    this.place(hash, id);
    this.count++;
  }

  /** Takes `id` out; it must be filed under `hash`. */
  remove(hash: number, id: number): void {
    const table = this.table;
    const mask = this.mask;
    let hole = hash & mask;
    for (;;) {
      const stored = table[(hole << 1) + 1]!;
      if (stored === id + 1) break;
      if (stored === 0) throw new Error(`HashIndex: id ${id} is not filed under hash ${hash}`);
      hole = (hole + 1) & mask;
    }
    // Shift back every later member of the probe run that may sit in the hole: one whose home
    // slot is not between the hole and where it sits now (cyclically).
    for (let slot = (hole + 1) & mask; ; slot = (slot + 1) & mask) {
      const stored = table[(slot << 1) + 1]!;
      if (stored === 0) break;
      const home = table[slot << 1]! & mask;
      if (((slot - home) & mask) >= ((slot - hole) & mask)) {
        table[hole << 1] = table[slot << 1]!;
        table[(hole << 1) + 1] = stored;
        hole = slot;
      }
    }
    table[hole << 1] = 0;
    table[(hole << 1) + 1] = 0;
    this.count--;
    if (this.count * 8 < this.mask + 1 && this.mask + 1 > MIN_SLOTS) this.resize((this.mask + 1) / 2);
  }

  /** Every (hash, id) filed, in slot order (for rebuilding and tests). */
  forEach(visit: (hash: number, id: number) => void): void {
    const table = this.table;
    for (let slot = 0; slot <= this.mask; slot++) {
      const stored = table[(slot << 1) + 1]!;
      if (stored !== 0) visit(table[slot << 1]!, stored - 1);
    }
  }

  private place(hash: number, id: number): void {
    const table = this.table;
    const mask = this.mask;
    let slot = hash & mask;
    while (table[(slot << 1) + 1] !== 0) slot = (slot + 1) & mask;
    table[slot << 1] = hash;
    table[(slot << 1) + 1] = id + 1;
  }

  private resize(slots: number): void {
    const old = this.table;
    this.table = new Int32Array(slots * 2);
    this.mask = slots - 1;
    for (let i = 0; i < old.length; i += 2) {
      if (old[i + 1] !== 0) this.place(old[i]!, old[i + 1]! - 1);
    }
  }
}
