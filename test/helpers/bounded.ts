/**
 * Rejects when `promise` has not settled within `ms`; every wait in the e2e suite goes through
 * here so that nothing hangs. `what` (or a function building it, for costly messages) says what
 * was awaited.
 */
export function bounded<T>(promise: Promise<T>, ms: number, what: string | (() => string)): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => {
        const description = typeof what === 'string' ? what : what();
        reject(new Error(`timed out after ${ms} ms waiting for ${description}`));
      },
      Math.max(0, ms),
    );
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}
