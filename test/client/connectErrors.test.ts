import { createServer, type Socket } from 'node:net';
import test from 'ava';
import {
  ConnectError,
  ConnectionClosedError,
  ConnectTimeoutError,
  LockClientError,
  LockTimeoutError,
  ProtocolError,
  RequestTimeoutError,
  ServerRefusedError,
} from '../../src/client/errors.js';
import { LockClient } from '../../src/client/LockClient.js';
import { connectClient, fakeServer } from '../helpers/lockClient.js';
import { startServer } from '../helpers/serverProcess.js';
import { stalledPort } from '../helpers/stalledListener.js';

test('a server that accepts the TCP connection but never greets: connect times out', async (t) => {
  const port = await fakeServer(t, () => {});
  // Long enough for a loopback TCP connection on a loaded machine: the wait is for the greeting.
  const error = await t.throwsAsync(LockClient.connect({ port, connectTimeoutMs: 2_000 }), { instanceOf: ConnectTimeoutError });
  t.true(error instanceof LockTimeoutError && error instanceof LockClientError);
  t.is(error.stage, 'greeting');
  t.is(error.message, `connected to 127.0.0.1:${port}, but no greeting within 2000 ms`);
});

test('a TCP connection that never completes: connect times out, saying so (not "no greeting")', async (t) => {
  const port = await stalledPort(t);
  const error = await t.throwsAsync(LockClient.connect({ port, connectTimeoutMs: 200 }), { instanceOf: ConnectTimeoutError });
  t.is(error.stage, 'tcp');
  t.is(error.message, `no TCP connection to 127.0.0.1:${port} within 200 ms`);
});

test('a server that greets but never answers: the request times out and the connection closes', async (t) => {
  const port = await fakeServer(t, (socket) => socket.write(Buffer.from([0x01])));
  const client = await LockClient.connect({ port, requestTimeoutMs: 200 });
  const first = client.stats();
  const second = client.findOwner('k', 'i');
  await t.throwsAsync(first, { instanceOf: RequestTimeoutError, message: /no reply to stats within 200 ms/ });
  await t.throwsAsync(second, { instanceOf: ConnectionClosedError, message: /earlier reply timed out/ });
  await client.closed;
  await t.throwsAsync(client.stats(), { instanceOf: ConnectionClosedError });
});

test('nothing listening: ConnectError with the system code', async (t) => {
  // Find a port that is free by closing a listener we own; nothing else binds 127.0.0.1 ports here.
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const freePort = (closed.address() as { port: number }).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const error = await t.throwsAsync(LockClient.connect({ port: freePort }), { instanceOf: ConnectError });
  t.is(error.code, 'ECONNREFUSED');
  t.regex(error.message, new RegExp(`^cannot connect to 127\\.0\\.0\\.1:${freePort}: .*ECONNREFUSED`));
});

test('greeting 0x00 from a peer not in the hosts file: ServerRefusedError naming both possible reasons', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.1\n' });
  const error = await t.throwsAsync(LockClient.connect({ port: server.port, localAddress: '127.0.0.2' }), {
    instanceOf: ServerRefusedError,
  });
  t.regex(error.message, /refused: not in hosts file or too busy/);
  const stats = await (await connectClient(t, server.port)).stats();
  t.is(stats.rejectedNotInHosts, 1);
});

test('greeting 0x00 when the server is too busy: the same error', async (t) => {
  const server = await startServer(t, { args: ['--max-connections', '1'] });
  const first = await connectClient(t, server.port);
  await t.throwsAsync(LockClient.connect({ port: server.port }), { instanceOf: ServerRefusedError });
  t.is((await first.stats()).rejectedTooBusy, 1);
});

test('a greeting byte other than 0 or 1 is a protocol error', async (t) => {
  const port = await fakeServer(t, (socket) => socket.write(Buffer.from([0x07])));
  await t.throwsAsync(LockClient.connect({ port }), { instanceOf: ProtocolError, message: /0x7/ });
});

test('a server that closes before greeting: ConnectError', async (t) => {
  const port = await fakeServer(t, (socket) => socket.destroy());
  await t.throwsAsync(LockClient.connect({ port }), { instanceOf: ConnectError });
});

test('bytes nobody asked for close the connection', async (t) => {
  let greeted!: (socket: Socket) => void;
  const peer = new Promise<Socket>((resolve) => (greeted = resolve));
  const port = await fakeServer(t, (socket) => {
    socket.write(Buffer.from([0x01]));
    greeted(socket);
  });
  const client = await LockClient.connect({ port });
  (await peer).write(Buffer.from([0x00, 0x01]));
  await client.closed;
  await t.throwsAsync(client.stats(), { instanceOf: ConnectionClosedError });
});

test('the server going away fails what is awaited with ConnectionClosedError', async (t) => {
  const port = await fakeServer(t, (socket) => {
    socket.write(Buffer.from([0x01]));
    socket.once('data', () => socket.destroy());
  });
  const client = await LockClient.connect({ port });
  await t.throwsAsync(client.stats(), { instanceOf: ConnectionClosedError });
});
