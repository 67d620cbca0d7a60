import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { GATE_FD, TRAMPOLINE } from './gate.js';
import { stopTree } from './processTree.js';

/**
 * hold's watchdog: `node watchdog.js GRACE_MS FILE [ARGS…]`, started by lockctl with an IPC
 * channel and the gate (gate.ts) while it waits for the lock, starts the command behind the gate at
 * once (so that starting processes is not on the way from the grant to the command), and tells
 * lockctl how it went. lockctl gone before it let the command go, nothing runs. It exists for the case lockctl cannot
 * handle itself: lockctl killed (kill -9, the OOM killer) while the command runs. Nobody renews
 * the lock then, and it expires after its TTL while the command would run on, unlocked. The
 * channel closes when lockctl dies, however it dies; the watchdog then sends SIGTERM to the
 * command and every process under it, and SIGKILL to what is left after GRACE_MS (less than the
 * time the lock has left). The command stays in lockctl's process group, so a terminal's Ctrl-C
 * and job control reach it as before.
 */

/** From the watchdog to lockctl. */
export type WatchdogReport =
  // The trampoline's pid, as soon as it is spawned: the command's once let go (exec keeps it).
  | { readonly started: number }
  | { readonly failed: { readonly code: string | undefined; readonly message: string } }
  | { readonly exited: { readonly code: number | null; readonly signal: NodeJS.Signals | null } };

/**
 * From lockctl to the watchdog: the command was let go (lockctl wrote the token down the gate,
 * gate.ts), so it runs and is the watchdog's to watch; or a signal to pass on to it.
 */
export type WatchdogOrder = { readonly running: true } | { readonly signal: NodeJS.Signals };

/** Signals meant for the command (a terminal's Ctrl-C reaches the whole group): lockctl decides what the command gets. */
const IGNORED = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const;

function report(message: WatchdogReport): Promise<void> {
  // lockctl may be gone: then there is nobody to tell.
  if (process.send === undefined || !process.connected) return Promise.resolve();
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

async function main(): Promise<void> {
  const [graceArgument, file, ...args] = process.argv.slice(2);
  const graceMs = Number(graceArgument);
  if (file === undefined || !Number.isFinite(graceMs) || process.send === undefined) {
    process.stderr.write('lockctl watchdog: started by lockctl hold only (GRACE_MS FILE [ARGS…], with an IPC channel)\n');
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
   * lockctl is gone: SIGTERM to the command's tree, then SIGKILL to what is left after the grace.
   * Whether or not the command was let go: lockctl may have written down the gate and died before
   * saying so; a trampoline still at the gate just ends the sooner.
   */
  const stopCommand = async (): Promise<void> => {
    if (child.pid !== undefined && !exited) await stopTree(child.pid, graceMs);
  };

  const lockctlGone = (): void => {
    stopping ??= stopCommand().finally(() => process.exit(0));
  };
  process.on('disconnect', lockctlGone);
  // lockctl may have given up (--wait 0, a signal) before this process got this far: no 'disconnect' comes then.
  if (!process.connected) lockctlGone();
  /** The command was let go: the lock is lockctl's now. */
  const letGo = (): void => {
    if (running || stopping !== undefined || exited) return;
    running = true;
  };
  child.once('error', (error: NodeJS.ErrnoException) => {
    exited = true;
    void report({ failed: { code: error.code, message: error.message } }).finally(() => process.exit(0));
  });
  // 'close', not 'exit': the trampoline's word on fd 4 is read by then.
  child.once('close', (code, signal) => {
    exited = true;
    // Ending while the command is being stopped: that is done first; lockctl is gone anyway.
    if (stopping !== undefined) return;
    const ended: WatchdogReport = cannotRun.startsWith('not-executable')
      ? { failed: { code: 'EACCES', message: 'not executable' } }
      : cannotRun !== ''
        ? { failed: { code: 'ENOENT', message: 'not found' } }
        : { exited: { code, signal } };
    void report(ended).finally(() => process.exit(0));
  });

  process.on('message', (order: WatchdogOrder) => {
    if ('running' in order) letGo();
    else if (running && !exited) child.kill(order.signal);
  });
}

void main();
