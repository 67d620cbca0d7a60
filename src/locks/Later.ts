/** Told once, when a Later settles, with the key it was listened to with. */
export interface LaterListener<T, K> {
  resolved(key: K, value: T): void;
  rejected(key: K, error: unknown): void;
}

const PENDING = 0;
const RESOLVED = 1;
const REJECTED = 2;

/**
 * An answer that comes later, without a promise per command: whoever computes it settles it once,
 * and its one listener is told at once, in that same turn. A cluster node answers every command
 * with one; the server's connection listens to each with itself and the command's place in line,
 * so a command costs this one object where a promise cost the promise, its resolving functions,
 * two reaction closures and a microtask (see the seam in src/README.md).
 *
 * It is a thenable too, so code that awaits an answer (tests, tools, the daemon) works unchanged:
 * `then` listens once, through a promise it keeps.
 */
export class Later<T> implements PromiseLike<T> {
  private state = PENDING;
  private value: T | undefined;
  private error: unknown;
  private listener: LaterListener<T, unknown> | undefined;
  private key: unknown;
  private promise: Promise<T> | undefined;

  /** Settles with `value`; a Later already settled stays as it is. */
  resolve(value: T): void {
    if (this.state !== PENDING) return;
    this.state = RESOLVED;
    this.value = value;
    this.listener?.resolved(this.key, value);
  }

  /** Settles with `error`; a Later already settled stays as it is. Nobody listening is not an error. */
  reject(error: unknown): void {
    if (this.state !== PENDING) return;
    this.state = REJECTED;
    this.error = error;
    this.listener?.rejected(this.key, error);
  }

  /** Whether it has settled (resolved or rejected). */
  get settled(): boolean {
    return this.state !== PENDING;
  }

  /** Tells `listener` of the outcome, with `key`: when it settles, or now if it has. Only one listener. */
  listen<K>(listener: LaterListener<T, K>, key: K): void {
    if (this.listener !== undefined) throw new Error('a Later has one listener');
    this.listener = listener;
    this.key = key;
    if (this.state === RESOLVED) listener.resolved(key, this.value as T);
    else if (this.state === REJECTED) listener.rejected(key, this.error);
  }

  then<A = T, B = never>(onResolved?: ((value: T) => A | PromiseLike<A>) | null, onRejected?: ((error: unknown) => B | PromiseLike<B>) | null): Promise<A | B> {
    this.promise ??= new Promise<T>((resolve, reject) =>
      this.listen({ resolved: (_, value: T) => resolve(value), rejected: (_, error) => reject(error) }, undefined),
    );
    return this.promise.then(onResolved, onRejected);
  }
}

/**
 * A Later a client waits on (acquire and wait, the loss notice): settled once, like any Later, or
 * ended by whoever asked when it no longer waits. `cancel`: its connection is gone, nothing
 * answers it any more. `abandon`: its client will not wait (it closed its sending side, or the
 * server is going down), but an answer that comes without waiting (a grant at once, a refusal, "not
 * the owner") is still given; once it waits, the wait ends, rejected. Either runs `onCancel` once,
 * saying whether the waiting entry goes too.
 */
export class Waiting<T> extends Later<T> {
  private cancelled = false;
  private onCancel: ((removeEntry: boolean) => void) | undefined;
  /** Whoever answers it has begun to wait for the grant or loss (see began). */
  private waitingNow = false;
  /** An abandon that came before the wait began: applied when it begins. */
  private abandonedBefore: { readonly keepEntry: boolean; readonly error: Error } | undefined;

  /** What to do if it ends before it settles (one hook; set by whoever answers it): `removeEntry` says whether its waiting entry goes. */
  whenCancelled(hook: (removeEntry: boolean) => void): void {
    this.onCancel = hook;
  }

  /** Whoever answers it now waits for its grant or loss: an abandon that came first ends the wait now. */
  began(): void {
    this.waitingNow = true;
    const abandoned = this.abandonedBefore;
    if (abandoned !== undefined) this.abandon(abandoned.keepEntry, abandoned.error);
  }

  /** The client is gone: nothing answers it any more; the hook runs (the entry goes) if it had not settled. */
  cancel(): void {
    if (this.settled || this.cancelled) return;
    this.cancelled = true;
    const hook = this.onCancel;
    this.onCancel = undefined;
    hook?.(true);
  }

  /**
   * The client will not wait: once it waits (now, or when it begins), the wait ends, rejected with
   * `error`, its waiting entry kept only if `keepEntry`. An answer that comes without waiting is given.
   */
  abandon(keepEntry: boolean, error: Error): void {
    if (this.settled || this.cancelled) return;
    if (!this.waitingNow) {
      this.abandonedBefore ??= { keepEntry, error };
      return;
    }
    const hook = this.onCancel;
    this.onCancel = undefined;
    hook?.(!keepEntry);
    super.reject(error);
    this.cancelled = true;
  }

  override resolve(value: T): void {
    if (!this.cancelled) super.resolve(value);
  }

  override reject(error: unknown): void {
    if (!this.cancelled) super.reject(error);
  }
}
