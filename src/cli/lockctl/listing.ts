import type { ByteString } from '../../bytes.js';
import { ExtensionUnsupportedError } from '../../client/errors.js';
import type { DetailedQueue, ListedEntry, LockClient } from '../../client/LockClient.js';

/**
 * What lockctl shows of a key: its queues as the detailed list (0x0D) tells them (each lock's
 * lock-delay left, each entry's time left and token), or, from a server without it (LockServer
 * 0.9b, a lockserver before it), its entries as list (0x07) does.
 */
export type Listing = { readonly queues: readonly DetailedQueue[] } | { readonly entries: readonly ListedEntry[] };

/**
 * Lists keys through the caller's connection with the detailed list (0x0D) while the server
 * answers it; once a server has closed the connection on one instead (0.9b), with list (0x07)
 * through a new connection to the same server, from then on (watch asks again and again).
 */
export class KeyLister {
  /** The connection opened for list (0x07), once the server has shown it has no 0x0D. */
  private plain: LockClient | undefined;

  constructor(private readonly client: LockClient) {}

  async list(key: ByteString): Promise<Listing> {
    if (this.plain === undefined) {
      try {
        return { queues: await this.client.queues(key) };
      } catch (error) {
        if (!(error instanceof ExtensionUnsupportedError)) throw error;
      }
      this.plain = await this.client.another();
    }
    return { entries: await this.plain.list(key) };
  }

  /** host:port of the server listed now. */
  get address(): string {
    return (this.plain ?? this.client).address;
  }

  /** Closes the connection it opened, if any (the caller's stays the caller's). */
  async close(): Promise<void> {
    await this.plain?.close().catch(() => {});
  }
}
