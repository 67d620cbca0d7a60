import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

let collect: (() => void) | undefined | null = null;

/**
 * Runs a full garbage collection, so that the heap a burst of short-lived locks grew goes back to
 * the system: V8 keeps a grown heap (and a young generation grown to its maximum) committed until
 * its next major collection, which a server that has fallen quiet never reaches. Without the flag
 * --expose-gc it is switched on here and the collector taken from a fresh context (node's own
 * flag, set after start-up, applies to contexts made after it). Returns false where that fails.
 */
export function collectGarbage(): boolean {
  if (collect === null) {
    collect = (globalThis as { gc?: () => void }).gc;
    if (collect === undefined) {
      try {
        setFlagsFromString('--expose-gc');
        collect = runInNewContext('gc') as (() => void) | undefined;
      } catch {
        collect = undefined;
      }
    }
  }
  collect?.();
  return collect !== undefined;
}
