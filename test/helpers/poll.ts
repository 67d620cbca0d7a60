import { setTimeout as delay } from 'node:timers/promises';

/** Pause between checks while polling for something that has no event (lock expiry). */
export const POLL_INTERVAL_MS = 100;
/** Polls give up after this long; expiry is due within about a second, so this is generous. */
export const POLL_LIMIT_MS = 15_000;

/**
 * Calls `check` until it returns a value other than undefined, at most for `limitMs`. For
 * outcomes the server announces nowhere but on the wire (a lock expiring), where there is no
 * event to await; the loop is bounded and nothing is asserted about how long it took.
 */
export async function pollUntil<T>(what: string, check: () => Promise<T | undefined>, limitMs = POLL_LIMIT_MS): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`gave up after ${limitMs} ms waiting for ${what}`);
    await delay(POLL_INTERVAL_MS);
  }
}
