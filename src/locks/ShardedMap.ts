import type { ByteString } from '../bytes.js';

/** Shards per map; a power of two. */
const SHARD_BITS = 4;
const SHARDS = 1 << SHARD_BITS;
/**
 * Which shard a key lives in: a cheap hash of its length and of the last two and the middle two
 * characters, where generated names (row ids, counters, client numbers) differ. A few ns; keys
 * alike in those places share a shard, which costs nothing but the benefit of sharding.
 */
export function shardOf(key: ByteString): number {
  const length = key.length;
  if (length === 0) return 0;
  const middle = length >> 1;
  let hash = Math.imul(length ^ key.charCodeAt(length - 1), 0x9e3779b1);
  hash = Math.imul(hash ^ key.charCodeAt(middle), 0x85ebca6b);
  if (length > 2) {
    hash = Math.imul(hash ^ key.charCodeAt(length - 2), 0x9e3779b1);
    hash = Math.imul(hash ^ key.charCodeAt(middle - 1), 0x85ebca6b);
  }
  return hash >>> (32 - SHARD_BITS);
}

/**
 * A Map from byte strings, split over SHARDS Maps. V8 rehashes a Map in one piece when it grows
 * past or shrinks below a threshold; with a million keys that single step took ~40 ms in the
 * server (a mass expiry shrinking the key and owner maps at once stalled serving for over 100 ms).
 * Split sixteen ways, each rehash moves a sixteenth as much. Iteration goes shard by shard, so
 * insertion order is lost: only for maps nobody lists in order (the owner index).
 */
export class ShardedMap<V> {
  private readonly shards: Array<Map<ByteString, V>> = Array.from({ length: SHARDS }, () => new Map());

  get(key: ByteString): V | undefined {
    return this.shards[shardOf(key)]!.get(key);
  }

  set(key: ByteString, value: V): void {
    this.shards[shardOf(key)]!.set(key, value);
  }

  delete(key: ByteString): void {
    this.shards[shardOf(key)]!.delete(key);
  }

  get size(): number {
    let size = 0;
    for (const shard of this.shards) size += shard.size;
    return size;
  }

  /** Every value, shard by shard (each shard in insertion order). */
  *values(): IterableIterator<V> {
    for (const shard of this.shards) yield* shard.values();
  }
}
