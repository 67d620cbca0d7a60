import { spawn, type ChildProcess } from 'node:child_process';
import { bounded } from './bounded.js';
import { LOCKCTL_PATH, type LockctlResult } from './lockctl.js';

export interface LockctlProcess {
  readonly child: ChildProcess;
  readonly result: Promise<LockctlResult>;
  /** Resolves when stderr so far matches `pattern` (bounded by the run's own limit). */
  readonly stderrMatch: (pattern: RegExp) => Promise<void>;
}

/**
 * `lockctl ARGS` with `env` added to this process's environment (any LOCKCTL_HOST / LOCKCTL_PORT
 * of the outer environment removed first), killed if it has not exited within `limitMs`.
 */
export function startLockctlWith(
  args: readonly string[],
  { env = {}, limitMs = 20_000 }: { env?: Record<string, string>; limitMs?: number } = {},
): LockctlProcess {
  const base = { ...process.env };
  delete base.LOCKCTL_HOST;
  delete base.LOCKCTL_PORT;
  const child = spawn(process.execPath, [LOCKCTL_PATH, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...base, ...env } });
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => {
    stderr += text;
    for (const check of watchers) check();
  });
  const exited = new Promise<LockctlResult>((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  const result = bounded(exited, limitMs, () => `lockctl ${args.join(' ')} to exit; stderr so far:\n${stderr}`);
  result.catch(() => child.kill('SIGKILL'));
  const stderrMatch = (pattern: RegExp): Promise<void> => {
    const seen = new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (pattern.test(stderr)) {
          watchers.delete(check);
          resolve();
        }
      };
      watchers.add(check);
      check();
      void exited.then(() => {
        if (watchers.delete(check)) reject(new Error(`lockctl exited before its stderr matched ${pattern}:\n${stderr}`));
      });
    });
    return bounded(seen, limitMs, () => `lockctl's stderr to match ${pattern}; so far:\n${stderr}`);
  };
  return { child, result, stderrMatch };
}

/** Runs `lockctl ARGS` with `env` to the end. */
export function lockctlWithEnv(args: readonly string[], env: Record<string, string> = {}): Promise<LockctlResult> {
  return startLockctlWith(args, { env }).result;
}
