import type { CallOptions, InterceptingCall, Interceptor } from '@grpc/grpc-js';
import type { IOptions } from 'etcd3';

/** Trap 4: grpc calls carry a deadline; the client has none by default. */
export function deadline(timeoutMs: number): CallOptions {
  return { deadline: new Date(Date.now() + Math.max(1, timeoutMs)) };
}

/** The client's own machinery can outlast a call's deadline: bound the whole call here too. */
export function within<T>(timeoutMs: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`etcd ${what} did not complete within ${Math.round(timeoutMs)} ms`)), Math.max(1, timeoutMs));
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

/** The first key after every key that starts with `prefix` (etcd's range_end for a prefix). */
export function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** Whether `key` starts with `prefix` (compared in place: no slice per key). */
export function hasPrefix(key: Buffer, prefix: Buffer): boolean {
  return key.length >= prefix.length && key.compare(prefix, 0, prefix.length, 0, prefix.length) === 0;
}

/**
 * Errors that say nothing against the member that answered: the request itself was refused.
 * Anything else (a deadline, an unavailable or leaderless member, a lost leadership) sends the
 * next attempt to another endpoint.
 */
const REQUEST_REFUSED = /lease not found|compacted|too large|too many operations|key not found|permission denied|invalid auth/i;

export function blamesEndpoint(error: unknown): boolean {
  return !REQUEST_REFUSED.test(error instanceof Error ? error.message : String(error));
}

/** The call got no answer within its deadline (ours, or grpc's that carries the same one). */
export function isTimeout(error: unknown): boolean {
  return error instanceof Error && /did not complete within|DEADLINE_EXCEEDED/.test(error.message);
}

/** etcd's "requested lease not found": a fenced append arrived after its writer lease ended. */
export function isLeaseNotFound(error: unknown): boolean {
  return error instanceof Error && /requested lease not found/i.test(error.message);
}

/**
 * etcd's require-leader refusal (see `requireLeader`): the member knew of no leader, and its gRPC
 * interceptor refused the call before the call's handler ran, so a write so refused was never
 * proposed (etcd 3.4 server, v3rpc/interceptor.go). A write that was proposed and then failed
 * gets one of the "request timed out…" or "leader changed" errors instead, never this one.
 */
export function isNoLeaderRefusal(error: unknown): boolean {
  return error instanceof Error && /etcdserver: no leader/.test(error.message);
}

/**
 * Require-leader (trap 8): etcd refuses a call, and cancels a stream, that carries `hasleader:
 * true` while the member has no leader (isolated by a partition), instead of serving it stale
 * or holding it silently. The interceptor adds the header to every call of a client; it wraps the
 * call that `next` builds rather than constructing one, so that the grpc-js package is only a
 * type here (it comes with etcd3, not as a dependency of ours).
 */
export const requireLeader: Interceptor = (options, next) => {
  const call = next(options);
  const start = call.start.bind(call);
  call.start = (metadata, listener) => {
    metadata.set('hasleader', 'true');
    start(metadata, listener);
  };
  // grpc-js only uses the call through its interface; the class type is what the signature names.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-class-instance-assignment
  return call as InterceptingCall;
};

type FaultHandling = NonNullable<IOptions['faultHandling']>;
type Policy = ReturnType<NonNullable<FaultHandling['host']>>;

const NEVER_ABORTED = new AbortController().signal;

/**
 * No retries and no circuit breaker inside the client: one call is one attempt on one member, and
 * EtcdLog decides where the next attempt goes (trap 3: the client's own retry could also send a
 * batch again after its caller gave up on it). etcd3 only ever calls `execute` on a policy.
 */
export const SINGLE_ATTEMPT = {
  execute: <T>(fn: (context: { signal: AbortSignal; attempt: number }) => PromiseLike<T> | T): Promise<T> =>
    Promise.resolve().then(() => fn({ signal: NEVER_ABORTED, attempt: 0 })),
} as unknown as Policy;
