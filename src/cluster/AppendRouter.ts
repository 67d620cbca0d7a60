import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import type { Timers } from '../runtime/Timers.js';
import { leaseOutcomeOf, type LeaseOutcome, type LentLease, type LogPosition, type ReplicatedLog } from './ReplicatedLog.js';

/**
 * Where an append attempt goes, by the one name logs and metrics give it: `direct` (this node to
 * etcd), `own-sequencer` (this node leads: its sequencer bundles it with the others' batches) or
 * `forwarded` (over a link to the leader's sequencer).
 */
export type AppendRoute = 'direct' | 'own-sequencer' | 'forwarded';

/** A link to another node's sequencer (peer/SequencerLink; an in-memory one in the simulation). */
export interface SequencerChannel {
  /** Whether a forward can be sent now (the link is up and both ends proved themselves). */
  readonly up: boolean;
  /** Settles as an append attempt does, but a position it resolves with is the sequencer's word. */
  forward(value: Uint8Array, lease: LentLease, timeoutMs: number): Promise<LogPosition>;
  close(): void;
}

/** What appends through a sequencer on this node (Sequencer). */
export interface LocalSequencer {
  /** Appends `value`, a batch of node `proposer`, fenced by `lease` (see Sequencer.submit). */
  submit(value: Uint8Array, lease: LentLease, proposer: string): Promise<LogPosition>;
}

/** Who this node takes to lead (Leadership). */
export interface LeaderView {
  readonly isLeader: boolean;
  readonly leader: string | undefined;
}

/**
 * An attempt that committed. `confirmed`: the store said so (a direct append, or this node's own
 * sequencer). Otherwise it is the leader's sequencer's word, which the committer checks against the
 * log it follows and settles (AppendRouter.forwarded): a broken or lying sequencer must cost time,
 * never a retry skipped, nor a head this node believes the log has.
 */
export type Appended =
  | { readonly confirmed: true; readonly position: LogPosition }
  | {
      readonly confirmed: false;
      readonly position: LogPosition;
      /** The committer's verdict: `held` once its batch applied here, else (refuted, or never seen) false. */
      settle(held: boolean): void;
    };

/** Where one attempt goes, with what it goes through. */
type RouteChoice =
  | { readonly kind: 'direct' }
  | { readonly kind: 'own-sequencer'; readonly sequencer: LocalSequencer }
  | { readonly kind: 'forwarded'; readonly channel: SequencerChannel };
const DIRECT: RouteChoice = { kind: 'direct' };

/** After an attempt through a sequencer (here or forwarded) failed in any way, this node appends itself this long. */
export const SEQUENCER_REST_MS = 1_000;

export interface AppendRouterDeps {
  /** This node's name: the proposer of every batch it appends. */
  readonly name: string;
  readonly log: ReplicatedLog;
  /** Where the other nodes declared their lock ports (PeerDeclarations). */
  readonly addresses: { addressOf(node: string): string | undefined; readonly known: boolean };
  /** Opens a link to the sequencer of node `leader`, declared at `address` (throws if the address is malformed). */
  readonly dial: (leader: string, address: string) => SequencerChannel;
  /** This node's sequencer, used while it leads. */
  readonly local: LocalSequencer | undefined;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly logger: Logger;
  /** Told how each append attempt went, by route (metrics: ClusterObserver.appendAttempted). */
  readonly observer?: { appendAttempted?(route: AppendRoute, committed: boolean): void };
}

/**
 * The one place that decides where this node's append attempts go (issue 20, 36): to its own
 * sequencer while it leads, over a link to the leader's sequencer when the leader declared an
 * address and the link is up, else (and for SEQUENCER_REST_MS after any attempt through a
 * sequencer failed) straight to etcd. Every route but `direct` lends the attempt a writer lease of
 * this node's log and returns it with the attempt's outcome, so the attempt keeps
 * ReplicatedLog.append's promises whichever way it went; a retry may take another way, and the
 * batch id makes a second copy harmless.
 *
 * Which node sequences is a matter of speed only: every batch keeps its own node's writer lease,
 * so a stale view of the leader, a link to a node that stopped leading, or two nodes sequencing at
 * once cost time, never safety.
 *
 * Invariants: an attempt's lent lease is returned exactly once, with the outcome the store (or, for
 * a forward, the committer's check of the sequencer's word) gives; a forward's `committed` is
 * never passed on as confirmed.
 */
export class AppendRouter {
  /** Who leads, as this node sees it; until it is given (follow), every append goes direct. */
  private leadership: LeaderView | undefined;
  private link: { readonly leader: string; readonly address: string; readonly channel: SequencerChannel } | undefined;
  /** Until when (clock time) appends skip the sequencer (after an attempt through it failed). */
  private restUntil = Number.NEGATIVE_INFINITY;
  /** The last route logged, as text: a change is logged once. */
  private said = '';

  constructor(private readonly deps: AppendRouterDeps) {}

  /** From now on, appends go where `leadership` says the leader is. */
  follow(leadership: LeaderView): void {
    this.leadership = leadership;
  }

  /** One attempt of appending `value`, sent where the sequencer is (see the class comment). */
  append(value: Uint8Array, timeoutMs: number): Promise<Appended> {
    const started = this.deps.clock.now();
    const route = started >= this.restUntil ? this.route() : DIRECT;
    if (route.kind === 'direct' || (route.kind === 'forwarded' && !route.channel.up)) {
      return this.counted('direct', this.direct(value, timeoutMs));
    }
    if (route.kind === 'own-sequencer') {
      const { sequencer } = route;
      return this.counted(
        'own-sequencer',
        this.throughSequencer(timeoutMs, started, async (lease, left) => {
          const position = await this.bounded(sequencer.submit(value, lease, this.deps.name), left);
          this.deps.log.leaseReturned(lease, 'settled');
          return { confirmed: true, position };
        }),
      );
    }
    const { channel } = route;
    return this.counted(
      'forwarded',
      this.throughSequencer(timeoutMs, started, async (lease, left) => {
        const position = await channel.forward(value, lease, left);
        return { confirmed: false, position, settle: (held) => this.settleForward(lease, held) };
      }),
    );
  }

  private async direct(value: Uint8Array, timeoutMs: number): Promise<Appended> {
    return { confirmed: true, position: await this.deps.log.append(value, timeoutMs) };
  }

  /** A sequencer's `committed` checked by the committer: held, its lease is used up; else it may still land (sealed like any unknown outcome). */
  private settleForward(lease: LentLease, held: boolean): void {
    this.deps.log.leaseReturned(lease, held ? 'settled' : 'unsettled');
    if (!held) this.rest();
  }

  /** One attempt through a sequencer, with a lease lent for it; a failure returns the lease with its outcome and rests the route. */
  private async throughSequencer(timeoutMs: number, started: number, send: (lease: LentLease, leftMs: number) => Promise<Appended>): Promise<Appended> {
    const lease = await this.deps.log.lendLease(timeoutMs);
    try {
      return await send(lease, timeoutMs - (this.deps.clock.now() - started));
    } catch (error) {
      this.rest();
      this.deps.log.leaseReturned(lease, leaseOutcomeOf(error) satisfies LeaseOutcome);
      throw error;
    }
  }

  private rest(): void {
    this.restUntil = this.deps.clock.now() + SEQUENCER_REST_MS;
  }

  /** Where an attempt goes now, by the leadership and the declarations. */
  private route(): RouteChoice {
    const { local, addresses } = this.deps;
    const leadership = this.leadership;
    if (leadership === undefined) return this.say(DIRECT, 'direct', 'not following the leadership yet');
    if (leadership.isLeader) {
      this.dropLink(); // to the leader before this one, if any
      if (local === undefined) return this.say(DIRECT, 'direct', 'this node leads without a sequencer');
      return this.say({ kind: 'own-sequencer', sequencer: local }, 'own-sequencer', 'this node leads');
    }
    const leader = leadership.leader;
    const address = leader === undefined ? undefined : addresses.addressOf(leader);
    if (leader === undefined || address === undefined) {
      this.dropLink();
      const why = leader === undefined ? 'no leader known' : !addresses.known ? 'addresses not read yet' : `leader ${leader} declared no address`;
      return this.say(DIRECT, 'direct', why);
    }
    if (this.link?.address !== address || this.link.leader !== leader) {
      this.dropLink();
      try {
        this.link = { leader, address, channel: this.deps.dial(leader, address) };
      } catch (error) {
        // A declared address this node cannot dial (malformed): appends go direct.
        return this.say(DIRECT, 'direct', `leader ${leader}'s address ${address}: ${(error as Error).message}`);
      }
    }
    return this.say({ kind: 'forwarded', channel: this.link.channel }, `forwarded ${address}`, `leader ${leader}`);
  }

  /** `attempt`, its outcome told to the observer under `route`. */
  private async counted(route: AppendRoute, attempt: Promise<Appended>): Promise<Appended> {
    try {
      const appended = await attempt;
      this.deps.observer?.appendAttempted?.(route, true);
      return appended;
    } catch (error) {
      this.deps.observer?.appendAttempted?.(route, false);
      throw error;
    }
  }

  /** `promise`, or an unknown outcome once `ms` passed (the sequencer may still send it: its lease bounds it). */
  private bounded<T>(promise: Promise<T>, ms: number): Promise<T> {
    return new Promise((resolve, reject) => {
      const cancel = this.deps.timers.after(Math.max(0, ms), () => reject(new Error(`no outcome from the sequencer within ${Math.round(ms)} ms`)));
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

  close(): void {
    this.leadership = undefined;
    this.dropLink();
  }

  private dropLink(): void {
    this.link?.channel.close();
    this.link = undefined;
  }

  private say(route: RouteChoice, what: string, why: string): RouteChoice {
    if (what !== this.said) {
      this.said = what;
      const [via, to] = what.split(' ');
      this.deps.logger.event('append-route', { via, to, why });
    }
    return route;
  }
}
