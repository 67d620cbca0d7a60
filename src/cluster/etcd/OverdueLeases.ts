/**
 * Past its TTL by this much (counted from when this node heard of it), a writer lease is revoked
 * by this node. etcd's leader revokes an expired lease itself within its lessor's 500 ms check, so
 * leases are gone before they fall due here unless a new leader renewed them, and nodes do not
 * race the leader for every lease. What is left of the time fence's slack
 * (WRITER_LEASE_REVOKE_SLACK_MS, 1 s) is for the watch that brings the announcement, the sweep (every
 * 0.1 s) and the revoke: a node that hears of a lease and gets its revoke applied within about 0.4 s
 * of the announcement revokes it before its node's fence passes (in the worst case, an attempt that
 * failed at once right after the announcement).
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
  /** Leases whose last revoke failed: not handed out again before this time. */
  private readonly retryAt = new Map<string, number>();

  get size(): number {
    return this.dueAt.size;
  }

  has(id: string): boolean {
    return this.dueAt.has(id);
  }

  /** Lease `id`, granted with `ttlMs`, was announced; this node heard of it at `now`. */
  heard(id: string, ttlMs: number, now: number): void {
    if (!this.dueAt.has(id)) this.dueAt.set(id, now + ttlMs + OVERDUE_MARGIN_MS);
  }

  /** etcd no longer has lease `id` (revoked, expired, or its announcement deleted with it). */
  gone(id: string): void {
    this.dueAt.delete(id);
    this.revoking.delete(id);
    this.retryAt.delete(id);
  }

  /**
   * A fresh listing of every announcement (at start, and after a watch ended): leases heard of
   * before and missing from it are gone. One not heard of before may have been announced any time
   * up to a TTL ago (renewed since by a new leader, say), and may be overdue already: it is due now.
   * A live node whose lease that was is refused once and takes a fresh one. Returns the leases
   * found gone (but those `keep` names: announced after the listing was read, say).
   */
  listed(leases: ReadonlyArray<{ readonly id: string; readonly ttlMs: number }>, now: number, keep: (id: string) => boolean = () => false): string[] {
    const present = new Set<string>();
    for (const { id, ttlMs } of leases) {
      present.add(id);
      this.heard(id, ttlMs, now - ttlMs - OVERDUE_MARGIN_MS);
    }
    const gone = [...this.dueAt.keys()].filter((id) => !present.has(id) && !keep(id));
    for (const id of gone) this.gone(id);
    return gone;
  }

  /** Whether any lease is due at `now`, its revoke in flight or not (a few leases: a scan). */
  anyDue(now: number): boolean {
    for (const at of this.dueAt.values()) if (at <= now) return true;
    return false;
  }

  /** Every lease due at `now`, its revoke in flight or not. */
  due(now: number): string[] {
    const due: string[] = [];
    for (const [id, at] of this.dueAt) if (at <= now) due.push(id);
    return due;
  }

  /** The leases due at `now` with no revoke in flight nor a failed one just before; each is marked as being revoked. */
  takeDue(now: number): string[] {
    const due: string[] = [];
    for (const [id, at] of this.dueAt) {
      if (at <= now && !this.revoking.has(id) && !((this.retryAt.get(id) ?? 0) > now)) {
        this.revoking.add(id);
        due.push(id);
      }
    }
    return due;
  }

  /** A revoke of `id` failed: it is handed out again by `takeDue` from `retryAt` on. */
  revokeFailed(id: string, retryAt: number): void {
    if (!this.revoking.delete(id)) return; // gone meanwhile
    this.retryAt.set(id, retryAt);
  }
}
