import type { LockRequest } from './LockService.js';
import { DEFAULT_MAX_ENTRIES } from './LockTable.js';
import type { QueueRules } from './QueueRules.js';

/**
 * The queue rules of a lock server on its own: this process alone knows the time, so it decides
 * expiry itself. Tickets count arrivals; the table holds at most `maxEntries`.
 */
export class SingleNodeRules implements QueueRules {
  private nextArrival = 0;
  private lastToken: number;

  /**
   * @param maxEntries most entries (owners + waiters) the table holds; a request for one more is refused (0).
   * @param tokenFloor fencing tokens handed out are all above it (see LocalLockServiceOptions.tokenFloor).
   */
  constructor(
    private readonly maxEntries: number = DEFAULT_MAX_ENTRIES,
    tokenFloor = 0,
  ) {
    this.lastToken = tokenFloor;
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

  hasRoom(_request: LockRequest, size: number): boolean {
    return size < this.maxEntries;
  }

  newTicket(): number {
    return this.nextArrival++;
  }

  entryAdded(): void {}

  entryRemoved(): void {}

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

  recordsRebuilt(): void {}
}
