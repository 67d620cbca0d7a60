import { Later } from '../locks/Later.js';
import { commandSize, MAX_BATCH_BYTES, MAX_BATCH_COMMANDS, type LogCommand } from './LogCodec.js';

const EMPTY = new Uint8Array(0);

/** A command whose commit (or read barrier) did not complete within --commit-timeout. */
export class CommitTimeoutError extends Error {
  override name = 'CommitTimeoutError';
}

/** Where a mutating command's result goes once its batch is applied here (a Later, for a client's command). */
export interface WriteAnswer {
  resolve(result: number): void;
  reject(error: Error): void;
}

/**
 * List entries one pass of answering (a batch applied, or a read barrier reached) builds at most,
 * once it has answered one list: what lists come after wait for the next round. A list of a key
 * with 65,535 entries builds about 5 MB of objects; answering 1,024 such lists in one synchronous
 * pass took a node's event loop for seconds (its name lease lapsed) and then its whole memory.
 */
export const LIST_ENTRIES_PER_PASS = 65_536;

/** A read waiting for its barrier; `answer` evaluates it against the local table and settles it. */
export interface PendingRead {
  /** A list: its answer can be large, so it is answered within a pass's budget (LIST_ENTRIES_PER_PASS). */
  readonly heavy: boolean;
  /** Evaluates and settles the read; returns its weight (list entries; 0 for other reads). */
  answer(): number;
  reject(error: Error): void;
}

/** A read's answer: `evaluate` run against the local table when its turn comes, as a Later. */
export class ReadAnswer<T> extends Later<T> implements PendingRead {
  constructor(
    private readonly evaluate: () => T,
    /** For a heavy read (a list): how much its answer weighs. */
    private readonly weigh?: (value: T) => number,
  ) {
    super();
  }

  get heavy(): boolean {
    return this.weigh !== undefined;
  }

  answer(): number {
    const value = this.evaluate();
    this.resolve(value);
    return this.weigh?.(value) ?? 0;
  }
}

/**
 * One group commit: the commands a node's clients sent while the previous round was in flight,
 * in the order they arrived. Its writes go to the log as one batch; its reads are answered as
 * that batch is applied here, each between the writes it came between, so a client's pipelined
 * read sees exactly its own earlier writes (and everything committed before the batch). A round
 * of reads only needs one linearizable read of the log head.
 */
export class Round {
  /** The writes in arrival order: their commands (the batch, as sent), where each result goes, and what runs right after each applies. */
  readonly commands: LogCommand[] = [];
  private readonly answers: WriteAnswer[] = [];
  private readonly afterApplied: Array<((result: number) => void) | undefined> = [];
  /** Reads in arrival order, each with the number of writes that arrived before it. */
  private readonly reads: PendingRead[] = [];
  private readonly readsAfter: number[] = [];
  private nextRead = 0;
  /** List entries answered in this round's pass so far (see LIST_ENTRIES_PER_PASS). */
  private listEntries = 0;
  /**
   * Reads left for a later round once the pass's list budget was spent: the first list that did
   * not fit and every read after it, in arrival order (so no read is answered from an older state
   * than one that arrived before it). A read answered later than its round is still answered
   * after it arrived: linearizable. The committer queues them again once the round is done.
   */
  readonly deferred: PendingRead[] = [];
  /** Bytes of commands in the round (its batch's size, less the header). */
  private commandBytes = 0;
  /** Batch sequence number once the round is sent with writes, and the proposer incarnation it was sent as. */
  seq = 0;
  incarnation = 0;
  /** The batch as encoded and sent, once the round is sent with writes. */
  bytes: Uint8Array = EMPTY;
  /** Read-only rounds: the log version the barrier returned; answered once applied. */
  barrier: number | undefined;
  /** Clock time the round was sent (its commit latency runs from here). */
  sentAt = 0;
  /** An append attempt of the batch is out, its outcome unknown. */
  attempting = false;
  /** The store confirmed the batch committed (its answers come as it is applied here). */
  committed = false;
  /** The round is done and its batch was applied here (answered, or inside a snapshot). */
  applied = false;
  /** Clock time after which no failed attempt of the batch can still commit (see ReplicatedLog.lateCommitMs). */
  mayLandUntil = Number.NEGATIVE_INFINITY;
  /** The store confirmed a seal made after every attempt had rejected: none of them can commit now. */
  sealed = false;
  /**
   * A sequencer's word that the batch committed at `version`, waiting to come true here
   * (Committer.checkClaim); `settle` ends the wait: held (applied) or not.
   */
  claim: { readonly version: number; settle(held: boolean): void } | undefined;

  constructor(
    /**
     * The commit timeout after the earliest of its commands was read (the first to arrive, or one
     * that waited in its connection's input before it arrived): the round fails after this.
     */
    public deadline: number,
  ) {}

  /** Mutating commands in the round. */
  get writes(): number {
    return this.commands.length;
  }

  /** Commands in the round, writes and reads. */
  get size(): number {
    return this.commands.length + this.reads.length;
  }

  /**
   * Adds a write if the batch can take it within the store's request limits; false (nothing
   * added) when it cannot. `applied`, if given, runs as soon as its command is applied here,
   * before the next command of the batch: what it reads of the table then is what its own command
   * left (a request with fence reads its token).
   */
  addWrite(command: LogCommand, answer: WriteAnswer, applied?: (result: number) => void): boolean {
    const size = commandSize(command);
    if (this.commands.length >= MAX_BATCH_COMMANDS || this.commandBytes + size > MAX_BATCH_BYTES) return false;
    this.commands.push(command);
    this.answers.push(answer);
    this.afterApplied.push(applied);
    this.commandBytes += size;
    return true;
  }

  addRead(read: PendingRead): void {
    this.reads.push(read);
    this.readsAfter.push(this.commands.length);
  }

  /**
   * Apply of the batch reached write `index` (`writes` after the last): the write before it has
   * just been applied, and the reads that arrived before it are due.
   */
  reached(index: number, previousResult: number | undefined): void {
    if (index > 0) this.afterApplied[index - 1]?.(previousResult ?? 0);
    this.answerReadsBefore(index);
  }

  /** Answers the reads that arrived before write `index` (all remaining ones when index = writes). */
  private answerReadsBefore(index: number): void {
    while (this.nextRead < this.reads.length && this.readsAfter[this.nextRead]! <= index) {
      const read = this.reads[this.nextRead++]!;
      if (this.deferred.length > 0 || (read.heavy && this.listEntries >= LIST_ENTRIES_PER_PASS)) this.deferred.push(read);
      else this.listEntries += read.answer();
    }
  }

  /** The batch was applied here: each write gets the result apply produced for it. */
  settle(results: readonly number[]): void {
    const answers = this.answers;
    for (let i = 0; i < answers.length; i++) answers[i]!.resolve(results[i]!);
    this.answerReadsBefore(answers.length);
  }

  /** Nothing of the round is answered: its connections close (see Connection). */
  fail(error: Error): void {
    for (const answer of this.answers) answer.reject(error);
    for (const read of this.deferred.splice(0)) read.reject(error);
    for (let i = this.nextRead; i < this.reads.length; i++) this.reads[i]!.reject(error);
    this.nextRead = this.reads.length;
  }
}
