import type { ByteString } from '../bytes.js';
import { byteString } from '../bytes.js';

const EMPTY = Buffer.alloc(0);

/**
 * Reads big-endian integers and length-prefixed byte strings from a buffer, tracking its offset;
 * the counterpart of BufferWriter. It never checks bounds: callers hand it only whole frames
 * (measured first by requestFrameLength), and one reader is reused for every frame.
 */
export class BufferReader {
  private buffer: Buffer = EMPTY;
  private offset = 0;
  /** The string last read into each slot of recentString(). */
  private readonly recent: ByteString[] = [];

  /** Points the reader at buffer[offset]. */
  reset(buffer: Buffer, offset: number): this {
    this.buffer = buffer;
    this.offset = offset;
    return this;
  }

  u8(): number {
    return this.buffer[this.offset++]!;
  }

  u16(): number {
    const value = (this.buffer[this.offset]! << 8) | this.buffer[this.offset + 1]!;
    this.offset += 2;
    return value;
  }

  /** One length byte, then that many bytes, as a byte string (latin1: never decoded as UTF-8). */
  string(): ByteString {
    const length = this.buffer[this.offset++]!;
    if (length === 0) return '';
    const start = this.offset;
    this.offset += length;
    return byteString(this.buffer, start, this.offset);
  }

  /**
   * Like string(), but when the bytes are those last read into `slot` (0–3), that same string is
   * returned instead of a new one. A connection names the same owner and index request after
   * request, and releases the key it just requested: those cost no string, no allocation, and
   * the table's Map lookups and `===` find a string whose hash is already computed and which is
   * often the very one stored. A differing string costs a compare from its end up to the last differing byte.
   */
  recentString(slot: number): ByteString {
    const buffer = this.buffer;
    const length = buffer[this.offset++]!;
    if (length === 0) return '';
    const start = this.offset;
    this.offset += length;
    const last = this.recent[slot];
    if (last !== undefined && last.length === length) {
      // From the end: generated names (row ids, counters) differ there, after a long common prefix.
      let i = length - 1;
      while (i >= 0 && last.charCodeAt(i) === buffer[start + i]) i--;
      if (i < 0) return last;
    }
    const value = byteString(buffer, start, this.offset);
    this.recent[slot] = value;
    return value;
  }
}
