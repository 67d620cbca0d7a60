import test from 'ava';
import { Later } from '../../src/locks/Later.js';
import { NO_WAITING, type LockService } from '../../src/locks/LockService.js';
import { MAX_OUTSTANDING_ANSWERS } from '../../src/server/Connection.js';
import { FakeClock } from '../doubles/FakeClock.js';
import { StandInSocket, standInConnection, standInHost } from '../doubles/standIns.js';
import { frames, req } from '../helpers/wire.js';
import { Command, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import type { Request } from '../../src/protocol/messages.js';

// Cluster mode (a host with staleInputMs): input read but not decoded yet, because its connection
// has as many answers outstanding as it may, must be judged where it is decoded, by when it was
// read. Issue 36's first hole: the tail of a deep pipeline, read before a stall (or long before
// slow answers came), ran with a fresh deadline and released a lock that its client, following
// the README, had already re-requested elsewhere.

const STALE_MS = 1_000;

/** One call the service was given: its name and receivedAt. */
interface Call {
  readonly name: string;
  readonly receivedAt: number | undefined;
}

/** A service that holds every answer until the test gives them all (as a cluster node answers later), recording each call. */
function heldService(): { service: LockService; calls: Call[]; answerAll: () => void } {
  const calls: Call[] = [];
  const waiting: Array<() => void> = [];
  const held =
    <T>(name: string, value: T) =>
    (...args: unknown[]): Later<T> => {
      calls.push({ name, receivedAt: args[args.length - 1] as number | undefined });
      const answer = new Later<T>();
      waiting.push(() => answer.resolve(value));
      return answer;
    };
  const unused = (): never => {
    throw new Error('not used by these tests');
  };
  const service: LockService = {
    findOwner: held('findOwner', ''),
    request: held('request', 1),
    requestFenced: held('requestFenced', { position: 1, token: 7 }),
    acquire: held('acquire', { position: 1, token: 7 }),
    awaitLoss: held('awaitLoss', 1),
    queues: held('queues', []),
    waiting: NO_WAITING,
    fence: held('fence', 0),
    location: held('location', 0),
    renew: held('renew', true),
    release: held('release', 1),
    releaseKey: held('releaseKey', 1),
    releaseAll: held('releaseAll', 1),
    list: held('list', []),
    counts: unused,
    drainCounts: unused,
    snapshot: unused,
    highestToken: unused,
    restore: unused,
    close: unused,
  };
  return { service, calls, answerAll: () => waiting.splice(0).forEach((answer) => answer()) };
}

function clusterConnection(service: LockService) {
  const clock = new FakeClock(10_000);
  let refused = 0;
  const host = {
    ...standInHost(service, clock),
    staleInputMs: STALE_MS,
    stallsSeen: 0,
    staleInputRefused: () => {
      refused++;
    },
  };
  const socket = new StandInSocket();
  standInConnection(socket, host);
  return { socket, clock, host, refused: () => refused };
}

const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** A pipeline of MAX_OUTSTANDING_ANSWERS owner look-ups, then `tail`: the tail waits, read, in the connection's decoder. */
function deepPipeline(...tail: Request[]): Buffer {
  return frames(...Array.from({ length: MAX_OUTSTANDING_ANSWERS }, () => req.findOwner('K', '1')), ...tail);
}

test('a release behind a full pipeline, read before a stall of the process, never runs; the replies before it go out, then the connection closes', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, host, refused } = clusterConnection(service);
  socket.emit('data', deepPipeline(req.release('K', '1', 'a')));
  t.is(calls.length, MAX_OUTSTANDING_ANSWERS, 'the release waits in the decoder');
  // The process stands still; the answers come due after it.
  host.stallsSeen = 1;
  answerAll();
  for (let turn = 0; turn < 8 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.false(
    calls.some((c) => c.name === 'release'),
    'the release never reached the service',
  );
  t.is(refused(), 1);
  t.is(socket.bytesWritten, MAX_OUTSTANDING_ANSWERS, 'every look-up read before it is answered');
  t.is(socket.ends + socket.destroySoons, 1, 'then it closes');
});

test('a release behind a full pipeline whose answers took longer than the stale limit never runs (no stall)', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, clock, refused } = clusterConnection(service);
  socket.emit('data', deepPipeline(req.release('K', '1', 'a')));
  clock.advance(STALE_MS + 1);
  answerAll();
  for (let turn = 0; turn < 8 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.false(calls.some((c) => c.name === 'release'));
  t.is(refused(), 1);
  t.is(socket.ends + socket.destroySoons, 1);
});

test('behind slow answers, a read still runs (it answers from the table as it is then); its receivedAt is when it was read', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, clock, refused } = clusterConnection(service);
  const readAt = clock.now();
  socket.emit('data', deepPipeline(req.location('K', '1', 'a')));
  clock.advance(STALE_MS + 1);
  answerAll();
  await settled();
  const location = calls.find((c) => c.name === 'location');
  t.truthy(location, 'the read ran');
  t.is(location?.receivedAt, readAt, 'counted from its read, not its decode');
  t.is(refused(), 0);
});

test('within the stale limit, the tail runs with the time it was read: its commit deadline counts from there', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, clock, refused } = clusterConnection(service);
  const readAt = clock.now();
  socket.emit('data', deepPipeline(req.release('K', '1', 'a')));
  clock.advance(STALE_MS / 2);
  answerAll();
  await settled();
  const release = calls.find((c) => c.name === 'release');
  t.is(release?.receivedAt, readAt);
  t.is(refused(), 0);
});

test('after reading was paused longer than the stale limit, the next command that changes the table halts the connection; reads before it run', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, clock, refused } = clusterConnection(service);
  socket.takesWrites = false;
  socket.emit('data', frames(req.findOwner('K', '1')));
  answerAll();
  await settled();
  t.true(socket.paused, 'the client reads none of our replies: we read none of its input');
  clock.advance(STALE_MS + 1);
  socket.takesWrites = true;
  socket.emit('drain');
  t.false(socket.paused);
  // Whatever comes now may have waited in the socket since the pause began.
  socket.emit('data', frames(req.findOwner('K', '2'), req.request('K', '1', 'a')));
  answerAll();
  for (let turn = 0; turn < 8 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.deepEqual(
    calls.map((c) => c.name),
    ['findOwner', 'findOwner'],
  );
  t.is(refused(), 1);
  t.is(socket.ends + socket.destroySoons, 1);
});

test('a list waiting for its answer holds the commands behind it undecoded: one list answer at a time per connection', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket } = clusterConnection(service);
  socket.emit('data', frames(req.list('K'), req.list('K'), req.findOwner('K', '1'), req.list('K')));
  t.deepEqual(
    calls.map((c) => c.name),
    ['list'],
  );
  answerAll();
  await settled();
  t.deepEqual(
    calls.map((c) => c.name),
    ['list', 'list'],
  );
  answerAll();
  await settled();
  t.deepEqual(
    calls.map((c) => c.name),
    ['list', 'list', 'findOwner', 'list'],
  );
  answerAll();
  await settled();
  t.is(socket.bytesWritten, 3 * 2 + 1, 'four replies: three empty lists and no owner');
});

test('behind a wait (0x0B), a read runs once the wait is answered, its commit deadline counted from then; a write held there past the stale limit never runs', async (t) => {
  const { service, calls, answerAll } = heldService();
  const { socket, clock, refused } = clusterConnection(service);
  const wait: Request = { command: Command.AcquireWait, key: 'K', index: '1', owner: 'a', ttl: 0, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND };
  socket.emit('data', frames(wait, req.location('K', '1', 'a'), req.release('K', '1', 'a')));
  t.deepEqual(
    calls.map((c) => c.name),
    ['acquire'],
    'nothing behind the wait runs while it waits',
  );
  clock.advance(STALE_MS * 10);
  const answeredAt = clock.now();
  answerAll();
  await settled();
  const location = calls.find((c) => c.name === 'location');
  t.is(location?.receivedAt, answeredAt, 'the read counts from when decoding went on, not from its read');
  answerAll();
  for (let turn = 0; turn < 8 && socket.ends + socket.destroySoons === 0; turn++) await settled();
  t.false(
    calls.some((c) => c.name === 'release'),
    'the release, read long before, never runs',
  );
  t.is(refused(), 1);
  t.is(socket.ends + socket.destroySoons, 1);
});
