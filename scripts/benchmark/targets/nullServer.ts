/**
 * A server that speaks the LockServer framing but holds no locks: it greets, cuts the byte stream
 * into request frames and answers each with a fixed reply of the right shape (a request is always
 * "you own it", a release always "1 removed"). Whatever rate the load generator reaches against it
 * is the generator's own ceiling on this machine.
 *
 *   node dist/scripts/benchmark/targets/nullServer.js [listen-address]
 */
import { createServer } from 'node:net';
import { Command, GREETING_ACCEPTED, STATS_REPLY_LENGTH } from '../../../src/protocol/constants.js';
import { requestFrameLength, UnknownCommandError } from '../../../src/protocol/decodeRequest.js';
import { INCOMPLETE } from '../../../src/protocol/framing.js';

const CANNED: ReadonlyArray<Buffer | undefined> = (() => {
  const replies = new Array<Buffer | undefined>(256).fill(undefined);
  replies[Command.FindOwner] = Buffer.from([0]);
  replies[Command.Request] = Buffer.from([0, 1]);
  replies[Command.FindLocation] = Buffer.from([0, 1]);
  replies[Command.Renew] = Buffer.from([1]);
  replies[Command.Release] = Buffer.from([0, 1]);
  replies[Command.ReleaseAll] = Buffer.from([0, 0]);
  replies[Command.List] = Buffer.from([0, 0]);
  replies[Command.Stats] = Buffer.alloc(STATS_REPLY_LENGTH);
  return replies;
})();
const GREETING = Buffer.from([GREETING_ACCEPTED]);
const REPLY_CAPACITY = 64 * 1024;

const server = createServer({ noDelay: true }, (socket) => {
  socket.on('error', () => {});
  socket.write(GREETING);
  let carry: Buffer | undefined;
  const out = Buffer.allocUnsafe(REPLY_CAPACITY);
  socket.on('data', (chunk: Buffer) => {
    const input = carry === undefined ? chunk : Buffer.concat([carry, chunk]);
    carry = undefined;
    let offset = 0;
    let written = 0;
    try {
      for (;;) {
        const length = requestFrameLength(input, offset, input.length);
        if (length === INCOMPLETE) break;
        const reply = CANNED[input[offset]!]!;
        if (written + reply.length > out.length) {
          socket.write(Buffer.from(out.subarray(0, written)));
          written = 0;
        }
        written += reply.copy(out, written);
        offset += length;
      }
    } catch (error) {
      if (!(error instanceof UnknownCommandError)) throw error;
      socket.destroy();
      return;
    }
    if (offset < input.length) carry = Buffer.from(input.subarray(offset));
    if (written > 0) socket.write(Buffer.from(out.subarray(0, written)));
  });
});

server.listen({ port: 0, host: process.argv[2] ?? '127.0.0.1' }, () => {
  const { port } = server.address() as { port: number };
  process.stderr.write(`event=started server=null port=${port} pid=${process.pid}\n`);
});
process.on('SIGTERM', () => process.exit(0));
