import test from 'ava';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { FakeClock } from '../doubles/FakeClock.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import { NO_WAITING, type LockService } from '../../src/locks/LockService.js';
import { idleTimers } from '../doubles/idleTimers.js';
import { Command } from '../../src/protocol/constants.js';
import { MAX_COMMANDS_PER_TURN, MAX_REPLY_BYTES_PER_TURN, type Connection } from '../../src/server/Connection.js';
import { StandInSocket, standInConnection, standInHost } from '../doubles/standIns.js';
import { frames, req } from '../helpers/wire.js';

// One Connection on a stand-in socket whose writes the test accepts or refuses, and whose turns of
// the event loop the test counts: the per-turn bounds, the frame timer and the connection's
// phases (reading, quiescing, halted, closing, closed), exactly.

interface Harness {
  socket: StandInSocket;
  connection: Connection;
  clock: FakeClock;
  /** Commands the connection has run (counted before each runs). */
  commandsRun: () => number;
  /** Times the connection told the server it has closed. */
  closedReports: () => number;
}

function connection(setUp: (service: LocalLockService) => void = () => {}, replaceService?: LockService): Harness {
  const clock = new FakeClock(1_000);
  const local = new LocalLockService(clock, idleTimers);
  setUp(local);
  let closedReports = 0;
  const host = standInHost(replaceService ?? local, clock, () => {
    closedReports++;
  });
  const socket = new StandInSocket();
  return {
    socket,
    connection: standInConnection(socket, host),
    clock,
    commandsRun: () => host.stats.commands.reduce((sum, n) => sum + n, 0),
    closedReports: () => closedReports,
  };
}

/**
 * A service whose FindOwner answers wait until the test gives them (as a replicated core's do),
 * each with the empty owner: a one-byte reply. Nothing else is asked of it here.
 */
function heldFindOwner(): { service: LockService; answerAll: () => void; held: () => number } {
  const waiting: Array<(owner: string) => void> = [];
  const unused = (): never => {
    throw new Error('not used by these tests');
  };
  const service: LockService = {
    findOwner: () => new Promise<string>((resolve) => waiting.push(resolve)),
    request: unused,
    requestFenced: unused,
    acquire: unused,
    awaitLoss: unused,
    queues: unused,
    waiting: NO_WAITING,
    fence: unused,
    location: unused,
    renew: unused,
    release: unused,
    releaseKey: unused,
    releaseAll: unused,
    list: unused,
    counts: unused,
    drainCounts: unused,
    snapshot: unused,
    highestToken: unused,
    restore: unused,
    close: unused,
  };
  return { service, answerAll: () => waiting.splice(0).forEach((answer) => answer('')), held: () => waiting.length };
}

/** A byte no command starts with: the decoder refuses it. */
const NOT_A_COMMAND = Buffer.from([0x7f]);
/** Lets the microtasks (answers settling, the delivery they schedule) run. */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

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

test('a stall of the process while reading was paused for backpressure: what waited in the socket is never read; what was read is answered, then the connection closes', async (t) => {
  const clock = new FakeClock(1_000);
  const local = new LocalLockService(clock, idleTimers);
  fillK(3)(local);
  let refused = 0;
  const host = {
    ...standInHost(local, clock),
    stallsSeen: 0,
    staleInputRefused: () => {
      refused++;
    },
  };
  const socket = new StandInSocket();
  standInConnection(socket, host);
  socket.takesWrites = false;
  socket.emit('data', frames(req.list('K'), req.findOwner('K', '1')));
  t.true(socket.paused, 'not reading while our replies back up');
  const answered = socket.bytesWritten;
  // The event loop stood still while the socket was paused: bytes the kernel holds for it may be
  // as old as the stall, and would be read only after the drain, turns after the stall was seen.
  host.stallsSeen = 1;
  socket.takesWrites = true;
  socket.emit('drain');
  t.true(socket.paused, 'never reads again');
  t.is(refused, 1);
  for (let turn = 0; turn < 4 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.is(socket.bytesWritten, answered, 'the replies to what was read before the stall went out, and nothing else');
  t.is(socket.ends + socket.destroySoons, 1, 'then it closes');
});

test('paused for backpressure in the very turn a stall is seen (the stall counted already): what waits behind the pause is never read', async (t) => {
  const clock = new FakeClock(1_000);
  const { service, answerAll } = heldFindOwner();
  let refused = 0;
  let staleNow = false;
  const host = {
    ...standInHost(service, clock),
    stallsSeen: 0,
    inputIsStale: () => staleNow,
    staleInputRefused: () => {
      refused++;
    },
  };
  const socket = new StandInSocket();
  standInConnection(socket, host);
  socket.emit('data', frames(req.findOwner('K', '1')));
  // The process stands still; in the first turn after it the stall is seen and counted, and the
  // answer that came due meanwhile goes out, into a socket that takes no more: reading pauses
  // then, with the stall counted already. Bytes sent during the stall wait behind the pause.
  host.stallsSeen = 1;
  staleNow = true;
  socket.takesWrites = false;
  answerAll();
  await settled();
  t.true(socket.paused, 'not reading while our reply backs up');
  staleNow = false; // that turn is over
  socket.takesWrites = true;
  socket.emit('drain');
  t.true(socket.paused, 'never reads again');
  t.is(refused, 1);
  for (let turn = 0; turn < 4 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.is(socket.ends + socket.destroySoons, 1, 'it closes once its reply is out');
});

test('halted with nothing outstanding: the replies before the bad input are written, then it hangs up at once', (t) => {
  const { socket, commandsRun } = connection();
  socket.emit('data', Buffer.concat([frames(req.findOwner('K', '1')), NOT_A_COMMAND, frames(req.findOwner('K', '1'))]));
  t.is(commandsRun(), 1, 'nothing after the bad byte runs');
  t.is(socket.bytesWritten, 1);
  t.is(socket.destroySoons, 1);
});

test('halted behind an outstanding answer: no further command runs, not even from input that arrives later', async (t) => {
  const { service, answerAll } = heldFindOwner();
  const { socket, commandsRun } = connection(undefined, service);
  socket.emit('data', Buffer.concat([frames(req.findOwner('K', '1')), NOT_A_COMMAND, frames(req.findOwner('K', '2'))]));
  t.is(commandsRun(), 1);
  t.true(socket.paused, 'halted: reads no more');
  socket.emit('data', frames(req.findOwner('K', '3')));
  t.is(commandsRun(), 1, 'input that still arrives is not run');
  t.is(socket.destroySoons, 0, 'the reply before the failure is still owed');
  answerAll();
  await settled();
  t.is(socket.bytesWritten, 1, 'the reply before the failure, and nothing else');
  t.is(socket.destroySoons, 1, 'then it hangs up');
  t.is(commandsRun(), 1);
});

test('quiescing: takes no more input, but answers every request it had received', async (t) => {
  const { socket, connection: c, commandsRun } = connection();
  const received = 2 * MAX_COMMANDS_PER_TURN + 100;
  socket.emit('data', frames(...Array.from({ length: received }, () => req.findOwner('K', '1'))));
  t.is(commandsRun(), MAX_COMMANDS_PER_TURN, 'the rest waits for later turns');
  let quiet = false;
  void c.quiesce().then(() => (quiet = true));
  t.true(socket.paused);
  socket.emit('data', frames(req.findOwner('K', '1')));
  socket.emit('drain');
  t.true(socket.paused, 'quiescing: never reads again');
  for (let turn = 0; turn < 4 && !quiet; turn++) await nextTurn();
  t.true(quiet, 'quiet once everything received is answered');
  t.is(commandsRun(), received, 'what came after quiesce() is not run');
  t.is(socket.bytesWritten, received);
  t.is(socket.destroySoons + socket.ends, 0, 'quiet is not closed: shutdown ends it later');
});

test('quiesce() on a halted connection neither lets it read nor run again; it resolves when the connection hangs up', async (t) => {
  const { service, answerAll } = heldFindOwner();
  const { socket, connection: c, commandsRun } = connection(undefined, service);
  socket.emit('data', Buffer.concat([frames(req.findOwner('K', '1')), NOT_A_COMMAND]));
  let quiet = false;
  void c.quiesce().then(() => (quiet = true));
  socket.emit('data', frames(req.findOwner('K', '2')));
  await settled();
  t.false(quiet);
  t.is(commandsRun(), 1);
  answerAll();
  await settled();
  t.true(quiet);
  t.is(socket.bytesWritten, 1);
  t.is(socket.destroySoons, 1);
});

test('the client half-closing: every reply still owed is written, then our side closes too', async (t) => {
  const { service, answerAll } = heldFindOwner();
  const { socket } = connection(undefined, service);
  socket.emit('data', frames(req.findOwner('K', '1'), req.findOwner('K', '2')));
  socket.emit('end');
  await settled();
  t.is(socket.ends, 0, 'two replies still owed');
  answerAll();
  await settled();
  t.is(socket.bytesWritten, 2);
  t.is(socket.ends, 1);
});

test('closing is idempotent: hangUp() and end() close the socket once, later answers are dropped, the server is told once', async (t) => {
  const { service, answerAll, held } = heldFindOwner();
  const { socket, connection: c, commandsRun, closedReports } = connection(undefined, service);
  socket.emit('data', frames(req.findOwner('K', '1')));
  t.is(held(), 1);
  c.hangUp();
  c.end();
  c.hangUp();
  t.is(socket.destroySoons, 1, 'one close, however often asked for');
  await c.quiesce(); // resolves at once: nothing more will be answered
  socket.emit('data', frames(req.findOwner('K', '2')));
  answerAll();
  await settled();
  t.is(commandsRun(), 1, 'closing: nothing more is run');
  t.is(socket.bytesWritten, 0, 'an answer that comes after the close is dropped');
  socket.emit('close');
  socket.emit('close');
  t.is(closedReports(), 1, 'the server is told once');
  c.drop();
  t.is(socket.destroys, 1, 'drop() still cuts a socket that is slow to close');
  t.is(closedReports(), 1);
});

test('closed by the client (a reset): nothing more is run or written, the server is told once', async (t) => {
  const { service, answerAll } = heldFindOwner();
  const { socket, connection: c, commandsRun, closedReports } = connection(undefined, service);
  socket.emit('data', frames(req.findOwner('K', '1')));
  socket.emit('close');
  t.is(closedReports(), 1);
  socket.emit('data', frames(req.findOwner('K', '2')));
  answerAll();
  await settled();
  await c.quiesce();
  c.end();
  t.is(commandsRun(), 1);
  t.is(socket.bytesWritten, 0);
  t.is(socket.destroySoons, 0, 'already closed: nothing to close');
  t.is(closedReports(), 1);
});

test('a list answered at once but queued behind an answer still to come (stats: a promise even here) is counted out when written: the connection goes on', async (t) => {
  const { socket, commandsRun } = connection(fillK(2));
  socket.emit('data', frames(req.stats(), req.list('K'), req.findOwner('K', '1'), req.list('K'), req.findOwner('K', '1')));
  for (let turn = 0; turn < 4; turn++) await settled();
  t.is(commandsRun(), 5, 'every command ran');
  const listBytes = 2 + 2 * (1 + 2 + 2 + 2 + 1 + 200 + 1);
  const ownerBytes = 1 + 200;
  t.is(socket.bytesWritten, 58 + 2 * listBytes + 2 * ownerBytes, 'every reply went out');
  t.is(socket.destroySoons + socket.ends, 0, 'the connection is still open');
  socket.emit('data', frames(req.findOwner('K', '1')));
  await settled();
  t.is(commandsRun(), 6, 'and the next command runs too');
});
