/**
 * Waits for `work` with the process held alive. Timers here are unref'd (a daemon's housekeeping
 * must not keep it up), so while a node joins its cluster or imports a lock file, with nothing
 * listening yet, a moment with no call in flight would leave the event loop empty and the process
 * would exit 0 in silence, the work unfinished.
 */
export async function keepingAlive<T>(work: Promise<T>): Promise<T> {
  const handle = setInterval(() => {}, 60_000);
  try {
    return await work;
  } finally {
    clearInterval(handle);
  }
}
