import { Command } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';
import type { BenchClient } from './BenchClient.js';

/** Requests sent per round trip while filling; replies are checked batch by batch. */
const FILL_BATCH = 4_096;

/**
 * Sends `count` lock requests made by `requestAt(n)`, pipelined in batches, and checks each reply
 * is the expected position. Throws on the first unexpected one (a full table, a refused request).
 */
export async function fillLocks(
  client: BenchClient,
  count: number,
  requestAt: (n: number) => Request & { readonly command: typeof Command.Request },
  expectedPosition: (n: number) => number = () => 1,
  batch = FILL_BATCH,
): Promise<void> {
  for (let first = 0; first < count; first += batch) {
    const requests: Request[] = [];
    for (let n = first; n < Math.min(count, first + batch); n++) requests.push(requestAt(n));
    const replies = await client.call(requests);
    replies.forEach((reply, i) => {
      const got = reply.readUInt16BE(0);
      const want = expectedPosition(first + i);
      if (got !== want) throw new Error(`filling: request ${first + i} got position ${got}, expected ${want}`);
    });
  }
}
