import test from 'ava';
import { connect, type Socket } from 'node:net';
import { once } from 'node:events';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import type { Logger, LogFields } from '../../src/runtime/Logger.js';
import { FakeClock } from '../doubles/FakeClock.js';
import { idleTimers } from '../doubles/idleTimers.js';
import { bounded } from '../helpers/bounded.js';
import { listenInProcess } from '../helpers/lockClient.js';
import { frames, req } from '../helpers/wire.js';

// Each connection holds at most one list answer, but one list of a busy key is tens of megabytes:
// clients that ask for such lists and do not read them must not take the server's memory. Past
// the bound on unread replies over all connections, the connection holding the most is closed.

const BOUND = 40 * 1024 * 1024;
const ENTRIES = 65_535;
const HOGS = 3;

test('clients that ask for huge lists and never read them: past the bound on unread replies the largest holders are closed, the rest are served', async (t) => {
  t.timeout(120_000);
  const service = new LocalLockService(new FakeClock(), idleTimers);
  // One key with 65,535 entries of 255-byte owners: each list reply is about 35 MB.
  const owner = (n: number): string => `${n}`.padStart(255, '.');
  for (let n = 0; n < ENTRIES; n++) service.request({ key: 'big', index: '1', owner: owner(n), ttl: 0, ttw: 0, priority: 0 }, true);
  let droppedOne!: (fields: LogFields | undefined) => void;
  const dropped = new Promise<LogFields | undefined>((resolve) => (droppedOne = resolve));
  const logger: Logger = { event: (event, fields) => event === 'unread-output-dropped' && droppedOne(fields), debug: undefined };
  const { port, server } = await listenInProcess(t, service, new FakeClock(), { logger, maxUnreadOutputBytes: BOUND });
  // Three hogs ask for the list and never read: what the kernel does not take waits in the server.
  const hogs: Socket[] = [];
  for (let i = 0; i < HOGS; i++) {
    const socket = connect({ host: '127.0.0.1', port });
    await once(socket, 'connect');
    socket.pause();
    socket.on('error', () => {});
    socket.write(frames(req.list('big')));
    hogs.push(socket);
    t.teardown(() => socket.destroy());
  }
  const fields = await bounded(dropped, 60_000, 'a hog to be dropped');
  t.true(Number(fields?.bytes) > 0);
  t.true(Number(fields?.bytes) <= BOUND, 'one list, at most: each connection holds one');
  // A paused client does not read its socket, so it is the server's side that shows the close.
  await bounded(
    (async () => {
      while (server.activeConnections >= HOGS) await new Promise((resolve) => setTimeout(resolve, 10));
    })(),
    30_000,
    'the dropped hog to be gone',
  );
  t.true(server.activeConnections < HOGS, 'a hog was closed by the server');
  // A client that reads its replies is served as before.
  const reader = connect({ host: '127.0.0.1', port });
  await once(reader, 'connect');
  t.teardown(() => reader.destroy());
  const reply: Buffer[] = [];
  reader.on('data', (chunk: Buffer) => reply.push(chunk));
  reader.write(frames(req.findOwner('big', '1')));
  await bounded(
    (async () => {
      while (Buffer.concat(reply).length < 1 + 1 + 255) await once(reader, 'data');
    })(),
    30_000,
    'the reader to be answered',
  );
  t.is(Buffer.concat(reply).subarray(2).toString('latin1'), owner(0));
});
