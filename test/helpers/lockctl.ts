import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/packageRoot.js';
import { bounded } from './bounded.js';

export const LOCKCTL_PATH = join(PACKAGE_ROOT, 'dist', 'src', 'cli', 'lockctl.js');
/** Longest one lockctl run may take before the test gives up on it. */
const RUN_LIMIT_MS = 20_000;

export interface LockctlResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A lockctl process under way: its child, and its result once it has exited. */
export interface LockctlRun {
  readonly child: ChildProcess;
  readonly result: Promise<LockctlResult>;
}

/** Starts `lockctl ARGS` (no --port is added: pass it, e.g. ['-p', String(port), 'stats']). */
export function startLockctl(args: readonly string[]): LockctlRun {
  const child = spawn(process.execPath, [LOCKCTL_PATH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (stdout += text));
  child.stderr.setEncoding('utf8').on('data', (text: string) => (stderr += text));
  const exited = new Promise<LockctlResult>((resolve) => {
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  const result = bounded(exited, RUN_LIMIT_MS, () => `lockctl ${args.join(' ')} to exit; stderr so far:\n${stderr}`);
  result.catch(() => child.kill('SIGKILL'));
  return { child, result };
}

/** Runs `lockctl ARGS` to the end. */
export function lockctl(args: readonly string[]): Promise<LockctlResult> {
  return startLockctl(args).result;
}

/** Runs lockctl against the server on `port`, with `--json`, and parses its stdout. */
export async function lockctlJson(port: number, args: readonly string[]): Promise<{ code: number | null; value: Record<string, unknown> }> {
  const run = await lockctl(['-p', String(port), '--json', ...args]);
  return { code: run.code, value: JSON.parse(run.stdout) as Record<string, unknown> };
}
