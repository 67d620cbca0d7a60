import type { ByteString } from '../bytes.js';
import { MAX_STRING_LENGTH } from '../bytes.js';

const INITIAL_CAPACITY = 16 * 1024;
/** By default, after a flush, a buffer grown past this (a huge list reply) is dropped, not kept. */
const DEFAULT_RETAINED_CAPACITY = 256 * 1024;

/**
 * Appends big-endian integers and length-prefixed byte strings to one reusable buffer, tracking
 * its offset. A batch of replies (or requests) is written, then flush() copies it out once, so a
 * pipelined burst costs one allocation rather than one per message.
 */
export class BufferWriter {
  private buffer: Buffer;
  private offset = 0;

  constructor(
    private readonly initialCapacity = INITIAL_CAPACITY,
    private readonly retainedCapacity = DEFAULT_RETAINED_CAPACITY,
  ) {
    this.buffer = Buffer.allocUnsafe(initialCapacity);
  }

  get length(): number {
    return this.offset;
  }

  private ensure(extra: number): void {
    const needed = this.offset + extra;
    if (needed <= this.buffer.length) return;
    let capacity = this.buffer.length * 2;
    while (capacity < needed) capacity *= 2;
    const grown = Buffer.allocUnsafe(capacity);
    this.buffer.copy(grown, 0, 0, this.offset);
    this.buffer = grown;
  }

  u8(value: number): this {
    this.ensure(1);
    this.buffer[this.offset++] = value;
    return this;
  }

  u16(value: number): this {
    this.ensure(2);
    this.buffer.writeUInt16BE(value, this.offset);
    this.offset += 2;
    return this;
  }

  u32(value: number): this {
    this.ensure(4);
    this.buffer.writeUInt32BE(value, this.offset);
    this.offset += 4;
    return this;
  }

  /** An IEEE 754 double (the cluster log's positions). */
  f64(value: number): this {
    this.ensure(8);
    this.buffer.writeDoubleBE(value, this.offset);
    this.offset += 8;
    return this;
  }

  /** One length byte, then the bytes. Longer strings cannot be expressed on the wire. */
  string(value: ByteString): this {
    if (value.length > MAX_STRING_LENGTH) {
      throw new RangeError(`string of ${value.length} bytes exceeds the ${MAX_STRING_LENGTH}-byte wire limit`);
    }
    this.ensure(1 + value.length);
    this.buffer[this.offset++] = value.length;
    this.offset += this.buffer.write(value, this.offset, 'latin1');
    return this;
  }

  /** Copies out everything written since the last flush and starts over. */
  flush(): Buffer {
    const out = Buffer.from(this.buffer.subarray(0, this.offset));
    this.offset = 0;
    if (this.buffer.length > this.retainedCapacity) this.buffer = Buffer.allocUnsafe(this.initialCapacity);
    return out;
  }
}
