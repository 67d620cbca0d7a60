import { storedNameBytes } from './NameStore.js';

/**
 * What a lock table may hold, in the resource each limit protects: entries (--max-locks), bytes
 * (--max-table-bytes), and one owner's or one connection's share of them. A request that would
 * create an entry beyond any of them is refused as a full table always was: position 0.
 */

/** Why a request for a new entry was refused; `None` when it has room. */
export const Refusal = {
  None: 0,
  /** The table holds --max-locks entries. */
  MaxLocks: 1,
  /** The entry's bytes (see entryBytes) would take the table past --max-table-bytes. */
  MaxTableBytes: 2,
  /** Its owner (the byte string) holds --max-locks-per-owner entries. */
  MaxLocksPerOwner: 3,
  /** The connection it came through created --max-locks-per-connection entries still held. */
  MaxLocksPerConnection: 4,
  /** Cluster mode: the entries' bytes in etcd would pass the bound the batch carries (--etcd-quota-bytes). */
  EtcdEntryBytes: 5,
} as const;
export type Refusal = (typeof Refusal)[keyof typeof Refusal];

/** The name of each refusal in log lines and metric labels (the option that sets its limit). */
export const REFUSAL_NAMES: Readonly<Record<Exclude<Refusal, 0>, string>> = {
  [Refusal.MaxLocks]: 'max-locks',
  [Refusal.MaxTableBytes]: 'max-table-bytes',
  [Refusal.MaxLocksPerOwner]: 'max-locks-per-owner',
  [Refusal.MaxLocksPerConnection]: 'max-locks-per-connection',
  [Refusal.EtcdEntryBytes]: 'etcd-quota-bytes',
};
/** Refusal codes that are limits, in order. */
export const REFUSALS = [Refusal.MaxLocks, Refusal.MaxTableBytes, Refusal.MaxLocksPerOwner, Refusal.MaxLocksPerConnection, Refusal.EtcdEntryBytes] as const;

/**
 * What one entry costs besides its names: its record (EntryRecords), its share of the queue, key
 * and owner records and of the hash indexes, heaps and waiter trees, with the slack of columns
 * that grow by doubling; and the 24 bytes a replica keeps more per entry (ReplicaRules).
 * Measured as resident memory growth over 200,000 entries of distinct key, index and owner, each
 * also its own queue, key and owner record: 930-1,163 bytes per entry with 255-byte names (768 of
 * them name slots; the high end on a loaded machine, the heap's slack with it), 215-268 with
 * 12-byte names (48): up to 395 bytes besides the names, rounded up.
 */
export const ENTRY_OVERHEAD_BYTES = 400;

/**
 * The bytes an entry is charged: the slots its key, index and owner take in the NameStore, plus
 * ENTRY_OVERHEAD_BYTES. Computed from the names alone, never from the process's memory, so that
 * every replica of a cluster charges alike; a name shared by several entries (one key with many
 * indexes, one owner with many locks) is charged to each, so the table's real memory stays below
 * what it is charged. 1,168 bytes for three 255-byte names, 424 for three of 1 to 7 bytes.
 */
export function entryBytes(keyLength: number, indexLength: number, ownerLength: number): number {
  return storedNameBytes(keyLength) + storedNameBytes(indexLength) + storedNameBytes(ownerLength) + ENTRY_OVERHEAD_BYTES;
}

/** The least --max-table-bytes: room for a few entries of the longest names. */
export const MIN_TABLE_BYTES = 4 * 2 ** 10;
/** The most --max-table-bytes: 1 TiB. */
export const MAX_TABLE_BYTES = 2 ** 40;
/** --max-table-bytes unless told otherwise: 1 GiB, about 920,000 entries of 255-byte names (2.5 million of short ones). */
export const DEFAULT_MAX_TABLE_BYTES = 2 ** 30;
/**
 * --max-locks-per-owner and --max-locks-per-connection unless told otherwise: a quarter of what the
 * default byte bound holds at the longest names, so no one owner, and no one connection, takes
 * more than a quarter of the table; and one owner's release-all (0x06) ends at most this many.
 * A client that holds more (a batch job locking rows by the hundred thousand) raises them.
 */
export const DEFAULT_MAX_LOCKS_PER_OWNER = 250_000;
export const DEFAULT_MAX_LOCKS_PER_CONNECTION = 250_000;

/** No connection: an entry restored from the lock file, or created by a caller that names none. */
export const NO_CLIENT = 0;

/** What a table holds against its limits now, as QueueRules.refusal is shown it. */
export interface TableRoom {
  /** Entries held. */
  readonly entries: number;
  /** Bytes charged for them (entryBytes each). */
  readonly bytes: number;
  /** What the new entry would be charged. */
  readonly entryBytes: number;
  /** Entries its owner holds. */
  readonly ownerEntries: number;
}

/** How a table stands against its limits, for the metrics. */
export interface LimitFigures {
  /** Bytes charged for every entry held (entryBytes each). */
  readonly bytesUsed: number;
  /** The bound (--max-table-bytes). */
  readonly bytesLimit: number;
  /** Requests refused so far (position 0) for want of room, by limit (REFUSAL_NAMES). */
  readonly refused: ReadonlyArray<readonly [name: string, count: number]>;
}
