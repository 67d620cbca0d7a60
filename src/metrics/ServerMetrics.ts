import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AppendRoute } from '../cluster/AppendRouter.js';
import type { ClusterFigures, ClusterObserver } from '../cluster/ClusterOptions.js';
import { EndReason } from '../locks/LockTable.js';
import type { LockCounts, WaitingFigures } from '../locks/LockService.js';
import type { LimitFigures } from '../locks/TableLimits.js';
import type { GrantObserver } from '../locks/Waiters.js';
import { COMMAND_NAMES } from '../protocol/constants.js';
import type { CommandObserver } from '../server/Connection.js';
import type { ServerStats } from '../server/ServerStats.js';

/** What the cluster core reports; a single node is "standalone", never changes leader, has no figures. */
export interface ClusterStatus {
  role(): string;
  leaderChanges(): number;
  figures?(): ClusterFigures;
}

export const STANDALONE: ClusterStatus = { role: () => 'standalone', leaderChanges: () => 0 };

/** The parts of a running daemon the metrics read at scrape time (a Daemon fits as is). */
export interface MetricsSource {
  readonly server: {
    readonly stats: ServerStats;
    readonly draining: boolean;
    commandObserver: CommandObserver | undefined;
  };
  readonly service: { counts(): Promise<LockCounts>; readonly waiting: WaitingFigures; limitFigures?(): LimitFigures };
}

/** Upper bounds of the latency buckets, in seconds: 25 µs to 1 s. */
const LATENCY_BUCKETS = [0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1];
const MS_PER_SECOND = 1000;
const REJECTION_REASONS = { 'not-in-hosts-file': 'rejectedNotInHosts', 'too-busy': 'rejectedTooBusy' } as const;
/** Upper bounds of the wait-for-a-grant buckets, in seconds: 1 ms (granted at once) to an hour. */
const WAIT_BUCKETS = [0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];
/** The `how` label of an end. A drain ends no lock itself (SIGSYS refuses new entries): its locks end as released or expired. */
const END_LABELS: Readonly<Record<EndReason, string>> = {
  [EndReason.Released]: 'released',
  [EndReason.ReleasedKey]: 'released-key',
  [EndReason.ReleasedAll]: 'released-all',
  [EndReason.Expired]: 'expired',
  [EndReason.Canceled]: 'canceled',
};
/** How an owner's lock can end (a cancel only takes a waiter). */
const LOCK_ENDS = [EndReason.Released, EndReason.ReleasedKey, EndReason.ReleasedAll, EndReason.Expired] as const;
const WAIT_ENDS = [...LOCK_ENDS, EndReason.Canceled] as const;

/**
 * The server's Prometheus metrics. Everything the server already counts (the stats command's
 * figures, the lock gauges) is read when scraped, so serving costs nothing per command; only
 * the latency histograms and the expiry counter are fed as things happen, through narrow hooks.
 */
export class ServerMetrics implements CommandObserver, ClusterObserver, GrantObserver {
  readonly registry = new Registry();
  private source: MetricsSource | undefined;
  private cluster: ClusterStatus = STANDALONE;
  /** Latency histogram children by command byte, resolved once so an observation does no label lookup. */
  private readonly latency: Array<Histogram.Internal<'command'> | undefined> = [];
  private readonly expiries: Counter;
  private readonly commitLatency: Histogram;
  private readonly batchSize: Histogram;
  /** Append attempts by route, then committed (0) or failed (1), resolved once. */
  private readonly appendAttempts: Record<AppendRoute, [Counter.Internal, Counter.Internal]>;
  private readonly bundleBatches: Histogram;
  private readonly waitToGrant: Histogram;
  /** Counter children by EndReason: owners' lock ends, and waiters that left without a grant. */
  private readonly lockEnds: Array<Counter.Internal | undefined> = [];
  private readonly waitEnds: Array<Counter.Internal | undefined> = [];

  /**
   * `clusterMode` (`--etcd`) registers the cluster mode's own series; a single node exports none of
   * them, rather than a `lockserver_cluster_ready 0` that would read as a node not ready. Its role
   * (`standalone`) and leader changes (0) are exported either way.
   */
  constructor({ clusterMode = false }: { readonly clusterMode?: boolean } = {}) {
    const registers = [this.registry];
    // The cluster's series still exist on a single node (the observer methods feed them), unregistered.
    const clusterRegisters = clusterMode ? registers : [];
    const read = <T>(pick: (source: MetricsSource) => T): T | undefined => (this.source === undefined ? undefined : pick(this.source));
    /** A gauge whose value is read when scraped (undefined: not attached yet, no sample). */
    const gauge = (name: string, help: string, value: () => number | undefined | Promise<number | undefined>, into = registers): void => {
      new Gauge({
        name,
        help,
        registers: into,
        async collect() {
          const current = await value();
          if (current !== undefined) this.set(current);
        },
      });
    };
    /** A counter kept by the server (or cluster) and read when scraped. */
    const counter = (name: string, help: string, value: () => number | undefined, into = registers): void => {
      new Counter({
        name,
        help,
        registers: into,
        collect() {
          const current = value();
          if (current === undefined) return;
          this.reset();
          this.inc(current);
        },
      });
    };
    /** A counter with one label, each value kept by the server and read when scraped. */
    const labelledCounter = (name: string, help: string, label: string, values: () => Array<[string, number]> | undefined): void => {
      new Counter({
        name,
        help,
        labelNames: [label],
        registers,
        collect() {
          const current = values();
          if (current === undefined) return;
          this.reset();
          for (const [labelValue, count] of current) this.inc({ [label]: labelValue }, count);
        },
      });
    };
    const stats = (): ServerStats | undefined => read((source) => source.server.stats);

    gauge('lockserver_uptime_seconds', 'Seconds since the server started', () => stats()?.uptimeSeconds);
    labelledCounter('lockserver_commands_total', "Commands received, by command (the stats command's counters)", 'command', () => {
      const s = stats();
      return s && Object.entries(COMMAND_NAMES).map(([byte, name]) => [name, s.commands[Number(byte)]!]);
    });
    counter('lockserver_connections_accepted_total', 'Connections accepted (greeting 0x01)', () => stats()?.accepted);
    labelledCounter('lockserver_connections_rejected_total', 'Connections refused with greeting 0x00, by reason', 'reason', () => {
      const s = stats();
      return s && Object.entries(REJECTION_REASONS).map(([reason, field]) => [reason, s[field]]);
    });
    gauge('lockserver_connections_active', 'Open client connections', () => stats()?.activeConnections);
    gauge(
      'lockserver_lock_owners',
      'Entries that own their lock (one per busy key/index queue)',
      async () => (await read((source) => source.service.counts()))?.owners,
    );
    gauge(
      'lockserver_lock_waiters',
      'Entries waiting in lock queues behind an owner (summed over all queues)',
      async () => (await read((source) => source.service.counts()))?.waiters,
    );
    const limits = (): LimitFigures | undefined => read((source) => source.service.limitFigures?.());
    gauge(
      'lockserver_table_bytes',
      'Bytes the lock table is charged for its entries: their names as stored plus a measured cost per entry (what --max-table-bytes bounds)',
      () => limits()?.bytesUsed,
    );
    gauge('lockserver_table_bytes_limit', 'The bound on lockserver_table_bytes (--max-table-bytes)', () => limits()?.bytesLimit);
    labelledCounter(
      'lockserver_requests_refused_total',
      'Requests for a new entry refused (position 0) because a limit was reached, by limit: max-locks, max-table-bytes, max-locks-per-owner, max-locks-per-connection',
      'limit',
      () => limits()?.refused.map(([name, count]) => [name, count]),
    );
    gauge('lockserver_draining', '1 while draining after SIGSYS (no new entries), else 0', () => read((source) => (source.server.draining ? 1 : 0)));
    this.expiries = new Counter({
      name: 'lockserver_lock_expiries_total',
      help: 'Entries removed because their TTL or TTW ran out without renewal',
      registers,
    });
    const latency = new Histogram({
      name: 'lockserver_command_duration_seconds',
      help: 'Time from a decoded request to its encoded reply, by command',
      labelNames: ['command'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    for (const [byte, name] of Object.entries(COMMAND_NAMES)) this.latency[Number(byte)] = latency.labels({ command: name });
    this.waitToGrant = new Histogram({
      name: 'lockserver_lock_wait_seconds',
      help: 'Time from the request that created an entry to its grant (0 for a lock granted at once)',
      buckets: WAIT_BUCKETS,
      registers,
    });
    const lockEnds = new Counter({
      name: 'lockserver_lock_ends_total',
      help: "Granted locks that ended, by how: released (0x05), released-key (0x05 with '*'), released-all (0x06), expired (TTL ran out)",
      labelNames: ['how'],
      registers,
    });
    const waitEnds = new Counter({
      name: 'lockserver_wait_ends_total',
      help: 'Waiting entries that left their queue without a grant, by how (as lock ends, and canceled: the client of an acquire-and-wait closed)',
      labelNames: ['how'],
      registers,
    });
    // Every child from the start (0), so a rate over any of them is defined at once.
    for (const why of LOCK_ENDS) (this.lockEnds[why] = lockEnds.labels({ how: END_LABELS[why] })).inc(0);
    for (const why of WAIT_ENDS) (this.waitEnds[why] = waitEnds.labels({ how: END_LABELS[why] })).inc(0);
    gauge('lockserver_locks_held_back', 'Locks held back now by the lock-delay (--lock-delay) after their owner expired', () =>
      read((source) => source.service.waiting.heldBack),
    );
    gauge('lockserver_oldest_waiter_seconds', 'Seconds the longest-waiting entry has waited since its request (0 when none waits)', () =>
      read((source) => source.service.waiting.oldestWaitMs / MS_PER_SECOND),
    );
    new Gauge({
      name: 'lockserver_clients_waiting',
      help: "This node's clients waiting now: for a grant (acquire-and-wait, 0x0B) or for a loss (the loss notice, 0x0C)",
      labelNames: ['for'],
      registers,
      collect() {
        const waiting = read((source) => source.service.waiting);
        if (waiting === undefined) return;
        this.set({ for: 'grant' }, waiting.grantWaits);
        this.set({ for: 'loss' }, waiting.lossWaits);
      },
    });
    const cluster = (): ClusterStatus => this.cluster;
    new Gauge({
      name: 'lockserver_cluster_role',
      help: 'This node\'s role: 1 for the current one ("standalone" for a single node)',
      labelNames: ['role'],
      registers,
      collect() {
        this.reset();
        this.set({ role: cluster().role() }, 1);
      },
    });
    counter('lockserver_cluster_leader_changes_total', 'Times the cluster leader changed (always 0 for a single node)', () => cluster().leaderChanges());
    // Cluster mode only (registered only with --etcd); figures come once the node has joined.
    const figure =
      (pick: (f: ClusterFigures) => number | boolean | undefined): (() => number | undefined) =>
      () => {
        const figures = cluster().figures?.();
        const value = figures === undefined ? undefined : pick(figures);
        return typeof value === 'boolean' ? (value ? 1 : 0) : value;
      };
    gauge(
      'lockserver_cluster_ready',
      'Cluster mode: 1 once this node has caught up with the log and serves',
      figure((f) => f.ready),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_reachable',
      'Cluster mode: 1 if the last call to etcd succeeded',
      figure((f) => f.etcdReachable),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_applied_version',
      'Cluster mode: the last log batch applied here',
      figure((f) => f.appliedVersion),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_lag_batches',
      'Cluster mode: batches etcd holds that this node has not applied yet',
      figure((f) => f.lagBatches),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_snapshot_age_seconds',
      'Cluster mode: seconds since this node wrote or loaded a snapshot',
      figure((f) => f.snapshotAgeSeconds),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_snapshot_bytes',
      'Cluster mode: size of the snapshot this node last wrote or loaded',
      figure((f) => f.snapshotBytes),
      clusterRegisters,
    );
    counter(
      'lockserver_cluster_expiries_proposed_total',
      'Cluster mode: expiry commands this node proposed as leader',
      figure((f) => f.expiriesProposed),
      clusterRegisters,
    );
    counter(
      'lockserver_cluster_log_values_refused_total',
      'Cluster mode: parts of log values no node can read, refused (skipped alike on every node) as this node applied them',
      figure((f) => f.logValuesRefused),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_entry_bytes',
      "Cluster mode: what the table's entries cost in etcd, one copy each (names + 96 bytes an entry; the same on every node)",
      figure((f) => f.etcdEntryBytes),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_entry_bytes_bound',
      'Cluster mode: new entries are refused (position 0) past this many etcd bytes: a twentieth of --etcd-quota-bytes (0 until every node reads the bound)',
      figure((f) => f.etcdEntryBytesBound),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_quota_bytes',
      'Cluster mode: --etcd-quota-bytes, the etcd backend quota this node assumes',
      figure((f) => f.etcdQuotaBytes),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_db_bytes',
      "Cluster mode: the largest etcd member's backend size (dbSize, what etcd compares with its quota), last read",
      figure((f) => f.etcdDbBytes),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_db_in_use_bytes',
      "Cluster mode: the part of that member's backend in use (dbSizeInUse); the rest is free pages a defragmentation gives back",
      figure((f) => f.etcdDbBytesInUse),
      clusterRegisters,
    );
    gauge(
      'lockserver_cluster_etcd_nospace',
      'Cluster mode: 1 while an etcd member reports a NOSPACE alarm (etcd refuses every write until it is disarmed)',
      figure((f) => f.etcdNoSpace),
      clusterRegisters,
    );
    counter(
      'lockserver_cluster_etcd_defragments_total',
      'Cluster mode: etcd members this node defragmented as leader (one at a time)',
      figure((f) => f.etcdDefragments),
      clusterRegisters,
    );
    this.commitLatency = new Histogram({
      name: 'lockserver_cluster_commit_duration_seconds',
      help: 'Cluster mode: time from sending a batch to etcd to having applied it here',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5],
      registers: clusterRegisters,
    });
    this.batchSize = new Histogram({
      name: 'lockserver_cluster_batch_commands',
      help: 'Cluster mode: commands per batch this node appended (group commit)',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096],
      registers: clusterRegisters,
    });
    const attempts = new Counter({
      name: 'lockserver_cluster_append_attempts_total',
      help: "Cluster mode: this node's append attempts by route (direct to etcd, its own sequencer, forwarded to the leader's) and outcome",
      labelNames: ['route', 'outcome'],
      registers: clusterRegisters,
    });
    /** Both outcomes' children of a route, each shown from the start (0), so a rate over them is defined at once. */
    const byOutcome = (route: AppendRoute): [Counter.Internal, Counter.Internal] => {
      const [committed, failed] = [attempts.labels({ route, outcome: 'committed' }), attempts.labels({ route, outcome: 'failed' })];
      committed.inc(0);
      failed.inc(0);
      return [committed, failed];
    };
    this.appendAttempts = { direct: byOutcome('direct'), 'own-sequencer': byOutcome('own-sequencer'), forwarded: byOutcome('forwarded') };
    this.bundleBatches = new Histogram({
      name: 'lockserver_cluster_sequencer_append_batches',
      help: "Cluster mode: nodes' batches per append this node's sequencer sent while it led",
      buckets: [1, 2, 3, 4, 6, 8, 12, 16],
      registers: clusterRegisters,
    });
    collectDefaultMetrics({ register: this.registry });
  }

  /** Starts reading from a running daemon and timing its commands. */
  attach(source: MetricsSource): void {
    this.source = source;
    source.server.commandObserver = this;
  }

  /** For the cluster core: where role and leader changes come from. */
  setCluster(cluster: ClusterStatus): void {
    this.cluster = cluster;
  }

  commandDone(command: number, elapsedMs: number): void {
    this.latency[command]?.observe(elapsedMs / MS_PER_SECOND);
  }

  batchCommitted(ms: number, commands: number): void {
    this.commitLatency.observe(ms / MS_PER_SECOND);
    this.batchSize.observe(commands);
  }

  appendAttempted(route: AppendRoute, committed: boolean): void {
    this.appendAttempts[route][committed ? 0 : 1].inc();
  }

  bundleSent(batches: number): void {
    this.bundleBatches.observe(batches);
  }

  granted(waitedMs: number): void {
    this.waitToGrant.observe(waitedMs / MS_PER_SECOND);
  }

  ended(why: EndReason, owned: boolean): void {
    (owned ? this.lockEnds : this.waitEnds)[why]?.inc();
  }

  /** Fed by the lock service's expiry sweep. */
  readonly countExpired = (count: number): void => {
    this.expiries.inc(count);
  };
}
