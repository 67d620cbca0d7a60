import { performance } from 'node:perf_hooks';
import { isLeaseNotFound } from './calls.js';
import type { EndpointPool } from './EndpointPool.js';

/** TTL asked for a writer lease; etcd may raise it to its minimum (1.5 × election timeout, rounded up). */
export const WRITER_LEASE_TTL_SECONDS = 2;
/** A fresh writer lease is granted once the current one is this old, while appends go on. */
export const WRITER_LEASE_ROTATE_MS = 500;
/**
 * Longest one attempt of a grant may hang on one member before the next goes to another. Every
 * send of this node waits on the one grant in progress once its lease runs short, so a grant left
 * hanging on a paused member for the whole timeout would hold them all that long. Granting twice
 * is harmless: a lease whose grant was not answered fences nothing and expires by its TTL.
 */
const GRANT_ATTEMPT_MS = 500;
/** Leases of sends with unknown outcome kept for the next seal before one is done in the background. */
const MAX_UNSETTLED_LEASES = 32;
/** Time a background seal may take. */
const BACKGROUND_SEAL_MS = 2_000;
/** A lease with less than this left is not chosen for a send: the batch could arrive after it. */
const WRITER_LEASE_MIN_LEFT_MS = 1_000;
/**
 * After its last send a node keeps a fresh lease ready this long (a grant and its announcement
 * every WRITER_LEASE_ROTATE_MS), so its next write after a pause costs one commit rather than three
 * (grant, announcement, then the write): the release that hands a lock to a waiter, say. A node
 * that does not write makes no grant: an idle cluster stays quiet.
 */
export const WRITER_LEASE_WARM_MS = 5_000;
/** Time a grant made to keep a lease ready may take. */
const WARM_GRANT_TIMEOUT_MS = 2_000;
/**
 * After a lease's TTL runs out, etcd's leader notices within its lessor's 500 ms check and then
 * commits a revoke through Raft (milliseconds on a healthy cluster); until that revoke is applied
 * a txn naming the lease still passes. The rest is margin for a busy machine.
 */
export const WRITER_LEASE_REVOKE_SLACK_MS = 1_000;

/** The announcement of writer lease `id` under `prefix` (see WriterLeases.grant): its value is the TTL granted, in ms. */
export function writerLeaseAnnouncement(prefix: Buffer, id: string, ttlMs: number): { key: Buffer; value: Buffer } {
  return { key: Buffer.concat([prefix, Buffer.from(id)]), value: Buffer.from(String(ttlMs)) };
}

/**
 * Revokes lease `id`: true once etcd revoked it, false if etcd had it no longer ("lease not found":
 * gone at that point of the log all the same); any other failure rejects.
 */
export async function revokeLease(pool: EndpointPool, what: string, id: string, timeoutMs: number, attemptMs: number): Promise<boolean> {
  try {
    await pool.call(what, timeoutMs, ({ client }, options) => client.leaseClient.leaseRevoke({ ID: id }, options), attemptMs);
    return true;
  } catch (error) {
    if (isLeaseNotFound(error)) return false;
    throw error;
  }
}

/** A writer lease as granted: its id, and when its grant was answered (performance.now()). */
export interface WriterLease {
  readonly id: string;
  readonly grantedAt: number;
  readonly endsAt: number;
}

/**
 * Fences for appends (trap 9, defect 5). Each append's txn also puts a small per-client fence key
 * attached to a short writer lease that is never kept alive. etcd checks, when it applies the txn
 * in Raft order, that the lease still exists ("requested lease not found" otherwise, and nothing of
 * the txn is applied), and revokes a lease by itself once its TTL ran out. An attempt always uses a
 * lease whose grant was answered before the attempt was sent, so its batch commits no later than
 * that grant + TTL + the revoke delay, whatever happens to the request on the way: `lateCommitMs`.
 * That holds while etcd keeps its leader; a new leader renews every lease, and then the seal (below)
 * and the other nodes' janitors (WriterLeaseJanitor) stop such a request.
 */
export class WriterLeases {
  private current: WriterLease | undefined;
  /**
   * Leases of sends that rejected without a definite outcome (a request may still be on its way),
   * by id, until a seal revoked them. Few: one lease serves every send of half a second.
   */
  private readonly unsettled = new Map<string, WriterLease>();
  /** A background seal is running (see unsettledSend). */
  private sealingBehind = false;
  private granting: Promise<WriterLease> | undefined;
  /** The longest TTL etcd granted us (ms); the requested one until the first grant. */
  private ttlMs = WRITER_LEASE_TTL_SECONDS * 1000;
  /** When this node last took a lease for a send (performance.now()). */
  private lastSendAt = Number.NEGATIVE_INFINITY;
  /** The timer that keeps a lease ready after a send (see WRITER_LEASE_WARM_MS). */
  private warmTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly pool: EndpointPool,
    /** This client's fence key: every append's fence put names it, with the lease lent for it. */
    readonly fenceKey: Buffer,
    /** Where each lease is announced before a send names it (WriterLeaseJanitor). */
    private readonly announcePrefix: Buffer,
    /** Told of each lease once announced (this node's janitor knows it from then on). */
    private readonly onAnnounced: (id: string, ttlMs: number) => void,
  ) {}

  /** How long after an append rejected its batch can still commit (see ReplicatedLog.lateCommitMs). */
  get lateCommitMs(): number {
    return this.ttlMs + WRITER_LEASE_REVOKE_SLACK_MS;
  }

  /** The longest TTL etcd granted a writer lease (ms); the one asked for before the first grant. */
  get grantedTtlMs(): number {
    return this.ttlMs;
  }

  /**
   * A lease to send an append with now. The current one while it has enough time left (a fresh
   * one is asked for in the background once it is WRITER_LEASE_ROTATE_MS old); otherwise, as after
   * an idle spell, a new grant is awaited within `timeoutMs`.
   */
  forSend(timeoutMs: number): WriterLease | Promise<WriterLease> {
    const lease = this.current;
    const now = performance.now();
    this.lastSendAt = now;
    this.keepWarm();
    if (lease !== undefined && lease.endsAt - now >= WRITER_LEASE_MIN_LEFT_MS) {
      if (now - lease.grantedAt >= WRITER_LEASE_ROTATE_MS) void this.grant(timeoutMs).catch(() => {});
      return lease;
    }
    return this.grant(timeoutMs);
  }

  /** No more grants to keep a lease ready (the log closes). */
  close(): void {
    this.closed = true;
    clearTimeout(this.warmTimer);
    this.warmTimer = undefined;
  }

  /** Until WRITER_LEASE_WARM_MS after the last send, a lease as old as WRITER_LEASE_ROTATE_MS is replaced in the background. */
  private keepWarm(): void {
    if (this.warmTimer !== undefined || this.closed) return;
    this.warmTimer = setTimeout(() => {
      this.warmTimer = undefined;
      const now = performance.now();
      if (this.closed || now - this.lastSendAt > WRITER_LEASE_WARM_MS) return;
      const lease = this.current;
      if (lease === undefined || now - lease.grantedAt >= WRITER_LEASE_ROTATE_MS) void this.grant(WARM_GRANT_TIMEOUT_MS).catch(() => {});
      this.keepWarm();
    }, WRITER_LEASE_ROTATE_MS);
    this.warmTimer.unref();
  }

  /** etcd said the lease is gone (it outlived its TTL on the way): never choose it again. */
  refused(lease: WriterLease): void {
    if (this.current === lease) this.current = undefined;
  }

  /**
   * A send with `lease` rejected without a definite outcome: its request may still reach etcd.
   * Rounds that commit on a later attempt leave such leases behind with no seal to follow; past
   * MAX_UNSETTLED_LEASES they are revoked in the background (old leases: no send uses them).
   */
  unsettledSend(lease: WriterLease): void {
    this.unsettled.set(lease.id, lease);
    if (this.unsettled.size > MAX_UNSETTLED_LEASES && !this.sealingBehind) {
      this.sealingBehind = true;
      void this.seal(BACKGROUND_SEAL_MS)
        .catch(() => {})
        .finally(() => (this.sealingBehind = false));
    }
  }

  /**
   * Revokes every lease of an unsettled send (see `unsettled`): etcd applies a revoke in Raft
   * order, and refuses any transaction naming the lease after it, whatever a new leader does to
   * lease TTLs. "Lease not found" is as good: the lease is gone at that point of the log too.
   * Resolves once every one is gone; a lease whose revoke failed stays for the next seal.
   */
  async seal(timeoutMs: number): Promise<void> {
    const leases = [...this.unsettled.values()];
    const revoked = await Promise.allSettled(
      leases.map(async (lease) => {
        if (this.current === lease) this.current = undefined; // no send may use it any more
        await revokeLease(this.pool, 'writer lease revoke', lease.id, timeoutMs, GRANT_ATTEMPT_MS);
        this.unsettled.delete(lease.id);
      }),
    );
    const failed = revoked.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason as Error;
  }

  /**
   * Test seam (a fenced append): the next sends use lease `id` as if etcd had just granted it
   * with `ttlMs`, whatever etcd knows of it.
   */
  chooseNext(id: string, ttlMs: number): void {
    this.current = this.lease(id, performance.now(), ttlMs);
  }

  private lease(id: string, grantedAt: number, ttlMs: number): WriterLease {
    return { id, grantedAt, endsAt: grantedAt + ttlMs };
  }

  /**
   * One grant at a time; callers that arrive meanwhile share it. A lease is announced (a key
   * attached to it, its value the TTL) before any send may name it: from then on every node's
   * WriterLeaseJanitor revokes it once overdue, even if a new etcd leader renewed it. A grant
   * whose announcement failed is not used (it fences nothing and expires by its TTL).
   */
  private grant(timeoutMs: number): Promise<WriterLease> {
    this.granting ??= this.grantAndAnnounce(timeoutMs).finally(() => {
      this.granting = undefined;
    });
    return this.granting;
  }

  private async grantAndAnnounce(timeoutMs: number): Promise<WriterLease> {
    const started = performance.now();
    const response = await this.pool.call(
      'writer lease grant',
      timeoutMs,
      ({ client }, options) => client.leaseClient.leaseGrant({ TTL: WRITER_LEASE_TTL_SECONDS, ID: 0 }, options),
      GRANT_ATTEMPT_MS,
    );
    const grantedAt = performance.now();
    const ttlMs = Number(response.TTL) * 1000;
    if (!(ttlMs > 0)) throw new Error(`writer lease grant: etcd granted TTL ${response.TTL} (${response.error})`);
    const { key, value } = writerLeaseAnnouncement(this.announcePrefix, response.ID, ttlMs);
    const left = timeoutMs - (grantedAt - started);
    if (left < 1) throw new Error('writer lease announcement: no time left after the grant');
    await this.pool.call(
      'writer lease announcement',
      left,
      ({ client }, options) => client.kv.put({ key, value, lease: response.ID }, options),
      GRANT_ATTEMPT_MS,
    );
    // A lease announced too late to leave a send its minimum is of no use (it would be refused).
    if (grantedAt + ttlMs - performance.now() < WRITER_LEASE_MIN_LEFT_MS) throw new Error('writer lease announcement: the lease ran short meanwhile');
    this.onAnnounced(response.ID, ttlMs);
    if (ttlMs > this.ttlMs) this.ttlMs = ttlMs;
    const lease = this.lease(response.ID, grantedAt, ttlMs);
    if (this.current === undefined || this.current.grantedAt < grantedAt) this.current = lease;
    return lease;
  }
}
