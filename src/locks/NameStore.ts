import { byteString, type ByteString } from '../bytes.js';
import { grownCapacity, resized } from './records.js';

/** Size classes: slots of 8, 16, 32, 64, 128 and 256 bytes (a length byte, then the name). */
const CLASSES = 6;
const CLASS_BITS = 3;
const CLASS_MASK = (1 << CLASS_BITS) - 1;
const SMALLEST_SLOT_SHIFT = 3;
const MIN_SLOTS = 64;

/** The size class of a name of `length` bytes: the smallest slot holding it and its length byte. */
function classOf(length: number): number {
  return Math.max(0, 32 - Math.clz32(length) - SMALLEST_SLOT_SHIFT);
}

/**
 * The bytes of every name the lock table holds (keys, indexes, owners), in slabs of fixed-size
 * slots by size class; a name is known by its handle (slot number and class in one integer).
 *
 * Why not keep the names as JavaScript strings: a byte string of ten bytes is a 32-byte heap
 * object plus an 8-byte reference, which the collector traces and, for a lock held a while,
 * promotes and later compacts; here it is 16 bytes in a typed array, and a name that is looked up
 * (every command names one) is compared byte by byte where it lies, with no string made. Names
 * become strings again only to leave the table (find owner, list, the lock file).
 */
export class NameStore {
  private readonly slabs: Uint8Array[] = [];
  /** Slots ever used per class; freed ones are reused first. */
  private readonly used: number[] = [];
  private readonly free: Int32Array[] = [];
  private readonly freeCount: number[] = [];

  constructor() {
    for (let c = 0; c < CLASSES; c++) {
      this.slabs.push(new Uint8Array(MIN_SLOTS << (c + SMALLEST_SLOT_SHIFT)));
      this.used.push(0);
      this.free.push(new Int32Array(MIN_SLOTS));
      this.freeCount.push(0);
    }
  }

  /** Stores a copy of the name's bytes; returns its handle. */
  add(name: ByteString): number {
    const length = name.length;
    const c = classOf(length);
    const slot = this.freeCount[c]! > 0 ? this.free[c]![--this.freeCount[c]!]! : this.used[c]!++;
    const shift = c + SMALLEST_SLOT_SHIFT;
    let slab = this.slabs[c]!;
    if ((slot + 1) << shift > slab.length) slab = this.grow(c, grownCapacity(slab.length >> shift, slot + 1));
    let at = slot << shift;
    slab[at++] = length;
    for (let i = 0; i < length; i++) slab[at + i] = name.charCodeAt(i);
    return (slot << CLASS_BITS) | c;
  }

  /** Gives the handle's slot back; the handle must not be used again. */
  remove(handle: number): void {
    const c = handle & CLASS_MASK;
    if (this.freeCount[c] === this.free[c]!.length) this.free[c] = resized(this.free[c]!, this.free[c]!.length * 2);
    this.free[c]![this.freeCount[c]!++] = handle >>> CLASS_BITS;
  }

  /** Whether the handle's name is exactly these bytes. */
  equals(handle: number, name: ByteString): boolean {
    const c = handle & CLASS_MASK;
    const slab = this.slabs[c]!;
    let at = (handle >>> CLASS_BITS) << (c + SMALLEST_SLOT_SHIFT);
    const length = name.length;
    if (slab[at++] !== length) return false;
    for (let i = 0; i < length; i++) if (slab[at + i] !== name.charCodeAt(i)) return false;
    return true;
  }

  /** Whether two handles hold the same bytes. */
  same(a: number, b: number): boolean {
    if (a === b) return true;
    const ca = a & CLASS_MASK;
    if (ca !== (b & CLASS_MASK)) return false;
    const slab = this.slabs[ca]!;
    const shift = ca + SMALLEST_SLOT_SHIFT;
    const atA = (a >>> CLASS_BITS) << shift;
    const atB = (b >>> CLASS_BITS) << shift;
    const length = slab[atA]!;
    for (let i = 0; i <= length; i++) if (slab[atA + i] !== slab[atB + i]) return false;
    return true;
  }

  /** The name as a byte string (a new string: for answers that leave the table). */
  toString(handle: number): ByteString {
    const c = handle & CLASS_MASK;
    const at = (handle >>> CLASS_BITS) << (c + SMALLEST_SLOT_SHIFT);
    const slab = this.slabs[c]!;
    return byteString(slab, at + 1, at + 1 + slab[at]!);
  }

  /** Bytes held in slabs, used or free (for memory accounting and tests). */
  get slabBytes(): number {
    return this.slabs.reduce((sum, slab) => sum + slab.length, 0);
  }

  private grow(c: number, slots: number): Uint8Array {
    const slab = resized(this.slabs[c]!, slots << (c + SMALLEST_SLOT_SHIFT));
    this.slabs[c] = slab;
    return slab;
  }
}
