import type { ExecutionContext } from 'ava';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { LockClient, type LockClientOptions } from '../../src/client/LockClient.js';
import { LocalLockService } from '../../src/locks/LocalLockService.js';
import type { LockService } from '../../src/locks/LockService.js';
import { Command } from '../../src/protocol/constants.js';
import { requestFrameLength } from '../../src/protocol/decodeRequest.js';
import { INCOMPLETE } from '../../src/protocol/framing.js';
import { systemClock, type Clock } from '../../src/runtime/Clock.js';
import { silentLogger } from '../../src/runtime/Logger.js';
import { AllowList } from '../../src/server/AllowList.js';
import { LockServer, type LockServerOptions } from '../../src/server/LockServer.js';
import { get, sample } from './metrics.js';
import { startServer, type ServerProcess } from './serverProcess.js';

/** A LockClient on 127.0.0.1:port, destroyed when the test ends if the test did not close it. */
export async function connectClient(t: ExecutionContext, port: number, options: Omit<LockClientOptions, 'port'> = {}): Promise<LockClient> {
  const client = await LockClient.connect({ host: '127.0.0.1', ...options, port });
  t.teardown(() => client.destroy());
  return client;
}

/**
 * A stand-in server on 127.0.0.1 that does whatever `onConnection` says (usually: too little).
 * Sockets it accepted are destroyed when the test ends. Resolves to its port.
 */
export async function fakeServer(t: ExecutionContext, onConnection: (socket: Socket) => void): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as { port: number }).port;
}

/**
 * The real server, with its metrics endpoint, and how many commands of one kind it has received
 * (`lockserver_commands_total`, by COMMAND_NAMES): the stats reply (0x08) counts only 0.9b's
 * commands, not request with fence (0x0A).
 */
export async function startCountingServer(t: ExecutionContext): Promise<{ server: ServerProcess; received: (command: string) => Promise<number> }> {
  const server = await startServer(t, { args: ['--metrics-port', '0', '--metrics-listen', '127.0.0.1'] });
  const metricsPort = Number((await server.event('metrics-started')).fields.port);
  const received = async (command: string): Promise<number> => {
    const { body } = await get(metricsPort, '/metrics');
    const count = sample(body, `lockserver_commands_total{command="${command}"}`);
    if (count === undefined) throw new Error(`no count of ${command} in the metrics`);
    return count;
  };
  return { server, received };
}

/**
 * A LockServer 0.9b as its clients see it, in front of the real server on `port`: the eight 0.9b
 * commands go through; at any other command byte the connection is closed without an answer to
 * it (the replies to the requests before it still arrive), as 0.9b does. Resolves to its port.
 */
export function oldServerInFrontOf(t: ExecutionContext, port: number): Promise<number> {
  return olderServerInFrontOf(t, port, Command.Stats);
}

/**
 * A lockserver from before waiting without polling, in front of the real server on `port`: the
 * 0.9b commands and the fencing ones (0x09, 0x0A) go through; acquire-and-wait, the loss notice
 * and the detailed list (0x0B–0x0D) close the connection, as any unknown byte does.
 */
export function serverBeforeWaitingInFrontOf(t: ExecutionContext, port: number): Promise<number> {
  return olderServerInFrontOf(t, port, Command.RequestFenced);
}

/** A server that knows the commands up to `lastKnown`, in front of the real server on `port`; resolves to its port. */
async function olderServerInFrontOf(t: ExecutionContext, port: number, lastKnown: Command): Promise<number> {
  const sockets = new Set<Socket>();
  const listener = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port });
    sockets.add(client).add(upstream);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    // The greeting and the replies; the server's end of the connection ends the client's.
    upstream.pipe(client);
    let unsent = Buffer.alloc(0);
    let closing = false;
    client.on('data', (chunk: Buffer) => {
      if (closing) return;
      unsent = Buffer.concat([unsent, chunk]);
      let whole = 0;
      while (whole < unsent.length) {
        const command = unsent[whole]!;
        if (command < Command.FindOwner || command > lastKnown) {
          closing = true;
          break;
        }
        const length = requestFrameLength(unsent, whole, unsent.length);
        if (length === INCOMPLETE) break;
        whole += length;
      }
      upstream.write(unsent.subarray(0, whole));
      unsent = unsent.subarray(whole);
      // The server answers what it has received, then closes: so does 0.9b before an unknown command.
      if (closing) upstream.end();
    });
    client.on('end', () => upstream.end());
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => listener.close(() => resolve()));
  });
  return (listener.address() as { port: number }).port;
}

/**
 * A server in this process around a LocalLockService the test reaches into (to restore an entry
 * with the token a cluster would have given it); stopped when the test ends.
 */
export async function startInProcessServer(t: ExecutionContext): Promise<{ port: number; service: LocalLockService }> {
  const service = new LocalLockService(systemClock);
  const { port } = await listenInProcess(t, service, systemClock);
  return { port, service };
}

/**
 * A LockServer in this process on a loopback port, around `service` (any LockService: a stand-in
 * that answers later, say); at the test's end it stops serving, closes its connections and the service.
 */
export async function listenInProcess(
  t: ExecutionContext,
  service: LockService,
  clock: Clock,
  overrides: Partial<LockServerOptions> = {},
): Promise<{ port: number; server: LockServer }> {
  const server = new LockServer({
    service,
    allowList: AllowList.parse('127.0.0.1\n', 'test hosts'),
    maxConnections: 16,
    frameTimeoutMs: 10_000,
    clock,
    logger: silentLogger,
    ...overrides,
  });
  const { port } = await server.listen(0, '127.0.0.1');
  t.teardown(async () => {
    await server.stopServing();
    server.closeConnections();
    await server.whenAllClosed(1_000);
    await service.close();
  });
  return { port, server };
}
