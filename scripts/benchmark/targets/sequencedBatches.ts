/**
 * How the null nodes with one sequencer (nullClusterNode --sequencer-port / --forward-to) pass
 * batches around: each batch is prefixed with its length (u32, big-endian), on the loopback link
 * from a forwarding node to the sequencer and in the log value the sequencer appends, which holds
 * every batch it gathered since its last append, one after the other.
 */

const LENGTH_BYTES = 4;

/** `batch` with its length in front: the two buffers to write or to concatenate. */
export function lengthPrefixed(batch: Buffer): [Buffer, Buffer] {
  const length = Buffer.allocUnsafe(LENGTH_BYTES);
  length.writeUInt32BE(batch.length);
  return [length, batch];
}

/**
 * Calls `visit` with each whole batch at the start of `input`, in order, until it returns true;
 * returns where it stopped: the end of the last batch visited (so an unfinished batch starts there).
 */
function eachBatch(input: Buffer, visit: (batch: Buffer) => boolean): number {
  let at = 0;
  while (at + LENGTH_BYTES <= input.length) {
    const end = at + LENGTH_BYTES + input.readUInt32BE(at);
    if (end > input.length) break;
    const stop = visit(input.subarray(at + LENGTH_BYTES, end));
    at = end;
    if (stop) break;
  }
  return at;
}

/** Whether `batch` starts with `tag` (a null node's name and sequence number). */
export function startsWithTag(batch: Buffer, tag: Buffer): boolean {
  return batch.length >= tag.length && tag.equals(batch.subarray(0, tag.length));
}

/** Whether `value` (length-prefixed batches, one after the other) holds a batch that starts with `tag`. */
export function holdsBatchTagged(value: Buffer, tag: Buffer): boolean {
  let found = false;
  eachBatch(value, (batch) => (found = startsWithTag(batch, tag)));
  return found;
}

/** Cuts a stream of length-prefixed batches into batches, keeping an unfinished one for the next chunk. */
export class BatchCutter {
  private carry: Buffer | undefined;

  /** Calls `onBatch` with each whole batch of `chunk` (after what was carried), in order. */
  feed(chunk: Buffer, onBatch: (batch: Buffer) => void): void {
    const input = this.carry === undefined ? chunk : Buffer.concat([this.carry, chunk]);
    this.carry = undefined;
    const at = eachBatch(input, (batch) => {
      onBatch(batch);
      return false;
    });
    if (at < input.length) this.carry = Buffer.from(input.subarray(at));
  }
}
