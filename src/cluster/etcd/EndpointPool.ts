import { performance } from 'node:perf_hooks';
import { Etcd3, type IOptions } from 'etcd3';
import type { CallOptions } from '@grpc/grpc-js';
import { blamesEndpoint, deadline, isTimeout, requireLeader, SINGLE_ATTEMPT, within } from './calls.js';

/** How EtcdLog reaches etcd (the `--etcd` options). */
export interface EtcdConnection {
  readonly endpoints: readonly string[];
  /** Prefix of every key this cluster writes. */
  readonly cluster: string;
  readonly caCert?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly user?: { readonly username: string; readonly password: string };
}

/** Largest message we accept from etcd; grpc-js's 4 MiB default drops a big catch-up silently (trap 2). */
const MAX_MESSAGE_BYTES = 512 * 1024 * 1024;
/**
 * gRPC keepalive pings, so that a connection to a member that went silent (paused, blackholed)
 * is closed and its streams fail instead of hanging for the kernel's retransmission timeout.
 * etcd 3.4 enforces `--grpc-keepalive-min-time` (5 s by default) with PermitWithoutStream=false:
 * a client that pings more often while the server sends nothing collects strikes and is cut off
 * with GOAWAY "too_many_pings" (measured on 3.4.23: 1 s pings on an idle watch, the connection
 * dropped after ~4 s, RESOURCE_EXHAUSTED). 10 s stays clear of that with any jitter; a watch on
 * a paused member then breaks after ~12 s (measured). This is the backstop that frees dead
 * connections; the ~2 s failover comes from attempt deadlines (calls) and the watch watchdog
 * (streams).
 */
export const KEEPALIVE_MS = 10_000;
export const KEEPALIVE_TIMEOUT_MS = 2_000;
/** Bound on tries of one call, whatever the endpoints answer (each fails fast, e.g. refused). */
const MAX_TRIES_PER_ENDPOINT = 2;
/**
 * How long a silent member is passed over when the preference moves. Without it, members that
 * hang or refuse at once during an etcd election (no leader yet) hand the preference on to the
 * silent one, where the caller's next, longer attempt hangs again.
 */
const SILENT_AVOID_MS = 5_000;
/**
 * A call that got no answer in time may have waited on a leaderless cluster, not on a silent
 * member: a status request (answered by the member itself, even without a leader, if only to
 * refuse) tells the two apart within this time.
 */
const PROBE_MS = 500;

/** One etcd member: clients of its own (calls, the log watch, the janitor's watch), none shared with another member. */
export interface Endpoint {
  readonly url: string;
  readonly index: number;
  readonly client: Etcd3;
  /**
   * The log watch's and the janitor's watch's own clients on this member. etcd3 closes every grpc
   * channel of a client (`resetAllServices`) on a recoverable error: a unary call's UNAVAILABLE
   * ("no leader"), DEADLINE_EXCEEDED…, and a watch stream's error, including the CANCELLED of the
   * stream it cancels itself when its last watcher is cancelled. A channel closed under a live
   * watch lets grpc-js drop the connection (Channel.close → unrefUnusedSubchannels → subchannel
   * refcount 0 → transport.shutdown(), a graceful session.close()), and the watch dies with
   * "Connection dropped" at that connection's next keepalive ping, up to 10 s later, on a healthy
   * member. With a client each, only a stream's own failure closes its channel; the clients still
   * share one connection per member (same target and options: the global subchannel pool).
   */
  readonly logWatch: Etcd3;
  readonly janitorWatch: Etcd3;
}

/**
 * One client per endpoint, and the rule for choosing among them: every call goes to the
 * preferred endpoint (the last one that did not fail us); an attempt on it that fails or times
 * out moves the preference to the next endpoint that was not found silent lately, so the
 * caller's next attempt goes elsewhere. The etcd3 client's own multi-host pool would keep a call,
 * and every watch (trap 8), on a member that stopped answering.
 */
export class EndpointPool {
  readonly endpoints: readonly Endpoint[];
  private preferredIndex: number;
  /** Per endpoint: until when (performance.now()) it is passed over, having been found silent. */
  private readonly silentUntil: number[];
  private readonly probing: boolean[];
  private closed = false;

  constructor(connection: EtcdConnection, start: number) {
    if (connection.endpoints.length === 0) throw new Error('etcd: no endpoints given');
    this.endpoints = connection.endpoints.map((url, index) => ({
      url,
      index,
      client: new Etcd3(clientOptions(connection, url)),
      logWatch: new Etcd3(clientOptions(connection, url)),
      janitorWatch: new Etcd3(clientOptions(connection, url)),
    }));
    // Nodes start on different members so that the load spreads.
    this.preferredIndex = Math.abs(Math.floor(start)) % this.endpoints.length;
    this.silentUntil = this.endpoints.map(() => 0);
    this.probing = this.endpoints.map(() => false);
  }

  get preferred(): Endpoint {
    return this.endpoints[this.preferredIndex]!;
  }

  /** The preferred endpoint, or the best one after it when that is `avoid`. */
  preferredOtherThan(avoid: Endpoint | undefined): Endpoint {
    const preferred = this.preferred;
    if (avoid === undefined || preferred !== avoid || this.endpoints.length === 1) return preferred;
    return this.endpoints[this.nextAfter(avoid.index)]!;
  }

  /** `endpoint` failed a call: the next call goes to another member, unless the preference moved already. */
  leave(endpoint: Endpoint): void {
    if (this.preferredIndex === endpoint.index) this.preferredIndex = this.nextAfter(endpoint.index);
  }

  /** The first endpoint after `index` (in a ring) not found silent lately; the very next one if all were. */
  private nextAfter(index: number): number {
    const n = this.endpoints.length;
    const now = performance.now();
    for (let step = 1; step < n; step++) {
      const candidate = (index + step) % n;
      if (this.silentUntil[candidate]! <= now) return candidate;
    }
    return (index + 1) % n;
  }

  /** After a call on `endpoint` got no answer in time: is the member itself silent? */
  private async probe(endpoint: Endpoint): Promise<void> {
    if (this.probing[endpoint.index] || this.closed) return;
    this.probing[endpoint.index] = true;
    let silent = false;
    try {
      await within(PROBE_MS, 'status probe', endpoint.client.maintenance.status(deadline(PROBE_MS)));
    } catch (error) {
      silent = isTimeout(error);
    } finally {
      this.probing[endpoint.index] = false;
    }
    this.silentUntil[endpoint.index] = silent ? performance.now() + SILENT_AVOID_MS : 0;
    if (silent) this.leave(endpoint);
  }

  /**
   * Runs `work` on the preferred endpoint within `timeoutMs`. Each attempt may take `attemptMs`
   * (all of `timeoutMs` by default: one attempt, the caller retries); an attempt that fails moves
   * the preference, and while time is left the next attempt goes to the new preferred endpoint.
   * Use attemptMs < timeoutMs only for calls that may run twice.
   */
  async call<T>(what: string, timeoutMs: number, work: (endpoint: Endpoint, options: CallOptions) => Promise<T>, attemptMs = timeoutMs): Promise<T> {
    const end = performance.now() + timeoutMs;
    const maxTries = this.endpoints.length * MAX_TRIES_PER_ENDPOINT;
    for (let tries = 1; ; tries++) {
      if (this.closed) throw new Error(`etcd ${what}: the client is closed`);
      const endpoint = this.preferred;
      const limit = Math.min(attemptMs, end - performance.now());
      try {
        return await within(limit, what, work(endpoint, deadline(limit)));
      } catch (error) {
        const blamed = blamesEndpoint(error);
        if (blamed) this.leave(endpoint);
        if (isTimeout(error)) void this.probe(endpoint);
        if (!blamed || tries >= maxTries || end - performance.now() < 1) throw error;
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const endpoint of this.endpoints) {
      endpoint.client.close();
      endpoint.logWatch.close();
      endpoint.janitorWatch.close();
    }
  }
}

function clientOptions(connection: EtcdConnection, url: string): IOptions {
  const options: IOptions = {
    hosts: [url],
    grpcOptions: {
      'grpc.max_receive_message_length': MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': MAX_MESSAGE_BYTES,
      'grpc.keepalive_time_ms': KEEPALIVE_MS,
      'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
    },
    // Merged under each call's own options (its deadline): every call and stream requires a leader.
    defaultCallOptions: { interceptors: [requireLeader] },
    faultHandling: { global: SINGLE_ATTEMPT, host: () => SINGLE_ATTEMPT },
    dialTimeout: 3_000,
  };
  if (connection.caCert !== undefined) {
    options.credentials = { rootCertificate: connection.caCert, privateKey: connection.key, certChain: connection.cert };
  }
  if (connection.user !== undefined) options.auth = { ...connection.user };
  return options;
}
