import { isReference } from '../LogCodec.js';
import type { LogHead, LogRecord, RetainedBatch, StoredSnapshot } from '../ReplicatedLog.js';
import { prefixEnd } from '../etcd/calls.js';
import { EndpointPool, type EtcdConnection } from '../etcd/EndpointPool.js';
import { SnapshotStore } from '../etcd/SnapshotStore.js';
import type { ClusterHistory } from './ClusterHistory.js';

/** Longest one read may take (each is one small range), member failover included. */
const READ_TIMEOUT_MS = 10_000;

/**
 * A cluster's history as etcd holds it, read by revision. Only reads: a role that may read
 * `/<cluster>/` is enough, and no lease, watch or janitor of a node's EtcdLog is started. etcd
 * keeps a key's past versions until compaction: the log key's value at revision r is its newest
 * put at or before r, so walking back from the head (each version's mod revision − 1) reads every
 * version compaction left, until etcd answers "compacted" or version 1 is reached. A version whose
 * value is a reference (the log key held two bytes, the batch its retained copy) is resolved from
 * the retained key put at the same revision, read at that revision.
 */
export class EtcdHistory implements ClusterHistory {
  private readonly pool: EndpointPool;
  private readonly snapshots: SnapshotStore;
  private readonly logKey: Buffer;
  private readonly retainedPrefix: Buffer;

  constructor(connection: EtcdConnection) {
    this.pool = new EndpointPool(connection, 0);
    const root = `/${connection.cluster}/`;
    this.snapshots = new SnapshotStore(this.pool, root);
    this.logKey = Buffer.from(`${root}log`);
    this.retainedPrefix = Buffer.from(`${root}batches/`);
  }

  async logVersions(): Promise<{ head: LogHead; records: LogRecord[] }> {
    const now = await this.pool.call('log head', READ_TIMEOUT_MS, ({ client }, options) => client.kv.range({ key: this.logKey }, options));
    const newest = now.kvs[0];
    const storeRevision = Number(now.header.revision);
    if (newest === undefined) return { head: { version: 0, revision: 0, storeRevision }, records: [] };
    const head = { version: Number(newest.version), revision: Number(newest.mod_revision), storeRevision };
    const records: LogRecord[] = [{ version: head.version, revision: head.revision, value: newest.value }];
    for (;;) {
      const last = records[records.length - 1]!;
      if (last.version <= 1) break;
      let kv;
      try {
        const response = await this.pool.call('log history', READ_TIMEOUT_MS, ({ client }, options) =>
          client.kv.range({ key: this.logKey, revision: last.revision - 1 }, options),
        );
        kv = response.kvs[0];
      } catch (error) {
        if (/compacted/i.test((error as Error).message)) break;
        throw error;
      }
      // The key was deleted and put anew (by hand): what came before is another log.
      if (kv === undefined || Number(kv.version) !== last.version - 1) break;
      records.push({ version: Number(kv.version), revision: Number(kv.mod_revision), value: kv.value });
    }
    records.reverse();
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!;
      if (isReference(record.value)) records[i] = { ...record, value: (await this.retainedAt(record.revision)) ?? record.value };
    }
    return { head, records };
  }

  /** The retained batch put at `revision` (with the log key's reference), read at that revision; undefined if compacted away. */
  private async retainedAt(revision: number): Promise<Buffer | undefined> {
    try {
      const response = await this.pool.call('retained batch', READ_TIMEOUT_MS, ({ client }, options) =>
        client.kv.range(
          { key: this.retainedPrefix, range_end: prefixEnd(this.retainedPrefix), revision, min_mod_revision: revision, max_mod_revision: revision },
          options,
        ),
      );
      return response.kvs[0]?.value;
    } catch (error) {
      if (/compacted/i.test((error as Error).message)) return undefined;
      throw error;
    }
  }

  snapshot(): Promise<StoredSnapshot | undefined> {
    return this.snapshots.load(READ_TIMEOUT_MS);
  }

  async retainedSince(revision: number): Promise<RetainedBatch[]> {
    // Not one read with the head, as a follower's (EtcdLog.since): the replay compares counts and revisions itself.
    const key = this.retainedPrefix;
    const range = { key, range_end: prefixEnd(key), min_create_revision: revision + 1 };
    const response = await this.pool.call('retained batches', READ_TIMEOUT_MS, ({ client }, options) => client.kv.range(range, options));
    // In log order: each retained key is created by its append, so creation order is the log's.
    return response.kvs.map((kv) => ({ revision: Number(kv.create_revision), value: kv.value })).sort((a, b) => a.revision - b.revision);
  }

  close(): Promise<void> {
    this.pool.close();
    return Promise.resolve();
  }
}
