import { byteString, type ByteString } from '../bytes.js';
import { resized } from './records.js';

/** Size classes: slots of 8, 16, 32, 64, 128 and 256 bytes (a length byte, then the name). */
const CLASSES = 6;
const CLASS_BITS = 3;
const CLASS_MASK = (1 << CLASS_BITS) - 1;
const SMALLEST_SLOT_SHIFT = 3;
/** Each class's slots live in pages of this many bytes, made as they are needed. */
const PAGE_SHIFT = 16;
/** Most slots of one class: the handle keeps 29 bits for the slot number. */
export const MAX_SLOTS_PER_CLASS = 2 ** (32 - CLASS_BITS);

/** The size class of a name of `length` bytes: the smallest slot holding it and its length byte. */
function classOf(length: number): number {
  return Math.max(0, 32 - Math.clz32(length) - SMALLEST_SLOT_SHIFT);
}

/** The bytes a name of `length` bytes takes in a NameStore: its slot (the length byte included). */
export function storedNameBytes(length: number): number {
  return 1 << (classOf(length) + SMALLEST_SLOT_SHIFT);
}

/**
 * The bytes of every name the lock table holds (keys, indexes, owners), in fixed-size slots by size
 * class; a name is known by its handle (slot number and class in one integer).
 *
 * Why not keep the names as JavaScript strings: a byte string of ten bytes is a 32-byte heap
 * object plus an 8-byte reference, which the collector traces and, for a lock held a while,
 * promotes and later compacts; here it is 16 bytes in a typed array, and a name that is looked up
 * (every command names one) is compared byte by byte where it lies, with no string made. Names
 * become strings again only to leave the table (find owner, list, the lock file).
 *
 * Slots are kept in 64 KiB pages, added as a class fills: nothing is ever copied to grow, and no
 * single array has to hold a whole class (a hundred million names of 200 bytes are 25 GB, beyond
 * any one typed array).
 */
export class NameStore {
  /** Per class, its pages; slot s of class c is at byte (s mod slotsPerPage) << (c + 3) of page s / slotsPerPage. */
  private readonly pages: Uint8Array[][] = [];
  /** Slots ever used per class; freed ones are reused first. */
  private readonly used: number[] = [];
  private readonly free: Int32Array[] = [];
  private readonly freeCount: number[] = [];

  constructor() {
    for (let c = 0; c < CLASSES; c++) {
      this.pages.push([]);
      this.used.push(0);
      this.free.push(new Int32Array(64));
      this.freeCount.push(0);
    }
  }

  /** Stores a copy of the name's bytes; returns its handle. */
  add(name: ByteString): number {
    const length = name.length;
    const c = classOf(length);
    let slot: number;
    if (this.freeCount[c]! > 0) {
      slot = this.free[c]![--this.freeCount[c]!]!;
    } else {
      slot = this.used[c]!++;
      if (slot >= MAX_SLOTS_PER_CLASS) throw new RangeError(`NameStore: more than ${MAX_SLOTS_PER_CLASS} names of one size`);
    }
    const shift = c + SMALLEST_SLOT_SHIFT;
    const pageSlots = PAGE_SHIFT - shift;
    const pages = this.pages[c]!;
    const p = slot >>> pageSlots;
    if (p === pages.length) pages.push(new Uint8Array(1 << PAGE_SHIFT));
    const page = pages[p]!;
    let at = (slot & ((1 << pageSlots) - 1)) << shift;
    page[at++] = length;
    for (let i = 0; i < length; i++) page[at + i] = name.charCodeAt(i);
    return (slot << CLASS_BITS) | c;
  }

  /** Gives the handle's slot back; the handle must not be used again. */
  remove(handle: number): void {
    const c = handle & CLASS_MASK;
    if (this.freeCount[c] === this.free[c]!.length) this.free[c] = resized(this.free[c]!, this.free[c]!.length * 2);
    this.free[c]![this.freeCount[c]!++] = handle >>> CLASS_BITS;
  }

  /** The bytes the handle's slot takes (storedNameBytes of its name's length, without reading it). */
  slotBytes(handle: number): number {
    return 1 << ((handle & CLASS_MASK) + SMALLEST_SLOT_SHIFT);
  }

  /** Whether the handle's name is exactly these bytes. */
  equals(handle: number, name: ByteString): boolean {
    const c = handle & CLASS_MASK;
    const shift = c + SMALLEST_SLOT_SHIFT;
    const slot = handle >>> CLASS_BITS;
    const page = this.pages[c]![slot >>> (PAGE_SHIFT - shift)]!;
    let at = (slot & ((1 << (PAGE_SHIFT - shift)) - 1)) << shift;
    const length = name.length;
    if (page[at++] !== length) return false;
    for (let i = 0; i < length; i++) if (page[at + i] !== name.charCodeAt(i)) return false;
    return true;
  }

  /** The name as a byte string (a new string: for answers that leave the table). */
  toString(handle: number): ByteString {
    const c = handle & CLASS_MASK;
    const shift = c + SMALLEST_SLOT_SHIFT;
    const slot = handle >>> CLASS_BITS;
    const page = this.pages[c]![slot >>> (PAGE_SHIFT - shift)]!;
    const at = (slot & ((1 << (PAGE_SHIFT - shift)) - 1)) << shift;
    return byteString(page, at + 1, at + 1 + page[at]!);
  }

  /** Bytes held in pages, used or free (for memory accounting and tests). */
  get pageBytes(): number {
    return this.pages.reduce((sum, pages) => sum + pages.length * (1 << PAGE_SHIFT), 0);
  }
}
