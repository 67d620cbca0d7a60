import { performance } from 'node:perf_hooks';
import { LockLostError, LockRefusedError, LockWaitTimeoutError } from './errors.js';
import { DEFAULT_TTL_SECONDS, DEFAULT_TTW_SECONDS, type LockClient, type LockRequestOptions } from './LockClient.js';
import type { LockName } from './lockName.js';
import { pause } from './pause.js';

export const DEFAULT_POLL_INITIAL_MS = 50;
export const DEFAULT_POLL_MAX_MS = 1_000;
/** Polls and renewals run at least this many times per TTW / TTL, so one late beat never loses the entry. */
const BEATS_PER_PERIOD = 3;
const MS_PER_SECOND = 1000;

export interface HoldLockOptions extends LockRequestOptions {
  /** Aborting gives up waiting (the waiting entry is released) or, once held, releases the lock. */
  readonly signal?: AbortSignal;
  /** Give up waiting after this long (LockWaitTimeoutError); default: wait until the signal aborts. */
  readonly waitTimeoutMs?: number;
  /** First pause between polls; doubles up to pollMaxMs (and never beyond a third of TTW/TTL). */
  readonly pollInitialMs?: number;
  readonly pollMaxMs?: number;
  /** How often a held lock is renewed; default a third of the TTL (no renewal when TTL is 0). */
  readonly renewIntervalMs?: number;
  /** Called once if the lock is lost while held (renewal found no entry, or the connection failed). */
  readonly onLost?: (error: LockLostError) => void;
  /** Source of jitter for the poll pauses, in [0, 1); default Math.random. */
  readonly random?: () => number;
}

/** The longest pause that still beats `seconds` (0 = no expiry, no bound) several times. */
function beatWithin(seconds: number): number {
  return seconds > 0 ? (seconds * MS_PER_SECOND) / BEATS_PER_PERIOD : Infinity;
}

/**
 * A lock this process owns. It is renewed in the background until release(); `signal` aborts,
 * with a LockLostError as its reason, if the lock is lost meanwhile — pass it to the work the
 * lock protects so that work can stop.
 */
export class HeldLock {
  private readonly lostController = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private released: Promise<number> | undefined;
  private readonly releaseOnAbort = (): void => void this.release().catch(() => {});

  /** @internal created by holdLock() */
  constructor(
    private readonly client: LockClient,
    readonly key: LockName,
    readonly index: LockName,
    readonly owner: LockName,
    private readonly renewIntervalMs: number,
    private readonly onLost: ((error: LockLostError) => void) | undefined,
    private readonly releaseSignal: AbortSignal | undefined,
  ) {
    this.scheduleRenewal();
    releaseSignal?.addEventListener('abort', this.releaseOnAbort, { once: true });
  }

  /** Aborts (reason: LockLostError) if the lock is lost while held. */
  get signal(): AbortSignal {
    return this.lostController.signal;
  }

  /** Why the lock was lost, or undefined while it is held (or after a normal release). */
  get lostError(): LockLostError | undefined {
    return this.signal.aborted ? (this.signal.reason as LockLostError) : undefined;
  }

  /** Stops renewing and releases the lock; resolves to the entries removed (0 if it was already gone). */
  release(): Promise<number> {
    if (this.released === undefined) {
      clearTimeout(this.timer);
      this.releaseSignal?.removeEventListener('abort', this.releaseOnAbort);
      this.released = this.client.isOpen ? this.client.release(this.key, this.index, this.owner) : Promise.resolve(0);
    }
    return this.released;
  }

  private scheduleRenewal(): void {
    if (this.renewIntervalMs === Infinity || this.renewIntervalMs <= 0) return;
    this.timer = setTimeout(() => void this.renew(), this.renewIntervalMs);
  }

  private async renew(): Promise<void> {
    let renewed: boolean;
    try {
      renewed = await this.client.renew(this.key, this.index, this.owner);
    } catch (error) {
      this.lose(new LockLostError(`renewal failed: ${(error as Error).message}`, { cause: error }));
      return;
    }
    if (this.released !== undefined) return;
    if (!renewed) this.lose(new LockLostError('renewal found no entry: the lock expired or was released by someone else'));
    else this.scheduleRenewal();
  }

  private lose(error: LockLostError): void {
    if (this.released !== undefined || this.signal.aborted) return;
    clearTimeout(this.timer);
    this.lostController.abort(error);
    this.onLost?.(error);
  }
}

/**
 * Waits until `owner` owns (key, index), then keeps it renewed. Polls with request (0x02) —
 * which also keeps the waiting entry alive — pausing with bounded, jittered exponential backoff.
 * Rejects with LockRefusedError (server draining or full), LockWaitTimeoutError, the signal's
 * reason, or a connection error; in each case no waiting entry is left behind where the
 * connection still allows removing it.
 *
 *   const lock = await holdLock(client, 'users', '42', 'worker-7', { ttl: 30 });
 *   try { await work(lock.signal); } finally { await lock.release(); }
 */
export async function holdLock(
  client: LockClient,
  key: LockName,
  index: LockName,
  owner: LockName,
  options: HoldLockOptions = {},
): Promise<HeldLock> {
  const { signal } = options;
  const ttl = options.ttl ?? DEFAULT_TTL_SECONDS;
  const ttw = options.ttw ?? DEFAULT_TTW_SECONDS;
  const random = options.random ?? Math.random;
  const pollMax = Math.min(options.pollMaxMs ?? DEFAULT_POLL_MAX_MS, beatWithin(ttw), beatWithin(ttl));
  let pollDelay = Math.min(options.pollInitialMs ?? DEFAULT_POLL_INITIAL_MS, pollMax);
  const deadline = options.waitTimeoutMs === undefined ? Infinity : performance.now() + options.waitTimeoutMs;
  signal?.throwIfAborted();
  try {
    for (;;) {
      const position = await client.request(key, index, owner, { ttl, ttw, priority: options.priority });
      if (position === 1) break;
      if (position === 0) throw new LockRefusedError();
      signal?.throwIfAborted();
      const remaining = deadline - performance.now();
      if (remaining <= 0) throw new LockWaitTimeoutError(options.waitTimeoutMs!);
      // Jitter in [pollDelay/2, pollDelay) spreads out waiters that started together.
      await pause(Math.min(pollDelay * (0.5 + random() / 2), remaining), signal);
      pollDelay = Math.min(pollDelay * 2, pollMax);
    }
  } catch (error) {
    if (!(error instanceof LockRefusedError)) await client.release(key, index, owner).catch(() => {});
    throw error;
  }
  if (signal?.aborted) {
    await client.release(key, index, owner).catch(() => {});
    throw signal.reason;
  }
  const renewIntervalMs = options.renewIntervalMs ?? beatWithin(ttl);
  return new HeldLock(client, key, index, owner, renewIntervalMs, options.onLost, signal);
}

/** Runs `work` while holding the lock, and releases it afterwards, whatever happens. */
export async function withLock<T>(
  client: LockClient,
  key: LockName,
  index: LockName,
  owner: LockName,
  options: HoldLockOptions,
  work: (lost: AbortSignal) => Promise<T>,
): Promise<T> {
  const lock = await holdLock(client, key, index, owner, options);
  try {
    return await work(lock.signal);
  } finally {
    await lock.release();
  }
}
