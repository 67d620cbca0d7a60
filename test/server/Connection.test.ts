import test from 'ava';
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import { idleTimers } from '../doubles/idleTimers.js';
import { Command } from '../../src/protocol/constants.js';
import { Connection, MAX_COMMANDS_PER_TURN, MAX_REPLY_BYTES_PER_TURN, type ConnectionHost } from '../../src/server/Connection.js';
import { silentLogger } from '../../src/runtime/Logger.js';
import { ServerStats } from '../../src/server/ServerStats.js';
import { frames, req } from '../helpers/wire.js';

// One Connection on a stand-in socket whose writes the test accepts or refuses, and whose turns of
// the event loop the test counts: the per-turn bounds and the frame timer, exactly.


/** Just what Connection uses of a net.Socket; write() answers as told (false = backpressure). */
class StandInSocket extends EventEmitter {
  readonly written: Buffer[] = [];
  takesWrites = true;
  paused = false;

  write(bytes: Buffer): boolean {
    this.written.push(bytes);
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

  end(): void {}
  destroySoon(): void {}
}

function connection(setUp: (service: LocalLockService) => void = () => {}): { socket: StandInSocket; connection: Connection; clock: FakeClock } {
  const clock = new FakeClock(1_000);
  const service = new LocalLockService(clock, idleTimers);
  setUp(service);
  const stats = new ServerStats(clock);
  const host: ConnectionHost = {
    service,
    logger: silentLogger,
    draining: false,
    commandObserver: undefined,
    countCommand: (command) => void stats.commands[command]!++,
    statsSnapshot: (locks) => stats.snapshot(locks),
    afterRemoval: () => {},
    now: () => clock.now(),
    inputIsStale: () => false,
      staleInputRefused: () => {},
      onPartialFrame: () => {},
    onClosed: () => {},
  };
  const socket = new StandInSocket();
  return { socket, connection: new Connection(socket as unknown as Socket, '127.0.0.1', host), clock };
}

/** A key whose list reply is about `entries` × 210 bytes. */
function fillK(entries: number): (service: LocalLockService) => void {
  return (service) => {
    for (let n = 0; n < entries; n++) {
      service.request({ key: 'K', index: '1', owner: String(n).padStart(200, 'o'), ttl: 0, ttw: 0, priority: 0 }, true);
    }
  };
}

test(`a long pipeline runs ${MAX_COMMANDS_PER_TURN} commands per turn of the event loop, then lets others run`, async (t) => {
  const { socket } = connection();
  const sent = 2 * MAX_COMMANDS_PER_TURN + 100;
  socket.emit('data', frames(...Array.from({ length: sent }, () => req.findOwner('K', '1'))));
  t.is(socket.bytesWritten, MAX_COMMANDS_PER_TURN, 'one turn: one one-byte reply per command run');
  await nextTurn();
  t.is(socket.bytesWritten, 2 * MAX_COMMANDS_PER_TURN);
  await nextTurn();
  t.is(socket.bytesWritten, sent, 'all answered in the end');
});

test(`a pipeline of long replies produces about ${MAX_REPLY_BYTES_PER_TURN / 1024} KiB per turn (one reply may exceed it)`, async (t) => {
  const { socket } = connection(fillK(40));
  const sent = 30;
  socket.emit('data', frames(...Array.from({ length: sent }, () => req.list('K'))));
  const firstTurn = socket.bytesWritten;
  const listBytes = 2 + 40 * (1 + 2 + 2 + 2 + 1 + 200 + 1);
  t.is(firstTurn, Math.ceil(MAX_REPLY_BYTES_PER_TURN / listBytes) * listBytes);
  for (let turn = 0; turn < sent && socket.bytesWritten < sent * listBytes; turn++) await nextTurn();
  t.is(socket.bytesWritten, sent * listBytes);
});

test('the frame timer runs only while an incomplete frame waits for bytes we are reading', async (t) => {
  const { socket, connection: c, clock } = connection(fillK(3));
  // Whole requests then the first byte of another, while the socket takes no more writes.
  socket.takesWrites = false;
  socket.emit('data', Buffer.concat([frames(req.list('K'), req.findOwner('K', '1')), Buffer.from([Command.List])]));
  t.true(socket.paused, 'not reading while our replies back up');
  t.is(c.partialSince, undefined, 'no frame timer while the replies back up');
  clock.advance(5_000);
  socket.takesWrites = true;
  socket.emit('drain');
  t.false(socket.paused);
  t.is(c.partialSince, clock.now(), 'reading again: the incomplete frame is timed from now');
});
