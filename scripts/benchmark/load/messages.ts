import type { HistogramData } from '../Histogram.js';
import type { Protocol } from './framing.js';

/** Where a target listens. A cluster target has several; connections are spread over them. */
export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

/** What one load worker thread is told to do. */
export interface LoadWorkerData {
  readonly workerId: number;
  /** Unique to one load run, so keys left held by an earlier run (which may stop mid-cycle) never collide. */
  readonly runTag: string;
  readonly endpoints: readonly Endpoint[];
  readonly connections: number;
  readonly protocol: Protocol;
  readonly depth: number;
  /** Connections opened at once while connecting. */
  readonly connectConcurrency: number;
  readonly connectTimeoutMs: number;
  /** Width of the timeline slots (ops and worst latency per slot); 0 = no timeline. */
  readonly timelineSlotMs: number;
  /**
   * Random keys: each cycle's key is drawn from this many keys shared by all connections (owner
   * `client<N>`, index "row"); undefined = each connection cycles over its own few keys.
   */
  readonly keySpace?: number;
  /** Seeds the random keys (with the worker and connection numbers). */
  readonly seed?: number;
  /** Number of this worker's first connection among all the run's connections (owner names). */
  readonly firstConnection?: number;
}

/** Parent → worker once every worker is connected: phase boundaries in epoch milliseconds. */
export interface GoMessage {
  readonly type: 'go';
  readonly measureFrom: number;
  readonly measureUntil: number;
  /** Hard stop: anything still outstanding then is abandoned and reported. */
  readonly stopAt: number;
}

export interface LoadWorkerResult {
  readonly workerId: number;
  /** Replies received inside the measured window. */
  readonly ops: number;
  /** Replies that were not what a successful cycle gets (or bytes no reply explains). */
  readonly errors: number;
  /** Random keys: replies that found the key taken by another connection (request queued, SET NX refused). */
  readonly contended: number;
  readonly failedConnections: number;
  /** Connections still waiting for replies at the hard stop. */
  readonly abandoned: number;
  readonly latencyUs: HistogramData;
  /** Epoch ms at which the worst latency in the window was seen. */
  readonly worstAt: number;
  /** Fewest and most replies any one connection got in the window (starvation check). */
  readonly minConnectionOps: number;
  readonly maxConnectionOps: number;
  /** Per timeline slot from measureFrom: replies, and worst latency in µs. */
  readonly timelineOps: readonly number[];
  readonly timelineWorstUs: readonly number[];
}

export type WorkerToParent =
  { readonly type: 'ready' } | { readonly type: 'failed'; readonly message: string } | { readonly type: 'done'; readonly result: LoadWorkerResult };
