import { performance } from 'node:perf_hooks';
import type { CallOptions } from '@grpc/grpc-js';
import type { MemberSession } from '../ReplicatedLog.js';
import type { Endpoint, EndpointPool } from './EndpointPool.js';

/** Longest one keep-alive attempt may take on one member before the next member is asked. */
const KEEPALIVE_ATTEMPT_MS = 1_000;
const REVOKE_TIMEOUT_MS = 2_000;

/**
 * The lease holding a node's name and candidacy, kept alive by this class rather than by the
 * etcd3 Lease (whose keep-alive stream stays on one member: a paused member would starve it until
 * the lease ran out). Every third of the TTL one keep-alive is sent through the endpoint pool; an
 * attempt that hangs for KEEPALIVE_ATTEMPT_MS moves to another member, so a paused or cut-off
 * member costs about a second, well inside the TTL. The session is lost only when etcd says the
 * lease is gone. A whole TTL without a successful keep-alive proves nothing: during an etcd
 * election (its leader paused, say) nobody can renew a lease, and the new leader gives every
 * lease its full TTL again; declaring the name lost then would only make the node wait for its
 * own old lease to lapse before it could take its name back (seen: 7 s without a leader node).
 * Until etcd answers, this node keeps its name and keeps trying.
 *
 * The lease is cleanup, not liveness: etcd lets any client keep any lease alive by its id (3.4 and
 * 3.5 check no permission on LeaseKeepAlive, only on revoke; src/cluster/README.md), and the id of
 * this one shows in every read of the name key. What the other nodes trust is `beat`: a rewrite
 * of the name key, made only while this lease still holds it, whose mod revision they watch move.
 */
export class NameLease implements MemberSession {
  private isLost = false;
  private readonly handlers: Array<(why: string) => void> = [];
  private readonly timer: NodeJS.Timeout;
  private renewing = false;
  private renewedAt: number;

  constructor(
    private readonly pool: EndpointPool,
    readonly id: string,
    private readonly ttlMs: number,
    grantedAt: number,
    private readonly forget: (lease: NameLease) => void,
    /** The name key and the value it holds: rewritten by each beat. */
    private readonly nameKey: Buffer,
    private readonly nameValue: Buffer,
  ) {
    this.renewedAt = grantedAt;
    this.timer = setInterval(() => void this.renew(), Math.max(100, Math.floor(ttlMs / 3)));
    this.timer.unref();
  }

  get lost(): boolean {
    return this.isLost;
  }

  onLost(handler: (why: string) => void): void {
    this.handlers.push(handler);
  }

  async release(): Promise<void> {
    if (!this.stop()) return;
    await this.pool.call(
      'name lease revoke',
      REVOKE_TIMEOUT_MS,
      ({ client }, options) => client.leaseClient.leaseRevoke({ ID: this.id }, options),
      KEEPALIVE_ATTEMPT_MS,
    );
  }

  /**
   * The heartbeat: puts the name key again, under this lease, if this lease still holds it (a
   * compare on the key's lease). A name found gone or under another lease (taken over from this
   * node while it was silent) loses the session.
   */
  async beat(timeoutMs: number): Promise<void> {
    if (this.isLost) throw new Error(`name lease ${this.id} is no longer held`);
    const key = this.nameKey;
    const response = await this.pool.call(
      'heartbeat',
      timeoutMs,
      ({ client }, options) =>
        client.kv.txn(
          {
            compare: [{ key, target: 'Lease', result: 'Equal', lease: this.id }],
            success: [{ request_put: { key, value: this.nameValue, lease: this.id } }],
            failure: [{ request_range: { key } }],
          },
          options,
        ),
      KEEPALIVE_ATTEMPT_MS,
    );
    if (response.succeeded) return;
    const holder = response.responses[0]?.response_range.kvs[0];
    const why = holder === undefined ? 'the name key is gone' : `the name key is held by lease ${holder.lease}, not ${this.id} (taken over)`;
    this.lose(why);
    throw new Error(`heartbeat: ${why}`);
  }

  /** Stops keeping the lease alive without revoking it (the client is closing). */
  close(): void {
    this.stop();
  }

  private stop(): boolean {
    if (this.isLost) return false;
    this.isLost = true;
    clearInterval(this.timer);
    this.forget(this);
    return true;
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.isLost) return;
    this.renewing = true;
    const sent = performance.now();
    try {
      // One round of attempts takes at most a TTL; the next tick tries again.
      const ttl = await this.pool.call('name lease keep-alive', this.ttlMs, keepAliveOnce(this.id), KEEPALIVE_ATTEMPT_MS);
      if (ttl <= 0) throw new LeaseGoneError(`etcd no longer knows lease ${this.id} (last renewed ${Math.round(sent - this.renewedAt)} ms before)`);
      this.renewedAt = sent;
    } catch (error) {
      if (error instanceof LeaseGoneError) this.lose(error.message);
    } finally {
      this.renewing = false;
    }
  }

  private lose(why: string): void {
    if (!this.stop()) return;
    for (const handler of this.handlers) handler(why);
  }
}

/** etcd answered that the lease no longer exists: the name is free for anyone. */
class LeaseGoneError extends Error {
  override name = 'LeaseGoneError';
}

/** One keep-alive over a short-lived stream (its call deadline ends it in any case); resolves with the new TTL. */
function keepAliveOnce(id: string): (endpoint: Endpoint, options: CallOptions) => Promise<number> {
  return async ({ client }, options) => {
    const stream = await client.leaseClient.leaseKeepAlive(options);
    return new Promise<number>((resolve, reject) => {
      stream.on('data', (response) => {
        resolve(Number(response.TTL));
        stream.end();
      });
      stream.on('error', reject);
      stream.on('end', () => reject(new Error('keep-alive stream ended without an answer')));
      stream.write({ ID: id });
    });
  };
}
