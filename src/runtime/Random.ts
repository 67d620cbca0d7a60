/** A source of uniform numbers in [0, 1); injected so a simulation replays from one seed. */
export type Random = () => number;

/** A tiny seeded PRNG (mulberry32): one seed replays the same sequence, for simulations and fuzzing. */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 15), z | 1);
    z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
    return ((z ^ (z >>> 14)) >>> 0) / 4294967296;
  };
}
