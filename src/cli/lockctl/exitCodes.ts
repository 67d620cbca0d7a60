import {
  AllHostsFailedError,
  ConnectError,
  ConnectionClosedError,
  LockRefusedError,
  LockTimeoutError,
  LockWaitTimeoutError,
  ProtocolError,
  ServerRefusedError,
} from '../../client/errors.js';

/**
 * lockctl's exit codes. `hold` exits with its command's status instead, once the command ran
 * (128 + N when the command died of signal N, 127 when it could not be found, 126 when it could
 * not be executed).
 */
export const ExitCode = {
  /** Done; a positive answer (owner found, lock owned, entry renewed or released). */
  Ok: 0,
  /** A negative answer: no owner, not (yet) the owner, no such entry, nothing released, position 0,
   *  or `hold --wait` ran out before the lock was ours. */
  No: 1,
  /** Bad command line. */
  Usage: 2,
  /** Could not talk to the server: connection refused or unreachable, greeting 0x00 (not in hosts
   *  file or too busy), or the connection broke. */
  Unreachable: 3,
  /** No connection or no reply within --timeout. */
  Timeout: 4,
  /** A bug in lockctl. */
  Internal: 70,
  /** Stopped by SIGINT / SIGTERM while waiting (shell convention 128 + signal number). */
  Interrupted: 130,
  Terminated: 143,
} as const;

export function exitCodeFor(error: unknown): number {
  if (error instanceof LockWaitTimeoutError || error instanceof LockRefusedError) return ExitCode.No;
  if (error instanceof LockTimeoutError) return ExitCode.Timeout;
  // Several hosts, none answered: a timeout only if every one of them timed out.
  if (error instanceof AllHostsFailedError) {
    return error.errors.every((e) => e instanceof LockTimeoutError) ? ExitCode.Timeout : ExitCode.Unreachable;
  }
  if (error instanceof ServerRefusedError || error instanceof ConnectError || error instanceof ConnectionClosedError || error instanceof ProtocolError) {
    return ExitCode.Unreachable;
  }
  if (error instanceof RangeError) return ExitCode.Usage;
  return ExitCode.Internal;
}
