import { createHash } from 'node:crypto';
import type { ByteString } from '../bytes.js';
import type { Clock } from '../runtime/Clock.js';
import type { LockCounts } from '../locks/LockService.js';
import { NO_ID } from '../locks/HashIndex.js';
import { APPLY_SLICE_ENTRIES, LockTable, type ReplicaEntry, type ReplicaTable, type SlicedRelease } from '../locks/LockTable.js';
import type { ReplicaRules, ReplicatedRequest } from '../locks/ReplicaRules.js';
import { BufferWriter } from '../protocol/BufferWriter.js';
import {
  CheckedReader,
  commandPosition,
  LogFormatError,
  LogOp,
  NO_REMAINING,
  readImportStaged,
  writeImportStaged,
  type Batch,
  type ImportStagedCommand,
  type LogCommand,
} from './LogCodec.js';
import { EntryBytesRules } from './EntryBytesRules.js';
import type { LogPosition } from './ReplicatedLog.js';

/** Proposers (node incarnations) whose last sequence number is remembered; the oldest is forgotten past this. */
export const MAX_REMEMBERED_PROPOSERS = 1_024;
/** Origin nodes with an entry counter, past which those with no entries are forgotten (see byOrigin). */
const MAX_ORIGIN_COUNTERS = 1_024;

const SNAPSHOT_MAGIC = 0x53; // 'S'
/**
 * Snapshot layout 3 (a snapshot's own numbering, apart from the log's value formats): position, the
 * token base, proposers, entries (each with its fencing token), then an import's staged entries if
 * one is in progress (a flag byte says whether). Layout 4, written only while a lock is held back
 * (which only a log of format 4 can do, so every node that may load it reads it), has the locks
 * held back by a lock-delay before the entries (their waiters wait in queues without owner), each
 * with the number of entries before its queue in directory order, so a copy creates its queues in
 * the original's order (list order is queue creation order, and every replica must list alike). Still
 * read: layout 1 (no tokens, nothing staged) and layout 2 (no tokens, an import's staged entries).
 */
const SNAPSHOT_LAYOUT_HOLDS = 4;
/**
 * Layout 5: layout 4 (its holds section always there, maybe empty) and, after the staged import,
 * the waiting entries tied to an incarnation (TiedWait, by ticket) and the incarnations whose waits
 * ended, oldest first. Written only while either is non-empty, which only a log of format 5 makes.
 */
const SNAPSHOT_LAYOUT_TIED_WAITS = 5;
const SNAPSHOT_LAYOUT = 3;
const SNAPSHOT_LAYOUT_UNTOKENED = 1;
const SNAPSHOT_LAYOUT_UNTOKENED_STAGED = 2;

/** The entries of an `--import-lock-file` received so far, each with the log position it came at (its ticket). */
interface ImportStaging {
  readonly id: number;
  readonly entries: Array<{ readonly command: ImportStagedCommand; readonly ticket: number }>;
}

/**
 * A waiting entry an AcquireWait (0x0B) left, tied to the node incarnation whose connection waits
 * for it: it goes when that incarnation's waits end (CancelWaitsOf). Kept by the entry's ticket,
 * unique while it lives; it holds only while that entry (same names, same ticket) still waits, and
 * one found otherwise (granted, ended) is dropped whenever it is met (see pruneTiedWaits).
 */
export interface TiedWait {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
  readonly ticket: number;
  /** The incarnation's node name and number (a batch's proposer and incarnation). */
  readonly node: ByteString;
  readonly incarnation: number;
}

/** A node incarnation with entries tied to it (some possibly no longer waiting). */
export interface WaitingIncarnation {
  readonly node: ByteString;
  readonly incarnation: number;
}

/** Tied waits looked at (and dropped if they no longer hold) each time one is tied, so that they stay about as many as the waits that hold. */
const TIED_WAITS_PRUNED_PER_TIE = 2;

/** A batch arrived out of order: the follower must resync, never apply past a hole. */
export class LogGapError extends Error {
  override name = 'LogGapError';
}

/**
 * Called between the commands of a batch as it is applied: before command i (0 ≤ i < count), and
 * once more with i = count after the last. The node that proposed the batch answers the reads
 * its clients sent between those commands here, so a pipelined read sees exactly the writes the
 * same client sent before it; and a request with fence reads its grant's token here, right after
 * its own command (i − 1), before a later one could release the lock. `previousResult` is what
 * command i − 1 returned (undefined before the first): an answer says what its command did, never
 * only what the table shows after it (a command may do nothing, as an AcquireWait of an
 * incarnation whose waits ended, on an entry that is there).
 */
export type ApplyStep = (commandIndex: number, previousResult: number | undefined) => void;

/**
 * Where a batch sits in its log value: `first` for the value's first batch (a plain batch, or a
 * bundle's first), which must come at the next version; `place` the number of commands of the
 * bundle's batches before it (duplicates and empty batches included), from which its commands are
 * numbered. A bundle's later batches come at the same version.
 */
export interface PlaceInValue {
  readonly place: number;
  readonly first: boolean;
}

const WHOLE_VALUE: PlaceInValue = { place: 0, first: true };

/**
 * A piece of work done in slices (an apply, a snapshot's decoding): each `next()` runs one slice,
 * at most APPLY_SLICE_ENTRIES entries (or the slice size asked), and the caller may give the
 * event loop a turn before the next; the last one returns the result. What it computes does not
 * depend on where it was cut.
 */
export type Sliced<T> = Generator<void, T, void>;

/** Runs every slice at once, and returns the result. */
export function runToEnd<T>(work: Sliced<T>): T {
  for (;;) {
    const slice = work.next();
    if (slice.done === true) return slice.value;
  }
}

/**
 * The replicated state of the cluster: the lock table as the log has made it, the position of
 * the last batch applied, and each proposer's last sequence number. `apply` is deterministic:
 * it reads no clock and no node-local state, so every node that applies the same log holds the
 * same state at the same position (compare `digest()`).
 *
 * The clock given here dates each entry's phase for this node's deadline watch only (see
 * ReplicaRules); it never changes what apply decides.
 */
export class ReplicaState {
  readonly table: ReplicaTable;
  /**
   * The table's rules: apply tells them the position and origin of each command it runs, and the
   * bound on the entries' etcd bytes each batch carries.
   */
  private readonly rules: EntryBytesRules;
  /** The last batch applied. */
  position: LogPosition = { version: 0, revision: 0 };
  /**
   * Commands applied so far at `position.version`: where the next batch of the same bundle begins
   * (see LogCodec). A bundle applies whole within one synchronous pass, so a snapshot never sits
   * inside one and this is not part of it.
   */
  private placeInVersion = 0;
  /** `${name}\0${incarnation}` → last applied seq; insertion order is recency (oldest first). */
  private readonly proposers = new Map<string, number>();
  /**
   * Entries per origin node, for that node's drain. A node's counter stays when it drops to 0:
   * a node whose clients take and give back locks goes 0, 1, 0 all day, and a Map entry deleted and
   * made again each time was, measured, the costliest line of apply. Counters at 0 go once there
   * are MAX_ORIGIN_COUNTERS (node names are few; a cluster renamed over and over stays bounded).
   */
  private readonly byOrigin = new Map<ByteString, { entries: number }>();
  /**
   * An import in progress: its entries wait here, outside the table, until its commit puts them
   * all in at once (or none, if the table is no longer empty). A later import's first entry
   * replaces it, so an importer that died half-way leaves nothing behind in the table.
   */
  private staging: ImportStaging | undefined;

  /** Waiting entries tied to an incarnation, by ticket (see TiedWait); replicated (a snapshot keeps those that hold). */
  private readonly tiedWaits = new Map<number, TiedWait>();
  /** Per incarnation (proposerKey), the tied waits kept for it: what a node proposes the end of (not replicated: derived). */
  private readonly tiedPerIncarnation = new Map<string, WaitingIncarnation & { count: number }>();
  /**
   * Incarnations (proposerKey) whose waits ended, oldest first, at most MAX_REMEMBERED_PROPOSERS:
   * an AcquireWait of one does nothing, so a batch of a dead node that lands late leaves no wait behind.
   */
  private readonly endedIncarnations = new Set<string>();

  /** The table's clock: read once per batch while one is applied (see BatchClock). */
  private readonly clock: BatchClock;
  /** A batch is being applied in slices (applyInSlices) and is not done: the state is between two commands' results. */
  private slicing = false;

  /** @param hashSeed for the table's hash indexes: any value applies the log alike (see LockTableOptions). */
  constructor(clock: Clock, hashSeed?: number) {
    this.clock = new BatchClock(clock);
    this.rules = new EntryBytesRules({
      added: (origin) => {
        (this.byOrigin.get(origin) ?? this.newOriginCounter(origin)).entries++;
      },
      removed: (origin) => {
        const counter = this.byOrigin.get(origin);
        if (counter !== undefined && counter.entries > 0) counter.entries--;
      },
    });
    this.table = new LockTable<ReplicatedRequest, ReplicaRules>(this.clock, this.rules, { hashSeed });
  }

  /** A counter for an origin that has none, after dropping those at 0 if there are too many. */
  private newOriginCounter(origin: ByteString): { entries: number } {
    if (this.byOrigin.size >= MAX_ORIGIN_COUNTERS) {
      for (const [name, counter] of this.byOrigin) if (counter.entries === 0) this.byOrigin.delete(name);
    }
    const counter = { entries: 0 };
    this.byOrigin.set(origin, counter);
    return counter;
  }

  /**
   * The command applied last was this node's, for its connection `client`: the entry it created, if
   * any, counts against that connection (--max-locks-per-connection). Not replicated: a node keeps
   * it for its own connections only, and a snapshot load starts it empty.
   */
  claimAddedForConnection(client: number): void {
    this.rules.claimAddedForConnection(client);
  }

  /** Entries created through this node's connection `client` and still held, as far as this node applied. */
  entriesOfConnection(client: number): number {
    return this.rules.entriesOfConnection(client);
  }

  /** The last sequence number applied from that proposer incarnation (0 when none is remembered). */
  lastSeq(proposer: ByteString, incarnation: number): number {
    return this.proposers.get(proposerKey(proposer, incarnation)) ?? 0;
  }

  /**
   * Whether the batch is a copy of one already applied (a retried append). A node keeps one batch
   * in flight and retries it with the same seq; a batch it gave up on (commit timeout: its clients'
   * connections were closed unanswered) that lands after a later one is skipped here, which is
   * safe: nobody was told its outcome.
   */
  isDuplicate(batch: Batch): boolean {
    const last = this.proposers.get(proposerKey(batch.proposer, batch.incarnation));
    return last !== undefined && batch.seq <= last;
  }

  /**
   * Applies the batch at `at` (which must be the next version) and returns each command's
   * result, or undefined when it was a duplicate and changed nothing but the position. A bundle's
   * batches say where they sit in it (`inValue`; a plain batch is its value's whole).
   */
  apply(batch: Batch, at: LogPosition, step?: ApplyStep, inValue: PlaceInValue = WHOLE_VALUE): number[] | undefined {
    return runToEnd(this.applyInSlices(batch, at, step, inValue, Number.POSITIVE_INFINITY));
  }

  /**
   * As apply, in slices: a command that removes or adds many entries (release-all, release `*`,
   * an import's commit) does `sliceEntries` of them per slice, so the caller can give the event
   * loop a turn between them (LogFollower does). Nothing else may apply meanwhile; every node
   * ends in the same state with the same grants in the same order, whatever its slice size
   * (grants are told as their slice makes them). While it is not done, `applying` is true.
   */
  *applyInSlices(
    batch: Batch,
    at: LogPosition,
    step?: ApplyStep,
    inValue: PlaceInValue = WHOLE_VALUE,
    sliceEntries = APPLY_SLICE_ENTRIES,
  ): Sliced<number[] | undefined> {
    if (this.slicing) throw new Error('a batch applied while another, or a snapshot, is still in slices');
    const place = inValue.place;
    if (inValue.first) {
      if (at.version !== this.position.version + 1) {
        throw new LogGapError(`batch ${at.version} arrived after batch ${this.position.version}`);
      }
      if (place !== 0) throw new Error(`a value's first batch at place ${place}`);
    } else if (at.version !== this.position.version || place !== this.placeInVersion) {
      // Not a gap in the log: the follower hands a bundle's batches on in order, in one pass.
      throw new Error(`a bundle's batch at ${at.version}:${place} arrived after ${this.position.version}:${this.placeInVersion}`);
    }
    this.position = at;
    this.placeInVersion = place + batch.commands.length;
    if (this.isDuplicate(batch)) return undefined;
    const key = proposerKey(batch.proposer, batch.incarnation);
    this.proposers.delete(key);
    this.proposers.set(key, batch.seq);
    if (this.proposers.size > MAX_REMEMBERED_PROPOSERS) this.proposers.delete(this.proposers.keys().next().value!);
    const results: number[] = new Array<number>(batch.commands.length);
    const commands = batch.commands;
    // An import whose first entry finds the table in use is refused whole (every result 0).
    const refusedImport = commands[0]?.op === LogOp.Import && commands[0].first && this.table.size > 0;
    this.rules.beginBatch(batch);
    this.clock.freeze();
    try {
      for (let i = 0; i < commands.length; i++) {
        step?.(i, i > 0 ? results[i - 1] : undefined);
        const position = commandPosition(at.version, place + i);
        this.rules.beginCommand(position, batch.proposer);
        const command = commands[i]!;
        if (refusedImport) results[i] = 0;
        else if (isBulk(command)) results[i] = yield* this.executeInSlices(command, position, batch.proposer, sliceEntries);
        else results[i] = this.execute(command, position, batch);
      }
      step?.(commands.length, commands.length > 0 ? results[commands.length - 1] : undefined);
    } finally {
      this.clock.thaw();
      this.slicing = false;
    }
    // Changes nothing apply decides (see compactIfSparse), so replicas stay alike whenever each compacts.
    this.table.compactIfSparse();
    return results;
  }

  /**
   * A part of the value at `at` that no node can read (LogCodec.decodeValue): nothing of it is
   * applied and no command is numbered for it, but the value's first part still moves the
   * position to `at` (which must be the next version), so the log goes on past it on every node.
   */
  refuse(at: LogPosition, inValue: PlaceInValue = WHOLE_VALUE): void {
    if (!inValue.first) return;
    if (at.version !== this.position.version + 1) throw new LogGapError(`batch ${at.version} arrived after batch ${this.position.version}`);
    this.position = at;
    this.placeInVersion = 0;
  }

  /** Whether a batch is being applied in slices and is not done yet (a snapshot must wait: see encode). */
  get applying(): boolean {
    return this.slicing;
  }

  /** Between two slices of a command: the event loop's turn (the clock runs meanwhile), then the command goes on. */
  private *pauseBetweenSlices(position: number, origin: ByteString): Sliced<void> {
    this.slicing = true;
    this.clock.thaw();
    yield;
    this.clock.freeze();
    this.rules.beginCommand(position, origin);
  }

  /** A command that may touch many entries (see isBulk), in slices of `sliceEntries`. */
  private *executeInSlices(c: BulkCommand, position: number, origin: ByteString, sliceEntries: number): Sliced<number> {
    if (c.op === LogOp.ImportCommit) return yield* this.commitImport(c.importId, origin, position, sliceEntries);
    if (c.op === LogOp.CancelWaitsOf) return yield* this.cancelWaitsOf(c.node, c.incarnation, position, origin, sliceEntries);
    const release: SlicedRelease = c.op === LogOp.ReleaseAll ? this.table.beginReleaseAll(c.owner) : this.table.beginReleaseKey(c.key, c.owner);
    while (!release.run(sliceEntries)) yield* this.pauseBetweenSlices(position, origin);
    return release.total;
  }

  /** Runs one command, at log `position`, of `batch` (its proposer is the origin of what it creates). */
  private execute(c: LogCommand, position: number, batch: Batch): number {
    const table = this.table;
    const origin = batch.proposer;
    switch (c.op) {
      case LogOp.Request:
        return table.request(c, c.allowCreate);
      case LogOp.Renew:
        return table.renew(c.key, c.index, c.owner) ? 1 : 0;
      case LogOp.Release:
        return table.release(c.key, c.index, c.owner);
      case LogOp.ReleaseKey:
      case LogOp.ReleaseAll:
      case LogOp.ImportCommit:
        return runToEnd(this.executeInSlices(c, position, origin, Number.POSITIVE_INFINITY));
      case LogOp.Expire:
        return table.expireVersion(c.key, c.index, c.owner, c.version);
      case LogOp.Import:
        this.rules.nextEntry(c.key, c.index, c.owner);
        return table.importEntry(c, remainingOf(c), position, origin);
      case LogOp.ImportStaged:
      case LogOp.ImportStagedFenced:
        return this.stage(c, position);
      case LogOp.CancelWait:
        return this.cancelWait(c.key, c.index, c.owner, batch);
      case LogOp.ExpireAndHold:
        return table.expireVersion(c.key, c.index, c.owner, c.version, c.holdMs);
      case LogOp.LiftHold:
        return table.liftHold(c.key, c.index, c.version);
      case LogOp.AcquireWait:
        return this.acquireWait(c, batch);
      case LogOp.CancelWaitsOf:
        throw new Error('CancelWaitsOf is applied in slices');
    }
  }

  /**
   * A request through 0x0B: as a Request; an entry it leaves waiting is tied to the batch's
   * incarnation (the last 0x0B to wait on an entry ties it). Nothing, 0, from an incarnation whose
   * waits ended: its connections are gone with it.
   */
  private acquireWait(c: ReplicatedRequest, batch: Batch): number {
    if (this.endedIncarnations.has(proposerKey(batch.proposer, batch.incarnation))) {
      this.table.forgetRefusal();
      return 0;
    }
    const position = this.table.request(c, c.allowCreate);
    if (position > 1) this.tieWait(c.key, c.index, c.owner, batch.proposer, batch.incarnation);
    return position;
  }

  /**
   * A waiter's client stopped waiting (CancelWait): it goes if it still waits, unless its wait is
   * tied to an incarnation other than the batch's (its client asked again through another node
   * before this cancel applied: that newer wait stays).
   */
  private cancelWait(key: ByteString, index: ByteString, owner: ByteString, batch: Batch): number {
    if (this.tiedWaits.size > 0) {
      const entry = this.table.entryOf(key, index, owner);
      const tied = entry === NO_ID ? undefined : this.tiedWaits.get(this.table.ticketOf(entry));
      if (tied !== undefined && this.holds(tied)) {
        if (tied.node !== batch.proposer || tied.incarnation !== batch.incarnation) return 0;
        this.untie(tied);
      }
    }
    return this.table.cancelWaiter(key, index, owner);
  }

  /**
   * The waits of incarnation (node, incarnation) end: every entry still waiting tied to it goes (in
   * ticket order, `sliceEntries` at a time), and later AcquireWaits of it do nothing. Returns the
   * number of entries removed.
   */
  private *cancelWaitsOf(node: ByteString, incarnation: number, position: number, origin: ByteString, sliceEntries: number): Sliced<number> {
    const key = proposerKey(node, incarnation);
    this.endedIncarnations.delete(key);
    this.endedIncarnations.add(key);
    if (this.endedIncarnations.size > MAX_REMEMBERED_PROPOSERS) this.endedIncarnations.delete(this.endedIncarnations.values().next().value!);
    if (!this.tiedPerIncarnation.has(key)) return 0;
    const tied = [...this.tiedWaits.values()].filter((w) => w.node === node && w.incarnation === incarnation).sort((a, b) => a.ticket - b.ticket);
    let removed = 0;
    for (let done = 0; done < tied.length; done++) {
      if (done > 0 && done % sliceEntries === 0) yield* this.pauseBetweenSlices(position, origin);
      const w = tied[done]!;
      const holds = this.holds(w);
      this.untie(w);
      if (holds) removed += this.table.cancelWaiter(w.key, w.index, w.owner);
    }
    return removed;
  }

  /** Ties the waiting entry (key, index, owner) to the incarnation, in place of any earlier tie. */
  private tieWait(key: ByteString, index: ByteString, owner: ByteString, node: ByteString, incarnation: number): void {
    const ticket = this.table.ticketOf(this.table.entryOf(key, index, owner));
    const earlier = this.tiedWaits.get(ticket);
    if (earlier !== undefined) this.untie(earlier);
    this.pruneTiedWaits(TIED_WAITS_PRUNED_PER_TIE);
    this.tiedWaits.set(ticket, { key, index, owner, ticket, node, incarnation });
    const counted = this.tiedPerIncarnation.get(proposerKey(node, incarnation));
    if (counted !== undefined) counted.count++;
    else this.tiedPerIncarnation.set(proposerKey(node, incarnation), { node, incarnation, count: 1 });
  }

  /** Looks at the `n` oldest tied waits: those that no longer hold go, the others go last. Decides nothing (ties are used in ticket order). */
  private pruneTiedWaits(n: number): void {
    const oldest = [...take(this.tiedWaits.values(), Math.min(n, this.tiedWaits.size))];
    for (const w of oldest) {
      this.tiedWaits.delete(w.ticket);
      if (this.holds(w)) this.tiedWaits.set(w.ticket, w);
      else this.uncount(w);
    }
  }

  private untie(w: TiedWait): void {
    if (this.tiedWaits.delete(w.ticket)) this.uncount(w);
  }

  private uncount(w: TiedWait): void {
    const key = proposerKey(w.node, w.incarnation);
    const counted = this.tiedPerIncarnation.get(key);
    if (counted !== undefined && --counted.count === 0) this.tiedPerIncarnation.delete(key);
  }

  /** Whether the tie still holds: its entry (same names, same ticket) is there and waits. */
  private holds(w: TiedWait): boolean {
    const entry = this.table.entryOf(w.key, w.index, w.owner);
    return entry !== NO_ID && !this.table.owns(entry) && this.table.ticketOf(entry) === w.ticket;
  }

  /** Every wait tied to an incarnation that still holds, in ticket order (snapshots, tests). */
  tiedWaitsHeld(): TiedWait[] {
    return [...this.tiedWaits.values()].filter((w) => this.holds(w)).sort((a, b) => a.ticket - b.ticket);
  }

  /** The incarnations with waits tied to them (some of those may no longer hold): whose end a node may propose. */
  waitingIncarnations(): IterableIterator<WaitingIncarnation> {
    return this.tiedPerIncarnation.values();
  }

  /** Whether the waits of that incarnation were ended (as far as the last MAX_REMEMBERED_PROPOSERS ends go). */
  waitsEnded(node: ByteString, incarnation: number): boolean {
    return this.endedIncarnations.has(proposerKey(node, incarnation));
  }

  /** Stages one entry of an import, at log `position` (its ticket): 1, or 0 when the import was refused (or replaced by a later one). */
  private stage(c: ImportStagedCommand, position: number): number {
    if (c.first) {
      if (this.table.size > 0) return 0;
      this.staging = { id: c.importId, entries: [] };
    }
    if (this.staging?.id !== c.importId) return 0;
    this.staging.entries.push({ command: c, ticket: position });
    return 1;
  }

  /**
   * Puts every entry staged under `importId` into the table, in file order, each with the ticket
   * of the command that staged it; their remaining times count from now. All or nothing: refused
   * (0) when that import is not the one staged, or the table holds entries by now. Returns the
   * number of entries imported.
   */
  private *commitImport(importId: number, origin: ByteString, position: number, sliceEntries: number): Sliced<number> {
    const staging = this.staging;
    if (staging?.id !== importId) return 0;
    this.staging = undefined;
    if (this.table.size > 0) return 0;
    // Every grant from here on (this commit's own included) counts its token above every token
    // the file's node granted; its owners keep theirs (see LockTable.importEntry).
    let highest = 0;
    for (const { command } of staging.entries) highest = Math.max(highest, command.token, command.highestToken);
    this.rules.raiseTokenBase(highest);
    let imported = 0;
    let inSlice = 0;
    for (const { command, ticket } of staging.entries) {
      if (inSlice++ === sliceEntries) {
        yield* this.pauseBetweenSlices(position, origin);
        inSlice = 1;
      }
      this.rules.nextEntry(command.key, command.index, command.owner);
      imported += this.table.importEntry(command, remainingOf(command), ticket, origin);
    }
    return imported;
  }

  /** Entries of an import waiting for its commit (0 when none is in progress). */
  get stagedImportEntries(): number {
    return this.staging?.entries.length ?? 0;
  }

  /**
   * At or above every fencing token granted so far: a grant's token is the base plus its command's
   * position, and every command applied so far sits below the first position of the next batch.
   */
  get highestToken(): number {
    return this.rules.tokenFloor + commandPosition(this.position.version + 1, 0);
  }

  /**
   * What the table's entries cost in etcd, one copy each (see EntryBytesRules): the same on every
   * replica at one position, and what the bound a batch carries is compared with.
   */
  get entryEtcdBytes(): number {
    return this.rules.entryBytes;
  }

  /** Owners and waiters cluster-wide. */
  counts(): LockCounts {
    return { owners: this.table.owners, waiters: this.table.waiters };
  }

  /** Entries requested through `origin` that are still in the table. */
  entriesFrom(origin: ByteString): number {
    return this.byOrigin.get(origin)?.entries ?? 0;
  }

  /**
   * Owners and waiters requested through `origin`, for drain progress: a pass over one column
   * (measured: 1 ms for 200,000 entries on a loaded machine), never a walk of the queues.
   */
  countsFrom(origin: ByteString): LockCounts {
    const entries = this.entriesFrom(origin);
    if (entries === 0) return { owners: 0, waiters: 0 };
    const owners = this.rules.ownersFrom(origin, this.table);
    return { owners, waiters: entries - owners };
  }

  /**
   * The whole state as bytes: position, token base, proposers, then every entry in directory and
   * queue order, then the import being staged. The same state always gives the same bytes, so the
   * encoding also serves as the digest input.
   */
  encode(): Buffer {
    return runToEnd(this.encodeInSlices(Number.POSITIVE_INFINITY));
  }

  /**
   * As encode, `sliceEntries` entries per slice, so that the leader's snapshot of a big table never
   * holds the event loop (1–3 µs an entry). Nothing may apply until it is done: the caller runs
   * it where apply would run (LogFollower.snapshot); apply refuses meanwhile.
   */
  *encodeInSlices(sliceEntries = APPLY_SLICE_ENTRIES): Sliced<Buffer> {
    if (this.slicing) throw new Error('the state is between two slices of a command: no snapshot of it');
    this.slicing = true;
    try {
      return yield* this.writeSnapshot(sliceEntries);
    } finally {
      this.slicing = false;
    }
  }

  private *writeSnapshot(sliceEntries: number): Sliced<Buffer> {
    const out = new BufferWriter(64 * 1024, 0);
    const holds = [...this.table.holdsHeld()];
    const tied = this.tiedWaits.size > 0 ? this.tiedWaitsHeld() : [];
    const layout = tied.length > 0 || this.endedIncarnations.size > 0 ? SNAPSHOT_LAYOUT_TIED_WAITS : holds.length > 0 ? SNAPSHOT_LAYOUT_HOLDS : SNAPSHOT_LAYOUT;
    out.u8(SNAPSHOT_MAGIC).u8(layout);
    out.f64(this.position.version).f64(this.position.revision).f64(this.rules.tokenFloor);
    out.u32(this.proposers.size);
    for (const [key, seq] of this.proposers) {
      const [name, incarnation] = splitProposerKey(key);
      out.string(name).u32(incarnation).u32(seq);
    }
    if (layout !== SNAPSHOT_LAYOUT) {
      out.u32(holds.length);
      for (const hold of holds) out.string(hold.key).string(hold.index).f64(hold.version).u32(hold.delayMs).u32(hold.entriesBefore);
    }
    out.u32(this.table.size);
    let written = 0;
    for (const e of this.table.replicaEntriesInPlace()) {
      out
        .string(e.key)
        .string(e.index)
        .string(e.owner)
        .u8(e.priority)
        .u16(e.ttl)
        .u16(e.ttw)
        .u8(e.isOwner ? 1 : 0);
      out.f64(e.ticket).f64(e.version).f64(e.token).string(e.origin);
      if (++written % sliceEntries === 0) yield;
    }
    const staging = this.staging;
    out.u8(staging === undefined ? 0 : 1);
    if (staging !== undefined) {
      out.u32(staging.id).u32(staging.entries.length);
      for (const { command, ticket } of staging.entries) {
        out.f64(ticket);
        writeImportStaged(out, command);
      }
    }
    if (layout === SNAPSHOT_LAYOUT_TIED_WAITS) {
      out.u32(tied.length);
      for (const w of tied) out.string(w.key).string(w.index).string(w.owner).f64(w.ticket).string(w.node).u32(w.incarnation);
      out.u32(this.endedIncarnations.size);
      for (const key of this.endedIncarnations) {
        const [name, incarnation] = splitProposerKey(key);
        out.string(name).u32(incarnation);
      }
    }
    return out.flush();
  }

  /** A state read back from `encode()` bytes (or an older layout's); throws LogFormatError on anything malformed. */
  static decode(bytes: Uint8Array, clock: Clock, hashSeed?: number): ReplicaState {
    return runToEnd(ReplicaState.decodeInSlices(bytes, clock, hashSeed, Number.POSITIVE_INFINITY));
  }

  /** As decode, `sliceEntries` entries per slice (a snapshot load gives the event loop a turn between them). */
  static *decodeInSlices(bytes: Uint8Array, clock: Clock, hashSeed?: number, sliceEntries = APPLY_SLICE_ENTRIES): Sliced<ReplicaState> {
    const r = new CheckedReader(bytes);
    if (r.u8() !== SNAPSHOT_MAGIC) throw new LogFormatError('not a snapshot');
    const layout = r.u8();
    if (
      layout !== SNAPSHOT_LAYOUT &&
      layout !== SNAPSHOT_LAYOUT_HOLDS &&
      layout !== SNAPSHOT_LAYOUT_TIED_WAITS &&
      layout !== SNAPSHOT_LAYOUT_UNTOKENED &&
      layout !== SNAPSHOT_LAYOUT_UNTOKENED_STAGED
    ) {
      throw new LogFormatError(`snapshot layout ${layout} is not known to this version`);
    }
    const tokened = layout === SNAPSHOT_LAYOUT || layout === SNAPSHOT_LAYOUT_HOLDS || layout === SNAPSHOT_LAYOUT_TIED_WAITS;
    const state = new ReplicaState(clock, hashSeed);
    const version = r.f64();
    state.position = { version, revision: r.f64() };
    if (tokened) state.rules.raiseTokenBase(r.f64());
    const proposers = r.u32();
    for (let i = 0; i < proposers; i++) {
      const name = r.string();
      const incarnation = r.u32();
      state.proposers.set(proposerKey(name, incarnation), r.u32());
    }
    const holds: Array<{ key: ByteString; index: ByteString; version: number; delayMs: number; entriesBefore: number }> = [];
    if (layout === SNAPSHOT_LAYOUT_HOLDS || layout === SNAPSHOT_LAYOUT_TIED_WAITS) {
      const count = r.u32();
      for (let i = 0; i < count; i++) {
        const hold = { key: r.string(), index: r.string(), version: r.f64(), delayMs: r.u32(), entriesBefore: r.u32() };
        if (hold.entriesBefore < (holds[holds.length - 1]?.entriesBefore ?? 0)) throw new LogFormatError(`snapshot hold ${i} out of order`);
        holds.push(hold);
      }
    }
    let nextHold = 0;
    /** Loads the holds whose queues come before entry `i` in directory order (each before its own queue's entries). */
    const loadHoldsBefore = (i: number): void => {
      for (; nextHold < holds.length && holds[nextHold]!.entriesBefore <= i; nextHold++) {
        const { key, index, version, delayMs } = holds[nextHold]!;
        try {
          state.table.loadHold(key, index, version, delayMs);
        } catch (error) {
          throw new LogFormatError(`snapshot hold ${nextHold}: ${(error as Error).message}`);
        }
      }
    };
    const entries = r.u32();
    for (let i = 0; i < entries; i++) {
      if (i > 0 && i % sliceEntries === 0) yield;
      loadHoldsBefore(i);
      const key = r.string();
      const index = r.string();
      const owner = r.string();
      const priority = r.u8();
      const ttl = r.u16();
      const ttw = r.u16();
      const isOwner = r.u8() !== 0;
      const ticket = r.f64();
      const entryVersion = r.f64();
      // A snapshot from before tokens: an owner's token is the position its current phase began
      // at. That is at or above its grant's position (a renewal only moves it later), so above the
      // token of every earlier grant of the lock (their positions: no version that writes these
      // layouts raises the base); and at or below this snapshot's position, so below the token of
      // every later grant, whose position is greater.
      const token = tokened ? r.f64() : isOwner ? entryVersion : 0;
      const entry: ReplicaEntry = { key, index, owner, priority, ttl, ttw, isOwner, token, ticket, version: entryVersion, origin: r.string() };
      try {
        state.rules.nextEntry(key, index, owner);
        state.table.load(entry);
      } catch (error) {
        throw new LogFormatError(`snapshot entry ${i}: ${(error as Error).message}`);
      }
    }
    loadHoldsBefore(Number.POSITIVE_INFINITY);
    if (layout === SNAPSHOT_LAYOUT_UNTOKENED_STAGED || (tokened && r.u8() !== 0)) state.staging = readStaging(r);
    if (layout === SNAPSHOT_LAYOUT_TIED_WAITS) state.readTiedWaits(r);
    if (!r.done) throw new LogFormatError('bytes after the last snapshot entry');
    return state;
  }

  /** Layout 5's tied waits (each must hold in the table just loaded) and ended incarnations. */
  private readTiedWaits(r: CheckedReader): void {
    const tied = r.u32();
    for (let i = 0; i < tied; i++) {
      const w: TiedWait = { key: r.string(), index: r.string(), owner: r.string(), ticket: r.f64(), node: r.string(), incarnation: r.u32() };
      if (!this.holds(w) || this.tiedWaits.has(w.ticket)) throw new LogFormatError(`snapshot tied wait ${i}: no such waiting entry`);
      this.tieWait(w.key, w.index, w.owner, w.node, w.incarnation);
    }
    const ended = r.u32();
    for (let i = 0; i < ended; i++) {
      const name = r.string();
      this.endedIncarnations.add(proposerKey(name, r.u32()));
    }
  }

  /** A short fingerprint of the whole replicated state (tests compare replicas with it). */
  digest(): string {
    return createHash('sha256').update(this.encode()).digest('hex').slice(0, 16);
  }
}

/**
 * The replica table's clock. Apply dates the phase of every entry it touches (for this node's
 * deadline watch only); a batch is applied in one go, so one reading serves all its commands
 * instead of one per command. Outside apply (the leader's deadline watch) it reads the clock.
 */
class BatchClock implements Clock {
  private frozen: number | undefined;

  constructor(private readonly clock: Clock) {}

  now(): number {
    return this.frozen ?? this.clock.now();
  }

  /** From now until thaw(), now() is this moment. */
  freeze(): void {
    this.frozen = this.clock.now();
  }

  thaw(): void {
    this.frozen = undefined;
  }
}

/** An import's staged entries as a snapshot holds them: its id, then each entry's ticket and command. */
function readStaging(r: CheckedReader): ImportStaging {
  const id = r.u32();
  const count = r.u32();
  const staging: ImportStaging = { id, entries: [] };
  for (let i = 0; i < count; i++) {
    const ticket = r.f64();
    const op = r.u8();
    if (op !== LogOp.ImportStaged && op !== LogOp.ImportStagedFenced) throw new LogFormatError(`snapshot staged entry ${i}: not an import entry`);
    staging.entries.push({ ticket, command: readImportStaged(r, op) });
  }
  return staging;
}

/** An imported entry's remaining milliseconds as the table takes them: null when its phase never expires. */
function remainingOf(c: { readonly remainingMs: number }): number | null {
  return c.remainingMs === NO_REMAINING ? null : c.remainingMs;
}

/** The first `n` items of `items`. */
function* take<T>(items: Iterator<T>, n: number): IterableIterator<T> {
  for (let i = 0; i < n; i++) {
    const next = items.next();
    if (next.done === true) return;
    yield next.value;
  }
}

function proposerKey(name: ByteString, incarnation: number): string {
  return `${name}\0${incarnation}`;
}

function splitProposerKey(key: string): [ByteString, number] {
  const cut = key.lastIndexOf('\0');
  return [key.slice(0, cut), Number(key.slice(cut + 1))];
}

type BulkCommand = Extract<LogCommand, { op: typeof LogOp.ReleaseAll | typeof LogOp.ReleaseKey | typeof LogOp.ImportCommit | typeof LogOp.CancelWaitsOf }>;

/** A command whose apply may touch any number of entries, done in slices (see applyInSlices). */
function isBulk(c: LogCommand): c is BulkCommand {
  return c.op === LogOp.ReleaseAll || c.op === LogOp.ReleaseKey || c.op === LogOp.ImportCommit || c.op === LogOp.CancelWaitsOf;
}
