import type { ByteString } from '../bytes.js';
import type { Contender, EntryView, QueueView } from '../protocol/messages.js';
import type { Clock } from '../runtime/Clock.js';
import { DeadlineHeap, NO_DEADLINE } from './DeadlineHeap.js';
import { EntryRecords } from './EntryRecords.js';
import { DEFAULT_HASH_SEED } from './hashByteString.js';
import { NO_ID } from './HashIndex.js';
import { KeyDirectory } from './KeyDirectory.js';
import type { LockRequest, SavedHold, SavedLock, WaitingFigures } from './LockService.js';
import { NameStore, storedNameBytes } from './NameStore.js';
import { OwnerDirectory } from './OwnerDirectory.js';
import { PendingReleases } from './PendingReleases.js';
import type { QueueRules } from './QueueRules.js';
import type { ReplicaRules, ReplicatedRequest } from './ReplicaRules.js';
import { ENTRY_OVERHEAD_BYTES, entryBytes, NO_CLIENT, Refusal } from './TableLimits.js';
import { WaiterQueues } from './WaiterQueues.js';

const MS_PER_SECOND = 1000;

export interface LockTableOptions {
  /**
   * Seed of the hash indexes (see hashByteString). Any value gives the same answers, in the same
   * order; a server passes a random one so that clients cannot aim keys at one probe run.
   */
  readonly hashSeed?: number;
  /**
   * A single node's lock-delay (--lock-delay, ms; 0 by default, as 0.9b): when an owner's TTL runs
   * out, its lock is held back this long before its next grant. A replica is told per expiry
   * command instead (expireVersion), so that every replica holds back alike.
   */
  readonly lockDelayMs?: number;
}

/** Why an entry left the table: how its lock ended, for a holder's loss notice and the metrics. */
export const EndReason = {
  /** Released by name (0x05 of the entry). */
  Released: 1,
  /** Released with index `*` (0x05 of every index under the key). */
  ReleasedKey: 2,
  /** Released by release-all (0x06). */
  ReleasedAll: 3,
  /** Its TTL (owner) or TTW (waiter) ran out. */
  Expired: 4,
  /** A waiter whose client stopped waiting (its acquire-and-wait connection closed). */
  Canceled: 5,
} as const;
export type EndReason = (typeof EndReason)[keyof typeof EndReason];

/**
 * Told of grants and ends as they happen, inside the call that makes them (a request, a release,
 * an expiry, an apply): whoever waits on an entry is answered in the same turn. Entry ids are the
 * table's record ids, reused once an entry ended; `moved` says when compactIfSparse renumbered them.
 */
export interface TableObserver {
  /** `entry` took its lock (a request answered 1 at once, or a promotion): its record is readable, token set. */
  granted(entry: number): void;
  /** `entry` leaves the table for `why`; its record is still readable. */
  ended(entry: number, why: EndReason): void;
  /** The records were rebuilt (see QueueRules.recordsRebuilt): `from[i]` is now `to[i]`. */
  moved(from: Int32Array, to: Int32Array, count: number): void;
}

/** A queue held back by a lock-delay, as takeDueHold() hands it to the leader. */
export interface DueHold {
  readonly key: ByteString;
  readonly index: ByteString;
  /** The log position of the expiry that held it back (what the lift names). */
  readonly version: number;
}

/** A queue held back: the log position of the expiry that held it (0 on a single node), and the delay asked. */
interface Hold {
  readonly version: number;
  readonly delayMs: number;
}

/** One entry of a replicated table as a snapshot holds it: everything apply depends on. */
export interface ReplicaEntry extends Omit<SavedLock, 'remainingMs'> {
  /** The log position of the request that created it (its bakery ticket). */
  readonly ticket: number;
  /** The log position at which its current phase began. */
  readonly version: number;
  readonly origin: ByteString;
}

/** An entry whose phase ran out on this node's clock, as takeDue() hands it to the leader. */
export interface DueEntry {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
  /** The log position at which the phase that ran out began (what the expiry command names). */
  readonly version: number;
  readonly isOwner: boolean;
  readonly ttl: number;
  readonly ttw: number;
  /** When it ran out, on this node's clock (ms). */
  readonly deadline: number;
}

/** Most entries a single node holds unless told otherwise (--max-locks). */
export const DEFAULT_MAX_ENTRIES = 10_000_000;
/** Entries the table must once have held before compactIfSparse() finds anything worth doing. */
export const COMPACT_AFTER_PEAK = 65_536;
/** compactIfSparse() rebuilds once the table holds fewer entries than its peak divided by this… */
export const COMPACT_RATIO = 16;
/** …and no more than this many, so that one rebuild stays a matter of milliseconds. */
export const COMPACT_MAX_ENTRIES = 16_384;

/**
 * A release of many entries (release-all, release with `*`) done in slices: beginReleaseAll or
 * beginReleaseKey takes its entries at once, and each run() removes the next of them, up to a
 * budget, promoting the waiter behind each owner it removes. What it took is gone from every
 * client's view at once, however many slices it needs: whoever touches a queue where it has not
 * removed its entry yet makes it do so first (LockTable.settle), and a later release of the same
 * owner finds only the entries made since.
 */
export interface SlicedRelease {
  /** Entries it took at its start: the count its command answers. */
  readonly total: number;
  /** Removes up to `budget` more of its entries; true once none is left. */
  run(budget: number): boolean;
  readonly done: boolean;
}

/**
 * Entries a release in slices removes (and promotes behind) per slice, an import's commit or a
 * snapshot load puts in per slice, before the event loop gets a turn: about 0.5–2 ms of an idle
 * node's time (a removal and its promotion cost 2–9 µs), a turn costs some microseconds more, and
 * a 400,000-entry release-all runs in about 1,600 slices. Other clients wait at most a slice
 * (and one turn's work of the other connections) for their answers.
 */
export const APPLY_SLICE_ENTRIES = 256;

/** A table run by a cluster replica's rules: the only kind the cluster-mode methods accept. */
export type ReplicaTable = LockTable<ReplicatedRequest, ReplicaRules>;

/**
 * The lock state: one queue per (key, index), each with its owner and its waiters in priority,
 * then arrival order; one deadline heap for every entry that can expire; one index by owner name.
 * Synchronous and free of I/O and timers; time comes from the injected clock and expiry happens
 * only when expire() is called, so tests drive it step by step.
 *
 * Entries, queues, keys and owners are records in typed-array columns (EntryRecords,
 * KeyDirectory, OwnerDirectory), found through the table's own hash indexes (HashIndex): a lock
 * taken and given back allocates no JavaScript object, a million held locks are a few hundred
 * bytes each with almost nothing for the garbage collector to trace, and a key or owner left
 * without entries is forgotten at once at no cost to later lookups. Records are reused but never
 * shrink on their own; compactIfSparse() rebuilds them once the table has emptied far below its
 * peak, so a burst of a million locks does not pin their memory after they are gone.
 *
 * Where a single node and a cluster replica differ (tickets, admission, promotion, what else is
 * kept per entry), the table asks its rules (QueueRules): SingleNodeRules or ReplicaRules. The
 * methods marked "cluster mode" exist only on a table with replica rules.
 */
export class LockTable<Request extends LockRequest = LockRequest, Rules extends QueueRules<Request> = QueueRules<Request>> {
  private entries!: EntryRecords;
  private keys!: KeyDirectory;
  private owners_!: OwnerDirectory;
  private waiters_!: WaiterQueues;
  private expiry!: DeadlineHeap;
  /** Waiters by when they were requested: the oldest waiter's age (metrics). */
  private waitingSince!: DeadlineHeap;
  /** Queues held back by a lock-delay, by queue id, until this node's clock says the delay is over. */
  private holdUntil!: DeadlineHeap;
  private holds!: Map<number, Hold>;
  /** Entries taken by releases in slices and not yet removed; those releases, oldest first. */
  private pending!: PendingReleases;
  private readonly releases: ReleaseJob[] = [];
  private releasesBegun = 0;
  private observer: TableObserver | undefined;
  private readonly seed: number;
  private readonly lockDelayMs: number;
  /** Most entries held at once since the records were last built. */
  private peak = 0;
  private ownerCount = 0;
  private waiterCount = 0;
  private overdueWaitersDropped = 0;
  /** Requests refused for want of room, by Refusal. */
  private readonly refusedBy = new Float64Array(5);
  /** Why the last request answered 0 was refused (Refusal.None: not for room, a drain's). */
  private lastRefusal_: Refusal = Refusal.None;

  constructor(
    private readonly clock: Clock,
    private readonly rules: Rules,
    options: LockTableOptions = {},
  ) {
    this.seed = options.hashSeed ?? DEFAULT_HASH_SEED;
    this.lockDelayMs = options.lockDelayMs ?? 0;
    this.buildRecords();
  }

  /** From now on `observer` is told of every grant and end (one observer; undefined stops it). */
  observe(observer: TableObserver | undefined): void {
    this.observer = observer;
  }

  /** Fresh, empty records (and the indexes over them). */
  private buildRecords(): void {
    this.entries = new EntryRecords();
    const names = new NameStore();
    this.keys = new KeyDirectory(names, this.seed);
    this.owners_ = new OwnerDirectory(this.entries, names, this.seed);
    this.waiters_ = new WaiterQueues(this.entries);
    this.expiry = new DeadlineHeap();
    this.waitingSince = new DeadlineHeap();
    this.holdUntil = new DeadlineHeap();
    this.holds = new Map();
    this.pending = new PendingReleases();
    this.ownerCount = 0;
    this.waiterCount = 0;
    this.peak = 0;
  }

  /**
   * When the table holds fewer than 1/COMPACT_RATIO of the entries it once did (and that peak was
   * at least COMPACT_AFTER_PEAK), and at most COMPACT_MAX_ENTRIES, rebuilds its records at their
   * present size, so the memory the peak grew goes back once the garbage collector takes the old
   * records. Nothing anyone can ask changes: order, tickets, deadlines and what the rules keep
   * per entry are carried over as they are (only the order of an owner's entries among themselves,
   * and of deadlines that tie, may differ, and neither shows). Costs O(entries held), bounded; the
   * sweep calls it, not a command. Returns whether it rebuilt.
   */
  compactIfSparse(): boolean {
    const size = this.size;
    // A release in slices holds entry ids, which a rebuild renumbers: it waits until they are done.
    if (this.releases.length > 0) return false;
    if (this.peak < COMPACT_AFTER_PEAK || size * COMPACT_RATIO >= this.peak || size > COMPACT_MAX_ENTRIES) return false;
    // Carried over in flat arrays, not an object per entry: those all survive into the old
    // generation, and promoting them was most of the cost (65,536 entries: 380 ms against 110).
    const names: ByteString[] = new Array<ByteString>(3 * size);
    const times = new Float64Array(4 * size);
    const fields = new Int32Array(2 * size);
    const from = new Int32Array(size);
    const to = new Int32Array(size);
    const e = this.entries;
    let n = 0;
    for (const queue of this.keys.all()) {
      const key = this.keys.keyOf(queue);
      const index = this.keys.indexOf(queue);
      for (const entry of this.queueEntries(queue)) {
        names[3 * n] = key;
        names[3 * n + 1] = index;
        names[3 * n + 2] = this.ownerName(entry);
        times[4 * n] = e.ticket[entry]!;
        times[4 * n + 1] = e.deadline[entry]!;
        times[4 * n + 2] = e.token[entry]!;
        times[4 * n + 3] = e.requestedAt[entry]!;
        fields[2 * n] = e.ttl[entry]! | (e.ttw[entry]! << 16);
        fields[2 * n + 1] = e.priority[entry]! | (e.isOwner[entry]! << 8) | ((this.expiry.has(entry) ? 1 : 0) << 9);
        from[n] = entry;
        n++;
      }
    }
    // Held-back queues, some of them without entries, go by name.
    const holds = [...this.holds].map(([queue, hold]) => ({
      key: this.keys.keyOf(queue),
      index: this.keys.indexOf(queue),
      hold,
      until: this.holdUntil.deadlineOf(queue),
    }));
    this.buildRecords();
    for (let i = 0; i < n; i++) {
      const ttl = fields[2 * i]! & 0xffff;
      const ttw = fields[2 * i]! >>> 16;
      const flags = fields[2 * i + 1]!;
      const queue = this.keys.getOrCreate(names[3 * i]!, names[3 * i + 1]!);
      const entry = this.makeEntry(queue, names[3 * i + 2]!, flags & 0xff, times[4 * i]!, ttl, ttw, times[4 * i + 3]!);
      this.insertSaved(entry, (flags & 0x100) !== 0);
      this.entries.token[entry] = times[4 * i + 2]!;
      const deadline = times[4 * i + 1]!;
      this.entries.deadline[entry] = deadline;
      if ((flags & 0x200) !== 0) this.expiry.schedule(entry, deadline);
      to[i] = entry;
    }
    for (const { key, index, hold, until } of holds) this.holdBack(this.keys.getOrCreate(key, index), hold, until);
    this.rules.recordsRebuilt(from, to, n);
    this.observer?.moved(from, to, n);
    this.peak = this.size;
    return true;
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

  /**
   * Waiters dropped so far because their wait had run out when their turn came (an owner left
   * before the sweep reached them): expired as much as those expire() removes, but removed by
   * whatever freed the lock, a release as well as an expiry.
   */
  get droppedOverdueWaiters(): number {
    return this.overdueWaitersDropped;
  }

  /** Bytes charged for every entry held (TableLimits.entryBytes each): what --max-table-bytes bounds. */
  get bytes(): number {
    return this.entries.bytes;
  }

  /** Requests refused so far because a limit was reached (see TableLimits.Refusal). */
  refusals(why: Exclude<Refusal, 0>): number {
    return this.refusedBy[why]!;
  }

  /** A command that answered 0 without asking the table (see ReplicaState's AcquireWait): lastRefusal says nothing then. */
  forgetRefusal(): void {
    this.lastRefusal_ = Refusal.None;
  }

  /** Why the last request that answered 0 was refused: a limit, or Refusal.None (not allowed to create: drain mode). */
  get lastRefusal(): Refusal {
    return this.lastRefusal_;
  }

  /**
   * Request (0x02). A new entry becomes owner of a free lock or joins the waiters; an existing one
   * is renewed with the new TTL/TTW, keeping its priority and place. Returns the position, or 0
   * when a new entry is not allowed: `allowCreate` false (drain mode), or no room by the rules
   * (see lastRefusal). `client` is the connection the request came through, if any (its entries
   * count against a per-connection cap).
   */
  request(request: Request, allowCreate = true, client = NO_CLIENT): number {
    const entries = this.entries;
    const { key, index, owner, ttl, ttw } = request;
    const found = this.keys.find(key, index);
    if (found !== NO_ID) {
      const existing = this.entryIn(found, owner);
      if (existing !== NO_ID) {
        entries.ttl[existing] = ttl;
        entries.ttw[existing] = ttw;
        this.restartTimer(existing);
        return this.positionOf(found, existing);
      }
    }
    if (!allowCreate) {
      this.lastRefusal_ = Refusal.None;
      return 0;
    }
    const refusal = this.rules.refusal(
      request,
      {
        entries: this.size,
        bytes: entries.bytes,
        entryBytes: entryBytes(key.length, index.length, owner.length),
        ownerEntries: this.owners_.entryCountOf(owner),
      },
      client,
    );
    if (refusal !== Refusal.None) {
      this.refusedBy[refusal] = this.refusedBy[refusal]! + 1;
      this.lastRefusal_ = refusal;
      return 0;
    }
    const queue = found === NO_ID ? this.keys.createAfterMiss(key, index) : found;
    const entry = this.newEntry(queue, owner, request.priority, this.rules.newTicket(), ttl, ttw, client);
    // A lock held back after its owner's TTL ran out (lock-delay) is granted to nobody meanwhile.
    if (this.keys.queueOwner[queue] === NO_ID && !this.holds.has(queue)) {
      this.makeOwner(entry);
      return 1;
    }
    this.addWaiter(queue, entry);
    this.restartTimer(entry);
    return this.waiters_.positionOf(queue, entry);
  }

  /** Find owner (0x01): the owner's name, or the empty string when nobody owns it. */
  findOwner(key: ByteString, index: ByteString): ByteString {
    const queue = this.keys.find(key, index);
    if (queue === NO_ID) return '';
    const owner = this.keys.queueOwner[queue]!;
    return owner === NO_ID ? '' : this.ownerName(owner);
  }

  /** Fence (0x09): the fencing token of the owner's current grant, or 0 when `owner` does not own the lock. */
  fence(key: ByteString, index: ByteString, owner: ByteString): number {
    const queue = this.keys.find(key, index);
    if (queue === NO_ID) return 0;
    const holder = this.keys.queueOwner[queue]!;
    return holder !== NO_ID && this.owners_.isNamed(this.entries.owner[holder]!, owner) ? this.entries.token[holder]! : 0;
  }

  /** Find contender location (0x03): the position, or 0 when absent. */
  location(key: ByteString, index: ByteString, owner: ByteString): number {
    const queue = this.keys.find(key, index);
    if (queue === NO_ID) return 0;
    const entry = this.entryIn(queue, owner);
    return entry === NO_ID ? 0 : this.positionOf(queue, entry);
  }

  /** Renew (0x04): restarts the entry's timer. False when there is no such entry. */
  renew(key: ByteString, index: ByteString, owner: ByteString): boolean {
    const entry = this.find(key, index, owner);
    if (entry === NO_ID) return false;
    this.restartTimer(entry);
    return true;
  }

  /** Release (0x05) of one (key, index, owner): entries removed, 0 or 1. */
  release(key: ByteString, index: ByteString, owner: ByteString): number {
    const entry = this.find(key, index, owner);
    if (entry === NO_ID) return 0;
    this.remove(entry, EndReason.Released);
    return 1;
  }

  /**
   * A waiter whose client stopped waiting (its acquire-and-wait connection closed): removed if it
   * still waits, left as it is if it owns by now (it may have been told so elsewhere). 0 or 1.
   */
  cancelWaiter(key: ByteString, index: ByteString, owner: ByteString): number {
    const entry = this.find(key, index, owner);
    if (entry === NO_ID || this.entries.isOwner[entry] === 1) return 0;
    this.remove(entry, EndReason.Canceled);
    return 1;
  }

  /** Release (0x05) with index `*`: every entry of the owner under the key, across indexes. */
  releaseKey(key: ByteString, owner: ByteString): number {
    const release = this.beginReleaseKey(key, owner);
    release.run(Number.POSITIVE_INFINITY);
    return release.total;
  }

  /** Release all (0x06): every entry of the owner, across all keys. */
  releaseAll(owner: ByteString): number {
    const release = this.beginReleaseAll(owner);
    release.run(Number.POSITIVE_INFINITY);
    return release.total;
  }

  /** Release all (0x06) in slices (see SlicedRelease): takes every entry of the owner now, removes none yet. */
  beginReleaseAll(owner: ByteString): SlicedRelease {
    return this.beginRelease(this.owners_.detachAll(owner), EndReason.ReleasedAll);
  }

  /** Release with index `*` in slices: takes the owner's entries under the key now, removes none yet. */
  beginReleaseKey(key: ByteString, owner: ByteString): SlicedRelease {
    const taken = this.owners_.entriesOf(owner).filter((entry) => this.keys.isUnder(this.entries.queue[entry]!, key));
    for (const entry of taken) this.owners_.detach(entry);
    return this.beginRelease(Int32Array.from(taken), EndReason.ReleasedKey);
  }

  private beginRelease(taken: Int32Array, why: EndReason): SlicedRelease {
    const job = new ReleaseJob(++this.releasesBegun, taken, why, this);
    if (taken.length === 0) return job;
    const queues = this.entries.queue;
    for (let i = 0; i < taken.length; i++) this.pending.mark(taken[i]!, queues[taken[i]!]!, job.id);
    this.releases.push(job);
    return job;
  }

  /** Whether a release in slices has entries left to remove. */
  get releasing(): boolean {
    return this.releases.length > 0;
  }

  /**
   * Before a command touches the lock of (key, index): every release in slices that took an entry
   * there removes it now, so the command sees the releases as done (see SlicedRelease).
   */
  settle(key: ByteString, index: ByteString): void {
    if (this.pending.count === 0) return;
    const queue = this.keys.find(key, index);
    if (queue !== NO_ID) this.settleQueue(queue);
  }

  /** As settle, for every lock under the key (a list, a release with `*`). */
  settleKey(key: ByteString): void {
    if (this.pending.count === 0) return;
    for (const queue of [...this.keys.queuesOf(key)]) this.settleQueue(queue);
  }

  /** Removes the entries releases in slices took in the queue, the oldest release's first. */
  private settleQueue(queue: number): void {
    const pending = this.pending;
    if (pending.inQueue(queue) === 0) return;
    const holder = this.keys.queueOwner[queue]!;
    let taken: number[];
    if (pending.inQueue(queue) === 1 && holder !== NO_ID && pending.releaseOfEntry(holder) !== 0) {
      taken = [holder];
    } else {
      taken = [...this.queueEntries(queue)].filter((entry) => pending.releaseOfEntry(entry) !== 0);
      taken.sort((a, b) => pending.releaseOfEntry(a) - pending.releaseOfEntry(b));
    }
    for (const entry of taken) {
      const id = pending.releaseOfEntry(entry);
      this.remove(entry, this.releases.find((job) => job.id === id)!.why);
    }
  }

  /** ReleaseJob's slice: removes the `entry` it took, if it is still there (with every earlier release's in its queue). */
  settleTaken(job: ReleaseJob, entry: number): void {
    if (this.pending.releaseOfEntry(entry) === job.id) this.settleQueue(this.entries.queue[entry]!);
  }

  /** ReleaseJob: it has nothing left to remove. */
  releaseDone(job: ReleaseJob): void {
    const at = this.releases.indexOf(job);
    if (at >= 0) this.releases.splice(at, 1);
  }

  /** List (0x07): every entry under the key; indexes in creation order, each in queue order. */
  list(key: ByteString, limit = Number.POSITIVE_INFINITY): Contender[] {
    const result: Contender[] = [];
    const e = this.entries;
    for (const queue of this.keys.queuesOf(key)) {
      const index = this.keys.indexOf(queue);
      for (const entry of this.queueEntries(queue)) {
        if (result.length >= limit) return result;
        result.push({
          priority: e.priority[entry]!,
          ttl: e.ttl[entry]!,
          ttw: e.ttw[entry]!,
          index,
          owner: this.ownerName(entry),
          isOwner: e.isOwner[entry] === 1,
        });
      }
    }
    return result;
  }

  /**
   * The detailed list (0x0D): every queue under the key, in creation order, held back or not, each
   * with its entries in queue order and the time their phases have left; at most `limit` entries.
   */
  queues(key: ByteString, limit = Number.POSITIVE_INFINITY): QueueView[] {
    const views: QueueView[] = [];
    const e = this.entries;
    const now = this.clock.now();
    let count = 0;
    for (const queue of this.keys.queuesOf(key)) {
      const entries: EntryView[] = [];
      for (const entry of this.queueEntries(queue)) {
        if (count++ >= limit) break;
        const deadline = e.deadline[entry]!;
        entries.push({
          priority: e.priority[entry]!,
          ttl: e.ttl[entry]!,
          ttw: e.ttw[entry]!,
          index: this.keys.indexOf(queue),
          owner: this.ownerName(entry),
          isOwner: e.isOwner[entry] === 1,
          remainingMs: deadline === NO_DEADLINE ? null : Math.max(0, Math.ceil(deadline - now)),
          token: e.token[entry]!,
        });
      }
      views.push({ index: this.keys.indexOf(queue), heldForMs: this.heldForMs(queue, now), entries });
      if (count > limit) break;
    }
    return views;
  }

  /** Locks held back now (lock-delay). */
  get heldBack(): number {
    return this.holds.size;
  }

  /** Locks held back and the longest wait now (metrics). */
  get waiting(): Omit<WaitingFigures, 'grantWaits' | 'lossWaits'> {
    const since = this.oldestWaiterSince;
    return { heldBack: this.heldBack, oldestWaitMs: since === undefined ? 0 : Math.max(0, this.clock.now() - since) };
  }

  /** When the entry waiting longest was requested (this node's clock), if any waits. */
  get oldestWaiterSince(): number | undefined {
    const since = this.waitingSince.peekDeadline();
    return since === NO_DEADLINE ? undefined : since;
  }

  /** When the entry was requested (this node's clock): its wait, once it is granted. */
  requestedAt(entry: number): number {
    return this.entries.requestedAt[entry]!;
  }

  /** Whether the entry owns its lock (its record must be readable). */
  owns(entry: number): boolean {
    return this.entries.isOwner[entry] === 1;
  }

  /** The fencing token of the entry's grant while it owns (0 while it waits). */
  tokenOf(entry: number): number {
    return this.entries.token[entry]!;
  }

  /** The log position (cluster) or arrival number (single node) that created the entry: its ticket, unique while it lives. */
  ticketOf(entry: number): number {
    return this.entries.ticket[entry]!;
  }

  /** The entry of (key, index, owner), or NO_ID (for who waits on one: see TableObserver). */
  entryOf(key: ByteString, index: ByteString, owner: ByteString): number {
    return this.find(key, index, owner);
  }

  /** 1 when the entry owns its lock, else its place in line (2 for the first waiter). */
  positionOfEntry(entry: number): number {
    return this.positionOf(this.entries.queue[entry]!, entry);
  }

  /**
   * Cluster mode, the expiry command (see src/cluster): removes the entry if it is still in the
   * phase that began at `version`; a renewal or promotion since makes it a no-op. An owner's lock
   * is then held back for `holdMs` (the leader's lock-delay, carried in the command, so every
   * replica holds back alike) until a lift names this expiry (liftHold). Returns 0 or 1.
   */
  expireVersion(this: ReplicaTable, key: ByteString, index: ByteString, owner: ByteString, version: number, holdMs = 0): number {
    const entry = this.find(key, index, owner);
    if (entry === NO_ID || this.rules.versionOf(entry) !== version) return 0;
    this.remove(entry, EndReason.Expired, holdMs);
    return 1;
  }

  /**
   * Cluster mode, the end of a lock-delay: the lock of (key, index) is granted again (its first
   * waiter promoted) if it is still held back by the expiry at log position `version`. 0 or 1.
   */
  liftHold(this: ReplicaTable, key: ByteString, index: ByteString, version: number): number {
    const queue = this.keys.find(key, index);
    if (queue === NO_ID || this.holds.get(queue)?.version !== version) return 0;
    this.releaseHold(queue);
    return 1;
  }

  /**
   * Cluster mode, the leader's watch of lock-delays: the held-back lock whose delay ran out first
   * (this node's clock), taken out of the watch so it is proposed for lifting once; give it back
   * with rearmHold if the proposal fails.
   */
  takeDueHold(this: ReplicaTable): DueHold | undefined {
    const queue = this.holdUntil.peekId();
    if (queue === NO_ID || this.holdUntil.peekDeadline() > this.clock.now()) return undefined;
    this.holdUntil.remove(queue);
    return { key: this.keys.keyOf(queue), index: this.keys.indexOf(queue), version: this.holds.get(queue)!.version };
  }

  /** Puts a hold taken by takeDueHold back in the watch, due now, if that lock is still held back by it. */
  rearmHold(this: ReplicaTable, due: DueHold): void {
    const queue = this.keys.find(due.key, due.index);
    if (queue === NO_ID || this.holds.get(queue)?.version !== due.version || this.holdUntil.has(queue)) return;
    this.holdUntil.schedule(queue, this.clock.now());
  }

  /** Cluster mode, a snapshot: every lock held back, with the expiry that held it and the delay. */
  *holdsHeld(this: ReplicaTable): IterableIterator<DueHold & { readonly delayMs: number; readonly entriesBefore: number }> {
    for (const { queue, hold, entriesBefore } of this.heldQueues()) {
      yield { key: this.keys.keyOf(queue), index: this.keys.indexOf(queue), version: hold.version, delayMs: hold.delayMs, entriesBefore };
    }
  }

  /**
   * Every lock held back (lock-delay) with the time its delay has left, for the lock file: frozen
   * while the server is down, as an entry's time left is, so a restart holds it back for the rest.
   */
  *savedHolds(): IterableIterator<SavedHold> {
    const now = this.clock.now();
    for (const { queue, entriesBefore } of this.heldQueues()) {
      yield { key: this.keys.keyOf(queue), index: this.keys.indexOf(queue), remainingMs: this.heldForMs(queue, now), entriesBefore };
    }
  }

  /**
   * The queues held back, in directory order, each with the number of entries snapshot() and
   * replicaEntries() yield before its queue's: a copy loads each hold at its place, so its queues
   * (and lists) come in the same order.
   */
  private *heldQueues(): IterableIterator<{ readonly queue: number; readonly hold: Hold; readonly entriesBefore: number }> {
    if (this.holds.size === 0) return;
    let entriesBefore = 0;
    for (const queue of this.keys.all()) {
      const hold = this.holds.get(queue);
      if (hold !== undefined) yield { queue, hold, entriesBefore };
      entriesBefore += (this.keys.queueOwner[queue] === NO_ID ? 0 : 1) + this.waiters_.countOf(queue);
    }
  }

  /** Milliseconds the queue's lock is still held back, 0 if it is not (at least 1 while it is). */
  private heldForMs(queue: number, now: number): number {
    if (!this.holds.has(queue)) return 0;
    // A hold whose deadline the leader took to propose its lift is still held (1 ms) until the lift applies.
    const until = this.holdUntil.deadlineOf(queue);
    return until === NO_DEADLINE ? 1 : Math.max(1, Math.ceil(until - now));
  }

  /** Cluster mode, loading a snapshot: holds back the lock of (key, index) from now on, for its whole delay. */
  loadHold(this: ReplicaTable, key: ByteString, index: ByteString, version: number, delayMs: number): void {
    const queue = this.keys.getOrCreate(key, index);
    if (this.keys.queueOwner[queue] !== NO_ID) throw new Error('a held-back lock with an owner');
    this.holdBack(queue, { version, delayMs }, this.clock.now() + delayMs);
  }

  /**
   * Cluster mode, the leader's deadline watch: takes the entry whose deadline (on this node's
   * clock) is earliest and past out of the heap, so it is proposed for expiry once. Give it back
   * with `rearm` if the proposal fails; a committed expiry removes it for good.
   */
  takeDue(this: ReplicaTable): DueEntry | undefined {
    const entry = this.expiry.peekId();
    if (entry === NO_ID || this.expiry.peekDeadline() > this.clock.now()) return undefined;
    this.expiry.remove(entry);
    const e = this.entries;
    const queue = e.queue[entry]!;
    return {
      key: this.keys.keyOf(queue),
      index: this.keys.indexOf(queue),
      owner: this.ownerName(entry),
      version: this.rules.versionOf(entry),
      isOwner: e.isOwner[entry] === 1,
      ttl: e.ttl[entry]!,
      ttw: e.ttw[entry]!,
      deadline: e.deadline[entry]!,
    };
  }

  /** Puts an entry taken by `takeDue` back in the heap, due when it was, if it is still in that same phase. */
  rearm(this: ReplicaTable, due: DueEntry): void {
    const entry = this.find(due.key, due.index, due.owner);
    if (entry === NO_ID || this.rules.versionOf(entry) !== due.version || this.expiry.has(entry)) return;
    const deadline = Math.min(this.entries.deadline[entry]!, this.clock.now());
    this.entries.deadline[entry] = deadline;
    this.expiry.schedule(entry, deadline);
  }

  /**
   * Cluster mode, loading a snapshot: appends one entry, in queue order (owner first), with its
   * replicated fields as saved. This node never saw the phase begin, so its deadline runs from now:
   * a restarted or new node can only make a lock last longer, never shorter.
   */
  load(this: ReplicaTable, e: ReplicaEntry): void {
    const queue = this.keys.getOrCreate(e.key, e.index);
    if (this.entryIn(queue, e.owner) !== NO_ID) throw new Error('duplicate entry for owner in one queue');
    const owned = this.keys.queueOwner[queue] !== NO_ID;
    if (e.isOwner && owned) throw new Error('two owners for one lock');
    if (e.isOwner && this.holds.has(queue)) throw new Error('an owner of a lock held back');
    if (!e.isOwner && !owned && !this.holds.has(queue)) throw new Error('a waiter in a queue without owner');
    const entry = this.adoptEntry(queue, e, e.ticket, e.origin, e.version);
    this.insertSaved(entry, e.isOwner);
    if (e.isOwner) this.entries.token[entry] = e.token;
    this.startDeadline(entry);
  }

  /**
   * Cluster mode, `--import-lock-file`: adds one saved entry with the log position it came at as
   * its ticket and phase version, in the order given. It owns its lock if the queue has no owner
   * yet, else it waits. Its deadline (this node's clock) is what the file said was left, counted
   * from this apply. 1 if added, 0 if the owner already has an entry there.
   */
  importEntry(this: ReplicaTable, s: Omit<SavedLock, 'remainingMs'>, remainingMs: number | null, ticket: number, origin: ByteString): number {
    const queue = this.keys.getOrCreate(s.key, s.index);
    if (this.entryIn(queue, s.owner) !== NO_ID) return 0;
    const entry = this.adoptEntry(queue, s, ticket, origin, ticket);
    const owns = this.keys.queueOwner[queue] === NO_ID;
    this.insertSaved(entry, owns);
    // An owner keeps the token it had on the single node (the import raised the base above it);
    // one saved without a token, or a waiter taking a free lock, is granted one now.
    if (owns) this.entries.token[entry] = s.isOwner && s.token > 0 ? s.token : this.rules.grantToken();
    this.setDeadline(entry, remainingMs === null ? NO_DEADLINE : this.clock.now() + remainingMs);
    return 1;
  }

  /** Every entry with its replicated fields, queue by queue in directory order, owner first. */
  *replicaEntries(this: ReplicaTable): IterableIterator<ReplicaEntry> {
    for (const e of this.replicaEntriesInPlace()) yield { ...e };
  }

  /**
   * As replicaEntries, in one object rewritten for each entry (valid until the next step): a
   * snapshot of a million entries makes no object per entry. The table must not change meanwhile.
   */
  *replicaEntriesInPlace(this: ReplicaTable): IterableIterator<Readonly<ReplicaEntry>> {
    const e = this.entries;
    const rules = this.rules;
    const keys = this.keys;
    const view: { -readonly [F in keyof ReplicaEntry]: ReplicaEntry[F] } = {
      key: '',
      index: '',
      owner: '',
      priority: 0,
      ttl: 0,
      ttw: 0,
      isOwner: false,
      token: 0,
      ticket: 0,
      version: 0,
      origin: '',
    };
    for (const queue of keys.all()) {
      view.key = keys.keyOf(queue);
      view.index = keys.indexOf(queue);
      for (const entry of this.queueEntries(queue)) {
        view.owner = this.ownerName(entry);
        view.priority = e.priority[entry]!;
        view.ttl = e.ttl[entry]!;
        view.ttw = e.ttw[entry]!;
        view.isOwner = e.isOwner[entry] === 1;
        view.token = e.token[entry]!;
        view.ticket = e.ticket[entry]!;
        view.version = rules.versionOf(entry);
        view.origin = rules.originOf(entry);
        yield view;
      }
    }
  }

  /** The earliest deadline, if any entry can expire. */
  nextDeadline(): number | undefined {
    const deadline = this.expiry.peekDeadline();
    return deadline === NO_DEADLINE ? undefined : deadline;
  }

  /**
   * Removes entries whose deadline has passed (promoting the next waiter where an owner goes),
   * at most `budget` of them so a mass expiry can be spread over several turns of the event
   * loop. Returns how many were removed.
   */
  expire(budget = Number.POSITIVE_INFINITY): number {
    const now = this.clock.now();
    let removed = 0;
    for (let work = 0; work < budget; work++) {
      // A lock-delay that ran out first: its lock is granted again.
      if (this.holdUntil.peekDeadline() <= now && this.holdUntil.peekDeadline() <= this.expiry.peekDeadline()) {
        this.releaseHold(this.holdUntil.peekId());
        continue;
      }
      if (this.expiry.peekDeadline() > now) break;
      const due = this.expiry.peekId();
      // A release in slices that took an entry of its lock went first (see SlicedRelease).
      if (this.pending.count > 0 && this.pending.inQueue(this.entries.queue[due]!) > 0) {
        this.settleQueue(this.entries.queue[due]!);
        continue;
      }
      this.remove(due, EndReason.Expired, this.lockDelayMs);
      removed++;
    }
    return removed;
  }

  /** Every entry with the time its current phase has left, queue by queue, owner first. */
  *snapshot(): IterableIterator<SavedLock> {
    const now = this.clock.now();
    const deadlines = this.entries.deadline;
    for (const queue of this.keys.all()) {
      for (const entry of this.queueEntries(queue)) {
        const deadline = deadlines[entry]!;
        yield { ...this.describe(queue, entry), remainingMs: deadline === NO_DEADLINE ? null : Math.max(0, Math.ceil(deadline - now)) };
      }
    }
  }

  /**
   * Puts saved entries back, in the order given (which is the queue order they were saved in):
   * owners as owners, waiters behind them in their old order, each with the time it had left; and
   * the locks held back (lock-delay), each at its place among them, for the time its delay had left.
   */
  restore(saved: Iterable<SavedLock>, holds: readonly SavedHold[] = []): void {
    const now = this.clock.now();
    const inOrder = [...holds].sort((a, b) => a.entriesBefore - b.entriesBefore);
    let held = 0;
    /** Holds back the locks whose place comes before the entry numbered `entries`. */
    const holdUpTo = (entries: number): void => {
      for (; held < inOrder.length && inOrder[held]!.entriesBefore <= entries; held++) {
        const hold = inOrder[held]!;
        const queue = this.keys.getOrCreate(hold.key, hold.index);
        if (this.holds.has(queue)) throw new Error('one lock held back twice');
        if (this.keys.queueOwner[queue] !== NO_ID) throw new Error('a held-back lock with an owner');
        this.holdBack(queue, { version: this.rules.holdVersion(), delayMs: hold.remainingMs }, now + hold.remainingMs);
      }
    };
    let count = 0;
    for (const s of saved) {
      holdUpTo(count++);
      const queue = this.keys.getOrCreate(s.key, s.index);
      if (this.entryIn(queue, s.owner) !== NO_ID) throw new Error(`duplicate entry for owner in one queue`);
      if (s.isOwner && this.keys.queueOwner[queue] !== NO_ID) throw new Error(`two owners for one lock`);
      if (s.isOwner && this.holds.has(queue)) throw new Error('an owner of a lock held back');
      const entry = this.newEntry(queue, s.owner, s.priority, this.rules.newTicket(), s.ttl, s.ttw);
      this.insertSaved(entry, s.isOwner);
      // The token it was granted, which the rules were told of (it was below their highest); an
      // owner saved before tokens existed gets a new one.
      if (s.isOwner) this.entries.token[entry] = s.token > 0 ? s.token : this.rules.grantToken();
      this.setDeadline(entry, s.remainingMs === null ? NO_DEADLINE : now + s.remainingMs);
    }
    holdUpTo(Number.POSITIVE_INFINITY);
    // A queue saved between an owner leaving and its successor's promotion cannot happen, but a
    // hand-edited file might list only waiters: the first of them takes the lock.
    // Waiters saved with no time left are dropped by that promotion; a queue left empty goes too.
    for (const queue of [...this.keys.all()]) {
      if (this.keys.queueOwner[queue] !== NO_ID) continue;
      this.promoteNext(queue);
      if (this.isEmpty(queue)) this.keys.delete(queue);
    }
  }

  /** The owner's entry in the queue of (key, index), or NO_ID. */
  private find(key: ByteString, index: ByteString, owner: ByteString): number {
    const queue = this.keys.find(key, index);
    return queue === NO_ID ? NO_ID : this.entryIn(queue, owner);
  }

  /** The owner's entry in the queue, or NO_ID: its owner first (the usual case, no lookup), then its waiters. */
  private entryIn(queue: number, owner: ByteString): number {
    const holder = this.keys.queueOwner[queue]!;
    if (holder !== NO_ID && this.owners_.isNamed(this.entries.owner[holder]!, owner)) return holder;
    if (this.waiters_.countOf(queue) === 0) return NO_ID;
    const ownerId = this.owners_.find(owner);
    return ownerId === NO_ID ? NO_ID : this.waiters_.find(queue, ownerId);
  }

  /** 1 for the owner, 2 for the first waiter, … */
  private positionOf(queue: number, entry: number): number {
    return this.entries.isOwner[entry] === 1 ? 1 : this.waiters_.positionOf(queue, entry);
  }

  private ownerName(entry: number): ByteString {
    return this.owners_.nameOf(this.entries.owner[entry]!);
  }

  /** No owner, no waiter, and not held back: nothing keeps it (it is deleted at once). */
  private isEmpty(queue: number): boolean {
    return this.keys.queueOwner[queue] === NO_ID && this.waiters_.countOf(queue) === 0 && !this.holds.has(queue);
  }

  /** Holds the queue's lock back (lock-delay) until `until` (this node's clock): nobody is granted it meanwhile. */
  private holdBack(queue: number, hold: Hold, until: number): void {
    this.holds.set(queue, hold);
    // `holds` is the state (replicated alike); `holdUntil` only this node's schedule of lifts, from
    // which the leader takes a due one to propose its lift (a rebuilt table keeps that taken too).
    if (until !== NO_DEADLINE) this.holdUntil.schedule(queue, until);
  }

  /** The lock-delay is over: the queue's first waiter takes the lock; a queue left empty goes. */
  private releaseHold(queue: number): void {
    this.settleQueue(queue);
    this.holds.delete(queue);
    this.holdUntil.remove(queue);
    this.promoteNext(queue);
    if (this.isEmpty(queue)) this.keys.delete(queue);
  }

  private addWaiter(queue: number, entry: number): void {
    this.waiters_.add(queue, entry);
    this.waitingSince.schedule(entry, this.entries.requestedAt[entry]!);
    this.waiterCount++;
  }

  /** Owner first, then waiters in queue order. */
  private *queueEntries(queue: number): IterableIterator<number> {
    const holder = this.keys.queueOwner[queue]!;
    if (holder !== NO_ID) yield holder;
    yield* this.waiters_.entriesOf(queue);
  }

  /** The fields of an entry that the lock file and a replica snapshot both hold. */
  private describe(queue: number, entry: number): Omit<SavedLock, 'remainingMs'> {
    const e = this.entries;
    return {
      key: this.keys.keyOf(queue),
      index: this.keys.indexOf(queue),
      owner: this.ownerName(entry),
      priority: e.priority[entry]!,
      ttl: e.ttl[entry]!,
      ttw: e.ttw[entry]!,
      isOwner: e.isOwner[entry] === 1,
      token: e.token[entry]!,
    };
  }

  /** A new entry in the queue, filed under its owner, neither owner nor waiter yet; the rules are told. */
  private newEntry(queue: number, owner: ByteString, priority: number, ticket: number, ttl: number, ttw: number, client = NO_CLIENT): number {
    const entry = this.makeEntry(queue, owner, priority, ticket, ttl, ttw, this.clock.now());
    this.rules.entryAdded(entry, client);
    this.notePeak();
    return entry;
  }

  /** Cluster mode: a saved entry made new, joining with the ticket, origin and phase version it already has. */
  private adoptEntry(this: ReplicaTable, queue: number, saved: Omit<SavedLock, 'remainingMs'>, ticket: number, origin: ByteString, version: number): number {
    const entry = this.makeEntry(queue, saved.owner, saved.priority, ticket, saved.ttl, saved.ttw, this.clock.now());
    this.rules.adopt(entry, origin, version);
    this.notePeak();
    return entry;
  }

  /** Counts one more entry than the table holds towards its peak (see compactIfSparse). */
  private notePeak(): void {
    if (this.size >= this.peak) this.peak = this.size + 1;
  }

  /** The record of a new entry, filed under its owner, charged its bytes (TableLimits.entryBytes). */
  private makeEntry(queue: number, owner: ByteString, priority: number, ticket: number, ttl: number, ttw: number, requestedAt: number): number {
    const e = this.entries;
    const entry = e.allocate(this.keys.storedBytesOf(queue) + storedNameBytes(owner.length) + ENTRY_OVERHEAD_BYTES);
    e.queue[entry] = queue;
    e.priority[entry] = priority;
    e.ticket[entry] = ticket;
    e.ttl[entry] = ttl;
    e.ttw[entry] = ttw;
    e.requestedAt[entry] = requestedAt;
    this.owners_.add(entry, owner);
    return entry;
  }

  /** Files a saved entry in its queue as it was (owner, or the next waiter in saved order). */
  private insertSaved(entry: number, isOwner: boolean): void {
    const queue = this.entries.queue[entry]!;
    if (isOwner) {
      this.entries.isOwner[entry] = 1;
      this.keys.queueOwner[queue] = entry;
      this.ownerCount++;
    } else {
      this.addWaiter(queue, entry);
    }
  }

  /** The entry's current phase begins (requested, renewed, promoted): the rules are told, and its deadline runs from now. */
  private restartTimer(entry: number): void {
    this.rules.phaseBegins(entry);
    this.startDeadline(entry);
  }

  /** The deadline of the entry's current phase, counted from now on this node's clock. */
  private startDeadline(entry: number): void {
    const e = this.entries;
    const seconds = e.isOwner[entry] === 1 ? e.ttl[entry]! : e.ttw[entry]!;
    this.setDeadline(entry, seconds === 0 ? NO_DEADLINE : this.clock.now() + seconds * MS_PER_SECOND);
  }

  private setDeadline(entry: number, deadline: number): void {
    this.entries.deadline[entry] = deadline;
    if (deadline === NO_DEADLINE) this.expiry.remove(entry);
    else this.expiry.schedule(entry, deadline);
  }

  /** The entry takes the lock: a new grant, with a new fencing token; its TTL clock starts now. */
  private makeOwner(entry: number): void {
    this.entries.isOwner[entry] = 1;
    this.entries.token[entry] = this.rules.grantToken();
    this.keys.queueOwner[this.entries.queue[entry]!] = entry;
    this.ownerCount++;
    this.restartTimer(entry);
    this.observer?.granted(entry);
  }

  /**
   * Promotes the first waiter the rules let take the lock (see QueueRules.promotes), dropping
   * those before it that they do not.
   */
  private promoteNext(queue: number): void {
    const waiters = this.waiters_;
    // Most locks have nobody waiting: do not read the clock for them. A lock held back waits for its delay.
    if (waiters.countOf(queue) === 0 || this.holds.has(queue)) return;
    const now = this.clock.now();
    const deadlines = this.entries.deadline;
    for (let next = waiters.shift(queue); next !== NO_ID; next = waiters.shift(queue)) {
      this.waiterCount--;
      this.waitingSince.remove(next);
      if (this.rules.promotes(deadlines[next]!, now)) {
        this.makeOwner(next);
        return;
      }
      this.observer?.ended(next, EndReason.Expired);
      this.rules.entryRemoved(next);
      this.expiry.remove(next);
      this.pending.forget(next, queue);
      this.owners_.remove(next);
      this.entries.release(next);
      this.overdueWaitersDropped++;
    }
  }

  /**
   * Takes the entry out of its queue and every index, for `why`; a queue (and key, and owner) left
   * empty goes at once. An owner whose TTL ran out holds its lock back for `holdMs` (lock-delay).
   */
  private remove(entry: number, why: EndReason, holdMs = 0): void {
    const e = this.entries;
    const queue = e.queue[entry]!;
    this.observer?.ended(entry, why);
    this.rules.entryRemoved(entry);
    this.expiry.remove(entry);
    this.pending.forget(entry, queue);
    this.owners_.remove(entry);
    if (e.isOwner[entry] === 1) {
      this.keys.queueOwner[queue] = NO_ID;
      this.ownerCount--;
      e.release(entry);
      if (why === EndReason.Expired && holdMs > 0) this.holdBack(queue, { version: this.rules.holdVersion(), delayMs: holdMs }, this.clock.now() + holdMs);
      this.promoteNext(queue);
    } else {
      this.waiters_.remove(queue, entry);
      this.waitingSince.remove(entry);
      this.waiterCount--;
      e.release(entry);
    }
    if (this.isEmpty(queue)) this.keys.delete(queue);
  }
}

/** A release in slices (see SlicedRelease): the entries it took, and how far it got through them. */
class ReleaseJob implements SlicedRelease {
  private next = 0;

  constructor(
    readonly id: number,
    private readonly taken: Int32Array,
    readonly why: EndReason,
    private readonly table: LockTable,
  ) {}

  get total(): number {
    return this.taken.length;
  }

  get done(): boolean {
    return this.next >= this.taken.length;
  }

  run(budget: number): boolean {
    const taken = this.taken;
    for (let work = 0; work < budget && this.next < taken.length; work++) this.table.settleTaken(this, taken[this.next++]!);
    if (this.done) this.table.releaseDone(this);
    return this.done;
  }
}
