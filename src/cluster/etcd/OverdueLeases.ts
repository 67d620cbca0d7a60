/**
 * Past its TTL by this much (counted from when this node heard of it), a writer lease is revoked
 * by this node. etcd's leader revokes an expired lease itself within its lessor's 500 ms check, so
 * leases are gone before they fall due here unless a new leader renewed them, and nodes do not
 * race the leader for every lease. What is left of the time fence's slack
 * (WRITER_LEASE_REVOKE_SLACK_MS, 1 s) is for the watch that brings the announcement: a node that
 * hears of a lease within about 0.4 s of its announcement (a sweep every 0.1 s, then the revoke)
 * revokes it before its node's fence passes.
 */
export const OVERDUE_MARGIN_MS = 500;

/**
 * The writer leases this node heard announced, each with the time it falls due (clock in ms):
 * heard + TTL + OVERDUE_MARGIN_MS. Pure bookkeeping for the WriterLeaseJanitor: no I/O, the time
 * is passed in. A lease is heard of once (the first time counts: a later listing only ever finds
 * it later), goes when etcd says it is gone, and is handed out for a revoke once due, one revoke
 * in flight at a time.
 */
export class OverdueLeases {
  private readonly dueAt = new Map<string, number>();
  private readonly revoking = new Set<string>();

  get size(): number {
    return this.dueAt.size;
  }

  /** Lease `id`, granted with `ttlMs`, was announced; this node heard of it at `now`. */
  heard(id: string, ttlMs: number, now: number): void {
    if (!this.dueAt.has(id)) this.dueAt.set(id, now + ttlMs + OVERDUE_MARGIN_MS);
  }

  /** etcd no longer has lease `id` (revoked, expired, or its announcement deleted with it). */
  gone(id: string): void {
    this.dueAt.delete(id);
    this.revoking.delete(id);
  }

  /**
   * A fresh listing of every announcement (at start, and after a watch ended): leases heard of
   * before and missing from it are gone. One not heard of before may have been announced any time
   * up to a TTL ago (renewed since by a new leader, say), so it counts as heard a TTL ago: due
   * OVERDUE_MARGIN_MS from now. A live node whose lease that was is refused once and takes a
   * fresh one.
   */
  listed(leases: ReadonlyArray<{ readonly id: string; readonly ttlMs: number }>, now: number): void {
    const present = new Set<string>();
    for (const { id, ttlMs } of leases) {
      present.add(id);
      this.heard(id, ttlMs, now - ttlMs);
    }
    for (const id of [...this.dueAt.keys()]) if (!present.has(id)) this.gone(id);
  }

  /** The leases due at `now` with no revoke in flight; each is marked as being revoked. */
  takeDue(now: number): string[] {
    const due: string[] = [];
    for (const [id, at] of this.dueAt) {
      if (at <= now && !this.revoking.has(id)) {
        this.revoking.add(id);
        due.push(id);
      }
    }
    return due;
  }

  /** A revoke of `id` failed: it is handed out again at the next `takeDue`. */
  revokeFailed(id: string): void {
    this.revoking.delete(id);
  }
}
