import type { ClusterFigures } from '../cluster/ClusterOptions.js';
import type { Clock } from '../runtime/Clock.js';

/** The reasons `/readyz` gives, one line each. */
export const NOT_LISTENING = 'not listening';
export const DRAINING = 'draining';
export const NOT_CAUGHT_UP = 'not caught up with the log';
export const ETCD_UNREACHABLE = 'etcd unreachable';
export const ETCD_NO_SPACE = 'etcd out of space (NOSPACE alarm): it refuses every write until an operator disarms it';

/** The parts of a running daemon readiness reads at probe time (a Daemon fits as is). */
export interface ReadinessSource {
  /** The lock port accepts connections (false once the orderly end has begun). */
  readonly listening: boolean;
  readonly server: { readonly draining: boolean };
}

export interface ReadinessOptions {
  /** `--etcd`: before the daemon is attached, the node is still joining and catching up. */
  readonly clusterMode: boolean;
  /**
   * How long a batch etcd is known to hold may wait to be applied here before the node counts as
   * not caught up: the commit timeout, past which the node's own commands would go unanswered.
   */
  readonly catchUpLimitMs: number;
}

/**
 * Whether this node should be sent clients (`/readyz`), from what the daemon and the cluster core
 * already know; nothing here calls etcd. A node is ready when its lock port is open and it is not
 * draining; a cluster node must also have caught up with the log and have heard from etcd on its
 * last call (the leader check calls etcd twice a second, so an idle node notices an outage too), and
 * no etcd member may report a NOSPACE alarm (read once a second by SpaceWatch): etcd then refuses
 * every write, so no command that changes the table can be answered.
 */
export class Readiness {
  private source: ReadinessSource | undefined;
  private cluster: (() => ClusterFigures) | undefined;
  /**
   * The log's head as a probe last found it ahead of this node, and when. The node counts as not
   * caught up only if a later probe finds that batch still unapplied after catchUpLimitMs: a node
   * that applies batches as fast as they come is always a few behind the head it has heard of.
   */
  private behind: { readonly version: number; readonly since: number } | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly options: ReadinessOptions,
  ) {}

  /** Starts reading a running daemon (its lock port is open from here on). */
  attach(source: ReadinessSource): void {
    this.source = source;
  }

  /** Cluster mode, once the node has joined: where its standing in the cluster is read. */
  setCluster(figures: () => ClusterFigures): void {
    this.cluster = figures;
  }

  /** Why this node is not ready, one reason per failing check; empty when ready. */
  problems(): string[] {
    const problems: string[] = [];
    const source = this.source;
    if (source === undefined || !source.listening) problems.push(NOT_LISTENING);
    if (source?.server.draining === true) problems.push(DRAINING);
    if (this.cluster !== undefined) {
      const figures = this.cluster();
      if (!this.caughtUp(figures)) problems.push(NOT_CAUGHT_UP);
      if (!figures.etcdReachable) problems.push(ETCD_UNREACHABLE);
      if (figures.etcdNoSpace === true) problems.push(ETCD_NO_SPACE);
    } else if (this.options.clusterMode && source === undefined) {
      // A cluster node opens its lock port only once it has joined and caught up.
      problems.push(NOT_CAUGHT_UP);
    }
    return problems;
  }

  private caughtUp(figures: ClusterFigures): boolean {
    if (!figures.ready) return false;
    if (figures.lagBatches <= 0) {
      this.behind = undefined;
      return true;
    }
    const now = this.clock.now();
    if (this.behind === undefined || figures.appliedVersion >= this.behind.version) {
      this.behind = { version: figures.appliedVersion + figures.lagBatches, since: now };
      return true;
    }
    return now - this.behind.since < this.options.catchUpLimitMs;
  }
}
