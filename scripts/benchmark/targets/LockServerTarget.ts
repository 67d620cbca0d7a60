import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import { PROFILED_STOP_GRACE_MS, spawnServer, stopServer } from '../processes.js';
import type { RunningTarget, StartOptions, Target } from './Target.js';

/**
 * The lockserver command line of a built package: this one's, or that of `root` (--server-root), so
 * that one bench can measure two builds alternately with the same load, scenarios and report.
 */
export function lockserverCli(root: string | undefined): string {
  return join(root ?? PACKAGE_ROOT, 'dist', 'src', 'cli', 'lockserver.js');
}
const LOOPBACK = '127.0.0.1';
const STARTED = /event=started .*\bport=(\d+)/;
const DEFAULT_READY_TIMEOUT_MS = 30_000;
/** Enough connections for every scenario's clients; the idle scenario asks for more. */
const DEFAULT_MAX_CONNECTIONS = 4_096;

/** Our single node: `node dist/src/cli/lockserver.js` on a free loopback port, files in a temp dir. */
export class LockServerTarget implements Target {
  readonly name = 'lockserver';
  readonly protocol = 'lockserver' as const;

  /**
   * @param nodeFlags extra flags for the server's node (e.g. --cpu-prof --cpu-prof-dir=…).
   * @param logFile where the server's output is appended (e.g. for --trace-gc), if anywhere.
   * @param cli the lockserver.js to run (lockserverCli).
   */
  constructor(
    private readonly nodeFlags: readonly string[] = [],
    private readonly logFile?: string,
    private readonly cli = lockserverCli(undefined),
  ) {}

  async unavailableReason(): Promise<string | undefined> {
    return undefined;
  }

  async start(options: StartOptions = {}): Promise<RunningTarget> {
    const dir = await mkdtemp(join(tmpdir(), 'lockserver-bench-'));
    const lockFile = join(dir, 'bench.locks');
    if (options.lockFile !== undefined) await copyFile(options.lockFile, lockFile);
    // prettier-ignore
    const args = [
      ...this.nodeFlags,
      this.cli,
      '--port', '0',
      '--listen', LOOPBACK,
      '--lock-file', lockFile,
      '--stat-file', join(dir, 'bench.stats'),
      '--max-connections', String(options.maxConnections ?? DEFAULT_MAX_CONNECTIONS),
      ...(options.maxLocks !== undefined ? ['--max-locks', String(options.maxLocks)] : []),
      ...(options.args ?? []),
    ];
    let server;
    try {
      server = await spawnServer(process.execPath, args, {
        readyPattern: STARTED,
        readyTimeoutMs: options.readyTimeoutMs ?? DEFAULT_READY_TIMEOUT_MS,
        logFile: this.logFile,
      });
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
    const readyAt = Date.now();
    // A profiled server must exit by itself to write its profile; otherwise there is nothing
    // worth waiting for (saving a million benchmark locks would only slow the run down).
    const graceMs = this.nodeFlags.length > 0 ? PROFILED_STOP_GRACE_MS : 0;
    return {
      endpoints: [{ host: LOOPBACK, port: Number(server.ready[1]) }],
      pids: [server.pid],
      readyAt,
      stop: async () => {
        await stopServer(server, graceMs);
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
}
