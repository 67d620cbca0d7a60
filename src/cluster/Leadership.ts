import { printable } from '../bytes.js';
import type { DueEntry } from '../locks/LockTable.js';
import type { Committer } from './Committer.js';
import type { ReplicaState } from './ReplicaState.js';
import { LogOp, OPS_FORMAT, type LogCommand } from './LogCodec.js';
import type { LogFollower } from './LogFollower.js';
import type { ClusterDeps, ClusterOptions } from './ClusterOptions.js';
import type { StoreContact } from './StoreContact.js';
import { electLeader, NodeTooOldError, type MemberSession } from './ReplicatedLog.js';
import { pause } from '../runtime/Timers.js';
import { DEFAULT_ETCD_QUOTA_BYTES } from './EntryBytesRules.js';
import { SpaceWatch } from './SpaceWatch.js';

/** How often the candidate list is read to see who leads. */
export const LEADER_CHECK_MS = 500;
/** Pause between attempts to take a name another live node holds (or while etcd is unreachable). */
export const NAME_RETRY_MS = 1_000;
const STORE_CALL_TIMEOUT_MS = 5_000;
const SNAPSHOT_TIMEOUT_MS = 120_000;
const DEFAULT_LEASE_SECONDS = 5;
const DEFAULT_SNAPSHOT_EVERY_BATCHES = 10_000;
const SNAPSHOT_MAX_AGE_MS = 60_000;
const EXPIRY_BUDGET = 2_000;
/** Snapshots up to this size (one etcd chunk) are cheap to rewrite: the log-volume rule skips them. */
const SMALL_SNAPSHOT_BYTES = 1024 * 1024;
/**
 * The log applied since the last snapshot stays in etcd (its retained batches) until the next one:
 * once it reaches this share of --etcd-quota-bytes, and the last snapshot's size (so that rewriting
 * the table never costs etcd more than the log it frees), the leader snapshots whatever the other
 * rules say, and the compaction after it frees the log's history (see EntryBytesRules for the
 * rest of the quota).
 */
export const LOG_QUOTA_SHARE = 1 / 20;

/**
 * The node's standing in the cluster: its name (held by a lease), its candidacy, and, while it
 * leads, the leader's duties: proposing expiries when deadlines pass on its own monotonic clock,
 * writing snapshots and compacting the log. Two nodes that both believe they lead for a moment
 * do no harm: an expiry is only proposed once this node's own clock says the phase ran out
 * (measured from when it applied the entry, which is after the client sent it), a stale one is a
 * no-op, and snapshots and compactions of the same log agree.
 */
export class Leadership {
  private session: MemberSession | undefined;
  private leaderName: string | undefined;
  private lastCheck = Number.NEGATIVE_INFINITY;
  private checking = false;
  private snapshotting = false;
  /** The last snapshot this node wrote: its version, size, when, and the follower's log bytes then. */
  private written: { readonly version: number; readonly bytes: number; readonly at: number; readonly appliedLogBytes: number } | undefined;
  /** When the leader last considered the age rule (a node that never snapshotted counts from start). */
  private snapshotClock: number;
  /** etcd's space as every member says it: NOSPACE alarms, and the leader's defragmentations. */
  readonly space: SpaceWatch;
  /** The log volume past which a snapshot is written now (LOG_QUOTA_SHARE). */
  private readonly logBytesForSpace: number;
  changes = 0;
  snapshotsWritten = 0;
  expiriesProposed = 0;

  constructor(
    private readonly options: ClusterOptions,
    private readonly deps: ClusterDeps,
    private readonly contact: StoreContact,
    /** The replica, and what it published of the snapshots it loaded and the log it applied. */
    private readonly follower: LogFollower,
    /** Where expiries are proposed. */
    private readonly committer: Committer,
  ) {
    this.snapshotClock = deps.clock.now();
    const quotaBytes = options.etcdQuotaBytes ?? DEFAULT_ETCD_QUOTA_BYTES;
    this.space = new SpaceWatch(deps.log, deps.clock, deps.logger, quotaBytes);
    this.logBytesForSpace = quotaBytes * LOG_QUOTA_SHARE;
  }

  /** The newest snapshot this node wrote or loaded: the one the log-volume and age rules count from. */
  private get lastSnapshot(): { readonly version: number; readonly bytes: number; readonly at: number; readonly appliedLogBytes: number } | undefined {
    const loaded = this.follower.loaded;
    const written = this.written;
    if (loaded === undefined) return written;
    if (written === undefined) return loaded;
    return loaded.version > written.version ? loaded : written;
  }

  /** When this node last wrote or loaded a snapshot (its clock); undefined if never. */
  get lastSnapshotAt(): number | undefined {
    return this.lastSnapshot?.at;
  }

  get lastSnapshotBytes(): number | undefined {
    return this.lastSnapshot?.bytes;
  }

  get isLeader(): boolean {
    return this.leaderName === this.options.nodeName;
  }

  get leader(): string | undefined {
    return this.leaderName;
  }

  /** Takes this node's name; waits (logging who holds it) while another live node has it. */
  async join(cancelled: () => boolean): Promise<void> {
    const { log, logger } = this.deps;
    const leaseSeconds = this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
    let lastComplaint = '';
    for (;;) {
      if (cancelled()) return;
      let complaint: string;
      try {
        const claim = await log.claimName(this.options.nodeName, this.options.candidatePriority, leaseSeconds, STORE_CALL_TIMEOUT_MS);
        if (claim.taken) {
          this.session = claim.session;
          claim.session.onLost((why) => this.onSessionLost(why, cancelled));
          logger.event('cluster-joined', {
            name: this.options.nodeName,
            candidate: this.options.candidatePriority ?? 'off',
            lease_s: leaseSeconds,
          });
          return;
        }
        complaint = `name-held holder=${claim.holder}`;
        if (complaint !== lastComplaint) logger.event('name-held', { name: this.options.nodeName, holder: claim.holder, retry_ms: NAME_RETRY_MS });
      } catch (error) {
        // This version cannot read the log: no retry makes it able to (see NodeTooOldError).
        if (error instanceof NodeTooOldError) throw error;
        complaint = `etcd-unreachable ${(error as Error).message}`;
        if (complaint !== lastComplaint) logger.event('etcd-unreachable', { error: (error as Error).message, retry_ms: NAME_RETRY_MS });
      }
      lastComplaint = complaint;
      await pause(this.deps.timers, NAME_RETRY_MS);
    }
  }

  private onSessionLost(why: string, cancelled: () => boolean): void {
    if (cancelled()) return;
    this.deps.logger.event('name-lost', { name: this.options.nodeName, why });
    this.session = undefined;
    void this.join(cancelled);
  }

  async leave(): Promise<void> {
    const session = this.session;
    this.session = undefined;
    await session?.release().catch(() => {});
  }

  /** Called every cluster tick once the node has caught up. */
  tick(): void {
    const now = this.deps.clock.now();
    if (now - this.lastCheck >= LEADER_CHECK_MS) {
      this.lastCheck = now;
      void this.checkLeader();
    }
    this.space.tick(this.isLeader);
    if (!this.isLeader) return;
    this.proposeExpiries();
    this.maybeSnapshot(now);
  }

  private async checkLeader(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const candidates = await this.deps.log.candidates(STORE_CALL_TIMEOUT_MS);
      // The one store call an idle node makes on a schedule: it keeps etcd's reachability current.
      this.contact.heard(true);
      const leader = electLeader(candidates)?.name;
      if (leader !== this.leaderName) {
        this.leaderName = leader;
        this.changes++;
        this.deps.logger.event('leader', { leader: leader ?? 'none', self: leader === this.options.nodeName });
      }
    } catch {
      this.contact.heard(false);
      // Unknown while the store is unreachable: keep the last answer (a stale leader is harmless).
    } finally {
      this.checking = false;
    }
  }

  /**
   * Proposes the expiry of every entry whose phase ran out on this node's clock, and the end of
   * every lock-delay that ran out (within a budget). An owner's expiry holds its lock back for this
   * node's --lock-delay, once every live node reads the command that says so (format 4).
   */
  private proposeExpiries(): void {
    const state = this.follower.state;
    const holdMs = (this.options.lockDelayMs ?? 0) > 0 && this.deps.log.mayWrite(OPS_FORMAT) ? this.options.lockDelayMs! : 0;
    let proposed = 0;
    while (proposed < EXPIRY_BUDGET) {
      const due = state.table.takeDue();
      if (due === undefined) break;
      this.deps.logger.debug?.(
        `proposing expiry of ${printable(due.key)}/${printable(due.index)} ${printable(due.owner)} v${due.version} ` +
          `(${due.isOwner ? `owner ttl ${due.ttl}` : `waiter ttw ${due.ttw}`} s, due ${Math.round(this.deps.clock.now() - due.deadline)} ms ago)`,
      );
      this.committer.submit(expireCommand(due, due.isOwner ? holdMs : 0), { resolve: () => {}, reject: () => state.table.rearm(due) });
      proposed++;
    }
    while (proposed < EXPIRY_BUDGET) {
      const due = state.table.takeDueHold();
      if (due === undefined) break;
      this.committer.submit({ op: LogOp.LiftHold, ...due }, { resolve: () => {}, reject: () => state.table.rearmHold(due) });
      proposed++;
    }
    if (proposed > 0) {
      this.expiriesProposed += proposed;
      this.deps.observer?.expiriesProposed?.(proposed);
    }
  }

  private maybeSnapshot(now: number): void {
    if (this.snapshotting) return;
    const state = this.follower.state;
    const last = this.lastSnapshot;
    const behind = state.position.version - (last?.version ?? 0);
    const every = this.options.snapshotEveryBatches ?? DEFAULT_SNAPSHOT_EVERY_BATCHES;
    if (behind <= 0) return;
    const logBytesSince = this.follower.appliedLogBytes - (last?.appliedLogBytes ?? 0);
    // The log retained since the last snapshot is taking a share of etcd's quota: snapshot now.
    const forSpace = logBytesSince >= Math.max(this.logBytesForSpace, last?.bytes ?? 0);
    if (!forSpace && behind < every && now - this.snapshotClock < SNAPSHOT_MAX_AGE_MS) return;
    // Rewriting a big table for a little log costs etcd more than the history it frees: past one
    // chunk, wait until the log since the last snapshot is at least half that snapshot's size.
    if (!forSpace && (last?.bytes ?? 0) > SMALL_SNAPSHOT_BYTES && logBytesSince * 2 < last!.bytes) return;
    this.snapshotting = true;
    void this.writeSnapshot(state).finally(() => {
      this.snapshotting = false;
    });
  }

  private async writeSnapshot(state: ReplicaState): Promise<void> {
    const { log, logger, clock } = this.deps;
    const started = clock.now();
    const position = state.position;
    const bytes = state.encode();
    const appliedLogBytes = this.follower.appliedLogBytes;
    this.snapshotClock = started;
    try {
      if (!(await log.saveSnapshot({ position, bytes }, SNAPSHOT_TIMEOUT_MS))) {
        // Another saver's snapshot is the one followers load: ours counts for nothing (not even its age).
        logger.event('snapshot-write-failed', { version: position.version, error: 'another snapshot, as new or newer, is the one etcd names' });
        return;
      }
      await log.compact(position.revision, STORE_CALL_TIMEOUT_MS);
      if (position.version > (this.written?.version ?? 0)) this.written = { version: position.version, bytes: bytes.length, at: started, appliedLogBytes };
      this.snapshotsWritten++;
      logger.event('snapshot-written', {
        version: position.version,
        revision: position.revision,
        entries: state.table.size,
        bytes: bytes.length,
        ms: Math.round(clock.now() - started),
      });
    } catch (error) {
      logger.event('snapshot-write-failed', { version: position.version, error: (error as Error).message });
    }
  }
}

/** The expiry of `due`; one that then holds its lock back for `holdMs`, if that is above 0. */
function expireCommand(due: DueEntry, holdMs: number): LogCommand {
  const { key, index, owner, version } = due;
  return holdMs > 0 ? { op: LogOp.ExpireAndHold, key, index, owner, version, holdMs } : { op: LogOp.Expire, key, index, owner, version };
}
