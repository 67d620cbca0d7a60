/**
 * The one seam between the cluster and the store that replicates it. EtcdLog implements it on a
 * real etcd cluster; MemoryLog implements it in memory, with etcd's semantics and faults, for the
 * seeded simulation. The cluster code sees nothing else of etcd.
 *
 * The log is the successive values of one key: each append is one batch. A batch's `version`
 * (1, 2, 3, … per append, as etcd counts a key's versions) numbers the batches contiguously, so a
 * follower can prove it saw every one; its `revision` is the store-wide revision of the append,
 * where a watch or a compaction is positioned.
 */

/** etcd's default --max-request-bytes: a member refuses a bigger request (1.5 MiB). */
export const STORE_MAX_REQUEST_BYTES = 1_572_864;
/** An append's request besides its batch's bytes (keys, the fence put, the version read, framing): under 1 KiB, 4 allowed. */
const APPEND_REQUEST_EXTRA_BYTES = 4_096;

/**
 * What the append of a `valueBytes`-long batch weighs as one request to the store: the batch goes
 * in it twice, under the log key and under its retained copy's key (see `since`), in one
 * transaction.
 */
export function appendRequestBytes(valueBytes: number): number {
  return 2 * valueBytes + APPEND_REQUEST_EXTRA_BYTES;
}

/** The longest batch one append can carry within etcd's default request limit (766 KiB). */
export const MAX_APPEND_BYTES = Math.floor((STORE_MAX_REQUEST_BYTES - APPEND_REQUEST_EXTRA_BYTES) / 2);

/**
 * An append attempt that can never commit, so no fence wait follows it: nothing of it was sent (no
 * writer lease could be had, or the value is too long), or the store refused it where it cannot
 * take effect later (on etcd: refused for want of a leader before it was proposed, or its writer
 * lease found gone when it was applied). Any other failure may still commit within lateCommitMs.
 */
export class AppendRefusedError extends Error {
  override name = 'AppendRefusedError';

  /** @param leaseGone etcd found a fence lease of the transaction gone. */
  constructor(
    message: string,
    readonly leaseGone = false,
  ) {
    super(message);
  }
}

/**
 * The log holds values of a format this version does not read (a newer one wrote them): this node
 * must not join, since it would refuse (skip) values that newer nodes apply, and diverge from them.
 */
export class NodeTooOldError extends Error {
  override name = 'NodeTooOldError';
}

/**
 * A writer lease lent to one append attempt (EtcdLog.lendLease), for whichever transaction carries
 * the batch: its own node's, or a sequencer's bundle (issue 20). `endsAt` on the node's monotonic
 * clock (performance.now(); a peer's is converted from the time it said was left).
 */
export interface LentLease {
  readonly leaseId: string;
  readonly fenceKey: Uint8Array;
  readonly endsAt: number;
}

/**
 * How an attempt with a lent writer lease ended: 'settled' (committed, or refused where it can never
 * commit), 'lease-gone' (refused: the store found a writer lease of its append gone; this one is not used
 * again), 'unsettled' (no answer: it may still land within lateCommitMs; the next seal stops it).
 */
export type LeaseOutcome = 'settled' | 'lease-gone' | 'unsettled';

/** The lent lease's fate from a failed attempt's error: refused for good, refused for a gone lease, or unknown. */
export function leaseOutcomeOf(error: unknown): LeaseOutcome {
  if (!(error instanceof AppendRefusedError)) return 'unsettled';
  return error.leaseGone ? 'lease-gone' : 'settled';
}

/** One batch of a bundle append, with the writer lease its node lent for it. */
export interface BundlePart {
  readonly value: Uint8Array;
  readonly lease: LentLease;
}

/** Where a batch sits in the log. */
export interface LogPosition {
  /** The batch's number: the log key's version (1 for the first batch). 0 = before any batch. */
  readonly version: number;
  /** The store revision at which the batch was appended. */
  readonly revision: number;
}

/** The log's last batch, and the store's revision when it was read. */
export interface LogHead extends LogPosition {
  /**
   * The store-wide revision at the read. When the log has had no batch since a follower's last
   * one, nothing it could miss lies before this: a follower whose watch position was compacted
   * away (another cluster's compaction on a shared etcd, or etcd's own) resumes from here.
   */
  readonly storeRevision: number;
}

/** One appended batch, as a follower receives it. */
export interface LogRecord extends LogPosition {
  readonly value: Uint8Array;
}

/** Why a watch ended: history before its position is gone, or the stream broke. */
export type WatchEnd = 'compacted' | 'broken';

export interface LogListener {
  /** Batches in log order. A repeat or a gap in `version` is the listener's to detect. */
  onRecords(records: readonly LogRecord[]): void;
  /** The watch is over and delivers nothing more; the listener starts another one. */
  onEnd(why: WatchEnd, detail: string): void;
}

export interface LogWatch {
  close(): void;
}

/** A snapshot as stored: the replica state right after applying the batch at `position`. */
export interface StoredSnapshot {
  readonly position: LogPosition;
  readonly bytes: Uint8Array;
}

/**
 * A cluster member's registration, held by a lease that the store renews while we live. The lease
 * only cleans up: anyone who can reach etcd may keep any lease alive by its id (etcd checks no
 * permission on keep-alive), so the member's liveness is its heartbeat (`beat`), a write only its
 * holder can make, never the lease's existence.
 */
export interface MemberSession {
  /** Set once the store has dropped the registration (the lease expired or was revoked, or the name was taken over). */
  readonly lost: boolean;
  /** Called once if the registration is lost while we still hold it. */
  onLost(handler: (why: string) => void): void;
  /**
   * Rewrites the name key, if this registration still holds it: its mod revision (the member's
   * `beat`) moves. Rejects when the store did not confirm it; a name found taken over or gone
   * loses the session (onLost) and rejects.
   */
  beat(timeoutMs: number): Promise<void>;
  /** Gives the name up at once (orderly leave). */
  release(): Promise<void>;
}

/** The outcome of trying to take a node name. */
export type NameClaim = { readonly taken: true; readonly session: MemberSession } | { readonly taken: false; readonly holder: string };

/** A registered node name, as one read of the store saw it. */
export interface Member {
  readonly name: string;
  /**
   * The mod revision of its name key: moved by each heartbeat of its holder (MemberSession.beat)
   * and by nothing else a node does. Only a role that may write the cluster's keys can move it.
   */
  readonly beat: number;
  /** Its candidacy, when it stands for leader: the priority and registration revision of Candidate. */
  readonly candidate: Candidate | undefined;
}

export interface Candidate {
  readonly name: string;
  /** 1–15, smaller preferred. */
  readonly priority: number;
  /** Store revision at which the candidate registered; breaks ties (earlier first). */
  readonly since: number;
}

/** One retained batch: its value and the revision it was appended at (its version is the follower's to count). */
export interface RetainedBatch {
  readonly revision: number;
  readonly value: Uint8Array;
}

/** What `since` read, in one linearizable read: the log's head and the batches retained after a revision. */
export interface RetainedSince {
  readonly head: LogHead;
  /** In log order; every batch after the revision asked for, if the log still retains them all. */
  readonly batches: readonly RetainedBatch[];
}

/**
 * What the cluster needs of its store. Every call that goes to the store is bounded by
 * `timeoutMs` and rejects when that passes: an append that rejects may or may not have
 * committed (its batch id makes a second copy harmless).
 */
export interface ReplicatedLog {
  /**
   * Appends one batch; resolves with its position once a quorum committed it. Fenced: once the
   * call has rejected, its batch may still commit for at most `lateCommitMs` (it can sit in a cut
   * link's send queue and arrive when the link heals); after that the store refuses it. A node
   * closes the connections of a batch it gave up on only once that time has passed, so a client
   * that got no answer can rely on "not applied" from the moment its connection closed. A value
   * longer than MAX_APPEND_BYTES is refused. Rejects with AppendRefusedError only when the
   * batch can never commit from this call.
   */
  append(value: Uint8Array, timeoutMs: number): Promise<LogPosition>;
  /** See `append`: how long after a rejected append its batch can still commit (ms, finite). */
  readonly lateCommitMs: number;
  /**
   * Whether values of log `format` (LogCodec: bundles, references, OPS_FORMAT batches) may be
   * written now: every live node declares it reads them, and the record of formats written
   * names it (EtcdLog.peerView), so no node that cannot read them joins later.
   */
  mayWrite(format: number): boolean;
  /**
   * `append` in two halves, for a batch another node appends (issue 20's sequencer): a writer lease for
   * one attempt, lent to whichever append carries the batch (`appendBundle`, here or on the
   * sequencer), then `leaseReturned` with how that attempt ended. Such an attempt keeps `append`'s
   * promises: once it rejected (the lender returned the lease 'unsettled'), its batch commits
   * within lateCommitMs or never, and `seal` stops it. AppendRefusedError when no lease could be
   * had (nothing was sent).
   */
  lendLease(timeoutMs: number): Promise<LentLease>;
  leaseReturned(lease: LentLease, outcome: LeaseOutcome): void;
  /**
   * Appends `parts` as one log value (a bundle when more than one), each fenced by its lent writer lease:
   * refused whole (AppendRefusedError, leaseGone) if any of them no longer holds when it is applied.
   */
  appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition>;
  /**
   * Seals this client's appends: once it resolves, no append attempt of it that rejected before
   * the call can commit any more, whenever its request reaches the store (any that committed did
   * so before). Rejects if the store did not confirm that within `timeoutMs`. The time fence
   * (`lateCommitMs`) is kept by the store while it keeps its leader: a new etcd leader gives
   * every lease its full TTL again (lessor.Promote), and then the fence holds only because the
   * live clients revoke each other's overdue fences (EtcdLog's WriterLeaseJanitor), if one of
   * them reaches the new leader before the request does. A seal holds across leader changes.
   */
  seal(timeoutMs: number): Promise<void>;
  /** The last committed batch, read linearizably (a quorum confirms it): the read barrier. */
  head(timeoutMs: number): Promise<LogHead>;
  /**
   * Every batch appended after `revision`, with the log's head, in one linearizable read. The log
   * key's history can be compacted away by anyone sharing the store (another cluster's leader,
   * etcd's own auto-compaction), so each batch is also retained under a key of its own, which no
   * compaction removes, until a snapshot at or past it was saved (`saveSnapshot` drops the ones it
   * covers). A follower whose watch position was compacted away loads the newest snapshot, then
   * catches up with this one read. Batches appended before retention existed are not retained: the
   * follower sees fewer batches than the head says and waits for a snapshot.
   */
  since(revision: number, timeoutMs: number): Promise<RetainedSince>;
  /** Delivers every batch from `fromRevision` on, in order, until closed or ended. */
  watch(fromRevision: number, listener: LogListener): LogWatch;
  /** The newest complete snapshot, or undefined when none was ever written (`timeoutMs` bounds each call). */
  loadSnapshot(timeoutMs: number): Promise<StoredSnapshot | undefined>;
  /**
   * Stores a snapshot (in chunks), then points to it, then drops older ones. False when the pointer
   * was not moved to it (another saver's is as new or newer, or the swaps ran out): nothing of it is kept.
   */
  saveSnapshot(snapshot: StoredSnapshot, timeoutMs: number): Promise<boolean>;
  /** Drops history before `revision` (a watch positioned earlier then ends as 'compacted'). */
  compact(revision: number, timeoutMs: number): Promise<void>;
  /**
   * Takes `name` for this node, held by a lease of `leaseSeconds`, and registers it as a leader
   * candidate when `priority` is set. Someone else's registration of the name is not taken, unless
   * `silentBeat` is given and the name key's beat (mod revision) is still that one: the caller
   * proved its holder silent (NodeLiveness), and the name, with its candidacy and declarations, moves
   * to the new lease in one transaction (the old lease is then revoked, if it can be).
   * NodeTooOldError (and no name) when the log holds values of a format this version does not read.
   */
  claimName(name: string, priority: number | undefined, leaseSeconds: number, timeoutMs: number, silentBeat?: number): Promise<NameClaim>;
  /** Every live candidate. */
  candidates(timeoutMs: number): Promise<Candidate[]>;
  /**
   * Each member's backend size, the part in use and its NOSPACE alarm, as each says itself (a
   * member that did not answer in time is left out), and how many were asked. Absent where the
   * store has no quota.
   */
  space?(timeoutMs: number): Promise<{ readonly asked: number; readonly members: readonly MemberSpace[] }>;
  /** Defragments one member (by its endpoint `url`), which serves nothing until it is done. */
  defragment?(url: string, timeoutMs: number): Promise<void>;
  /** Every registered name with its heartbeat and candidacy, in one linearizable read. */
  members(timeoutMs: number): Promise<Member[]>;
  /** Ends every stream and call of this client. */
  close(): Promise<void>;
}

/** One store member's space (see ReplicatedLog.space). */
export interface MemberSpace {
  readonly url: string;
  /** What the store compares with its quota; falls only by a defragmentation. */
  readonly dbBytes: number;
  /** The part of dbBytes in use; the rest is free pages later writes reuse. */
  readonly dbBytesInUse: number;
  readonly noSpace: boolean;
}

/** The live candidate that leads: smallest priority, then the earliest to register. */
export function electLeader(candidates: readonly Candidate[]): Candidate | undefined {
  let best: Candidate | undefined;
  for (const c of candidates) {
    if (best === undefined || c.priority < best.priority || (c.priority === best.priority && c.since < best.since)) {
      best = c;
    }
  }
  return best;
}
