import { grownCapacity, resized } from './records.js';
import { NO_CLIENT } from './TableLimits.js';

const MIN_CAPACITY = 64;

/**
 * Which connection created each entry, and how many entries each connection created that are
 * still held: what --max-locks-per-connection bounds. A column under the entry's id (4 bytes an
 * entry) and one counter per connection that holds any; a connection that closed keeps counting
 * its entries until they go (its number is never reused in the process).
 */
export class ConnectionEntries {
  private clientOf = new Int32Array(MIN_CAPACITY);
  private readonly counts = new Map<number, number>();

  /** Entries created through connection `client` that are still held. */
  of(client: number): number {
    return this.counts.get(client) ?? 0;
  }

  /** Entry `entry` was created through `client` (NO_CLIENT: none, not counted). */
  add(entry: number, client: number): void {
    if (entry >= this.clientOf.length) this.clientOf = resized(this.clientOf, grownCapacity(this.clientOf.length, entry + 1));
    this.clientOf[entry] = client;
    if (client !== NO_CLIENT) this.counts.set(client, this.of(client) + 1);
  }

  /** Entry `entry` is gone. */
  remove(entry: number): void {
    if (entry >= this.clientOf.length) return;
    const client = this.clientOf[entry]!;
    if (client === NO_CLIENT) return;
    this.clientOf[entry] = NO_CLIENT;
    const left = this.of(client) - 1;
    if (left > 0) this.counts.set(client, left);
    else this.counts.delete(client);
  }

  /** The table renumbered its entries: entry `from[i]` is `to[i]` now (see QueueRules.recordsRebuilt). */
  renumbered(from: Int32Array, to: Int32Array, count: number): void {
    let highest = -1;
    for (let i = 0; i < count; i++) highest = Math.max(highest, to[i]!);
    const clientOf = new Int32Array(grownCapacity(MIN_CAPACITY, highest + 1));
    for (let i = 0; i < count; i++) clientOf[to[i]!] = this.clientOf[from[i]!] ?? NO_CLIENT;
    this.clientOf = clientOf;
  }
}
