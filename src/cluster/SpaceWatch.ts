import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import type { MemberSpace, ReplicatedLog } from './ReplicatedLog.js';

/** How often each node reads every member's space (a status call per member: no Raft round, no write). */
export const SPACE_CHECK_MS = 1_000;
const STATUS_TIMEOUT_MS = 1_000;
/** A member is defragmented once its backend passes this share of the quota… */
export const DEFRAGMENT_ABOVE_SHARE = 1 / 2;
/** …and its free pages are at least this share of it: the dbSize a defragmentation gives back. */
export const DEFRAGMENT_FREE_SHARE = 1 / 4;
/** Between two defragmentations (one member each), at least this long, and the last one must answer its status again: never two members out at once. */
export const DEFRAGMENT_PAUSE_MS = 2_000;
/** After a failed defragmentation (no permission: etcd wants the root role for it) the leader waits this long. */
const DEFRAGMENT_RETRY_MS = 10 * 60_000;
/** Fewer members than this are never defragmented: one out of two (or the only one) stops the cluster. */
export const MIN_MEMBERS_TO_DEFRAGMENT = 3;
/** A defragmentation copies the whole backend: seconds a GiB. */
const DEFRAGMENT_TIMEOUT_MS = 120_000;

/** What a node last heard of etcd's space (metrics, /readyz). */
export interface SpaceFigures {
  /** The largest backend among the members that answered (what etcd compares with its quota); undefined before the first answer. */
  readonly dbBytes: number | undefined;
  /** The part of that member's backend in use. */
  readonly dbBytesInUse: number | undefined;
  /** A member reported a NOSPACE alarm on the last check: etcd refuses every write until an operator disarms it. */
  readonly noSpace: boolean;
  /** Members this node defragmented as leader. */
  readonly defragments: number;
}

/**
 * Reads every etcd member's space once a second on every node: reports a NOSPACE alarm (raised by
 * anyone: another tenant of the etcd cluster, or a write past a quota smaller than this node was
 * told) in /readyz, a metric and a log line, and notices when it is gone, so the node serves again
 * without a restart. The entries themselves never reach the quota: apply bounds them
 * (EntryBytesRules), and the leader snapshots and compacts by the log's volume (Leadership).
 *
 * While it leads, a node also gives back the space compactions freed: a member whose backend is
 * past half the quota with a quarter of it free is defragmented, one member at a time, only when
 * the node was given three members or more and every one answered the same check (the others keep
 * a quorum while it copies its backend and serves nothing), and never sooner than
 * DEFRAGMENT_PAUSE_MS after the last one. etcd's dbSize
 * only falls that way, and a NOSPACE alarm can only be disarmed for good once it is under the quota.
 * The alarm itself is left to the operator, who knows why it was raised.
 */
export class SpaceWatch {
  private checking = false;
  private lastCheck = Number.NEGATIVE_INFINITY;
  private members: readonly MemberSpace[] = [];
  private noSpace = false;
  private defragmenting = false;
  private nextDefragmentAt = Number.NEGATIVE_INFINITY;
  private defragments = 0;

  constructor(
    private readonly log: ReplicatedLog,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** --etcd-quota-bytes. */
    private readonly quotaBytes: number,
  ) {}

  get figures(): SpaceFigures {
    let largest: MemberSpace | undefined;
    for (const m of this.members) if (largest === undefined || m.dbBytes > largest.dbBytes) largest = m;
    return { dbBytes: largest?.dbBytes, dbBytesInUse: largest?.dbBytesInUse, noSpace: this.noSpace, defragments: this.defragments };
  }

  /** Every cluster tick; `leads` while this node is the leader. */
  tick(leads: boolean): void {
    const now = this.clock.now();
    if (this.checking || now - this.lastCheck < SPACE_CHECK_MS || this.log.space === undefined) return;
    this.lastCheck = now;
    this.checking = true;
    void this.check(leads).finally(() => {
      this.checking = false;
    });
  }

  private async check(leads: boolean): Promise<void> {
    let members: readonly MemberSpace[];
    let asked: number;
    try {
      ({ members, asked } = await this.log.space!(STATUS_TIMEOUT_MS));
    } catch {
      return;
    }
    if (members.length === 0) return; // no member answered: reachability says so elsewhere
    this.members = members;
    const noSpace = members.some((m) => m.noSpace);
    const { dbBytes, dbBytesInUse } = this.figures;
    if (noSpace !== this.noSpace) {
      this.noSpace = noSpace;
      this.logger.event(noSpace ? 'etcd-nospace' : 'etcd-nospace-cleared', {
        db_bytes: dbBytes,
        db_in_use_bytes: dbBytesInUse,
        quota_bytes: this.quotaBytes,
        members: members.filter((m) => m.noSpace).length,
      });
    }
    // Only with three members or more, every one of them answering: the others keep a quorum.
    if (leads && asked >= MIN_MEMBERS_TO_DEFRAGMENT && members.length === asked) this.maybeDefragment(members);
  }

  private maybeDefragment(members: readonly MemberSpace[]): void {
    const now = this.clock.now();
    if (this.defragmenting || now < this.nextDefragmentAt || this.log.defragment === undefined) return;
    // The largest, then the first in address order: two nodes that both believe they lead for a
    // moment pick the same one, and the second finds it silent (it does not answer while it
    // copies) and waits.
    const chosen = [...members]
      .filter((m) => m.dbBytes >= this.quotaBytes * DEFRAGMENT_ABOVE_SHARE && m.dbBytes - m.dbBytesInUse >= this.quotaBytes * DEFRAGMENT_FREE_SHARE)
      .sort((a, b) => b.dbBytes - a.dbBytes || (a.url < b.url ? -1 : a.url > b.url ? 1 : 0))[0];
    if (chosen === undefined) return;
    this.defragmenting = true;
    const member = chosen;
    const started = now;
    void this.log
      .defragment(member.url, DEFRAGMENT_TIMEOUT_MS)
      .then(
        () => {
          this.defragments++;
          this.nextDefragmentAt = this.clock.now() + DEFRAGMENT_PAUSE_MS;
          this.logger.event('etcd-defragmented', {
            member: member.url,
            db_bytes_before: member.dbBytes,
            in_use_bytes: member.dbBytesInUse,
            ms: Math.round(this.clock.now() - started),
          });
        },
        (error: unknown) => {
          this.nextDefragmentAt = this.clock.now() + DEFRAGMENT_RETRY_MS;
          this.logger.event('etcd-defragment-failed', { member: member.url, error: (error as Error).message, retry_ms: DEFRAGMENT_RETRY_MS });
        },
      )
      .finally(() => {
        this.defragmenting = false;
      });
  }
}
