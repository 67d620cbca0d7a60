import type { ByteString } from '../bytes.js';

/** The seed a table uses when none is given: fine for tests; a server passes a random one. */
export const DEFAULT_HASH_SEED = 0x2545f491;

/**
 * A seeded 32-bit hash of a byte string, for the lock table's own hash indexes (see HashIndex).
 * Four bytes at a time, then murmur3's finaliser, so every input bit reaches the low bits that
 * pick a slot. The seed is random per server so that clients cannot choose keys that all land in
 * one probe run (they would have to learn it first); the layout never shows in any reply.
 */
export function hashByteString(value: ByteString, seed: number): number {
  const length = value.length;
  let hash = seed ^ length;
  let i = 0;
  for (const whole = length & ~3; i < whole; i += 4) {
    const word = value.charCodeAt(i) | (value.charCodeAt(i + 1) << 8) | (value.charCodeAt(i + 2) << 16) | (value.charCodeAt(i + 3) << 24);
    hash = Math.imul(hash ^ word, 0x5bd1e995);
    hash ^= hash >>> 15;
  }
  if (i < length) {
    let word = 0;
    for (let shift = 0; i < length; i++, shift += 8) word |= value.charCodeAt(i) << shift;
    hash = Math.imul(hash ^ word, 0x5bd1e995);
    hash ^= hash >>> 15;
  }
  return finalMix(hash);
}

/** Two 32-bit values into one hash (a record id and a name's hash, say). */
export function combineHashes(a: number, b: number): number {
  return finalMix(Math.imul(a ^ 0x9e3779b9, 0x5bd1e995) ^ b);
}

/** murmur3's fmix32: every bit of the input moves about half the bits of the output. */
function finalMix(hash: number): number {
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash | 0;
}
