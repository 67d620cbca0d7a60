import type { Clock } from '../runtime/Clock.js';
import type { Timers } from '../runtime/Timers.js';
import { STORE_ATTEMPT_MS } from './Committer.js';
import { COMMANDS_PER_VERSION, decodeBatch, LogFormatError, MAX_BATCH_COMMANDS } from './LogCodec.js';
import { AppendRefusedError, MAX_APPEND_BYTES, type BundlePart, type LentLease, type LogPosition } from './ReplicatedLog.js';

/** What the sequencer appends with (EtcdLog.appendBundle; the in-memory etcd's in the simulation). */
export interface BundleAppender {
  appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition>;
}

export interface SequencerOptions {
  /**
   * After an append, the next waits at most this long for a batch from every node heard from in
   * the last ACTIVE_MS: the three nodes' rounds are out of step, and without the wait an append
   * carried 1.4 batches on average (issue 20's measurements), with it about 3. A batch that finds
   * the sequencer idle goes at once: at low load there is nothing to gather, only latency to add
   * (the release that hands a lock to a waiter, say).
   */
  readonly gatherMs: number;
  /** Longest one bundle append may take (the store pool tries members within it). */
  readonly appendTimeoutMs: number;
  /**
   * Whether an append may carry more than one batch now: only once every live node declares it
   * reads bundles (rolling upgrades); until then each batch goes alone, as a plain value.
   */
  readonly bundling?: () => boolean;
  /** Told the number of batches of each append as it is sent (metrics). */
  readonly onSend?: (batches: number) => void;
}

/** A bundle append is one store attempt, as long as a node's own first one: a stuck etcd member costs no more through the sequencer. */
export const DEFAULT_SEQUENCER_OPTIONS: SequencerOptions = { gatherMs: 5, appendTimeoutMs: STORE_ATTEMPT_MS };

/** A node counts as active, so worth gathering for, this long after its last batch arrived. */
export const ACTIVE_MS = 1_000;
/**
 * A part whose lease has less than this left is not sent: etcd would refuse the whole bundle for
 * it. Never sent, it is refused at once, and its node appends it itself.
 */
export const MIN_LEASE_LEFT_MS = 300;
/** Batches per bundle at most: each holds at most MAX_BATCH_COMMANDS commands, a version numbers COMMANDS_PER_VERSION. */
export const MAX_BUNDLE_PARTS = Math.floor(COMMANDS_PER_VERSION / MAX_BATCH_COMMANDS);
/** Parts waiting at most; beyond this a forwarded batch is refused (its node appends it itself). */
export const MAX_WAITING_PARTS = 256;
/** A bundle's bytes besides its parts' (LogCodec.encodeBundle): its header, and each part's length. */
const BUNDLE_HEADER_BYTES = 4;
const PART_HEADER_BYTES = 4;

/** A batch the sequencer may not append: it does not decode whole, or does not name the node that sent it. */
export class BatchRefusedError extends AppendRefusedError {
  override name = 'BatchRefusedError';
}

/**
 * Why a batch may not be appended, or undefined: it decodes whole with this version's decoder (the
 * one every node applies with) and names `proposer`, the node it came from. A batch the log could
 * not read would be refused by every node, its commands lost; one posing as another node would
 * be answered by that node from the commands it holds.
 */
export function checkBatch(value: Uint8Array, proposer: string): string | undefined {
  try {
    const batch = decodeBatch(value);
    if (batch.proposer !== proposer) return `a batch of ${JSON.stringify(batch.proposer)} from ${JSON.stringify(proposer)}`;
    if (batch.commands.length > MAX_BATCH_COMMANDS) return `a batch of ${batch.commands.length} commands`;
  } catch (error) {
    if (error instanceof LogFormatError) return `not a batch this version reads: ${error.message}`;
    throw error;
  }
  return undefined;
}

interface Waiting {
  readonly part: BundlePart;
  /** The part's node, by its fence key: one part per node in a bundle (etcd refuses a key put twice). */
  readonly node: string;
  readonly resolve: (position: LogPosition) => void;
  readonly reject: (error: Error) => void;
}

const enum State {
  /** Nothing waiting, no append out. */
  Idle,
  /** Parts waiting for the rest of the active nodes (or the gather timer). */
  Gathering,
  /** One append out; what arrives waits for it. */
  Appending,
}

/**
 * The sequencer (issue 20): gathers the batches of every node that forwards to it, its own
 * included, and appends what it holds in one transaction, one append at a time. Each batch keeps
 * its own node's writer lease (BundlePart), so a batch its node gave up on lands no later than that node's
 * lateCommitMs allows, exactly as if the node had sent it itself: the sequencer adds delay, never
 * reach. A bundle refused (a lease found gone, no leader) is refused to every part, none of which
 * committed; a bundle whose outcome is unknown is unknown to every part. Time and timers are
 * injected, so it runs under a fake clock.
 */
export class Sequencer {
  private readonly waiting: Waiting[] = [];
  private state = State.Idle;
  private cancelGather: (() => void) | undefined;
  /** Node (fence key) → when its last batch arrived. */
  private readonly lastSeen = new Map<string, number>();
  private closed = false;

  constructor(
    private readonly appender: BundleAppender,
    private readonly clock: Clock,
    private readonly timers: Timers,
    private readonly options: SequencerOptions = DEFAULT_SEQUENCER_OPTIONS,
  ) {}

  /**
   * Appends `value` (one batch of node `proposer`, format 1 or 4) fenced by `lease` in a coming bundle;
   * settles as ReplicatedLog.append does: AppendRefusedError only when it can never commit from
   * this call (a BatchRefusedError when the batch itself may not be appended).
   */
  submit(value: Uint8Array, lease: LentLease, proposer: string): Promise<LogPosition> {
    if (this.closed) return Promise.reject(new AppendRefusedError('sequencer closed: not sent'));
    if (this.waiting.length >= MAX_WAITING_PARTS) return Promise.reject(new AppendRefusedError('sequencer full: not sent'));
    const wrong = checkBatch(value, proposer);
    if (wrong !== undefined) return Promise.reject(new BatchRefusedError(wrong));
    const node = Buffer.from(lease.fenceKey).toString('latin1');
    this.lastSeen.set(node, this.clock.now());
    return new Promise((resolve, reject) => {
      this.waiting.push({ part: { value, lease: lease }, node, resolve, reject });
      if (this.state === State.Idle) this.next(false);
      else if (this.state === State.Gathering && this.allActiveWaiting()) this.endGather();
    });
  }

  /** Refuses whatever waits; an append out settles as it will. */
  close(): void {
    this.closed = true;
    this.cancelGather?.();
    this.cancelGather = undefined;
    for (const w of this.waiting.splice(0)) w.reject(new AppendRefusedError('sequencer closed: not sent'));
  }

  /** With nothing out: gathers (only right after an append: under load), sends, or goes idle. */
  private next(afterAppend: boolean): void {
    if (this.closed || this.waiting.length === 0) {
      this.state = State.Idle;
      return;
    }
    if (afterAppend && this.options.gatherMs > 0 && this.bundles() && !this.allActiveWaiting()) {
      this.state = State.Gathering;
      this.cancelGather = this.timers.after(this.options.gatherMs, () => this.endGather());
      return;
    }
    this.send();
  }

  private endGather(): void {
    this.cancelGather?.();
    this.cancelGather = undefined;
    this.send();
  }

  private send(): void {
    const bundle = this.take();
    if (bundle.length === 0) {
      this.next(false);
      return;
    }
    this.state = State.Appending;
    this.options.onSend?.(bundle.length);
    this.appender
      .appendBundle(
        bundle.map((w) => w.part),
        this.options.appendTimeoutMs,
      )
      .then(
        (position) => {
          for (const w of bundle) w.resolve(position);
        },
        (error: unknown) => {
          for (const w of bundle) w.reject(error as Error);
        },
      )
      .finally(() => this.next(true));
  }

  private bundles(): boolean {
    return this.options.bundling?.() ?? true;
  }

  /** Whether a batch of every node active lately waits (stale nodes are forgotten here). */
  private allActiveWaiting(): boolean {
    const now = this.clock.now();
    let active = 0;
    for (const [node, at] of this.lastSeen) {
      if (now - at >= ACTIVE_MS) this.lastSeen.delete(node);
      else active++;
    }
    const present = new Set<string>();
    for (const w of this.waiting) present.add(w.node);
    return present.size >= active;
  }

  /** The next bundle: waiting parts in arrival order within the limits; short-leased ones refused. */
  private take(): Waiting[] {
    const now = this.clock.now();
    const bundle: Waiting[] = [];
    const nodes = new Set<string>();
    let bytes = BUNDLE_HEADER_BYTES;
    const maxParts = this.bundles() ? MAX_BUNDLE_PARTS : 1;
    for (let i = 0; i < this.waiting.length && bundle.length < maxParts;) {
      const w = this.waiting[i]!;
      if (w.part.lease.endsAt - now < MIN_LEASE_LEFT_MS) {
        this.waiting.splice(i, 1);
        w.reject(new AppendRefusedError('not sent: its writer lease ran short at the sequencer'));
        continue;
      }
      const size = PART_HEADER_BYTES + w.part.value.length;
      // A node's second batch (a retry) waits for the next bundle, as does one that would not fit.
      if (nodes.has(w.node) || (bundle.length > 0 && bytes + size > MAX_APPEND_BYTES)) {
        i++;
        continue;
      }
      this.waiting.splice(i, 1);
      nodes.add(w.node);
      bytes += size;
      bundle.push(w);
    }
    return bundle;
  }
}
