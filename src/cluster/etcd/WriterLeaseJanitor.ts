import { performance } from 'node:perf_hooks';
import type { Watcher } from 'etcd3';
import { isLeaseNotFound, prefixEnd } from './calls.js';
import type { Endpoint, EndpointPool } from './EndpointPool.js';
import { OverdueLeases } from './OverdueLeases.js';

/** How often due leases are looked for (a handful at most: one timer per node, not per lease). */
const SWEEP_MS = 100;
/** The listing that starts (and restarts) the watch of the announcements. */
const LIST_TIMEOUT_MS = 2_000;
const LIST_ATTEMPT_MS = 1_000;
/** Pause before the watch is started again after it ended or its listing failed. */
const RESTART_MS = 250;
const REVOKE_TIMEOUT_MS = 2_000;
const REVOKE_ATTEMPT_MS = 500;
/** TTL assumed for an announcement whose value is not a TTL: later than any real one (a late revoke is the safe side here). */
const UNREADABLE_TTL_MS = 60_000;

/** The announcement of writer lease `id` under `prefix` (see WriterLeases.grant): its value is the TTL granted, in ms. */
export function writerLeaseAnnouncement(prefix: Buffer, id: string, ttlMs: number): { key: Buffer; value: Buffer } {
  return { key: Buffer.concat([prefix, Buffer.from(id)]), value: Buffer.from(String(ttlMs)) };
}

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
  private readonly sweeper: NodeJS.Timeout;
  private watcher: Watcher | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private lastEndpoint: Endpoint | undefined;
  private closed = false;
  private revokedCount = 0;

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

  /** Leases heard of and not known gone. */
  get tracked(): number {
    return this.overdue.size;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    clearTimeout(this.restartTimer);
    this.stopWatch();
  }

  /** Lists every announcement, then watches from the listing's revision on. */
  private async follow(): Promise<void> {
    if (this.closed) return;
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
    if (this.closed) return;
    this.overdue.listed(
      listing.kvs.map((kv) => ({ id: this.idOf(kv.key), ttlMs: ttlOf(kv.value) })),
      performance.now(),
    );
    const endpoint = this.pool.preferredOtherThan(this.lastEndpoint);
    this.lastEndpoint = endpoint;
    const watcher = endpoint.client
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
        if (event.type === 'Put') this.overdue.heard(id, ttlOf(event.kv.value), now);
        else this.overdue.gone(id);
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

  private restart(): void {
    this.stopWatch();
    if (this.closed || this.restartTimer !== undefined) return;
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      void this.follow();
    }, RESTART_MS);
    this.restartTimer.unref();
  }

  private sweep(): void {
    for (const id of this.overdue.takeDue(performance.now())) {
      void this.pool
        .call('overdue writer lease revoke', REVOKE_TIMEOUT_MS, ({ client }, options) => client.leaseClient.leaseRevoke({ ID: id }, options), REVOKE_ATTEMPT_MS)
        .then(
          () => {
            this.revokedCount++;
            this.overdue.gone(id);
          },
          (error: unknown) => {
            if (isLeaseNotFound(error)) this.overdue.gone(id);
            else this.overdue.revokeFailed(id);
          },
        );
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
