import test from 'ava';
import { connect } from 'node:net';
import { bounded } from '../helpers/bounded.js';
import { CLIENT_WAIT_MS } from '../helpers/rawClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { ask, frames, pipeline, req } from '../helpers/wire.js';

// Issue 8: defect 3 (a reset before the greeting is no refusal) and --idle-timeout.

test('a connection reset before its greeting is logged as lost, not counted or logged as refused', async (t) => {
  const server = await startServer(t);
  const lost = server.nextEvent('connection-lost-before-greeting');
  // While the server is stopped, the kernel completes the handshake and then takes the reset: the
  // server later accepts a socket whose peer address can no longer be read.
  server.signal('SIGSTOP');
  t.teardown(() => server.signal('SIGCONT'));
  const socket = connect({ port: server.port, host: '127.0.0.1' });
  socket.on('error', () => {});
  await bounded(
    new Promise<void>((resolve) => {
      socket.once('connect', () => {
        socket.resetAndDestroy();
        socket.once('close', () => resolve());
      });
    }),
    CLIENT_WAIT_MS,
    'connecting and resetting',
  );
  server.signal('SIGCONT');
  await lost;
  t.deepEqual(server.eventsNamed('refused'), [], 'no refusal logged');
  const client = await server.accepted();
  t.like(await ask.stats(client), { acceptedConnections: 1, rejectedNotInHosts: 0, rejectedTooBusy: 0, activeConnections: 1 });
});

test('--idle-timeout closes a connection with no traffic for that long, and not a busy one', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.0/8\n', args: ['--idle-timeout', '2'] });
  const idleTimedOut = server.nextEvent('idle-timeout', (e) => e.fields.peer === '127.0.0.2');
  const idle = await server.accepted({ localAddress: '127.0.0.2' });
  await ask.findOwner(idle, 'k', '1');
  const busy = await server.accepted({ localAddress: '127.0.0.3' });
  // The busy client asks again and again (no pauses) until the idle one has been shown out.
  let timedOut = false;
  void idleTimedOut.then(
    () => (timedOut = true),
    () => {},
  );
  let asked = 0;
  while (!timedOut && !idle.isClosed) {
    await ask.findOwner(busy, 'k', '1');
    asked++;
  }
  await idleTimedOut;
  await idle.waitForClose();
  t.false(busy.isClosed, `the busy client (${asked} requests meanwhile) is still connected`);
  t.is(await ask.findOwner(busy, 'k', '1'), '');
  t.deepEqual(
    server.eventsNamed('idle-timeout').map((e) => e.fields.peer),
    ['127.0.0.2'],
  );
});

test('--idle-timeout also closes a client that stopped reading its replies, at once', async (t) => {
  const server = await startServer(t, { args: ['--idle-timeout', '1'] });
  const stalled = await server.accepted();
  await pipeline(stalled, ...Array.from({ length: 40 }, (_, n) => req.request('K', '1', String(n).padStart(200, 'o'))));
  stalled.socket.pause();
  const timedOut = server.nextEvent('idle-timeout');
  // ~17 MB of list replies: far more than the socket buffers hold while nobody reads them.
  stalled.send(frames(...Array.from({ length: 2_000 }, () => req.list('K'))));
  await timedOut;
  const checker = await server.accepted();
  t.like(await ask.stats(checker), { activeConnections: 1 }, 'closed at once, its unread replies dropped');
  stalled.socket.resume();
  await stalled.waitForClose();
  t.is(server.eventsNamed('idle-timeout').length, 1);
});
