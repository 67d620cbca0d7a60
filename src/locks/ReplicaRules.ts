import type { ByteString } from '../bytes.js';
import type { LockRequest } from './LockService.js';
import type { QueueRules } from './QueueRules.js';
import { ConnectionEntries } from './ConnectionEntries.js';
import { NO_ID } from './HashIndex.js';
import { emptyNames, grownCapacity, resized, resizedNames } from './records.js';
import { Refusal, type TableRoom } from './TableLimits.js';

const MIN_CAPACITY = 64;

/** A request as the log carries it: with what the proposing node decided it under, so that every replica decides alike. */
export interface ReplicatedRequest extends LockRequest {
  /** False while the proposing node drains: a request that would create an entry gets 0. */
  readonly allowCreate: boolean;
  /** The proposing node's --max-locks (its other bounds come with the batch: see src/cluster/EntryBytesRules.ts). */
  readonly maxEntries: number;
}

/** Told of every entry that joins or leaves a replicated table, by origin node (per-node counts for drain). */
export interface ReplicaHooks {
  added(origin: ByteString): void;
  removed(origin: ByteString): void;
}

/**
 * The queue rules of a cluster replica, a table fed by the log (see src/cluster/ReplicaState.ts).
 * Every replica must decide alike from the log alone, so what a single node takes from its clock
 * or its own counter comes from the log here: a new entry's ticket, and the version of each phase,
 * are the log position of the command being applied, which apply hands over in `beginCommand`.
 * A waiter is promoted whatever this node's clock says (expiry is a log command: the leader
 * proposes it). The table's clock still dates every phase, but only for this node's deadline
 * watch, never for an answer.
 *
 * Per entry it keeps the version of its phase and the node it was requested through (its origin),
 * 16 bytes on top of the table's own record; and, for this node's own use only, the connection of
 * this node that created it (ConnectionEntries), which no replicated decision reads.
 */
export class ReplicaRules implements QueueRules<ReplicatedRequest> {
  /**
   * Per entry: the log position at which its current phase (TTL or TTW) began. An expiry command
   * names it, so one proposed before a renewal or a promotion finds a newer phase and does nothing.
   */
  private version = new Float64Array(MIN_CAPACITY);
  /** Per entry: the node it was requested through (drain waits for its own); '' once it is gone. */
  private origin: ByteString[] = emptyNames(MIN_CAPACITY);
  /** The log position of the command being applied. */
  private position = 0;
  /** The node that proposed the command being applied. */
  private commandOrigin: ByteString = '';
  /**
   * Added to a grant's log position to make its fencing token: 0 until an import of a single
   * node's lock file raises it above every token that file held (see raiseTokenBase).
   */
  private tokenBase = 0;
  /**
   * The entries this node's connections created (--max-locks-per-connection): told by the node
   * after each of its own commands applied (claimAddedForConnection), never by the log, so it is not
   * replicated and a snapshot load starts it empty; apply's decisions never read it.
   */
  private readonly connections = new ConnectionEntries();
  /** The entry the command being applied created, if any (NO_ID). */
  private addedByCommand = NO_ID;

  constructor(private readonly hooks: ReplicaHooks) {}

  /** Apply is about to run the command at log `position`, proposed through node `origin`. */
  beginCommand(position: number, origin: ByteString): void {
    this.position = position;
    this.commandOrigin = origin;
    this.addedByCommand = NO_ID;
  }

  /**
   * The command applied last was this node's, sent for its connection `client`: the entry it
   * created, if it created one, counts against that connection from now on. Called right after
   * the command applied, before the next one begins.
   */
  claimAddedForConnection(client: number): void {
    if (this.addedByCommand !== NO_ID) this.connections.add(this.addedByCommand, client);
  }

  /** Entries created through this node's connection `client` that are still held (as far as this node applied). */
  entriesOfConnection(client: number): number {
    return this.connections.of(client);
  }

  /** What grant tokens are counted from (replicated: a snapshot keeps it). */
  get tokenFloor(): number {
    return this.tokenBase;
  }

  /**
   * From now on every grant's token is above `token` (an imported file's highest). Positions only
   * grow, so tokens stay above every earlier grant's as long as the base never goes down.
   */
  raiseTokenBase(token: number): void {
    if (token > this.tokenBase) this.tokenBase = token;
  }

  /**
   * The log position of the command that grants, on top of the base: every replica computes the
   * same token, a failover or a full restart never lowers it (positions only grow), and two grants
   * of one lock never come from one command.
   */
  grantToken(): number {
    return this.tokenBase + this.position;
  }

  /** The log position at which the entry's current phase began. */
  versionOf(entry: number): number {
    return this.version[entry]!;
  }

  /** How many entries requested through `origin` own their lock (one pass over the origin column). */
  ownersFrom(origin: ByteString, table: { owns(entry: number): boolean }): number {
    const column = this.origin;
    let owners = 0;
    for (let entry = 0; entry < column.length; entry++) if (column[entry] === origin && table.owns(entry)) owners++;
    return owners;
  }

  /** The node the entry was requested through. */
  originOf(entry: number): ByteString {
    return this.origin[entry]!;
  }

  /**
   * Takes in an entry that joins with a history of its own (a snapshot's, or an import's staged
   * at an earlier position) rather than by the command being applied.
   */
  adopt(entry: number, origin: ByteString, version: number): void {
    if (entry >= this.version.length) this.grow(grownCapacity(this.version.length, entry + 1));
    this.version[entry] = version;
    this.origin[entry] = origin;
    this.hooks.added(origin);
  }

  /**
   * The limits are the proposing node's, carried in the command (and, in EntryBytesRules, in its
   * batch); what the table holds is the same on every replica. The per-connection cap is the
   * proposing node's own, checked before it proposes: no connection reaches apply.
   */
  refusal(request: ReplicatedRequest, room: TableRoom): Refusal {
    return room.entries >= request.maxEntries ? Refusal.MaxLocks : Refusal.None;
  }

  /** The bakery ticket: the position of the request in the log. */
  newTicket(): number {
    return this.position;
  }

  entryAdded(entry: number): void {
    this.adopt(entry, this.commandOrigin, this.position);
    this.addedByCommand = entry;
  }

  entryRemoved(entry: number): void {
    this.connections.remove(entry);
    if (entry === this.addedByCommand) this.addedByCommand = NO_ID;
    const origin = this.origin[entry]!;
    this.origin[entry] = '';
    this.hooks.removed(origin);
  }

  phaseBegins(entry: number): void {
    this.version[entry] = this.position;
  }

  /**
   * Always the first waiter. Every replica promotes the same waiter, whatever its own clock says,
   * and from then on any node may tell that client it owns (0x03 answering 1, 0x01 naming it,
   * 0x07 flagging it). So it keeps the lock for its full TTL from its promotion, like any promoted
   * waiter, even if its wait had run out on some node's clock: expiring it early would hand the
   * lock to another client while this one, told it owns, still holds it. A waiter whose wait ran
   * out is normally gone before this (the leader proposes its expiry when its TTW passes); only a
   * release that lands before that expiry (one tick and one commit, longer while the leader is
   * stalled) promotes it. A single node drops it instead: it alone knows the time.
   */
  promotes(): boolean {
    return true;
  }

  /** The position of the expiry being applied: the lift of its lock-delay names it. */
  holdVersion(): number {
    return this.position;
  }

  recordsRebuilt(from: Int32Array, to: Int32Array, count: number): void {
    let highest = -1;
    for (let i = 0; i < count; i++) highest = Math.max(highest, to[i]!);
    const capacity = grownCapacity(MIN_CAPACITY, highest + 1);
    const version = new Float64Array(capacity);
    const origin = emptyNames(capacity);
    for (let i = 0; i < count; i++) {
      version[to[i]!] = this.version[from[i]!]!;
      origin[to[i]!] = this.origin[from[i]!]!;
    }
    this.version = version;
    this.origin = origin;
    this.connections.renumbered(from, to, count);
  }

  private grow(capacity: number): void {
    this.version = resized(this.version, capacity);
    this.origin = resizedNames(this.origin, capacity);
  }
}
