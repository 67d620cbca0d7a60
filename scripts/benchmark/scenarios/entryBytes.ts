import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { asciiBytes } from '../../../src/bytes.js';
import { DEFAULT_ETCD_QUOTA_BYTES, ENTRY_ETCD_OVERHEAD_BYTES, entryBytesBound } from '../../../src/cluster/EntryBytesRules.js';
import { DEFAULT_MAX_LOCKS_PER_CONNECTION, DEFAULT_MAX_TABLE_BYTES, entryBytes } from '../../../src/locks/TableLimits.js';
import { Command } from '../../../src/protocol/constants.js';
import { BenchClient } from '../BenchClient.js';
import { BenchCluster, clusterUnavailableReason, type MemberStatus } from '../cluster/BenchCluster.js';
import type { BenchConfig } from '../config.js';
import { fillLocks } from '../fill.js';
import type { Endpoint } from '../load/messages.js';
import { rssBytes } from '../processes.js';
import { lockserverCli } from '../targets/LockServerTarget.js';
import type { Target } from '../targets/Target.js';
import type { SnapshotEvent } from './clusterScale.js';

/** Pause after filling before RSS and etcd's status are read: the last replies' garbage and etcd's commit settle. */
const SETTLE_MS = 2_000;
/** Filling connections per node; each one stays under --max-locks-per-connection. */
const FILLERS_PER_NODE = 2;
/**
 * Requests each filling connection has in flight. In a cluster a reply not committed within
 * --commit-timeout (5 s) closes its connection: 4,096 pipelined 255-byte requests on each of six
 * connections did, once, on a loaded machine (load average 18).
 */
const FILL_BATCH = 1_024;
/** The leader snapshots a table changed by few batches 60 s after its last snapshot at the latest. */
const SNAPSHOT_WAIT_MS = 90_000;
/** A cluster row fills at most this share of the etcd entry-bytes bound (the rest for anything else the nodes write). */
const CLUSTER_BOUND_SHARE = 0.9;

export interface EntryBytesNode {
  readonly node: string;
  readonly leader?: boolean;
  readonly rssBefore?: number;
  readonly rssFilled?: number;
  /** (rssFilled - rssBefore) / entries. */
  readonly perEntry?: number;
}

export interface EntryBytesRow {
  readonly where: 'single node' | 'cluster';
  /** Length of each of key, index and owner; every entry's three are its own. */
  readonly nameBytes: number;
  readonly entries: number;
  readonly fillSeconds?: number;
  /** What the node charges each entry against --max-table-bytes (TableLimits.entryBytes). */
  readonly chargedBytes: number;
  readonly nodes: readonly EntryBytesNode[];
  /** Cluster rows: what each entry is charged against the etcd bound (names + ENTRY_ETCD_OVERHEAD_BYTES). */
  readonly etcdChargedBytes?: number;
  readonly etcd?: {
    readonly before: ReadonlyArray<MemberStatus | undefined>;
    /** Right after the fill: the entries are in the log (every batch retained) and no snapshot holds them yet. */
    readonly filled: ReadonlyArray<MemberStatus | undefined>;
    /** After the leader's snapshot of the full table and the compaction behind it. */
    readonly snapshotted?: ReadonlyArray<MemberStatus | undefined>;
    readonly snapshot?: SnapshotEvent;
    /** Per entry, from the largest member: dbSize and dbSizeInUse growth over the fill, dbSizeInUse over the start once snapshotted, and the snapshot value itself. */
    readonly dbSizePerEntry?: number;
    readonly dbSizeInUsePerEntry?: number;
    readonly snapshottedInUsePerEntry?: number;
    /** dbSize over its start once snapshotted: what etcd compares with its quota, free pages included. */
    readonly snapshottedDbSizePerEntry?: number;
    readonly snapshotBytesPerEntry?: number;
  };
  /** Why the row is missing or incomplete. */
  readonly error?: string;
}

export interface EntryBytesResult {
  readonly rows: EntryBytesRow[];
  /** Why no cluster row ran (etcd missing), if so. */
  readonly clusterSkipped?: string;
}

/** Name `n` of a kind (k, i, o), `length` bytes: distinct for every n and kind. */
function name(kind: string, n: number, length: number): string {
  return `${kind}${n}`.padEnd(length, 'x');
}

/** Fills `entries` owners (each its own key, index and owner) through `fillers` connections spread over `endpoints`. */
async function fill(endpoints: readonly Endpoint[], fillers: number, entries: number, length: number): Promise<number> {
  const clients = await Promise.all(Array.from({ length: fillers }, (_, i) => BenchClient.connect(endpoints[i % endpoints.length]!)));
  const t0 = performance.now();
  try {
    let from = 0;
    await Promise.all(
      clients.map((client, i) => {
        const share = Math.floor(entries / fillers) + (i < entries % fillers ? 1 : 0);
        const first = from;
        from += share;
        return fillLocks(
          client,
          share,
          (n) => ({
            command: Command.Request,
            key: asciiBytes(name('k', first + n, length)),
            index: asciiBytes(name('i', first + n, length)),
            owner: asciiBytes(name('o', first + n, length)),
            ttl: 0,
            ttw: 0,
            priority: 0,
          }),
          () => 1,
          FILL_BATCH,
        );
      }),
    );
  } finally {
    for (const c of clients) c.close();
  }
  return (performance.now() - t0) / 1000;
}

function perEntry(before: number | undefined, after: number | undefined, entries: number): number | undefined {
  return before === undefined || after === undefined ? undefined : (after - before) / entries;
}

/** The largest member's field, for the per-entry figures (the quota is each member's). */
function largest(statuses: ReadonlyArray<MemberStatus | undefined>, field: 'dbSize' | 'dbSizeInUse'): number | undefined {
  const values = statuses.map((s) => s?.[field]).filter((v): v is number => v !== undefined);
  return values.length === 0 ? undefined : Math.max(...values);
}

async function singleNodeRow(target: Target, length: number, entries: number, log: (line: string) => void): Promise<EntryBytesRow> {
  const chargedBytes = entryBytes(length, length, length);
  // Above the default byte bound only when asked for more than it holds (an older build may not know the option).
  const needed = 2 * entries * chargedBytes;
  const running = await target.start({
    maxLocks: Math.max(2 * entries, 1_000_000),
    ...(needed > DEFAULT_MAX_TABLE_BYTES ? { args: ['--max-table-bytes', String(needed)] } : {}),
  });
  try {
    const pid = running.pids[0]!;
    await delay(SETTLE_MS);
    const rssBefore = await rssBytes(pid);
    const fillers = Math.ceil(entries / (DEFAULT_MAX_LOCKS_PER_CONNECTION / 2));
    const fillSeconds = await fill(running.endpoints, fillers, entries, length);
    await delay(SETTLE_MS);
    const rssFilled = await rssBytes(pid);
    const row: EntryBytesRow = {
      where: 'single node',
      nameBytes: length,
      entries,
      fillSeconds,
      chargedBytes,
      nodes: [{ node: 'single', rssBefore, rssFilled, perEntry: perEntry(rssBefore, rssFilled, entries) }],
    };
    log(
      `entry bytes, single node, ${length}-byte names, ${entries} entries: ${row.nodes[0]!.perEntry?.toFixed(0)} resident bytes an entry (charged ${chargedBytes})`,
    );
    return row;
  } finally {
    await running.stop();
  }
}

async function clusterRow(config: BenchConfig, length: number, asked: number, log: (line: string) => void): Promise<EntryBytesRow> {
  const chargedBytes = entryBytes(length, length, length);
  const etcdChargedBytes = 3 * length + ENTRY_ETCD_OVERHEAD_BYTES;
  // Requests past the etcd bound get position 0: fill no more than fits (etcd's default quota, the nodes' default).
  const entries = Math.min(asked, Math.floor((CLUSTER_BOUND_SHARE * entryBytesBound(DEFAULT_ETCD_QUOTA_BYTES)) / etcdChargedBytes));
  if (entries < asked) log(`entry bytes, cluster, ${length}-byte names: ${entries} entries, not ${asked}: the etcd entry-bytes bound holds no more`);
  const snapshots: SnapshotEvent[] = [];
  const onNodeLine = (node: string, line: string): void => {
    if (!/\bevent=snapshot-written\b/.test(line)) return;
    const field = (f: string): number => Number(line.match(new RegExp(`\\b${f}=(\\d+)`))?.[1] ?? NaN);
    snapshots.push({ node, entries: field('entries'), bytes: field('bytes'), ms: field('ms'), at: Date.now() });
  };
  const cluster = await BenchCluster.start({ nodeFlags: config.serverNodeFlags, nodeLog: config.serverLog, cli: lockserverCli(config.serverRoot), onNodeLine });
  try {
    await delay(SETTLE_MS);
    const pids = cluster.nodePids();
    const rssBefore = await Promise.all(pids.map((p) => (p === undefined ? Promise.resolve(undefined) : rssBytes(p))));
    const before = await cluster.memberStatus();
    let fillSeconds: number | undefined;
    let error: string | undefined;
    try {
      fillSeconds = await fill(cluster.endpoints, FILLERS_PER_NODE * cluster.endpoints.length, entries, length);
    } catch (e) {
      // With what the nodes said about it (a commit given up, input refused as stale).
      const said = cluster.clientTrouble.map((t) => `${t.node} ${t.line}`);
      error = `${(e as Error).message}${said.length > 0 ? ` (${said.slice(0, 3).join('; ')})` : ''}`;
    }
    const filledAt = Date.now();
    await delay(SETTLE_MS);
    const rssFilled = await Promise.all(pids.map((p) => (p === undefined ? Promise.resolve(undefined) : rssBytes(p))));
    const filled = await cluster.memberStatus();
    let snapshot: SnapshotEvent | undefined;
    const deadline = Date.now() + SNAPSHOT_WAIT_MS;
    while (error === undefined && Date.now() < deadline) {
      snapshot = snapshots.find((s) => s.at >= filledAt && s.entries >= entries);
      if (snapshot !== undefined) break;
      await delay(200);
    }
    // The compaction behind the snapshot frees the log's pages: give bbolt a moment to commit it.
    if (snapshot !== undefined) await delay(SETTLE_MS);
    const snapshotted = snapshot === undefined ? undefined : await cluster.memberStatus();
    const grown = (after: ReadonlyArray<MemberStatus | undefined> | undefined, field: 'dbSize' | 'dbSizeInUse'): number | undefined =>
      after === undefined ? undefined : perEntry(largest(before, field), largest(after, field), entries);
    const row: EntryBytesRow = {
      where: 'cluster',
      nameBytes: length,
      entries,
      ...(fillSeconds !== undefined ? { fillSeconds } : {}),
      chargedBytes,
      nodes: cluster.nodes.map((n, i) => ({
        node: n.name,
        leader: n.name === cluster.lockLeader,
        rssBefore: rssBefore[i],
        rssFilled: rssFilled[i],
        perEntry: perEntry(rssBefore[i], rssFilled[i], entries),
      })),
      etcdChargedBytes,
      etcd: {
        before,
        filled,
        ...(snapshotted !== undefined ? { snapshotted } : {}),
        ...(snapshot !== undefined ? { snapshot } : {}),
        dbSizePerEntry: grown(filled, 'dbSize'),
        dbSizeInUsePerEntry: grown(filled, 'dbSizeInUse'),
        snapshottedInUsePerEntry: grown(snapshotted, 'dbSizeInUse'),
        snapshottedDbSizePerEntry: grown(snapshotted, 'dbSize'),
        snapshotBytesPerEntry: snapshot === undefined ? undefined : snapshot.bytes / entries,
      },
      ...(error !== undefined ? { error } : snapshot === undefined ? { error: `no snapshot of the full table within ${SNAPSHOT_WAIT_MS / 1000} s` } : {}),
    };
    const e = row.etcd!;
    log(
      `entry bytes, cluster, ${length}-byte names, ${entries} entries: resident ${row.nodes.map((n) => `${n.node}${n.leader ? '*' : ''} ${n.perEntry?.toFixed(0)}`).join(', ')} bytes an entry (charged ${chargedBytes}); ` +
        `etcd dbSize ${e.dbSizePerEntry?.toFixed(0)}, in use ${e.dbSizeInUsePerEntry?.toFixed(0)} in the log; ${e.snapshottedDbSizePerEntry?.toFixed(0)}, in use ${e.snapshottedInUsePerEntry?.toFixed(0)} once snapshotted ` +
        `(snapshot ${e.snapshotBytesPerEntry?.toFixed(0)}; charged ${etcdChargedBytes})${error !== undefined ? `; ${error}` : ''}`,
    );
    return row;
  } finally {
    await cluster.stop();
  }
}

/**
 * What an entry costs: a node's resident memory and etcd's backend, per entry, for each name
 * length (every entry its own key, index and owner of that length, no expiry, no waiter), on a
 * fresh single node and a fresh 3-node cluster each; beside each, what the limits charge it.
 */
export async function runEntryBytes(target: Target, config: BenchConfig, log: (line: string) => void): Promise<EntryBytesResult> {
  const rows: EntryBytesRow[] = [];
  const attempt = async (where: EntryBytesRow['where'], length: number, run: () => Promise<EntryBytesRow>): Promise<void> => {
    try {
      rows.push(await run());
    } catch (error) {
      log(`entry bytes, ${where}, ${length}-byte names: failed: ${(error as Error).message.split('\n')[0]}`);
      rows.push({
        where,
        nameBytes: length,
        entries: config.entryBytesCount,
        chargedBytes: entryBytes(length, length, length),
        nodes: [],
        error: (error as Error).message,
      });
    }
  };
  for (const length of config.entryBytesNames) await attempt('single node', length, () => singleNodeRow(target, length, config.entryBytesCount, log));
  const clusterSkipped = await clusterUnavailableReason();
  if (clusterSkipped !== undefined) {
    log(`entry bytes, cluster: skipped (${clusterSkipped})`);
    return { rows, clusterSkipped };
  }
  for (const length of config.entryBytesNames) await attempt('cluster', length, () => clusterRow(config, length, config.entryBytesCount, log));
  return { rows };
}
