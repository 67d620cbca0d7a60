import type { ByteString } from '../bytes.js';
import type { EntryRecords } from './EntryRecords.js';
import { hashByteString } from './hashByteString.js';
import { HashIndex, NO_ID } from './HashIndex.js';
import type { NameStore } from './NameStore.js';
import { grownCapacity, IdAllocator, resized } from './records.js';

const MIN_CAPACITY = 64;
/**
 * Owners left without entries that keep their record a while: a client mostly holds one lock at a
 * time, so its name empties and comes back at every lock it takes, and making its record anew
 * (hashing, copying the name, filing it) was the largest part of taking a lock on a fresh key. The
 * least recently emptied goes once this many are kept, so they cost at most a few hundred KiB.
 */
export const KEPT_EMPTY_OWNERS = 4_096;
/**
 * The list link of an entry taken out of its owner's list by detach() (a release done in slices):
 * it still belongs to its owner (its name, the owner's count) but is no longer one of the entries
 * a later release-all or `*` of that owner finds.
 */
const DETACHED = -2;

/**
 * Every owner name that holds or waits for a lock, with its entries across all keys in a doubly
 * linked list (through the entries' ownerPrev/ownerNext), so that release-all (0x06) and release
 * with index `*` cost O(entries of that owner), and an entry leaves its owner in O(1). An owner
 * with no entries left keeps its record until KEPT_EMPTY_OWNERS others have emptied since; it has
 * no entries, so nothing but the cost of the next lock it takes can tell. 21 bytes per owner, plus
 * its name's bytes.
 */
export class OwnerDirectory {
  /** NameStore handles of the owners' names. */
  private names = new Int32Array(MIN_CAPACITY);
  private hashes = new Int32Array(MIN_CAPACITY);
  private firstEntry = new Int32Array(MIN_CAPACITY);
  private lastEntry = new Int32Array(MIN_CAPACITY);
  private entryCount = new Int32Array(MIN_CAPACITY);
  /** 1 while the owner's id is in `kept` (it had no entries when it was put there). */
  private isKept = new Uint8Array(MIN_CAPACITY);
  /** Ring of owners kept without entries, the least recently emptied at `keptHead`. */
  private readonly kept = new Int32Array(KEPT_EMPTY_OWNERS);
  private keptHead = 0;
  private keptCount = 0;
  /**
   * The owner name add() was last given, and its record. A client names the same owner in
   * request after request, and the decoder hands each connection's owner out as one string, so
   * this is mostly a hit (the same string compares equal at once), with no hashing and no probe.
   */
  private lastName: ByteString = '';
  private lastId = NO_ID;
  private capacity = MIN_CAPACITY;
  private readonly ids = new IdAllocator();
  private readonly index = new HashIndex((id) => this.hashes[id]!);

  constructor(
    private readonly entries: EntryRecords,
    private readonly nameStore: NameStore,
    private readonly seed: number,
  ) {}

  /** Owner records, those kept without entries included. */
  get count(): number {
    return this.ids.live;
  }

  /** Owner records kept without entries. */
  get keptEmpty(): number {
    return this.keptCount;
  }

  /** The owner record of this name, or NO_ID. */
  find(owner: ByteString): number {
    return this.findHashed(owner, hashByteString(owner, this.seed));
  }

  private findHashed(owner: ByteString, hash: number): number {
    const index = this.index;
    let id = index.first(hash);
    while (id !== NO_ID && !this.nameStore.equals(this.names[id]!, owner)) id = index.next(hash);
    return id;
  }

  /** The owner's name, as a new byte string. */
  nameOf(id: number): ByteString {
    return this.nameStore.toString(this.names[id]!);
  }

  /** Whether the owner record has exactly this name. */
  isNamed(id: number, owner: ByteString): boolean {
    return this.nameStore.equals(this.names[id]!, owner);
  }

  /** The record of this owner name, made if there is none; remembered as the last one looked up. */
  private findOrMake(owner: ByteString): number {
    const hash = hashByteString(owner, this.seed);
    let id = this.findHashed(owner, hash);
    if (id === NO_ID) {
      id = this.ids.allocate();
      if (id >= this.capacity) this.grow(grownCapacity(this.capacity, id + 1));
      this.names[id] = this.nameStore.add(owner);
      this.hashes[id] = hash;
      this.entryCount[id] = 0;
      this.isKept[id] = 0;
      this.index.add(hash, id);
    }
    this.lastName = owner;
    this.lastId = id;
    return id;
  }

  /** Files entry `entry` under `owner` (made if new), last in the owner's list; sets the entry's owner field. */
  add(entry: number, owner: ByteString): void {
    let id = owner === this.lastName ? this.lastId : NO_ID;
    if (id === NO_ID) id = this.findOrMake(owner);
    const entries = this.entries;
    if (this.entryCount[id] === 0 || this.firstEntry[id] === NO_ID) {
      this.firstEntry[id] = entry;
    } else {
      const last = this.lastEntry[id]!;
      entries.ownerNext[last] = entry;
      entries.ownerPrev[entry] = last;
    }
    this.lastEntry[id] = entry;
    this.entryCount[id]!++;
    entries.owner[entry] = id;
  }

  /** Takes the entry out of its owner's list; an owner left without entries is kept a while (KEPT_EMPTY_OWNERS). */
  remove(entry: number): void {
    const entries = this.entries;
    const id = entries.owner[entry]!;
    if (entries.ownerPrev[entry] !== DETACHED) this.unlink(id, entry);
    entries.ownerPrev[entry] = NO_ID;
    entries.ownerNext[entry] = NO_ID;
    if (--this.entryCount[id]! > 0 || this.isKept[id] === 1) return;
    if (this.keptCount === KEPT_EMPTY_OWNERS) this.dropOldestKept();
    this.kept[(this.keptHead + this.keptCount++) % KEPT_EMPTY_OWNERS] = id;
    this.isKept[id] = 1;
  }

  /** Takes the entry out of its owner's list (its neighbours and the list's ends joined up). */
  private unlink(id: number, entry: number): void {
    const entries = this.entries;
    const prev = entries.ownerPrev[entry]!;
    const next = entries.ownerNext[entry]!;
    if (prev === NO_ID) this.firstEntry[id] = next;
    else entries.ownerNext[prev] = next;
    if (next === NO_ID) this.lastEntry[id] = prev;
    else entries.ownerPrev[next] = prev;
  }

  /**
   * Takes the entry out of its owner's list but leaves it the owner's (see DETACHED): a release
   * done in slices owns it from now on, and a later release of that owner no longer finds it.
   */
  detach(entry: number): void {
    const entries = this.entries;
    if (entries.ownerPrev[entry] === DETACHED) return;
    this.unlink(entries.owner[entry]!, entry);
    entries.ownerPrev[entry] = DETACHED;
    entries.ownerNext[entry] = DETACHED;
  }

  /**
   * Every entry of the owner, in the order they were added, detached at once (see detach): the
   * whole list is handed over in one pass, without joining neighbours one by one.
   */
  detachAll(owner: ByteString): Int32Array {
    const id = this.find(owner);
    if (id === NO_ID || this.firstEntry[id] === NO_ID) return new Int32Array(0);
    const entries = this.entries;
    const result = new Int32Array(this.entryCount[id]!);
    let n = 0;
    for (let entry = this.firstEntry[id]!; entry !== NO_ID;) {
      const next = entries.ownerNext[entry]!;
      result[n++] = entry;
      entries.ownerPrev[entry] = DETACHED;
      entries.ownerNext[entry] = DETACHED;
      entry = next;
    }
    this.firstEntry[id] = NO_ID;
    this.lastEntry[id] = NO_ID;
    return n === result.length ? result : result.subarray(0, n);
  }

  /** Takes the least recently emptied owner out of the ring, and forgets it if it is still empty. */
  private dropOldestKept(): void {
    const id = this.kept[this.keptHead]!;
    this.keptHead = (this.keptHead + 1) % KEPT_EMPTY_OWNERS;
    this.keptCount--;
    this.isKept[id] = 0;
    if (this.entryCount[id] !== 0) return;
    if (id === this.lastId) this.lastId = NO_ID;
    this.index.remove(this.hashes[id]!, id);
    this.nameStore.remove(this.names[id]!);
    this.ids.release(id);
  }

  /**
   * How many entries `owner` has (0 if it has no record). A record found is remembered as the last
   * one looked up, so the add() that follows a check finds it without hashing again.
   */
  entryCountOf(owner: ByteString): number {
    let id = owner === this.lastName ? this.lastId : NO_ID;
    if (id === NO_ID) {
      id = this.find(owner);
      if (id === NO_ID) return 0;
      this.lastName = owner;
      this.lastId = id;
    }
    return this.entryCount[id]!;
  }

  /** The owner's entries in the order they were added: a copy, safe to use while removing them. */
  entriesOf(owner: ByteString): number[] {
    const id = this.find(owner);
    if (id === NO_ID) return [];
    const result: number[] = [];
    for (let entry = this.firstEntry[id]!; entry !== NO_ID; entry = this.entries.ownerNext[entry]!) result.push(entry);
    return result;
  }

  private grow(capacity: number): void {
    this.capacity = capacity;
    this.names = resized(this.names, capacity);
    this.hashes = resized(this.hashes, capacity);
    this.firstEntry = resized(this.firstEntry, capacity);
    this.lastEntry = resized(this.lastEntry, capacity);
    this.entryCount = resized(this.entryCount, capacity);
    this.isKept = resized(this.isKept, capacity);
  }
}
