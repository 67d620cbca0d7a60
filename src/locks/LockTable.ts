import type { ByteString } from '../bytes.js';
import type { Contender } from '../protocol/messages.js';
import type { Clock } from './Clock.js';
import { ExpiryHeap, NOT_IN_HEAP } from './ExpiryHeap.js';
import { LockEntry, NO_DEADLINE } from './LockEntry.js';
import type { LockQueue } from './LockQueue.js';
import type { SavedLock } from './LockService.js';
import { OwnerIndex } from './OwnerIndex.js';
import { QueueDirectory } from './QueueDirectory.js';

const MS_PER_SECOND = 1000;

export interface LockTableOptions {
  /** Most entries (owners + waiters) the table holds; a request for one more is refused (0). */
  readonly maxEntries?: number;
  /**
   * Cluster mode: the table is a replica fed by the log (see src/cluster/ReplicaState.ts). Tickets
   * and phase versions are log positions (`position`), a waiter is promoted whatever this node's
   * clock says (expiry is a log command: the leader proposes it), and emptied keys are deleted at
   * once, so that list order never depends on when a node swept. The clock still dates every
   * phase, but only for this node's own deadline watch, never for an answer.
   */
  readonly replica?: ReplicaHooks;
}

/** One entry of a replicated table as a snapshot holds it: everything apply depends on. */
export interface ReplicaEntry extends Omit<SavedLock, 'remainingMs'> {
  /** The log position of the request that created it (its bakery ticket). */
  readonly ticket: number;
  /** The log position at which its current phase began. */
  readonly version: number;
  readonly origin: ByteString;
}

/** Told of every entry that joins or leaves a replicated table (per-node counts for drain). */
export interface ReplicaHooks {
  added(entry: LockEntry): void;
  removed(entry: LockEntry): void;
}

export const DEFAULT_MAX_ENTRIES = 10_000_000;
const RELEASED = 'released';
const EXPIRED = 'expired';

/** How long an emptied key or owner keeps its Map slot, so that taking it again costs no churn. */
export const VACANCY_GRACE_MS = 1_000;

/**
 * The single-node lock state: one queue per (key, index), one expiry heap for every deadline,
 * one index by owner name. Synchronous and free of I/O and timers; time comes from the injected
 * clock and expiry happens only when expire() is called, so tests drive it step by step.
 */
export class LockTable {
  private readonly queues = new QueueDirectory();
  private readonly ownerIndex = new OwnerIndex();
  private readonly expiry = new ExpiryHeap<LockEntry>();
  private nextArrival = 0;
  private ownerCount = 0;
  private waiterCount = 0;
  /** Clock time of the last expire() or forgetVacant() call: the date given to emptied keys. */
  private sweptAt: number;
  private readonly maxEntries: number;
  private readonly replica: ReplicaHooks | undefined;
  /** Cluster mode: the log position of the command being applied; tickets and versions come from it. */
  position = 0;

  constructor(
    private readonly clock: Clock,
    options: LockTableOptions = {},
  ) {
    this.maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
    this.replica = options.replica;
    this.sweptAt = clock.now();
  }

  /** Entries that own their lock. */
  get owners(): number {
    return this.ownerCount;
  }

  /** Entries that wait (contenders that are not owners). */
  get waiters(): number {
    return this.waiterCount;
  }

  get size(): number {
    return this.ownerCount + this.waiterCount;
  }

  /** Entries created so far on a single node (their arrival numbers); how busy the table has been. */
  get arrivals(): number {
    return this.nextArrival;
  }

  /**
   * Request (0x02). A new entry becomes owner of a free lock or joins the waiters; an existing one
   * is renewed with the new TTL/TTW, keeping its priority and place. Returns the position, or 0
   * when a new entry is not allowed (drain mode, or the table is full).
   */
  request(
    key: ByteString,
    index: ByteString,
    owner: ByteString,
    ttl: number,
    ttw: number,
    priority: number,
    allowCreate = true,
    maxEntries = this.maxEntries,
    origin: ByteString = '',
  ): number {
    const filed = this.queues.get(key, index);
    const existing = filed?.find(owner);
    if (existing !== undefined) {
      existing.ttl = ttl;
      existing.ttw = ttw;
      this.restartTimer(existing);
      return existing.queue.positionOf(existing);
    }
    if (!allowCreate || this.size >= maxEntries) return 0;
    // A filed queue (held, or emptied and lingering) is taken as is: one key lookup, not two.
    // A lingering one counts as created anew in its key's list order (only multi-index keys move).
    const queue = filed ?? this.queues.create(key, index);
    if (filed !== undefined && filed.isEmpty) this.queues.revive(filed);
    const ticket = this.replica === undefined ? this.nextArrival++ : this.position;
    const entry = new LockEntry(queue, owner, priority, ticket, ttl, ttw);
    entry.origin = origin;
    this.ownerIndex.add(entry);
    this.replica?.added(entry);
    if (queue.owner === undefined) {
      this.makeOwner(entry);
      return 1;
    }
    queue.addWaiter(entry);
    this.waiterCount++;
    this.restartTimer(entry);
    return queue.positionOf(entry);
  }

  /** The owner's entry in the queue of (key, index), if any. */
  private find(key: ByteString, index: ByteString, owner: ByteString): LockEntry | undefined {
    return this.queues.get(key, index)?.find(owner);
  }

  /** Find owner (0x01): the owner's name, or the empty string when nobody owns it. */
  findOwner(key: ByteString, index: ByteString): ByteString {
    return this.queues.get(key, index)?.owner?.owner ?? '';
  }

  /** Find contender location (0x03): the position, or 0 when absent. */
  location(key: ByteString, index: ByteString, owner: ByteString): number {
    const entry = this.find(key, index, owner);
    return entry === undefined ? 0 : entry.queue.positionOf(entry);
  }

  /** Renew (0x04): restarts the entry's timer. False when there is no such entry. */
  renew(key: ByteString, index: ByteString, owner: ByteString): boolean {
    const entry = this.find(key, index, owner);
    if (entry === undefined) return false;
    this.restartTimer(entry);
    return true;
  }

  /** Release (0x05) of one (key, index, owner): entries removed, 0 or 1. */
  release(key: ByteString, index: ByteString, owner: ByteString): number {
    const entry = this.find(key, index, owner);
    if (entry === undefined) return 0;
    this.remove(entry);
    return 1;
  }

  /** Release (0x05) with index `*`: every entry of the owner under the key, across indexes. */
  releaseKey(key: ByteString, owner: ByteString): number {
    let removed = 0;
    for (const entry of this.ownerIndex.entriesOf(owner)) {
      if (entry.queue.key !== key) continue;
      this.remove(entry);
      removed++;
    }
    return removed;
  }

  /** Release all (0x06): every entry of the owner, across all keys. */
  releaseAll(owner: ByteString): number {
    const entries = this.ownerIndex.entriesOf(owner);
    for (const entry of entries) this.remove(entry);
    return entries.length;
  }

  /** List (0x07): every entry under the key; indexes in creation order, each in queue order. */
  list(key: ByteString, limit = Number.POSITIVE_INFINITY): Contender[] {
    const result: Contender[] = [];
    for (const queue of this.queues.queuesOf(key)) {
      for (const e of queue.entries()) {
        if (result.length >= limit) return result;
        result.push({ priority: e.priority, ttl: e.ttl, ttw: e.ttw, index: queue.index, owner: e.owner, isOwner: e.isOwner });
      }
    }
    return result;
  }

  /**
   * Cluster mode, the expiry command (see src/cluster): removes the entry if it is still in the
   * phase that began at `version`; a renewal or promotion since makes it a no-op. Returns 0 or 1.
   */
  expireVersion(key: ByteString, index: ByteString, owner: ByteString, version: number): number {
    const entry = this.find(key, index, owner);
    if (entry === undefined || entry.version !== version) return 0;
    this.remove(entry, EXPIRED);
    return 1;
  }

  /**
   * Cluster mode, the leader's deadline watch: takes the entry whose deadline (on this node's
   * clock) is earliest and past out of the heap, so it is proposed for expiry once. Give it back
   * with `rearm` if the proposal fails; a committed expiry removes it for good.
   */
  takeDue(): LockEntry | undefined {
    const next = this.expiry.peek();
    if (next === undefined || next.deadline > this.clock.now()) return undefined;
    this.expiry.remove(next);
    return next;
  }

  /** Puts an entry taken by `takeDue` back in the heap, due now, if it is still in the same phase. */
  rearm(entry: LockEntry, version: number): void {
    if (entry.version !== version || entry.heapIndex !== NOT_IN_HEAP) return;
    if (entry.queue.find(entry.owner) !== entry) return;
    entry.deadline = Math.min(entry.deadline, this.clock.now());
    this.expiry.schedule(entry);
  }

  /**
   * Cluster mode, loading a snapshot: appends one entry, in queue order (owner first), with its
   * replicated fields as saved. This node never saw the phase begin, so its deadline runs from now:
   * a restarted or new node can only make a lock last longer, never shorter.
   */
  load(e: ReplicaEntry): LockEntry {
    const queue = this.queues.getOrCreate(e.key, e.index);
    if (queue.find(e.owner) !== undefined) throw new Error('duplicate entry for owner in one queue');
    if (e.isOwner && queue.owner !== undefined) throw new Error('two owners for one lock');
    if (!e.isOwner && queue.owner === undefined) throw new Error('a waiter in a queue without owner');
    const entry = new LockEntry(queue, e.owner, e.priority, e.ticket, e.ttl, e.ttw);
    entry.origin = e.origin;
    this.insertSaved(entry, e.isOwner);
    this.replica?.added(entry);
    const position = this.position;
    this.position = e.version;
    this.restartTimer(entry);
    this.position = position;
    return entry;
  }

  /**
   * Cluster mode, `--import-lock-file`: adds one saved entry at the current position (its ticket),
   * in the order given. It owns its lock if the queue has no owner yet, else it waits. Its deadline
   * (this node's clock) is what the file said was left, counted from this apply. 1 if added, 0 if
   * the owner already has an entry there.
   */
  importEntry(s: Omit<SavedLock, 'remainingMs'>, remainingMs: number | null, origin: ByteString): number {
    const queue = this.queues.getOrCreate(s.key, s.index);
    if (queue.find(s.owner) !== undefined) return 0;
    const entry = new LockEntry(queue, s.owner, s.priority, this.position, s.ttl, s.ttw);
    entry.origin = origin;
    this.insertSaved(entry, queue.owner === undefined);
    this.replica?.added(entry);
    entry.version = this.position;
    entry.deadline = remainingMs === null ? NO_DEADLINE : this.clock.now() + remainingMs;
    if (entry.deadline !== NO_DEADLINE) this.expiry.schedule(entry);
    return 1;
  }

  /** Every entry with its replicated fields, queue by queue in directory order, owner first. */
  *replicaEntries(): IterableIterator<ReplicaEntry> {
    for (const queue of this.queues.all()) {
      for (const e of queue.entries()) {
        yield { ...describeEntry(queue, e), ticket: e.arrival, version: e.version, origin: e.origin };
      }
    }
  }

  /** The earliest deadline, if any entry can expire. */
  nextDeadline(): number | undefined {
    return this.expiry.peek()?.deadline;
  }

  /**
   * Removes entries whose deadline has passed (promoting the next waiter where an owner goes),
   * at most `budget` of them so a mass expiry can be spread over several turns of the event
   * loop. Returns how many were removed.
   */
  expire(budget = Number.POSITIVE_INFINITY): number {
    const now = this.clock.now();
    this.sweptAt = now;
    let removed = 0;
    while (removed < budget) {
      const next = this.expiry.peek();
      if (next === undefined || next.deadline > now) break;
      this.remove(next, EXPIRED);
      removed++;
    }
    return removed;
  }

  /**
   * Deletes the queues and owner names that have stayed empty for VACANCY_GRACE_MS (until then
   * they keep their Map slots, see VacancyQueue), looking at no more than `budget` of them.
   * Returns how many it looked at; fewer than `budget` means none is due any more.
   */
  forgetVacant(budget = Number.POSITIVE_INFINITY): number {
    this.sweptAt = this.clock.now();
    const cutoff = this.sweptAt - VACANCY_GRACE_MS;
    const queues = this.queues.forgetVacant(cutoff, budget);
    return queues + this.ownerIndex.forgetVacant(cutoff, budget - queues);
  }

  /** Emptied queues and owner names still holding their slots (for tests and stats). */
  get pendingVacancies(): number {
    return this.queues.pendingVacancies + this.ownerIndex.pendingVacancies;
  }

  /** Every entry with the time its current phase has left, queue by queue, owner first. */
  *snapshot(): IterableIterator<SavedLock> {
    const now = this.clock.now();
    for (const queue of this.queues.all()) {
      for (const e of queue.entries()) {
        yield { ...describeEntry(queue, e), remainingMs: e.deadline === NO_DEADLINE ? null : Math.max(0, Math.ceil(e.deadline - now)) };
      }
    }
  }

  /**
   * Puts saved entries back, in the order given (which is the queue order they were saved in):
   * owners as owners, waiters behind them in their old order, each with the time it had left.
   */
  restore(saved: Iterable<SavedLock>): void {
    const now = this.clock.now();
    for (const s of saved) {
      const queue = this.queues.getOrCreate(s.key, s.index);
      if (queue.find(s.owner) !== undefined) throw new Error(`duplicate entry for owner in one queue`);
      if (s.isOwner && queue.owner !== undefined) throw new Error(`two owners for one lock`);
      const entry = new LockEntry(queue, s.owner, s.priority, this.nextArrival++, s.ttl, s.ttw);
      this.insertSaved(entry, s.isOwner);
      entry.deadline = s.remainingMs === null ? NO_DEADLINE : now + s.remainingMs;
      if (entry.deadline !== NO_DEADLINE) this.expiry.schedule(entry);
    }
    // A queue saved between an owner leaving and its successor's promotion cannot happen, but a
    // hand-edited file might list only waiters: the first of them takes the lock.
    // Waiters saved with no time left are dropped by that promotion; a queue left empty goes too.
    for (const queue of this.queues.all()) {
      if (queue.owner === undefined) this.promoteNext(queue);
      if (queue.isEmpty) this.queues.delete(queue);
    }
  }

  /** Files a saved entry in its queue as it was (owner, or the next waiter in saved order). */
  private insertSaved(entry: LockEntry, isOwner: boolean): void {
    this.ownerIndex.add(entry);
    if (isOwner) {
      entry.isOwner = true;
      entry.queue.owner = entry;
      this.ownerCount++;
    } else {
      entry.queue.addWaiter(entry);
      this.waiterCount++;
    }
  }

  private restartTimer(entry: LockEntry): void {
    entry.version = this.position;
    const seconds = entry.phaseSeconds;
    if (seconds === 0) {
      entry.deadline = NO_DEADLINE;
      this.expiry.remove(entry);
    } else {
      entry.deadline = this.clock.now() + seconds * MS_PER_SECOND;
      this.expiry.schedule(entry);
    }
  }

  /** The entry takes the lock; its TTL clock starts now. */
  private makeOwner(entry: LockEntry): void {
    entry.isOwner = true;
    entry.queue.owner = entry;
    this.ownerCount++;
    this.restartTimer(entry);
  }

  /**
   * Promotes the first waiter whose wait has not run out. A waiter past its TTW deadline that the
   * sweep has not reached yet is already gone in meaning; promoting it would hand it a fresh TTL.
   */
  private promoteNext(queue: LockQueue): void {
    // Most locks have nobody waiting: do not read the clock for them.
    if (queue.waiterCount === 0) return;
    const now = this.clock.now();
    if (this.replica !== undefined) {
      // Every replica promotes the same waiter, whatever its own clock says. A waiter whose wait
      // ran out on this node's clock gets its new TTL due at once, so a leader proposes its
      // expiry straight away: it never keeps a fresh TTL for long.
      const next = queue.shiftWaiter()!;
      this.waiterCount--;
      const overdue = next.deadline <= now;
      this.makeOwner(next);
      if (overdue && next.deadline !== NO_DEADLINE) {
        next.deadline = now;
        this.expiry.schedule(next);
      }
      return;
    }
    for (;;) {
      const next = queue.shiftWaiter();
      if (next === undefined) return;
      this.waiterCount--;
      if (next.deadline > now) {
        this.makeOwner(next);
        return;
      }
      this.expiry.remove(next);
      this.ownerIndex.delete(next, undefined);
    }
  }

  /**
   * Takes the entry out of its queue and every index. A key or owner a release leaves empty keeps
   * its Map slot a while, as it may well be taken again soon (see VacancyQueue); it is dated with
   * the last sweep's time, not the clock's: no clock read per release, and a grace period of a
   * second needs no finer dates. One left empty by expiry, which nobody renewed, goes at once:
   * a mass expiry would otherwise make a million short-lived vacancy records at one go.
   */
  private remove(entry: LockEntry, why: typeof RELEASED | typeof EXPIRED = RELEASED): void {
    const queue = entry.queue;
    const vacantSince = why === RELEASED && this.replica === undefined ? this.sweptAt : undefined;
    this.replica?.removed(entry);
    this.expiry.remove(entry);
    this.ownerIndex.delete(entry, vacantSince);
    if (entry.isOwner) {
      queue.owner = undefined;
      entry.isOwner = false;
      this.ownerCount--;
      this.promoteNext(queue);
    } else {
      queue.removeWaiter(entry);
      this.waiterCount--;
    }
    if (!queue.isEmpty) return;
    if (vacantSince === undefined) this.queues.delete(queue);
    else this.queues.vacate(queue, vacantSince);
  }
}

/** The fields of an entry that the lock file and a replica snapshot both hold. */
function describeEntry(queue: LockQueue, e: LockEntry): Omit<SavedLock, 'remainingMs'> {
  return { key: queue.key, index: queue.index, owner: e.owner, priority: e.priority, ttl: e.ttl, ttw: e.ttw, isOwner: e.isOwner };
}
