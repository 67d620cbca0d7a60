import type { ByteString } from '../bytes.js';
import type { LockRequest } from '../locks/LockService.js';
import type { Refusal } from '../locks/TableLimits.js';
import type { Clock } from '../runtime/Clock.js';
import type { Logger } from '../runtime/Logger.js';
import type { Random } from '../runtime/Random.js';
import type { Appended, AppendRoute } from './AppendRouter.js';
import type { GrantObserver } from '../locks/Waiters.js';
import type { ReplicatedLog } from './ReplicatedLog.js';
import type { Timers } from '../runtime/Timers.js';

/** A cluster node's settings; the same on every layer (follower, committer, leadership). */
export interface ClusterOptions {
  /** This node's name: unique in the cluster, the origin of entries requested through it. */
  readonly nodeName: ByteString;
  /** 1–15 (smaller preferred) to stand for leader; undefined never leads. */
  readonly candidatePriority: number | undefined;
  /** A command whose commit or read barrier takes longer closes its connection unanswered. */
  readonly commitTimeoutMs: number;
  /** --max-locks, carried in each request so every replica decides alike. */
  readonly maxEntries: number;
  /**
   * --max-table-bytes and --max-locks-per-owner (a single node's defaults when absent), carried in
   * each batch once every live node reads them, so every replica refuses alike (EntryBytesRules).
   */
  readonly maxTableBytes?: number;
  readonly maxEntriesPerOwner?: number;
  /**
   * --max-locks-per-connection (a single node's default when absent): checked by this node before
   * it proposes a request for a new entry, against the entries its connection created that this
   * node has applied (its requests in flight, at most Connection's MAX_OUTSTANDING_ANSWERS, are not
   * counted yet).
   */
  readonly maxEntriesPerConnection?: number;
  /** Told of each request of this node's clients answered 0 at a limit (the log line; throttled by the caller). */
  readonly onRefused?: (why: Exclude<Refusal, 0>, request: LockRequest, client: number) => void;
  /**
   * Lease of the node name and candidacy (5 s by default), and the silence bound: a node whose
   * heartbeat (a rewrite of its name key, every fifth of this) stood still this long is proven
   * silent (Leadership, NodeLiveness), whoever keeps its lease alive; a crashed node's name is free
   * again after this, or taken over by its restart once it was silent this long.
   */
  readonly leaseSeconds?: number;
  /**
   * --etcd-quota-bytes (etcd's default 2 GiB when absent): etcd's backend quota. A share of it bounds
   * the entries' etcd bytes, carried in each batch so every replica refuses alike (EntryBytesRules);
   * the node compares etcd's own figures with it (SpaceWatch).
   */
  readonly etcdQuotaBytes?: number;
  /** The leader snapshots after this many batches (or SNAPSHOT_MAX_AGE_MS with any change). */
  readonly snapshotEveryBatches?: number;
  /**
   * --lock-delay (ms, 0 by default): when an owner's TTL runs out, its lock is held back this
   * long before its next grant. The leader's, carried in the expiries it proposes (format 4: only
   * once every live node reads it).
   */
  readonly lockDelayMs?: number;
}

/** Where a node's append attempts go (AppendRouter); without one, straight to the store. */
export interface Appender {
  append(value: Uint8Array, timeoutMs: number): Promise<Appended>;
}

/** What a cluster node is given: its store, and all it knows of time and chance. */
export interface ClusterDeps {
  readonly log: ReplicatedLog;
  /** Sends append attempts where the leader's sequencer is (AppendRouter); absent: every append goes to `log` itself. */
  readonly router?: Appender;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly random: Random;
  readonly logger: Logger;
  /** Told of each batch applied here (metrics): commit latency and size. */
  readonly observer?: ClusterObserver;
  /** Run once as the node leaves, after its last batch is settled and before the store client closes. */
  readonly onClose?: () => void;
  /** Told of every grant (how long it was waited for) and every end (how) this node applies: the metrics. */
  readonly grants?: GrantObserver;
}

/** What the metrics hear as it happens; everything else they read when scraped (ClusterFigures). */
export interface ClusterObserver {
  /** One of this node's batches came back applied, `ms` after it was sent, with `commands` commands. */
  batchCommitted(ms: number, commands: number): void;
  /** The leader proposed this many expiries. */
  expiriesProposed?(count: number): void;
  /**
   * An append attempt of this node's settled: sent to etcd itself, to its own sequencer, or
   * forwarded to the leader's (issue 20); `committed` false when it failed in any way (a failure
   * through a sequencer sends this node's appends direct for a second).
   */
  appendAttempted?(route: AppendRoute, committed: boolean): void;
  /** This node's sequencer sent an append carrying `batches` nodes' batches (one when not bundling). */
  bundleSent?(batches: number): void;
}

/** This node's standing in the cluster, read when metrics are scraped. */
export interface ClusterFigures {
  readonly ready: boolean;
  /** Whether the last call to etcd succeeded. */
  readonly etcdReachable: boolean;
  /** The last batch applied here. */
  readonly appliedVersion: number;
  /** Batches etcd is known to hold that this node has not applied yet. */
  readonly lagBatches: number;
  /** Seconds since this node last wrote or loaded a snapshot; undefined if never. */
  readonly snapshotAgeSeconds: number | undefined;
  readonly snapshotBytes: number | undefined;
  readonly expiriesProposed: number;
  /** Parts of log values no node can read, refused (skipped alike on every node) as this node applied them. */
  readonly logValuesRefused: number;
  /** What the table's entries cost in etcd, one copy each (replicated: the same on every node at one version). */
  readonly etcdEntryBytes?: number;
  /** The bound on it this node's batches carry (a share of --etcd-quota-bytes); 0 until every live node reads it. */
  readonly etcdEntryBytesBound?: number;
  /** --etcd-quota-bytes. */
  readonly etcdQuotaBytes?: number;
  /** The largest backend among the etcd members (what etcd compares with its quota), and the part of it in use. */
  readonly etcdDbBytes?: number;
  readonly etcdDbBytesInUse?: number;
  /** An etcd member reported a NOSPACE alarm on the last check: etcd refuses every write. */
  readonly etcdNoSpace?: boolean;
  /** etcd members this node defragmented as leader. */
  readonly etcdDefragments?: number;
}

/** How often deadlines, leadership, watch progress and round timeouts are looked at. */
export const TICK_MS = 50;
/** Pause before a failed store call is tried again (start-up, watch restarts). */
export const RETRY_MS = 250;
