import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { asBuffer } from '../bytes.js';
import { Etcd3, type IOptions, type Lease, type Watcher } from 'etcd3';
import type {
  Candidate,
  LatestBatch,
  LogHead,
  LogListener,
  LogPosition,
  LogRecord,
  LogWatch,
  MemberSession,
  NameClaim,
  ReplicatedLog,
  StoredSnapshot,
} from './ReplicatedLog.js';

/** Snapshot chunk size: a put is capped at 1.5 MiB by etcd's default --max-request-bytes. */
export const SNAPSHOT_CHUNK_BYTES = 1024 * 1024;
/** Largest message we accept from etcd; grpc-js's 4 MiB default drops a big catch-up silently (trap 2). */
const MAX_RECEIVE_BYTES = 512 * 1024 * 1024;

export interface EtcdConnection {
  readonly endpoints: readonly string[];
  /** Prefix of every key this cluster writes. */
  readonly cluster: string;
  readonly caCert?: Buffer;
  readonly cert?: Buffer;
  readonly key?: Buffer;
  readonly user?: { readonly username: string; readonly password: string };
}

/**
 * ReplicatedLog on etcd, through the `etcd3` client. Every trap of that client listed in the
 * design note is handled here, and only here:
 * 1. watch reconnects resume from the last revision *we* received, not the header's;
 * 2. the receive limit is raised so a catch-up larger than 4 MiB is not dropped;
 * 3. a retried put may append twice: batches carry ids (ReplicaState applies each once);
 * 4. every unary call has a deadline (no hanging on a paused member);
 * 5. a watcher ended by compaction emits 'error', which we always listen to;
 * 6. leases and the name claim are raw transactions (create-if-absent), not the lock recipe;
 * 7. etcd never compacts by itself: the leader compacts after each snapshot.
 */
export class EtcdLog implements ReplicatedLog {
  private readonly client: Etcd3;
  private readonly logKey: Buffer;
  private readonly pointerKey: Buffer;
  private readonly chunkPrefix: string;
  private readonly namePrefix: string;
  private readonly candidatePrefix: string;
  private readonly leases = new Set<Lease>();

  constructor(connection: EtcdConnection) {
    const options: IOptions = {
      hosts: [...connection.endpoints],
      grpcOptions: { 'grpc.max_receive_message_length': MAX_RECEIVE_BYTES, 'grpc.max_send_message_length': MAX_RECEIVE_BYTES },
      dialTimeout: 3_000,
    };
    if (connection.caCert !== undefined) {
      options.credentials = { rootCertificate: connection.caCert, privateKey: connection.key, certChain: connection.cert };
    }
    if (connection.user !== undefined) options.auth = { ...connection.user };
    this.client = new Etcd3(options);
    const root = `/${connection.cluster}/`;
    this.logKey = Buffer.from(`${root}log`);
    this.pointerKey = Buffer.from(`${root}snapshot`);
    this.chunkPrefix = `${root}snapshots/`;
    this.namePrefix = `${root}nodes/`;
    this.candidatePrefix = `${root}candidates/`;
  }

  async append(value: Uint8Array, timeoutMs: number): Promise<LogPosition> {
    // One transaction puts the batch and reads back the key's version: the batch's number.
    const response = await within(
      timeoutMs,
      'append',
      this.client.kv.txn(
        {
          compare: [],
          success: [
            { request_put: { key: this.logKey, value: asBuffer(value) } },
            { request_range: { key: this.logKey, keys_only: true } },
          ],
        },
        deadline(timeoutMs),
      ),
    );
    const kv = response.responses[1]?.response_range.kvs[0];
    if (kv === undefined) throw new Error('append: the log key vanished');
    return { version: Number(kv.version), revision: Number(kv.mod_revision) };
  }

  /** Not fenced yet: a given-up append can commit whenever its request reaches etcd. */
  readonly lateCommitMs = 0;

  async latest(timeoutMs: number): Promise<LatestBatch> {
    const response = await within(timeoutMs, 'latest batch', this.client.kv.range({ key: this.logKey }, deadline(timeoutMs)));
    const kv = response.kvs[0];
    const storeRevision = Number(response.header.revision);
    return kv === undefined
      ? { version: 0, revision: 0, storeRevision, value: undefined }
      : { version: Number(kv.version), revision: Number(kv.mod_revision), storeRevision, value: kv.value };
  }

  async head(timeoutMs: number): Promise<LogHead> {
    const response = await within(timeoutMs, 'read barrier', this.client.kv.range({ key: this.logKey, keys_only: true }, deadline(timeoutMs)));
    const kv = response.kvs[0];
    const storeRevision = Number(response.header.revision);
    return kv === undefined
      ? { version: 0, revision: 0, storeRevision }
      : { version: Number(kv.version), revision: Number(kv.mod_revision), storeRevision };
  }

  watch(fromRevision: number, listener: LogListener): LogWatch {
    let watcher: Watcher | undefined;
    let closed = false;
    let last = fromRevision - 1;
    const end = (why: 'compacted' | 'broken', detail: string): void => {
      if (closed) return;
      closed = true;
      void watcher?.cancel().catch(() => {});
      listener.onEnd(why, detail);
    };
    // Trap 1: the client would resume from the response header's revision + 1, which skips
    // whatever a catching-up stream had not delivered yet. Always resume after our last record.
    const resumeAfterLast = (): void => {
      if (watcher !== undefined) watcher.request.start_revision = String(last + 1);
    };
    this.client
      .watch()
      .key(this.logKey)
      .startRevision(String(fromRevision))
      .create()
      .then(
        (created) => {
          watcher = created;
          if (closed) {
            void created.cancel().catch(() => {});
            return;
          }
          resumeAfterLast();
          created.on('connected', resumeAfterLast);
          created.on('disconnected', resumeAfterLast);
          created.on('data', (response) => {
            const records: LogRecord[] = [];
            for (const event of response.events) {
              if (event.type !== 'Put') continue;
              const revision = Number(event.kv.mod_revision);
              records.push({ version: Number(event.kv.version), revision, value: event.kv.value });
              last = revision;
            }
            resumeAfterLast();
            if (!closed && records.length > 0) listener.onRecords(records);
          });
          // Trap 5: compaction past the watcher cancels it with 'error'; unheard, it would crash us.
          created.on('error', (error: Error) => end('compacted', error.message));
        },
        (error: Error) => end(/compact/i.test(error.message) ? 'compacted' : 'broken', error.message),
      );
    return {
      close: () => {
        if (closed) return;
        closed = true;
        void watcher?.cancel().catch(() => {});
      },
    };
  }

  async loadSnapshot(timeoutMs: number): Promise<StoredSnapshot | undefined> {
    // A newer snapshot may replace the one we are reading (its chunks are then deleted): retry.
    for (let attempt = 1; ; attempt++) {
      const pointer = await within(timeoutMs, 'snapshot pointer', this.client.kv.range({ key: this.pointerKey }, deadline(timeoutMs)));
      const kv = pointer.kvs[0];
      if (kv === undefined) return undefined;
      const meta = parsePointer(kv.value);
      const parts: Buffer[] = [];
      for (let i = 0; i < meta.chunks; i++) {
        const chunk = await within(timeoutMs, 'snapshot chunk', this.client.kv.range({ key: this.chunkKey(meta.version, i) }, deadline(timeoutMs)));
        const value = chunk.kvs[0]?.value;
        if (value === undefined) break;
        parts.push(value);
      }
      const bytes = Buffer.concat(parts);
      if (parts.length === meta.chunks && bytes.length === meta.bytes && sha256(bytes) === meta.sha256) {
        return { position: { version: meta.version, revision: meta.revision }, bytes };
      }
      if (attempt >= 3) throw new Error(`snapshot ${meta.version} is incomplete or damaged in etcd`);
    }
  }

  async saveSnapshot(snapshot: StoredSnapshot, timeoutMs: number): Promise<void> {
    const { version, revision } = snapshot.position;
    const bytes = asBuffer(snapshot.bytes);
    const chunks = Math.max(1, Math.ceil(bytes.length / SNAPSHOT_CHUNK_BYTES));
    for (let i = 0; i < chunks; i++) {
      const value = bytes.subarray(i * SNAPSHOT_CHUNK_BYTES, (i + 1) * SNAPSHOT_CHUNK_BYTES);
      await within(timeoutMs, 'snapshot chunk', this.client.kv.put({ key: this.chunkKey(version, i), value }, deadline(timeoutMs)));
    }
    const current = await within(timeoutMs, 'snapshot pointer', this.client.kv.range({ key: this.pointerKey }, deadline(timeoutMs)));
    const existing = current.kvs[0];
    if (existing !== undefined && parsePointer(existing.value).version >= version) return;
    const pointer = JSON.stringify({ version, revision, chunks, bytes: bytes.length, sha256: sha256(bytes) });
    await within(timeoutMs, 'snapshot pointer', this.client.kv.put({ key: this.pointerKey, value: Buffer.from(pointer) }, deadline(timeoutMs)));
    // Older snapshots go: every chunk key sorts below this snapshot's first one.
    await within(
      timeoutMs,
      'old snapshots',
      this.client.kv.deleteRange({ key: Buffer.from(this.chunkPrefix), range_end: this.chunkKey(version, 0) }, deadline(timeoutMs)),
    );
  }

  async compact(revision: number, timeoutMs: number): Promise<void> {
    try {
      await within(timeoutMs, 'compaction', this.client.kv.compact({ revision: String(revision) }, deadline(timeoutMs)));
    } catch (error) {
      // Someone compacted this far already: the history before it is gone either way.
      if (!/compacted/i.test((error as Error).message)) throw error;
    }
  }

  async claimName(name: string, priority: number | undefined, leaseSeconds: number, timeoutMs: number): Promise<NameClaim> {
    const lease = this.client.lease(leaseSeconds, { autoKeepAlive: true });
    lease.on('lost', () => {});
    let id: string;
    try {
      id = await within(timeoutMs, 'lease grant', lease.grant());
    } catch (error) {
      void lease.revoke().catch(() => {});
      throw error;
    }
    const nameKey = Buffer.from(this.namePrefix + name);
    const success = [{ request_put: { key: nameKey, value: Buffer.from(`${hostname()} pid ${process.pid}`), lease: id } }];
    if (priority !== undefined) {
      success.push({ request_put: { key: Buffer.from(this.candidatePrefix + name), value: Buffer.from(String(priority)), lease: id } });
    }
    const response = await within(
      timeoutMs,
      'name claim',
      this.client.kv.txn(
        {
          compare: [{ key: nameKey, target: 'Create', result: 'Equal', create_revision: 0 }],
          success,
          failure: [{ request_range: { key: nameKey } }],
        },
        deadline(timeoutMs),
      ),
    );
    if (!response.succeeded) {
      void lease.revoke().catch(() => {});
      const holder = response.responses[0]?.response_range.kvs[0]?.value.toString() ?? 'unknown';
      return { taken: false, holder };
    }
    this.leases.add(lease);
    return { taken: true, session: leaseSession(lease, () => this.leases.delete(lease)) };
  }

  async candidates(timeoutMs: number): Promise<Candidate[]> {
    const prefix = Buffer.from(this.candidatePrefix);
    const response = await within(timeoutMs, 'candidates', this.client.kv.range({ key: prefix, range_end: prefixEnd(prefix) }, deadline(timeoutMs)));
    return response.kvs.map((kv) => ({
      name: kv.key.subarray(prefix.length).toString(),
      priority: Number(kv.value.toString()),
      since: Number(kv.create_revision),
    }));
  }

  async close(): Promise<void> {
    this.client.close();
  }

  private chunkKey(version: number, index: number): Buffer {
    return Buffer.from(`${this.chunkPrefix}${String(version).padStart(16, '0')}/${String(index).padStart(8, '0')}`);
  }
}

function leaseSession(lease: Lease, forget: () => void): MemberSession {
  let lost = false;
  const handlers: Array<(why: string) => void> = [];
  lease.on('lost', (error) => {
    if (lost) return;
    lost = true;
    forget();
    for (const handler of handlers) handler(error.message);
  });
  return {
    get lost() {
      return lost;
    },
    onLost: (handler) => void handlers.push(handler),
    release: async () => {
      lost = true;
      forget();
      await lease.revoke({ deadline: Date.now() + 2_000 });
    },
  };
}

interface SnapshotPointer {
  readonly version: number;
  readonly revision: number;
  readonly chunks: number;
  readonly bytes: number;
  readonly sha256: string;
}

function parsePointer(value: Buffer): SnapshotPointer {
  const p = JSON.parse(value.toString()) as SnapshotPointer;
  for (const field of ['version', 'revision', 'chunks', 'bytes'] as const) {
    if (!Number.isSafeInteger(p[field]) || p[field] < 0) throw new Error(`snapshot pointer: bad ${field}`);
  }
  return p;
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The first key after every key that starts with `prefix` (etcd's range_end for a prefix). */
function prefixEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

/** Trap 4: grpc calls carry a deadline; the client has none by default. */
function deadline(timeoutMs: number): { deadline: Date } {
  return { deadline: new Date(Date.now() + Math.max(1, timeoutMs)) };
}

/** The client's own retries can outlast a call's deadline: bound the whole call here too. */
function within<T>(timeoutMs: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`etcd ${what} did not complete within ${Math.round(timeoutMs)} ms`)), Math.max(1, timeoutMs));
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}
