import type { LockRequest } from './LockService.js';
import type { Refusal, TableRoom } from './TableLimits.js';

/**
 * What a lock table's queues do differently on a single node and in a cluster replica. The table
 * (LockTable) keeps the mechanics both share: queues, key and owner directories, the deadline
 * heap, the entry records. At each point where the two differ it asks its rules, which decide:
 * SingleNodeRules when this process alone knows the time, ReplicaRules when the log decides.
 *
 * An entry is an id into the table's EntryRecords; rules that keep more per entry (a replica's
 * versions and origins) keep it in their own columns under the same id. A table has one kind of
 * rules for its life, so every call here goes to one class and stays cheap.
 */
export interface QueueRules<Request extends LockRequest = LockRequest> {
  /**
   * Whether a request, through connection `client` (NO_CLIENT if none), may add one more entry to
   * a table that holds `room`: Refusal.None, or the limit it would pass.
   */
  refusal(request: Request, room: TableRoom, client: number): Refusal;
  /** The ticket of a new entry: among waiters of one priority, the lower ticket goes first. */
  newTicket(): number;
  /** A new entry joined the table through connection `client` (its record filled, not yet owner or waiter). */
  entryAdded(entry: number, client: number): void;
  /** An entry is leaving the table; its record is still readable. */
  entryRemoved(entry: number): void;
  /**
   * The fencing token of a grant happening now (a request answered 1 at once, or a promotion):
   * greater than every token any earlier grant of this table got, so a storage that keeps the
   * highest token it has seen refuses the writes of every earlier holder.
   */
  grantToken(): number;
  /** The entry's current phase (TTL as owner, TTW as waiter) begins: requested, renewed or promoted. */
  phaseBegins(entry: number): void;
  /**
   * A waiter's turn has come (the owner left): whether it takes the lock, given when its wait
   * runs out (`waitDeadline`, this node's clock) and the time now. If not, it is dropped.
   */
  promotes(waitDeadline: number, now: number): boolean;
  /** What a lock-delay begun now is named by (the expiry's log position in a replica; 0 on a single node). */
  holdVersion(): number;
  /**
   * The table rebuilt its records (see LockTable.compactIfSparse): the entry that was `from[i]`
   * is now `to[i]`, for i below `count`, and no other entry is left.
   */
  recordsRebuilt(from: Int32Array, to: Int32Array, count: number): void;
}
