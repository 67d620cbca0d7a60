import type { Clock } from '../../src/runtime/Clock.js';
import type { Random } from '../../src/runtime/Random.js';
import type {
  Candidate,
  LogHead,
  LogListener,
  LogPosition,
  LogRecord,
  LogWatch,
  Member,
  MemberSession,
  NameClaim,
  ReplicatedLog,
  RetainedSince,
  StoredSnapshot,
  WatchEnd,
} from '../../src/cluster/ReplicatedLog.js';
import { AppendRefusedError, appendRequestBytes, STORE_MAX_REQUEST_BYTES } from '../../src/cluster/ReplicatedLog.js';
import { BatchEncoder, encodeBundle, LogOp, type LogCommand } from '../../src/cluster/LogCodec.js';
import { appendPuts } from '../../src/cluster/etcd/appendTransaction.js';
import type { BundlePart, LeaseOutcome, LentLease } from '../../src/cluster/ReplicatedLog.js';
import type { Timers } from '../../src/runtime/Timers.js';

/**
 * ReplicatedLog in memory, with etcd's semantics and faults, for the seeded simulation of several
 * cluster nodes in one process (how the cluster uses etcd: src/cluster/README.md).
 *
 * `MemoryStore` is the whole etcd cluster: one store revision raised by every write, keys with
 * version / create_revision / mod_revision, the log key's history (kept until compacted), leases
 * that expire on the injected clock unless kept alive, snapshot chunks and their pointer.
 * `MemoryLog` is one node's client of it. Every call travels: it reaches the store after a
 * latency, is executed there at once (the store is one atomic step, as a Raft commit is), and its
 * answer travels back after another latency. Everything asynchronous goes through the injected
 * Timers and every latency or fault is drawn from the injected Random, in an order fixed by the
 * program: the same seed replays the same run (compare `store.trace`).
 *
 * Faults (all off by default):
 * - `members` (option), `isolateMember(m, on)`, `changeLeader(ms)`: a client talks to one member
 *   (its watch stream to the member it had when its first watch opened). A member cut off from
 *   the majority is open but silent: its clients' calls hang until their deadline and their
 *   streams deliver nothing; after a deadline a client may move to another member. A leader
 *   change fails every call in flight ('leader changed', an append may have committed) or loses
 *   its answer (it hangs); nobody leads until an election ends.
 * - `lateCommitMs` (option) is the fence of ReplicatedLog.lateCommitMs: a request of an append
 *   whose call has rejected (deadline, crash, leader change) still executes if it reaches the
 *   leader within lateCommitMs of that rejection, never later (0: never). `faults.appendLate`
 *   holds appends before Raft for up to 1.2 × lateCommitMs + 2 s, so late landings are common and
 *   some are fenced.
 * - `fsync`: every write waits for the leader's disk, one after the other; a slow one (up to
 *   `fsync.slowMs`) delays every write behind it.
 * - `client.stallStream(ms)`: every watch of the client (the etcd3 client multiplexes them on one
 *   stream) stays open and silent, new ones too, for `ms`.
 * - `compactByOthers()`: another cluster sharing the etcd compacts at the current revision.
 * - A client's answers, watch deliveries, deadlines and keep-alives run on its own `timers` (the
 *   node process's event loop): a paused process reads them when it resumes.
 * - `setQuorum(false)`: calls reach no leader; they neither succeed nor fail until their timeout,
 *   then reject ('timeout'); one still waiting when quorum returns is executed then (an append:
 *   only within the fence). Watches
 *   deliver nothing. Leases are not renewed and do not expire either: nobody leads to expire them.
 *   When quorum returns every lease gets its full TTL afresh, as etcd's new leader does
 *   (lessor.Promote), so a live client's keep-alives catch up.
 * - `client.setPartitioned(true)`: the same, for one client only, while the rest of the cluster
 *   carries on: its leases do expire (it cannot keep them alive), and it notices that itself once
 *   a TTL has passed without an answer to a keep-alive (its session is lost).
 * - `seal()` (ReplicatedLog.seal) is a write like the others; executed at the store, it stops every
 *   append of its client that had rejected, for good.
 * - `faults.newLeaderRenewsFences`: per new leader, every append that may still land may land for
 *   a whole fence from then (etcd's lessor.Promote renews every lease, the writer leases too); only
 *   a seal stops it, or with `overdueRevokes` a live client's revoke.
 * - `overdueRevokes` (EtcdLog's WriterLeaseJanitor; off by default): after a renewal every live
 *   client looks, on its own timers every JANITOR_SWEEP_MS, for appends whose renewed fence outlasts
 *   the original one; from 3/4 of the original fence after the rejection (the real janitor acts
 *   before its node's fence passes), one that reaches a leader revokes them with a write, which
 *   stops them for good once executed. A paused, cut-off or closed client does not. Every append
 *   and head call of a client first revokes, in the same way, every rejected append past that point
 *   (renewed or not), as EtcdLog's untilOverdueGone does. Optimistic beside the real janitor: every
 *   client knows every lease at once (no watch to lag or stall), and its due time leaves a quarter
 *   of the fence where the real one may leave only about 0.4 s. `answersIssuedUpTo` tells when the
 *   latest append or head call that executed was issued (the simulation's landing check).
 * - `faults.appendUnknownOutcome`: an append commits, but its caller gets an error (the reply was
 *   lost): etcd3 trap 3's situation; the batch id must make a second copy harmless.
 * - `faults.appendRejected`: an append is refused and does not commit.
 * - `faults.refuseWithoutLeader`: per request that reaches a member knowing of no leader (an
 *   election, or quorum lost) while the member itself is not cut off: it is refused at once
 *   ("no leader", etcd's require-leader check) instead of waiting; never executed. An append is
 *   refused with AppendRefusedError, as EtcdLog refuses it: the Committer keeps no fence for it.
 * - `faults.watchBreak`: per delivery, the watch ends 'broken' instead of delivering.
 * - `faults.watchSilentGap`: per delivery, the first record is skipped silently (etcd3 trap 1);
 *   only the listener's version check can notice.
 * - `faults.watchRepeat`: per delivery, the last record already delivered is delivered again.
 * - `faults.watchStall`: per delivery, the watch stays open but delivers nothing more, ever (a
 *   stream stuck without an error); only the listener's own watchdog can notice.
 * - `latencyMs`, `client.extraDelayMs`: delays, per hop.
 * - `readerKeepsLeasesAlive`: a client that may only read keeps every lease alive (etcd checks no
 *   permission on LeaseKeepAlive and every read shows a key's lease id): no lease expires while
 *   it is set, a crashed node's name lease included. Only a revoke ends one.
 * - `client.crash()` (= close): every pending call rejects ('closed'), its watches stop silently,
 *   its leases are no longer kept alive and expire after their TTL. A request already on its way
 *   still reaches the store and may commit, as a put sent just before a crash does.
 * Watches end 'compacted' when a record they still have to deliver was compacted away, and at once
 * when created at a revision below the compacted one (etcd cancels such a watcher). etcd spares a
 * caught-up watcher whose events are already queued in its stream; ours ends in that case too,
 * which only exercises the listener's reload path more.
 */

/** Why a store call failed. Cluster code must not rely on the kind: EtcdLog has other errors. */
export type MemoryLogErrorKind =
  'timeout' | 'unknown-outcome' | 'rejected' | 'no-leader' | 'closed' | 'compacted' | 'future-revision' | 'too-large' | 'no-space' | 'busy';

export class MemoryLogError extends Error {
  override name = 'MemoryLogError';

  constructor(
    readonly kind: MemoryLogErrorKind,
    message: string,
  ) {
    super(message);
  }
}

/** Probabilities (0–1) of the faults the simulation can switch on; see the file comment. */
export interface MemoryFaults {
  appendUnknownOutcome: number;
  appendRejected: number;
  watchBreak: number;
  watchSilentGap: number;
  watchRepeat: number;
  watchStall: number;
  /**
   * Per append: its request is held before Raft (a cut link's send queue) and lands late, often
   * after its caller gave up, at most lateCommitMs after (later landings are refused: the fence).
   */
  appendLate: number;
  /** Per request reaching a member that knows of no leader: refused at once ("no leader"), never executed. */
  refuseWithoutLeader: number;
  /** Per new leader: it renews the fence of every append that may still land, as etcd renews leases. */
  newLeaderRenewsFences: number;
}

export interface MemoryStoreOptions {
  readonly timers: Timers;
  /** Must show the same time as `timers` (a VirtualTimers is both). Leases are measured on it. */
  readonly clock: Clock;
  readonly random: Random;
  /** One hop's latency, drawn uniformly from [min, max] ms. Default [0.5, 3]. */
  readonly latencyMs?: readonly [number, number];
  /** etcd's --max-request-bytes: a bigger append or chunk is refused ('too-large'). */
  readonly maxRequestBytes?: number;
  /** etcd's backend quota: puts are refused ('no-space') while values held would exceed it. */
  readonly quotaBytes?: number;
  /** Snapshot chunk size (a put each). */
  readonly snapshotChunkBytes?: number;
  /** Most records in one onRecords call. */
  readonly maxRecordsPerDelivery?: number;
  /** Calls in flight per client; more reject at once ('busy'). */
  readonly maxPendingCalls?: number;
  /** Watches open per client; more is a listener leak (watch() throws). */
  readonly maxWatches?: number;
  /** Leases alive in the store; more claims are refused ('no-space'). */
  readonly maxLeases?: number;
  /** Trace lines kept (the oldest half goes when full). */
  readonly traceLimit?: number;
  /** Bound of MemberSession.release(), which takes no timeout of its own. */
  readonly releaseTimeoutMs?: number;
  /**
   * ReplicatedLog.lateCommitMs: an append whose call rejected may still commit this long after,
   * never later (the fence). Default 0: a given-up append never commits.
   */
  readonly lateCommitMs?: number;
  /** etcd members (1 by default). A client talks to one; see `isolateMember` and `changeLeader`. */
  readonly members?: number;
}

/**
 * How long the leader's disk takes to make one write durable (fsync), drawn per write: usually in
 * [min, max] ms, but with probability `slowChance` anywhere up to `slowMs` (a disk stall). Writes
 * are made durable one after the other, so a slow one delays every write behind it.
 */
export interface FsyncProfile {
  min: number;
  max: number;
  slowChance: number;
  slowMs: number;
}

/** The key holding the log: each append is one put of it. */
export const LOG_KEY = 'log';
const NAME_PREFIX = 'names/';
const CANDIDATE_PREFIX = 'candidates/';
const SNAPSHOT_POINTER = 'snap/pointer';
/** Chunk keys: `snap/chunk/<version>/<save id>/<index>`. */
const CHUNK_PREFIX = 'snap/chunk/';
/** How often a client looks for overdue appends (MemoryStore.overdueRevokes); as WriterLeaseJanitor. */
const JANITOR_SWEEP_MS = 100;
/** Deadline of one overdue revoke. */
const JANITOR_REVOKE_MS = 2_000;

export interface KeyInfo {
  readonly key: string;
  readonly value: Uint8Array;
  /** Puts since the key was created (1 for the first). */
  readonly version: number;
  readonly createRevision: number;
  readonly modRevision: number;
  /** The lease holding the key, 0 for none. */
  readonly lease: number;
}

interface Lease {
  readonly id: number;
  readonly ttlMs: number;
  expiresAt: number;
  readonly keys: Set<string>;
  cancelCheck: (() => void) | undefined;
}

interface SnapshotPointer {
  readonly version: number;
  readonly revision: number;
  readonly id: string;
  readonly chunks: number;
}

/** A call of a client, from its start to its answer or its timeout. */
interface PendingCall {
  settled: boolean;
  /** When the call rejected (store time): a write may still land until this plus lateCommitMs. */
  failedAt: number | undefined;
  /** Fenced by lateCommitMs (appends); other calls are not held back and need no fence. */
  readonly fenced: boolean;
  /** A leader change lost the answer: the call hangs until its deadline. */
  lost: boolean;
  fail(error: Error): void;
  /** The member refused the request unexecuted ("no leader"): the answer to send back. */
  refusal(): Error;
  /** A seal of its client executed after the call rejected: the request never executes now. */
  sealed: boolean;
  /** A new leader renewed the call's fence (faults.newLeaderRenewsFences): it may land until then too. */
  renewedUntil: number;
  /**
   * A bundle append (appendBundle): fenced by these, the lent fences of its parts (each a pending
   * call of the client that lent it, as a writer lease is its node's), not by its own failure.
   */
  readonly parts?: readonly PendingCall[];
}

/** A fence lent for one append attempt (MemoryLog.lendLease): the pending call that models it, and its client. */
interface LentToken {
  readonly token: PendingCall;
  readonly client: MemoryLog;
  /** When (store clock) it was lent: its append attempt started then. */
  readonly lentAt: number;
}

/** A request that reached no leader; sent again when quorum (or the client's link) returns. */
interface Parked {
  readonly client: MemoryLog;
  readonly call: PendingCall;
  readonly arrive: () => void;
}

type Mutation = { readonly key: string; readonly value: Uint8Array; readonly lease?: number } | { readonly key: string; readonly delete: true };

export class MemoryStore {
  readonly timers: Timers;
  readonly clock: Clock;
  readonly random: Random;
  latencyMs: readonly [number, number];
  readonly faults: MemoryFaults = {
    appendUnknownOutcome: 0,
    appendRejected: 0,
    watchBreak: 0,
    watchSilentGap: 0,
    watchRepeat: 0,
    watchStall: 0,
    appendLate: 0,
    refuseWithoutLeader: 0,
    newLeaderRenewsFences: 0,
  };
  /** Live clients revoke appends whose fence a new leader renewed, once overdue (see the file comment). */
  overdueRevokes = false;
  /**
   * The latest time (store clock) an append or head call was issued, of those executed so far: a
   * node answers clients from those two, so a batch landing after one issued after its give-up
   * could contradict what a client was told since (the simulation checks it).
   */
  answersIssuedUpTo = Number.NEGATIVE_INFINITY;
  /**
   * When set, each appended batch is stored inside a bundle (LogCodec), drawn with this source:
   * up to two batches of a proposer of its own before it and one after, each empty, a no-op (a
   * renewal of a lock nobody holds) or a grant and release of a lock of its own, and now and then
   * a copy of the batch itself after it. It stands in for a node that bundles other nodes' batches,
   * so the simulation runs the followers' reading of bundles: a node's own batch first, last or in
   * between, empty batches, a duplicate inside one value. etcd stores what it is given; this is the
   * writer's doing, not the store's.
   */
  bundleAppends: Random | undefined;
  private bundledSeq = 0;
  /** @internal Fences lent by clients (MemoryLog.lendLease), by the object handed out, and by lease id. */
  readonly lent = new WeakMap<LentLease, LentToken>();
  readonly lentByLease = new Map<string, LentToken>();
  private nextLentId = 1;
  /** @internal A fresh id for a lent fence (as etcd's lease ids). */
  lentId(): number {
    return this.nextLentId++;
  }
  private readonly bundleEncoder = new BatchEncoder();
  /** Told of every batch appended, as it commits (tests: a trace of what the log holds). */
  onAppend: ((record: LogRecord) => void) | undefined;
  /** See the file comment: a read-only client renews every lease, so none expires. */
  readerKeepsLeasesAlive = false;
  /** Slow fsync; all zero (instant) by default. */
  readonly fsync: FsyncProfile = { min: 0, max: 0, slowChance: 0, slowMs: 0 };
  readonly lateCommitMs: number;
  readonly memberCount: number;
  readonly maxRequestBytes: number;
  readonly quotaBytes: number;
  readonly snapshotChunkBytes: number;
  readonly maxRecordsPerDelivery: number;
  readonly maxPendingCalls: number;
  readonly maxWatches: number;
  readonly maxLeases: number;
  readonly releaseTimeoutMs: number;
  private readonly traceLimit: number;

  /** The store revision: 1 for an empty store, +1 per write (a txn is one write), as etcd counts. */
  private rev = 1;
  private compacted = 0;
  private quorum = true;
  /** The member leading, undefined during an election (or with no majority). */
  private leader: number | undefined = 0;
  /** Members cut off from the others (a minority: open, but silent). */
  private readonly isolated: boolean[];
  /** When the leader's disk is free for the next write. */
  private diskFreeAt = 0;
  /** Every client ever made, for the reachability bookkeeping (bounded by the clients made). */
  private readonly clients: MemoryLog[] = [];
  private readonly kv = new Map<string, KeyInfo>();
  /** The log key's puts since the compacted revision, in revision order. */
  private history: LogRecord[] = [];
  /**
   * Every batch also kept under a key of its own (as EtcdLog's append puts it), which no
   * compaction removes, until a snapshot that covers it is the one the pointer names.
   */
  private retained: LogRecord[] = [];
  /** Bytes of every value held (keys and history), against the quota. */
  private bytes = 0;
  private readonly leases = new Map<number, Lease>();
  private nextLeaseId = 1;
  private nextClientId = 1;
  /** @internal Every open watch of every client, in creation order. */
  readonly watches = new Set<MemoryWatch>();
  private parked: Parked[] = [];
  private readonly lines: string[] = [];

  constructor(options: MemoryStoreOptions) {
    this.timers = options.timers;
    this.clock = options.clock;
    this.random = options.random;
    this.latencyMs = options.latencyMs ?? [0.5, 3];
    this.maxRequestBytes = options.maxRequestBytes ?? STORE_MAX_REQUEST_BYTES;
    this.quotaBytes = options.quotaBytes ?? 64 * 1024 * 1024;
    this.snapshotChunkBytes = options.snapshotChunkBytes ?? 1024 * 1024;
    this.maxRecordsPerDelivery = options.maxRecordsPerDelivery ?? 64;
    this.maxPendingCalls = options.maxPendingCalls ?? 10_000;
    this.maxWatches = options.maxWatches ?? 64;
    this.maxLeases = options.maxLeases ?? 10_000;
    this.traceLimit = options.traceLimit ?? 10_000;
    this.releaseTimeoutMs = options.releaseTimeoutMs ?? 5_000;
    this.lateCommitMs = options.lateCommitMs ?? 0;
    if (!(this.lateCommitMs >= 0 && Number.isFinite(this.lateCommitMs))) throw new RangeError(`lateCommitMs ${this.lateCommitMs}`);
    this.memberCount = options.members ?? 1;
    this.isolated = new Array<boolean>(this.memberCount).fill(false);
  }

  /** A new client (one per simulated node process). `label` names it in traces and as a name's holder. */
  client(label: string, timers?: Timers): MemoryLog {
    if (this.clients.length >= 100_000) throw new RangeError('more than 100,000 clients made');
    const id = this.nextClientId++;
    const client = new MemoryLog(this, label, id, timers ?? this.timers, (id - 1) % this.memberCount);
    this.clients.push(client);
    this.noteReach();
    return client;
  }

  // ---- inspection, for tests ----

  get revision(): number {
    return this.rev;
  }

  get compactedRevision(): number {
    return this.compacted;
  }

  get hasQuorum(): boolean {
    return this.quorum;
  }

  /** Whether some member leads with a majority behind it: writes can commit. */
  get hasLeader(): boolean {
    return this.quorum && this.leader !== undefined;
  }

  /** The log's last batch (version 0 when empty). */
  get logHead(): LogPosition {
    const kv = this.kv.get(LOG_KEY);
    return { version: kv?.version ?? 0, revision: kv?.modRevision ?? 0 };
  }

  /** Log records still in history (not compacted), oldest first. */
  get logHistory(): readonly LogRecord[] {
    return this.history;
  }

  get liveLeases(): number {
    return this.leases.size;
  }

  /** Keys under `prefix`, sorted as etcd ranges them. */
  keys(prefix = ''): KeyInfo[] {
    return [...this.kv.values()].filter((k) => k.key.startsWith(prefix)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** What happened, one line per event, with the virtual time: equal traces mean equal runs. */
  get trace(): readonly string[] {
    return this.lines;
  }

  // ---- faults ----

  /** Loses (false) or restores (true) the quorum; see the file comment. */
  setQuorum(on: boolean): void {
    if (on === this.quorum) return;
    this.quorum = on;
    this.note(on ? 'quorum restored' : 'quorum lost');
    this.noteReach();
    if (on && this.leader !== undefined) this.newTerm();
  }

  /**
   * Cuts member `m` off from the others (true) or heals it (false). Its clients' calls and watch
   * streams stay open but silent; a leader cut off is replaced after an election (when a majority
   * is left), and nobody leads while a majority is cut off.
   */
  isolateMember(m: number, on: boolean): void {
    if (this.isolated[m] === on) return;
    this.isolated[m] = on;
    this.note(`member m${m} ${on ? 'isolated' : 'rejoins'}`);
    if (on && this.leader === m) this.loseLeader(false);
    else if (!on && this.leader === undefined) this.elect();
    else this.kick();
    this.noteReach();
  }

  /**
   * The leader steps down (or dies): every call in flight fails at once ('leader changed'; an
   * append among them may have committed) or loses its answer and hangs until its deadline; nobody
   * leads until an election among the members left ends, `electionMs` later.
   */
  changeLeader(electionMs: number): void {
    if (this.leader === undefined) return;
    this.loseLeader(true, electionMs);
  }

  private loseLeader(failCalls: boolean, electionMs = 150 + this.random() * 850): void {
    this.note(`leader m${this.leader ?? '-'} lost`);
    this.leader = undefined;
    this.noteReach();
    if (failCalls) {
      for (const client of this.clients) client.leaderChanged();
    }
    this.timers.after(electionMs, () => this.elect());
  }

  /** The members still in touch with a majority elect one of them. */
  private elect(): void {
    if (this.leader !== undefined) return;
    const candidates = this.isolated.flatMap((cut, m) => (cut ? [] : [m]));
    if (candidates.length * 2 <= this.memberCount) return; // isolateMember(…, false) elects later
    this.leader = candidates[Math.floor(this.random() * candidates.length)]!;
    this.note(`member m${this.leader} leads`);
    this.noteReach();
    if (this.quorum) this.newTerm();
  }

  /** A new leader: every lease gets its full TTL afresh (lessor.Promote); waiting requests go on. */
  private newTerm(): void {
    const now = this.clock.now();
    for (const lease of this.leases.values()) {
      lease.expiresAt = now + lease.ttlMs;
      this.armLease(lease);
    }
    // The writer leases that fence appends are renewed too: every append that may still land
    // may now land until a whole fence from here.
    if (this.chance(this.faults.newLeaderRenewsFences)) {
      this.note('the new leader renews every fence');
      for (const client of this.clients) client.renewFences(now + this.lateCommitMs);
      if (this.overdueRevokes) for (const client of this.clients) client.armJanitor();
    }
    this.kick();
  }

  /** @internal Updates every client's `cutSince` after reachability may have changed. */
  noteReach(): void {
    const now = this.clock.now();
    for (const client of this.clients) {
      if (client.closed) continue;
      const reach = this.reachable(client);
      if (reach) client.cutSince = undefined;
      else client.cutSince ??= now;
    }
  }

  /**
   * Compacts the whole store at its current revision, as another cluster sharing the etcd (or
   * etcd's auto-compaction) does: this cluster's watches positioned before it end 'compacted'.
   */
  compactByOthers(): void {
    if (this.rev <= this.compacted) return;
    this.compactTo(this.rev);
    this.note(`someone else compacts to r${this.rev}`);
  }

  // ---- the machinery the clients use (@internal) ----

  /** @internal */
  note(line: string): void {
    if (this.lines.length >= this.traceLimit) this.lines.splice(0, this.lines.length >> 1);
    this.lines.push(`${this.clock.now().toFixed(3)} ${line}`);
  }

  /** @internal A draw that happens only when the fault is on, so a fault left off changes no run. */
  chance(probability: number): boolean {
    return probability > 0 && this.random() < probability;
  }

  /** @internal One hop's delay for `client`. */
  latency(client: MemoryLog): number {
    const [min, max] = this.latencyMs;
    return min + this.random() * (max - min) + client.extraDelayMs;
  }

  /** @internal Whether `client` (through member `member`, its calls' by default) reaches a leader now. */
  reachable(client: MemoryLog, member = client.member): boolean {
    return this.quorum && this.leader !== undefined && !this.isolated[member] && !client.partitioned;
  }

  /**
   * @internal Whether a request may still execute: its call is open, or it gave up at most
   * lateCommitMs ago (or before a fence a new leader renewed), and no seal stopped it.
   */
  unfenced(call: PendingCall): boolean {
    // A bundle lands only while every part's fence holds (etcd refuses the whole txn otherwise).
    if (call.parts !== undefined) return call.parts.every((t) => this.unfenced(t));
    if (call.sealed) return false;
    if (call.failedAt === undefined) return !call.settled;
    return call.fenced && this.clock.now() <= Math.max(call.failedAt + this.lateCommitMs, call.renewedUntil);
  }

  /** @internal An append or head call issued at `issuedAt` executed (see answersIssuedUpTo). */
  answerIssued(issuedAt: number): void {
    if (issuedAt > this.answersIssuedUpTo) this.answersIssuedUpTo = issuedAt;
  }

  /**
   * @internal The rejected appends that may still land, renewed past their own fence by a new
   * leader (or, with `renewedOnly` false, any): those due for a revoke at `now` (see
   * `overdueRevokes`), and whether any falls due later.
   */
  overdueAppends(now: number, renewedOnly = true): { due: PendingCall[]; later: boolean } {
    const due: PendingCall[] = [];
    let later = false;
    for (const client of this.clients) {
      for (const call of client.unexecutedAppends()) {
        if (call.failedAt === undefined || !this.unfenced(call)) continue;
        if (renewedOnly && call.renewedUntil <= call.failedAt + this.lateCommitMs) continue;
        if (now >= call.failedAt + (this.lateCommitMs * 3) / 4) due.push(call);
        else later = true;
      }
    }
    return { due, later };
  }

  /**
   * @internal A request of `client` travels to the store; `arrive` executes it there. One that finds
   * no leader waits (parked) until one is reachable again, or until its caller gave up (a fenced
   * write: until the fence passed). A write (`durable`) then waits for the leader's disk; an append
   * may be held before Raft (faults.appendLate) and land late, within the fence.
   */
  send(client: MemoryLog, call: PendingCall, arrive: () => void, durable = false): void {
    let delay = this.latency(client);
    if (call.fenced && this.chance(this.faults.appendLate)) {
      // Held in a send queue: often past the caller's deadline, sometimes past the fence.
      delay += this.random() * (this.lateCommitMs * 1.2 + 2_000);
    }
    this.timers.after(delay, () => this.arrive(client, call, durable ? () => this.fsyncThen(call, arrive) : arrive));
  }

  private arrive(client: MemoryLog, call: PendingCall, arrive: () => void): void {
    if (call.parts !== undefined && !this.unfenced(call)) {
      // etcd checks a bundle's leases as it applies it: a gone one refuses the whole, with an answer.
      this.note(`${client.label} bundle refused: a part's fence is gone`);
      this.reply(client, () => {
        if (!call.lost) call.fail(new AppendRefusedError('append refused: etcdserver: requested lease not found (simulated)', true));
      });
      return;
    }
    if (!this.unfenced(call)) {
      if (call.fenced && call.failedAt !== undefined)
        this.note(`${client.label} append fenced (gave up ${(this.clock.now() - call.failedAt).toFixed(0)} ms ago)`);
      return;
    }
    if (this.reachable(client)) arrive();
    else if (this.knowsNoLeader(client) && this.chance(this.faults.refuseWithoutLeader)) {
      this.note(`${client.label} request refused: no leader`);
      const refusal = call.refusal();
      this.reply(client, () => {
        if (!call.lost) call.fail(refusal);
      });
    } else if (this.parked.length < 100_000) this.parked.push({ client, call, arrive });
  }

  /** Whether `client`'s member is in touch with the others but knows of no leader (elections, quorum lost). */
  private knowsNoLeader(client: MemoryLog): boolean {
    return !client.partitioned && !this.isolated[client.member] && (this.leader === undefined || !this.quorum);
  }

  /** The write waits for the disk, in order behind the writes before it, then commits if still allowed. */
  private fsyncThen(call: PendingCall, commit: () => void): void {
    const f = this.fsync;
    if (f.max <= 0 && f.slowChance <= 0) {
      commit();
      return;
    }
    const now = this.clock.now();
    const took = this.chance(f.slowChance) ? this.random() * f.slowMs : f.min + this.random() * (f.max - f.min);
    this.diskFreeAt = Math.max(now, this.diskFreeAt) + took;
    this.timers.after(this.diskFreeAt - now, () => {
      // A leader lost meanwhile loses the proposal (the caller may retry); the fence still holds.
      if (this.leader !== undefined && this.quorum && this.unfenced(call)) commit();
    });
  }

  /** @internal An answer travels back; a client cut off meanwhile never gets it (its call times out). */
  reply(client: MemoryLog, deliver: () => void): void {
    this.timers.after(this.latency(client), () => {
      if (!client.partitioned) client.timers.after(0, deliver);
    });
  }

  /** @internal Resends parked requests and resumes watches, after quorum or a client's link returned. */
  kick(): void {
    const parked = this.parked;
    this.parked = [];
    for (const p of parked) {
      if (!this.unfenced(p.call)) continue;
      if (this.reachable(p.client)) this.timers.after(this.latency(p.client), () => this.arrive(p.client, p.call, p.arrive));
      else this.parked.push(p);
    }
    for (const w of this.watches) this.schedulePump(w);
  }

  /**
   * Applies mutations as one write (one etcd txn): one new revision shared by all of them, or none
   * when nothing changes (deleting absent keys). Returns the revision of the write.
   */
  private write(mutations: readonly Mutation[]): number {
    let grow = 0;
    for (const m of mutations) {
      if (!('value' in m)) continue;
      grow += m.value.length - (this.kv.get(m.key)?.value.length ?? 0);
      if (m.key === LOG_KEY) grow += m.value.length; // its history keeps a copy too
    }
    if (grow > 0 && this.bytes + grow > this.quotaBytes) {
      throw new MemoryLogError('no-space', `etcdserver: mvcc: database space exceeded (${this.bytes} + ${grow} > ${this.quotaBytes})`);
    }
    if (!mutations.some((m) => 'value' in m || this.kv.has(m.key))) return this.rev;
    const revision = ++this.rev;
    let logWritten = false;
    for (const m of mutations) {
      const old = this.kv.get(m.key);
      if (old !== undefined) {
        this.bytes -= old.value.length;
        if (old.lease !== 0) this.leases.get(old.lease)?.keys.delete(m.key);
      }
      if (!('value' in m)) {
        this.kv.delete(m.key);
        continue;
      }
      const lease = m.lease ?? 0;
      const info: KeyInfo = {
        key: m.key,
        value: m.value,
        version: (old?.version ?? 0) + 1,
        createRevision: old?.createRevision ?? revision,
        modRevision: revision,
        lease,
      };
      this.kv.set(m.key, info);
      this.bytes += m.value.length;
      if (lease !== 0) this.leases.get(lease)!.keys.add(m.key);
      if (m.key === LOG_KEY) {
        this.history.push({ version: info.version, revision, value: m.value });
        this.bytes += m.value.length;
        logWritten = true;
      }
    }
    for (const w of this.watches) {
      if (!this.caughtUp(w)) {
        if (logWritten) this.schedulePump(w);
      } else if (w.cursor <= revision) {
        // A watch with nothing left to deliver follows the store revision, as etcd's synced
        // watchers do: a compaction it has nothing to lose to does not end it.
        w.cursor = revision + 1;
      }
    }
    return revision;
  }

  /** @internal The put of one batch. */
  appendLog(value: Uint8Array): LogPosition {
    // The request carries the batch twice (the log key and the retained copy), as EtcdLog's does.
    if (this.bundleAppends !== undefined) value = this.bundle(value, this.bundleAppends);
    if (appendRequestBytes(value.length) > this.maxRequestBytes) {
      throw new MemoryLogError('too-large', `etcdserver: request is too large (${appendRequestBytes(value.length)} bytes)`);
    }
    const revision = this.write([{ key: LOG_KEY, value: new Uint8Array(value) }]);
    const position = { version: this.kv.get(LOG_KEY)!.version, revision };
    this.retained.push({ ...position, value: new Uint8Array(value) });
    this.onAppend?.({ ...position, value });
    return position;
  }

  private bundle(value: Uint8Array, random: Random): Uint8Array {
    const extra = (): Buffer => {
      const seq = ++this.bundledSeq;
      const pick = random();
      const commands: LogCommand[] = [];
      if (pick < 0.3) commands.push({ op: LogOp.Renew, key: '\u0000bundled', index: '', owner: '' });
      else if (pick < 0.7) {
        const key = `\u0000bundled ${seq}`;
        commands.push(
          { op: LogOp.Request, key, index: '', owner: 'bundler', ttl: 0, ttw: 0, priority: 0, allowCreate: true, maxEntries: 2 ** 32 - 1 },
          { op: LogOp.Release, key, index: '', owner: 'bundler' },
        );
      }
      return this.bundleEncoder.encode({ proposer: 'bundler', incarnation: 1, seq, commands });
    };
    const parts: Uint8Array[] = [];
    for (let n = Math.floor(random() * 3); n > 0; n--) parts.push(extra());
    parts.push(value);
    if (random() < 0.1) parts.push(value);
    if (random() < 0.5) parts.push(extra());
    return encodeBundle(parts);
  }

  /** @internal The log's head and the retained batches appended after `revision`, read at once. */
  retainedSince(revision: number): RetainedSince {
    return { head: this.head(), batches: this.retained.filter((r) => r.revision > revision).map((r) => ({ revision: r.revision, value: r.value })) };
  }

  /** @internal Drops the retained batches appended at or before `revision` (a snapshot covering them is pointed to). */
  dropRetained(revision: number): void {
    this.retained = this.retained.filter((r) => r.revision > revision);
  }

  /** @internal */
  compactTo(revision: number): void {
    if (!Number.isInteger(revision) || revision > this.rev) {
      throw new MemoryLogError('future-revision', `mvcc: required revision ${revision} is a future revision`);
    }
    if (revision <= this.compacted) {
      throw new MemoryLogError('compacted', `mvcc: required revision ${revision} has been compacted (at ${this.compacted})`);
    }
    this.compacted = revision;
    const keep = this.firstAtOrAfter(revision);
    for (let i = 0; i < keep; i++) this.bytes -= this.history[i]!.value.length;
    this.history = this.history.slice(keep);
    for (const w of this.watches) if (w.cursor < revision) this.schedulePump(w);
  }

  /** Index in history of the first record at or after `revision`. */
  private firstAtOrAfter(revision: number): number {
    let lo = 0;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.history[mid]!.revision < revision) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private caughtUp(w: MemoryWatch): boolean {
    return (this.kv.get(LOG_KEY)?.modRevision ?? 0) < w.cursor;
  }

  /** @internal A new watch is positioned: before the compacted revision it will end at once. */
  openWatch(w: MemoryWatch): void {
    if (w.cursor >= this.compacted && this.caughtUp(w)) w.cursor = Math.max(w.cursor, this.rev + 1);
    this.watches.add(w);
    this.schedulePump(w);
  }

  /** @internal */
  closeWatch(w: MemoryWatch): void {
    this.watches.delete(w);
  }

  private schedulePump(w: MemoryWatch): void {
    if (w.scheduled || w.ended) return;
    w.scheduled = true;
    this.timers.after(this.latency(w.client), () => this.pump(w));
  }

  /** One delivery to a watch: the next few records, or its end. */
  private pump(w: MemoryWatch): void {
    w.scheduled = false;
    if (w.ended || !this.reachable(w.client, w.client.streamMember)) return; // kick() resumes it
    if (w.client.streamStalled) return; // the client's whole stream is stuck: resumeStream() pumps again
    if (w.cursor < this.compacted) {
      this.endWatch(w, 'compacted', `etcdserver: mvcc: required revision ${w.cursor} has been compacted (at ${this.compacted})`);
      return;
    }
    const from = this.firstAtOrAfter(w.cursor);
    const available = Math.min(this.history.length - from, this.maxRecordsPerDelivery);
    if (available === 0) {
      w.cursor = Math.max(w.cursor, this.rev + 1);
      return;
    }
    if (this.chance(this.faults.watchBreak)) {
      this.endWatch(w, 'broken', 'stream reset (simulated)');
      return;
    }
    if (w.stalled || this.chance(this.faults.watchStall)) {
      if (!w.stalled) this.note(`watch ${w.client.label} stalls`);
      w.stalled = true;
      return;
    }
    const count = 1 + Math.floor(this.random() * available);
    const records = this.history.slice(from, from + count);
    let out: LogRecord[] = records;
    if (this.chance(this.faults.watchSilentGap)) {
      out = records.slice(1);
      this.note(`watch ${w.client.label} skips v${records[0]!.version} silently`);
    }
    if (w.last !== undefined && this.chance(this.faults.watchRepeat)) {
      out = [w.last, ...out];
      this.note(`watch ${w.client.label} repeats v${w.last.version}`);
    }
    const last = records[records.length - 1]!;
    w.last = last;
    w.cursor = last.revision + 1;
    if (this.caughtUp(w)) w.cursor = Math.max(w.cursor, this.rev + 1);
    else this.schedulePump(w);
    if (out.length === 0) return;
    this.note(`watch ${w.client.label} gets v${out[0]!.version}..v${out[out.length - 1]!.version}`);
    // Through the client's event loop (a paused process reads it when it resumes). A listener that
    // throws ends the simulation step: the error surfaces from the timers' step().
    w.client.timers.after(0, () => {
      if (!w.closed) w.listener.onRecords(out);
    });
  }

  private endWatch(w: MemoryWatch, why: WatchEnd, detail: string): void {
    w.ended = true;
    this.watches.delete(w);
    w.client.forgetWatch(w);
    this.note(`watch ${w.client.label} ends ${why}`);
    w.client.timers.after(0, () => {
      if (!w.closed) w.listener.onEnd(why, detail);
    });
  }

  /** @internal Linearizable read of the log key's version and mod revision. */
  head(): LogHead {
    return { ...this.logHead, storeRevision: this.revision };
  }

  /**
   * @internal The name claim: one txn, "if the name key is absent, put it (and the candidate key)
   * under a new lease"; with `silentBeat`, "if the name key's mod revision is still that one", which
   * moves the name and candidacy to the new lease (deleting a candidacy not claimed again) and then
   * revokes the holder's lease, as EtcdLog's takeover does.
   */
  claim(client: MemoryLog, name: string, priority: number | undefined, ttlMs: number, silentBeat?: number): { leaseId: number } | { holder: string } {
    const nameKey = NAME_PREFIX + name;
    const current = this.kv.get(nameKey);
    if (silentBeat === undefined ? current !== undefined : current?.modRevision !== silentBeat) {
      return { holder: current === undefined ? 'nobody' : Buffer.from(current.value).toString('latin1') };
    }
    if (this.leases.size >= this.maxLeases) throw new MemoryLogError('no-space', `more than ${this.maxLeases} leases`);
    const lease: Lease = { id: this.nextLeaseId++, ttlMs, expiresAt: this.clock.now() + ttlMs, keys: new Set(), cancelCheck: undefined };
    this.leases.set(lease.id, lease);
    const mutations: Mutation[] = [{ key: nameKey, value: Buffer.from(client.label, 'latin1'), lease: lease.id }];
    if (priority !== undefined) mutations.push({ key: CANDIDATE_PREFIX + name, value: Buffer.from(String(priority)), lease: lease.id });
    else if (current !== undefined && this.kv.has(CANDIDATE_PREFIX + name)) mutations.push({ key: CANDIDATE_PREFIX + name, delete: true });
    try {
      this.write(mutations);
    } catch (error) {
      this.leases.delete(lease.id);
      throw error;
    }
    this.armLease(lease);
    this.note(`${client.label} claims ${name} (lease ${lease.id})${current === undefined ? '' : ` from silent lease ${current.lease}`}`);
    if (current !== undefined && current.lease !== 0) this.revoke(current.lease, 'revoked by the takeover');
    return { leaseId: lease.id };
  }

  /** @internal A heartbeat: puts the name key again if `leaseId` still holds it; false when it does not. */
  beat(name: string, leaseId: number): boolean {
    const current = this.kv.get(NAME_PREFIX + name);
    if (current === undefined || current.lease !== leaseId) return false;
    this.write([{ key: NAME_PREFIX + name, value: current.value, lease: leaseId }]);
    return true;
  }

  /** @internal Every name key with its mod revision, and the candidacies, in one read. */
  members(): Member[] {
    const standing = new Map(this.candidates().map((c) => [c.name, c]));
    return this.keys(NAME_PREFIX).map((k) => {
      const name = k.key.slice(NAME_PREFIX.length);
      return { name, beat: k.modRevision, candidate: standing.get(name) };
    });
  }

  /** @internal A keep-alive; false when the lease is gone. */
  keepAlive(leaseId: number): boolean {
    const lease = this.leases.get(leaseId);
    if (lease === undefined) return false;
    lease.expiresAt = this.clock.now() + lease.ttlMs;
    return true;
  }

  /** @internal Revokes a lease and deletes its keys (one write). */
  revoke(leaseId: number, why: string): void {
    const lease = this.leases.get(leaseId);
    if (lease === undefined) return;
    lease.cancelCheck?.();
    this.leases.delete(leaseId);
    this.write([...lease.keys].map((key) => ({ key, delete: true as const })));
    this.note(`lease ${leaseId} ${why}`);
  }

  /** The leader's expiry check; with no quorum there is no leader, and setQuorum(true) re-arms it. */
  private armLease(lease: Lease): void {
    lease.cancelCheck?.();
    lease.cancelCheck = this.timers.after(lease.expiresAt - this.clock.now(), () => {
      lease.cancelCheck = undefined;
      if (!this.leases.has(lease.id) || !this.hasLeader) return;
      if (this.readerKeepsLeasesAlive) lease.expiresAt = Math.max(lease.expiresAt, this.clock.now() + lease.ttlMs / 3);
      if (this.clock.now() < lease.expiresAt) this.armLease(lease);
      else this.revoke(lease.id, 'expired');
    });
  }

  /** @internal The names held now. */
  liveNodes(): ReadonlySet<string> {
    return new Set(this.keys(NAME_PREFIX).map((k) => k.key.slice(NAME_PREFIX.length)));
  }

  /** @internal */
  candidates(): Candidate[] {
    return this.keys(CANDIDATE_PREFIX).map((k) => ({
      name: k.key.slice(CANDIDATE_PREFIX.length),
      priority: Number(Buffer.from(k.value).toString('latin1')),
      since: k.createRevision,
    }));
  }

  /** @internal */
  putChunk(version: number, saveId: string, index: number, bytes: Uint8Array): void {
    if (bytes.length > this.maxRequestBytes) throw new MemoryLogError('too-large', `etcdserver: request is too large (${bytes.length} bytes)`);
    this.write([{ key: `${CHUNK_PREFIX}${version}/${saveId}/${index}`, value: new Uint8Array(bytes) }]);
  }

  /** @internal The pointer and its mod revision (0 when absent), for the compare-and-swap. */
  pointerRead(): { readonly pointer: SnapshotPointer | undefined; readonly modRevision: number } {
    return { pointer: this.readPointer(), modRevision: this.kv.get(SNAPSHOT_POINTER)?.modRevision ?? 0 };
  }

  /**
   * @internal The pointer txn, as EtcdLog writes it: "if the pointer's mod revision is still the
   * one read, put the new pointer". Returns whether it moved. The saver checked it moves forward.
   */
  casPointer(pointer: SnapshotPointer, modRevision: number): boolean {
    if ((this.kv.get(SNAPSHOT_POINTER)?.modRevision ?? 0) !== modRevision) return false;
    this.write([{ key: SNAPSHOT_POINTER, value: Buffer.from(JSON.stringify(pointer)) }]);
    this.note(`snapshot v${pointer.version} saved (${pointer.chunks} chunks, save ${pointer.id})`);
    return true;
  }

  /** @internal Deletes the chunks of exactly one save (one ranged delete). */
  deleteSave(version: number, saveId: string): void {
    const prefix = `${CHUNK_PREFIX}${version}/${saveId}/`;
    this.write(this.keys(prefix).map((k) => ({ key: k.key, delete: true as const })));
  }

  /** @internal One consistent read of the pointer and its chunks. */
  readSnapshot(): StoredSnapshot | undefined {
    const pointer = this.readPointer();
    if (pointer === undefined) return undefined;
    const parts: Uint8Array[] = [];
    for (let i = 0; i < pointer.chunks; i++) {
      const chunk = this.kv.get(`${CHUNK_PREFIX}${pointer.version}/${pointer.id}/${i}`);
      // pointTo checked the chunks and dropOldChunks spares them: a hole is a bug of this file.
      if (chunk === undefined) throw new Error(`snapshot v${pointer.version} lost chunk ${i}`);
      parts.push(chunk.value);
    }
    return { position: { version: pointer.version, revision: pointer.revision }, bytes: new Uint8Array(Buffer.concat(parts)) };
  }

  private readPointer(): SnapshotPointer | undefined {
    const kv = this.kv.get(SNAPSHOT_POINTER);
    return kv === undefined ? undefined : (JSON.parse(Buffer.from(kv.value).toString()) as SnapshotPointer);
  }
}

/** @internal A watch of one client. */
class MemoryWatch implements LogWatch {
  /** The next revision to deliver from. */
  cursor: number;
  ended = false;
  scheduled = false;
  /** faults.watchStall: open, but delivering nothing more. */
  stalled = false;
  /** Closed by its client: nothing more reaches the listener. */
  closed = false;
  last: LogRecord | undefined;

  constructor(
    readonly client: MemoryLog,
    readonly listener: LogListener,
    fromRevision: number,
  ) {
    this.cursor = fromRevision;
  }

  close(): void {
    this.closed = true;
    if (this.ended) return;
    this.ended = true;
    this.client.store.closeWatch(this);
    this.client.forgetWatch(this);
  }
}

class MemorySession implements MemberSession {
  lost = false;
  private released = false;
  private readonly handlers: Array<(why: string) => void> = [];
  /** When the last answered keep-alive (or the claim) was sent: the store renewed at or after it. */
  renewedAt: number;
  private cancelTick: (() => void) | undefined;

  constructor(
    private readonly client: MemoryLog,
    readonly leaseId: number,
    private readonly ttlMs: number,
    sentAt: number,
    private readonly name: string,
  ) {
    this.renewedAt = sentAt;
    this.schedule();
  }

  onLost(handler: (why: string) => void): void {
    if (this.handlers.length >= 16) throw new RangeError('more than 16 onLost handlers');
    this.handlers.push(handler);
    if (this.lost && !this.released) this.client.timers.after(0, () => handler('lost before the handler was set'));
  }

  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    this.stop();
    this.lost = true;
    await this.client.call('release', this.client.store.releaseTimeoutMs, () => this.client.store.revoke(this.leaseId, 'revoked'));
  }

  /** See MemberSession.beat (EtcdLog's NameLease): the name key put again while this lease holds it. */
  async beat(timeoutMs: number): Promise<void> {
    if (this.lost) throw new MemoryLogError('rejected', `name lease ${this.leaseId} is no longer held`);
    const held = await this.client.call('heartbeat', timeoutMs, () => this.client.store.beat(this.name, this.leaseId), 'write');
    if (held) return;
    this.lose('the name key is gone or held by another lease (taken over)');
    throw new MemoryLogError('rejected', `heartbeat: name ${this.name} is not held by lease ${this.leaseId}`);
  }

  /** Keeps the lease alive: a keep-alive every third of the TTL, as etcd3's Lease does. */
  private schedule(): void {
    const store = this.client.store;
    this.cancelTick = this.client.timers.after(this.ttlMs / 3, () => {
      this.cancelTick = undefined;
      if (this.lost) return;
      const now = store.clock.now();
      if (now - this.renewedAt >= this.ttlMs) {
        this.lose(`no keep-alive answered for ${this.ttlMs} ms`);
        return;
      }
      if (!this.client.partitioned) {
        store.timers.after(store.latency(this.client), () => {
          if (!store.reachable(this.client)) return;
          const alive = store.keepAlive(this.leaseId);
          store.reply(this.client, () => {
            if (this.lost || this.client.closed) return;
            if (!alive) this.lose('lease expired');
            else this.renewedAt = Math.max(this.renewedAt, now);
          });
        });
      }
      this.schedule();
    });
  }

  stop(): void {
    this.cancelTick?.();
    this.cancelTick = undefined;
  }

  private lose(why: string): void {
    if (this.lost) return;
    this.lost = true;
    this.stop();
    this.client.forgetSession(this);
    this.client.store.note(`${this.client.label} lost lease ${this.leaseId}: ${why}`);
    for (const h of this.handlers) h(why);
  }
}

/** One node's client of a MemoryStore; see the file comment. */
export class MemoryLog implements ReplicatedLog {
  /** Extra delay (ms) on every hop of this client: a slow node or a slow link. */
  extraDelayMs = 0;
  /** Since when (store time) this client reaches no leader; undefined while it does. */
  cutSince: number | undefined;
  /**
   * The latest start (store time) of an append attempt of this client that reached a leader
   * through a sequencer (issue 20): a bundle carrying the fence lent for it executed. Its node
   * reached a leader after that start, whatever `cutSince` says of its own calls.
   */
  sequencedAttemptStartedAt = Number.NEGATIVE_INFINITY;
  /** The member its watch stream is attached to (chosen when its first watch opens). */
  streamMember: number;
  /** The whole watch stream is stuck (every watch, new ones too): see stallStream. */
  streamStalled = false;
  private cut = false;
  private isClosed = false;
  private readonly pending = new Set<PendingCall>();
  /** Appends whose request has not executed (yet): what a seal may have to stop. */
  private readonly unexecuted = new Set<PendingCall>();
  private readonly watches = new Set<MemoryWatch>();
  private readonly sessions = new Set<MemorySession>();
  private saves = 0;
  /** Every call this client sent to the store (appends, reads, snapshots, names), for tests that count traffic. */
  callsSent = 0;
  private janitorArmed = false;
  private revokingOverdue = false;

  constructor(
    readonly store: MemoryStore,
    readonly label: string,
    /** Unique per store: names this client's snapshot chunks. */
    readonly id: number,
    /** The client process's own event loop: its deadlines, keep-alives and the answers it reads. */
    readonly timers: Timers,
    /** The member its calls go to. */
    public member: number,
  ) {
    this.streamMember = member;
  }

  /** See ReplicatedLog.lateCommitMs: the store's fence. */
  get lateCommitMs(): number {
    return this.store.lateCommitMs;
  }

  /** Every format may be written: every node of the simulation runs this version. */
  mayWrite(): boolean {
    return true;
  }

  /**
   * Every watch of this client stalls for `ms` (the etcd3 client multiplexes them on one stream):
   * open, silent, and a watch opened meanwhile lands on the same stuck stream.
   */
  stallStream(ms: number): void {
    if (this.streamStalled) return;
    this.streamStalled = true;
    this.store.note(`${this.label} watch stream stalls for ${ms.toFixed(0)} ms`);
    this.store.timers.after(ms, () => {
      this.streamStalled = false;
      this.store.note(`${this.label} watch stream resumes`);
      this.store.kick();
    });
  }

  /** @internal The leader changed: each call in flight fails at once or loses its answer (hangs). */
  leaderChanged(): void {
    for (const call of [...this.pending]) {
      if (this.store.random() < 0.5) call.fail(new MemoryLogError('unknown-outcome', 'etcdserver: leader changed'));
      else call.lost = true;
    }
  }

  get partitioned(): boolean {
    return this.cut;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Cuts (true) or restores (false) this client's link to the store; see the file comment. */
  setPartitioned(on: boolean): void {
    if (on === this.cut) return;
    this.cut = on;
    this.store.note(`${this.label} ${on ? 'partitioned' : 'reconnected'}`);
    this.store.noteReach();
    if (!on) this.store.kick();
  }

  /** Ends every open watch of this client with 'broken' (a reconnect of its streams). */
  breakWatches(): void {
    for (const w of [...this.watches]) {
      w.close();
      w.listener.onEnd('broken', 'stream reset (simulated)');
    }
  }

  append(value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
    return this.sendAppend(value, timeoutMs, 'append', (position) => `appends v${position.version} at r${position.revision}`);
  }

  /**
   * One append of `value` as it travels: refused, executed, or executed with its answer lost, as the
   * faults say. `tokens`: the lent fences it carries (a bundle), else it is a pending call of its own.
   */
  private sendAppend(
    value: Uint8Array,
    timeoutMs: number,
    what: string,
    landed: (position: LogPosition) => string,
    lent?: readonly LentToken[],
  ): Promise<LogPosition> {
    const store = this.store;
    const issuedAt = store.clock.now();
    return this.afterOverdueRevoked(
      timeoutMs,
      (error) => new AppendRefusedError(`append not sent: ${error.message}`),
      (left) =>
        this.call(
          'append',
          left,
          () => {
            if (store.chance(store.faults.appendRejected)) {
              store.note(`${this.label} ${what} refused`);
              throw new MemoryLogError('rejected', 'append refused (simulated; not committed)');
            }
            const position = store.appendLog(value);
            for (const l of lent ?? []) {
              l.client.unexecutedAppends().delete(l.token);
              l.client.reachedThroughSequencer(l.lentAt);
            }
            store.answerIssued(issuedAt);
            store.note(`${this.label} ${landed(position)}`);
            if (store.chance(store.faults.appendUnknownOutcome)) {
              store.note(`${this.label} loses the answer of v${position.version}`);
              throw new MemoryLogError('unknown-outcome', 'append: connection reset before the answer (simulated)');
            }
            return position;
          },
          'append',
          lent?.map((l) => l.token),
        ),
    );
  }

  /**
   * See EtcdLog.lendLease: a fence for one append attempt of this client, carried by whichever
   * append takes the batch (this client's appendBundle, or a sequencer's). Modelled as a pending
   * append of this client that never travels: failed when the attempt is given up (leaseReturned
   * 'unsettled'), then alive for lateCommitMs (or as long as a new leader renewed it), sealed by
   * this client's seal, revoked when overdue, like any append of its.
   */
  lendLease(timeoutMs: number): Promise<LentLease> {
    const store = this.store;
    return this.afterOverdueRevoked(
      timeoutMs,
      (error) => new AppendRefusedError(`append not sent: ${error.message}`),
      () => {
        if (this.isClosed) return Promise.reject(new AppendRefusedError('append not sent: client closed'));
        const token: PendingCall = {
          settled: false,
          failedAt: undefined,
          fenced: true,
          lost: false,
          fail: () => {},
          refusal: () => new AppendRefusedError('not sent'),
          sealed: false,
          renewedUntil: Number.NEGATIVE_INFINITY,
        };
        this.unexecuted.add(token);
        const fence: LentLease = {
          leaseId: String(store.lentId()),
          fenceKey: Buffer.from(`fence/${this.label}/${this.id}`),
          // No clock of the lender's says when it ends here: it holds until its attempt is given up.
          endsAt: Number.POSITIVE_INFINITY,
        };
        const lent: LentToken = { token, client: this, lentAt: store.clock.now() };
        store.lent.set(fence, lent);
        store.lentByLease.set(fence.leaseId, lent);
        return Promise.resolve(fence);
      },
    );
  }

  /** See EtcdLog.leaseReturned. */
  leaseReturned(fence: LentLease, outcome: LeaseOutcome): void {
    const lent = this.store.lent.get(fence);
    if (lent === undefined || lent.token.settled || lent.token.failedAt !== undefined) return;
    if (outcome === 'unsettled') lent.token.failedAt = this.store.clock.now();
    else {
      lent.token.settled = true;
      this.unexecuted.delete(lent.token);
    }
  }

  /**
   * See EtcdLog.appendBundle: one append of every part, fenced by the leases its transaction's puts
   * name, the same puts EtcdLog sends (appendTransaction.ts): what fences a bundle on etcd fences it here.
   */
  appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition> {
    const value = parts.length === 1 ? parts[0]!.value : encodeBundle(parts.map((p) => p.value));
    const puts = appendPuts(Buffer.from(LOG_KEY), value, Buffer.from('retained'), value, parts);
    const lent = puts.flatMap((put) => (put.lease === undefined ? [] : [this.store.lentByLease.get(put.lease)]));
    if (lent.some((l) => l === undefined)) return Promise.reject(new AppendRefusedError('append not sent: a fence not lent by this store'));
    return this.sendAppend(
      value,
      timeoutMs,
      'bundle',
      (position) => `appends a bundle of ${parts.length} as v${position.version} at r${position.revision}`,
      lent as LentToken[],
    );
  }

  /**
   * A write that travels like the others; executed at the store, it stops every append of this
   * client that had rejected when seal() was called (as revoking their writer leases does on etcd).
   */
  seal(timeoutMs: number): Promise<void> {
    for (const c of this.unexecuted) if (!this.store.unfenced(c)) this.unexecuted.delete(c); // fenced out already
    const rejected = [...this.unexecuted].filter((c) => c.failedAt !== undefined);
    return this.call(
      'seal',
      timeoutMs,
      () => {
        for (const c of rejected) {
          c.sealed = true;
          this.unexecuted.delete(c);
        }
        this.store.note(`${this.label} seals ${rejected.length} rejected append(s)`);
      },
      'write',
    );
  }

  /** @internal A bundle carrying a fence this client lent at `lentAt` executed (see sequencedAttemptStartedAt). */
  reachedThroughSequencer(lentAt: number): void {
    if (lentAt > this.sequencedAttemptStartedAt) this.sequencedAttemptStartedAt = lentAt;
  }

  /** @internal The appends of this client whose request has not executed (yet), and its lent fences. */
  unexecutedAppends(): Set<PendingCall> {
    return this.unexecuted;
  }

  /** @internal Starts this client's overdue sweeps (MemoryStore.overdueRevokes), unless they run. */
  armJanitor(): void {
    if (this.janitorArmed || this.isClosed) return;
    this.janitorArmed = true;
    this.timers.after(JANITOR_SWEEP_MS, () => {
      this.janitorArmed = false;
      this.sweepOverdue();
    });
  }

  /** One sweep: revokes the appends due (one revoke in flight), and sweeps again while any remain. */
  private sweepOverdue(): void {
    if (this.isClosed) return;
    const store = this.store;
    const { due, later } = store.overdueAppends(store.clock.now());
    if (due.length > 0 && !this.revokingOverdue && store.reachable(this)) {
      this.revokingOverdue = true;
      this.revokeOverdue(due, JANITOR_REVOKE_MS)
        .catch(() => {})
        .finally(() => (this.revokingOverdue = false));
    }
    if (due.length > 0 || later) this.armJanitor();
  }

  /** A write that, executed, stops the `due` appends still able to land (revoking their writer leases). */
  private revokeOverdue(due: readonly PendingCall[], timeoutMs: number): Promise<void> {
    const store = this.store;
    return this.call(
      'overdue writer lease revoke',
      timeoutMs,
      () => {
        let stopped = 0;
        for (const call of due) {
          if (!store.unfenced(call)) continue;
          call.sealed = true;
          stopped++;
        }
        store.note(`${this.label} revokes the overdue leases of ${stopped} append(s)`);
      },
      'write',
    );
  }

  /**
   * EtcdLog appends and reads the head only once every overdue lease it knows of is gone
   * (WriterLeaseJanitor.untilOverdueGone): with `overdueRevokes`, a revoke of every rejected append
   * past its due time goes first (`refused` maps its failure). Calls `then` with the time left.
   */
  private afterOverdueRevoked<T>(timeoutMs: number, refused: (error: Error) => Error, then: (timeoutMs: number) => Promise<T>): Promise<T> {
    const store = this.store;
    if (!store.overdueRevokes) return then(timeoutMs);
    const started = store.clock.now();
    const { due } = store.overdueAppends(started, false);
    if (due.length === 0) return then(timeoutMs);
    return this.revokeOverdue(due, timeoutMs).then(
      () => then(Math.max(1, timeoutMs - (store.clock.now() - started))),
      (error: unknown) => {
        throw refused(error as Error);
      },
    );
  }

  /** @internal A new leader renewed the fences: every append of this client that may still land may until `until`. */
  renewFences(until: number): void {
    for (const call of this.unexecuted) {
      if (this.store.unfenced(call)) call.renewedUntil = Math.max(call.renewedUntil, until);
      else this.unexecuted.delete(call);
    }
  }

  head(timeoutMs: number): Promise<LogHead> {
    const issuedAt = this.store.clock.now();
    return this.afterOverdueRevoked(
      timeoutMs,
      (error) => error,
      (left) =>
        this.call('head', left, () => {
          this.store.answerIssued(issuedAt);
          return this.store.head();
        }),
    );
  }

  since(revision: number, timeoutMs: number): Promise<RetainedSince> {
    return this.call('retained batches', timeoutMs, () => this.store.retainedSince(revision));
  }

  /** Positions are revisions, 1 or more; etcd's "0 = from now" is not offered (a trap, not a feature). */
  watch(fromRevision: number, listener: LogListener): LogWatch {
    if (!Number.isInteger(fromRevision) || fromRevision < 1) throw new RangeError(`watch from revision ${fromRevision}`);
    const w = new MemoryWatch(this, listener, fromRevision);
    if (this.isClosed) {
      w.ended = true;
      return w;
    }
    if (this.watches.size >= this.store.maxWatches) throw new RangeError(`more than ${this.store.maxWatches} watches open`);
    if (this.watches.size === 0) this.streamMember = this.member;
    this.watches.add(w);
    this.store.openWatch(w);
    return w;
  }

  loadSnapshot(timeoutMs: number): Promise<StoredSnapshot | undefined> {
    return this.call('load snapshot', timeoutMs, () => this.store.readSnapshot());
  }

  async saveSnapshot(snapshot: StoredSnapshot, timeoutMs: number): Promise<boolean> {
    const store = this.store;
    const deadline = store.clock.now() + timeoutMs;
    const left = (): number => deadline - store.clock.now();
    const saveId = `${this.id}.${++this.saves}`;
    const { version, revision } = snapshot.position;
    const size = store.snapshotChunkBytes;
    const chunks = Math.ceil(snapshot.bytes.length / size);
    for (let i = 0; i < chunks; i++) {
      const bytes = snapshot.bytes.subarray(i * size, (i + 1) * size);
      await this.call('snapshot chunk', left(), () => store.putChunk(version, saveId, i, bytes), 'write');
    }
    // As EtcdLog: the pointer moves only forward, only by a compare-and-swap on its mod revision;
    // a saver whose swap fails (another leader saved meanwhile) deletes its own chunks.
    const read = await this.call('snapshot pointer', left(), () => store.pointerRead());
    const previous = read.pointer;
    const moved =
      (previous === undefined || previous.version < version) &&
      (await this.call('snapshot pointer', left(), () => store.casPointer({ version, revision, id: saveId, chunks }, read.modRevision), 'write'));
    if (!moved) {
      await this.call('snapshot cleanup', left(), () => store.deleteSave(version, saveId), 'write');
      // As EtcdLog: what a newer pointed-to snapshot covers may go; under an older pointer, nothing.
      if (previous !== undefined && previous.version >= version) await this.call('retained cleanup', left(), () => store.dropRetained(revision), 'write');
      return false;
    }
    if (previous !== undefined) await this.call('snapshot cleanup', left(), () => store.deleteSave(previous.version, previous.id), 'write');
    await this.call('retained cleanup', left(), () => store.dropRetained(revision), 'write');
    return true;
  }

  compact(revision: number, timeoutMs: number): Promise<void> {
    return this.call('compact', timeoutMs, () => {
      this.store.compactTo(revision);
      this.store.note(`${this.label} compacts to r${revision}`);
    });
  }

  async claimName(name: string, priority: number | undefined, leaseSeconds: number, timeoutMs: number, silentBeat?: number): Promise<NameClaim> {
    if (!(leaseSeconds > 0)) throw new RangeError(`lease of ${leaseSeconds} s`);
    const ttlMs = leaseSeconds * 1000;
    const sentAt = this.store.clock.now();
    // A transaction with puts, as on etcd: a write, taken or not.
    const outcome = await this.call('claim name', timeoutMs, () => this.store.claim(this, name, priority, ttlMs, silentBeat), 'write');
    if ('holder' in outcome) return { taken: false, holder: outcome.holder };
    // Closed meanwhile: call() would have rejected, so the client is open here.
    const session = new MemorySession(this, outcome.leaseId, ttlMs, sentAt, name);
    this.sessions.add(session);
    return { taken: true, session };
  }

  candidates(timeoutMs: number): Promise<Candidate[]> {
    return this.call('candidates', timeoutMs, () => this.store.candidates());
  }

  members(timeoutMs: number): Promise<Member[]> {
    return this.call('members', timeoutMs, () => this.store.members());
  }

  /** A crash: see the file comment. Leases are not revoked (etcd3's close does not either). */
  crash(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.store.note(`${this.label} closed`);
    for (const call of [...this.pending]) call.fail(new MemoryLogError('closed', 'client closed'));
    // A fence it lent (to a sequencer) and never got back is given up now, as its own attempts are:
    // on etcd the writer lease was granted before the crash and ends within lateCommitMs of it.
    const now = this.store.clock.now();
    for (const call of this.unexecuted) if (!call.settled && call.failedAt === undefined) call.failedAt = now;
    for (const w of [...this.watches]) w.close();
    for (const s of this.sessions) s.stop();
    this.sessions.clear();
  }

  close(): Promise<void> {
    this.crash();
    return Promise.resolve();
  }

  /** @internal */
  forgetWatch(w: MemoryWatch): void {
    this.watches.delete(w);
  }

  /** @internal */
  forgetSession(s: MemorySession): void {
    this.sessions.delete(s);
  }

  /**
   * After a deadline the client may try another member (a fresh channel), as a node that leaves a
   * silent member does; the watch stream stays where it is until it has no watch left.
   */
  private maybeSwitchMember(): void {
    const store = this.store;
    if (store.memberCount < 2 || this.isClosed || store.random() < 0.5) return;
    this.member = (this.member + 1) % store.memberCount;
    store.note(`${this.label} moves to member m${this.member}`);
    store.noteReach();
  }

  /**
   * @internal One call: travels to the store, runs `execute` there (a throw is the store's
   * refusal), travels back. Rejects 'timeout' after `timeoutMs` whatever happened meanwhile.
   */
  call<T>(what: string, timeoutMs: number, execute: () => T, kind: 'read' | 'write' | 'append' = 'read', parts?: readonly PendingCall[]): Promise<T> {
    if (this.isClosed) return Promise.reject(new MemoryLogError('closed', `${what}: client closed`));
    if (!(timeoutMs > 0)) return Promise.reject(new MemoryLogError('timeout', `${what}: no time left (${timeoutMs} ms)`));
    if (this.pending.size >= this.store.maxPendingCalls) {
      return Promise.reject(new MemoryLogError('busy', `${what}: more than ${this.store.maxPendingCalls} calls in flight`));
    }
    this.callsSent++;
    const store = this.store;
    return new Promise<T>((resolve, reject) => {
      const settle = (finish: () => void): void => {
        if (call.settled) return;
        call.settled = true;
        this.pending.delete(call);
        cancelTimeout();
        finish();
      };
      const call: PendingCall = {
        settled: false,
        failedAt: undefined,
        fenced: kind === 'append',
        lost: false,
        fail: (error) =>
          settle(() => {
            call.failedAt = store.clock.now();
            reject(error);
          }),
        sealed: false,
        renewedUntil: Number.NEGATIVE_INFINITY,
        parts,
        refusal: () =>
          kind === 'append'
            ? new AppendRefusedError(`${what} refused: etcdserver: no leader (simulated)`)
            : new MemoryLogError('no-leader', `${what}: etcdserver: no leader (simulated)`),
      };
      const cancelTimeout = this.timers.after(timeoutMs, () => {
        call.fail(new MemoryLogError('timeout', `${what}: deadline of ${timeoutMs} ms exceeded`));
        this.maybeSwitchMember();
      });
      this.pending.add(call);
      // A bundle's own failure fences nothing (its parts' fences do): no seal of this client concerns it.
      if (call.fenced && parts === undefined) this.unexecuted.add(call);
      store.send(
        this,
        call,
        () => {
          this.unexecuted.delete(call);
          let answer: () => void;
          try {
            const value = execute();
            answer = () => resolve(value);
          } catch (error) {
            answer = () => reject(error);
          }
          store.reply(this, () => {
            if (!call.lost) settle(answer);
          });
        },
        kind !== 'read',
      );
    });
  }
}
