import test, { type ExecutionContext } from 'ava';
import { connect, type Socket } from 'node:net';
import { Command } from '../../src/protocol/constants.js';
import { bounded } from '../helpers/bounded.js';
import { CLIENT_WAIT_MS } from '../helpers/rawClient.js';
import { startServer, type ServerProcess } from '../helpers/serverProcess.js';
import { ask, frames, pipeline, readReply, req } from '../helpers/wire.js';

// Issue 8, defects 1 and 2: one connection's long pipeline must neither hold up everybody else
// nor be cut off by the frame timeout while all its frames are complete.

/**
 * A client that only counts what it receives (a heavy reader: megabytes of replies, no copies).
 * Resolves once greeted; the socket is destroyed when the test ends.
 */
async function countingClient(t: ExecutionContext, port: number, localAddress = '127.0.0.1'): Promise<CountingClient> {
  const socket = connect({ port, host: '127.0.0.1', localAddress });
  t.teardown(() => {
    socket.destroy();
  });
  const client = new CountingClient(socket);
  await client.received(1);
  if (client.first !== 0x01) throw new Error(`expected greeting 0x01, got ${client.first}`);
  return client;
}

class CountingClient {
  count = 0;
  first: number | undefined;
  closed = false;
  private waiter: { readonly bytes: number; readonly resolve: () => void } | undefined;

  constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.first ??= chunk[0];
      this.count += chunk.length;
      this.wake();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
  }

  private wake(): void {
    if (this.waiter !== undefined && (this.count >= this.waiter.bytes || this.closed)) this.waiter.resolve();
  }

  /** Waits (bounded) until `bytes` in all have arrived; fails if the connection closes first. */
  async received(bytes: number, ms = CLIENT_WAIT_MS): Promise<void> {
    await bounded(
      new Promise<void>((resolve) => {
        this.waiter = { bytes, resolve };
        this.wake();
      }),
      ms,
      () => `${bytes} bytes (have ${this.count})`,
    );
    this.waiter = undefined;
    if (this.count < bytes) throw new Error(`connection closed after ${this.count} of ${bytes} bytes`);
  }

  /** Writes and resolves once the bytes are with the kernel. */
  write(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => this.socket.write(bytes, (error) => (error ? reject(error) : resolve())));
  }
}

/** Fills key K with `entries` entries whose owners are `ownerBytes` long; returns the size of a list reply. */
async function fillKey(server: ServerProcess, entries: number, ownerBytes: number): Promise<number> {
  const setup = await server.accepted();
  const owner = (n: number): string => String(n).padStart(ownerBytes, 'o');
  await pipeline(setup, ...Array.from({ length: entries }, (_, n) => req.request('K', '1', owner(n))));
  setup.send(frames(req.list('K')));
  const listed = (await readReply(setup, Command.List)).length;
  if (listed !== entries) throw new Error(`setting up: K holds ${listed} entries, not ${entries}`);
  setup.destroy();
  // priority, ttl, ttw, index, owner, owner flag per entry; a two-byte count first.
  return 2 + entries * (1 + 2 + 2 + 2 + 1 + ownerBytes + 1);
}

/**
 * How many of the heavy batch's commands (find owner or list) had run when another connection's
 * stats request ran. Both requests wait in the kernel while the server is stopped, the heavy pipeline first; when it
 * resumes, it finds both connections readable at once. Before each connection's work was bounded
 * per turn, the whole pipeline was answered before the stats request was even read.
 */
async function statsDuringPipeline(t: ExecutionContext, server: ServerProcess, heavyBatch: Buffer): Promise<number> {
  const heavy = await countingClient(t, server.port);
  const other = await server.accepted();
  const before = await ask.stats(other);
  server.signal('SIGSTOP');
  t.teardown(() => server.signal('SIGCONT'));
  await heavy.write(heavyBatch);
  await new Promise<void>((resolve) => other.socket.write(frames(req.stats()), () => resolve()));
  server.signal('SIGCONT');
  const stats = await readReply(other, Command.Stats);
  return stats.listRequests + stats.ownerLookups - (before.listRequests + before.ownerLookups);
}

test('a long pipeline of small commands does not hold up another connection (commands per turn)', async (t) => {
  const server = await startServer(t);
  const sent = 12_000; // 60 KB of requests: one read, and their replies never fill a socket buffer
  const heavyBatch = frames(...Array.from({ length: sent }, () => req.findOwner('K', '1')));
  const doneBefore = await statsDuringPipeline(t, server, heavyBatch);
  t.true(doneBefore < sent, `the stats request ran after ${doneBefore} of the ${sent} pipelined commands, not after all`);
});

test('a long pipeline of large list replies does not hold up another connection (reply bytes per turn)', async (t) => {
  const server = await startServer(t);
  const listBytes = await fillKey(server, 50, 200); // ~10 KB a reply
  const sent = 20;
  const heavyBatch = frames(...Array.from({ length: sent }, () => req.list('K')));
  const doneBefore = await statsDuringPipeline(t, server, heavyBatch);
  t.true(doneBefore < sent, `the stats request ran after ${doneBefore} of the ${sent} lists (${listBytes} bytes each), not after all`);
});

test('--frame-timeout does not cut a client whose frames are all complete while its replies back up', async (t) => {
  const server = await startServer(t, { hosts: '127.0.0.0/8\n', args: ['--frame-timeout', '1'] });
  const listBytes = await fillKey(server, 200, 200); // ~42 KB a reply
  const lists = 200; // ~8 MB of replies: more than the kernel buffers while the client does not read
  const reader = await countingClient(t, server.port);

  // A stats request and the first byte of a list: once the stats reply is here, the server has
  // seen the incomplete frame and started its timer.
  await reader.write(Buffer.concat([frames(req.stats()), Buffer.from([Command.List])]));
  await reader.received(1 + 58);
  // The rest of that frame and many more, while the client stops reading: the replies back up.
  reader.socket.pause();
  await reader.write(Buffer.concat([frames(req.list('K')).subarray(1), frames(...Array.from({ length: lists - 1 }, () => req.list('K')))]));

  // A second client's incomplete frame, started after the first one's: its timeout proves the
  // first one's time (had it still been running) has passed too.
  const timedOut = server.nextEvent('frame-timeout', (e) => e.fields.peer === '127.0.0.2');
  const slow = await server.accepted({ localAddress: '127.0.0.2' });
  slow.send([Command.List]);
  await timedOut;
  t.deepEqual(
    server.eventsNamed('frame-timeout').map((e) => e.fields.peer),
    ['127.0.0.2'],
    'only the client with an incomplete frame timed out',
  );

  reader.socket.resume();
  await reader.received(1 + 58 + lists * listBytes, 30_000);
  t.false(reader.closed, 'the reader is still connected');
});
