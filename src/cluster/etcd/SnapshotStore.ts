import { createHash, randomBytes } from 'node:crypto';
import type { ICompare } from 'etcd3';
import { asBuffer } from '../../bytes.js';
import type { StoredSnapshot } from '../ReplicatedLog.js';
import { prefixEnd } from './calls.js';
import type { EndpointPool } from './EndpointPool.js';

/** Snapshot chunk size: a put is capped at 1.5 MiB by etcd's default --max-request-bytes. */
export const SNAPSHOT_CHUNK_BYTES = 1024 * 1024;
/** Reads and small writes of a snapshot may go to another member when one hangs this long. */
const SNAPSHOT_ATTEMPT_MS = 2_000;
/** Times the pointer is re-read and the swap tried again when another saver moved it meanwhile. */
const POINTER_SWAPS = 3;
/** Times a load starts over because the pointer moved while its chunks were read. */
const LOAD_ATTEMPTS = 3;

/** The pointer key's value: which save is the snapshot, and how to check it. */
interface SnapshotPointer {
  readonly version: number;
  readonly revision: number;
  /** The save's id: its chunks are `<version>/<id>/<index>`. Absent in pointers of the first format (`<version>/<index>`). */
  readonly id?: string;
  readonly chunks: number;
  readonly bytes: number;
  readonly sha256: string;
}

/** The pointer as read, with the revision the compare-and-swap compares (0: no pointer). */
interface PointerRead {
  readonly pointer: SnapshotPointer | undefined;
  readonly modRevision: string;
}

/**
 * Snapshots in etcd (defect 3). Each save writes its chunks under its own unique save id, then
 * moves the pointer key with one compare-and-swap transaction: the pointer is still as read (or
 * still absent), and this save's first and last chunks still exist; the pointer only ever moves
 * to a newer version. After a successful swap every chunk of an older version is deleted: the
 * previous snapshot, and leftovers of saves that crashed or lost. Deleting another saver's
 * chunks is safe: its swap compares their existence and fails, and it never points at them.
 * A save whose swap failed deletes its own chunks; one whose swap outcome is unknown (a timeout)
 * leaves them for a later save. So the pointer never names a missing chunk, and a node always
 * finds a loadable snapshot (or none ever written).
 */
export class SnapshotStore {
  private readonly pointerKey: Buffer;
  private readonly chunkPrefix: string;

  constructor(
    private readonly pool: EndpointPool,
    root: string,
  ) {
    this.pointerKey = Buffer.from(`${root}snapshot`);
    this.chunkPrefix = `${root}snapshots/`;
  }

  async load(timeoutMs: number): Promise<StoredSnapshot | undefined> {
    let seen: PointerRead | undefined;
    for (let attempt = 1; attempt <= LOAD_ATTEMPTS; attempt++) {
      const read = await this.readPointer(timeoutMs);
      const meta = read.pointer;
      if (meta === undefined) return undefined;
      // The same pointer twice and still no good: not a race with a newer save but a bad chunk.
      if (seen !== undefined && seen.modRevision === read.modRevision) throw damaged(meta);
      seen = read;
      const bytes = await this.readChunks(meta, timeoutMs);
      if (bytes !== undefined && bytes.length === meta.bytes && sha256(bytes) === meta.sha256) {
        return { position: { version: meta.version, revision: meta.revision }, bytes };
      }
    }
    throw new Error(`snapshot pointer moved during each of ${LOAD_ATTEMPTS} loads (newer snapshots being written); try again`);
  }

  /** Saves the snapshot; resolves with whether the pointer now names it or a newer one (so what it covers may go). */
  async save(snapshot: StoredSnapshot, timeoutMs: number): Promise<boolean> {
    const { version, revision } = snapshot.position;
    const bytes = asBuffer(snapshot.bytes);
    const chunks = Math.max(1, Math.ceil(bytes.length / SNAPSHOT_CHUNK_BYTES));
    const id = `s${randomBytes(8).toString('hex')}`;
    const pointer: SnapshotPointer = { version, revision, id, chunks, bytes: bytes.length, sha256: sha256(bytes) };
    for (let i = 0; i < chunks; i++) {
      const value = bytes.subarray(i * SNAPSHOT_CHUNK_BYTES, (i + 1) * SNAPSHOT_CHUNK_BYTES);
      const key = this.chunkKey(pointer, i);
      await this.pool.call('snapshot chunk', timeoutMs, ({ client }, options) => client.kv.put({ key, value }, options), SNAPSHOT_ATTEMPT_MS);
    }
    const mine: ICompare[] = [
      { key: this.chunkKey(pointer, 0), target: 'Create', result: 'Greater', create_revision: 0 },
      { key: this.chunkKey(pointer, chunks - 1), target: 'Create', result: 'Greater', create_revision: 0 },
    ];
    const value = Buffer.from(JSON.stringify(pointer));
    let won = false;
    let newer = false;
    for (let swap = 1; ; swap++) {
      const read = await this.readPointer(timeoutMs);
      // An earlier swap of ours whose answer was lost (or retried) may have committed: the pointer is ours.
      if (read.pointer?.id === id) {
        won = true;
        break;
      }
      if (read.pointer !== undefined && read.pointer.version >= version) {
        newer = true; // as new or newer already: never move back
        break;
      }
      if (swap > POINTER_SWAPS) break;
      const response = await this.pool.call('snapshot pointer swap', timeoutMs, ({ client }, options) =>
        client.kv.txn(
          {
            compare: [{ key: this.pointerKey, target: 'Mod', result: 'Equal', mod_revision: read.modRevision }, ...mine],
            success: [{ request_put: { key: this.pointerKey, value } }],
            failure: [{ request_range: { key: this.chunkKey(pointer, 0), keys_only: true } }],
          },
          options,
        ),
      );
      if (response.succeeded) {
        won = true;
        break;
      }
      if (response.responses[0]?.response_range.kvs.length === 0) {
        newer = true; // a newer save deleted our chunks
        break;
      }
    }
    if (won) {
      // Every older save goes: the previous snapshot and any leftovers (see the class comment).
      const olderEnd = Buffer.from(this.versionPrefix(version));
      await this.pool.call('old snapshots', timeoutMs, ({ client }, options) =>
        client.kv.deleteRange({ key: Buffer.from(this.chunkPrefix), range_end: olderEnd }, options),
      );
      return true;
    }
    // Lost to another saver (the pointer is known not to name this save): its chunks are nobody's snapshot.
    const own = Buffer.from(this.savePrefix(pointer));
    await this.pool.call('own snapshot chunks', timeoutMs, ({ client }, options) => client.kv.deleteRange({ key: own, range_end: prefixEnd(own) }, options));
    return newer;
  }

  private async readPointer(timeoutMs: number): Promise<PointerRead> {
    const response = await this.pool.call(
      'snapshot pointer',
      timeoutMs,
      ({ client }, options) => client.kv.range({ key: this.pointerKey }, options),
      SNAPSHOT_ATTEMPT_MS,
    );
    const kv = response.kvs[0];
    return kv === undefined ? { pointer: undefined, modRevision: '0' } : { pointer: parsePointer(kv.value), modRevision: kv.mod_revision };
  }

  /** The save's chunks in order; undefined when one is missing (deleted by a newer save meanwhile). */
  private async readChunks(meta: SnapshotPointer, timeoutMs: number): Promise<Buffer | undefined> {
    const parts: Buffer[] = [];
    for (let i = 0; i < meta.chunks; i++) {
      const key = this.chunkKey(meta, i);
      const chunk = await this.pool.call('snapshot chunk', timeoutMs, ({ client }, options) => client.kv.range({ key }, options), SNAPSHOT_ATTEMPT_MS);
      const value = chunk.kvs[0]?.value;
      if (value === undefined) return undefined;
      parts.push(value);
    }
    return Buffer.concat(parts);
  }

  /** Every chunk key of versions below `version` sorts below this. */
  private versionPrefix(version: number): string {
    return `${this.chunkPrefix}${String(version).padStart(16, '0')}/`;
  }

  private savePrefix(meta: SnapshotPointer): string {
    // Ids start with a letter: a save's prefix never covers a first-format key (digits only).
    return meta.id === undefined ? this.versionPrefix(meta.version) : `${this.versionPrefix(meta.version)}${meta.id}/`;
  }

  private chunkKey(meta: SnapshotPointer, index: number): Buffer {
    return Buffer.from(`${this.savePrefix(meta)}${String(index).padStart(8, '0')}`);
  }
}

function damaged(meta: SnapshotPointer): Error {
  return new Error(
    `snapshot ${meta.version} (save ${meta.id ?? 'first-format'}) is damaged in etcd: its ${meta.chunks} chunk(s) are missing or do not ` +
      `add up to ${meta.bytes} bytes with SHA-256 ${meta.sha256}; refusing to load it`,
  );
}

function parsePointer(value: Buffer): SnapshotPointer {
  let p: SnapshotPointer;
  try {
    p = JSON.parse(value.toString()) as SnapshotPointer;
  } catch {
    throw new Error('snapshot pointer: not JSON');
  }
  for (const field of ['version', 'revision', 'chunks', 'bytes'] as const) {
    if (!Number.isSafeInteger(p[field]) || p[field] < 0) throw new Error(`snapshot pointer: bad ${field}`);
  }
  if (typeof p.sha256 !== 'string') throw new Error('snapshot pointer: bad sha256');
  if (p.id !== undefined && !/^s[0-9a-f]+$/.test(p.id)) throw new Error('snapshot pointer: bad id');
  return p;
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
