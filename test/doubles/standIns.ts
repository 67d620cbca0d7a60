/**
 * What the server would have around a Connection, for tests and the in-process harnesses
 * (scripts/benchmark/micro/): a socket that takes (or refuses) writes and counts how it was told to
 * close, and a LockServer's part of the work (the ConnectionHost). No kernel, no event loop turns.
 */
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { Clock } from '../../src/runtime/Clock.js';
import type { LockService } from '../../src/locks/LockService.js';
import { Connection, type ConnectionHost } from '../../src/server/Connection.js';
import { silentLogger } from '../../src/runtime/Logger.js';
import { ServerStats } from '../../src/server/ServerStats.js';

/**
 * Just what Connection uses of a net.Socket; write() answers as told (false = backpressure). What
 * is written is kept in `written`, or handed to `received` instead when one is given (a harness
 * that writes millions of replies keeps none).
 */
export class StandInSocket extends EventEmitter {
  readonly written: Buffer[] = [];
  takesWrites = true;
  paused = false;
  /** How often each way of closing was asked for. */
  ends = 0;
  destroySoons = 0;
  destroys = 0;

  constructor(private readonly received?: (bytes: Buffer) => void) {
    super();
  }

  write(bytes: Buffer): boolean {
    if (this.received === undefined) this.written.push(bytes);
    else this.received(bytes);
    return this.takesWrites;
  }

  get bytesWritten(): number {
    return this.written.reduce((sum, b) => sum + b.length, 0);
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    this.paused = false;
    return this;
  }

  end(): void {
    this.ends++;
  }

  destroySoon(): void {
    this.destroySoons++;
  }

  destroy(): void {
    this.destroys++;
  }
}

/** A LockServer's part for connections that serve `service` on `clock`, counting commands as it does. */
export function standInHost(
  service: LockService,
  clock: Clock,
  onClosed: (connection: Connection) => void = () => {},
): ConnectionHost & { readonly stats: ServerStats } {
  const stats = new ServerStats(clock);
  return {
    stats,
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
    staleInputMs: undefined,
    inputIsStale: () => false,
    stallsSeen: 0,
    staleInputRefused: () => {},
    onPartialFrame: () => {},
    onClosed,
    adoptLink: undefined,
    handedOff: onClosed,
    outputBuffered: () => {},
  };
}

/** A Connection on a stand-in socket: emit 'data' on the socket to send it bytes. */
export function standInConnection(socket: StandInSocket, host: ConnectionHost): Connection {
  return new Connection(socket as unknown as Socket, '127.0.0.1', host);
}
