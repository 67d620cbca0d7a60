import { Command } from '../../src/protocol/constants.js';
import { pollUntil } from './poll.js';
import type { RawClient } from './rawClient.js';
import { ask, call } from './wire.js';

/**
 * Until a TTL expiry through `client` holds its lock back: a cluster writes lock-delay's log format
 * only once every live node has declared it reads it, a second or so after a fresh start (the
 * format-4 window, src/cluster/README.md), and an expiry before that grants at once. Each try
 * lets a probe lock of its own expire and looks whether it is held back.
 */
export async function lockDelayInForce(client: RawClient, limitMs: number): Promise<void> {
  let tries = 0;
  await pollUntil(
    'an expiry to hold its lock back (every node reading the lock-delay format)',
    async () => {
      const index = `probe-${tries++}`;
      await ask.request(client, 'lock-delay-probe', index, 'probe', { ttl: 1 });
      const { heldForMs } = await pollUntil(
        `probe ${index} to expire`,
        async () => {
          const queue = (await call(client, { command: Command.ListDetailed, key: 'lock-delay-probe' })).find((q) => q.index === index);
          return queue === undefined || queue.entries.length === 0 ? { heldForMs: queue?.heldForMs ?? 0 } : undefined;
        },
        limitMs,
      );
      return heldForMs > 0 ? true : undefined;
    },
    limitMs,
  );
}
