/** Pieces of input a connection keeps stamps for; past this the newest pieces share one (older) stamp. */
const MAX_PIECES = 32;

/**
 * When each piece of a connection's input still waiting to be decoded was read, and how many
 * event-loop stalls the server had seen by then (cluster mode only). A frame is judged by the
 * stamp of the piece its first byte came in: a stall seen since means its bytes may have waited
 * through it; its read time is where its command's commit deadline counts from. Input waits here,
 * read but undecoded, while its connection has as many answers outstanding as it may (a deep
 * pipeline); judging it where it is read would let it run late, with a fresh deadline.
 *
 * Invariants: pieces are in stream order, each ending where the next begins; a stamp is never
 * younger than the piece it covers (merged pieces keep the older stamp), so a frame can only be
 * judged older than it is.
 */
export class InputStamps {
  /** Where each piece ends, counted in bytes read since the connection opened. */
  private readonly ends: number[] = [];
  private readonly readAt: number[] = [];
  private readonly stalls: number[] = [];
  private first = 0;
  /** Bytes read so far: where the next piece begins. */
  private read = 0;

  /** A piece of `bytes` was read at `now`, with `stalls` stalls seen. */
  add(bytes: number, now: number, stalls: number): void {
    this.read += bytes;
    const last = this.ends.length - 1;
    if (last - this.first + 1 >= MAX_PIECES) {
      // A client dribbling tiny pieces: the newest joins the last, whose stamp is older.
      this.ends[last] = this.read;
      this.stalls[last] = Math.min(this.stalls[last]!, stalls);
      return;
    }
    if (this.first > MAX_PIECES) {
      this.ends.splice(0, this.first);
      this.readAt.splice(0, this.first);
      this.stalls.splice(0, this.first);
      this.first = 0;
    }
    this.ends.push(this.read);
    this.readAt.push(now);
    this.stalls.push(stalls);
  }

  /**
   * Moves to the piece holding the byte `pending` bytes before the end of what was read (the
   * first byte of the next frame to decode), dropping the pieces before it. Returns false when no
   * piece holds it (nothing was read).
   */
  seek(pending: number): boolean {
    const offset = this.read - pending;
    while (this.first < this.ends.length && this.ends[this.first]! <= offset) this.first++;
    return this.first < this.ends.length;
  }

  /** The read time of the piece seek() found. */
  get readTime(): number {
    return this.readAt[this.first]!;
  }

  /** The stalls seen when the piece seek() found was read. */
  get stallCount(): number {
    return this.stalls[this.first]!;
  }
}
