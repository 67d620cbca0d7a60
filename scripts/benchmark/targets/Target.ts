import type { Protocol } from '../load/framing.js';
import type { Endpoint } from '../load/messages.js';

/** How a scenario wants a target started. Targets ignore what does not apply to them. */
export interface StartOptions {
  /** Connections the server must accept (idle-connection scenario). */
  readonly maxConnections?: number;
  /** Entries the lock table must be able to hold. */
  readonly maxLocks?: number;
  /** A lock file to start from (the expiry scenario restores a million entries this way). */
  readonly lockFile?: string;
  /** How long start-up may take (restoring a big lock file takes seconds). */
  readonly readyTimeoutMs?: number;
  /** Further command-line options of our server (limits a scenario must raise); other targets ignore them. */
  readonly args?: readonly string[];
}

/** A started server (or, for a cluster, set of servers) the benchmark can load and measure. */
export interface RunningTarget {
  readonly endpoints: readonly Endpoint[];
  /** Process ids, for RSS and CPU; the first is the one the load talks to first. */
  readonly pids: readonly number[];
  /** Epoch ms when the target said it was ready. */
  readonly readyAt: number;
  stop(): Promise<void>;
}

/**
 * Something the load generator can be pointed at: our single node, Redis, the null server, and
 * later a cluster of our nodes. A target that cannot run here says why, and its rows are skipped.
 */
export interface Target {
  readonly name: string;
  readonly protocol: Protocol;
  /** undefined when the target can run on this machine; otherwise why not. */
  unavailableReason(): Promise<string | undefined>;
  start(options?: StartOptions): Promise<RunningTarget>;
}
