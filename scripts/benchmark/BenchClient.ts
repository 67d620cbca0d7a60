import { connect, type Socket } from 'node:net';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { GREETING_ACCEPTED, type Command } from '../../src/protocol/constants.js';
import { replyFrameLength } from '../../src/protocol/decodeReply.js';
import { encodeRequest } from '../../src/protocol/encodeRequest.js';
import { INCOMPLETE } from '../../src/protocol/framing.js';
import type { Request } from '../../src/protocol/messages.js';
import type { Endpoint } from './load/messages.js';

const CONNECT_TIMEOUT_MS = 10_000;

interface Pending {
  readonly commands: readonly Command[];
  readonly replies: Buffer[];
  readonly resolve: (replies: Buffer[]) => void;
  readonly reject: (error: Error) => void;
}

/** The frames of `requests`, back to back. */
export function encodeRequests(requests: readonly Request[]): Buffer {
  const writer = new BufferWriter(Math.max(64, 64 * requests.length));
  for (const r of requests) encodeRequest(writer, r);
  return writer.flush();
}

/**
 * A small pipelining LockServer client for setting scenes up (filling the table, listing, polling
 * stats, contending). Not the load generator: it allocates freely and is used off the measured path
 * or where each call is timed on its own.
 */
export class BenchClient {
  private readonly queue: Pending[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  private closedWith: Error | undefined;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    const onGone = (error?: Error): void => {
      this.closedWith ??= error ?? new Error('connection closed');
      for (const p of this.queue.splice(0)) p.reject(this.closedWith);
    };
    socket.on('error', onGone);
    socket.on('close', () => onGone());
  }

  /** Connects and waits for the greeting; rejects when refused. */
  static connect(endpoint: Endpoint, timeoutMs = CONNECT_TIMEOUT_MS): Promise<BenchClient> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: endpoint.host, port: endpoint.port, noDelay: true });
      const timer = setTimeout(() => fail(new Error(`connect to ${endpoint.host}:${endpoint.port} timed out`)), timeoutMs);
      const fail = (error: Error): void => {
        clearTimeout(timer);
        socket.destroy();
        reject(error);
      };
      socket.once('error', fail);
      socket.once('data', (chunk: Buffer) => {
        clearTimeout(timer);
        socket.off('error', fail);
        if (chunk[0] !== GREETING_ACCEPTED) {
          fail(new Error(`refused by ${endpoint.host}:${endpoint.port}`));
          return;
        }
        const client = new BenchClient(socket);
        if (chunk.length > 1) client.onData(chunk.subarray(1));
        resolve(client);
      });
    });
  }

  /** Sends pre-encoded frames and resolves with one reply frame per command, in order. */
  send(frames: Buffer, commands: readonly Command[]): Promise<Buffer[]> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith);
    return new Promise((resolve, reject) => {
      this.queue.push({ commands, replies: [], resolve, reject });
      this.socket.write(frames);
    });
  }

  /** Encodes and sends requests; resolves with their reply frames. */
  call(requests: readonly Request[]): Promise<Buffer[]> {
    return this.send(
      encodeRequests(requests),
      requests.map((r) => r.command),
    );
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    let offset = 0;
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const command = head.commands[head.replies.length]!;
      const length = replyFrameLength(command, this.buffer, offset, this.buffer.length);
      if (length === INCOMPLETE) break;
      head.replies.push(this.buffer.subarray(offset, offset + length));
      offset += length;
      if (head.replies.length === head.commands.length) {
        this.queue.shift();
        head.resolve(head.replies);
      }
    }
    this.buffer = offset === this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(offset);
  }
}
