import { spawnServer, stopServer, freePort, which } from '../processes.js';
import type { RunningTarget, Target } from './Target.js';

const LOOPBACK = '127.0.0.1';

/**
 * A throwaway redis-server on loopback with persistence off (our server does not write to disk
 * per command either). Only if `redis-server` is installed; otherwise the Redis rows say skipped.
 */
export class RedisTarget implements Target {
  readonly name = 'redis';
  readonly protocol = 'resp' as const;

  constructor(private readonly serverPath?: string) {}

  async binary(): Promise<string | undefined> {
    return this.serverPath ?? (await which('redis-server'));
  }

  async unavailableReason(): Promise<string | undefined> {
    return (await this.binary()) === undefined ? 'redis-server is not installed' : undefined;
  }

  async start(): Promise<RunningTarget> {
    const binary = await this.binary();
    if (binary === undefined) throw new Error('redis-server is not installed');
    const port = await freePort(LOOPBACK);
    const server = await spawnServer(
      binary,
      ['--port', String(port), '--bind', LOOPBACK, '--save', '', '--appendonly', 'no', '--protected-mode', 'yes', '--maxclients', '20000'],
      { readyPattern: /Ready to accept connections/, readyTimeoutMs: 10_000 },
    );
    return {
      endpoints: [{ host: LOOPBACK, port }],
      pids: [server.pid],
      readyAt: Date.now(),
      stop: () => stopServer(server, 0),
    };
  }
}
