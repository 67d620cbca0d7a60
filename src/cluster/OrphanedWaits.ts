import type { ByteString } from '../bytes.js';
import type { ClusterDeps } from './ClusterOptions.js';
import type { Committer } from './Committer.js';
import { INCARNATION_WAITS_FORMAT, LogOp } from './LogCodec.js';
import type { ReplicaState, WaitingIncarnation } from './ReplicaState.js';

/** How often the leader reads which nodes hold a name, while waits of other nodes are tied in the table. */
export const LIVE_NODES_EVERY_MS = 1_000;
const LIVE_NODES_TIMEOUT_MS = 2_000;

/**
 * Whether `node` is gone: the one place the cluster decides that the waits of a node's incarnations
 * may end. A node is gone once its name key is (its name lease expired or was revoked), or once its
 * heartbeat is proven silent (Leadership.isSilent): a lease anyone may keep alive proves nothing.
 */
export function nodeIsGone(node: ByteString, named: ReadonlySet<string>, isSilent: (name: string) => boolean): boolean {
  return !named.has(node) || isSilent(node);
}

/**
 * Ends the waits of node incarnations that are over: a wait through 0x0B is answered on a
 * connection of the node it went through, which dies with that process, so an entry left waiting
 * by it (ReplicaState's tied waits) would be granted to nobody. Two proposers, each a CancelWaitsOf
 * per incarnation (format 5):
 *   - this node, for the earlier incarnations of its own name, once it has caught up (a restart);
 *   - the leader, for the incarnations of a node that is gone (nodeIsGone), each seen tied in the
 *     table before the read that found its node gone, so a node that rejoined as a new incarnation
 *     meanwhile keeps that incarnation's waits.
 * A proposal that fails is made again at a later tick; one that applies leaves nothing to propose.
 */
export class OrphanedWaits {
  /** Incarnations (node\0incarnation) whose cancel is on its way. */
  private readonly proposed = new Set<string>();
  private reading = false;
  private lastRead = Number.NEGATIVE_INFINITY;
  /** Whether this node logged that its waits are tied to its incarnation from now on. */
  private tyingTold = false;

  constructor(
    private readonly nodeName: string,
    /** The incarnation this node proposes as now. */
    private readonly incarnation: () => number,
    private readonly deps: ClusterDeps,
    private readonly committer: Committer,
    private readonly replica: () => ReplicaState,
    /** Whether a node's heartbeat is proven silent (Leadership.isSilent). */
    private readonly isSilent: (name: string) => boolean,
    /** Makes this node propose as a new incarnation from its next batch on; returns it. */
    private readonly reincarnate: () => number,
  ) {}

  /** Whether this node's own waits may be tied to its incarnation (see ClusterLockService.acquire). */
  get mayTie(): boolean {
    return this.deps.log.mayWrite(INCARNATION_WAITS_FORMAT) && !this.replica().waitsEnded(this.nodeName, this.incarnation());
  }

  /** Called every cluster tick once the node has caught up. */
  tick(now: number, isLeader: boolean): void {
    const state = this.replica();
    const incarnation = this.incarnation();
    if (state.waitsEnded(this.nodeName, incarnation)) {
      // The leader took this living node for gone (proven silent: a pause past its lease) and ended
      // its waits. Waits tied to that incarnation again would do nothing, and untied ones would
      // outlive the process: it goes on as a new incarnation, whose waits end with it.
      const next = this.reincarnate();
      this.deps.logger.event('own-waits-ended', { node: this.nodeName, incarnation, next_incarnation: next });
    }
    if (!this.deps.log.mayWrite(INCARNATION_WAITS_FORMAT)) return;
    if (!this.tyingTold) {
      // From here on a 0x0B's waiting entry ends with this process (until every node read format 5, it stayed to its TTW).
      this.tyingTold = true;
      this.deps.logger.event('waits-tied', { node: this.nodeName, incarnation: this.incarnation() });
    }
    let others = false;
    for (const w of state.waitingIncarnations()) {
      if (w.node === this.nodeName) {
        if (w.incarnation !== this.incarnation()) this.propose(w, 'restarted');
      } else others = true;
    }
    if (others && isLeader && !this.reading && now - this.lastRead >= LIVE_NODES_EVERY_MS) void this.endGoneNodes(now, state);
  }

  /** Reads which nodes hold a name and ends the waits of every incarnation, tied before the read, of a node that is gone. */
  private async endGoneNodes(now: number, state: ReplicaState): Promise<void> {
    this.reading = true;
    this.lastRead = now;
    const before = [...state.waitingIncarnations()].filter((w) => w.node !== this.nodeName).map((w) => ({ node: w.node, incarnation: w.incarnation }));
    try {
      const named = new Set((await this.deps.log.members(LIVE_NODES_TIMEOUT_MS)).map((m) => m.name));
      for (const w of before) if (nodeIsGone(w.node, named, this.isSilent)) this.propose(w, 'node-gone');
    } catch {
      // etcd unreachable: the next read tries again.
    } finally {
      this.reading = false;
    }
  }

  private propose({ node, incarnation }: WaitingIncarnation, why: string): void {
    const key = `${node}\0${incarnation}`;
    if (this.proposed.has(key) || this.replica().waitsEnded(node, incarnation)) return;
    this.proposed.add(key);
    this.committer.submit(
      { op: LogOp.CancelWaitsOf, node, incarnation },
      {
        resolve: (removed) => {
          this.proposed.delete(key);
          this.deps.logger.event('waits-ended', { node, incarnation, why, removed });
        },
        reject: () => this.proposed.delete(key),
      },
    );
  }
}
