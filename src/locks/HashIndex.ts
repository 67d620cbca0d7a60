/** What lookups return when nothing is filed under a hash (record ids are ≥ 0). */
export const NO_ID = -1;

/** Smallest table, in slots; a power of two. */
const MIN_SLOTS = 16;
/**
 * The table never shrinks to this many slots or fewer (4 KiB). A small table whose count swings
 * by a few times over (a few dozen locks taken and given back by unpipelined clients, a table
 * emptied between batches) would otherwise be made again every few commands: each resize is a
 * new array and a rehash, and together they were 2% of a cluster node's CPU at 48 × 1.
 */
export const SHRINK_FLOOR = 1024;
/** Bits of each slot that hold the top of the hash (the tag); the rest hold id + 1. */
const TAG_BITS = 5;
const TAG_MASK = (1 << TAG_BITS) - 1;
/** Ids must stay below this (--max-locks is at most 100 million, and every id is a live record's). */
export const MAX_ID = 2 ** (32 - TAG_BITS) - 2;

/**
 * A hash index from 32-bit hashes to record ids (small non-negative integers), for the lock
 * table's records (keys, owners, waiters). It holds no keys: a lookup walks the ids filed under a
 * hash (`first`, then `next`) and the caller checks each candidate against its own record, so one
 * index serves records of any shape, and a record's name is stored once, in the record.
 *
 * Why not a JavaScript Map: V8's Map never reuses a deleted slot before its next rehash, so a key
 * deleted and added again thousands of times (a lock taken and given back) grows a bucket chain
 * that every miss walks, and each new key is a heap entry that a cache-missing lookup must chase.
 * Here the table is one Int32Array, probed linearly from `hash & mask`; each slot holds id + 1 (0:
 * empty) and a 5-bit tag from the top of the hash, so a lookup passes over 31 in 32 of the
 * records that are not its own without reading them, in 4 bytes a slot. A removal shifts the rest
 * of its probe run back (no tombstones), so an index that sees a million adds and removes is as
 * fast as a fresh one; that, and growing, need a record's whole hash, which `hashOf` reads back
 * from the record. The table holds at most half its slots, grows by doubling and halves once an
 * eighth full (down to SHRINK_FLOOR), so after a burst it gives its memory back.
 */
export class HashIndex {
  /** Per slot: (id + 1) << TAG_BITS | tag, or 0 when empty. */
  private table: Int32Array;
  private mask: number;
  private count = 0;
  /** Slot of the candidate last returned by first()/next(). */
  private cursor = 0;

  /** @param hashOf the hash an id was filed under (from its record). */
  constructor(private readonly hashOf: (id: number) => number) {
    this.table = new Int32Array(MIN_SLOTS);
    this.mask = MIN_SLOTS - 1;
  }

  get size(): number {
    return this.count;
  }

  /** Slots allocated (for memory accounting and tests). */
  get capacity(): number {
    return this.mask + 1;
  }

  /** The first id filed under `hash` (or one that shares its tag), or NO_ID. Ask next(hash) for more while it is not the one. */
  first(hash: number): number {
    return this.probe(hash, hash & this.mask);
  }

  /** The next candidate after the one first()/next() returned last, or NO_ID. */
  next(hash: number): number {
    return this.probe(hash, (this.cursor + 1) & this.mask);
  }

  private probe(hash: number, from: number): number {
    const table = this.table;
    const mask = this.mask;
    const tag = hash >>> (32 - TAG_BITS);
    // Ends: at most half the slots are taken, so an empty one is always ahead.
    for (let slot = from; ; slot = (slot + 1) & mask) {
      const stored = table[slot]!;
      if (stored === 0) return NO_ID;
      if ((stored & TAG_MASK) === tag) {
        this.cursor = slot;
        return (stored >>> TAG_BITS) - 1;
      }
    }
  }

  /** Files `id` under `hash`. The caller knows it is not filed yet. */
  add(hash: number, id: number): void {
    if (id > MAX_ID) throw new RangeError(`HashIndex: id ${id} is beyond ${MAX_ID}`);
    if ((this.count + 1) * 2 > this.mask + 1) this.resize((this.mask + 1) * 2);
    this.place(hash, id);
    this.count++;
  }

  /** Takes `id` out; it must be filed under `hash`. */
  remove(hash: number, id: number): void {
    const table = this.table;
    const mask = this.mask;
    const wanted = slotValue(hash, id);
    let hole = hash & mask;
    for (;;) {
      const stored = table[hole]!;
      if (stored === wanted) break;
      if (stored === 0) throw new Error(`HashIndex: id ${id} is not filed under hash ${hash}`);
      hole = (hole + 1) & mask;
    }
    // Shift back every later member of the probe run that may sit in the hole: one whose home
    // slot is not between the hole and where it sits now (cyclically).
    for (let slot = (hole + 1) & mask; ; slot = (slot + 1) & mask) {
      const stored = table[slot]!;
      if (stored === 0) break;
      const home = this.hashOf((stored >>> TAG_BITS) - 1) & mask;
      if (((slot - home) & mask) >= ((slot - hole) & mask)) {
        table[hole] = stored;
        hole = slot;
      }
    }
    table[hole] = 0;
    this.count--;
    if (this.count * 8 < this.mask + 1 && this.mask + 1 > SHRINK_FLOOR) this.resize((this.mask + 1) / 2);
  }

  private place(hash: number, id: number): void {
    const table = this.table;
    const mask = this.mask;
    let slot = hash & mask;
    while (table[slot] !== 0) slot = (slot + 1) & mask;
    table[slot] = slotValue(hash, id);
  }

  private resize(slots: number): void {
    const old = this.table;
    this.table = new Int32Array(slots);
    this.mask = slots - 1;
    for (let i = 0; i < old.length; i++) {
      const stored = old[i]!;
      if (stored === 0) continue;
      const id = (stored >>> TAG_BITS) - 1;
      this.place(this.hashOf(id), id);
    }
  }
}

function slotValue(hash: number, id: number): number {
  return ((id + 1) << TAG_BITS) | (hash >>> (32 - TAG_BITS));
}
