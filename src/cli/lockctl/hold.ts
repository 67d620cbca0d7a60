import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { holdLock, type HeldLock } from '../../client/holdLock.js';
import { LockRefusedError, LockWaitTimeoutError } from '../../client/errors.js';
import type { LockClient } from '../../client/LockClient.js';
import type { LockRequest } from '../../locks/LockService.js';
import { ExitCode } from './exitCodes.js';
import { shown, tokenField } from './render.js';

export interface HoldSpec extends LockRequest {
  /** Give up waiting after this many seconds (--wait); undefined = wait until interrupted. */
  readonly waitSeconds: number | undefined;
  /** The command and its arguments. */
  readonly command: readonly string[];
}

/** Where hold tells what happened: warnings on stderr, and with --json one object per step. */
export interface HoldOutput {
  readonly warn: (message: string) => void;
  /** Set with --json: `{"acquired":true,"token":N}`, then `{"exitCode":N,"lockLost":B}`; or `{"acquired":false,"reason":…}`. */
  readonly json?: (value: unknown) => void;
}

const MS_PER_SECOND = 1000;

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
 * The command finds the lock in its environment (see commandEnvironment).
 */
export async function runHold(client: LockClient, spec: HoldSpec, output: HoldOutput): Promise<number> {
  const { warn, json } = output;
  const name = `${shown(spec.key)}/${shown(spec.index)}`;
  let lock: HeldLock | number;
  const onFailover = (from: string, to: string): void => warn(`lost the connection to ${from}; carrying on through ${to}`);
  try {
    lock = await waitForLock(client, spec, onFailover);
  } catch (error) {
    if (error instanceof LockWaitTimeoutError) {
      json?.({ acquired: false, reason: 'timeout' });
      warn(spec.waitSeconds === 0 ? `${name} is taken (--wait 0: no waiting)` : `${name} was not ours within --wait ${spec.waitSeconds} s`);
      return ExitCode.No;
    }
    if (error instanceof LockRefusedError) json?.({ acquired: false, reason: 'refused' });
    throw error;
  }
  if (typeof lock === 'number') {
    json?.({ acquired: false, reason: 'interrupted' });
    return lock;
  }
  json?.({ acquired: true, ...tokenField(lock.token) });
  try {
    const exitCode = await runWhileHeld(lock, spec, warn);
    json?.({ exitCode, lockLost: lock.signal.aborted });
    return exitCode;
  } finally {
    await lock.release().catch((error: unknown) => warn(`could not release the lock: ${(error as Error).message}`));
  }
}

/** The held lock, or an exit code when Ctrl-C / SIGTERM came first. */
async function waitForLock(client: LockClient, spec: HoldSpec, onFailover: (from: string, to: string) => void): Promise<HeldLock | number> {
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
      waitTimeoutMs: spec.waitSeconds === undefined ? undefined : spec.waitSeconds * MS_PER_SECOND,
      signal: interrupt.signal,
      onFailover,
    });
  } catch (error) {
    if (error instanceof Interrupted) return error.exitCode;
    throw error;
  } finally {
    process.off('SIGINT', onInt).off('SIGTERM', onTerm);
  }
}

/**
 * lockctl's environment, with the lock for the command: LOCKCTL_KEY, LOCKCTL_INDEX, LOCKCTL_OWNER
 * as lockctl prints them, and LOCKCTL_TOKEN, its fencing token — removed when the lock has none,
 * so that the token of an outer `lockctl hold` never passes for this lock's.
 */
function commandEnvironment(lock: HeldLock, spec: HoldSpec): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOCKCTL_KEY: shown(spec.key), LOCKCTL_INDEX: shown(spec.index), LOCKCTL_OWNER: shown(spec.owner) };
  if (lock.token === undefined) delete env.LOCKCTL_TOKEN;
  else env.LOCKCTL_TOKEN = String(lock.token);
  return env;
}

function runWhileHeld(lock: HeldLock, spec: HoldSpec, warn: (message: string) => void): Promise<number> {
  return new Promise((resolve) => {
    const [file, ...args] = spec.command;
    const child = spawn(file!, args, { stdio: 'inherit', env: commandEnvironment(lock, spec) });
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
