/**
 * Scores the order in which contenders became owner of one lock against the order the lock model
 * promises: higher priority first, then earlier arrival. All waiters are queued before the first
 * handover, so any difference is a fairness bug, not a race in the benchmark.
 */
export interface Waiter {
  readonly id: number;
  readonly priority: number;
  /** Order in which the server queued the waiter (0 = first). */
  readonly arrival: number;
}

export interface FairnessScore {
  /** Waiters compared (those that became owner in the round). */
  readonly compared: number;
  /** Owners whose turn was exactly the promised one. */
  readonly inPlace: number;
  /** Share of waiter pairs served in the promised relative order (1 = perfect, 0 = reversed). */
  readonly concordance: number;
  /** Pairs where a lower-priority waiter owned before a higher-priority one. */
  readonly priorityInversions: number;
  /** Pairs of equal priority served against arrival order. */
  readonly arrivalInversions: number;
}

/** The promised order of ownership: priority descending, then arrival ascending. */
export function promisedOrder(waiters: readonly Waiter[]): Waiter[] {
  return [...waiters].sort((a, b) => b.priority - a.priority || a.arrival - b.arrival);
}

/**
 * Compares the observed ownership order (waiter ids, first owner first) with the promise. Waiters
 * that never became owner (a round cut short) are left out of both orders.
 */
export function scoreFairness(waiters: readonly Waiter[], observedIds: readonly number[]): FairnessScore {
  const byId = new Map(waiters.map((w) => [w.id, w]));
  const observed = observedIds.map((id) => {
    const waiter = byId.get(id);
    if (waiter === undefined) throw new RangeError(`owner ${id} was never queued`);
    return waiter;
  });
  const served = new Set(observedIds);
  const promised = promisedOrder(waiters.filter((w) => served.has(w.id)));
  let inPlace = 0;
  for (let i = 0; i < observed.length; i++) if (observed[i] === promised[i]) inPlace++;

  let concordant = 0;
  let pairs = 0;
  let priorityInversions = 0;
  let arrivalInversions = 0;
  for (let i = 0; i < observed.length; i++) {
    for (let j = i + 1; j < observed.length; j++) {
      const earlier = observed[i]!;
      const later = observed[j]!;
      pairs++;
      if (earlier.priority > later.priority) concordant++;
      else if (earlier.priority < later.priority) priorityInversions++;
      else if (earlier.arrival < later.arrival) concordant++;
      else arrivalInversions++;
    }
  }
  return {
    compared: observed.length,
    inPlace,
    concordance: pairs === 0 ? 1 : concordant / pairs,
    priorityInversions,
    arrivalInversions,
  };
}
