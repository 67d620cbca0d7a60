import type { Timers } from '../../src/runtime/Timers.js';

/** Timers that never run anything: for tests that drive sweeps and turns by hand, or not at all. */
export const idleTimers: Timers = { after: () => () => {}, every: () => () => {}, soon: () => {} };
