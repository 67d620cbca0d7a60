import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { constants, hostname } from 'node:os';
import type { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { byteString, MAX_STRING_LENGTH, type ByteString } from '../../bytes.js';
import { holdLock, type HeldLock, type HoldLockOptions } from '../../client/holdLock.js';
import { LockRefusedError, LockWaitTimeoutError } from '../../client/errors.js';
import type { LockClient } from '../../client/LockClient.js';
import type { LockRequest } from '../../locks/LockService.js';
import { ExitCode } from './exitCodes.js';
import { jsonBytes, shown, tokenField } from './render.js';
import { GATE_FD, gateLine } from './gate.js';
import type { WatchdogOrder, WatchdogReport } from './watchdog.js';
import { monotonicFromPerformance } from './monotonic.js';
import { holdMark, startTimeOf, stopTree } from './processTree.js';

export interface HoldSpec extends LockRequest {
  /** Give up waiting after this many seconds (--wait); undefined = wait until interrupted. */
  readonly waitSeconds: number | undefined;
  /** Exit code when the lock was not ours within --wait, or the server refused it (-E; 1 by default, as flock's). */
  readonly conflictExitCode: number;
  /** The command and its arguments; empty: hold the lock until SIGINT, SIGTERM or SIGHUP. */
  readonly command: readonly string[];
  /** Seconds from SIGTERM to SIGKILL when the command's tree is stopped (--kill-after); undefined: killGraceMs's default. */
  readonly killAfterSeconds?: number;
}

/** Where hold tells what happened: warnings on stderr, and with --json one object per step. */
export interface HoldOutput {
  readonly warn: (message: string) => void;
  /** Plain output on stdout (hold without a command says which lock it holds). */
  readonly out: (text: string) => void;
  /** Set with --json: `{"acquired":true,"token":N,"owner":…}`, then `{"exitCode":N,"lockLost":B}`; or `{"acquired":false,"reason":…}`. */
  readonly json?: (value: unknown) => void;
}

const MS_PER_SECOND = 1000;

/** Shell conventions for a command that could not be run. */
const EXIT_NOT_FOUND = 127;
const EXIT_NOT_EXECUTABLE = 126;
const SIGNAL_EXIT_BASE = 128;

/** The signals hold handles, from its start to its end. */
const HANDLED = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
/** Signals lockctl passes on to the command it runs. SIGINT is not among them: a terminal's
 *  Ctrl-C already reaches the whole foreground process group, the command included. */
const FORWARDED: ReadonlySet<NodeJS.Signals> = new Set(['SIGTERM', 'SIGHUP']);

/**
 * The default time from SIGTERM to SIGKILL when the command's tree is stopped (--kill-after): 5 s,
 * or a third of the TTL when that is less. lockctl renews every third of the TTL, so the lock has
 * at least two thirds of it left when lockctl dies, and the command is stopped before anyone else
 * can get the lock; at the lock's deadline the stop starts that long before it.
 */
const MAX_KILL_GRACE_MS = 5_000;
/**
 * The watchdog's SIGKILL at the lock's deadline comes this long before it (at most a tenth of
 * the TTL): for a late timer on a loaded machine and for reading /proc, so that nothing of the
 * command runs at the deadline itself.
 */
const MAX_DEADLINE_MARGIN_MS = 250;
const DEADLINE_MARGIN_SHARE_OF_TTL = 0.1;
/** --kill-after may be at most this share of the TTL: the stop at the deadline must leave room for renewals. */
export const MAX_KILL_AFTER_SHARE_OF_TTL = 0.5;

const WATCHDOG_PATH = fileURLToPath(new URL('./watchdog.js', import.meta.url));

class Interrupted extends Error {
  constructor(readonly exitCode: number) {
    super('interrupted');
  }
}

/**
 * hold's signal handling: one listener per signal from the start of the hold to its end, which
 * does what the current phase says (waiting, running the command, holding without one). Were
 * each phase to add and remove its own, a signal arriving between two would meet the default
 * action: death, with the lock held or queued until its TTL or TTW runs out.
 */
class HoldSignals {
  private onSignal: (signal: NodeJS.Signals) => void = () => {};
  private readonly listener = (signal: NodeJS.Signals): void => this.onSignal(signal);

  constructor() {
    for (const signal of HANDLED) process.on(signal, this.listener);
  }

  /** What a signal does from now on. */
  handle(onSignal: (signal: NodeJS.Signals) => void): void {
    this.onSignal = onSignal;
  }

  close(): void {
    for (const signal of HANDLED) process.off(signal, this.listener);
  }
}

/** The shell's exit status for a process ended by `signal`. */
function signalExitCode(signal: NodeJS.Signals): number {
  return SIGNAL_EXIT_BASE + constants.signals[signal];
}

/**
 * The owner hold uses: the one given plus `@PID.HOSTNAME`, unique to this lockctl. Two holds
 * given the same owner are then two entries, and the second waits, as flock's would; with one
 * owner the server would take the second request for a renewal of the first (0.9b: a request of
 * an existing entry renews it), and both commands would run at once. RangeError (exit 2) when the
 * result would exceed the protocol's 255 bytes.
 */
export function holdOwner(given: ByteString, pid = process.pid, host = hostname()): ByteString {
  const suffix = Buffer.from(`@${pid}.${host}`, 'utf8');
  const owner = Buffer.concat([Buffer.from(given, 'latin1'), suffix]);
  if (owner.length > MAX_STRING_LENGTH) {
    throw new RangeError(
      `hold makes the owner unique by adding "${shown(byteString(suffix))}" (${suffix.length} bytes); ` +
        `"${shown(given)}" (${given.length} bytes) leaves no room for it: give an owner of at most ${MAX_STRING_LENGTH - suffix.length} bytes`,
    );
  }
  return byteString(owner);
}

/**
 * `lockctl hold`: waits for the lock, runs the command while the lock is renewed in the
 * background, releases the lock when the command ends, and returns the command's exit status
 * (like flock(1) and `etcdctl lock`). If the lock is lost meanwhile, the command gets SIGTERM.
 * The command finds the lock in its environment (see commandEnvironment). Without a command,
 * the lock is held until SIGINT, SIGTERM or SIGHUP, then released (exit 0).
 */
export async function runHold(client: LockClient, spec: HoldSpec, output: HoldOutput): Promise<number> {
  const signals = new HoldSignals();
  try {
    return await hold(client, spec, output, signals);
  } finally {
    signals.close();
  }
}

async function hold(client: LockClient, spec: HoldSpec, output: HoldOutput, signals: HoldSignals): Promise<number> {
  const { warn, json } = output;
  const name = `${shown(spec.key)}/${shown(spec.index)}`;
  let lock: HeldLock | number;
  const onFailover = (from: string, to: string): void => warn(`lost the connection to ${from}; carrying on through ${to}`);
  // Started while we wait, so that the command starts the moment the lock is ours (starting Node takes tens of ms).
  const watchdog = spec.command.length === 0 ? undefined : startWatchdog(spec);
  try {
    lock = await waitForLock(client, spec, onFailover, signals, {
      onOwned: (token, ownedUntil) => watchdog?.letGo(token, ownedUntil),
      onRenewed: (ownedUntil) => watchdog?.renewed(ownedUntil),
    });
  } catch (error) {
    watchdog?.dismiss();
    if (error instanceof LockWaitTimeoutError) {
      json?.({ acquired: false, reason: 'timeout' });
      warn(spec.waitSeconds === 0 ? `${name} is taken (--wait 0: no waiting)` : `${name} was not ours within --wait ${spec.waitSeconds} s`);
      return spec.conflictExitCode;
    }
    if (error instanceof LockRefusedError) {
      json?.({ acquired: false, reason: 'refused' });
      warn(error.message);
      return spec.conflictExitCode;
    }
    throw error;
  }
  if (typeof lock === 'number') {
    watchdog?.dismiss();
    json?.({ acquired: false, reason: 'interrupted' });
    return lock;
  }
  json?.({ acquired: true, ...tokenField(lock.token), ...jsonBytes('owner', spec.owner) });
  try {
    const exitCode = watchdog === undefined ? await holdUntilSignal(lock, spec, output, signals) : await runWhileHeld(lock, spec, watchdog, warn, signals);
    json?.({ exitCode, lockLost: lock.signal.aborted });
    return exitCode;
  } finally {
    // A signal now changes nothing: the lock is being released, and lockctl exits after.
    signals.handle(() => {});
    await lock.release().catch((error: unknown) => warn(`could not release the lock: ${(error as Error).message}`));
  }
}

/** The held lock, or an exit code (128 + N) when SIGINT, SIGTERM or SIGHUP came first. */
async function waitForLock(
  client: LockClient,
  spec: HoldSpec,
  onFailover: (from: string, to: string) => void,
  signals: HoldSignals,
  { onOwned, onRenewed }: Pick<HoldLockOptions, 'onOwned' | 'onRenewed'>,
): Promise<HeldLock | number> {
  const interrupt = new AbortController();
  signals.handle((signal) => interrupt.abort(new Interrupted(signalExitCode(signal))));
  try {
    // The interrupt signal only stops the waiting: once the lock is ours, the command decides.
    return await holdLock(client, spec.key, spec.index, spec.owner, {
      ttl: spec.ttl,
      ttw: spec.ttw,
      priority: spec.priority,
      waitTimeoutMs: spec.waitSeconds === undefined ? undefined : spec.waitSeconds * MS_PER_SECOND,
      signal: interrupt.signal,
      onFailover,
      onOwned,
      onRenewed,
    });
  } catch (error) {
    if (error instanceof Interrupted) return error.exitCode;
    throw error;
  }
}

/** No command: say which lock is held, then hold it until a signal (exit 0) or its loss (exit 1). */
function holdUntilSignal(lock: HeldLock, spec: HoldSpec, { out, warn, json }: HoldOutput, signals: HoldSignals): Promise<number> {
  const name = `${shown(spec.key)}/${shown(spec.index)}`;
  if (json === undefined) {
    const token = lock.token === undefined ? '' : ` (token ${lock.token})`;
    out(`${name} held by ${shown(spec.owner)}${token}; SIGINT (Ctrl-C), SIGTERM or SIGHUP releases it\n`);
  }
  return new Promise((resolve) => {
    const onLost = (): void => {
      warn(`lost the lock on ${name} (${lock.lostError?.message})`);
      resolve(ExitCode.No);
    };
    signals.handle(() => {
      lock.signal.removeEventListener('abort', onLost);
      resolve(ExitCode.Ok);
    });
    if (lock.signal.aborted) onLost();
    else lock.signal.addEventListener('abort', onLost, { once: true });
  });
}

/**
 * lockctl's environment, with the lock for the command: LOCKCTL_KEY, LOCKCTL_INDEX, LOCKCTL_OWNER
 * (the owner hold uses, suffix included) as lockctl prints them, and LOCKCTL_TOKEN, its fencing
 * token — removed when the lock has none, so that the token of an outer `lockctl hold` never
 * passes for this lock's.
 */
function commandEnvironment(spec: HoldSpec, mark: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOCKCTL_KEY: shown(spec.key),
    LOCKCTL_INDEX: shown(spec.index),
    LOCKCTL_OWNER: shown(spec.owner),
    // Every process of the command carries it, so that a stop finds them all (processTree.holdMark).
    [mark]: '1',
  };
  // The token comes with the order to run (see watchdog.ts): the command is started before the lock is ours.
  delete env.LOCKCTL_TOKEN;
  return env;
}

/** SIGTERM-to-SIGKILL grace of every stop of the command's tree: --kill-after, else MAX_KILL_GRACE_MS or a third of the TTL. */
export function killGraceMs(ttlSeconds: number, killAfterSeconds?: number): number {
  if (killAfterSeconds !== undefined) return killAfterSeconds * MS_PER_SECOND;
  return ttlSeconds > 0 ? Math.min(MAX_KILL_GRACE_MS, (ttlSeconds * MS_PER_SECOND) / 3) : MAX_KILL_GRACE_MS;
}

/** How long before the lock's deadline the watchdog's SIGKILL comes (see MAX_DEADLINE_MARGIN_MS). */
function deadlineMarginMs(ttlSeconds: number): number {
  return Math.min(MAX_DEADLINE_MARGIN_MS, ttlSeconds * MS_PER_SECOND * DEADLINE_MARGIN_SHARE_OF_TTL);
}

/** The watchdog process, started before the lock is ours; told to run the command, or dismissed. */
interface StartedWatchdog {
  readonly process: ChildProcess;
  /** The environment variable every process of the command carries (holdMark), and so does the watchdog. */
  readonly mark: string;
  /** Why it could not be started, if it could not (reported once the lock is ours). */
  readonly startError: () => Error | undefined;
  /** The trampoline's pid (the command's, once let go), as the watchdog reported it. */
  readonly shellPid: () => number | undefined;
  /** How it ended, if it ended already (killed while lockctl waited). */
  readonly ended: () => { readonly code: number | null; readonly signal: NodeJS.Signals | null } | undefined;
  /**
   * The lock is ours until `ownedUntil` (performance.now()): the watchdog is told so first, then
   * the token goes down the gate, straight to the command's trampoline (see watchdog.ts), which
   * then execs the command; no other process is woken on the way.
   */
  letGo(token: number | undefined, ownedUntil: number): void;
  /** A confirmed renewal moved the lock's deadline to `ownedUntil` (performance.now()): the watchdog's deadline moves too. */
  renewed(ownedUntil: number): void;
  /** The lock was not had: the gate closes unwritten and the watchdog ends without running anything. */
  dismiss(): void;
}

function startWatchdog(spec: HoldSpec): StartedWatchdog {
  const [file, ...args] = spec.command;
  const ttl = spec.ttl ?? 0;
  const mark = holdMark(randomBytes(8).toString('hex'));
  const watchdogArgs = [WATCHDOG_PATH, String(killGraceMs(ttl, spec.killAfterSeconds)), String(deadlineMarginMs(ttl)), mark, file!, ...args];
  const child = spawn(process.execPath, watchdogArgs, {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc', 'pipe'],
    env: commandEnvironment(spec, mark),
  });
  const gate = child.stdio[GATE_FD] as Writable;
  // A watchdog that died meanwhile: its 'close' says so (runWhileHeld).
  gate.on('error', () => {});
  let startError: Error | undefined;
  let ended: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  child.once('error', (error) => (startError = error));
  child.once('close', (code, signal) => (ended = { code, signal }));
  let shellPid: number | undefined;
  child.on('message', (report: WatchdogReport) => {
    if ('started' in report) shellPid = report.started;
  });
  return {
    process: child,
    mark,
    startError: () => startError,
    shellPid: () => shellPid,
    ended: () => ended,
    letGo: (token, ownedUntil) => {
      // Without its watchdog the command would outlive lockctl unwatched (and runWhileHeld would release the lock under it): not let go.
      if (ended !== undefined || child.exitCode !== null || child.signalCode !== null || !child.connected) {
        gate.destroy();
        return;
      }
      // The deadline before the gate: lockctl stopped right after the gate, the watchdog still has it to hold.
      child.send({ running: true, ownedUntil: monotonicFromPerformance(ownedUntil) } satisfies WatchdogOrder);
      gate.end(gateLine(token));
    },
    renewed: (ownedUntil) => {
      if (child.connected) child.send({ ownedUntil: monotonicFromPerformance(ownedUntil) } satisfies WatchdogOrder);
    },
    dismiss: () => {
      gate.destroy();
      if (child.connected) child.disconnect();
    },
  };
}

/**
 * Runs the command under the watchdog (watchdog.ts), which stops it should lockctl die or stop
 * before the lock's deadline, and returns its exit status: the command's, 128 + N if a signal N
 * ended it, 127 / 126 if it could not be run, 70 if the watchdog itself died first. A lost lock
 * stops the command's whole tree (stopTree: SIGTERM, SIGKILL after the grace), from lockctl
 * itself, so that a watchdog stopped alone does not keep it running.
 */
function runWhileHeld(lock: HeldLock, spec: HoldSpec, started: StartedWatchdog, warn: (message: string) => void, signals: HoldSignals): Promise<number> {
  return new Promise((resolve) => {
    const [file] = spec.command;
    const watchdog = started.process;
    const graceMs = killGraceMs(spec.ttl ?? 0, spec.killAfterSeconds);
    let commandPid: number | undefined;
    /** The command's start time, so that a stop after it ended never reaches a process that got its pid. */
    let commandStart: string | undefined;
    const commandStarted = (pid: number | undefined): void => {
      commandPid = pid;
      if (pid !== undefined) void startTimeOf(pid).then((time) => (commandStart = time));
    };
    commandStarted(started.shellPid());
    let result: number | undefined;
    /** lockctl's stop of the command's tree; the watchdog's own (at the deadline) told by deadlineStop. */
    let stopping: Promise<void> | undefined;
    let watchdogStopping = false;
    const order = (message: WatchdogOrder): void => {
      if (watchdog.connected) watchdog.send(message);
    };
    /** Stops the command's tree once: through its pid, else (not yet known) by the watchdog. */
    const stop = (): Promise<void> => {
      // Ended and reported: nothing of it is left to reach by its pid.
      if (result !== undefined) return stopping ?? Promise.resolve();
      if (stopping === undefined) {
        if (commandPid !== undefined) {
          const except = new Set(watchdog.pid === undefined ? [] : [watchdog.pid]);
          stopping = stopTree({ root: commandPid, rootStartTime: commandStart, mark: started.mark, except }, graceMs);
        } else order({ stop: true });
      }
      return stopping ?? Promise.resolve();
    };
    signals.handle((signal) => {
      if (FORWARDED.has(signal)) order({ signal });
    });
    const onLost = (): void => {
      // The watchdog already stops it, by the deadline that the loss by expiry is: not twice.
      if (watchdogStopping) return warn(`lost the lock on ${shown(spec.key)}/${shown(spec.index)} (${lock.lostError?.message})`);
      warn(
        `lost the lock on ${shown(spec.key)}/${shown(spec.index)} (${lock.lostError?.message}); stopping the command and what it started (SIGTERM, SIGKILL after ${graceMs / MS_PER_SECOND} s)`,
      );
      void stop();
    };
    if (lock.signal.aborted) onLost();
    else lock.signal.addEventListener('abort', onLost, { once: true });
    watchdog.on('message', (report: WatchdogReport) => {
      if ('started' in report) commandStarted(report.started);
      else if ('deadlineStop' in report) {
        watchdogStopping = true;
        warn(
          `no renewal of the lock on ${shown(spec.key)}/${shown(spec.index)} was confirmed in time: the watchdog stops the command before the lock's TTL runs out`,
        );
      } else if ('failed' in report) {
        warn(`cannot run ${file}: ${report.failed.message}`);
        result = report.failed.code === 'ENOENT' ? EXIT_NOT_FOUND : EXIT_NOT_EXECUTABLE;
      } else {
        const { code, signal } = report.exited;
        result = code ?? (signal === null ? SIGNAL_EXIT_BASE : signalExitCode(signal));
      }
    });
    let finished = false;
    const finish = (code: number): void => {
      if (finished) return;
      finished = true;
      lock.signal.removeEventListener('abort', onLost);
      resolve(code);
    };
    const failedToStart = (error: Error): void => {
      warn(`cannot start the watchdog for ${file}: ${error.message}`);
      finish(ExitCode.Internal);
    };
    const startError = started.startError();
    if (startError !== undefined) return failedToStart(startError);
    watchdog.once('error', failedToStart);
    // 'close' comes after the exit and after the channel has delivered every report.
    const closed = (code: number | null, signal: NodeJS.Signals | null): void => {
      // A stop under way is finished first: what the command started may run on after it.
      if (result !== undefined) return void (stopping ?? Promise.resolve()).finally(() => finish(result!));
      // The watchdog died before the command ended: stop the command and what it started, as the
      // watchdog would have, before the lock is released (the lock is still renewed meanwhile).
      const end = signal === null ? `exit ${code}` : signal;
      warn(
        `the watchdog running ${file} ended (${end}) before reporting on it${commandPid === undefined ? '' : `; stopping pid ${commandPid} and what it started`}`,
      );
      if (commandPid === undefined) return finish(ExitCode.Internal);
      void stop().finally(() => finish(ExitCode.Internal));
    };
    const endedEarly = started.ended();
    if (endedEarly !== undefined) return closed(endedEarly.code, endedEarly.signal);
    watchdog.once('close', closed);
  });
}
