/**
 * Where the code waits: the real event loop in production, a virtual one in tests and in the
 * seeded simulation (time then moves only when the test says so). Together with the injected
 * Clock, this is all the lock table, the server's housekeeping and the cluster know of time.
 */
export interface Timers {
  /** Runs `task` once after `ms` milliseconds; the returned function cancels it. */
  after(ms: number, task: () => void): () => void;
  /** Runs `task` every `ms` milliseconds until the returned function is called. */
  every(ms: number, task: () => void): () => void;
  /** Runs `task` on a later turn of the event loop, after the I/O already waiting. */
  soon(task: () => void): void;
}

/** Resolves after `ms` milliseconds of the given timers. */
export function pause(timers: Timers, ms: number): Promise<void> {
  return new Promise((resolve) => timers.after(ms, resolve));
}

/**
 * `every` for timers that only know `after`: each run is scheduled once the last has run, so a
 * virtual clock never queues a backlog of runs.
 */
export function everyByAfter(after: Timers['after'], ms: number, task: () => void): () => void {
  let stopped = false;
  let cancel = (): void => {};
  const run = (): void => {
    if (stopped) return;
    task();
    if (!stopped) cancel = after(ms, run);
  };
  cancel = after(ms, run);
  return () => {
    stopped = true;
    cancel();
  };
}

/** The event loop's timers. None of them keeps the process alive: unref'd, as a daemon's housekeeping should be. */
export const realTimers: Timers = {
  after(ms, task) {
    const timer = setTimeout(task, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
  every(ms, task) {
    const timer = setInterval(task, ms);
    timer.unref();
    return () => clearInterval(timer);
  },
  soon(task) {
    setImmediate(task);
  },
};
