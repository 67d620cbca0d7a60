/**
 * What the in-process harnesses (connection.ts, clusterNode.ts) put where the server would have
 * a socket and a LockServer: real Connection objects run against them, without the kernel.
 */
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Clock } from '../../../src/runtime/Clock.js';
import type { LockService } from '../../../src/locks/LockService.js';
import { Connection, type ConnectionHost } from '../../../src/server/Connection.js';
import { silentLogger } from '../../../src/runtime/Logger.js';
import { ServerStats } from '../../../src/server/ServerStats.js';

/** What Connection uses of a net.Socket; every write is taken, and handed to `received` if given. */
export class StandInSocket extends EventEmitter {
  constructor(private readonly received?: (bytes: Buffer) => void) {
    super();
  }

  write(bytes: Buffer): boolean {
    this.received?.(bytes);
    return true;
  }
  pause(): this {
    return this;
  }
  resume(): this {
    return this;
  }
  end(): void {}
  destroySoon(): void {}
}

/** A LockServer's part for connections that serve `service` on `clock`, counting commands as it does. */
export function standInHost(service: LockService, clock: Clock): ConnectionHost {
  const stats = new ServerStats(clock);
  return {
    service,
    logger: silentLogger,
    draining: false,
    commandObserver: undefined,
    countCommand: (command) => {
      stats.commands[command]!++;
    },
    statsSnapshot: (locks) => stats.snapshot(locks),
    afterRemoval: () => {},
    now: () => clock.now(),
    inputIsStale: () => false,
    staleInputRefused: () => {},
    onPartialFrame: () => {},
    onClosed: () => {},
  };
}

/** A Connection on a stand-in socket: emit 'data' on the socket to send it bytes. */
export function standInConnection(socket: StandInSocket, host: ConnectionHost): Connection {
  return new Connection(socket as unknown as Socket, '127.0.0.1', host);
}
