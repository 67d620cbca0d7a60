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
}
