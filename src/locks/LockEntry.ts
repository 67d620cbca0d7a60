import type { ByteString } from '../bytes.js';
import { NOT_IN_HEAP, type Expiring } from './ExpiryHeap.js';
import type { LockQueue } from './LockQueue.js';
import type { VacantOwner } from './OwnerIndex.js';

/** A deadline that never comes: the entry's current phase has TTL/TTW 0. */
export const NO_DEADLINE = Number.POSITIVE_INFINITY;

/** One owner or waiter in the queue of one (key, index). */
export class LockEntry implements Expiring {
  isOwner = false;
  deadline = NO_DEADLINE;
  heapIndex = NOT_IN_HEAP;
  /** The owner name's vacancy record, carried while the owner holds entries so it is reused. */
  ownerVacancy: VacantOwner | undefined = undefined;
  /**
   * Cluster mode: the log position at which the current phase (TTL or TTW) began. An expiry
   * command names it, so one proposed before a renewal or a promotion finds a newer phase and
   * does nothing. Always 0 on a single node.
   */
  version = 0;
  /** Cluster mode: the node the entry was requested through (drain waits for its own). */
  origin: ByteString = '';

  constructor(
    readonly queue: LockQueue,
    readonly owner: ByteString,
    /** 0–255; higher waits less. Fixed for the entry's life: a re-request keeps it. */
    readonly priority: number,
    /** Arrival order (in cluster mode the request's log position: the bakery ticket); breaks priority ties (earlier first). */
    readonly arrival: number,
    /** Seconds, as last requested. 0 = no expiry in that phase. */
    public ttl: number,
    public ttw: number,
  ) {}

  /** Seconds the current phase may last without renewal (TTL for owners, TTW for waiters). */
  get phaseSeconds(): number {
    return this.isOwner ? this.ttl : this.ttw;
  }
}

/** Queue order of waiters: higher priority first, then earlier arrival. */
export function compareWaiters(a: LockEntry, b: LockEntry): number {
  return b.priority - a.priority || a.arrival - b.arrival;
}
