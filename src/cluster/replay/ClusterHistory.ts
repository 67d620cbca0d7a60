import type { LogHead, LogRecord, RetainedBatch, StoredSnapshot } from '../ReplicatedLog.js';

/**
 * A cluster's history as a store still holds it, for the log replay (replayHistory): the log key's
 * versions not compacted away, the batches retained under keys of their own, and the newest
 * snapshot. Read-only: a reader writes nothing and keeps no lease alive. EtcdHistory reads a real
 * etcd; the tests read the in-memory etcd the same way.
 */
export interface ClusterHistory {
  /**
   * The log's head (read linearizably) and the versions of the log key still in the store's
   * history, oldest first, through the head: contiguous, from the first version compaction left.
   * A value the store held as a reference comes resolved to its retained batch when the store
   * still has that; one it lost stays a reference (the replay stops there if it needs it).
   */
  logVersions(): Promise<{ readonly head: LogHead; readonly records: readonly LogRecord[] }>;
  /** The newest complete snapshot (its chunks checked against its pointer's SHA-256), or undefined. */
  snapshot(): Promise<StoredSnapshot | undefined>;
  /** Every batch retained after `revision`, in log order (ReplicatedLog.since). */
  retainedSince(revision: number): Promise<readonly RetainedBatch[]>;
  close(): Promise<void>;
}

/** The store no longer holds some version the replay needs, in the log's history or retained. */
export class HistoryLostError extends Error {
  override name = 'HistoryLostError';
}
