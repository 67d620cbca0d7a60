import type { Command } from '../protocol/constants.js';
import { decodeReply, replyFrameLength, type ReplyOf } from '../protocol/decodeReply.js';
import { INCOMPLETE } from '../protocol/decodeRequest.js';

/** Returned by {@link ReplyDecoder.next} while the reply's bytes have not all arrived. */
export const NOT_YET: unique symbol = Symbol('not yet');

const MIN_CARRY_CAPACITY = 4 * 1024;

/**
 * Turns the server's byte stream into replies. Replies carry no command byte, so the caller says
 * which reply comes next (requests are answered in order). A reply split across chunks is carried
 * in storage that grows by doubling, so even a 30 MB list reply arriving in 64 KB pieces costs
 * linear copying; when nothing is carried, chunks are read in place.
 */
export class ReplyDecoder {
  private buffer: Buffer = Buffer.alloc(0);
  private start = 0;
  private end = 0;
  /** Whether `buffer` is our own carry storage (and may be written) rather than a received chunk. */
  private ownsBuffer = false;

  push(chunk: Buffer): void {
    const pending = this.end - this.start;
    if (pending === 0) {
      this.buffer = chunk;
      this.start = 0;
      this.end = chunk.length;
      this.ownsBuffer = false;
      return;
    }
    if (this.ownsBuffer && this.end + chunk.length <= this.buffer.length) {
      this.end += chunk.copy(this.buffer, this.end);
      return;
    }
    const needed = pending + chunk.length;
    let capacity = this.ownsBuffer ? this.buffer.length : MIN_CARRY_CAPACITY;
    while (capacity < needed) capacity *= 2;
    // Reuse our storage when it is big enough and only needs compacting (copy handles overlap).
    const storage = this.ownsBuffer && capacity === this.buffer.length ? this.buffer : Buffer.allocUnsafe(capacity);
    this.buffer.copy(storage, 0, this.start, this.end);
    chunk.copy(storage, pending);
    this.buffer = storage;
    this.start = 0;
    this.end = needed;
    this.ownsBuffer = true;
  }

  /** The next reply, decoded as the reply to `command`, or NOT_YET. */
  next<C extends Command>(command: C): ReplyOf[C] | typeof NOT_YET {
    const length = replyFrameLength(command, this.buffer, this.start, this.end);
    if (length === INCOMPLETE) return NOT_YET;
    const frame = this.buffer.subarray(this.start, this.start + length);
    this.start += length;
    return decodeReply(command, frame);
  }

  /** Bytes received that are not yet a whole reply. */
  get pendingBytes(): number {
    return this.end - this.start;
  }
}
