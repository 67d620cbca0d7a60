/**
 * A seeded PRNG (xorshift32 with a splitmix-style seed scramble): the same --seed gives the same
 * priorities and shuffles, so contention rounds can be replayed.
 */
export function seededRandom(seed: number): () => number {
  let state = Math.imul((seed | 0) ^ 0x9e3779b9, 0x85ebca6b) >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 4294967296;
  };
}
