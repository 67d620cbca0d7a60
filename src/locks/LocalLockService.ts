import type { ByteString } from '../bytes.js';
import type { Contender, FencedPosition, QueueView } from '../protocol/messages.js';
import type { Clock } from '../runtime/Clock.js';
import { realTimers, type Timers } from '../runtime/Timers.js';
import { LossReason, NO_WAIT_BOUND } from '../protocol/constants.js';
import { NO_DEADLINE } from './DeadlineHeap.js';
import { NO_ID } from './HashIndex.js';
import type { Answer, LockCounts, LockRequest, LockService, SavedHold, SavedLock, WaitingFigures } from './LockService.js';
import { Later } from './Later.js';
import { APPLY_SLICE_ENTRIES, LockTable, type LockTableOptions, type SlicedRelease } from './LockTable.js';
import { Waiters, type GrantObserver } from './Waiters.js';
import { SingleNodeRules, type SingleNodeLimits } from './SingleNodeRules.js';
import { NO_CLIENT, Refusal, REFUSAL_NAMES, REFUSALS, type LimitFigures } from './TableLimits.js';

/**
 * Fencing tokens a single node may grant per millisecond, on average since it started, and still
 * be sure a restart after a crash (its lock file older than its last grants) starts above them:
 * the daemon starts tokens at the wall clock's milliseconds times this. A node grants at most a
 * few hundred a millisecond; 2^53 is reached in the year 2248.
 */
export const TOKENS_PER_MS = 1024;

/** Sweep often enough that an entry disappears well within a second of its deadline. */
export const SWEEP_INTERVAL_MS = 100;
/** Expiries per event-loop turn, so a million simultaneous expiries never stall serving. */
export const SWEEP_BUDGET = 5_000;

/** Sweeps per look at how busy the table has been (about a second). */
export const QUIET_CHECK_SWEEPS = 10;
/** Entries created in a second, at most, for that second to count as quiet. */
export const QUIET_ARRIVALS = 100;
/** Entries created (and gone again) since the last call that make a quiet spell worth onQuietAfterChurn. */
export const CHURN_WORTH_COLLECTING = 100_000;

export interface LocalLockServiceOptions extends LockTableOptions, SingleNodeLimits {
  /**
   * Told of each request refused (position 0) because a limit was reached (Refusal), with the
   * connection it came through (NO_CLIENT if none): the log line, throttled by its caller.
   */
  readonly onRefused?: (why: Exclude<Refusal, 0>, request: LockRequest, client: number) => void;
  /**
   * Fencing tokens start above this (default 0). The daemon passes the wall clock in milliseconds
   * times TOKENS_PER_MS, so that tokens still grow after a crash left an older lock file behind.
   */
  readonly tokenFloor?: number;
  /**
   * Entries whose TTL or TTW ran out, reported by each sweep: those it removed, and waiters that
   * were dropped since the last sweep because their wait had run out when the lock came free.
   */
  readonly onExpired?: (count: number) => void;
  /**
   * Called once when the table falls quiet (a second with almost no new entries, fewer than
   * CHURN_WORTH_COLLECTING entries held) after at least that many
   * entries came and went: the moment to give back the memory their churn grew (the daemon runs a
   * full collection then; see collectGarbage). At most once per such burst.
   */
  readonly onQuietAfterChurn?: () => void;
  /**
   * Called when the sweep has rebuilt the table's records at a fraction of their peak size (see
   * LockTable.compactIfSparse): the old ones are garbage now, to be collected for their memory
   * to go back.
   */
  readonly onCompacted?: () => void;
  /** Told of every grant (how long it was waited for) and every end (how): the metrics. */
  readonly grants?: GrantObserver;
  /** Entries a release-all or `*` removes per turn of the event loop (APPLY_SLICE_ENTRIES; tests vary it). */
  readonly sliceEntries?: number;
}

/** The single-node LockService: a LockTable in this process, swept by one periodic task. */
export class LocalLockService implements LockService {
  readonly table: LockTable;
  private readonly rules: SingleNodeRules;
  private readonly stopSweeping: () => void;
  private sweeping = false;
  /** The table's count of dropped overdue waiters at the last sweep, which reports those since. */
  private droppedAtSweep = 0;
  private closed = false;
  private sweepsSinceCheck = 0;
  private arrivalsAtCheck = 0;
  private arrivalsAtCollect = 0;

  /** Clients waiting for a grant or a loss (0x0B, 0x0C), answered as the table grants and ends entries. */
  private readonly waiters: Waiters;
  /** Releases too big for one turn, oldest first, each answered once its last slice ran. */
  private readonly sliced: Array<{ readonly release: SlicedRelease; readonly answer: Later<number> }> = [];
  private sliceScheduled = false;
  private readonly whenSlicedDone: Array<() => void> = [];
  private readonly sliceEntries: number;

  constructor(
    private readonly clock: Clock,
    private readonly timers: Timers = realTimers,
    private readonly options: LocalLockServiceOptions = {},
  ) {
    this.sliceEntries = options.sliceEntries ?? APPLY_SLICE_ENTRIES;
    this.rules = new SingleNodeRules(options, options.tokenFloor);
    this.table = new LockTable(clock, this.rules, options);
    this.waiters = new Waiters(
      this.table,
      clock,
      timers,
      {
        boundPassed: (wait) => wait.answer.resolve({ position: this.table.location(wait.key, wait.index, wait.owner), token: 0 }),
        abandoned: (wait) => {
          this.table.settle(wait.key, wait.index);
          this.table.cancelWaiter(wait.key, wait.index, wait.owner);
        },
      },
      options.grants,
    );
    this.stopSweeping = timers.every(SWEEP_INTERVAL_MS, () => this.sweep());
  }

  /** One budgeted slice of expiry; reschedules itself while more are due. */
  private sweep(): void {
    if (this.sweeping || this.closed) return;
    if (++this.sweepsSinceCheck >= QUIET_CHECK_SWEEPS) this.checkQuiet();
    const removed = this.table.expire(SWEEP_BUDGET);
    const dropped = this.table.droppedOverdueWaiters;
    const expired = removed + dropped - this.droppedAtSweep;
    this.droppedAtSweep = dropped;
    if (expired > 0) this.options.onExpired?.(expired);
    if (removed < SWEEP_BUDGET && this.table.compactIfSparse()) this.options.onCompacted?.();
    if (removed === SWEEP_BUDGET) {
      this.sweeping = true;
      this.timers.soon(() => {
        this.sweeping = false;
        this.sweep();
      });
    }
  }

  /** About once a second: calls onQuietAfterChurn if the table has just fallen quiet after much churn. */
  private checkQuiet(): void {
    this.sweepsSinceCheck = 0;
    const table = this.table;
    const arrivals = this.rules.arrivals;
    const quiet = arrivals - this.arrivalsAtCheck < QUIET_ARRIVALS;
    this.arrivalsAtCheck = arrivals;
    if (!quiet || arrivals - this.arrivalsAtCollect < CHURN_WORTH_COLLECTING) return;
    if (table.size >= CHURN_WORTH_COLLECTING) return;
    this.arrivalsAtCollect = arrivals;
    this.options.onQuietAfterChurn?.();
  }

  /**
   * A release-all or `*`: one slice now; if entries are left, the rest a slice per turn of the
   * event loop (runSlices) and the count answered after the last. What it took is gone for every
   * command from now on (each settles the locks it names first: see SlicedRelease).
   */
  private released(release: SlicedRelease): number | Later<number> {
    if (release.run(this.sliceEntries)) return release.total;
    const answer = new Later<number>();
    this.sliced.push({ release, answer });
    this.scheduleSlice();
    return answer;
  }

  private scheduleSlice(): void {
    if (this.sliceScheduled) return;
    this.sliceScheduled = true;
    this.timers.soon(() => this.runSlice());
  }

  /** One slice of the oldest release in slices; the others wait their turn (a turn of the loop between slices). */
  private runSlice(): void {
    this.sliceScheduled = false;
    const head = this.sliced[0];
    if (head !== undefined && head.release.run(this.sliceEntries)) {
      this.sliced.shift();
      head.answer.resolve(head.release.total);
    }
    // A release that finished through settles (others' commands) is answered in its turn too.
    while (this.sliced[0]?.release.done === true) {
      const done = this.sliced.shift()!;
      done.answer.resolve(done.release.total);
    }
    if (this.sliced.length > 0) this.scheduleSlice();
    else for (const resolve of this.whenSlicedDone.splice(0)) resolve();
  }

  /** Resolves once no release in slices is left (a saved lock file then holds none half-done). */
  private slicesDone(): Promise<void> {
    if (this.sliced.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenSlicedDone.push(resolve));
  }

  // Commands answer directly: the table is in this process (see Answer in LockService.ts). While
  // a release runs in slices each first settles the lock it names (a no-op otherwise).

  findOwner(key: ByteString, index: ByteString): ByteString {
    this.table.settle(key, index);
    return this.table.findOwner(key, index);
  }

  request(r: LockRequest, allowCreate: boolean, _receivedAt?: number, client = NO_CLIENT): number {
    this.table.settle(r.key, r.index);
    const position = this.table.request(r, allowCreate, client);
    if (position === 0) this.refused(r, client);
    return position;
  }

  requestFenced(r: LockRequest, allowCreate: boolean, receivedAt?: number, client = NO_CLIENT): FencedPosition {
    const position = this.request(r, allowCreate, receivedAt, client);
    return { position, token: position === 1 ? this.table.fence(r.key, r.index, r.owner) : 0 };
  }

  /** A request answered 0: told to onRefused if a limit refused it (not a drain). */
  private refused(r: LockRequest, client: number): void {
    const why = this.table.lastRefusal;
    if (why !== Refusal.None) this.options.onRefused?.(why, r, client);
  }

  limitFigures(): LimitFigures {
    return {
      bytesUsed: this.table.bytes,
      bytesLimit: this.rules.maxTableBytes,
      refused: REFUSALS.map((why) => [REFUSAL_NAMES[why], this.table.refusals(why)] as const),
    };
  }

  /**
   * Acquire and wait (0x0B): as requestFenced, answered at once when the request owns or is
   * refused, or when `waitMs` is 0; else once the entry is granted (1 and its token), goes (0),
   * or `waitMs` passes (its position then; NO_WAIT_BOUND: no bound).
   */
  acquire(r: LockRequest, allowCreate: boolean, waitMs: number, receivedAt?: number, client = NO_CLIENT): Answer<FencedPosition> {
    const answered = this.requestFenced(r, allowCreate, receivedAt, client);
    if (answered.position <= 1 || waitMs === 0) return answered;
    const entry = this.table.entryOf(r.key, r.index, r.owner);
    const deadline = waitMs === NO_WAIT_BOUND ? NO_DEADLINE : this.clock.now() + waitMs;
    return this.waiters.waitForGrant(r.key, r.index, r.owner, entry, deadline);
  }

  /** The loss notice (0x0C): answered when the owner's entry stops owning, with how; at once (NotOwner) if it does not own. */
  awaitLoss(key: ByteString, index: ByteString, owner: ByteString): Answer<number> {
    this.table.settle(key, index);
    const entry = this.table.entryOf(key, index, owner);
    if (entry === NO_ID || !this.table.owns(entry)) return LossReason.NotOwner;
    return this.waiters.waitForLoss(key, index, owner, entry);
  }

  queues(key: ByteString, limit: number): QueueView[] {
    this.table.settleKey(key);
    return this.table.queues(key, limit);
  }

  get waiting(): WaitingFigures {
    return { ...this.table.waiting, grantWaits: this.waiters.grantWaits, lossWaits: this.waiters.lossWaits };
  }

  fence(key: ByteString, index: ByteString, owner: ByteString): number {
    this.table.settle(key, index);
    return this.table.fence(key, index, owner);
  }

  location(key: ByteString, index: ByteString, owner: ByteString): number {
    this.table.settle(key, index);
    return this.table.location(key, index, owner);
  }

  renew(key: ByteString, index: ByteString, owner: ByteString): boolean {
    this.table.settle(key, index);
    return this.table.renew(key, index, owner);
  }

  release(key: ByteString, index: ByteString, owner: ByteString): number {
    this.table.settle(key, index);
    return this.table.release(key, index, owner);
  }

  releaseKey(key: ByteString, owner: ByteString): number | Later<number> {
    return this.released(this.table.beginReleaseKey(key, owner));
  }

  releaseAll(owner: ByteString): number | Later<number> {
    return this.released(this.table.beginReleaseAll(owner));
  }

  list(key: ByteString, limit: number): Contender[] {
    this.table.settleKey(key);
    return this.table.list(key, limit);
  }

  async counts(): Promise<LockCounts> {
    return { owners: this.table.owners, waiters: this.table.waiters };
  }

  drainCounts(): Promise<LockCounts> {
    return this.counts();
  }

  async snapshot(): Promise<SavedLock[]> {
    await this.slicesDone();
    return [...this.table.snapshot()];
  }

  async highestToken(): Promise<number> {
    return this.rules.highestToken;
  }

  async savedHolds(): Promise<SavedHold[]> {
    return [...this.table.savedHolds()];
  }

  async restore(saved: readonly SavedLock[], highestToken = 0, holds: readonly SavedHold[] = []): Promise<void> {
    // Tokens go on above every one the saved table ever handed out, and above those its entries hold.
    this.rules.noteToken(highestToken);
    for (const s of saved) this.rules.noteToken(s.token);
    this.table.restore(saved, holds);
  }

  /** Stops sweeping and answers every wait; releases in slices run on to their end (snapshot waits for them). */
  async close(): Promise<void> {
    this.closed = true;
    this.stopSweeping();
    this.waiters.close(new Error('the server is shutting down'));
  }
}
