import type { ByteString } from '../bytes.js';
import { combineHashes, hashByteString } from './hashByteString.js';
import { HashIndex, NO_ID } from './HashIndex.js';
import type { NameStore } from './NameStore.js';
import { grownCapacity, IdAllocator, resized } from './records.js';

const MIN_CAPACITY = 64;

/**
 * Every key that has a lock, and under each key its queues, one per (key, index), as records
 * (columns indexed by id, see records.ts): a queue record says who owns the lock; its waiters are
 * in WaiterQueues. Keys are listed in the order they were created, and a key's queues in the order
 * their indexes were (list 0x07, the lock file and cluster snapshots show that order). A queue
 * left empty is deleted at once, and its key with its last queue, so a (key, index) taken again
 * lists as newly created, on every node alike.
 *
 * Finding a queue: the key by its hash (one HashIndex over keys), then, as most keys have a single
 * index, that one queue's index compared as is. A key with several indexes also files each of its
 * queues in a second index by (key id, index hash), so a key with a million indexes (a table and
 * its row ids) finds any of them in O(1) too. 28 bytes per key and 24 per queue, plus the names'
 * bytes (NameStore).
 */
export class KeyDirectory {
  /** NameStore handles of the keys' names. */
  private keyNames = new Int32Array(MIN_CAPACITY);
  private keyHashes = new Int32Array(MIN_CAPACITY);
  /** The key's queues, in index creation order: first, last, and how many. */
  private keyFirstQueue = new Int32Array(MIN_CAPACITY);
  private keyLastQueue = new Int32Array(MIN_CAPACITY);
  private keyQueueCount = new Int32Array(MIN_CAPACITY);
  /** Keys in creation order. */
  private keyPrev = new Int32Array(MIN_CAPACITY);
  private keyNext = new Int32Array(MIN_CAPACITY);
  private firstKey = NO_ID;
  private lastKey = NO_ID;
  private keyCapacity = MIN_CAPACITY;
  private readonly keyIds = new IdAllocator();
  private readonly keyIndex = new HashIndex((k) => this.keyHashes[k]!);

  /** The key record each queue is under. */
  private queueKey = new Int32Array(MIN_CAPACITY);
  /** NameStore handles of the queues' index names. */
  private indexNames = new Int32Array(MIN_CAPACITY);
  /** Hash of the index name; set while the queue is filed in queueIndex (its key has several). */
  private indexHashes = new Int32Array(MIN_CAPACITY);
  /** The entry that owns the lock, NO_ID when nobody does (a queue with only waiters, briefly). */
  queueOwner = new Int32Array(MIN_CAPACITY);
  /** Neighbours among the key's queues. */
  private queuePrev = new Int32Array(MIN_CAPACITY);
  private queueNext = new Int32Array(MIN_CAPACITY);
  private queueCapacity = MIN_CAPACITY;
  private readonly queueIds = new IdAllocator();
  /** Queues of keys with two or more, by combineHashes(key id, index hash). */
  private readonly queueIndex = new HashIndex((q) => combineHashes(this.queueKey[q]!, this.indexHashes[q]!));

  /** What the last find() learnt, so that create() after a miss looks nothing up twice. */
  private foundKey = NO_ID;
  private foundKeyHash = 0;
  /**
   * The queue last made, and the key and index it was made for: a client mostly releases (or
   * renews) the lock it has just requested, and the decoder hands the names out as the same
   * strings, which compare equal at once: that lookup needs no hashing or probing. Only queues just
   * made are remembered: remembering every lookup cost unpipelined clients (whose lookups follow
   * other connections' and never hit) more than it saved.
   */
  private lastQueue = NO_ID;
  private lastKeyName: ByteString = '';
  private lastIndexName: ByteString = '';

  constructor(
    private readonly names: NameStore,
    private readonly seed: number,
  ) {}

  /** Keys with at least one queue. */
  get keyCount(): number {
    return this.keyIds.live;
  }

  get queueCount(): number {
    return this.queueIds.live;
  }

  /** The queue of (key, index), or NO_ID. */
  find(key: ByteString, index: ByteString): number {
    if (this.lastQueue !== NO_ID && key === this.lastKeyName && index === this.lastIndexName) return this.lastQueue;
    return this.lookUp(key, index);
  }

  private remember(q: number, key: ByteString, index: ByteString): void {
    this.lastQueue = q;
    this.lastKeyName = key;
    this.lastIndexName = index;
  }

  private lookUp(key: ByteString, index: ByteString): number {
    const hash = hashByteString(key, this.seed);
    const keys = this.keyIndex;
    let k = keys.first(hash);
    while (k !== NO_ID && !this.names.equals(this.keyNames[k]!, key)) k = keys.next(hash);
    this.foundKey = k;
    this.foundKeyHash = hash;
    if (k === NO_ID) return NO_ID;
    if (this.keyQueueCount[k] === 1) {
      const q = this.keyFirstQueue[k]!;
      return this.names.equals(this.indexNames[q]!, index) ? q : NO_ID;
    }
    const queueHash = combineHashes(k, hashByteString(index, this.seed));
    const queues = this.queueIndex;
    let q = queues.first(queueHash);
    while (q !== NO_ID && (this.queueKey[q] !== k || !this.names.equals(this.indexNames[q]!, index))) q = queues.next(queueHash);
    return q;
  }

  /** A new queue for (key, index), which the last call, find(key, index), did not find. */
  createAfterMiss(key: ByteString, index: ByteString): number {
    let k = this.foundKey;
    if (k === NO_ID) k = this.addKey(key, this.foundKeyHash);
    const q = this.queueIds.allocate();
    if (q >= this.queueCapacity) this.growQueues(grownCapacity(this.queueCapacity, q + 1));
    this.queueKey[q] = k;
    this.indexNames[q] = this.names.add(index);
    this.queueOwner[q] = NO_ID;
    const last = this.keyLastQueue[k]!;
    this.queuePrev[q] = last;
    this.queueNext[q] = NO_ID;
    if (last === NO_ID) this.keyFirstQueue[k] = q;
    else this.queueNext[last] = q;
    this.keyLastQueue[k] = q;
    const count = ++this.keyQueueCount[k]!;
    // A key with several indexes files each queue by index; its first queue once the second comes.
    if (count === 2) {
      const first = this.keyFirstQueue[k]!;
      this.fileByIndex(first, hashByteString(this.names.toString(this.indexNames[first]!), this.seed));
    }
    if (count >= 2) this.fileByIndex(q, hashByteString(index, this.seed));
    this.remember(q, key, index);
    return q;
  }

  /** The queue of (key, index), created empty if there is none. */
  getOrCreate(key: ByteString, index: ByteString): number {
    const q = this.find(key, index);
    return q === NO_ID ? this.createAfterMiss(key, index) : q;
  }

  /** Deletes the queue (its key too, if it was the key's last). Its entries are gone already. */
  delete(q: number): void {
    if (q === this.lastQueue) this.lastQueue = NO_ID;
    const k = this.queueKey[q]!;
    const count = this.keyQueueCount[k]!;
    if (count >= 2) this.unfileByIndex(q);
    const prev = this.queuePrev[q]!;
    const next = this.queueNext[q]!;
    if (prev === NO_ID) this.keyFirstQueue[k] = next;
    else this.queueNext[prev] = next;
    if (next === NO_ID) this.keyLastQueue[k] = prev;
    else this.queuePrev[next] = prev;
    this.keyQueueCount[k] = count - 1;
    if (count === 2) this.unfileByIndex(this.keyFirstQueue[k]!);
    this.names.remove(this.indexNames[q]!);
    this.queueIds.release(q);
    if (count === 1) this.deleteKey(k);
  }

  /** The queue's key, as a new byte string. */
  /** The bytes the queue's key and index take in the NameStore (see TableLimits.entryBytes). */
  storedBytesOf(q: number): number {
    return this.names.slotBytes(this.keyNames[this.queueKey[q]!]!) + this.names.slotBytes(this.indexNames[q]!);
  }

  keyOf(q: number): ByteString {
    return this.names.toString(this.keyNames[this.queueKey[q]!]!);
  }

  /** Whether the queue is under this key. */
  isUnder(q: number, key: ByteString): boolean {
    return this.names.equals(this.keyNames[this.queueKey[q]!]!, key);
  }

  /** The queue's index, as a new byte string. */
  indexOf(q: number): ByteString {
    return this.names.toString(this.indexNames[q]!);
  }

  /** The key's queues, indexes in creation order. */
  *queuesOf(key: ByteString): IterableIterator<number> {
    const hash = hashByteString(key, this.seed);
    let k = this.keyIndex.first(hash);
    while (k !== NO_ID && !this.names.equals(this.keyNames[k]!, key)) k = this.keyIndex.next(hash);
    if (k !== NO_ID) yield* this.queuesUnder(k);
  }

  /** Every queue, key by key in key creation order. */
  *all(): IterableIterator<number> {
    for (let k = this.firstKey; k !== NO_ID;) {
      // Read on before yielding: the caller may delete the queue (and with it the key).
      const next = this.keyNext[k]!;
      yield* this.queuesUnder(k);
      k = next;
    }
  }

  private *queuesUnder(k: number): IterableIterator<number> {
    for (let q = this.keyFirstQueue[k]!; q !== NO_ID;) {
      const next = this.queueNext[q]!;
      yield q;
      q = next;
    }
  }

  private addKey(key: ByteString, hash: number): number {
    const k = this.keyIds.allocate();
    if (k >= this.keyCapacity) this.growKeys(grownCapacity(this.keyCapacity, k + 1));
    this.keyNames[k] = this.names.add(key);
    this.keyHashes[k] = hash;
    this.keyFirstQueue[k] = NO_ID;
    this.keyLastQueue[k] = NO_ID;
    this.keyQueueCount[k] = 0;
    this.keyPrev[k] = this.lastKey;
    this.keyNext[k] = NO_ID;
    if (this.lastKey === NO_ID) this.firstKey = k;
    else this.keyNext[this.lastKey] = k;
    this.lastKey = k;
    this.keyIndex.add(hash, k);
    return k;
  }

  private deleteKey(k: number): void {
    this.keyIndex.remove(this.keyHashes[k]!, k);
    const prev = this.keyPrev[k]!;
    const next = this.keyNext[k]!;
    if (prev === NO_ID) this.firstKey = next;
    else this.keyNext[prev] = next;
    if (next === NO_ID) this.lastKey = prev;
    else this.keyPrev[next] = prev;
    this.names.remove(this.keyNames[k]!);
    this.keyIds.release(k);
  }

  private fileByIndex(q: number, hash: number): void {
    this.indexHashes[q] = hash;
    this.queueIndex.add(combineHashes(this.queueKey[q]!, hash), q);
  }

  private unfileByIndex(q: number): void {
    this.queueIndex.remove(combineHashes(this.queueKey[q]!, this.indexHashes[q]!), q);
  }

  private growKeys(capacity: number): void {
    this.keyCapacity = capacity;
    this.keyNames = resized(this.keyNames, capacity);
    this.keyHashes = resized(this.keyHashes, capacity);
    this.keyFirstQueue = resized(this.keyFirstQueue, capacity);
    this.keyLastQueue = resized(this.keyLastQueue, capacity);
    this.keyQueueCount = resized(this.keyQueueCount, capacity);
    this.keyPrev = resized(this.keyPrev, capacity);
    this.keyNext = resized(this.keyNext, capacity);
  }

  private growQueues(capacity: number): void {
    this.queueCapacity = capacity;
    this.queueKey = resized(this.queueKey, capacity);
    this.indexNames = resized(this.indexNames, capacity);
    this.indexHashes = resized(this.indexHashes, capacity);
    this.queueOwner = resized(this.queueOwner, capacity);
    this.queuePrev = resized(this.queuePrev, capacity);
    this.queueNext = resized(this.queueNext, capacity);
  }
}
