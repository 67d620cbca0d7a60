import { NO_DEADLINE } from './DeadlineHeap.js';
import { NO_ID } from './HashIndex.js';
import { grownCapacity, IdAllocator, resized } from './records.js';

const MIN_CAPACITY = 64;

/**
 * Every owner and waiter of every lock: one record per entry, as columns indexed by entry id (see
 * records.ts). LockTable gives each field its meaning; this class only keeps the columns and the
 * ids: 56 bytes per entry. It also keeps the bytes each entry is charged (TableLimits.entryBytes)
 * and their sum, so that whatever takes an entry out (a release, an expiry, a rebuild) gives its
 * bytes back. Rules that keep more per entry keep their own columns (see ReplicaRules).
 */
export class EntryRecords {
  /** The (key, index) queue the entry is in. */
  queue = new Int32Array(MIN_CAPACITY);
  /** The owner-name record (OwnerDirectory) it belongs to. */
  owner = new Int32Array(MIN_CAPACITY);
  /** Neighbours in its owner's list of entries (OwnerDirectory), NO_ID at the ends. */
  ownerPrev = new Int32Array(MIN_CAPACITY);
  ownerNext = new Int32Array(MIN_CAPACITY);
  /** The entry's ticket (see QueueRules.newTicket); breaks priority ties, lower first. */
  ticket = new Float64Array(MIN_CAPACITY);
  /** The fencing token of the entry's grant (see QueueRules.grantToken) while it owns; 0 while it waits. */
  token = new Float64Array(MIN_CAPACITY);
  /** When the current phase runs out on this node's clock (ms), NO_DEADLINE if never. */
  deadline = new Float64Array(MIN_CAPACITY);
  /** When the entry was created, on this node's clock (ms): how long it waited, once granted (metrics only). */
  requestedAt = new Float64Array(MIN_CAPACITY);
  /** Seconds, as last requested; 0 = no expiry in that phase. */
  ttl = new Uint16Array(MIN_CAPACITY);
  ttw = new Uint16Array(MIN_CAPACITY);
  /** 0–255; higher waits less. Fixed for the entry's life: a re-request keeps it. */
  priority = new Uint8Array(MIN_CAPACITY);
  /** 1 for the queue's owner, 0 for a waiter. */
  isOwner = new Uint8Array(MIN_CAPACITY);
  /** The bytes the entry is charged (TableLimits.entryBytes: at most 1,024). */
  private charged = new Uint16Array(MIN_CAPACITY);
  private chargedSum = 0;
  private capacity = MIN_CAPACITY;
  private readonly ids = new IdAllocator();

  get count(): number {
    return this.ids.live;
  }

  /** Bytes charged for every entry held. */
  get bytes(): number {
    return this.chargedSum;
  }

  /** A new entry id, charged `bytes` (TableLimits.entryBytes) until released; the caller sets every field. */
  allocate(bytes = 0): number {
    const id = this.ids.allocate();
    if (id >= this.capacity) this.grow(grownCapacity(this.capacity, id + 1));
    this.ownerPrev[id] = NO_ID;
    this.ownerNext[id] = NO_ID;
    this.deadline[id] = NO_DEADLINE;
    this.isOwner[id] = 0;
    this.token[id] = 0;
    this.charged[id] = bytes;
    this.chargedSum += bytes;
    return id;
  }

  release(id: number): void {
    this.chargedSum -= this.charged[id]!;
    this.charged[id] = 0;
    this.ids.release(id);
  }

  private grow(capacity: number): void {
    this.capacity = capacity;
    this.queue = resized(this.queue, capacity);
    this.owner = resized(this.owner, capacity);
    this.ownerPrev = resized(this.ownerPrev, capacity);
    this.ownerNext = resized(this.ownerNext, capacity);
    this.ticket = resized(this.ticket, capacity);
    this.token = resized(this.token, capacity);
    this.deadline = resized(this.deadline, capacity);
    this.requestedAt = resized(this.requestedAt, capacity);
    this.ttl = resized(this.ttl, capacity);
    this.ttw = resized(this.ttw, capacity);
    this.priority = resized(this.priority, capacity);
    this.isOwner = resized(this.isOwner, capacity);
    this.charged = resized(this.charged, capacity);
  }
}
