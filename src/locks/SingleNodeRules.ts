import type { LockRequest } from './LockService.js';
import { DEFAULT_MAX_ENTRIES } from './LockTable.js';
import type { QueueRules } from './QueueRules.js';
import { ConnectionEntries } from './ConnectionEntries.js';
import { DEFAULT_MAX_LOCKS_PER_CONNECTION, DEFAULT_MAX_LOCKS_PER_OWNER, DEFAULT_MAX_TABLE_BYTES, NO_CLIENT, Refusal, type TableRoom } from './TableLimits.js';

/** What a single node's table may hold (see TableLimits); each undefined takes its default. */
export interface SingleNodeLimits {
  /** Most entries (owners + waiters); --max-locks. */
  readonly maxEntries?: number;
  /** Most bytes charged for them (TableLimits.entryBytes); --max-table-bytes. */
  readonly maxTableBytes?: number;
  /** Most entries of one owner; --max-locks-per-owner. */
  readonly maxEntriesPerOwner?: number;
  /** Most entries created through one connection and still held; --max-locks-per-connection. */
  readonly maxEntriesPerConnection?: number;
}

/**
 * The queue rules of a lock server on its own: this process alone knows the time, so it decides
 * expiry itself. Tickets count arrivals; the table holds at most its limits (SingleNodeLimits),
 * and counts per connection the entries created through it that are still held.
 */
export class SingleNodeRules implements QueueRules {
  private nextArrival = 0;
  private lastToken: number;
  readonly maxEntries: number;
  readonly maxTableBytes: number;
  readonly maxEntriesPerOwner: number;
  readonly maxEntriesPerConnection: number;
  private readonly connections = new ConnectionEntries();

  /**
   * @param limits what the table holds at most; a request for one more entry beyond any is refused (0).
   * @param tokenFloor fencing tokens handed out are all above it (see LocalLockServiceOptions.tokenFloor).
   */
  constructor(limits: SingleNodeLimits | number = {}, tokenFloor = 0) {
    const given = typeof limits === 'number' ? { maxEntries: limits } : limits;
    this.maxEntries = given.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.maxTableBytes = given.maxTableBytes ?? DEFAULT_MAX_TABLE_BYTES;
    this.maxEntriesPerOwner = given.maxEntriesPerOwner ?? DEFAULT_MAX_LOCKS_PER_OWNER;
    this.maxEntriesPerConnection = given.maxEntriesPerConnection ?? DEFAULT_MAX_LOCKS_PER_CONNECTION;
    this.lastToken = tokenFloor;
  }

  /** Entries created through connection `client` that are still held. */
  entriesOfClient(client: number): number {
    return this.connections.of(client);
  }

  /** The highest fencing token handed out or restored: what the lock file keeps, so the next start goes on above it. */
  get highestToken(): number {
    return this.lastToken;
  }

  /** A token restored from the lock file: later grants go above it. */
  noteToken(token: number): void {
    if (token > this.lastToken) this.lastToken = token;
  }

  /** One more than the last: every grant of this process, on any lock, gets a greater token than the one before. */
  grantToken(): number {
    return ++this.lastToken;
  }

  /** Entries created so far (their arrival numbers); how busy the table has been. */
  get arrivals(): number {
    return this.nextArrival;
  }

  refusal(_request: LockRequest, room: TableRoom, client: number): Refusal {
    if (room.entries >= this.maxEntries) return Refusal.MaxLocks;
    if (room.bytes + room.entryBytes > this.maxTableBytes) return Refusal.MaxTableBytes;
    if (room.ownerEntries >= this.maxEntriesPerOwner) return Refusal.MaxLocksPerOwner;
    if (client !== NO_CLIENT && this.entriesOfClient(client) >= this.maxEntriesPerConnection) return Refusal.MaxLocksPerConnection;
    return Refusal.None;
  }

  newTicket(): number {
    return this.nextArrival++;
  }

  entryAdded(entry: number, client: number): void {
    this.connections.add(entry, client);
  }

  entryRemoved(entry: number): void {
    this.connections.remove(entry);
  }

  phaseBegins(): void {}

  /**
   * Only a waiter whose wait has not run out. One past its TTW deadline that the sweep has not
   * reached yet is already gone in meaning; promoting it would hand it a fresh TTL.
   */
  promotes(waitDeadline: number, now: number): boolean {
    return waitDeadline > now;
  }

  holdVersion(): number {
    return 0;
  }

  recordsRebuilt(from: Int32Array, to: Int32Array, count: number): void {
    this.connections.renumbered(from, to, count);
  }
}
