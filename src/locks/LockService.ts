import type { ByteString } from '../bytes.js';
import type { Contender, FencedPosition, QueueView, RequestedLock } from '../protocol/messages.js';
import type { Later } from './Later.js';
import type { LimitFigures } from './TableLimits.js';

/** One entry as written to and read from the lock file. */
export interface SavedLock {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
  readonly priority: number;
  readonly ttl: number;
  readonly ttw: number;
  readonly isOwner: boolean;
  /** The fencing token of an owner's grant; 0 for a waiter (and for an owner saved before tokens existed). */
  readonly token: number;
  /** Milliseconds left in the entry's current phase; null when that phase never expires. */
  readonly remainingMs: number | null;
}

/** A lock held back by a lock-delay (its owner's TTL ran out), as the lock file keeps it. */
export interface SavedHold {
  readonly key: ByteString;
  readonly index: ByteString;
  /** Milliseconds the delay had left; frozen while the server is down, as an entry's time left is. */
  readonly remainingMs: number;
  /** The number of entries saved before its queue's own: where the queue goes among the others. */
  readonly entriesBefore: number;
}

export interface LockCounts {
  readonly owners: number;
  readonly waiters: number;
}

/** How waiting stands, for the metrics. */
export interface WaitingFigures {
  /** Locks held back now by a lock-delay. */
  readonly heldBack: number;
  /** Milliseconds the longest-waiting entry has waited since it was requested; 0 when none waits. */
  readonly oldestWaitMs: number;
  /** Clients of this node waiting now for a grant (0x0B). */
  readonly grantWaits: number;
  /** Clients of this node waiting now for a loss (0x0C). */
  readonly lossWaits: number;
}

/** Nothing waiting, nothing held back (a service that has no waits, such as a test's stand-in). */
export const NO_WAITING: WaitingFigures = { heldBack: 0, oldestWaitMs: 0, grantWaits: 0, lossWaits: 0 };

/** What a lock request asks the service: the fields the request's wire message carries. */
export type LockRequest = RequestedLock;

/**
 * A command's answer: the value itself when the service knows it at once (the local table), or,
 * when it comes later (a replicated core that must ask its peers), a Later, or a promise of it.
 * Callers `await` it in any case (a Later is a thenable), or tell them apart; a promise per
 * command cost the single node a third of its pipelined throughput (measured 556k against 739k
 * ops/s), so the local service answers directly, and a cluster node answers with Laters.
 */
export type Answer<T> = T | Later<T> | Promise<T>;

/**
 * The one interface between the protocol layer and lock state. The single-node table and the
 * replicated cluster core both implement it, and the server never knows which one it has: every
 * command may answer later (see Answer), even where the local answer is immediate.
 *
 * `receivedAt`, on every command, is when its bytes were read (the service's clock), if the
 * caller knows it: a cluster node counts the command's commit deadline from there, so a command
 * that waited in the connection's input is not given a fresh one. The local table ignores it.
 * `client`, on a request, is the connection it came through (a positive number, unique in the
 * process), if any: the entries created through one connection are capped
 * (--max-locks-per-connection) by the node that serves it.
 */
export interface LockService {
  /** Find owner (0x01): the owner, or '' when the lock is free. */
  findOwner(key: ByteString, index: ByteString, receivedAt?: number): Answer<ByteString>;
  /**
   * Request (0x02): the position (1 = owner). With allowCreate false (drain mode) a request that
   * would add an entry gets 0; an existing entry is still renewed.
   */
  request(request: LockRequest, allowCreate: boolean, receivedAt?: number, client?: number): Answer<number>;
  /**
   * Request with fence (0x0A): as request (0x02), answering also the fencing token of the grant
   * when the position is 1 (a renewal answers the token its grant got), else 0.
   */
  requestFenced(request: LockRequest, allowCreate: boolean, receivedAt?: number, client?: number): Answer<FencedPosition>;
  /**
   * Acquire and wait (0x0B): a request with fence whose answer waits, up to `waitMs` (0: not at
   * all; NO_WAIT_BOUND: no bound), for the requester to own: answered 1 and the grant's token in
   * the turn it is granted (a release, an expiry, a lift of a lock-delay, a log command applied:
   * no polling); its position (and token 0) when the bound passes first, the entry staying queued
   * to its TTW; 0 when the entry goes meanwhile. If the client goes away first (the answer is
   * cancelled, see Waiting), its entry goes too if it still waits.
   */
  acquire(request: LockRequest, allowCreate: boolean, waitMs: number, receivedAt?: number, client?: number): Answer<FencedPosition>;
  /**
   * The loss notice (0x0C): answered when the owner's entry stops owning, with how it ended
   * (LossReason: released, released with `*`, released by release-all, expired), in the turn it
   * ends; at once NotOwner when it does not own the lock.
   */
  awaitLoss(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Answer<number>;
  /** The detailed list (0x0D): every queue under the key, with lock-delays and times left, at most `limit` entries. */
  queues(key: ByteString, limit: number, receivedAt?: number): Answer<QueueView[]>;
  /** Fence (0x09): the fencing token of the owner's current grant, or 0 when `owner` does not own the lock. */
  fence(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Answer<number>;
  /** Find contender location (0x03): the position, or 0. */
  location(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Answer<number>;
  /** Renew (0x04): whether the entry existed and its timer restarted. */
  renew(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Answer<boolean>;
  /** Release (0x05): entries removed (0 or 1). */
  release(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Answer<number>;
  /** Release (0x05) with index `*`: the owner's entries under the key, across indexes. */
  releaseKey(key: ByteString, owner: ByteString, receivedAt?: number): Answer<number>;
  /** Release all (0x06): the owner's entries across all keys. */
  releaseAll(owner: ByteString, receivedAt?: number): Answer<number>;
  /** List (0x07): every entry under the key, at most `limit`. */
  list(key: ByteString, limit: number, receivedAt?: number): Answer<Contender[]>;
  counts(): Promise<LockCounts>;
  /** Locks held back and the longest wait, as this node's table has them now (metrics: not an answer to a client). */
  readonly waiting: WaitingFigures;
  /**
   * What drain mode (SIGSYS) of this node waits for: every entry on a single node; in a cluster,
   * the entries requested through this node, wherever they are released or expire.
   */
  drainCounts(): Promise<LockCounts>;
  /** Every entry with its remaining time, in queue order, for the lock file. */
  snapshot(): Promise<SavedLock[]>;
  /**
   * At or above every fencing token granted so far. The lock file keeps it beside the entries, so
   * that after a restart (or an import into a cluster) tokens go on above every one handed out.
   */
  highestToken(): Promise<number>;
  /**
   * The locks held back now by a lock-delay, with the time each has left, saved in the lock file
   * beside snapshot()'s entries. A service without it saves none.
   */
  savedHolds?(): Promise<SavedHold[]>;
  /** Loads saved entries and held-back locks (at start-up, before any client is served). */
  restore(saved: readonly SavedLock[], highestToken?: number, holds?: readonly SavedHold[]): Promise<void>;
  /** How the table stands against its limits (metrics); a service without it exports no such figures. */
  limitFigures?(): LimitFigures;
  /** Stops background work (expiry sweeps); the state stays readable for a final snapshot. */
  close(): Promise<void>;
}
