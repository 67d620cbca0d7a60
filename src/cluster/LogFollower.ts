import { RETRY_MS, type ClusterDeps } from './ClusterOptions.js';
import { decodeValue, isRefused, type Batch, type OwnCommands } from './LogCodec.js';
import { LogGapError, ReplicaState, type PlaceInValue, type Sliced } from './ReplicaState.js';
import { APPLY_SLICE_ENTRIES } from '../locks/LockTable.js';
import type { LogPosition, LogRecord, LogWatch, RetainedSince, WatchEnd } from './ReplicatedLog.js';
import type { StoreContact } from './StoreContact.js';
import { pause } from '../runtime/Timers.js';

/** A watch that delivers nothing this long while etcd holds batches we lack is restarted. */
export const WATCH_STALL_MS = 1_000;
/**
 * Longest the follower goes without any store answer naming the log's head before it asks for
 * the head itself. The watchdog (checkProgress) needs a head to compare with: on a node with
 * clients, appends and read barriers name one all the time, but a node without clients whose
 * watch stalls silently hears of none, and would stay behind unnoticed, ready all along, until a
 * client came and waited for the catch-up. One read of the head per node every few quiet
 * seconds costs etcd nothing.
 */
export const HEAD_PROBE_MS = 3_000;
/**
 * Longest one store call of a snapshot load may take (the pointer, or one chunk of at most 1 MiB)
 * before the load starts over: a call lost to a partition must not hold a starting node for long.
 */
const SNAPSHOT_CALL_TIMEOUT_MS = 5_000;
/** The generation of records no watch delivered (a catch-up read). */
const NO_WATCH = -1;

/**
 * Who answers the commands of the batches this node wrote as the follower applies them (the
 * committer): the follower hands it every batch, and it applies them to the state, answering its
 * own commands (and the reads between them) as they apply.
 */
export interface BatchApplier {
  /** Applies one batch to `state`, at its place in the record's value, in slices of `sliceEntries` (ReplicaState.applyInSlices). */
  applyBatchInSlices(state: ReplicaState, batch: Batch, record: LogRecord, inValue: PlaceInValue, sliceEntries: number): Sliced<void>;
  /** The batch this node wrote with this header, so it is not decoded again (see decodeBatch). */
  readonly ownCommands: OwnCommands;
  /** A snapshot replaced the replica. */
  stateReplaced(state: ReplicaState): void;
  /** Batches were applied, through `version`: read barriers and claims waiting for them can be settled. */
  progressed(version: number): void;
}

/** The newest snapshot this node loaded: its position, size, and the log bytes applied before it. */
export interface LoadedSnapshot {
  readonly version: number;
  readonly bytes: number;
  /** When it was loaded (the node's clock). */
  readonly at: number;
  /** LogFollower.appliedLogBytes when it was loaded. */
  readonly appliedLogBytes: number;
}

/** A part of a log value no node can read, as the follower met it: where, and why. */
export interface RefusedValue {
  readonly version: number;
  readonly revision: number;
  readonly reason: string;
}

/**
 * The log follower: one node's replica of the table and the watch that feeds it. It loads the
 * newest snapshot, follows the log from there in version order (a repeat is skipped, a gap
 * restarts the watch: a batch is never applied past a hole), restarts a watch that ends or goes
 * silent, and recovers when the history it needs was compacted away. It answers nothing itself:
 * the host (the service's committer) settles its own commands as their batches apply.
 */
export class LogFollower {
  private current: ReplicaState;
  private watch: LogWatch | undefined;
  private generation = 0;
  private closed = false;
  private reloading = false;
  /** Where the watch resumes when history before it was compacted and held no batch we lack. */
  private resumeFrom = 0;
  private readonly waitingForApply: Array<{ version: number; resolve: () => void }> = [];
  /** When the replica last applied a batch, last had nothing to apply, or its watch started (the watch watchdog). */
  private progressAt = 0;
  /** StoreContact.headReports as the watchdog last saw it, and since when it has not changed. */
  private headReportsSeen = -1;
  private headQuietSince = 0;
  private probingHead = false;
  /** Bytes of log values applied since this node started (the leader's snapshot rule counts log volume). */
  appliedLogBytes = 0;
  /** The newest snapshot this node loaded, if any. */
  loaded: LoadedSnapshot | undefined;
  /** Parts of log values refused so far (metrics), and the last one. */
  refusedParts = 0;
  lastRefused: RefusedValue | undefined;
  /**
   * Entries one slice of apply (or of a snapshot's decoding) handles before the event loop gets a
   * turn (APPLY_SLICE_ENTRIES; tests vary it). Whatever it is, the replica ends alike.
   */
  sliceEntries = APPLY_SLICE_ENTRIES;
  /** Records delivered and not applied yet, in order; each with the watch that delivered it, and who waits for it. */
  /**
   * Work waiting to run on the replica, in order, one at a time: records to apply, or a snapshot to
   * encode (`start` makes its slices; a gap found ends it with where). `dropped` is told if it never ran.
   */
  private readonly backlog: Array<{
    readonly start: () => Sliced<string | undefined>;
    readonly generation: number;
    readonly done?: () => void;
    readonly dropped?: () => void;
  }> = [];
  /** The records being applied, in slices: nothing else applies until they are done. */
  private applying: { readonly work: Sliced<string | undefined>; readonly generation: number; readonly done?: (() => void) | undefined } | undefined;
  private nextSliceScheduled = false;
  private pumping = false;
  private readonly whenIdleWaiters: Array<() => void> = [];

  constructor(
    private readonly commitTimeoutMs: number,
    private readonly deps: ClusterDeps,
    private readonly contact: StoreContact,
    /** This node's seed for the table's hash indexes (see LockTableOptions.hashSeed). */
    private readonly hashSeed: number,
    /** The replica to start from (empty): built by the caller, so what watches its table can be built first. */
    initial: ReplicaState,
    private readonly applier: BatchApplier,
    /** Told when a snapshot replaced the replica (after the applier): who watches the table watches the new one. */
    private readonly replaced: (state: ReplicaState) => void = () => {},
  ) {
    this.current = initial;
  }

  /** The replica as applied so far. */
  /**
   * Whether work on the replica is under way in slices (a bulk command's apply, a snapshot's
   * encoding): the follower is making progress, and what it delivered after waits its turn.
   */
  get busy(): boolean {
    return this.applying !== undefined;
  }

  get state(): ReplicaState {
    return this.current;
  }

  /** Resolves once the replica has applied batch `version`. */
  appliedThrough(version: number): Promise<void> {
    if (this.current.position.version >= version) return Promise.resolve();
    return new Promise((resolve) => this.waitingForApply.push({ version, resolve }));
  }

  /** Loads the newest snapshot if it is ahead of the replica; retries until it loads (or none exists). */
  async loadSnapshot(): Promise<void> {
    const { log, logger, clock } = this.deps;
    for (;;) {
      if (this.closed) return;
      try {
        const snapshot = await log.loadSnapshot(SNAPSHOT_CALL_TIMEOUT_MS);
        if (snapshot !== undefined && snapshot.position.version > this.current.position.version) {
          const started = clock.now();
          const decoded = await this.inSlices(ReplicaState.decodeInSlices(snapshot.bytes, clock, this.hashSeed, this.sliceEntries));
          // Records that were still being applied meanwhile finish first; the snapshot must still be ahead.
          await this.whenIdle();
          if (this.closed || snapshot.position.version <= this.current.position.version) return;
          this.replaceState(decoded);
          this.loaded = { version: snapshot.position.version, bytes: snapshot.bytes.length, at: started, appliedLogBytes: this.appliedLogBytes };
          logger.event('snapshot-loaded', {
            version: snapshot.position.version,
            entries: this.current.table.size,
            bytes: snapshot.bytes.length,
            ms: Math.round(clock.now() - started),
          });
        }
        return;
      } catch (error) {
        logger.event('snapshot-load-failed', { error: (error as Error).message });
        await pause(this.deps.timers, RETRY_MS);
      }
    }
  }

  /** Runs `work` a slice per turn of the event loop. */
  private async inSlices<T>(work: Sliced<T>): Promise<T> {
    for (;;) {
      const slice = work.next();
      if (slice.done === true) return slice.value;
      await new Promise<void>((resolve) => this.deps.timers.soon(resolve));
    }
  }

  /** Resolves once every record delivered so far is applied. */
  private whenIdle(): Promise<void> {
    if (this.applying === undefined && this.backlog.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenIdleWaiters.push(resolve));
  }

  private replaceState(state: ReplicaState): void {
    this.current = state;
    this.applier.stateReplaced(state);
    this.replaced(state);
    this.releaseApplyWaiters();
  }

  /** Starts the watch after the last batch applied. */
  follow(): void {
    if (this.closed) return;
    const generation = ++this.generation;
    // A new watch has delivered nothing because it is new: its silence counts from now.
    this.progressAt = this.deps.clock.now();
    const from = this.watchFrom();
    this.watch = this.deps.log.watch(from, {
      onRecords: (records) => {
        if (generation === this.generation) this.onRecords(records);
      },
      onEnd: (why, detail) => {
        if (generation === this.generation) this.restartWatch(why, detail);
      },
    });
  }

  /** The revision a watch starts from: after the last batch applied (or a compacted gap known empty). */
  private watchFrom(): number {
    return Math.max(this.current.position.revision + 1, this.resumeFrom);
  }

  private restartWatch(why: WatchEnd | 'gap', detail: string): void {
    this.watch?.close();
    this.watch = undefined;
    this.generation++;
    this.deps.logger.event('log-watch-restart', { why, detail, from: this.watchFrom() });
    if (why === 'compacted') {
      void this.recoverFromCompaction();
    } else {
      this.deps.timers.after(why === 'gap' ? 0 : RETRY_MS, () => this.follow());
    }
  }

  /**
   * The watch position was compacted away (by our leader after a snapshot, by another cluster
   * sharing the etcd, or by etcd's own auto-compaction). A newer snapshot brings the replica past
   * it; then one read of the batches the log retains after our position (see ReplicatedLog.since)
   * brings it to the head, and the watch resumes from the store's revision at that read. Only if
   * the log does not retain them all (batches written before retention existed) do we wait for a
   * snapshot that covers them: a caught-up leader writes one within its snapshot age
   * (SNAPSHOT_MAX_AGE_MS), and we look again after RETRY_MS.
   */
  private async recoverFromCompaction(): Promise<void> {
    if (this.reloading) return;
    this.reloading = true;
    const { log, logger } = this.deps;
    try {
      await this.whenIdle();
      await this.loadSnapshot();
      let retained: RetainedSince | undefined;
      try {
        retained = await log.since(this.current.position.revision, this.commitTimeoutMs);
      } catch (error) {
        this.contact.heard(false);
        logger.debug?.(`reading the retained batches failed: ${(error as Error).message}`);
        await pause(this.deps.timers, RETRY_MS);
      }
      if (retained !== undefined) {
        const { head, batches } = retained;
        this.contact.heard(true, head.version);
        const from = this.current.position.version;
        const missing = head.version - from;
        if (missing > 0 && batches.length === missing && batches[missing - 1]!.revision === head.revision) {
          const records = batches.map((b, i) => ({ version: from + 1 + i, revision: b.revision, value: b.value }));
          // Under no watch's generation: a gap here is seen below (the head not reached), not by a watch restart.
          await new Promise<void>((resolve) => this.enqueue(records, NO_WATCH, resolve));
          logger.event('log-caught-up-from-retained', { from, to: head.version });
        }
        if (head.version === this.current.position.version) {
          this.resumeFrom = head.storeRevision + 1;
        } else if (head.version > this.current.position.version) {
          logger.event('log-history-lost', {
            applied: this.current.position.version,
            head: head.version,
            retained: batches.length,
            detail: 'compacted before this node applied it and not retained; waiting for a snapshot that covers it',
          });
          await pause(this.deps.timers, RETRY_MS);
        }
      }
    } finally {
      this.reloading = false;
    }
    this.follow();
  }

  private onRecords(records: readonly LogRecord[]): void {
    this.contact.heard(true, records[records.length - 1]?.version);
    this.enqueue(records, this.generation);
  }

  /** Records to apply after those before them; `done` is told once they are. */
  private enqueue(records: readonly LogRecord[], generation: number, done?: () => void): void {
    this.backlog.push({ start: () => this.applyRecords(records), generation, done });
    if (!this.nextSliceScheduled) this.pump();
  }

  /**
   * The replica as it stands after every record delivered so far, encoded in slices between which
   * nothing applies (ReplicaState.encodeInSlices): a big table's snapshot never holds the event loop.
   * Rejects if the follower closes first.
   */
  snapshot(): Promise<{ readonly position: LogPosition; readonly bytes: Buffer; readonly entries: number; readonly appliedLogBytes: number }> {
    return new Promise((resolve, reject) => {
      const closed = (): void => reject(new Error('the follower closed before the snapshot was encoded'));
      const encode = function* (this: LogFollower): Sliced<undefined> {
        const state = this.current;
        let settled = false;
        try {
          const bytes = yield* state.encodeInSlices(this.sliceEntries);
          settled = true;
          resolve({ position: state.position, bytes, entries: state.table.size, appliedLogBytes: this.appliedLogBytes });
        } catch (error) {
          settled = true;
          reject(error);
        } finally {
          // Ended between two slices (the follower closed).
          if (!settled) closed();
        }
        return undefined;
      };
      this.backlog.push({ start: () => encode.call(this), generation: this.generation, dropped: closed });
      if (!this.nextSliceScheduled) this.pump();
    });
  }

  /**
   * Applies the backlog in order, in slices (see ReplicaState.applyInSlices): as much as one slice
   * allows now (all of it, unless a command touches more than sliceEntries entries), the rest a
   * slice per turn of the event loop, so one release-all of many entries never holds the loop. A
   * gap found restarts the watch that delivered the records, if it is still the current one.
   */
  private pump(): void {
    if (this.pumping) return; // applying settles answers, which may deliver records: the loop below takes them
    this.pumping = true;
    this.nextSliceScheduled = false;
    try {
      while (!this.closed) {
        if (this.applying === undefined) {
          const next = this.backlog.shift();
          if (next === undefined) break;
          this.applying = { work: next.start(), generation: next.generation, done: next.done };
        }
        const slice = this.applying.work.next();
        if (slice.done !== true) {
          this.nextSliceScheduled = true;
          this.deps.timers.soon(() => this.pump());
          return;
        }
        const { generation, done } = this.applying;
        this.applying = undefined;
        done?.();
        if (slice.value !== undefined && generation === this.generation) this.restartWatch('gap', slice.value);
      }
    } finally {
      this.pumping = false;
    }
    for (const resolve of this.whenIdleWaiters.splice(0)) resolve();
  }

  /**
   * Applies the records not applied yet, in order; at a gap stops and says where (nothing past it
   * is applied). A part of a value that cannot be read is refused (logged, counted) and the log
   * goes on past it: every node decodes alike, so every node refuses it alike.
   */
  private *applyRecords(records: readonly LogRecord[]): Sliced<string | undefined> {
    for (const record of records) {
      if (record.version <= this.current.position.version) continue; // delivered again after a restart
      const parts = decodeValue(record.value, this.applier.ownCommands);
      try {
        // Only the value's first part can meet a gap (ReplicaState.apply); the rest of a bundle
        // follows it at the same version, an empty first batch or not.
        let place = 0;
        for (let i = 0; i < parts.length; i++) {
          const part = parts[i]!;
          const inValue = { place, first: i === 0 };
          if (isRefused(part)) {
            this.current.refuse(record, inValue);
            this.refused(record, parts.length > 1 ? `batch ${i + 1} of a bundle of ${parts.length}: ${part.refused}` : part.refused);
            continue;
          }
          yield* this.applier.applyBatchInSlices(this.current, part, record, inValue, this.sliceEntries);
          place += part.commands.length;
        }
      } catch (error) {
        if (error instanceof LogGapError) {
          this.afterApply();
          return error.message;
        }
        throw error;
      }
      this.appliedLogBytes += record.value.length;
    }
    this.afterApply();
    return undefined;
  }

  private refused(record: LogRecord, reason: string): void {
    this.refusedParts++;
    this.lastRefused = { version: record.version, revision: record.revision, reason };
    this.deps.logger.event('log-value-refused', { version: record.version, revision: record.revision, reason });
  }

  private afterApply(): void {
    this.progressAt = this.deps.clock.now();
    this.releaseApplyWaiters();
    this.applier.progressed(this.current.position.version);
  }

  /**
   * A watch can stall without ending (a stream that stays open but delivers nothing). When etcd
   * is known to hold batches we have not applied and none arrived for WATCH_STALL_MS (or the
   * commit timeout, if shorter), the watch is restarted from the last applied revision.
   */
  checkProgress(now: number): void {
    if (this.reloading || this.watch === undefined) return;
    // A command applied in slices is progress, however long it takes.
    if (this.applying !== undefined) {
      this.progressAt = now;
      return;
    }
    this.probeHeadIfQuiet(now);
    const behind = this.contact.knownHead - this.current.position.version;
    if (behind <= 0) {
      this.progressAt = now;
      return;
    }
    const stall = Math.min(WATCH_STALL_MS, this.commitTimeoutMs);
    if (now - this.progressAt < stall) return;
    this.progressAt = now;
    this.restartWatch('broken', `no batch arrived for ${stall} ms while ${behind} are known`);
  }

  /** Reads the log's head when no answer has named it for HEAD_PROBE_MS (see there). */
  private probeHeadIfQuiet(now: number): void {
    if (this.contact.headReports !== this.headReportsSeen) {
      this.headReportsSeen = this.contact.headReports;
      this.headQuietSince = now;
      return;
    }
    if (this.probingHead || now - this.headQuietSince < HEAD_PROBE_MS) return;
    this.probingHead = true;
    this.headQuietSince = now;
    this.deps.log.head(Math.min(this.commitTimeoutMs, HEAD_PROBE_MS)).then(
      (head) => {
        this.probingHead = false;
        this.contact.heard(true, head.version);
      },
      (error: unknown) => {
        this.probingHead = false;
        this.contact.heard(false);
        this.deps.logger.debug?.(`reading the log's head failed: ${(error as Error).message}`);
      },
    );
  }

  private releaseApplyWaiters(): void {
    const version = this.current.position.version;
    for (let i = 0; i < this.waitingForApply.length;) {
      const waiter = this.waitingForApply[i]!;
      if (waiter.version <= version) {
        this.waitingForApply.splice(i, 1);
        waiter.resolve();
      } else {
        i++;
      }
    }
  }

  /** Stops following; the replica stays as applied. */
  close(): void {
    this.closed = true;
    this.applying?.work.return(undefined);
    this.applying = undefined;
    for (const dropped of this.backlog.splice(0)) dropped.dropped?.();
    for (const resolve of this.whenIdleWaiters.splice(0)) resolve();
    this.watch?.close();
    this.watch = undefined;
    this.generation++;
  }
}
