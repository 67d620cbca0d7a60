import type { ByteString } from '../bytes.js';
import type { Clock } from '../locks/Clock.js';
import type { LockCounts, LockRequest, LockService, SavedLock } from '../locks/LockService.js';
import type { Contender } from '../protocol/messages.js';
import type { Logger } from '../server/Logger.js';
import { CommitTimeoutError, Round, type PendingWrite } from './GroupCommit.js';
import { Leadership } from './Leadership.js';
import { BatchEncoder, decodeBatch, LogOp, NO_REMAINING, type LogCommand } from './LogCodec.js';

/** `--import-lock-file` into a cluster that already holds entries. */
export class ImportRefusedError extends Error {
  override name = 'ImportRefusedError';
}
import { LogGapError, ReplicaState } from './ReplicaState.js';
import type { LogRecord, LogWatch, ReplicatedLog, WatchEnd } from './ReplicatedLog.js';
import type { Random } from './random.js';
import { pause, type Timers } from './Timers.js';

export interface ClusterOptions {
  /** This node's name: unique in the cluster, the origin of entries requested through it. */
  readonly nodeName: ByteString;
  /** 1–15 (smaller preferred) to stand for leader; undefined never leads. */
  readonly candidatePriority: number | undefined;
  /** A command whose commit or read barrier takes longer closes its connection unanswered. */
  readonly commitTimeoutMs: number;
  /** --max-locks, carried in each request so every replica decides alike. */
  readonly maxEntries: number;
  /** Lease of the node name and candidacy: a crashed node's name is free again after this. */
  readonly leaseSeconds?: number;
  /** The leader snapshots after this many batches (or SNAPSHOT_MAX_AGE_MS with any change). */
  readonly snapshotEveryBatches?: number;
}

export interface ClusterDeps {
  readonly log: ReplicatedLog;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly random: Random;
  readonly logger: Logger;
  /** Told of each batch applied here (metrics): commit latency and size. */
  readonly observer?: ClusterObserver;
}

/** What the metrics hear as it happens; everything else they read when scraped (ClusterFigures). */
export interface ClusterObserver {
  /** One of this node's batches came back applied, `ms` after it was sent, with `commands` commands. */
  batchCommitted(ms: number, commands: number): void;
  /** The leader proposed this many expiries. */
  expiriesProposed?(count: number): void;
}

/** This node's standing in the cluster, read when metrics are scraped. */
export interface ClusterFigures {
  readonly ready: boolean;
  /** Whether the last call to etcd succeeded. */
  readonly etcdReachable: boolean;
  /** The last batch applied here. */
  readonly appliedVersion: number;
  /** Batches etcd is known to hold that this node has not applied yet. */
  readonly lagBatches: number;
  /** Seconds since this node last wrote or loaded a snapshot; undefined if never. */
  readonly snapshotAgeSeconds: number | undefined;
  readonly snapshotBytes: number | undefined;
  readonly expiriesProposed: number;
}

/** How often deadlines, leadership and round timeouts are looked at. */
export const TICK_MS = 50;
/** Pause before a failed store call is tried again (start-up, watch restarts). */
export const RETRY_MS = 250;
/**
 * Longest the first attempt of an append or a read barrier may take before it is sent again;
 * each further attempt may take twice as long (within the command's --commit-timeout). A call
 * sent to a member that just lost its leadership, or to one that died, can hang until its
 * deadline while a new leader already accepts writes (a second or two after a leader dies);
 * another attempt goes through. Doubling keeps an overloaded etcd from being flooded with
 * retries. Retrying is safe: a batch carries its id and is applied once.
 */
export const STORE_ATTEMPT_MS = 500;
/** Pause after an attempt that failed at once (a refused connection), before the next one. */
const ATTEMPT_RETRY_MS = 50;
/** A watch that delivers nothing this long while etcd holds batches we lack is restarted. */
export const WATCH_STALL_MS = 1_000;
/**
 * Longest one store call of a snapshot load may take (the pointer, or one chunk of at most 1 MiB)
 * before the load starts over: a call lost to a partition must not hold a starting node for long.
 */
const SNAPSHOT_CALL_TIMEOUT_MS = 5_000;

/**
 * The cluster's LockService: every mutating command goes through the replicated log, every read
 * through a linearizable barrier, and the answers come from this node's replica of the table
 * (ReplicaState), which applies the log in order. Group commit: one round in flight per node; what
 * arrives meanwhile forms the next round (see GroupCommit.ts).
 */
export class ClusterLockService implements LockService {
  private state: ReplicaState;
  private readonly encoder = new BatchEncoder();
  /** Rounds waiting to be sent; the last one takes new commands. */
  private readonly queued: Round[] = [];
  private inFlight: Round | undefined;
  private nextSeq = 1;
  readonly incarnation: number;
  private watch: LogWatch | undefined;
  private watchGeneration = 0;
  private readonly leadership: Leadership;
  private stopTicking: () => void = () => {};
  private closed = false;
  private ready = false;
  private reloading = false;
  /** Where the watch resumes when history before it was compacted and held no batch of ours. */
  private resumeFrom = 0;
  private dispatchScheduled = false;
  private readonly waitingForApply: Array<{ version: number; resolve: () => void }> = [];
  /** The highest log version etcd has told us of (appends, read barriers). */
  private knownHead = 0;
  private reachable = false;
  /** When the replica last applied a batch, or last had nothing to apply (the watch watchdog). */
  private progressAt = 0;
  /** This node's seed for the table's hash indexes (see LockTableOptions.hashSeed); never shows in the state. */
  private readonly hashSeed: number;

  constructor(
    private readonly options: ClusterOptions,
    private readonly deps: ClusterDeps,
  ) {
    // 1 … 2^32-1: with the name it tells one process's batches from a restarted one's.
    this.incarnation = 1 + Math.floor(deps.random() * 0xfffffffe);
    this.hashSeed = Math.floor(deps.random() * 0x100000000) | 0;
    this.state = new ReplicaState(deps.clock, this.hashSeed);
    this.leadership = new Leadership(options, deps, {
      submitExpiry: (command, failed) => this.submitInternal(command, failed),
      state: () => this.state,
    });
  }

  /** The replica as applied so far (tests, metrics, the lock-file backup). */
  get replica(): ReplicaState {
    return this.state;
  }

  get isLeader(): boolean {
    return this.leadership.isLeader;
  }

  get leaderChanges(): number {
    return this.leadership.changes;
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** For metrics, read when scraped. */
  figures(): ClusterFigures {
    const applied = this.state.position.version;
    const snapshotAt = this.leadership.lastSnapshotAt;
    return {
      ready: this.ready,
      etcdReachable: this.reachable,
      appliedVersion: applied,
      lagBatches: Math.max(0, this.knownHead - applied),
      snapshotAgeSeconds: snapshotAt === undefined ? undefined : (this.deps.clock.now() - snapshotAt) / 1000,
      snapshotBytes: this.leadership.lastSnapshotBytes,
      expiriesProposed: this.leadership.expiriesProposed,
    };
  }

  /** Notes what a store call said of the store's reachability and of the log's head. */
  private heard(ok: boolean, headVersion = 0): void {
    this.reachable = ok;
    if (headVersion > this.knownHead) this.knownHead = headVersion;
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
    await this.loadSnapshot();
    this.follow();
    this.stopTicking = this.every(TICK_MS, () => this.tick());
    for (;;) {
      if (this.closed) return;
      try {
        const head = await this.deps.log.head(this.options.commitTimeoutMs);
        this.heard(true, head.version);
        await this.appliedThrough(head.version);
        break;
      } catch (error) {
        this.heard(false);
        logger.event('cluster-catch-up-retry', { error: (error as Error).message });
        await this.pause(RETRY_MS);
      }
    }
    this.ready = true;
    logger.event('cluster-caught-up', { version: this.state.position.version, entries: this.state.table.size });
  }

  private every(ms: number, task: () => void): () => void {
    let cancel = (): void => {};
    const run = (): void => {
      if (this.closed) return;
      task();
      cancel = this.deps.timers.after(ms, run);
    };
    cancel = this.deps.timers.after(ms, run);
    return () => cancel();
  }

  private pause(ms: number): Promise<void> {
    return pause(this.deps.timers, ms);
  }

  /** Resolves once the replica has applied batch `version`. */
  private appliedThrough(version: number): Promise<void> {
    if (this.state.position.version >= version) return Promise.resolve();
    return new Promise((resolve) => this.waitingForApply.push({ version, resolve }));
  }

  // Following the log

  private async loadSnapshot(): Promise<void> {
    const { log, logger, clock } = this.deps;
    for (;;) {
      if (this.closed) return;
      try {
        const snapshot = await log.loadSnapshot(SNAPSHOT_CALL_TIMEOUT_MS);
        if (snapshot !== undefined && snapshot.position.version > this.state.position.version) {
          const started = clock.now();
          this.replaceState(ReplicaState.decode(snapshot.bytes, clock, this.hashSeed));
          this.leadership.snapshotLoaded(snapshot.bytes.length);
          logger.event('snapshot-loaded', {
            version: snapshot.position.version,
            entries: this.state.table.size,
            bytes: snapshot.bytes.length,
            ms: Math.round(clock.now() - started),
          });
        }
        return;
      } catch (error) {
        logger.event('snapshot-load-failed', { error: (error as Error).message });
        await this.pause(RETRY_MS);
      }
    }
  }

  private replaceState(state: ReplicaState): void {
    this.state = state;
    this.leadership.stateReplaced(state);
    // A round whose batch the snapshot already holds can never see its own apply here.
    const round = this.inFlight;
    if (round !== undefined && round.seq > 0 && state.lastSeq(this.options.nodeName, this.incarnation) >= round.seq) {
      this.finishRound(round, new CommitTimeoutError('the batch was applied inside a snapshot; its results are unknown here'));
    }
    this.releaseApplyWaiters();
  }

  private follow(): void {
    if (this.closed) return;
    const generation = ++this.watchGeneration;
    this.watch = this.deps.log.watch(this.watchFrom(), {
      onRecords: (records) => {
        if (generation === this.watchGeneration) this.onRecords(records);
      },
      onEnd: (why, detail) => {
        if (generation === this.watchGeneration) this.restartWatch(why, detail);
      },
    });
  }

  /** The revision a watch starts from: after the last batch applied (or a compacted gap known empty). */
  private watchFrom(): number {
    return Math.max(this.state.position.revision + 1, this.resumeFrom);
  }

  private restartWatch(why: WatchEnd | 'gap', detail: string): void {
    this.watch?.close();
    this.watch = undefined;
    this.watchGeneration++;
    this.deps.logger.event('log-watch-restart', { why, detail, from: this.watchFrom() });
    if (why === 'compacted') {
      void this.reloadThenFollow();
    } else {
      this.deps.timers.after(why === 'gap' ? 0 : RETRY_MS, () => this.follow());
    }
  }

  /**
   * The watch position was compacted away. A newer snapshot brings the replica past it. Without
   * one: if the log has had no batch since ours (another cluster sharing the etcd compacted, or
   * etcd's own auto-compaction), nothing was missed and the watch resumes from the store's
   * current revision; otherwise the batches we lack are gone, and we wait for the leader's next
   * snapshot rather than guess.
   */
  private async reloadThenFollow(): Promise<void> {
    if (this.reloading) return;
    this.reloading = true;
    const before = this.state.position.version;
    try {
      await this.loadSnapshot();
      if (this.state.position.version === before) {
        try {
          const head = await this.deps.log.head(this.options.commitTimeoutMs);
          if (head.version === this.state.position.version) this.resumeFrom = head.storeRevision + 1;
          else await this.pause(RETRY_MS);
        } catch {
          await this.pause(RETRY_MS);
        }
      }
    } finally {
      this.reloading = false;
    }
    this.follow();
  }

  private onRecords(records: readonly LogRecord[]): void {
    this.heard(true, records[records.length - 1]?.version);
    for (const record of records) {
      if (record.version <= this.state.position.version) continue; // delivered again after a restart
      try {
        this.applyRecord(record);
      } catch (error) {
        if (error instanceof LogGapError) {
          this.restartWatch('gap', error.message);
          return;
        }
        throw error;
      }
    }
    this.progressAt = this.deps.clock.now();
    this.releaseApplyWaiters();
    this.answerReadBarrier();
  }

  /**
   * A watch can stall without ending (a stream that stays open but delivers nothing). When etcd
   * is known to hold batches we have not applied and none arrived for WATCH_STALL_MS (or the
   * commit timeout, if shorter), the watch is restarted from the last applied revision.
   */
  private checkWatchProgress(now: number): void {
    if (this.reloading || this.watch === undefined) return;
    if (this.knownHead <= this.state.position.version) {
      this.progressAt = now;
      return;
    }
    const stall = Math.min(WATCH_STALL_MS, this.options.commitTimeoutMs);
    if (now - this.progressAt < stall) return;
    this.progressAt = now;
    this.restartWatch('broken', `no batch arrived for ${stall} ms while ${this.knownHead - this.state.position.version} are known`);
  }

  private applyRecord(record: LogRecord): void {
    const batch = decodeBatch(record.value);
    this.leadership.noteApplied(record.value.length);
    const round = this.inFlight;
    const mine =
      round !== undefined &&
      round.seq > 0 &&
      batch.seq === round.seq &&
      batch.incarnation === this.incarnation &&
      batch.proposer === this.options.nodeName;
    if (!mine) {
      this.state.apply(batch, record);
      return;
    }
    const results = this.state.apply(batch, record, (i) => round.answerReadsBefore(i));
    if (results === undefined) {
      this.finishRound(round, new CommitTimeoutError('batch applied twice'));
    } else {
      round.settle(results);
      this.deps.observer?.batchCommitted(this.deps.clock.now() - round.sentAt, round.writes.length);
      this.finishRound(round);
    }
  }

  private releaseApplyWaiters(): void {
    const version = this.state.position.version;
    for (let i = 0; i < this.waitingForApply.length; ) {
      const waiter = this.waitingForApply[i]!;
      if (waiter.version <= version) {
        this.waitingForApply.splice(i, 1);
        waiter.resolve();
      } else {
        i++;
      }
    }
  }

  // Group commit

  /** The round taking new commands: the last one queued, or a new one. */
  private gathering(): Round {
    return this.queued[this.queued.length - 1] ?? this.openRound();
  }

  /** Queues a new round, due a commit timeout from now, to be sent once those before it are done. */
  private openRound(): Round {
    const round = new Round(this.deps.clock.now() + this.options.commitTimeoutMs);
    this.queued.push(round);
    this.scheduleDispatch();
    return round;
  }

  private scheduleDispatch(): void {
    if (this.dispatchScheduled || this.inFlight !== undefined) return;
    this.dispatchScheduled = true;
    // Let the rest of this turn's requests (a pipelined burst) join the round first.
    queueMicrotask(() => {
      this.dispatchScheduled = false;
      this.dispatch();
    });
  }

  private submit(command: LogCommand): Promise<number> {
    return new Promise<number>((resolve, reject) => this.submitInternal(command, reject, resolve));
  }

  private submitInternal(command: LogCommand, reject: (error: Error) => void, resolve: (result: number) => void = () => {}): void {
    if (this.closed) {
      reject(leavingError());
      return;
    }
    let round = this.gathering();
    if (!round.canTake(command)) round = this.openRound();
    const write: PendingWrite = { command, resolve, reject };
    round.addWrite(write);
  }

  private read<T>(evaluate: () => T): Promise<T> {
    if (this.closed) return Promise.reject(leavingError());
    return new Promise<T>((resolve, reject) => {
      this.gathering().addRead({ answer: () => resolve(evaluate()), reject });
    });
  }

  private dispatch(): void {
    if (this.inFlight !== undefined || this.closed) return;
    const round = this.queued.shift();
    if (round === undefined) return;
    this.inFlight = round;
    round.sentAt = this.deps.clock.now();
    if (round.writes.length > 0) {
      round.seq = this.nextSeq++;
      const bytes = this.encoder.encode({
        proposer: this.options.nodeName,
        incarnation: this.incarnation,
        seq: round.seq,
        commands: round.commands,
      });
      void this.append(round, bytes);
    } else {
      void this.barrier(round);
    }
  }

  /** Sends the batch; a failure before the deadline is retried with the same seq (applied once). */
  private async append(round: Round, bytes: Uint8Array): Promise<void> {
    const { log, clock } = this.deps;
    for (let attempt = 0; this.inFlight === round; attempt++) {
      const left = round.deadline - clock.now();
      if (left <= 0) break;
      const started = clock.now();
      try {
        const position = await log.append(bytes, Math.min(left, attemptLimit(attempt)));
        this.heard(true, position.version);
        return; // answered when the watch brings the batch back
      } catch (error) {
        this.heard(false);
        this.deps.logger.debug?.(`append of batch ${round.seq} failed: ${(error as Error).message}`);
        await this.retryPause(started, attempt, round);
      }
    }
  }

  private async barrier(round: Round): Promise<void> {
    const { log, clock } = this.deps;
    for (let attempt = 0; this.inFlight === round; attempt++) {
      const left = round.deadline - clock.now();
      if (left <= 0) return;
      const started = clock.now();
      try {
        const head = await log.head(Math.min(left, attemptLimit(attempt)));
        this.heard(true, head.version);
        if (this.inFlight !== round) return;
        round.barrier = head.version;
        this.answerReadBarrier();
        return;
      } catch (error) {
        this.heard(false);
        this.deps.logger.debug?.(`read barrier failed: ${(error as Error).message}`);
        await this.retryPause(started, attempt, round);
      }
    }
  }

  /** After a timed-out attempt, try again at once; after one that failed fast, pause briefly. */
  private async retryPause(started: number, attempt: number, round: Round): Promise<void> {
    const now = this.deps.clock.now();
    if (now - started >= attemptLimit(attempt)) return;
    await this.pause(Math.min(ATTEMPT_RETRY_MS, Math.max(0, round.deadline - now)));
  }

  private answerReadBarrier(): void {
    const round = this.inFlight;
    if (round === undefined || round.barrier === undefined) return;
    if (this.state.position.version < round.barrier) return;
    round.settle([]);
    this.finishRound(round);
  }

  private finishRound(round: Round, error?: Error): void {
    if (error !== undefined) round.fail(error);
    if (this.inFlight === round) {
      this.inFlight = undefined;
      if (this.queued.length > 0) this.scheduleDispatch();
    }
  }

  private tick(): void {
    const now = this.deps.clock.now();
    this.checkWatchProgress(now);
    const round = this.inFlight;
    if (round !== undefined && round.deadline <= now) {
      this.deps.logger.event('commit-timeout', { seq: round.seq, commands: round.writes.length });
      this.finishRound(round, new CommitTimeoutError(`not committed within ${this.options.commitTimeoutMs} ms`));
    }
    while (this.queued.length > 1 && this.queued[0]!.deadline <= now) {
      this.queued.shift()!.fail(new CommitTimeoutError(`not sent within ${this.options.commitTimeoutMs} ms`));
    }
    if (this.ready) this.leadership.tick();
  }

  // LockService

  findOwner(key: ByteString, index: ByteString): Promise<ByteString> {
    return this.read(() => this.state.table.findOwner(key, index));
  }

  request(r: LockRequest, allowCreate: boolean): Promise<number> {
    return this.submit({
      op: LogOp.Request,
      key: r.key,
      index: r.index,
      owner: r.owner,
      ttl: r.ttl,
      ttw: r.ttw,
      priority: r.priority,
      allowCreate,
      maxEntries: this.options.maxEntries,
    });
  }

  location(key: ByteString, index: ByteString, owner: ByteString): Promise<number> {
    return this.read(() => this.state.table.location(key, index, owner));
  }

  async renew(key: ByteString, index: ByteString, owner: ByteString): Promise<boolean> {
    return (await this.submit({ op: LogOp.Renew, key, index, owner })) === 1;
  }

  release(key: ByteString, index: ByteString, owner: ByteString): Promise<number> {
    return this.submit({ op: LogOp.Release, key, index, owner });
  }

  releaseKey(key: ByteString, owner: ByteString): Promise<number> {
    return this.submit({ op: LogOp.ReleaseKey, key, owner });
  }

  releaseAll(owner: ByteString): Promise<number> {
    return this.submit({ op: LogOp.ReleaseAll, owner });
  }

  list(key: ByteString, limit: number): Promise<Contender[]> {
    return this.read(() => this.state.table.list(key, limit));
  }

  counts(): Promise<LockCounts> {
    return this.read(() => this.state.counts());
  }

  /** Drain of this node waits for the entries requested through it, wherever they are released. */
  drainCounts(): Promise<LockCounts> {
    return this.read(() => this.state.countsFrom(this.options.nodeName));
  }

  /**
   * `--import-lock-file`: seeds an empty cluster with a single node's saved entries, in their
   * order (queue order, priorities, TTL/TTW, remaining times). Refused, writing nothing, when the
   * cluster already holds entries; the first batch re-checks that as it is applied, so two
   * importers racing cannot both succeed. Resolves with the number of entries imported.
   */
  async importLocks(saved: readonly SavedLock[]): Promise<number> {
    const held = await this.counts();
    if (held.owners + held.waiters > 0) {
      throw new ImportRefusedError(`the cluster already holds ${held.owners + held.waiters} entries; nothing was imported`);
    }
    if (saved.length === 0) return 0;
    // A fresh round, so that the first entry opens its batch (the emptiness check rides on it).
    this.openRound();
    const answers = saved.map((s, i) =>
      this.submit({
        op: LogOp.Import,
        key: s.key,
        index: s.index,
        owner: s.owner,
        ttl: s.ttl,
        ttw: s.ttw,
        priority: s.priority,
        isOwner: s.isOwner,
        remainingMs: s.remainingMs === null ? NO_REMAINING : Math.min(s.remainingMs, NO_REMAINING - 1),
        first: i === 0,
      }),
    );
    const results = await Promise.all(answers);
    if (results[0] === 0) throw new ImportRefusedError('another node wrote to the cluster first; nothing was imported');
    return results.reduce((sum, r) => sum + r, 0);
  }

  /** This node's view of the table, for the lock-file backup (never loaded back in cluster mode). */
  async snapshot(): Promise<SavedLock[]> {
    return [...this.state.table.snapshot()];
  }

  async restore(): Promise<void> {
    throw new Error('cluster mode never loads a lock file: etcd holds the locks');
  }

  /** Leaves the cluster: pending commands fail, the name is given up, the store client closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopTicking();
    this.watch?.close();
    this.watchGeneration++;
    const leaving = leavingError();
    if (this.inFlight !== undefined) this.finishRound(this.inFlight, leaving);
    for (const round of this.queued.splice(0)) round.fail(leaving);
    await this.leadership.leave();
    await this.deps.log.close();
  }
}

/** How long attempt `n` (0-based) of a store call may take: STORE_ATTEMPT_MS, doubling. */
function attemptLimit(n: number): number {
  return STORE_ATTEMPT_MS * 2 ** Math.min(n, 6);
}

/** What commands get once this node leaves the cluster (their connections close unanswered). */
function leavingError(): CommitTimeoutError {
  return new CommitTimeoutError('the node is leaving the cluster');
}
