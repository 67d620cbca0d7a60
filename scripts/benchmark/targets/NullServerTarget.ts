import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../../src/packageRoot.js';
import { spawnServer, stopServer } from '../processes.js';
import type { RunningTarget, Target } from './Target.js';

const NULL_SERVER = join(PACKAGE_ROOT, 'dist', 'scripts', 'benchmark', 'targets', 'nullServer.js');
const LOOPBACK = '127.0.0.1';

/** The trivial server (nullServer.ts) in its own process: the generator's ceiling. */
export class NullServerTarget implements Target {
  readonly name = 'null-server';
  readonly protocol = 'lockserver' as const;

  async unavailableReason(): Promise<string | undefined> {
    return undefined;
  }

  async start(): Promise<RunningTarget> {
    const server = await spawnServer(process.execPath, [NULL_SERVER, LOOPBACK], {
      readyPattern: /event=started .*\bport=(\d+)/,
      readyTimeoutMs: 10_000,
    });
    return {
      endpoints: [{ host: LOOPBACK, port: Number(server.ready[1]) }],
      pids: [server.pid],
      readyAt: Date.now(),
      stop: () => stopServer(server, 0),
    };
  }
}
