/**
 * Where the cluster code waits: the real event loop in production, a virtual one in the seeded
 * simulation (time then moves only when the simulation says so). Together with the injected
 * Clock, this is all the cluster knows of time.
 */
export interface Timers {
  /** Runs `task` after `ms` milliseconds; the returned function cancels it. */
  after(ms: number, task: () => void): () => void;
}

/** Resolves after `ms` milliseconds of the given timers. */
export function pause(timers: Timers, ms: number): Promise<void> {
  return new Promise((resolve) => timers.after(ms, resolve));
}

export const realTimers: Timers = {
  after(ms, task) {
    const timer = setTimeout(task, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** Runs `task` every `ms` milliseconds (each run scheduled after the last) until the returned function is called. */
export function every(timers: Timers, ms: number, task: () => void): () => void {
  let stopped = false;
  let cancel = (): void => {};
  const run = (): void => {
    if (stopped) return;
    task();
    if (!stopped) cancel = timers.after(ms, run);
  };
  cancel = timers.after(ms, run);
  return () => {
    stopped = true;
    cancel();
  };
}
