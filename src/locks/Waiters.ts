import type { ByteString } from '../bytes.js';
import { LossReason } from '../protocol/constants.js';
import type { FencedPosition } from '../protocol/messages.js';
import type { Clock } from '../runtime/Clock.js';
import type { Timers } from '../runtime/Timers.js';
import { DeadlineHeap, NO_DEADLINE } from './DeadlineHeap.js';
import { NO_ID } from './HashIndex.js';
import { Waiting } from './Later.js';
import { EndReason, type LockTable, type TableObserver } from './LockTable.js';

/** A client waiting on one entry: for its grant (acquire and wait, 0x0B), or for its loss (0x0C). */
export type Wait = GrantWait | LossWait;

interface WaitBase {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
  /** The entry's record id in the table now (renumbered by compactions and snapshot loads). */
  entry: number;
  /** Its slot in the bound heap. */
  readonly id: number;
}

export interface GrantWait extends WaitBase {
  readonly kind: 'grant';
  readonly answer: Waiting<FencedPosition>;
}

export interface LossWait extends WaitBase {
  readonly kind: 'loss';
  readonly answer: Waiting<number>;
}

/** What a service does for the waits it keeps, where a single node and a cluster differ. */
export interface WaitersHost {
  /** A grant wait's bound passed before the grant: answer it as the service reads (its position now). */
  boundPassed(wait: GrantWait): void;
  /** A grant wait's client went away (its connection closed): its entry, if it still waits, goes. */
  abandoned(wait: GrantWait): void;
}

/** What the metrics hear of every grant and end (not only those waited on). */
export interface GrantObserver {
  /** An entry was granted its lock `waitedMs` after it was requested. */
  granted?(waitedMs: number): void;
  /** An entry ended, for `why`: an owner's lock (`owned`), or a waiter that left its queue without a grant. */
  ended?(why: EndReason, owned: boolean): void;
}

/** How an end reads to an owner's loss notice (a waiter's end is no loss: it never owned). */
const LOSS_OF: Readonly<Record<EndReason, number>> = {
  [EndReason.Released]: LossReason.Released,
  [EndReason.ReleasedKey]: LossReason.ReleasedKey,
  [EndReason.ReleasedAll]: LossReason.ReleasedAll,
  [EndReason.Expired]: LossReason.Expired,
  [EndReason.Canceled]: LossReason.NotOwner,
};

const NOT_GRANTED: FencedPosition = { position: 0, token: 0 };
/** The longest delay a Node.js timer takes (2^31 - 1 ms); a longer one fires after 1 ms, with a warning. */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * The clients waiting on entries of a lock table, told of every grant and end as the table makes
 * it (TableObserver), so each is answered in the turn that grants or ends its entry, whatever did
 * it (a request, a release, an expiry, a lift of a lock-delay, a log command applied): no client
 * polls, no timer runs per lock. Bounds of grant waits are kept in one heap with one timer.
 *
 * Invariants: a wait is registered under the entry id its names have in the table now, or
 * answered; every answer settles once (Waiting); a wait answered or cancelled is in no index.
 */
export class Waiters implements TableObserver {
  private table: LockTable;
  private readonly byEntry = new Map<number, Wait[]>();
  private readonly byId = new Map<number, Wait>();
  /** Clients waiting now for a grant (0x0B) and for a loss (0x0C) (metrics). */
  grantWaits = 0;
  lossWaits = 0;
  /** Grant waits by when their bound passes (wait ids). */
  private readonly bounds = new DeadlineHeap();
  private nextId = 0;
  private cancelTimer: (() => void) | undefined;
  private timerAt = NO_DEADLINE;

  constructor(
    table: LockTable,
    private readonly clock: Clock,
    private readonly timers: Timers,
    private readonly host: WaitersHost,
    private readonly observer: GrantObserver = {},
  ) {
    this.table = table;
    table.observe(this);
  }

  /** Waits now pending (tests, metrics). */
  get size(): number {
    return this.byId.size;
  }

  /**
   * A client waits for the grant of `entry` (which waits now) until `deadline` (this clock;
   * NO_DEADLINE for no bound): answered 1 and its token at the grant, 0 if the entry goes first,
   * the host's answer once the bound passes.
   */
  waitForGrant(
    key: ByteString,
    index: ByteString,
    owner: ByteString,
    entry: number,
    deadline: number,
    answer = new Waiting<FencedPosition>(),
  ): Waiting<FencedPosition> {
    const wait: GrantWait = { kind: 'grant', key, index, owner, entry, id: this.nextId++, answer };
    this.register(wait);
    answer.whenCancelled((removeEntry) => {
      this.unregister(wait);
      if (removeEntry) this.host.abandoned(wait);
    });
    if (deadline !== NO_DEADLINE) {
      this.bounds.schedule(wait.id, deadline);
      this.armTimer();
    }
    answer.began();
    return answer;
  }

  /** A client waits for the loss of `entry` (which owns now): answered how it ended, when it does. */
  waitForLoss(key: ByteString, index: ByteString, owner: ByteString, entry: number, answer = new Waiting<number>()): Waiting<number> {
    const wait: LossWait = { kind: 'loss', key, index, owner, entry, id: this.nextId++, answer };
    this.register(wait);
    answer.whenCancelled(() => this.unregister(wait));
    answer.began();
    return answer;
  }

  /**
   * The service's table was replaced (a cluster node loaded a snapshot): every wait is found
   * again by its names; one whose entry is gone, or whose grant came meanwhile, is answered now
   * (how a lost entry ended is not known here: NotOwner).
   */
  rebind(table: LockTable): void {
    this.table.observe(undefined);
    this.table = table;
    table.observe(this);
    const waits = [...this.byId.values()];
    this.byEntry.clear();
    for (const wait of waits) {
      const entry = table.entryOf(wait.key, wait.index, wait.owner);
      const owns = entry !== NO_ID && table.owns(entry);
      if (entry === NO_ID || (wait.kind === 'grant' && owns) || (wait.kind === 'loss' && !owns)) {
        this.unregister(wait);
        if (wait.kind === 'grant') wait.answer.resolve(owns ? { position: 1, token: table.tokenOf(entry) } : NOT_GRANTED);
        else wait.answer.resolve(LossReason.NotOwner);
        continue;
      }
      wait.entry = entry;
      this.index(wait);
    }
  }

  /** Every wait fails (the service closes); their connections close. */
  close(error: Error): void {
    this.cancelTimer?.();
    for (const wait of [...this.byId.values()]) {
      this.unregister(wait);
      wait.answer.reject(error);
    }
  }

  // TableObserver

  granted(entry: number): void {
    this.observer.granted?.(this.clock.now() - this.table.requestedAt(entry));
    if (this.byEntry.size === 0) return;
    const waits = this.byEntry.get(entry);
    if (waits === undefined) return;
    const token = this.table.tokenOf(entry);
    for (const wait of [...waits]) {
      if (wait.kind !== 'grant') continue;
      this.unregister(wait);
      wait.answer.resolve({ position: 1, token });
    }
  }

  ended(entry: number, why: EndReason): void {
    this.observer.ended?.(why, this.table.owns(entry));
    if (this.byEntry.size === 0) return;
    const waits = this.byEntry.get(entry);
    if (waits === undefined) return;
    for (const wait of [...waits]) {
      this.unregister(wait);
      if (wait.kind === 'grant') wait.answer.resolve(NOT_GRANTED);
      else wait.answer.resolve(LOSS_OF[why]);
    }
  }

  moved(from: Int32Array, to: Int32Array, count: number): void {
    if (this.byEntry.size === 0) return;
    const waits = [...this.byEntry.values()].flat();
    const renumbered = new Map<number, number>();
    for (let i = 0; i < count; i++) renumbered.set(from[i]!, to[i]!);
    this.byEntry.clear();
    for (const wait of waits) {
      wait.entry = renumbered.get(wait.entry) ?? NO_ID;
      this.index(wait);
    }
  }

  private register(wait: Wait): void {
    this.byId.set(wait.id, wait);
    if (wait.kind === 'grant') this.grantWaits++;
    else this.lossWaits++;
    this.index(wait);
  }

  private index(wait: Wait): void {
    const list = this.byEntry.get(wait.entry);
    if (list === undefined) this.byEntry.set(wait.entry, [wait]);
    else list.push(wait);
  }

  private unregister(wait: Wait): void {
    if (!this.byId.delete(wait.id)) return;
    if (wait.kind === 'grant') this.grantWaits--;
    else this.lossWaits--;
    this.bounds.remove(wait.id);
    const list = this.byEntry.get(wait.entry);
    if (list === undefined) return;
    const at = list.indexOf(wait);
    if (at >= 0) list.splice(at, 1);
    if (list.length === 0) this.byEntry.delete(wait.entry);
  }

  /** One timer, for the earliest bound. */
  private armTimer(): void {
    const next = this.bounds.peekDeadline();
    if (next === this.timerAt) return;
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.timerAt = next;
    if (next === NO_DEADLINE) return;
    // A bound beyond what a timer can wait (about 24.8 days) is reached in steps: the timer fires early, finds nothing due, and is set again.
    this.cancelTimer = this.timers.after(Math.min(MAX_TIMER_DELAY_MS, Math.max(0, next - this.clock.now())), () => {
      this.cancelTimer = undefined;
      this.timerAt = NO_DEADLINE;
      this.boundsPassed();
    });
  }

  private boundsPassed(): void {
    const now = this.clock.now();
    while (this.bounds.peekDeadline() <= now) {
      const wait = this.byId.get(this.bounds.peekId()) as GrantWait;
      this.unregister(wait);
      this.host.boundPassed(wait);
    }
    this.armTimer();
  }
}
