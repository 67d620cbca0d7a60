import { Later } from '../locks/Later.js';
import { commandSize, MAX_BATCH_BYTES, MAX_BATCH_COMMANDS, type LogCommand } from './LogCodec.js';

/** A command whose commit (or read barrier) did not complete within --commit-timeout. */
export class CommitTimeoutError extends Error {
  override name = 'CommitTimeoutError';
}

/** Where a mutating command's result goes once its batch is applied here (a Later, for a client's command). */
export interface WriteAnswer {
  resolve(result: number): void;
  reject(error: Error): void;
}

/** A read waiting for its barrier; `answer` evaluates it against the local table and settles it. */
export interface PendingRead {
  answer(): void;
  reject(error: Error): void;
}

/** A read's answer: `evaluate` run against the local table when its turn comes, as a Later. */
export class ReadAnswer<T> extends Later<T> implements PendingRead {
  constructor(private readonly evaluate: () => T) {
    super();
  }

  answer(): void {
    this.resolve(this.evaluate());
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
  private readonly afterApplied: Array<(() => void) | undefined> = [];
  /** Reads in arrival order, each with the number of writes that arrived before it. */
  private readonly reads: PendingRead[] = [];
  private readonly readsAfter: number[] = [];
  private nextRead = 0;
  private bytes = 0;
  /** Batch sequence number once the round is sent with writes. */
  seq = 0;
  /** Read-only rounds: the log version the barrier returned; answered once applied. */
  barrier: number | undefined;
  /** Clock time the round was sent (its commit latency runs from here). */
  sentAt = 0;
  /** An append attempt of the batch is out, its outcome unknown. */
  attempting = false;
  /** The store confirmed the batch committed (its answers come as it is applied here). */
  committed = false;
  /** Clock time after which no failed attempt of the batch can still commit (see ReplicatedLog.lateCommitMs). */
  fenceEndsAt = Number.NEGATIVE_INFINITY;
  /** The store confirmed a seal made after every attempt had rejected: none of them can commit now. */
  sealed = false;

  constructor(
    /** When the first command arrived plus the commit timeout: the round fails after this. */
    readonly deadline: number,
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
  addWrite(command: LogCommand, answer: WriteAnswer, applied?: () => void): boolean {
    const size = commandSize(command);
    if (this.commands.length >= MAX_BATCH_COMMANDS || this.bytes + size > MAX_BATCH_BYTES) return false;
    this.commands.push(command);
    this.answers.push(answer);
    this.afterApplied.push(applied);
    this.bytes += size;
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
  reached(index: number): void {
    if (index > 0) this.afterApplied[index - 1]?.();
    this.answerReadsBefore(index);
  }

  /** Answers the reads that arrived before write `index` (all remaining ones when index = writes). */
  private answerReadsBefore(index: number): void {
    while (this.nextRead < this.reads.length && this.readsAfter[this.nextRead]! <= index) {
      this.reads[this.nextRead++]!.answer();
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
    for (let i = this.nextRead; i < this.reads.length; i++) this.reads[i]!.reject(error);
    this.nextRead = this.reads.length;
  }
}
