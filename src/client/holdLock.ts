import { performance } from 'node:perf_hooks';
import { LossReason } from '../protocol/constants.js';
import { ConnectionClosedError, FencingUnsupportedError, LockLostError, LockRefusedError, LockWaitTimeoutError } from './errors.js';
import { DEFAULT_TTL_SECONDS, DEFAULT_TTW_SECONDS, type LockClient, type LockRequestOptions } from './LockClient.js';
import type { LockName } from './lockName.js';
import { pause } from './pause.js';
import { waitForGrant } from './waitForGrant.js';

export const DEFAULT_POLL_INITIAL_MS = 50;
export const DEFAULT_POLL_MAX_MS = 1_000;
/** Polls and renewals run at least this many times per TTW / TTL, so one late beat never loses the entry. */
const BEATS_PER_PERIOD = 3;
const MS_PER_SECOND = 1000;

export interface HoldLockOptions extends LockRequestOptions {
  /**
   * Seconds a waiting entry stays queued without renewal (default 30). A wait (0x0B) asks with it
   * and is sent again every third of it (with that as its bound), which renews the entry in place;
   * polling renews it by polling. 0: no TTW — the entry of a wait then lasts as long as its
   * connection, and outlives a client that is frozen or whose node died.
   */
  readonly ttw?: number;
  /** Aborting gives up waiting (the waiting entry is released) or, once held, releases the lock. */
  readonly signal?: AbortSignal;
  /** Give up waiting after this long (LockWaitTimeoutError); default: wait until the signal aborts. */
  readonly waitTimeoutMs?: number;
  /** Polling only: first pause between polls; doubles up to pollMaxMs (and never beyond a third of TTW/TTL). */
  readonly pollInitialMs?: number;
  readonly pollMaxMs?: number;
  /** How often a held lock is renewed; default a third of the TTL (no renewal when TTL is 0). */
  readonly renewIntervalMs?: number;
  /**
   * Called once if the lock is lost while held: the server's loss notice said it ended, renewal
   * found no entry, or no renewal was confirmed within the TTL (with a single host: the
   * connection failed).
   */
  readonly onLost?: (error: LockLostError) => void;
  /** Called when the lock, or the wait for it, moved to another node's connection (several `hosts`): from and to, host:port. */
  readonly onFailover?: (from: string, to: string) => void;
  /** Polling only: source of jitter for the poll pauses, in [0, 1); default Math.random. */
  readonly random?: () => number;
  /**
   * Use the extensions (default true): wait with acquire-and-wait (0x0B) and keep a loss notice
   * (0x0C) while held, or where the server has neither, poll with request with fence (0x0A); the
   * lock comes with its fencing token. false polls with 0x02 and leaves `token` undefined: for a
   * LockServer 0.9b, which closes the connection on 0x0A (holdLock would notice and carry on
   * without a token through a new connection, but the connection passed in would be closed).
   */
  readonly fencing?: boolean;
  /**
   * Called once, synchronously, the moment the lock is known to be the caller's, before holdLock
   * resolves (and before its own bookkeeping): for work that must start without a turn of the
   * event loop in between (`lockctl hold` lets its already started command go here). Gets the
   * fencing token (undefined without one) and the lock's deadline (as `onRenewed` gives it). Not
   * called when holdLock rejects; must not throw.
   */
  readonly onOwned?: (token: number | undefined, ownedUntil: number) => void;
  /**
   * Called each time a confirmed renewal moves the lock's deadline on: `ownedUntil` is the
   * performance.now() time until which the lock is the caller's by the client's rule (the last
   * confirmed renewal's send plus the TTL; Infinity with TTL 0). For work that must stop by then
   * even when this process cannot (`lockctl hold` tells its watchdog). Must not throw.
   */
  readonly onRenewed?: (ownedUntil: number) => void;
}

/** The longest pause that still beats `seconds` (0 = no expiry, no bound) several times. */
function beatWithin(seconds: number): number {
  return seconds > 0 ? (seconds * MS_PER_SECOND) / BEATS_PER_PERIOD : Infinity;
}

/** The deadline of a lock confirmed at `confirmedAt` (performance.now()): Infinity without a TTL. */
function ownedUntil(confirmedAt: number, ttlMs: number): number {
  return ttlMs > 0 ? confirmedAt + ttlMs : Infinity;
}

/** Pause between two rounds of the host list while every node fails, during a failover. */
const FAILOVER_RETRY_MS = 250;

/** @internal what holdLock() hands to a HeldLock. */
interface HeldLockInit {
  readonly client: LockClient;
  /** A connection holdLock opened itself (a failover while waiting), closed with the lock. */
  readonly owned: LockClient | undefined;
  readonly key: LockName;
  readonly index: LockName;
  readonly owner: LockName;
  /** The grant's fencing token; undefined when the lock was taken without one. */
  readonly token: number | undefined;
  readonly ttlMs: number;
  /** performance.now() when the request that made us owner was sent. */
  readonly confirmedAt: number;
  readonly renewIntervalMs: number;
  readonly onLost: ((error: LockLostError) => void) | undefined;
  readonly onRenewed: ((ownedUntil: number) => void) | undefined;
  readonly onFailover: ((from: string, to: string) => void) | undefined;
  readonly releaseSignal: AbortSignal | undefined;
  /** Whether the server has the loss notice (0x0C), to keep one outstanding while held. */
  readonly lossNotices: boolean;
  /** A connection of the lock's own with the loss notice (`notice`) outstanding on it; without it one is opened. */
  readonly noticeConnection: LockClient | undefined;
  readonly notice: Promise<LossReason> | undefined;
  /** The renewal sent at a waited grant, not awaited before the lock was handed over (see Granted.firstRenewal). */
  readonly firstRenewal?: { readonly renewed: Promise<boolean>; readonly sentAt: number };
}

/** New connections for the loss notice, at most, between two confirmed renewals (its failures never lose the lock). */
const NOTICE_CONNECTIONS_PER_RENEWAL = 2;

/** What the loss notice (0x0C) says, as the reason a held lock was lost. */
function lossMessage(reason: number, ttlMs: number): string {
  switch (reason) {
    case LossReason.Expired:
      return `the server expired the lock: its TTL (${ttlMs / MS_PER_SECOND} s) ran out before a renewal reached it`;
    case LossReason.Released:
      return 'the lock was released (0x05) by someone else';
    case LossReason.ReleasedKey:
      return 'the lock was released with index * (0x05 of every index under its key) by someone else';
    case LossReason.ReleasedAll:
      return "the lock was released by someone else's release-all (0x06) of its owner";
    case LossReason.NotOwner:
      return 'the server says the owner does not own the lock (it ended in a way the server could not tell)';
    default:
      return `the server's loss notice says the lock ended (reason ${reason}, unknown to this client)`;
  }
}

/**
 * A lock this process owns. It is renewed in the background until release(); `signal` aborts,
 * with a LockLostError as its reason, if the lock is lost meanwhile — pass it to the work the
 * lock protects so that work can stop.
 *
 * The lock counts as lost once a TTL has passed since the send time of the last renewal the
 * server confirmed, whatever the reason no later one was confirmed. With a client connected to
 * several `hosts` (nodes of one cluster), a connection that drops or times out is replaced by
 * one to the next node, where the entry is renewed (0x04), its place checked (0x03) and its
 * fencing token (0x09): still the owner there under the same token, it carries on; no entry, or
 * a grant with another token (the lock expired and was granted again meanwhile), it is lost.
 */
export class HeldLock {
  readonly key: LockName;
  readonly index: LockName;
  readonly owner: LockName;
  /**
   * The fencing token of this grant: pass it with every write the lock protects, to a resource
   * that refuses tokens lower than the highest it has seen. Renewals keep it. Undefined when the
   * lock was taken without one (`fencing: false`, or a server without tokens).
   */
  readonly token: number | undefined;
  private readonly lostController = new AbortController();
  private current: LockClient;
  private owned: LockClient | undefined;
  private readonly ttlMs: number;
  private confirmedAt: number;
  private readonly renewIntervalMs: number;
  private readonly onLost: ((error: LockLostError) => void) | undefined;
  private readonly onRenewed: ((ownedUntil: number) => void) | undefined;
  private readonly onFailover: ((from: string, to: string) => void) | undefined;
  private readonly releaseSignal: AbortSignal | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  private failingOver = false;
  private released: Promise<number> | undefined;
  private readonly releaseOnAbort = (): void => void this.release().catch(() => {});
  private readonly lossNotices: boolean;
  /** The connection whose loss notice (0x0C) is outstanding, or is being opened (`openingNotice`). */
  private notices: LockClient | undefined;
  private openingNotice = false;
  /** Notice connections opened since the last confirmed renewal. */
  private noticeConnections = 0;

  /** @internal created by holdLock() */
  constructor(init: HeldLockInit) {
    ({ key: this.key, index: this.index, owner: this.owner, token: this.token } = init);
    this.current = init.client;
    this.owned = init.owned;
    this.ttlMs = init.ttlMs;
    this.confirmedAt = init.confirmedAt;
    this.renewIntervalMs = init.renewIntervalMs;
    this.onLost = init.onLost;
    this.onRenewed = init.onRenewed;
    this.onFailover = init.onFailover;
    this.releaseSignal = init.releaseSignal;
    this.lossNotices = init.lossNotices;
    this.armExpiry();
    this.watch(this.current);
    this.scheduleRenewal();
    this.releaseSignal?.addEventListener('abort', this.releaseOnAbort, { once: true });
    if (init.noticeConnection !== undefined) this.awaitLoss(init.noticeConnection, init.notice);
    else this.openNoticeConnection();
    init.firstRenewal?.renewed.then(
      (renewed) => {
        if (this.done) return;
        if (renewed) this.confirm(init.firstRenewal!.sentAt);
        else this.lose(new LockLostError('the renewal at the grant found no entry: released just then, before it reached the server'));
      },
      // A failed connection is for the renewals and the expiry timer to find out.
      () => {},
    );
  }

  /** Aborts (reason: LockLostError) if the lock is lost while held. */
  get signal(): AbortSignal {
    return this.lostController.signal;
  }

  /** Why the lock was lost, or undefined while it is held (or after a normal release). */
  get lostError(): LockLostError | undefined {
    return this.signal.aborted ? (this.signal.reason as LockLostError) : undefined;
  }

  /**
   * performance.now() until which the lock is ours by the client's rule: the send time of the
   * last confirmed renewal (or of the request that made us owner) plus the TTL; Infinity with TTL
   * 0. The signal aborts by then at the latest, whether renewals failed or are merely unanswered.
   */
  get ownedUntil(): number {
    return ownedUntil(this.confirmedAt, this.ttlMs);
  }

  /** The connection the lock is renewed through now (another node's after a failover). */
  get client(): LockClient {
    return this.current;
  }

  /**
   * Stops renewing and releases the lock; resolves to the entries removed (0 if it was already
   * gone). If the connection has dropped and the lock is not known lost, the release goes
   * through the next node that answers (with several hosts).
   */
  release(): Promise<number> {
    if (this.released === undefined) {
      clearTimeout(this.renewTimer);
      clearTimeout(this.expiryTimer);
      // Closed first, so that the notice of our own release never comes.
      this.stopNotices();
      this.releaseSignal?.removeEventListener('abort', this.releaseOnAbort);
      this.released = this.releaseThroughAnyNode().finally(() => void this.owned?.close().catch(() => {}));
    }
    return this.released;
  }

  private async releaseThroughAnyNode(): Promise<number> {
    const client = this.current;
    if (client.isOpen) return client.release(this.key, this.index, this.owner);
    if (client.hosts.length <= 1 || this.signal.aborted) return 0;
    const other = await client.reconnect();
    try {
      return await other.release(this.key, this.index, this.owner);
    } finally {
      await other.close().catch(() => {});
    }
  }

  private get done(): boolean {
    return this.released !== undefined || this.signal.aborted;
  }

  private scheduleRenewal(): void {
    if (this.renewIntervalMs === Infinity || this.renewIntervalMs <= 0) return;
    this.renewTimer = setTimeout(() => void this.renew(), this.renewIntervalMs);
  }

  /** The lock is lost a TTL after the send time of the last confirmed renewal. */
  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    if (this.ttlMs <= 0) return;
    const left = this.confirmedAt + this.ttlMs - performance.now();
    this.expiryTimer = setTimeout(
      () => {
        this.lose(new LockLostError(`no node confirmed a renewal within the lock's TTL (${this.ttlMs / MS_PER_SECOND} s)`));
      },
      Math.max(0, left),
    );
    this.expiryTimer.unref();
  }

  private confirm(sentAt: number): void {
    const moved = sentAt > this.confirmedAt;
    this.confirmedAt = Math.max(this.confirmedAt, sentAt);
    this.armExpiry();
    if (moved && this.ttlMs > 0) this.onRenewed?.(this.ownedUntil);
    this.noticeConnections = 0;
    this.openNoticeConnection();
  }

  /**
   * Keeps a loss notice (0x0C) outstanding on `connection`, a connection of the lock's own (sent
   * already, `outstanding`, or now): the server answers it when the lock ends, and the lock is
   * lost at that moment, not at the next renewal. Its answer is the server's word; its
   * connection failing says nothing about the lock.
   */
  private awaitLoss(connection: LockClient, outstanding?: Promise<LossReason>): void {
    if (this.done) {
      connection.destroy();
      return;
    }
    this.notices = connection;
    (outstanding ?? connection.awaitLoss(this.key, this.index, this.owner)).then(
      (reason) => {
        this.noticeEnded(connection);
        if (!this.done) this.lose(new LockLostError(lossMessage(reason, this.ttlMs), { lossReason: reason }));
      },
      () => {
        this.noticeEnded(connection);
        this.openNoticeConnection();
      },
    );
  }

  private noticeEnded(connection: LockClient): void {
    if (this.notices === connection) this.notices = undefined;
    connection.destroy();
  }

  /**
   * A new connection for the loss notice, when there is none, to the node renewals go to; at most
   * NOTICE_CONNECTIONS_PER_RENEWAL between two confirmed renewals, and not during a failover
   * (which calls this once it is through). When that node does not give one (it failed: the
   * renewals' failover will tell), it waits for the next confirmed renewal: the renewals and the
   * TTL still tell a loss, later. Only that node is asked, so that what the notice says of the
   * lock is said by the node that confirms it.
   */
  private openNoticeConnection(): void {
    if (!this.lossNotices || this.done || this.failingOver || this.notices !== undefined || this.openingNotice) return;
    if (this.noticeConnections >= NOTICE_CONNECTIONS_PER_RENEWAL) return;
    this.noticeConnections++;
    this.openingNotice = true;
    this.current.another().then(
      (connection) => {
        this.openingNotice = false;
        if (connection.address === this.current.address) this.awaitLoss(connection);
        else connection.destroy();
      },
      () => (this.openingNotice = false),
    );
  }

  private stopNotices(): void {
    const connection = this.notices;
    this.notices = undefined;
    connection?.destroy();
  }

  /** A dropped connection is noticed at once, not at the next renewal. */
  private watch(client: LockClient): void {
    void client.closed.then(() => {
      if (this.current === client && !this.done) {
        this.connectionFailed(client, new ConnectionClosedError(`connection to ${client.address} closed`));
      }
    });
  }

  private async renew(): Promise<void> {
    const client = this.current;
    const sentAt = performance.now();
    let renewed: boolean;
    try {
      renewed = await client.renew(this.key, this.index, this.owner);
    } catch (error) {
      if (this.current === client && !this.done) this.connectionFailed(client, error as Error);
      return;
    }
    if (this.done || this.current !== client) return;
    if (!renewed) {
      this.lose(new LockLostError('renewal found no entry: the lock expired or was released by someone else'));
      return;
    }
    this.confirm(sentAt);
    this.scheduleRenewal();
  }

  private connectionFailed(client: LockClient, error: Error): void {
    if (client.hosts.length <= 1) {
      this.lose(new LockLostError(`renewal failed: ${error.message}`, { cause: error }));
    } else if (!this.failingOver) {
      this.failingOver = true;
      clearTimeout(this.renewTimer);
      client.destroy();
      void this.failover(client).finally(() => (this.failingOver = false));
    }
  }

  /**
   * Renews through the other nodes, round and round the list, until one confirms the entry is
   * still ours, or says it is gone, or the TTL runs out (the expiry timer declares it lost).
   */
  private async failover(from: LockClient): Promise<void> {
    let last = from;
    while (!this.done) {
      const left = this.confirmedAt + this.ttlMs - performance.now();
      let next: LockClient;
      try {
        next = await last.reconnect(this.ttlMs > 0 ? left : Infinity);
      } catch {
        await pause(this.ttlMs > 0 ? Math.min(FAILOVER_RETRY_MS, Math.max(0, left)) : FAILOVER_RETRY_MS, this.signal).catch(() => {});
        continue;
      }
      if (this.done) {
        next.destroy();
        return;
      }
      const sentAt = performance.now();
      let renewed: boolean;
      let position: number;
      let token: number | undefined;
      try {
        [renewed, position, token] = await Promise.all([
          next.renew(this.key, this.index, this.owner),
          next.location(this.key, this.index, this.owner),
          this.token === undefined ? undefined : next.fence(this.key, this.index, this.owner),
        ]);
      } catch {
        next.destroy();
        last = next;
        continue;
      }
      if (this.done) {
        next.destroy();
        return;
      }
      if (!renewed || position !== 1) {
        next.destroy();
        this.lose(
          new LockLostError(
            `after ${from.address} failed, ${next.address} has ${renewed ? `the entry at position ${position}, not as owner` : 'no entry'}: the lock expired or was released by someone else`,
          ),
        );
        return;
      }
      if (token !== this.token) {
        next.destroy();
        this.lose(
          new LockLostError(
            `after ${from.address} failed, ${next.address} has the lock under fencing token ${token}, not ${this.token}: it expired or was released, and was granted again meanwhile`,
          ),
        );
        return;
      }
      this.owned?.destroy();
      this.owned = next;
      this.current = next;
      this.failingOver = false;
      this.confirm(sentAt);
      this.watch(next);
      this.onFailover?.(from.address, next.address);
      this.scheduleRenewal();
      return;
    }
  }

  private lose(error: LockLostError): void {
    if (this.done) return;
    clearTimeout(this.renewTimer);
    clearTimeout(this.expiryTimer);
    this.stopNotices();
    this.lostController.abort(error);
    this.onLost?.(error);
  }
}

/**
 * Waits until `owner` owns (key, index), then keeps it renewed; `lock.token` is the grant's
 * fencing token.
 *
 * Where the server has acquire-and-wait (0x0B), it waits without polling, on a connection of its
 * own (another()), so the caller's stays free: a 0x0B with the TTW, sent again every third of it
 * (its bound; each renews the waiting entry in place), so that a waiter that can no longer renew
 * (frozen, its node dead) leaves the queue a TTW later and is never granted to nobody; and
 * waitTimeoutMs as the whole wait's bound. TTW 0 waits with one 0x0B for as long as the
 * connection (nothing sent while waiting, but an entry that a frozen client keeps). At the
 * grant it renews at once (0x04) and counts the TTL from that renewal's send (a grant after a
 * wait starts its TTL somewhere between the 0x0B's send and its reply). Once held, a loss notice
 * (0x0C) stays outstanding on a connection of the lock's own, so that `lock.signal` aborts the
 * moment the lock ends, with a LockLostError saying how; renewals go through the caller's
 * connection (through the waiting one when the wait moved to another node).
 *
 * Where it has not — the connection of its own closed on the 0x0B without an answer (LockServer
 * 0.9b, a lockserver before waiting), no second connection could be had (a server at its
 * --max-connections), or `fencing: false` — it polls through the caller's connection with
 * request with fence (0x0A) — each poll also keeps the waiting entry alive, for TTW — pausing with
 * bounded, jittered exponential backoff. A single server that closes the connection on the first
 * 0x0A without answering (LockServer 0.9b) is asked again through a new connection with request
 * (0x02), and the lock has no token; `fencing: false` asks with 0x02 from the start.
 *
 * Rejects with LockRefusedError (server draining or full), LockWaitTimeoutError, the signal's
 * reason, or a connection error; in each case no waiting entry is left behind where the
 * connection still allows removing it. With a client connected to several `hosts`, a
 * connection that fails while waiting is replaced by one to the next node that answers, where
 * the waiting goes on (the entry, and its place, are the cluster's: a 0x0B sent again renews it
 * in place).
 *
 *   const lock = await holdLock(client, 'users', '42', 'worker-7', { ttl: 30 });
 *   try { await work(lock.signal); } finally { await lock.release(); }
 */
export async function holdLock(client: LockClient, key: LockName, index: LockName, owner: LockName, options: HoldLockOptions = {}): Promise<HeldLock> {
  options.signal?.throwIfAborted();
  const ttl = options.ttl ?? DEFAULT_TTL_SECONDS;
  const deadline = options.waitTimeoutMs === undefined ? Infinity : performance.now() + options.waitTimeoutMs;
  const ttw = options.ttw ?? DEFAULT_TTW_SECONDS;
  const lockOptions = { ...options, key, index, owner, ttl, ttw, deadline };
  if (options.fencing ?? true) {
    const granted = await waitForGrant(client, lockOptions);
    if (granted !== undefined && options.signal?.aborted) {
      await granted.client.release(key, index, owner).catch(() => {});
      granted.owned?.destroy();
      granted.noticeConnection?.destroy();
      throw options.signal.reason;
    }
    if (granted !== undefined) {
      options.onOwned?.(granted.token, ownedUntil(granted.confirmedAt, ttl * MS_PER_SECOND));
      return new HeldLock(heldLockInit(options, { ...granted, key, index, owner, ttl, lossNotices: true }));
    }
  }
  return pollForLock(client, lockOptions);
}

/** What HeldLock needs, from the caller's options and what acquiring gave. */
function heldLockInit(
  options: HoldLockOptions,
  acquired: Omit<HeldLockInit, 'ttlMs' | 'renewIntervalMs' | 'onLost' | 'onRenewed' | 'onFailover' | 'releaseSignal'> & { readonly ttl: number },
): HeldLockInit {
  return {
    ...acquired,
    ttlMs: acquired.ttl * MS_PER_SECOND,
    renewIntervalMs: options.renewIntervalMs ?? beatWithin(acquired.ttl),
    onLost: options.onLost,
    onRenewed: options.onRenewed,
    onFailover: options.onFailover,
    releaseSignal: options.signal,
  };
}

/** holdLock's options with the lock's name, its TTL and the wait's deadline (performance.now(); Infinity: none) settled. */
export interface LockWanted extends HoldLockOptions {
  readonly key: LockName;
  readonly index: LockName;
  readonly owner: LockName;
  readonly ttl: number;
  readonly ttw: number;
  readonly deadline: number;
}

/** holdLock by polling: for servers without acquire-and-wait (0x0B), and with `fencing: false`. */
async function pollForLock(client: LockClient, options: LockWanted): Promise<HeldLock> {
  const { signal, key, index, owner, ttl, ttw, deadline } = options;
  const random = options.random ?? Math.random;
  const pollMax = Math.min(options.pollMaxMs ?? DEFAULT_POLL_MAX_MS, beatWithin(ttw), beatWithin(ttl));
  let pollDelay = Math.min(options.pollInitialMs ?? DEFAULT_POLL_INITIAL_MS, pollMax);
  signal?.throwIfAborted();
  let current = client;
  let owned: LockClient | undefined;
  let confirmedAt: number;
  let fencing = options.fencing ?? true;
  let fencingAnswered = false;
  let token: number | undefined;
  try {
    for (;;) {
      confirmedAt = performance.now();
      let position: number;
      try {
        if (fencing) {
          ({ position, token } = await current.requestFenced(key, index, owner, { ttl, ttw, priority: options.priority }));
          fencingAnswered = true;
        } else {
          position = await current.request(key, index, owner, { ttl, ttw, priority: options.priority });
        }
      } catch (error) {
        // Several hosts are nodes of one cluster, which all know 0x0A: there, a closed connection is a node's failure.
        if (error instanceof FencingUnsupportedError && !fencingAnswered && current.hosts.length <= 1) {
          fencing = false;
          owned = current = await current.reconnect();
          continue;
        }
        if (current.isOpen || current.hosts.length <= 1) throw error;
        const next = await current.reconnect();
        owned?.destroy();
        options.onFailover?.(current.address, next.address);
        owned = current = next;
        continue;
      }
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
    if (!(error instanceof LockRefusedError)) await current.release(key, index, owner).catch(() => {});
    owned?.destroy();
    throw error;
  }
  if (signal?.aborted) {
    await current.release(key, index, owner).catch(() => {});
    owned?.destroy();
    throw signal.reason;
  }
  options.onOwned?.(token, ownedUntil(confirmedAt, ttl * MS_PER_SECOND));
  return new HeldLock(
    heldLockInit(options, {
      client: current,
      owned,
      key,
      index,
      owner,
      token,
      ttl,
      confirmedAt,
      lossNotices: false,
      noticeConnection: undefined,
      notice: undefined,
    }),
  );
}

/**
 * Runs `work` while holding the lock, and releases it afterwards, whatever happens. `work` gets
 * the lock's signal (aborts if the lock is lost) and the lock itself (its fencing token).
 */
export async function withLock<T>(
  client: LockClient,
  key: LockName,
  index: LockName,
  owner: LockName,
  options: HoldLockOptions,
  work: (lost: AbortSignal, lock: HeldLock) => Promise<T>,
): Promise<T> {
  const lock = await holdLock(client, key, index, owner, options);
  try {
    return await work(lock.signal, lock);
  } finally {
    await lock.release();
  }
}
