/**
 * A server that speaks the LockServer framing but holds no locks: it greets, cuts the byte stream
 * into request frames and answers each with a fixed reply of the right shape (cannedReplies.ts).
 * Whatever rate the load generator reaches against it is the generator's own ceiling on this machine.
 *
 *   node dist/scripts/benchmark/targets/nullServer.js [listen-address]
 */
import { createServer } from 'node:net';
import { CANNED_REPLIES, FrameCutter, GREETING } from './cannedReplies.js';

const REPLY_CAPACITY = 64 * 1024;

const server = createServer({ noDelay: true }, (socket) => {
  socket.on('error', () => {});
  socket.write(GREETING);
  const frames = new FrameCutter();
  const out = Buffer.allocUnsafe(REPLY_CAPACITY);
  let written = 0;
  const onFrame = (input: Buffer, offset: number): void => {
    const reply = CANNED_REPLIES[input[offset]!]!;
    if (written + reply.length > out.length) {
      socket.write(Buffer.from(out.subarray(0, written)));
      written = 0;
    }
    written += reply.copy(out, written);
  };
  socket.on('data', (chunk: Buffer) => {
    if (!frames.feed(chunk, onFrame)) {
      socket.destroy();
      return;
    }
    if (written > 0) socket.write(Buffer.from(out.subarray(0, written)));
    written = 0;
  });
});

server.listen({ port: 0, host: process.argv[2] ?? '127.0.0.1' }, () => {
  const { port } = server.address() as { port: number };
  process.stderr.write(`event=started server=null port=${port} pid=${process.pid}\n`);
});
process.on('SIGTERM', () => process.exit(0));
