import type { Appended } from './AppendRouter.js';
import type { BatchApplier } from './LogFollower.js';
import type { Appender, ClusterDeps } from './ClusterOptions.js';
import type { Later } from '../locks/Later.js';
import { CommitTimeoutError, ReadAnswer, Round, type WriteAnswer } from './GroupCommit.js';
import { BatchEncoder, ETCD_BOUND_FORMAT, TABLE_BOUNDS_FORMAT, type Batch, type BatchHeader, type LogCommand, type OwnBatch } from './LogCodec.js';
import { runToEnd, type PlaceInValue, type ReplicaState, type Sliced } from './ReplicaState.js';
import { AppendRefusedError, type LogRecord } from './ReplicatedLog.js';
import type { StoreContact } from './StoreContact.js';
import { pause } from '../runtime/Timers.js';

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
/**
 * Longest a queued round is held for the clients the last round answered (see Committer). The
 * wait is also never longer than that last round took; 10 ms is far below any client's timeout
 * and above a loaded machine's turnaround of a reply into the next command.
 */
export const RETURN_WAIT_MAX_MS = 10;

/** Who this node is in the batches it writes. */
export interface ProposerIdentity {
  readonly nodeName: string;
  /** Random per process: with the name it tells one process's batches from a restarted one's. */
  readonly incarnation: number;
  /**
   * The bound on the entries' etcd bytes this node's batches carry (--etcd-quota-bytes' share),
   * once every live node reads it (ETCD_BOUND_FORMAT); 0 or absent: none.
   */
  readonly entryBytesBound?: number;
  /**
   * --max-table-bytes and --max-locks-per-owner, carried in this node's batches once every live
   * node reads them (TABLE_BOUNDS_FORMAT); 0 or absent: none.
   */
  readonly tableBytesBound?: number;
  readonly ownerEntriesBound?: number;
}

/**
 * The committer: group commit for one node. Commands arrive in rounds; one round is in flight at
 * a time (its writes as one batch appended to the log, or, for a round of reads only, one
 * linearizable read of the log head); what arrives meanwhile forms the next round. A round is
 * answered as its batch (or the barrier's version) is applied here by the follower. A round not
 * committed within --commit-timeout is given up: its commands get no answer and their
 * connections close, but only once none of its append attempts can still commit (the log's
 * `lateCommitMs` after the last one rejected), so a command that got no answer never takes effect
 * after its connection closed, whatever node the client asks next.
 *
 * Waiting for the answered: with one round in flight, busy clients split into two cohorts that
 * take turns (those answered by a round send their next command while the other cohort's round
 * is already out), so each command waits for two rounds and each round carries half the clients.
 * So once a round is answered, the round queued behind it is held until as many commands as that
 * round answered have arrived (its clients came back), or for at most as long as that round took
 * (and RETURN_WAIT_MAX_MS): the cohorts merge into one round, each round carries about twice the
 * commands, and on a machine where every round costs CPU in the node, the gRPC client and etcd
 * that is what lets more commands through. Clients that do not come back cost the queued round
 * at most one more round's time. A full round (MAX_BATCH_COMMANDS, MAX_BATCH_BYTES) goes at once.
 */
export class Committer implements BatchApplier {
  private readonly encoder = new BatchEncoder();
  /** Rounds waiting to be sent; the last one takes new commands. */
  private readonly queued: Round[] = [];
  private inFlight: Round | undefined;
  private nextSeq = 1;
  /** The incarnation this node's next batch carries (identity's, until reincarnate). */
  private incarnation: number;
  private dispatchScheduled = false;
  private closing = false;
  /** Commands still expected from the clients the last round answered; 0 = not waiting for them. */
  private returning = 0;
  /** Clock time the wait for them ends (see RETURN_WAIT_MAX_MS). */
  private returnWaitEndsAt = 0;
  private cancelReturnWait: (() => void) | undefined;
  /** A seal is in progress (one at a time). */
  private sealing = false;
  /** A round was given up on its time fence, unsealed: seals are tried until one succeeds. */
  private sealOwed = false;
  /** Clock time before which no owed seal is started again (one failed just before). */
  private owedSealAt = 0;

  /** Where append attempts go: the router's way (a sequencer), or etcd directly. */
  private readonly appender: Appender;
  /** The version the replica has applied through, as the follower last said (progressed). */
  private applied = 0;

  constructor(
    private readonly identity: ProposerIdentity,
    private readonly commitTimeoutMs: number,
    private readonly deps: ClusterDeps,
    private readonly contact: StoreContact,
  ) {
    this.incarnation = identity.incarnation;
    this.appender = deps.router ?? { append: async (value, timeoutMs) => ({ confirmed: true, position: await deps.log.append(value, timeoutMs) }) };
  }

  /**
   * Queues a mutating command for the next batch; its result goes to `answer`. `applied`, if
   * given, runs right after the command is applied here, before any later command of its batch
   * (see Round.addWrite).
   */
  submit(command: LogCommand, answer: WriteAnswer, applied?: (result: number) => void, receivedAt?: number): void {
    if (this.closing) {
      answer.reject(leavingError());
      return;
    }
    let round = this.gathering();
    if (!round.addWrite(command, answer, applied)) {
      round = this.openRound();
      if (!round.addWrite(command, answer, applied)) {
        answer.reject(new Error('a command larger than a whole batch')); // never: a command is at most a few hundred bytes
        return;
      }
    }
    this.arrived(round, receivedAt);
  }

  /**
   * Queues a read, answered (by `evaluate` against the replica) once every command before it is
   * applied. `weigh` marks a heavy read (a list) and says what its answer weighs (see
   * LIST_ENTRIES_PER_PASS).
   */
  read<T>(evaluate: () => T, receivedAt?: number, weigh?: (value: T) => number): Later<T> {
    const answer = new ReadAnswer(evaluate, weigh);
    if (this.closing) {
      answer.reject(leavingError());
      return answer;
    }
    const round = this.gathering();
    round.addRead(answer);
    this.arrived(round, receivedAt);
    return answer;
  }

  /**
   * A command joined `round`: its deadline counts from when the command was read, if that is known
   * and earlier (it waited in its connection's input); if it was the last one the wait for
   * returning clients expected, the round goes.
   */
  private arrived(round: Round, receivedAt: number | undefined): void {
    if (receivedAt !== undefined) round.deadline = Math.min(round.deadline, receivedAt + this.commitTimeoutMs);
    if (this.returning > 0 && --this.returning === 0) this.scheduleDispatch();
  }

  /** The last round answered its commands: the next one waits for their clients (see the class comment). */
  private awaitReturns(round: Round): void {
    const now = this.deps.clock.now();
    this.endReturnWait();
    this.returning = round.size;
    this.returnWaitEndsAt = now + Math.min(RETURN_WAIT_MAX_MS, now - round.sentAt);
  }

  /** Whether the queued round is held for returning clients; arms the timer that ends the wait. */
  private holdingForReturns(): boolean {
    const left = this.returnWaitEndsAt - this.deps.clock.now();
    if (this.returning === 0 || this.queued.length !== 1 || left <= 0) {
      this.endReturnWait();
      return false;
    }
    this.cancelReturnWait ??= this.deps.timers.after(left, () => {
      this.cancelReturnWait = undefined;
      this.returning = 0;
      this.scheduleDispatch();
    });
    return true;
  }

  private endReturnWait(): void {
    this.returning = 0;
    this.cancelReturnWait?.();
    this.cancelReturnWait = undefined;
  }

  /** The round taking new commands: the last one queued, or a new one. */
  private gathering(): Round {
    return this.queued[this.queued.length - 1] ?? this.openRound();
  }

  /** Queues a new round, due a commit timeout from now, to be sent once those before it are done. */
  openRound(): Round {
    const round = new Round(this.deps.clock.now() + this.commitTimeoutMs);
    this.queued.push(round);
    this.scheduleDispatch();
    return round;
  }

  private scheduleDispatch(): void {
    if (this.dispatchScheduled || this.inFlight !== undefined || this.holdingForReturns()) return;
    this.dispatchScheduled = true;
    // Let the rest of this turn's requests (a pipelined burst) join the round first.
    queueMicrotask(() => {
      this.dispatchScheduled = false;
      this.dispatch();
    });
  }

  private dispatch(): void {
    if (this.inFlight !== undefined || this.closing) return;
    const round = this.queued.shift();
    if (round === undefined) return;
    this.inFlight = round;
    round.sentAt = this.deps.clock.now();
    if (round.writes > 0) {
      round.seq = this.nextSeq++;
      round.incarnation = this.incarnation;
      round.bytes = this.encoder.encode({
        proposer: this.identity.nodeName,
        incarnation: this.incarnation,
        seq: round.seq,
        commands: round.commands,
        entryBytesBound: this.entryBytesBound(),
        ...this.tableBounds(),
      });
      void this.append(round, round.bytes);
    } else {
      void this.barrier(round);
    }
  }

  /** The bound this node's next batch carries: its own, once every live node reads it (else none). */
  private entryBytesBound(): number {
    const bound = this.identity.entryBytesBound ?? 0;
    return bound > 0 && this.deps.log.mayWrite(ETCD_BOUND_FORMAT) ? bound : 0;
  }

  /** The table's bounds this node's next batch carries: its own, once every live node reads them (else none). */
  private tableBounds(): { tableBytesBound?: number; ownerEntriesBound?: number } {
    const { tableBytesBound = 0, ownerEntriesBound = 0 } = this.identity;
    if ((tableBytesBound === 0 && ownerEntriesBound === 0) || !this.deps.log.mayWrite(TABLE_BOUNDS_FORMAT)) return {};
    return { tableBytesBound, ownerEntriesBound };
  }

  /**
   * From the next batch on, this node proposes as incarnation `incarnation` (its earlier one's
   * waits were ended while it lived: see OrphanedWaits). A round already sent keeps the one it was
   * sent with; the sequence numbers go on, so none repeats under either.
   */
  reincarnate(incarnation: number): void {
    this.incarnation = incarnation;
  }

  /** Whether attempts of this round may still be sent. */
  private trying(round: Round): boolean {
    return this.inFlight === round && !this.closing && !round.committed;
  }

  /**
   * Sends the batch; a failure before the deadline is retried with the same seq (applied once).
   * Each failed attempt may still commit for the log's lateCommitMs: the round remembers when
   * the last of them can no longer land.
   */
  private async append(round: Round, bytes: Uint8Array): Promise<void> {
    const { log, clock } = this.deps;
    for (let attempt = 0; this.trying(round); attempt++) {
      const left = round.deadline - clock.now();
      if (left <= 0) break;
      const started = clock.now();
      const limitMs = Math.min(left, attemptLimit(attempt));
      round.attempting = true;
      try {
        const appended = await this.appender.append(bytes, limitMs);
        if (!appended.confirmed && this.inFlight !== round) {
          // The watch brought the batch before the sequencer's word came: whether it held is known.
          appended.settle(round.applied);
          return;
        }
        if (appended.confirmed) {
          this.contact.heard(true, appended.position.version);
          round.committed = true;
          return; // answered when the watch brings the batch back
        }
        // The leader's sequencer says it committed: believed once the batch is applied here.
        if (await this.checkClaim(round, appended, limitMs - (clock.now() - started))) return;
        round.mayLandUntil = Math.max(round.mayLandUntil, clock.now() + log.lateCommitMs);
        this.deps.logger.debug?.(`batch ${round.seq}: the sequencer's word that it committed at ${appended.position.version} did not hold`);
      } catch (error) {
        this.contact.heard(false);
        // An attempt refused for good (nothing sent, or refused before it could be applied) can
        // never commit: only the others need their fence.
        if (!(error instanceof AppendRefusedError)) round.mayLandUntil = Math.max(round.mayLandUntil, clock.now() + log.lateCommitMs);
        this.deps.logger.debug?.(`append of batch ${round.seq} failed: ${(error as Error).message}`);
        await this.retryPause(started, attempt, round);
      } finally {
        round.attempting = false;
      }
    }
  }

  /**
   * Waits for a sequencer's claim that the round's batch committed at a version to come true here:
   * true once the batch is applied (it settles the round); false once this node applied that
   * version without it, or `waitMs` passed first (the attempt's own limit): then the round tries
   * again, its attempt counted as one that may still land. A broken sequencer costs time, never a
   * retry skipped, and its word never reaches StoreContact.knownHead (readiness).
   */
  private checkClaim(round: Round, appended: Appended & { confirmed: false }, waitMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const cancel = this.deps.timers.after(Math.max(0, waitMs), () => round.claim?.settle(false));
      round.claim = {
        version: appended.position.version,
        settle: (held) => {
          cancel();
          round.claim = undefined;
          appended.settle(held);
          resolve(held);
        },
      };
      this.progressed(this.applied); // the version may be applied already
    });
  }

  private async barrier(round: Round): Promise<void> {
    const { log, clock } = this.deps;
    for (let attempt = 0; this.trying(round); attempt++) {
      const left = round.deadline - clock.now();
      if (left <= 0) return;
      const started = clock.now();
      try {
        const head = await log.head(Math.min(left, attemptLimit(attempt)));
        this.contact.heard(true, head.version);
        if (this.inFlight !== round) return;
        round.barrier = head.version;
        this.progressed(this.applied);
        return;
      } catch (error) {
        this.contact.heard(false);
        this.deps.logger.debug?.(`read barrier failed: ${(error as Error).message}`);
        await this.retryPause(started, attempt, round);
      }
    }
  }

  /** After a timed-out attempt, try again at once; after one that failed fast, pause briefly. */
  private async retryPause(started: number, attempt: number, round: Round): Promise<void> {
    const now = this.deps.clock.now();
    if (now - started >= attemptLimit(attempt)) return;
    await pause(this.deps.timers, Math.min(ATTEMPT_RETRY_MS, Math.max(0, round.deadline - now)));
  }

  /** The round in flight, if `header` is its batch's. */
  private inFlightWith(header: BatchHeader): Round | undefined {
    const round = this.inFlight;
    const mine =
      round !== undefined &&
      round.seq > 0 &&
      header.seq === round.seq &&
      header.incarnation === round.incarnation &&
      header.proposer === this.identity.nodeName;
    return mine ? round : undefined;
  }

  /**
   * The commands of the batch in flight, when `header` is its: the follower need not decode the
   * bytes this node encoded from them (every attempt sends those same bytes; a restarted process
   * has another incarnation).
   */
  readonly ownCommands = (header: BatchHeader): OwnBatch | undefined => this.inFlightWith(header);

  /**
   * The follower applies `batch`: if it is the one in flight here, its commands get their results
   * and the reads sent between them their answers, as they apply.
   */
  applyBatch(state: ReplicaState, batch: Batch, record: LogRecord, inValue: PlaceInValue): void {
    runToEnd(this.applyBatchInSlices(state, batch, record, inValue, Number.POSITIVE_INFINITY));
  }

  /** As applyBatch, in slices (see ReplicaState.applyInSlices): this node's answers come as their commands apply. */
  *applyBatchInSlices(state: ReplicaState, batch: Batch, record: LogRecord, inValue: PlaceInValue, sliceEntries: number): Sliced<void> {
    const round = this.inFlightWith(batch);
    if (round === undefined) {
      yield* state.applyInSlices(batch, record, undefined, inValue, sliceEntries);
      return;
    }
    const results = yield* state.applyInSlices(batch, record, (i, previous) => round.reached(i, previous), inValue, sliceEntries);
    // Given up between two slices (its deadline passed): its connections are closed already.
    if (this.inFlight !== round) return;
    if (results === undefined) {
      this.finishRound(round, new CommitTimeoutError('batch applied twice'));
    } else {
      round.settle(results);
      this.deps.observer?.batchCommitted(this.deps.clock.now() - round.sentAt, round.writes);
      this.finishRound(round);
    }
  }

  /** A snapshot replaced the replica: a round whose batch it already holds can never see its own apply here. */
  stateReplaced(state: ReplicaState): void {
    this.applied = state.position.version;
    const round = this.inFlight;
    if (round !== undefined && round.seq > 0 && state.lastSeq(this.identity.nodeName, round.incarnation) >= round.seq) {
      this.finishRound(round, new CommitTimeoutError('the batch was applied inside a snapshot; its results are unknown here'), true);
    }
  }

  /**
   * The replica applied through `version`: a read-only round whose barrier it reached is answered;
   * a sequencer's claim for a version applied without the round's batch is refuted.
   */
  progressed(version: number): void {
    this.applied = version;
    const round = this.inFlight;
    if (round === undefined) return;
    const applied = version;
    if (round.claim !== undefined && applied >= round.claim.version) round.claim.settle(false);
    if (round.barrier === undefined || applied < round.barrier) return;
    round.settle([]);
    this.finishRound(round);
  }

  /**
   * The round is done: answered (no error), or failed. A sequencer's claim waiting on it is
   * settled: held if the batch was applied (answered, or inside a snapshot), else not known.
   */
  private finishRound(round: Round, error?: Error, applied = error === undefined): void {
    round.applied = applied;
    round.claim?.settle(applied);
    if (error !== undefined) round.fail(error);
    if (this.inFlight === round) {
      this.inFlight = undefined;
      if (error === undefined) this.awaitReturns(round);
      // Reads the round's pass had no budget left for (big lists) go with the next round, in order.
      if (round.deferred.length > 0) {
        const next = this.gathering();
        for (const read of round.deferred.splice(0)) next.addRead(read);
      }
      if (this.queued.length > 0) this.scheduleDispatch();
    }
  }

  /**
   * Whether a round past its deadline may be given up now: nothing of it is on its way (an
   * attempt still out, or a failed one within lateCommitMs, could still commit). A batch known to
   * be committed may be given up at once: it took effect before its connections close, so any
   * read anywhere after that sees it.
   */
  private mayGiveUp(round: Round, now: number): boolean {
    return round.committed || round.seq === 0 || (!round.attempting && (round.sealed || now >= round.mayLandUntil));
  }

  /**
   * Asks the store to seal this node's appends (ReplicatedLog.seal): for `round`, once none of
   * its attempts is out, so that it can be given up before its time fence, which a new etcd leader
   * can outlast (it renews every lease); without a round, to stop the attempts of a round given up
   * unsealed from landing later still. One seal at a time; a failed one is tried again next tick.
   */
  private seal(round: Round | undefined, now: number): void {
    if (this.sealing) return;
    this.sealing = true;
    const timeoutMs = round === undefined ? 2 * STORE_ATTEMPT_MS : Math.max(STORE_ATTEMPT_MS, round.mayLandUntil - now);
    this.deps.log.seal(timeoutMs).then(
      () => {
        this.sealing = false;
        this.sealOwed = false;
        if (round !== undefined) {
          round.sealed = true;
          this.tick(this.deps.clock.now());
        }
      },
      (error: unknown) => {
        this.sealing = false;
        if (round === undefined) this.owedSealAt = this.deps.clock.now() + STORE_ATTEMPT_MS;
        this.deps.logger.debug?.(`seal failed: ${(error as Error).message}`);
      },
    );
  }

  /** Whether an attempt of `round` that rejected may still commit, as far as this node knows. */
  private mayStillLand(round: Round): boolean {
    return !round.committed && round.seq > 0 && !round.sealed && round.mayLandUntil > Number.NEGATIVE_INFINITY;
  }

  /** Whether `round` waits out its fence with none of its attempts out: a seal can end the wait. */
  private sealable(round: Round, now: number): boolean {
    return this.mayStillLand(round) && !round.attempting && now < round.mayLandUntil;
  }

  /**
   * Called every cluster tick: gives up rounds past their deadline. `applying`: the follower is
   * applying in slices (a release-all of many entries, the leader's snapshot), so the apply of a
   * round that committed is on its way: it is answered then, not given up meanwhile (its clients
   * would lose the answer of a command that took effect, for want of a turn of the follower).
   */
  tick(now: number, applying = false): void {
    const round = this.inFlight;
    if (round !== undefined && round.deadline <= now && this.sealable(round, now)) this.seal(round, now);
    else if (this.sealOwed && now >= this.owedSealAt) this.seal(undefined, now);
    if (round !== undefined && round.deadline <= now && !(round.committed && applying) && this.mayGiveUp(round, now)) {
      if (this.mayStillLand(round)) this.sealOwed = true;
      this.deps.logger.event('commit-timeout', {
        seq: round.seq,
        commands: round.writes,
        waited_ms: Math.round(now - round.sentAt),
        sealed: round.sealed,
      });
      // The rounds queued behind it go too, unsent: they may hold later pipelined commands of the
      // connections about to close, which must not commit after that close.
      const error = new CommitTimeoutError(`not committed within ${this.commitTimeoutMs} ms`);
      const behind = this.queued.splice(0);
      this.finishRound(round, error);
      for (const queued of behind) queued.fail(new CommitTimeoutError('not sent: the round before it was given up'));
    }
    // Rounds queued past their own deadline wait for the round in flight and go with it (above),
    // never before it: a connection with commands in both would close while its earlier command
    // can still commit. The round in flight has the earliest deadline, so they wait no longer.
  }

  /**
   * Stops taking commands: rounds never sent fail at once; the round in flight is answered if its
   * batch applies, else given up once none of its attempts can still commit. Resolves then.
   */
  async close(): Promise<void> {
    this.closing = true;
    this.endReturnWait();
    const leaving = leavingError();
    for (const round of this.queued.splice(0)) round.fail(leaving);
    const round = this.inFlight;
    const { clock, timers, log } = this.deps;
    if (round !== undefined) {
      // Bounded: every attempt ends by the round's deadline, and its fence lateCommitMs after that.
      const limit = Math.max(round.deadline, clock.now()) + log.lateCommitMs;
      while (this.inFlight === round && !this.mayGiveUp(round, clock.now()) && clock.now() < limit) {
        if (this.sealable(round, clock.now())) this.seal(round, clock.now());
        await pause(timers, 10);
      }
      if (this.inFlight === round) {
        if (this.mayStillLand(round)) this.sealOwed = true;
        this.finishRound(round, leaving);
      }
    }
    // Once this node has left nobody seals for it: one last try for what it gave up unsealed.
    if (this.sealOwed) {
      await log.seal(2 * STORE_ATTEMPT_MS).then(
        () => (this.sealOwed = false),
        () => undefined,
      );
    }
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
