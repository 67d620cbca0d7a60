import type { ByteString } from '../bytes.js';
import { ReplicaRules, type ReplicatedRequest } from '../locks/ReplicaRules.js';
import { grownCapacity, resized } from '../locks/records.js';
import { Refusal, type TableRoom } from '../locks/TableLimits.js';

/** etcd's own default backend quota (`--quota-backend-bytes`): what `--etcd-quota-bytes` assumes unless told. */
export const DEFAULT_ETCD_QUOTA_BYTES = 2 * 1024 * 1024 * 1024;
/** `--etcd-quota-bytes` from 1 MiB… */
export const MIN_ETCD_QUOTA_BYTES = 1024 * 1024;
/** …to 8 TiB (etcd suggests at most 8 GiB); a twentieth of it in KiB fits the batch header's u32. */
export const MAX_ETCD_QUOTA_BYTES = 8 * 1024 ** 4;

/**
 * What one entry costs in etcd besides its key, index and owner bytes, in each copy etcd holds of
 * it: a snapshot entry's fields (lengths, priority, TTL, TTW, owner flag, ticket, version, token,
 * the origin's name) and bbolt's per-record share, or the request command that created it. Measured
 * with 255-byte names: 836 bytes of etcd (dbSize) per entry in one copy, 765 of them names; 96 keeps
 * short names (a node's name in every snapshot entry, bbolt's page headers) on the safe side.
 */
export const ENTRY_ETCD_OVERHEAD_BYTES = 96;

/**
 * The share of the etcd quota the table's entries may take, counted once each (a snapshot of the
 * table is about that size, S). etcd holds up to three snapshots before a compaction frees the
 * oldest: the one written before the last (its chunks are deleted after the revision the last
 * compaction went to), the last one, and the one being written; and the log since the last
 * snapshot, which the leader lets grow to a snapshot's size or a twentieth of the quota
 * (Leadership.LOG_QUOTA_SHARE) before it writes the next: 4 S, a fifth of the quota, in use at the
 * worst moment (measured: 5 S with the log at 2 S). The rest is for bbolt's free pages, which large
 * values reuse badly (measured under a flood of requests at the bound: dbSize twice the bytes in
 * use before the leader's defragmentations), the writer leases' fences and anyone else's keys; and
 * etcd's dbSize, which it compares with its quota, only falls by a defragmentation, so the bound
 * keeps it clear of the quota at every moment, not on average.
 */
export const ENTRY_QUOTA_SHARE = 1 / 20;

/** The bound on the entries' etcd bytes (Batch.entryBytesBound) for an etcd quota of `quotaBytes`: a share, in whole KiB. */
export function entryBytesBound(quotaBytes: number): number {
  return Math.floor((quotaBytes * ENTRY_QUOTA_SHARE) / 1024) * 1024;
}

/** What an entry of these names costs in etcd, in one copy (see ENTRY_ETCD_OVERHEAD_BYTES). */
export function entryEtcdBytes(key: ByteString, index: ByteString, owner: ByteString): number {
  return ENTRY_ETCD_OVERHEAD_BYTES + key.length + index.length + owner.length;
}

/** The bounds a batch carries (LogCodec's Batch): what its requests may add to the table; 0 or absent: none. */
export interface BatchBounds {
  readonly entryBytesBound?: number;
  readonly tableBytesBound?: number;
  readonly ownerEntriesBound?: number;
}

/**
 * A replica's queue rules, bounded as a single node's table is and in etcd bytes besides: apply
 * refuses a request that would add an entry (0, as a full table does) once the table would pass
 * a bound its batch carries, the proposing node's own (as --max-locks is in each request): the
 * entries' etcd bytes (from --etcd-quota-bytes), the table's bytes (--max-table-bytes, charged as
 * a single node charges them, TableLimits.entryBytes) and one owner's entries
 * (--max-locks-per-owner). The bytes are counted from the names of each entry as it joins and
 * leaves, so every replica that applied the same log counts the same, and a snapshot load counts again.
 *
 * Each entry's etcd cost is kept in a column under its id (2 bytes an entry), so that whatever removes
 * it (a release, release-all, an expiry, a cancel) takes off exactly what its joining added. The
 * table tells the rules of a new entry by id only: the names come from the request just admitted
 * (hasRoom runs right before entryAdded) or, for an entry loaded or imported, from `nextEntry`.
 */
export class EntryBytesRules extends ReplicaRules {
  private cost = new Uint16Array(64);
  private total = 0;
  private bounds: BatchBounds = {};
  /** The cost of the entry about to join: set by hasRoom or nextEntry, taken by entryAdded or adopt. */
  private pending = 0;

  /** What the table's entries cost in etcd, one copy each. */
  get entryBytes(): number {
    return this.total;
  }

  /** The bounds of the batch being applied. */
  beginBatch(bounds: BatchBounds): void {
    this.bounds = bounds;
  }

  /** An entry of these names is about to be loaded (snapshot) or imported: its cost. */
  nextEntry(key: ByteString, index: ByteString, owner: ByteString): void {
    this.pending = entryEtcdBytes(key, index, owner);
  }

  override refusal(request: ReplicatedRequest, room: TableRoom): Refusal {
    const refusal = super.refusal(request, room);
    if (refusal !== Refusal.None) return refusal;
    const { entryBytesBound = 0, tableBytesBound = 0, ownerEntriesBound = 0 } = this.bounds;
    if (tableBytesBound > 0 && room.bytes + room.entryBytes > tableBytesBound) return Refusal.MaxTableBytes;
    if (ownerEntriesBound > 0 && room.ownerEntries >= ownerEntriesBound) return Refusal.MaxLocksPerOwner;
    const cost = entryEtcdBytes(request.key, request.index, request.owner);
    if (entryBytesBound > 0 && this.total + cost > entryBytesBound) return Refusal.EtcdEntryBytes;
    this.pending = cost;
    return Refusal.None;
  }

  /** Every entry joins through here: a request's too (ReplicaRules.entryAdded adopts it with the command's origin and position). */
  override adopt(entry: number, origin: ByteString, version: number): void {
    super.adopt(entry, origin, version);
    this.charge(entry);
  }

  override entryRemoved(entry: number): void {
    super.entryRemoved(entry);
    this.total -= this.cost[entry]!;
    this.cost[entry] = 0;
  }

  override recordsRebuilt(from: Int32Array, to: Int32Array, count: number): void {
    super.recordsRebuilt(from, to, count);
    let highest = -1;
    for (let i = 0; i < count; i++) highest = Math.max(highest, to[i]!);
    const cost = new Uint16Array(grownCapacity(64, highest + 1));
    for (let i = 0; i < count; i++) cost[to[i]!] = this.cost[from[i]!]!;
    this.cost = cost;
  }

  private charge(entry: number): void {
    if (entry >= this.cost.length) this.cost = resized(this.cost, grownCapacity(this.cost.length, entry + 1));
    this.cost[entry] = this.pending;
    this.total += this.pending;
    this.pending = 0;
  }
}
