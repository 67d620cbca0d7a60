import { performance } from 'node:perf_hooks';
import { Etcd3, type IOptions } from 'etcd3';
import type { CallOptions } from '@grpc/grpc-js';
import { blamesEndpoint, deadline, requireLeader, SINGLE_ATTEMPT, within } from './calls.js';

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
const KEEPALIVE_MS = 10_000;
const KEEPALIVE_TIMEOUT_MS = 2_000;
/** Bound on tries of one call, whatever the endpoints answer (each fails fast, e.g. refused). */
const MAX_TRIES_PER_ENDPOINT = 2;

/** One etcd member: its own client, hence its own gRPC channels and its own watch stream. */
export interface Endpoint {
  readonly url: string;
  readonly index: number;
  readonly client: Etcd3;
}

/**
 * One client per endpoint, and the rule for choosing among them: every call goes to the
 * preferred endpoint (the last one that did not fail us); an attempt on it that fails or times
 * out moves the preference to the next endpoint, so the caller's next attempt goes elsewhere.
 * The etcd3 client's own multi-host pool would keep a call, and every watch (trap 8), on a member
 * that stopped answering.
 */
export class EndpointPool {
  readonly endpoints: readonly Endpoint[];
  private preferredIndex: number;
  private closed = false;

  constructor(connection: EtcdConnection, start: number) {
    if (connection.endpoints.length === 0) throw new Error('etcd: no endpoints given');
    this.endpoints = connection.endpoints.map((url, index) => ({ url, index, client: new Etcd3(clientOptions(connection, url)) }));
    // Nodes start on different members so that the load spreads.
    this.preferredIndex = Math.abs(Math.floor(start)) % this.endpoints.length;
  }

  get preferred(): Endpoint {
    return this.endpoints[this.preferredIndex]!;
  }

  /** The preferred endpoint, or the one after it when that is `avoid`. */
  preferredOtherThan(avoid: Endpoint | undefined): Endpoint {
    const preferred = this.preferred;
    if (avoid === undefined || preferred !== avoid || this.endpoints.length === 1) return preferred;
    return this.endpoints[(avoid.index + 1) % this.endpoints.length]!;
  }

  /** `endpoint` failed a call: the next one goes to another member (unless the preference moved already). */
  leave(endpoint: Endpoint): void {
    if (this.preferredIndex === endpoint.index) this.preferredIndex = (endpoint.index + 1) % this.endpoints.length;
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
        if (!blamed || tries >= maxTries || end - performance.now() < 1) throw error;
      }
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const endpoint of this.endpoints) endpoint.client.close();
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
