import { performance } from 'node:perf_hooks';
import { NO_WAIT_BOUND, type LossReason } from '../protocol/constants.js';
import {
  ConnectionClosedError,
  ExtensionUnsupportedError,
  LockClientError,
  LockRefusedError,
  LockWaitTimeoutError,
  ProtocolError,
  RequestTimeoutError,
} from './errors.js';
import type { LockClient } from './LockClient.js';
import type { LockName } from './lockName.js';

/** What waiting for a lock needs to know (holdLock's options, settled). */
export interface GrantWanted {
  readonly key: LockName;
  readonly index: LockName;
  readonly owner: LockName;
  readonly ttl: number;
  /**
   * Seconds the waiting entry stays queued without renewal; the wait is sent again every third
   * of it (see waitStep). 0: no TTW, the entry lasts as long as the waiting connection.
   */
  readonly ttw: number;
  readonly priority?: number;
  /** performance.now() by which the lock must be ours; Infinity: no bound. */
  readonly deadline: number;
  /** The bound as the caller gave it, for LockWaitTimeoutError. */
  readonly waitTimeoutMs?: number;
  readonly signal?: AbortSignal;
  readonly onFailover?: (from: string, to: string) => void;
}

/** A lock granted by waiting, and the connections it is held through. */
export interface Granted {
  /**
   * Where renewals go: the caller's connection when it is open and to the node that granted the
   * lock (the waiting connection then carries the loss notice); else the waiting connection (the
   * wait moved to another node, or the caller's connection closed meanwhile).
   */
  readonly client: LockClient;
  /** A connection of the lock's own that renewals go through (the waiting one), closed with the lock. */
  readonly owned: LockClient | undefined;
  /** The waiting connection, with the loss notice (0x0C) outstanding on it, when renewals do not go through it. */
  readonly noticeConnection: LockClient | undefined;
  /** That loss notice, sent right behind the renewal at the grant, so the server has it before the lock is handed over. */
  readonly notice: Promise<LossReason> | undefined;
  readonly token: number;
  /**
   * performance.now() from which the TTL counts: the renewal's send after the grant, or, when the
   * wait was short (firstRenewal), the 0x0B's own send.
   */
  readonly confirmedAt: number;
  /**
   * The renewal sent at the grant, not awaited: the grant's TTL began after the 0x0B was sent, so
   * counting from that send is safe, and leaves most of the TTL when the wait was short (under a
   * third of it). The lock is handed over without a round trip (a commit, in a cluster); the
   * renewal moves the count on when it answers, or says the lock was released just then.
   */
  readonly firstRenewal?: { readonly renewed: Promise<boolean>; readonly sentAt: number };
}

/** A waited grant is handed over before its first renewal answers when the wait took under this share of the TTL. */
const SHORT_WAIT_SHARE_OF_TTL = 1 / 3;

/**
 * Answers in a row that leave the waiter without a granted entry it can renew before it gives
 * up: a 0 (refused, or its entry ended meanwhile: someone's release-all or release with `*`;
 * asked again, it joins the queue anew) or a grant whose renewal found no entry (released just
 * then; asked again, it waits anew). A draining server answers 0 every time: LockRefusedError.
 */
const MAX_ANSWERS_WITHOUT_ENTRY = 2;

/** Waits are sent again this many times per TTW, so one late answer never lets the entry's TTW run out. */
const WAITS_PER_TTW = 3;
const MS_PER_SECOND = 1000;

/**
 * The wire bound of the next wait: the time left until `deadline`, and at most a third of the
 * TTW, so that the wait is answered (position ≥ 2: the entry stays in line) and sent again in
 * time to renew the entry before its TTW runs out (a request of an existing entry renews it, in
 * place). None (undefined) without either.
 */
function waitStep(deadline: number, ttw: number): number | undefined {
  const step = ttw > 0 ? Math.floor((ttw * MS_PER_SECOND) / WAITS_PER_TTW) : Infinity;
  const left = deadline === Infinity ? Infinity : Math.max(0, Math.ceil(deadline - performance.now()));
  const bound = Math.min(step, left);
  return bound === Infinity ? undefined : Math.min(NO_WAIT_BOUND - 1, bound);
}

/**
 * Waits for the lock with acquire-and-wait (0x0B) on a connection of its own (the caller's stays
 * free), with the caller's TTW, sent again every third of it (each answered at its bound with the
 * entry's position, and each renewing the entry in place), up to the caller's bound; renews at the
 * grant. A waiter that stops (frozen, its node dead, its connection held open by a peer that went
 * away) leaves an entry that ends a TTW later. Resolves to undefined when the server
 * has no acquire-and-wait — every host closed the waiting connection on the 0x0B without any
 * answer to it yet (LockServer 0.9b, a lockserver before waiting), or no second connection could
 * be had — for the caller to poll instead. A waiting connection that fails after an answer moves
 * to the next host (several `hosts`: the nodes of one cluster), where the 0x0B sent again renews
 * the entry in place. Rejects as holdLock does, leaving no entry behind where a connection still
 * allows removing it.
 */
export async function waitForGrant(client: LockClient, wanted: GrantWanted): Promise<Granted | undefined> {
  const { key, index, owner, signal, deadline } = wanted;
  let waiting: LockClient;
  try {
    waiting = await client.another();
  } catch (error) {
    // The caller's host refuses a second connection (too busy) or none answers: polling through the caller's connection can still try.
    if (error instanceof LockClientError) return undefined;
    throw error;
  }
  // Closing the waiting connection ends the wait, and the server removes the waiting entry.
  const onAbort = (): void => waiting.destroy();
  signal?.addEventListener('abort', onAbort, { once: true });
  let answered = false;
  let closedUnansweredInARow = 0;
  let failuresInARow = 0;
  let answersWithoutEntry = 0;
  try {
    for (;;) {
      signal?.throwIfAborted();
      try {
        const askedAt = performance.now();
        const { position, token } = await waiting.acquire(key, index, owner, {
          ttl: wanted.ttl,
          ttw: wanted.ttw,
          priority: wanted.priority,
          waitMs: waitStep(deadline, wanted.ttw),
        });
        answered = true;
        closedUnansweredInARow = failuresInARow = 0;
        if (position === 1) {
          const renewingThroughCaller = client.isOpen && client.address === waiting.address;
          const sentAt = performance.now();
          const renewed = waiting.renew(key, index, owner);
          // Pipelined behind the renewal: a loss right after the grant is told with its reason. (Not ours after all, it answers NotOwner at once.)
          const notice = renewingThroughCaller ? waiting.awaitLoss(key, index, owner) : undefined;
          notice?.catch(() => {});
          // Renewals through the caller's connection, the notice waiting on this one; else both on this one, which the lock owns.
          const held = renewingThroughCaller
            ? { client, owned: undefined, noticeConnection: waiting, notice, token }
            : { client: waiting, owned: waiting, noticeConnection: undefined, notice, token };
          if (wanted.ttl === 0 || sentAt - askedAt < wanted.ttl * 1000 * SHORT_WAIT_SHARE_OF_TTL) {
            renewed.catch(() => {});
            return { ...held, confirmedAt: askedAt, firstRenewal: { renewed, sentAt } };
          }
          if (await renewed) return { ...held, confirmedAt: sentAt };
          // Released just then, before the renewal reached it: not ours after all; wait anew.
          if (++answersWithoutEntry >= MAX_ANSWERS_WITHOUT_ENTRY) throw new LockRefusedError();
        } else if (position === 0) {
          // Refused (draining, table full), or the entry ended while it waited (release-all, `*`): ask anew.
          if (++answersWithoutEntry >= MAX_ANSWERS_WITHOUT_ENTRY) throw new LockRefusedError();
        } else {
          // In line: the entry is there, renewed by this wait.
          answersWithoutEntry = 0;
          if (deadline === Infinity && wanted.ttw === 0) {
            throw new ProtocolError(`${waiting.address} answered position ${position} to a wait without a bound`);
          }
          if (performance.now() >= deadline) throw new LockWaitTimeoutError(wanted.waitTimeoutMs!);
        }
        // Else a step's bound passed (sent again: that renews the entry's TTW), or the caller's by the server's clock but not yet by ours: wait the rest.
      } catch (error) {
        if (signal?.aborted) throw signal.reason;
        if (!(error instanceof ConnectionClosedError || error instanceof RequestTimeoutError)) throw error;
        failuresInARow++;
        if (error instanceof ExtensionUnsupportedError && !answered && ++closedUnansweredInARow >= waiting.hosts.length) {
          waiting.destroy();
          return undefined;
        }
        if (failuresInARow >= waiting.hosts.length) throw error;
        const next = await waiting.reconnect();
        wanted.onFailover?.(waiting.address, next.address);
        waiting.destroy();
        waiting = next;
      }
    }
  } catch (error) {
    await giveUp(client, waiting, wanted, error);
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Leaves no entry behind: released through the waiting connection when it is free (a bound
 * passed; the entry stays queued), else through the caller's once the waiting one is closed
 * (which ends a wait, the server removing the entry; the release catches a grant on its way).
 */
async function giveUp(client: LockClient, waiting: LockClient, { key, index, owner }: GrantWanted, error: unknown): Promise<void> {
  if (!(error instanceof LockRefusedError)) {
    const free = waiting.isOpen && waiting.inFlight === 0;
    if (!free) waiting.destroy();
    const through = free ? waiting : client;
    if (through.isOpen) await through.release(key, index, owner).catch(() => {});
  }
  waiting.destroy();
}
