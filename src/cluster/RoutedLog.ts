import type { Clock } from '../runtime/Clock.js';
import type { AppendRouteKind, ClusterObserver } from './ClusterOptions.js';
import type { Timers } from '../runtime/Timers.js';
import {
  fenceOutcomeOf,
  type BundlePart,
  type Candidate,
  type FenceOutcome,
  type LentFence,
  type LogHead,
  type LogListener,
  type LogPosition,
  type LogWatch,
  type NameClaim,
  type ReplicatedLog,
  type RetainedSince,
  type StoredSnapshot,
} from './ReplicatedLog.js';

/** A way to the sequencer on another node (PeerLink's SequencerLink; an in-memory one in the simulation). */
export interface SequencerChannel {
  /** Whether a forward can be sent now. */
  readonly up: boolean;
  /** As PeerLink's SequencerLink.forward: settles as an append attempt does. */
  forward(value: Uint8Array, fence: LentFence, timeoutMs: number): Promise<LogPosition>;
}

/** What appends through a sequencer on this node (Sequencer). */
export interface LocalSequencer {
  submit(value: Uint8Array, fence: LentFence): Promise<LogPosition>;
}

/** Where this node's append attempts go now. */
export type AppendRoute =
  | { readonly kind: 'direct' }
  | { readonly kind: 'here'; readonly sequencer: LocalSequencer }
  | { readonly kind: 'forward'; readonly channel: SequencerChannel };

/** Chooses each attempt's route (PeerRouting); closed with the log. */
export interface AppendRouter {
  route(): AppendRoute;
  close(): void;
}

/** After an attempt through a sequencer (here or forwarded) failed in any way, this node appends itself this long. */
export const SEQUENCER_REST_MS = 1_000;

/**
 * The log as the committer sees it, with each append attempt sent where the cluster's sequencer
 * is (issue 20): to this node's own sequencer, over the link to another node's, or, when there is
 * none or the way to it just failed, to the store directly. Every route lends the attempt the same
 * fence from this node's log and returns it with the attempt's outcome, so an attempt keeps
 * ReplicatedLog.append's promises whichever way it went (a retry may take another way; the batch
 * id makes a second copy harmless). Everything else goes straight to the log.
 */
export class RoutedLog implements ReplicatedLog {
  /** Until when (clock time) appends skip the sequencer (after an attempt through it failed). */
  private restUntil = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly log: ReplicatedLog,
    private readonly router: AppendRouter,
    private readonly clock: Clock,
    private readonly timers: Timers,
    /** Told how each append attempt went, by route (metrics). */
    private readonly observer?: Pick<ClusterObserver, 'appendAttempted'>,
  ) {}

  get lateCommitMs(): number {
    return this.log.lateCommitMs;
  }

  append(value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
    const started = this.clock.now();
    const route = this.router.route();
    const viaSequencer = started >= this.restUntil && (route.kind === 'here' || (route.kind === 'forward' && route.channel.up));
    if (!viaSequencer) return this.counted('direct', this.log.append(value, timeoutMs));
    if (route.kind === 'here')
      return this.counted(
        'own-sequencer',
        this.viaSequencer(timeoutMs, started, (fence, left) => this.bounded(route.sequencer.submit(value, fence), left)),
      );
    return this.counted(
      'forwarded',
      this.viaSequencer(timeoutMs, started, (fence, left) => route.channel.forward(value, fence, left)),
    );
  }

  /** One attempt through a sequencer, with a fence lent for it and returned with its outcome; a failure rests the route. */
  private async viaSequencer(timeoutMs: number, started: number, send: (fence: LentFence, leftMs: number) => Promise<LogPosition>): Promise<LogPosition> {
    const fence = await this.log.lendFence(timeoutMs);
    try {
      const position = await send(fence, timeoutMs - (this.clock.now() - started));
      this.log.fenceReturned(fence, 'settled');
      return position;
    } catch (error) {
      this.restUntil = this.clock.now() + SEQUENCER_REST_MS;
      this.log.fenceReturned(fence, fenceOutcomeOf(error));
      throw error;
    }
  }

  /** `attempt`, its outcome told to the observer under `route`. */
  private async counted<T>(route: AppendRouteKind, attempt: Promise<T>): Promise<T> {
    try {
      const result = await attempt;
      this.observer?.appendAttempted?.(route, true);
      return result;
    } catch (error) {
      this.observer?.appendAttempted?.(route, false);
      throw error;
    }
  }

  /** `promise`, or an unknown outcome once `ms` passed (the sequencer may still send it: its fence bounds it). */
  private bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const cancel = this.timers.after(Math.max(0, ms), () => reject(new Error(`no outcome from the sequencer within ${Math.round(ms)} ms`)));
      promise.then(
        (v) => {
          cancel();
          resolve(v);
        },
        (e: unknown) => {
          cancel();
          reject(e);
        },
      );
    });
  }

  lendFence(timeoutMs: number): Promise<LentFence> {
    return this.log.lendFence(timeoutMs);
  }

  fenceReturned(fence: LentFence, outcome: FenceOutcome): void {
    this.log.fenceReturned(fence, outcome);
  }

  appendBundle(parts: readonly BundlePart[], timeoutMs: number): Promise<LogPosition> {
    return this.log.appendBundle(parts, timeoutMs);
  }

  seal(timeoutMs: number): Promise<void> {
    return this.log.seal(timeoutMs);
  }

  head(timeoutMs: number): Promise<LogHead> {
    return this.log.head(timeoutMs);
  }

  since(revision: number, timeoutMs: number): Promise<RetainedSince> {
    return this.log.since(revision, timeoutMs);
  }

  watch(fromRevision: number, listener: LogListener): LogWatch {
    return this.log.watch(fromRevision, listener);
  }

  loadSnapshot(timeoutMs: number): Promise<StoredSnapshot | undefined> {
    return this.log.loadSnapshot(timeoutMs);
  }

  saveSnapshot(snapshot: StoredSnapshot, timeoutMs: number): Promise<void> {
    return this.log.saveSnapshot(snapshot, timeoutMs);
  }

  compact(revision: number, timeoutMs: number): Promise<void> {
    return this.log.compact(revision, timeoutMs);
  }

  claimName(name: string, priority: number | undefined, leaseSeconds: number, timeoutMs: number): Promise<NameClaim> {
    return this.log.claimName(name, priority, leaseSeconds, timeoutMs);
  }

  candidates(timeoutMs: number): Promise<Candidate[]> {
    return this.log.candidates(timeoutMs);
  }

  close(): Promise<void> {
    this.router.close();
    return this.log.close();
  }
}
