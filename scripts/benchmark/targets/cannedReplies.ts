import { Command, GREETING_ACCEPTED, STATS_REPLY_LENGTH } from '../../../src/protocol/constants.js';
import { requestFrameLength, UnknownCommandError } from '../../../src/protocol/decodeRequest.js';
import { INCOMPLETE } from '../../../src/protocol/framing.js';

/**
 * What the do-nothing servers (nullServer, nullClusterNode) answer: a fixed reply of the right
 * shape per command (a request is always "you own it", a release always "1 removed"), and the
 * frames they cut a connection's bytes into, never decoded further.
 */
export const CANNED_REPLIES: ReadonlyArray<Buffer | undefined> = (() => {
  const replies = new Array<Buffer | undefined>(256).fill(undefined);
  replies[Command.FindOwner] = Buffer.from([0]);
  replies[Command.Request] = Buffer.from([0, 1]);
  replies[Command.FindLocation] = Buffer.from([0, 1]);
  replies[Command.Renew] = Buffer.from([1]);
  replies[Command.Release] = Buffer.from([0, 1]);
  replies[Command.ReleaseAll] = Buffer.from([0, 0]);
  replies[Command.List] = Buffer.from([0, 0]);
  replies[Command.Stats] = Buffer.alloc(STATS_REPLY_LENGTH);
  // Fencing: token 1 (u64); a fenced request "you own it" with that token.
  replies[Command.Fence] = Buffer.from([0, 0, 0, 0, 0, 0, 0, 1]);
  replies[Command.RequestFenced] = Buffer.from([0, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
  // Waiting: an acquire-and-wait owns at once; a loss notice says "not the owner"; no queues.
  replies[Command.AcquireWait] = replies[Command.RequestFenced];
  replies[Command.AwaitLoss] = Buffer.from([0]);
  replies[Command.ListDetailed] = Buffer.from([0, 0]);
  return replies;
})();

export const GREETING = Buffer.from([GREETING_ACCEPTED]);

/** Cuts one connection's byte stream into request frames, keeping an unfinished frame for the next chunk. */
export class FrameCutter {
  private carry: Buffer | undefined;

  /**
   * Calls `onFrame` with each whole frame of `chunk` (after what was carried), in order, then
   * keeps the rest. Returns false at a command byte no LockServer knows: the connection is done.
   */
  feed(chunk: Buffer, onFrame: (input: Buffer, offset: number, length: number) => void): boolean {
    const input = this.carry === undefined ? chunk : Buffer.concat([this.carry, chunk]);
    this.carry = undefined;
    let offset = 0;
    try {
      for (;;) {
        const length = requestFrameLength(input, offset, input.length);
        if (length === INCOMPLETE) break;
        onFrame(input, offset, length);
        offset += length;
      }
    } catch (error) {
      if (!(error instanceof UnknownCommandError)) throw error;
      return false;
    }
    if (offset < input.length) this.carry = Buffer.from(input.subarray(offset));
    return true;
  }
}
