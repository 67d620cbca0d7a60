import { printable } from '../bytes.js';
import type { DueEntry } from '../locks/LockTable.js';
import type { Committer } from './Committer.js';
import { LogOp, OPS_FORMAT, type LogCommand } from './LogCodec.js';
import type { LogFollower } from './LogFollower.js';
import type { ClusterDeps, ClusterOptions } from './ClusterOptions.js';
import type { StoreContact } from './StoreContact.js';
import { electLeader, NodeTooOldError, type Candidate, type MemberSession } from './ReplicatedLog.js';
import { NodeLiveness } from './NodeLiveness.js';
import { pause } from '../runtime/Timers.js';
import { DEFAULT_ETCD_QUOTA_BYTES } from './EntryBytesRules.js';
import { SpaceWatch } from './SpaceWatch.js';

/** How often the candidate list is read to see who leads. */
export const LEADER_CHECK_MS = 500;
/** Pause between attempts to take a name while etcd is unreachable. */
export const NAME_RETRY_MS = 1_000;
/**
 * A node rewrites its name key (its heartbeat) this many times per lease TTL. The other nodes
 * judge it silent once that key's revision stood still for a whole TTL (NodeLiveness): five
 * beats missed, not one late write.
 */
const BEATS_PER_LEASE = 5;
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
  /** Who is proven silent, by this node's clock: the only liveness leadership and name takeover trust. */
  private readonly liveness: NodeLiveness;
  /** How often this node rewrites its name key while it holds it, and retries a name held by another. */
  private readonly beatEveryMs: number;
  private stopBeating: (() => void) | undefined;
  private beating = false;
  /** Names this node has logged as silent (node-silent), so that each is logged once per silence. */
  private readonly reportedSilent = new Set<string>();
  /** Set when this node's last join took its name over from a silent holder (its own earlier incarnation, as a rule). */
  private tookOver: { readonly holder: string; readonly silentMs: number } | undefined;
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
    const silenceMs = (options.leaseSeconds ?? DEFAULT_LEASE_SECONDS) * 1000;
    this.beatEveryMs = silenceMs / BEATS_PER_LEASE;
    // Half the bound: two or three of this node's own beats may go missing before etcd counts as not taking writes.
    this.liveness = new NodeLiveness(silenceMs, silenceMs / 2);
  }

  /**
   * The nodes this node has proven silent (dead, frozen or cut off from etcd for at least the
   * silence bound, one name lease TTL): their name key's revision stood still that long on this
   * node's clock while etcd took this node's own writes. Never this node itself. A node leaves the
   * list as soon as a read shows it beat again (a pause ended), or its name is gone or taken over.
   */
  get silentNodes(): readonly string[] {
    return this.liveness.silentNames().filter((name) => name !== this.options.nodeName);
  }

  /** Whether `name` is proven silent now (see silentNodes). */
  isSilent(name: string): boolean {
    return name !== this.options.nodeName && this.liveness.isSilent(name);
  }

  /** When this node's last join took its name over from a silent holder: who held it and how long it was silent. */
  get nameTakenOver(): { readonly holder: string; readonly silentMs: number } | undefined {
    return this.tookOver;
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

  /**
   * Takes this node's name; waits (logging who holds it) while a node that still beats has it. A
   * holder proven silent (its heartbeat stood still for the silence bound while this node's claims
   * went through etcd) is taken over: a restarted node takes its name back from its dead
   * incarnation whatever keeps that incarnation's lease alive.
   */
  async join(cancelled: () => boolean): Promise<void> {
    const { log, logger, clock } = this.deps;
    const name = this.options.nodeName;
    const leaseSeconds = this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
    let lastComplaint = '';
    let holder = '';
    let silentBeat: number | undefined;
    for (;;) {
      if (cancelled()) return;
      let complaint: string;
      let retryMs = NAME_RETRY_MS;
      try {
        const silentMs = silentBeat === undefined ? 0 : this.liveness.silentForMs(name);
        const claim = await log.claimName(name, this.options.candidatePriority, leaseSeconds, STORE_CALL_TIMEOUT_MS, silentBeat);
        // The claim is a transaction with puts: etcd ordered it through its log, taken or not.
        this.liveness.wrote(true, clock.now());
        if (claim.taken) {
          this.session = claim.session;
          this.tookOver = silentBeat === undefined ? undefined : { holder, silentMs };
          if (this.tookOver !== undefined) logger.event('name-taken-over', { name, holder: this.tookOver.holder, silent_ms: Math.round(silentMs) });
          claim.session.onLost((why) => this.onSessionLost(why, cancelled));
          this.startBeating();
          logger.event('cluster-joined', { name, candidate: this.options.candidatePriority ?? 'off', lease_s: leaseSeconds });
          return;
        }
        holder = claim.holder;
        complaint = `name-held holder=${claim.holder}`;
        if (complaint !== lastComplaint) logger.event('name-held', { name, holder: claim.holder, retry_ms: this.beatEveryMs });
        // Watch the holder's heartbeat, as often as a live holder beats, until it moves or is proven silent.
        retryMs = this.beatEveryMs;
        silentBeat = await this.holderSilentBeat().catch(() => undefined);
      } catch (error) {
        // This version cannot read the log: no retry makes it able to (see NodeTooOldError).
        if (error instanceof NodeTooOldError) throw error;
        this.liveness.wrote(false, clock.now());
        silentBeat = undefined;
        complaint = `etcd-unreachable ${(error as Error).message}`;
        if (complaint !== lastComplaint) logger.event('etcd-unreachable', { error: (error as Error).message, retry_ms: NAME_RETRY_MS });
      }
      lastComplaint = complaint;
      if (silentBeat === undefined) await pause(this.deps.timers, retryMs);
    }
  }

  /** Reads every member's heartbeat; the beat of this node's name if its holder is now proven silent. */
  private async holderSilentBeat(): Promise<number | undefined> {
    await this.readMembers();
    return this.liveness.isSilent(this.options.nodeName) ? this.liveness.beatOf(this.options.nodeName) : undefined;
  }

  /** One read of every member's heartbeat and candidacy, noted by the liveness judgement; the candidates. */
  private async readMembers(): Promise<Candidate[]> {
    const { clock } = this.deps;
    const sentAt = clock.now();
    const members = await this.deps.log.members(STORE_CALL_TIMEOUT_MS);
    this.liveness.observed(members, sentAt, clock.now());
    return members.flatMap((m) => (m.candidate === undefined ? [] : [m.candidate]));
  }

  /** Rewrites the name key every beatEveryMs while this node holds its name (the heartbeat NodeLiveness reads). */
  private startBeating(): void {
    this.stopBeating?.();
    this.stopBeating = this.deps.timers.every(this.beatEveryMs, () => void this.beat());
  }

  private async beat(): Promise<void> {
    const session = this.session;
    if (this.beating || session === undefined || session.lost) return;
    this.beating = true;
    try {
      // A beat that cannot land within the bound's half is worth no more than the next one.
      await session.beat(this.liveness.writeGapMs);
      this.liveness.wrote(true, this.deps.clock.now());
    } catch {
      this.liveness.wrote(false, this.deps.clock.now());
    } finally {
      this.beating = false;
    }
  }

  private onSessionLost(why: string, cancelled: () => boolean): void {
    this.stopBeating?.();
    this.stopBeating = undefined;
    if (cancelled()) return;
    this.deps.logger.event('name-lost', { name: this.options.nodeName, why });
    this.session = undefined;
    void this.join(cancelled);
  }

  async leave(): Promise<void> {
    this.stopBeating?.();
    this.stopBeating = undefined;
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
      const candidates = await this.readMembers();
      // The one store read an idle node makes on a schedule: it keeps etcd's reachability current.
      this.contact.heard(true);
      this.reportSilence();
      // A candidate proven silent does not lead, whatever keeps its lease (and so its key) alive.
      const leader = electLeader(candidates.filter((c) => !this.isSilent(c.name)))?.name;
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

  /** Logs each node that became proven silent (node-silent) or beat again after it (node-beating). */
  private reportSilence(): void {
    const silent = new Set(this.silentNodes);
    for (const name of silent) {
      if (this.reportedSilent.has(name)) continue;
      this.reportedSilent.add(name);
      this.deps.logger.event('node-silent', { name, silent_ms: Math.round(this.liveness.silentForMs(name)) });
    }
    for (const name of this.reportedSilent) {
      if (silent.has(name)) continue;
      this.reportedSilent.delete(name);
      this.deps.logger.event('node-beating', { name });
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
    const state = this.follower.state;
    // Between two slices of a command the state is no state any log position names: wait for its end.
    if (this.snapshotting || state.applying) return;
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
    void this.writeSnapshot().finally(() => {
      this.snapshotting = false;
    });
  }

  private async writeSnapshot(): Promise<void> {
    const { log, logger, clock } = this.deps;
    const started = clock.now();
    this.snapshotClock = started;
    let position = this.follower.state.position;
    try {
      // Encoded in slices, apply paused meanwhile: a big table's snapshot never holds the event loop.
      const snapshot = await this.follower.snapshot();
      const { bytes, appliedLogBytes, entries } = snapshot;
      position = snapshot.position;
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
        entries,
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
