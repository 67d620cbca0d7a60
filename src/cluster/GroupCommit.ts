import { commandSize, MAX_BATCH_BYTES, MAX_BATCH_COMMANDS, type LogCommand } from './LogCodec.js';

/** A command whose commit (or read barrier) did not complete within --commit-timeout. */
export class CommitTimeoutError extends Error {
  override name = 'CommitTimeoutError';
}

/** A mutating command waiting for its batch to be applied here. */
export interface PendingWrite {
  readonly command: LogCommand;
  resolve(result: number): void;
  reject(error: Error): void;
  /**
   * Called as soon as its command is applied here, before the next command of the batch: what it
   * reads of the table then is what its own command left (a request with fence reads its token).
   */
  readonly applied: (() => void) | undefined;
}

/** A read waiting for its barrier; `answer` evaluates it against the local table and settles it. */
export interface PendingRead {
  answer(): void;
  reject(error: Error): void;
}

/**
 * One group commit: the commands a node's clients sent while the previous round was in flight,
 * in the order they arrived. Its writes go to the log as one batch; its reads are answered as
 * that batch is applied here, each between the writes it came between, so a client's pipelined
 * read sees exactly its own earlier writes (and everything committed before the batch). A round
 * of reads only needs one linearizable read of the log head.
 */
export class Round {
  readonly writes: PendingWrite[] = [];
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

  constructor(
    /** When the first command arrived plus the commit timeout: the round fails after this. */
    readonly deadline: number,
  ) {}

  get isEmpty(): boolean {
    return this.writes.length === 0 && this.reads.length === 0;
  }

  /** Commands in the round, writes and reads. */
  get size(): number {
    return this.writes.length + this.reads.length;
  }

  /** Whether one more write would take the batch past the store's request limits. */
  canTake(command: LogCommand): boolean {
    return this.writes.length < MAX_BATCH_COMMANDS && this.bytes + commandSize(command) <= MAX_BATCH_BYTES;
  }

  addWrite(write: PendingWrite): void {
    this.writes.push(write);
    this.bytes += commandSize(write.command);
  }

  addRead(read: PendingRead): void {
    this.reads.push(read);
    this.readsAfter.push(this.writes.length);
  }

  /** The writes' commands, as the batch carries them; set when it is sent (see seal). */
  commands: readonly LogCommand[] | undefined;

  /** The round is being sent: its writes' commands, as its batch carries them. */
  seal(): readonly LogCommand[] {
    return (this.commands = this.writes.map((w) => w.command));
  }

  /**
   * Apply of the batch reached write `index` (`writes.length` after the last): the write before it
   * has just been applied, and the reads that arrived before it are due.
   */
  reached(index: number): void {
    if (index > 0) this.writes[index - 1]!.applied?.();
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
    for (let i = 0; i < this.writes.length; i++) this.writes[i]!.resolve(results[i]!);
    this.answerReadsBefore(this.writes.length);
  }

  /** Nothing of the round is answered: its connections close (see Connection). */
  fail(error: Error): void {
    for (const w of this.writes) w.reject(error);
    for (let i = this.nextRead; i < this.reads.length; i++) this.reads[i]!.reject(error);
    this.nextRead = this.reads.length;
  }
}
