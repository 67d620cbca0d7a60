import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { GATE_FD, TRAMPOLINE } from './gate.js';
import { monotonicNow } from './monotonic.js';
import { stopTree } from './processTree.js';

/**
 * hold's watchdog: `node watchdog.js GRACE_MS MARGIN_MS MARK FILE [ARGS…]`, started by lockctl with an
 * IPC channel and the gate (gate.ts) while it waits for the lock, starts the command behind the
 * gate at once (so that starting processes is not on the way from the grant to the command), and
 * tells lockctl how it went. lockctl gone before it let the command go, nothing runs.
 *
 * It exists for what lockctl cannot do itself: stop the command when lockctl cannot run.
 * - **The lock's deadline.** lockctl tells it, with the order to run and after every confirmed
 *   renewal, the instant until which the lock is ours by the client's rule (the last confirmed
 *   renewal's send plus the TTL, on the machine's monotonic clock). The watchdog holds that
 *   deadline itself: GRACE_MS + MARGIN_MS before it, with no later renewal told, it stops the
 *   command's tree (SIGTERM, SIGKILL MARGIN_MS before the deadline), without waiting to hear from
 *   lockctl — lockctl stopped (SIGSTOP, a debugger, a freezer, swap) keeps its channel open and says
 *   nothing.
 * - **lockctl's death** (kill -9, the OOM killer): the channel closes, however it dies; the
 *   command's tree is stopped the same way, SIGKILL after GRACE_MS.
 * The command stays in lockctl's process group, so a terminal's Ctrl-C and job control reach it as
 * before.
 */

/** From the watchdog to lockctl. */
export type WatchdogReport =
  // The trampoline's pid, as soon as it is spawned: the command's once let go (exec keeps it).
  | { readonly started: number }
  // The lock's deadline came near without a renewal told: the command's tree is being stopped.
  | { readonly deadlineStop: true }
  | { readonly failed: { readonly code: string | undefined; readonly message: string } }
  | { readonly exited: { readonly code: number | null; readonly signal: NodeJS.Signals | null } };

/**
 * From lockctl to the watchdog: the command was let go (lockctl writes the token down the gate,
 * gate.ts, right after sending this), so it runs and is the watchdog's to watch, until `ownedUntil`;
 * a confirmed renewal's new deadline; a signal to pass on to the command; or stop its tree.
 * `ownedUntil`: ms on CLOCK_MONOTONIC (monotonic.ts); null: the lock has no TTL.
 */
export type WatchdogOrder =
  | { readonly running: true; readonly ownedUntil: number | null }
  | { readonly ownedUntil: number | null }
  | { readonly signal: NodeJS.Signals }
  | { readonly stop: true };
/** Signals meant for the command (a terminal's Ctrl-C reaches the whole group): lockctl decides what the command gets. */
const IGNORED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;

function report(message: WatchdogReport): Promise<void> {
  // lockctl may be gone: then there is nobody to tell.
  if (process.send === undefined || !process.connected) return Promise.resolve();
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

async function main(): Promise<void> {
  const [graceArgument, marginArgument, mark, file, ...args] = process.argv.slice(2);
  const graceMs = Number(graceArgument);
  const marginMs = Number(marginArgument);
  if (file === undefined || mark === undefined || !Number.isFinite(graceMs) || !Number.isFinite(marginMs) || process.send === undefined) {
    process.stderr.write('lockctl watchdog: started by lockctl hold only (GRACE_MS MARGIN_MS MARK FILE [ARGS…], with an IPC channel)\n');
    process.exit(2);
  }
  for (const signal of IGNORED) process.on(signal, () => {});

  // Started now, held by the trampoline until lockctl writes down the gate; its environment is lockctl's (LOCKCTL_KEY, …).
  const child: ChildProcess = spawn('/bin/sh', ['-c', TRAMPOLINE, 'lockctl-hold', file, ...args], {
    stdio: ['inherit', 'inherit', 'inherit', GATE_FD, 'pipe'],
  });
  // lockctl learns the trampoline's pid at once: should this process die, lockctl stops it, let go or not.
  if (child.pid !== undefined) void report({ started: child.pid });
  let cannotRun = '';
  (child.stdio[4] as Readable)
    .setEncoding('utf8')
    .on('data', (word: string) => (cannotRun += word))
    .on('error', () => {});
  let running = false;
  let exited = false;
  let stopping: Promise<void> | undefined;

  /**
   * SIGTERM to the command's tree, then SIGKILL to what is left `killAfterMs` later. Whether or not
   * the command was let go: lockctl may have written down the gate and died before saying so; a
   * trampoline still at the gate just ends the sooner. Once: every path stops the tree this way.
   */
  const stopCommand = (killAfterMs: number): Promise<void> => {
    stopping ??= child.pid !== undefined && !exited ? stopTree({ root: child.pid, mark }, Math.max(0, killAfterMs)) : Promise.resolve();
    return stopping;
  };

  const lockctlGone = (): void => void stopCommand(graceMs).finally(() => process.exit(0));
  process.on('disconnect', lockctlGone);
  // lockctl may have given up (--wait 0, a signal) before this process got this far: no 'disconnect' comes then.
  if (!process.connected) lockctlGone();

  // The lock's deadline (CLOCK_MONOTONIC ms; null: no TTL) and the timer that stops the command before it.
  let ownedUntil: number | null = null;
  let deadlineTimer: NodeJS.Timeout | undefined;
  const armDeadline = (): void => {
    clearTimeout(deadlineTimer);
    if (!running || exited || stopping !== undefined || ownedUntil === null) return;
    const killAt = ownedUntil - marginMs;
    deadlineTimer = setTimeout(
      () => {
        void report({ deadlineStop: true });
        void stopCommand(killAt - monotonicNow());
      },
      Math.max(0, killAt - graceMs - monotonicNow()),
    );
  };
  /** A deadline told: only ever later (a renewal confirmed late, told out of order, never brings it back). */
  const moveDeadline = (until: number | null): void => {
    ownedUntil = until === null || ownedUntil === null ? until : Math.max(ownedUntil, until);
    armDeadline();
  };

  child.once('error', (error: NodeJS.ErrnoException) => {
    exited = true;
    clearTimeout(deadlineTimer);
    void report({ failed: { code: error.code, message: error.message } }).finally(() => process.exit(0));
  });
  // 'close', not 'exit': the trampoline's word on fd 4 is read by then.
  child.once('close', (code, signal) => {
    exited = true;
    clearTimeout(deadlineTimer);
    const ended: WatchdogReport = cannotRun.startsWith('not-executable')
      ? { failed: { code: 'EACCES', message: 'not executable' } }
      : cannotRun !== ''
        ? { failed: { code: 'ENOENT', message: 'not found' } }
        : { exited: { code, signal } };
    // A stop under way is finished first (what the command started may run on after it): then the word.
    void (stopping ?? Promise.resolve()).then(() => report(ended)).finally(() => process.exit(0));
  });

  process.on('message', (order: WatchdogOrder) => {
    if ('running' in order) {
      // The command was let go: the lock is lockctl's now, until ownedUntil.
      if (stopping === undefined && !exited) running = true;
      moveDeadline(order.ownedUntil);
    } else if ('ownedUntil' in order) moveDeadline(order.ownedUntil);
    else if ('stop' in order) void stopCommand(graceMs);
    else if (running && !exited) child.kill(order.signal);
  });
}

void main();
