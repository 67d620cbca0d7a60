import type { LockRequest } from './LockService.js';
import { DEFAULT_MAX_ENTRIES } from './LockTable.js';
import type { QueueRules } from './QueueRules.js';

/**
 * The queue rules of a lock server on its own: this process alone knows the time, so it decides
 * expiry itself. Tickets count arrivals; the table holds at most `maxEntries`.
 */
export class SingleNodeRules implements QueueRules {
  private nextArrival = 0;

  /** @param maxEntries most entries (owners + waiters) the table holds; a request for one more is refused (0). */
  constructor(private readonly maxEntries: number = DEFAULT_MAX_ENTRIES) {}

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

  recordsRebuilt(): void {}
}
