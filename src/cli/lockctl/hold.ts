import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { holdLock, type HeldLock } from '../../client/holdLock.js';
import type { LockClient } from '../../client/LockClient.js';
import type { LockRequest } from '../../locks/LockService.js';
import { ExitCode } from './exitCodes.js';
import { shown } from './render.js';

export interface HoldSpec extends LockRequest {
  /** Give up waiting after this long; undefined = wait until interrupted. */
  readonly waitMs: number | undefined;
  /** The command and its arguments. */
  readonly command: readonly string[];
}

/** Shell conventions for a command that could not be run. */
const EXIT_NOT_FOUND = 127;
const EXIT_NOT_EXECUTABLE = 126;
const SIGNAL_EXIT_BASE = 128;

/** Signals lockctl passes on to the command it runs. SIGINT is not among them: a terminal's
 *  Ctrl-C already reaches the whole foreground process group, the command included. */
const FORWARDED = ['SIGTERM', 'SIGHUP'] as const;

class Interrupted extends Error {
  constructor(readonly exitCode: number) {
    super('interrupted');
  }
}

/**
 * `lockctl hold`: waits for the lock, runs the command while the lock is renewed in the
 * background, releases the lock when the command ends, and returns the command's exit status
 * (like flock(1) and `etcdctl lock`). If the lock is lost meanwhile, the command gets SIGTERM.
 */
export async function runHold(client: LockClient, spec: HoldSpec, warn: (message: string) => void): Promise<number> {
  const lock = await waitForLock(client, spec);
  if (typeof lock === 'number') return lock;
  try {
    return await runWhileHeld(lock, spec, warn);
  } finally {
    await lock.release().catch((error: Error) => warn(`could not release the lock: ${error.message}`));
  }
}

/** The held lock, or an exit code when Ctrl-C / SIGTERM came first. */
async function waitForLock(client: LockClient, spec: HoldSpec): Promise<HeldLock | number> {
  const interrupt = new AbortController();
  const onInt = (): void => interrupt.abort(new Interrupted(ExitCode.Interrupted));
  const onTerm = (): void => interrupt.abort(new Interrupted(ExitCode.Terminated));
  process.on('SIGINT', onInt).on('SIGTERM', onTerm);
  try {
    // The interrupt signal only stops the waiting: once the lock is ours, the command decides.
    return await holdLock(client, spec.key, spec.index, spec.owner, {
      ttl: spec.ttl,
      ttw: spec.ttw,
      priority: spec.priority,
      waitTimeoutMs: spec.waitMs,
      signal: interrupt.signal,
    });
  } catch (error) {
    if (error instanceof Interrupted) return error.exitCode;
    throw error;
  } finally {
    process.off('SIGINT', onInt).off('SIGTERM', onTerm);
  }
}

function runWhileHeld(lock: HeldLock, spec: HoldSpec, warn: (message: string) => void): Promise<number> {
  return new Promise((resolve) => {
    const [file, ...args] = spec.command;
    const child = spawn(file!, args, { stdio: 'inherit' });
    const forwards = FORWARDED.map((signal) => {
      const forward = (): void => void child.kill(signal);
      process.on(signal, forward);
      return () => process.off(signal, forward);
    });
    const ignoreInterrupt = (): void => {};
    process.on('SIGINT', ignoreInterrupt);
    const onLost = (): void => {
      warn(`lost the lock on ${shown(spec.key)}/${shown(spec.index)} (${lock.lostError?.message}); sending SIGTERM to the command`);
      child.kill('SIGTERM');
    };
    if (lock.signal.aborted) onLost();
    else lock.signal.addEventListener('abort', onLost, { once: true });
    const finish = (code: number): void => {
      lock.signal.removeEventListener('abort', onLost);
      for (const stop of forwards) stop();
      process.off('SIGINT', ignoreInterrupt);
      resolve(code);
    };
    child.once('error', (error: NodeJS.ErrnoException) => {
      warn(`cannot run ${file}: ${error.message}`);
      finish(error.code === 'ENOENT' ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE);
    });
    child.once('exit', (code, signal) => {
      finish(code ?? SIGNAL_EXIT_BASE + (signal === null ? 0 : constants.signals[signal]));
    });
  });
}
