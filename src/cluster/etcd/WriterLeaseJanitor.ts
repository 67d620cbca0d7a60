import { performance } from 'node:perf_hooks';
import type { Watcher } from 'etcd3';
import { isNoLeaderRefusal, prefixEnd } from './calls.js';
import type { Endpoint, EndpointPool } from './EndpointPool.js';
import { OverdueLeases } from './OverdueLeases.js';
import { revokeLease } from './WriterLeases.js';

/** How often due leases are looked for (a handful at most: one timer per node, not per lease). */
const SWEEP_MS = 100;
/** The listing that starts (and restarts) the watch of the announcements. */
const LIST_TIMEOUT_MS = 2_000;
const LIST_ATTEMPT_MS = 1_000;
/** Pause before the watch is started again after it ended or its listing failed. */
const RESTART_MS = 250;
const REVOKE_TIMEOUT_MS = 2_000;
/** Short: the revoke is due before its lease's node gives up, and a silent member must not eat that. */
const REVOKE_ATTEMPT_MS = 200;
/** A revoke that failed is not tried again sooner (every node revokes every renewed lease after a leader change). */
const REVOKE_RETRY_MS = 300;
/**
 * This node's own announcement not heard back on the watch within this time: the watch is stale
 * (a stalled stream stays open and silent) and moves to another member.
 */
const OWN_ANNOUNCEMENT_HEARD_MS = 500;
/** TTL assumed for an announcement whose value is not a TTL: later than any real one (a late revoke is the safe side here). */
const UNREADABLE_TTL_MS = 60_000;

/**
 * Keeps etcd's leader changes from stretching the append fence, for every node at once.
 *
 * A writer lease fences a batch to `lateCommitMs` after its send because etcd revokes the lease
 * once its TTL ran out. But a new etcd leader gives every lease its full TTL again
 * (lessor.Promote), so across a leader change a request held on the way (in a paused member, a cut
 * link's queue) could commit after its node closed the connection. The node seals such leases
 * itself (WriterLeases.seal) when it can reach etcd; a node that cannot (cut off, paused, crashed)
 * needs someone else to. So every writer lease is announced under `prefix` before any send names
 * it, and every node watches the announcements and revokes each lease that outlived its TTL,
 * counted from when the node heard of it, by OVERDUE_MARGIN_MS: after any grant's TTL, so no
 * send inside its node's fence is cut short, and before that node's fence passes, so nobody can be
 * told otherwise while the lease lives. etcd applies the revoke in Raft order; no later leader
 * brings the lease back. Usually the leader has revoked it already ("lease not found", or the
 * announcement's delete event first).
 */
export class WriterLeaseJanitor {
  private readonly overdue = new OverdueLeases();
  /** Calls waiting in `untilOverdueGone`, each for the leases still left of those due when it came. */
  private readonly waiters = new Set<{ readonly left: Set<string>; readonly done: () => void; readonly fail: (error: Error) => void }>();
  private readonly sweeper: NodeJS.Timeout;
  private watcher: Watcher | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private lastEndpoint: Endpoint | undefined;
  /** This node's announcements not heard back on the watch yet, with when they were made. */
  private readonly unheardOwn = new Map<string, number>();
  private closed = false;
  private revokedCount = 0;
  /** Why the last revoke failed, for the error of a call that waited in vain. */
  private lastRevokeError = '';
  private watchRestarts = 0;
  /** Bumped by every restart: a listing that comes back after one is for a watch no longer wanted. */
  private generation = 0;
  /** Whether a listing completed once: until then this node knows of no lease, overdue or not. */
  private listedOnce = false;
  private readonly firstListingWaiters = new Set<() => void>();
  /** This node's own announced leases, with when each was announced, until gone. */
  private readonly own = new Map<string, number>();

  constructor(
    private readonly pool: EndpointPool,
    private readonly prefix: Buffer,
  ) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
    void this.follow();
  }

  /** Leases this node revoked as overdue that etcd still had (for tests and reports). */
  get revoked(): number {
    return this.revokedCount;
  }

  /** Whether this node knows of writer lease `id` (announced, not known gone). For tests. */
  knows(id: string): boolean {
    return this.overdue.has(id);
  }

  /** Times the watch of the announcements started again (ended, or found stale). For tests and reports. */
  get restarts(): number {
    return this.watchRestarts;
  }

  /**
   * This node announced writer lease `id` (WriterLeases): it is known from now on, whatever the
   * watch does, and hearing it back on the watch shows the watch is current.
   */
  announced(id: string, ttlMs: number): void {
    const now = performance.now();
    this.own.set(id, now);
    // The watch may have brought it back before the put's answer did: then it is heard already.
    if (this.overdue.has(id)) return;
    this.overdue.heard(id, ttlMs, now);
    this.unheardOwn.set(id, now);
  }

  /**
   * The log watch moved to another member (its stream broke or stalled): this watch, on another
   * stream of the same member's connection, moves too.
   */
  moveWatch(): void {
    this.restart(0);
  }

  /**
   * Undefined when no lease this node heard of is overdue (the usual case); otherwise revokes start
   * at once and the promise resolves when every lease overdue now is gone from etcd, or rejects
   * after `timeoutMs`. A node appends and reads the log head only after this: a request held on
   * the way with such a lease (its node gave up on it, a new etcd leader renewed the lease) then
   * either landed before the answers to every command this node receives from now on, or never
   * lands. Before the first listing of the announcements (a node that just started) it waits for
   * that listing, which counts every lease as overdue.
   */
  untilOverdueGone(timeoutMs: number): Promise<void> | undefined {
    if (this.closed) return Promise.reject(new Error('overdue writer leases: the client is closed'));
    const now = performance.now();
    if (!this.listedOnce) return this.afterFirstListing(timeoutMs);
    if (!this.overdue.anyDue(now)) return undefined;
    const left = new Set(this.overdue.due(now));
    this.sweep();
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        left,
        done: () => {
          clearTimeout(timer);
          resolve();
        },
        fail: (error: Error) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          reject(error);
        },
      };
      const timer = setTimeout(
        () => waiter.fail(new Error(`${waiter.left.size} overdue writer lease(s) not revoked within ${Math.round(timeoutMs)} ms: ${this.lastRevokeError}`)),
        timeoutMs,
      );
      this.waiters.add(waiter);
    });
  }

  /** untilOverdueGone for a node that has not listed the announcements yet (it just started). */
  private async afterFirstListing(timeoutMs: number): Promise<void> {
    const started = performance.now();
    let listed: () => void = () => {};
    let timer: NodeJS.Timeout | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        listed = resolve;
        this.firstListingWaiters.add(listed);
        timer = setTimeout(() => reject(new Error(`writer lease announcements not listed within ${Math.round(timeoutMs)} ms`)), timeoutMs);
      });
    } finally {
      clearTimeout(timer);
      this.firstListingWaiters.delete(listed);
    }
    await this.untilOverdueGone(timeoutMs - (performance.now() - started));
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    clearTimeout(this.restartTimer);
    for (const waiter of [...this.waiters]) waiter.fail(new Error('overdue writer leases: the client is closed'));
    this.stopWatch();
  }

  /** Lists every announcement, then watches from the listing's revision on. */
  private async follow(): Promise<void> {
    if (this.closed) return;
    const generation = this.generation;
    const listingStarted = performance.now();
    const prefix = this.prefix;
    let listing;
    try {
      listing = await this.pool.call(
        'writer lease announcements',
        LIST_TIMEOUT_MS,
        ({ client }, options) => client.kv.range({ key: prefix, range_end: prefixEnd(prefix) }, options),
        LIST_ATTEMPT_MS,
      );
    } catch {
      this.restart();
      return;
    }
    if (this.closed || generation !== this.generation) return;
    // This node's own leases announced while the listing was on its way may be missing from it.
    const gone = this.overdue.listed(
      listing.kvs.map((kv) => ({ id: this.idOf(kv.key), ttlMs: ttlOf(kv.value) })),
      performance.now(),
      (id) => (this.own.get(id) ?? Number.NEGATIVE_INFINITY) >= listingStarted,
    );
    for (const id of gone) this.forget(id);
    for (const kv of listing.kvs) this.unheardOwn.delete(this.idOf(kv.key));
    if (!this.listedOnce) {
      this.listedOnce = true;
      for (const listed of [...this.firstListingWaiters]) listed();
    }
    const endpoint = this.pool.preferredOtherThan(this.lastEndpoint);
    this.lastEndpoint = endpoint;
    // The janitor's own client on that member (Endpoint.janitorWatch), hence its own watch stream:
    // etcd3 multiplexes a client's watchers on one stream, and a watcher that etcd cancels as it is
    // created (the log watch's, from a compacted revision) is then matched to whichever watcher
    // waits first; the log watch's next response finds no watcher and etcd3 throws out of its
    // stream handler (the process dies).
    const watcher = endpoint.janitorWatch
      .watch()
      .prefix(prefix)
      .startRevision(String(Number(listing.header.revision) + 1))
      .watcher();
    this.watcher = watcher;
    watcher.on('data', (response) => {
      if (this.watcher !== watcher) return;
      const now = performance.now();
      for (const event of response.events) {
        const id = this.idOf(event.kv.key);
        if (event.type === 'Put') {
          this.overdue.heard(id, ttlOf(event.kv.value), now);
          this.unheardOwn.delete(id);
        } else {
          this.forget(id);
        }
      }
    });
    watcher.on('disconnected', () => {
      if (this.watcher !== watcher) return;
      this.pool.leave(endpoint);
      this.restart();
    });
    // Compaction past the watch (or any other end): list again.
    watcher.on('error', () => {
      if (this.watcher === watcher) this.restart();
    });
  }

  private stopWatch(): void {
    const watcher = this.watcher;
    this.watcher = undefined;
    // On a silent stream the cancel never completes; the stream's end settles it.
    if (watcher !== undefined) void watcher.cancel().catch(() => {});
  }

  /** Ends the watch and lists and watches again after `delayMs` (on another member when it can: `lastEndpoint`). */
  private restart(delayMs = RESTART_MS): void {
    this.generation++;
    this.stopWatch();
    this.unheardOwn.clear(); // the listing covers them
    if (this.closed || this.restartTimer !== undefined) return;
    this.watchRestarts++;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.follow();
    }, delayMs);
    this.restartTimer.unref();
  }

  private sweep(): void {
    const now = performance.now();
    if (this.watcher !== undefined) {
      for (const at of this.unheardOwn.values()) {
        if (now - at < OWN_ANNOUNCEMENT_HEARD_MS) continue;
        this.restart(0);
        break;
      }
    }
    for (const id of this.overdue.takeDue(now)) {
      void revokeLease(this.pool, 'overdue writer lease revoke', id, REVOKE_TIMEOUT_MS, REVOKE_ATTEMPT_MS).then(
        (revoked) => {
          if (revoked) this.revokedCount++;
          this.forget(id);
        },
        (error: unknown) => {
          this.overdue.revokeFailed(id, performance.now() + REVOKE_RETRY_MS);
          this.lastRevokeError = (error as Error).message;
          // Refused for want of a leader: so would the call that waits be; it fails now, as it would have.
          if (!isNoLeaderRefusal(error)) return;
          for (const waiter of [...this.waiters]) {
            if (waiter.left.has(id)) waiter.fail(new Error(`overdue writer lease revoke refused: ${this.lastRevokeError}`));
          }
        },
      );
    }
  }

  /** Lease `id` is gone from etcd: forgotten, and the calls that waited for it told. */
  private forget(id: string): void {
    this.overdue.gone(id);
    this.own.delete(id);
    this.unheardOwn.delete(id);
    for (const waiter of this.waiters) {
      if (!waiter.left.delete(id) || waiter.left.size > 0) continue;
      this.waiters.delete(waiter);
      waiter.done();
    }
  }

  private idOf(key: Buffer): string {
    return key.subarray(this.prefix.length).toString('latin1');
  }
}

function ttlOf(value: Buffer): number {
  const ttlMs = Number(value.toString('latin1'));
  return Number.isFinite(ttlMs) && ttlMs > 0 ? ttlMs : UNREADABLE_TTL_MS;
}
