/**
 * What etcd itself counts of the work it is asked for, from each member's /metrics (Prometheus
 * text on its client URL; reading it is no gRPC call, so it counts nothing itself): gRPC calls
 * handled and messages received (a stream's messages, such as lease keep-alives, count there),
 * by method, and the Raft proposals committed.
 */

/** One member's counters at one moment. */
export interface EtcdCounters {
  /** grpc_server_handled_total, all codes: unary calls answered, streams ended. */
  readonly handled: number;
  /** grpc_server_msg_received_total: every request message, a stream's included. */
  readonly received: number;
  /** etcd_server_proposals_committed_total: the Raft entries this member knows committed. */
  readonly proposalsCommitted: number;
  /** handled and received by gRPC method (Range, Txn, LeaseKeepAlive, Watch, …). */
  readonly byMethod: ReadonlyMap<string, { readonly handled: number; readonly received: number }>;
}

/** Per second over a window, the members together. */
export interface EtcdRates {
  readonly seconds: number;
  /** gRPC calls handled per second, summed over the members. */
  readonly requestsPerSecond: number;
  /** gRPC messages received per second, summed over the members. */
  readonly messagesPerSecond: number;
  /**
   * Raft proposals committed per second: the largest increase among the members (each member
   * counts the cluster's one log, so summing would count each entry once per member).
   */
  readonly proposalsPerSecond: number;
  /** Per gRPC method with any traffic in the window: handled and received per second, members summed. */
  readonly byMethod: Readonly<Record<string, { readonly requestsPerSecond: number; readonly messagesPerSecond: number }>>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/;

/** The counters in Prometheus text as etcd 3.4 writes it. */
export function parseEtcdCounters(text: string): EtcdCounters {
  let handled = 0;
  let received = 0;
  let proposalsCommitted = 0;
  const byMethod = new Map<string, { handled: number; received: number }>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (match === null) continue;
    const [, name, labels = '', raw] = match;
    const value = Number(raw);
    if (!Number.isFinite(value)) continue;
    if (name === 'etcd_server_proposals_committed_total') proposalsCommitted = value;
    if (name !== 'grpc_server_handled_total' && name !== 'grpc_server_msg_received_total') continue;
    const method = /grpc_method="([^"]*)"/.exec(labels)?.[1] ?? '?';
    const entry = byMethod.get(method) ?? { handled: 0, received: 0 };
    if (name === 'grpc_server_handled_total') {
      handled += value;
      entry.handled += value;
    } else {
      received += value;
      entry.received += value;
    }
    byMethod.set(method, entry);
  }
  return { handled, received, proposalsCommitted, byMethod };
}

/** Reads /metrics of each member at these client URLs (bounded). */
export function readEtcdCounters(urls: readonly string[], timeoutMs = 5_000): Promise<EtcdCounters[]> {
  return Promise.all(
    urls.map(async (url) => {
      const response = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
      if (!response.ok) throw new Error(`${url}/metrics answered ${response.status}`);
      return parseEtcdCounters(await response.text());
    }),
  );
}

/** The rates between two readings of the same members `seconds` apart. */
export function etcdRates(before: readonly EtcdCounters[], after: readonly EtcdCounters[], seconds: number): EtcdRates {
  let handled = 0;
  let received = 0;
  let proposals = 0;
  const methods: Record<string, { requestsPerSecond: number; messagesPerSecond: number }> = {};
  before.forEach((b, i) => {
    const a = after[i]!;
    handled += a.handled - b.handled;
    received += a.received - b.received;
    proposals = Math.max(proposals, a.proposalsCommitted - b.proposalsCommitted);
    for (const [method, counts] of a.byMethod) {
      const was = b.byMethod.get(method) ?? { handled: 0, received: 0 };
      const dh = counts.handled - was.handled;
      const dr = counts.received - was.received;
      if (dh === 0 && dr === 0) continue;
      const entry = (methods[method] ??= { requestsPerSecond: 0, messagesPerSecond: 0 });
      entry.requestsPerSecond += dh / seconds;
      entry.messagesPerSecond += dr / seconds;
    }
  });
  return { seconds, requestsPerSecond: handled / seconds, messagesPerSecond: received / seconds, proposalsPerSecond: proposals / seconds, byMethod: methods };
}
