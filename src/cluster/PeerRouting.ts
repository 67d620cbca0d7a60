import type { Logger } from '../runtime/Logger.js';
import type { Timers } from '../runtime/Timers.js';
import type { AppendRoute, AppendRouter, LocalSequencer, SequencerChannel } from './RoutedLog.js';

/** What the nodes declare about themselves, read at one revision (EtcdLog.peerView). */
export interface PeerView {
  /** Live node name → the address it takes forwarded batches on (only nodes started with one). */
  readonly peers: ReadonlyMap<string, string>;
  /** Whether every live node declares it reads bundles (log value format 2). */
  readonly readsBundles: boolean;
  /** The cluster's peer secret (PeerAuth); the in-memory links of the simulation need none. */
  readonly secret?: Uint8Array;
}

export interface PeerDirectory {
  peerView(timeoutMs: number): Promise<PeerView>;
}

/** A link to one sequencer (PeerLink's SequencerLink), closed when the leader moves. */
export interface PeerChannel extends SequencerChannel {
  close(): void;
}

/** Who this node takes to lead (Leadership, through ClusterLockService). */
export interface LeaderView {
  readonly isLeader: boolean;
  readonly leader: string | undefined;
}

/**
 * How often the declarations are read again: a restarted node's new address, or a node that does
 * not read bundles, is seen within this (plus one call).
 */
export const PEER_VIEW_EVERY_MS = 1_000;
/** Longest one read of the declarations may take. */
const PEER_VIEW_TIMEOUT_MS = 2_000;

/**
 * Where this node's append attempts go (issue 20): to its own sequencer while it leads and has
 * one, over a link to the leader's sequencer when the leader declared an address, else straight
 * to etcd. Which node sequences is a matter of speed only: every batch keeps its own node's
 * fence whichever way it goes (RoutedLog), so a stale view of the leader, a link to a node that
 * stopped leading, or two nodes sequencing at once cost time, never safety. Until the first read
 * of the declarations, and whenever the leader's address is not known, appends go direct.
 */
export class PeerRouting implements AppendRouter {
  /** The declarations as last read; undefined until the first read. */
  private view: PeerView | undefined;
  private link: { readonly address: string; readonly channel: PeerChannel } | undefined;
  /** The last route logged, as text: a change is logged once. */
  private said = '';
  private stopRefresh: (() => void) | undefined;
  private reading = false;
  private closed = false;

  constructor(
    private readonly leadership: LeaderView,
    private readonly directory: PeerDirectory,
    private readonly dial: (address: string) => PeerChannel,
    private readonly local: LocalSequencer | undefined,
    private readonly timers: Timers,
    private readonly logger: Logger,
  ) {}

  /** Reads the declarations now and every PEER_VIEW_EVERY_MS until close. */
  start(): void {
    void this.refresh();
    this.stopRefresh = this.timers.every(PEER_VIEW_EVERY_MS, () => void this.refresh());
  }

  /** The cluster's peer secret, once read. */
  get secret(): Uint8Array | undefined {
    return this.view?.secret;
  }

  /** Whether every live node reads bundles, as last read (false until read): the sequencer's bundling gate. */
  get readsBundles(): boolean {
    return this.view?.readsBundles ?? false;
  }

  route(): AppendRoute {
    if (this.leadership.isLeader) {
      this.dropLink(); // to the leader before this one, if any
      if (this.local === undefined) return this.say({ kind: 'direct' }, 'direct', 'this node leads without a peer address');
      return this.say({ kind: 'here', sequencer: this.local }, 'here', 'this node leads');
    }
    const leader = this.leadership.leader;
    const address = leader === undefined ? undefined : this.view?.peers.get(leader);
    if (address === undefined) {
      this.dropLink();
      const why =
        leader === undefined ? 'no leader known' : this.view === undefined ? 'peer addresses not read yet' : `leader ${leader} declared no peer address`;
      return this.say({ kind: 'direct' }, 'direct', why);
    }
    if (this.link?.address !== address) {
      this.dropLink();
      try {
        this.link = { address, channel: this.dial(address) };
      } catch (error) {
        // A declared address this node cannot dial (malformed): appends go direct.
        return this.say({ kind: 'direct' }, 'direct', `leader ${leader}'s peer address ${address}: ${(error as Error).message}`);
      }
    }
    return this.say({ kind: 'forward', channel: this.link.channel }, `forward ${address}`, `leader ${leader}`);
  }

  close(): void {
    this.closed = true;
    this.stopRefresh?.();
    this.dropLink();
  }

  private async refresh(): Promise<void> {
    if (this.reading || this.closed) return;
    this.reading = true;
    try {
      this.view = await this.directory.peerView(PEER_VIEW_TIMEOUT_MS);
    } catch {
      // etcd unreachable: keep the last view (a stale one costs speed only, see the class comment;
      // the formats it gates bundles and references by go stale with it, as between two reads).
    } finally {
      this.reading = false;
    }
  }

  private dropLink(): void {
    this.link?.channel.close();
    this.link = undefined;
  }

  private say(route: AppendRoute, what: string, why: string): AppendRoute {
    if (what !== this.said) {
      this.said = what;
      this.logger.event('append-route', { via: what, why });
    }
    return route;
  }
}
