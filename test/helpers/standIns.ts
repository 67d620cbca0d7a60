import { createServer, type Server, type Socket } from 'node:net';
import type { ExecutionContext } from 'ava';

/** What a stand-in does with a connection: greet 0x01 (accept) or 0x00 (refuse, then close). */
export type StandInKind = 'accepting' | 'refusing';

/** A stand-in server on 127.0.0.1; `arrivals` records, in one shared log, which stand-in got each connection. */
export interface StandIn {
  readonly name: string;
  readonly port: number;
  readonly address: string;
  /** Connections this stand-in received. */
  readonly connections: () => number;
}

/** Shared by the stand-ins of one test: their names, in the order connections reached them. */
export type ArrivalLog = string[];

/**
 * A listener on 127.0.0.1 that greets every connection with 0x01 (and then says nothing), or
 * with 0x00 and closes, as a lockserver does for a peer it refuses. Closed when the test ends.
 */
export async function standIn(t: ExecutionContext, name: string, kind: StandInKind, log: ArrivalLog = []): Promise<StandIn> {
  const sockets = new Set<Socket>();
  let count = 0;
  const server: Server = createServer((socket) => {
    count++;
    log.push(name);
    sockets.add(socket);
    socket.on('error', () => {});
    if (kind === 'accepting') socket.write(Buffer.from([0x01]));
    else socket.end(Buffer.from([0x00]));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const port = (server.address() as { port: number }).port;
  return { name, port, address: `127.0.0.1:${port}`, connections: () => count };
}

/** A loopback port nothing listens on (a listener we owned, closed): connecting is refused. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
