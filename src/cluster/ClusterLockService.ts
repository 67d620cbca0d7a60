import type { ByteString } from '../bytes.js';
import { NO_DEADLINE } from '../locks/DeadlineHeap.js';
import { NO_ID } from '../locks/HashIndex.js';
import { Later, Waiting } from '../locks/Later.js';
import { Waiters, type GrantWait, type WaitersHost } from '../locks/Waiters.js';
import { LossReason, NO_WAIT_BOUND } from '../protocol/constants.js';
import type { LockCounts, LockRequest, LockService, SavedLock, WaitingFigures } from '../locks/LockService.js';
import {
  DEFAULT_MAX_LOCKS_PER_CONNECTION,
  DEFAULT_MAX_LOCKS_PER_OWNER,
  DEFAULT_MAX_TABLE_BYTES,
  NO_CLIENT,
  Refusal,
  REFUSAL_NAMES,
  REFUSALS,
  type LimitFigures,
} from '../locks/TableLimits.js';
import type { Contender, FencedPosition, QueueView } from '../protocol/messages.js';
import { RETRY_MS, TICK_MS, type ClusterDeps, type ClusterFigures, type ClusterOptions } from './ClusterOptions.js';
import { Committer } from './Committer.js';
import { DEFAULT_ETCD_QUOTA_BYTES, entryBytesBound } from './EntryBytesRules.js';
import type { WriteAnswer } from './GroupCommit.js';
import { Leadership } from './Leadership.js';
import { ETCD_BOUND_FORMAT, LogOp, MAX_BATCH_COMMANDS, NO_REMAINING, OPS_FORMAT, type LogCommand } from './LogCodec.js';
import { LogFollower } from './LogFollower.js';
import { OrphanedWaits } from './OrphanedWaits.js';
import { ReplicaState } from './ReplicaState.js';
import { StoreContact } from './StoreContact.js';
import { pause } from '../runtime/Timers.js';

export type { ClusterDeps, ClusterFigures, ClusterObserver, ClusterOptions } from './ClusterOptions.js';

/** Cancels of abandoned waits kept until the log may carry them (see ClusterLockService.abandonEntry). */
const MAX_DEFERRED_CANCELS = 10_000;

/** The names of a waiting entry whose client stopped waiting. */
interface WaitingEntry {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
}

/** A proposer incarnation: 1 … 2^32-1 (0 never: batches of some versions read it as none). */
function drawIncarnation(random: () => number): number {
  return 1 + Math.floor(random() * 0xfffffffe);
}

/** `--import-lock-file` into a cluster that already holds entries. */
export class ImportRefusedError extends Error {
  override name = 'ImportRefusedError';
}

/**
 * The cluster's LockService, a facade over three layers (as etcd-io/raft splits raft.go,
 * rawnode.go and node.go): the LogFollower keeps this node's replica of the table by applying
 * the replicated log in order; the Committer sends every mutating command through the log in
 * group-commit batches and every read through a linearizable barrier, and answers them as the
 * follower applies; Leadership holds the node's name and, while it leads, proposes expiries and
 * writes snapshots. This class wires them together and speaks LockService.
 */
export class ClusterLockService implements LockService, WaitersHost {
  /** The incarnation this node's batches carry now (see reincarnate). */
  private currentIncarnation: number;
  private readonly contact = new StoreContact();
  private readonly follower: LogFollower;
  private readonly committer: Committer;
  /** The bound on the entries' etcd bytes this node's batches carry once every live node reads it (a share of --etcd-quota-bytes). */
  private readonly entryBytesBound: number;
  /** --max-table-bytes in whole KiB, as the batches carry it. */
  private readonly tableBytesBound: number;
  /** Requests of this node's connections refused at --max-locks-per-connection (checked here, never in apply). */
  private connectionRefusals = 0;
  private readonly leadership: Leadership;
  /** Clients waiting for a grant or a loss (0x0B, 0x0C), answered as this node applies the log. */
  private readonly waiters: Waiters;
  private stopTicking: () => void = () => {};
  private closed = false;
  private closing: Promise<void> | undefined;
  private ready = false;
  /** Waits abandoned before format 4 could be written, or whose cancel failed to commit (see abandonEntry). */
  private deferredCancels: WaitingEntry[] = [];
  /** Ends the waits of incarnations that are over: this node's earlier ones, and (leading) a gone node's. */
  private readonly orphanedWaits: OrphanedWaits;

  constructor(
    private readonly options: ClusterOptions,
    private readonly deps: ClusterDeps,
  ) {
    // 1 … 2^32-1: with the name it tells one process's batches from a restarted one's.
    this.currentIncarnation = drawIncarnation(deps.random);
    // Drawn after the incarnation, so simulations stay seeded; never shows in the state.
    const hashSeed = Math.floor(deps.random() * 0x100000000) | 0;
    // Each layer is built after the ones it uses: the committer answers what the follower applies,
    // and leadership reads what the follower publishes and submits through the committer.
    this.entryBytesBound = entryBytesBound(options.etcdQuotaBytes ?? DEFAULT_ETCD_QUOTA_BYTES);
    this.tableBytesBound = Math.floor((options.maxTableBytes ?? DEFAULT_MAX_TABLE_BYTES) / 1024) * 1024;
    this.committer = new Committer(
      {
        nodeName: options.nodeName,
        incarnation: this.currentIncarnation,
        entryBytesBound: this.entryBytesBound,
        tableBytesBound: this.tableBytesBound,
        ownerEntriesBound: options.maxEntriesPerOwner ?? DEFAULT_MAX_LOCKS_PER_OWNER,
      },
      options.commitTimeoutMs,
      deps,
      this.contact,
    );
    const initial = new ReplicaState(deps.clock, hashSeed);
    this.waiters = new Waiters(initial.table, deps.clock, deps.timers, this, deps.grants);
    this.follower = new LogFollower(options.commitTimeoutMs, deps, this.contact, hashSeed, initial, this.committer, (state) =>
      this.waiters.rebind(state.table),
    );
    this.leadership = new Leadership(options, deps, this.contact, this.follower, this.committer);
    this.orphanedWaits = new OrphanedWaits(
      options.nodeName,
      () => this.currentIncarnation,
      deps,
      this.committer,
      () => this.follower.state,
      (name) => this.leadership.isSilent(name),
      () => this.reincarnate(),
    );
  }

  /**
   * With the node name, identifies this process's batches and the waits tied to them (1 … 2^32-1,
   * drawn at random); a new one once the cluster ended this one's waits while the process lived.
   */
  get incarnation(): number {
    return this.currentIncarnation;
  }

  /**
   * The cluster ended this incarnation's waits while this process lives (it was proven silent: a
   * pause past its lease): from the next batch on it proposes as a new incarnation, so that the
   * waits its clients begin from now on are tied again and end with it, instead of outliving it.
   */
  private reincarnate(): number {
    let next = drawIncarnation(this.deps.random);
    while (next === this.currentIncarnation) next = drawIncarnation(this.deps.random);
    this.currentIncarnation = next;
    this.committer.reincarnate(next);
    return next;
  }

  /** The replica as applied so far (tests, metrics, the lock-file backup). */
  get replica(): ReplicaState {
    return this.follower.state;
  }

  get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  /** The node this one takes to lead, if any (the sequencer's node, issue 20). */
  get leader(): string | undefined {
    return this.leadership.leader;
  }

  get leaderChanges(): number {
    return this.leadership.changes;
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** For metrics, read when scraped. */
  figures(): ClusterFigures {
    const applied = this.follower.state.position.version;
    const snapshotAt = this.leadership.lastSnapshotAt;
    return {
      ready: this.ready,
      etcdReachable: this.contact.reachable,
      appliedVersion: applied,
      lagBatches: Math.max(0, this.contact.knownHead - applied),
      snapshotAgeSeconds: snapshotAt === undefined ? undefined : (this.deps.clock.now() - snapshotAt) / 1000,
      snapshotBytes: this.leadership.lastSnapshotBytes,
      expiriesProposed: this.leadership.expiriesProposed,
      logValuesRefused: this.follower.refusedParts,
      ...this.spaceFigures(),
    };
  }

  /** etcd's space: what the entries cost there and their bound, and what the members say. */
  private spaceFigures(): Partial<ClusterFigures> {
    const space = this.leadership.space.figures;
    return {
      etcdEntryBytes: this.follower.state.entryEtcdBytes,
      etcdEntryBytesBound: this.deps.log.mayWrite(ETCD_BOUND_FORMAT) ? this.entryBytesBound : 0,
      etcdQuotaBytes: this.options.etcdQuotaBytes ?? DEFAULT_ETCD_QUOTA_BYTES,
      etcdDbBytes: space.dbBytes,
      etcdDbBytesInUse: space.dbBytesInUse,
      etcdNoSpace: space.noSpace,
      etcdDefragments: space.defragments,
    };
  }

  /**
   * The table against its bounds as this node applied the log: the refusals are every node's that
   * apply made (the same on every node) and this node's own at --max-locks-per-connection.
   */
  limitFigures(): LimitFigures {
    const table = this.follower.state.table;
    return {
      bytesUsed: table.bytes,
      bytesLimit: this.tableBytesBound,
      refused: REFUSALS.map(
        (why) => [REFUSAL_NAMES[why], table.refusals(why) + (why === Refusal.MaxLocksPerConnection ? this.connectionRefusals : 0)] as const,
      ),
    };
  }

  /**
   * Joins the cluster: takes the node name, loads the newest snapshot, follows the log and
   * catches up with its head. Retries while the store is unreachable; resolves once this node
   * may answer clients.
   */
  async start(): Promise<void> {
    const { logger } = this.deps;
    await this.leadership.join(() => this.closed);
    if (this.closed) return;
    await this.follower.loadSnapshot();
    this.follower.follow();
    this.stopTicking = this.deps.timers.every(TICK_MS, () => this.tick());
    for (;;) {
      if (this.closed) return;
      try {
        const head = await this.deps.log.head(this.options.commitTimeoutMs);
        this.contact.heard(true, head.version);
        await this.follower.appliedThrough(head.version);
        break;
      } catch (error) {
        this.contact.heard(false);
        logger.event('cluster-catch-up-retry', { error: (error as Error).message });
        await pause(this.deps.timers, RETRY_MS);
      }
    }
    this.ready = true;
    const state = this.follower.state;
    logger.event('cluster-caught-up', { version: state.position.version, entries: state.table.size });
  }

  private tick(): void {
    if (this.closed) return;
    const now = this.deps.clock.now();
    this.follower.checkProgress(now);
    this.committer.tick(now, this.follower.busy);
    if (this.ready) {
      this.leadership.tick();
      this.orphanedWaits.tick(now, this.leadership.isLeader);
    }
    this.sendDeferredCancels();
  }

  /** A mutating command, answered once its batch is applied here (a Later: no promise per command). */
  private submit(command: LogCommand, receivedAt?: number): Later<number> {
    const answer = new Later<number>();
    this.committer.submit(command, answer, undefined, receivedAt);
    return answer;
  }

  private read<T>(evaluate: (state: ReplicaState) => T, receivedAt?: number, weigh?: (value: T) => number): Later<T> {
    return this.committer.read(() => evaluate(this.follower.state), receivedAt, weigh);
  }

  // LockService

  findOwner(key: ByteString, index: ByteString, receivedAt?: number): Later<ByteString> {
    return this.read((state) => state.table.findOwner(key, index), receivedAt);
  }

  request(r: LockRequest, allowCreate: boolean, receivedAt?: number, client = NO_CLIENT): Later<number> {
    const answer = new Later<number>();
    if (this.connectionIsFull(r, client)) answer.resolve(0);
    else this.committer.submit(this.requestCommand(r, allowCreate), answer, this.afterRequest(r, client), receivedAt);
    return answer;
  }

  /**
   * --max-locks-per-connection, checked before a request is proposed (apply knows no connection):
   * whether `client` already created that many entries still held, as far as this node applied,
   * and this request would create one more. Told to onRefused and counted when it does.
   */
  private connectionIsFull(r: LockRequest, client: number): boolean {
    if (client === NO_CLIENT) return false;
    const state = this.follower.state;
    if (state.entriesOfConnection(client) < (this.options.maxEntriesPerConnection ?? DEFAULT_MAX_LOCKS_PER_CONNECTION)) return false;
    if (state.table.entryOf(r.key, r.index, r.owner) !== NO_ID) return false;
    this.connectionRefusals++;
    this.options.onRefused?.(Refusal.MaxLocksPerConnection, r, client);
    return true;
  }

  /**
   * What runs right after a request of connection `client` applied here: an entry it created counts
   * against the connection; a refusal at a limit is told to onRefused. Nothing to do for no connection.
   */
  private afterRequest(r: LockRequest, client: number): ((result: number) => void) | undefined {
    if (client === NO_CLIENT && this.options.onRefused === undefined) return undefined;
    return (result) => this.requestApplied(r, client, result);
  }

  /** Right after a request of this node applied with `result`: see afterRequest. No table lookup unless it was refused. */
  private requestApplied(r: LockRequest, client: number, result: number): void {
    const state = this.follower.state;
    if (result > 0) {
      if (client !== NO_CLIENT) state.claimAddedForConnection(client);
      return;
    }
    const why = state.table.lastRefusal;
    if (why !== Refusal.None && state.table.entryOf(r.key, r.index, r.owner) === NO_ID) this.options.onRefused?.(why, r, client);
  }

  /**
   * A request (the same log command as 0x02: every replica grants alike, only this node answers),
   * with the token read from this node's table right after the command applied, before any later
   * command of its batch could release or expire the lock: the token of the grant it answers.
   */
  requestFenced(r: LockRequest, allowCreate: boolean, receivedAt?: number, client = NO_CLIENT): Later<FencedPosition> {
    const answer = new Later<FencedPosition>();
    if (this.connectionIsFull(r, client)) {
      answer.resolve({ position: 0, token: 0 });
      return answer;
    }
    let token = 0;
    this.committer.submit(
      this.requestCommand(r, allowCreate),
      answerWith(answer, (position) => ({ position, token: position === 1 ? token : 0 })),
      (position) => {
        if (position === 1) token = this.follower.state.table.fence(r.key, r.index, r.owner);
        this.requestApplied(r, client, position);
      },
      receivedAt,
    );
    return answer;
  }

  /** The log command of a request; `op` AcquireWait for a 0x0B whose waiting entry is tied to this incarnation. */
  private requestCommand(r: LockRequest, allowCreate: boolean, op: typeof LogOp.Request | typeof LogOp.AcquireWait = LogOp.Request): LogCommand {
    return {
      op,
      key: r.key,
      index: r.index,
      owner: r.owner,
      ttl: r.ttl,
      ttw: r.ttw,
      priority: r.priority,
      allowCreate,
      maxEntries: this.options.maxEntries,
    };
  }

  /**
   * Acquire and wait (0x0B): the request goes through the log as any; right after it is applied
   * here, it is answered if it owns, was refused, or may not wait, else it waits (Waiters) for the
   * apply that grants or removes its entry, with no store traffic of its own meanwhile; at its bound
   * a linearizable read answers its position (boundPassed). Once every live node reads format 5 it
   * goes as AcquireWait: an entry it leaves waiting is tied to this incarnation, and ends with it
   * (OrphanedWaits) if this process dies before its connection could cancel it.
   */
  acquire(r: LockRequest, allowCreate: boolean, waitMs: number, receivedAt?: number, client = NO_CLIENT): Waiting<FencedPosition> {
    const answer = new Waiting<FencedPosition>();
    if (this.connectionIsFull(r, client)) {
      answer.resolve({ position: 0, token: 0 });
      return answer;
    }
    const deadline = waitMs === NO_WAIT_BOUND ? NO_DEADLINE : (receivedAt ?? this.deps.clock.now()) + waitMs;
    let cancelledBeforeApply = false;
    // Its connection closed before the command applied (an abandon waits for the wait to begin, in Waiters).
    answer.whenCancelled(() => (cancelledBeforeApply = true));
    // The client waits again: a cancel of its earlier wait not sent yet would end this one.
    if (this.deferredCancels.length > 0) this.deferredCancels = this.deferredCancels.filter((c) => !sameEntry(c, r));
    this.committer.submit(
      // A bound of 0 waits for nothing (0x0A's answer): its entry stays as a 0x02's would.
      this.requestCommand(r, allowCreate, waitMs !== 0 && this.orphanedWaits.mayTie ? LogOp.AcquireWait : LogOp.Request),
      { resolve: () => {}, reject: (error) => answer.reject(error) },
      (result) => {
        this.requestApplied(r, client, result);
        const table = this.follower.state.table;
        const entry = table.entryOf(r.key, r.index, r.owner);
        // What the command did, not only what the table shows: one that did nothing (an incarnation
        // whose waits ended) on an entry that is there renewed nothing, and must not say it owns.
        const position = entry === NO_ID ? 0 : result;
        if (position === 1) answer.resolve({ position, token: table.tokenOf(entry) });
        // Its client closed before it applied: an entry left waiting goes (a grant stays, as on a single node).
        else if (cancelledBeforeApply) {
          if (position > 1) this.abandonEntry(r.key, r.index, r.owner);
        }
        // A bound that passed while the command was on its way is answered here, from its own apply,
        // not by a read after it: the client hears within its bound plus one commit, not two.
        else if (position === 0 || waitMs === 0 || this.deps.clock.now() >= deadline) answer.resolve({ position, token: 0 });
        else this.waiters.waitForGrant(r.key, r.index, r.owner, entry, deadline, answer);
      },
      receivedAt,
    );
    return answer;
  }

  /** The loss notice (0x0C): a linearizable read finds the entry owning (else NotOwner at once), then it waits for the apply that ends it. */
  awaitLoss(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Waiting<number> {
    const answer = new Waiting<number>();
    const checked = this.read((state) => {
      const entry = state.table.entryOf(key, index, owner);
      if (entry === NO_ID || !state.table.owns(entry)) return LossReason.NotOwner;
      this.waiters.waitForLoss(key, index, owner, entry, answer);
      return undefined;
    }, receivedAt);
    checked.listen(
      {
        resolved: (_, reason: number | undefined) => {
          if (reason !== undefined) answer.resolve(reason);
        },
        rejected: (_, error) => answer.reject(error),
      },
      undefined,
    );
    return answer;
  }

  queues(key: ByteString, limit: number, receivedAt?: number): Later<QueueView[]> {
    return this.read((state) => state.table.queues(key, limit), receivedAt, queuesWeight);
  }

  // WaitersHost

  /** A wait's bound passed before its grant: its position now, read linearizably. */
  boundPassed(wait: GrantWait): void {
    this.read((state) => {
      const entry = state.table.entryOf(wait.key, wait.index, wait.owner);
      const position = entry === NO_ID ? 0 : state.table.positionOfEntry(entry);
      return { position, token: position === 1 ? state.table.tokenOf(entry) : 0 };
    }).listen({ resolved: (_, value: FencedPosition) => wait.answer.resolve(value), rejected: (_, error) => wait.answer.reject(error) }, undefined);
  }

  abandoned(wait: GrantWait): void {
    this.abandonEntry(wait.key, wait.index, wait.owner);
  }

  /**
   * A waiter's client stopped waiting: its entry goes, if it still waits, through the log. The
   * command is of format 4, written only once every live node reads it: until this node knows they
   * do (its first view of the cluster, a second or two after it starts; or while an older node is
   * live), the cancels wait here, at most MAX_DEFERRED_CANCELS (beyond, an entry stays to its TTW,
   * as 0.9b entries do); a cancel whose round failed waits there too, and is sent again. Only a
   * waiting entry is removed: one granted meanwhile may have been told to its owner through another
   * node; and one whose client waits again through another node (its entry tied to that node's
   * incarnation by then) stays.
   */
  private abandonEntry(key: ByteString, index: ByteString, owner: ByteString): void {
    if (this.closed) return;
    if (this.deps.log.mayWrite(OPS_FORMAT)) this.submitCancel({ key, index, owner });
    else if (this.deferredCancels.length < MAX_DEFERRED_CANCELS) this.deferredCancels.push({ key, index, owner });
  }

  /** The cancels deferred until format 4 may be written, sent once it may. */
  private sendDeferredCancels(): void {
    if (this.deferredCancels.length === 0 || !this.deps.log.mayWrite(OPS_FORMAT)) return;
    for (const cancel of this.deferredCancels.splice(0)) this.submitCancel(cancel);
  }

  /**
   * Proposes that the waiting entry go (a CancelWait: a no-op where it owns by then); nobody waits
   * on the outcome, but one that did not commit is kept to be sent again (else the entry would wait
   * for a client that left, and be granted to nobody).
   */
  private submitCancel(cancel: WaitingEntry): void {
    const { key, index, owner } = cancel;
    this.committer.submit(
      { op: LogOp.CancelWait, key, index, owner },
      {
        resolve: () => {},
        reject: () => {
          if (!this.closed && this.deferredCancels.length < MAX_DEFERRED_CANCELS) this.deferredCancels.push(cancel);
        },
      },
    );
  }

  fence(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Later<number> {
    return this.read((state) => state.table.fence(key, index, owner), receivedAt);
  }

  location(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Later<number> {
    return this.read((state) => state.table.location(key, index, owner), receivedAt);
  }

  renew(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Later<boolean> {
    const answer = new Later<boolean>();
    this.committer.submit(
      { op: LogOp.Renew, key, index, owner },
      answerWith(answer, (renewed) => renewed === 1),
      undefined,
      receivedAt,
    );
    return answer;
  }

  release(key: ByteString, index: ByteString, owner: ByteString, receivedAt?: number): Later<number> {
    return this.submit({ op: LogOp.Release, key, index, owner }, receivedAt);
  }

  releaseKey(key: ByteString, owner: ByteString, receivedAt?: number): Later<number> {
    return this.submit({ op: LogOp.ReleaseKey, key, owner }, receivedAt);
  }

  releaseAll(owner: ByteString, receivedAt?: number): Later<number> {
    return this.submit({ op: LogOp.ReleaseAll, owner }, receivedAt);
  }

  list(key: ByteString, limit: number, receivedAt?: number): Later<Contender[]> {
    return this.read((state) => state.table.list(key, limit), receivedAt, listWeight);
  }

  async counts(): Promise<LockCounts> {
    return await this.read((state) => state.counts());
  }

  /** As this node has applied the log: a replica's figures, for its metrics. */
  get waiting(): WaitingFigures {
    return { ...this.follower.state.table.waiting, grantWaits: this.waiters.grantWaits, lossWaits: this.waiters.lossWaits };
  }

  /** Drain of this node waits for the entries requested through it, wherever they are released. */
  async drainCounts(): Promise<LockCounts> {
    return await this.read((state) => state.countsFrom(this.options.nodeName));
  }

  /**
   * `--import-lock-file`: seeds an empty cluster with a single node's saved entries, in their
   * order (queue order, priorities, TTL/TTW, remaining times). All or nothing: the entries are
   * staged in the replicated state, in as many batches as they need, then one commit command
   * puts them all into the table at once, only if it is still empty and this import is still
   * the one staged (a later importer replaces it; the log's order decides). Refused, writing
   * nothing, when the cluster already holds entries. Resolves with the number of entries imported.
   *
   * Fencing tokens: imported owners keep the tokens the file gives them, and the commit raises the
   * cluster's token base to `highestToken` (the file's high-water: at or above every token its node
   * granted) or the highest token in the file if greater, so every later grant's token is above both.
   */
  async importLocks(saved: readonly SavedLock[], highestToken = 0): Promise<number> {
    const held = await this.counts();
    if (held.owners + held.waiters > 0) {
      throw new ImportRefusedError(`the cluster already holds ${held.owners + held.waiters} entries; nothing was imported`);
    }
    if (saved.length === 0) return 0;
    const importId = 1 + Math.floor(this.deps.random() * 0xfffffffe);
    const stage = (s: SavedLock, i: number): Later<number> =>
      this.submit({
        op: LogOp.ImportStagedFenced,
        importId,
        highestToken,
        key: s.key,
        index: s.index,
        owner: s.owner,
        ttl: s.ttl,
        ttw: s.ttw,
        priority: s.priority,
        isOwner: s.isOwner,
        token: s.token,
        remainingMs: s.remainingMs === null ? NO_REMAINING : Math.min(s.remainingMs, NO_REMAINING - 1),
        first: i === 0,
      });
    // A batch's worth at a time, each wave once the one before committed: every round is due a
    // commit timeout after it was submitted, and a file of many batches submitted at once would
    // have its last rounds due before their turn came.
    for (let from = 0; from < saved.length; from += MAX_BATCH_COMMANDS) {
      try {
        await Promise.all(saved.slice(from, from + MAX_BATCH_COMMANDS).map((s, i) => stage(s, from + i)));
      } catch (error) {
        // Staged entries are outside the table until the commit, which was not sent.
        throw new Error(`staging the import got no answer (${(error as Error).message}); nothing was imported`);
      }
    }
    let imported: number;
    try {
      imported = await this.submit({ op: LogOp.ImportCommit, importId });
    } catch (error) {
      throw new Error(
        `the import's commit got no answer (${(error as Error).message}); whether it was imported is unknown: look with lockctl list before trying again`,
      );
    }
    if (imported === 0) throw new ImportRefusedError('another node wrote to the cluster (or began another import) meanwhile; nothing was imported');
    return imported;
  }

  /** This node's view of the table, for the lock-file backup (never loaded back in cluster mode). */
  async snapshot(): Promise<SavedLock[]> {
    return [...this.follower.state.table.snapshot()];
  }

  /**
   * Above every fencing token this node's replica holds or has seen granted, to go with
   * snapshot(): the lock file a cluster node writes is a backup of its own view, so neither reads
   * through a barrier, and a SIGUSR1 save still works while etcd is unreachable.
   */
  highestToken(): Promise<number> {
    return Promise.resolve(this.follower.state.highestToken);
  }

  async restore(): Promise<void> {
    throw new Error('cluster mode never loads a lock file: etcd holds the locks');
  }

  /**
   * Leaves the cluster: commands never sent fail at once; the batch in flight is answered if it
   * applies, else given up once it can no longer commit (so its clients, whose connections then
   * close, can rely on it never taking effect later); then the name is given up and the store
   * client closes.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.waiters.close(new Error('the node is leaving the cluster'));
      await this.committer.close();
      this.closed = true;
      this.stopTicking();
      this.follower.close();
      this.deps.onClose?.();
      await this.leadership.leave();
      await this.deps.log.close();
    })();
    return this.closing;
  }
}

/** What a list's answer weighs in a pass of answering (see LIST_ENTRIES_PER_PASS): its entries. */
const listWeight = (contenders: readonly Contender[]): number => contenders.length;
const queuesWeight = (queues: readonly QueueView[]): number => queues.reduce((sum, q) => sum + q.entries.length + 1, 0);
/** Whether the two name the same entry. */
function sameEntry(a: WaitingEntry, b: WaitingEntry): boolean {
  return a.key === b.key && a.index === b.index && a.owner === b.owner;
}

/** Where a write's result goes when its answer is not the result itself: `answer`, settled with what `from` makes of it. */
function answerWith<T>(answer: Later<T>, from: (result: number) => T): WriteAnswer {
  return { resolve: (result) => answer.resolve(from(result)), reject: (error) => answer.reject(error) };
}
