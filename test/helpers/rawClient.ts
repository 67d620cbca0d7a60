import { connect, type Socket } from 'node:net';
import type { ExecutionContext } from 'ava';
import { INCOMPLETE } from '../../src/protocol/framing.js';
import { bounded } from './bounded.js';

/** Longest a client read or close waits unless the test asks otherwise. */
export const CLIENT_WAIT_MS = 10_000;

export interface ConnectOptions {
  readonly port: number;
  /** Server address; 127.0.0.1 unless given. */
  readonly host?: string;
  /** Local address to bind (127.0.0.2, 127.0.0.3, … to test the allowlist). */
  readonly localAddress?: string;
}

/** Measures the frame at the start of `buffer`: its length, or INCOMPLETE. */
export type FrameMeasure = (buffer: Buffer) => number;

/**
 * A TCP client that speaks raw bytes: every received byte is kept in order, and reads wait
 * (bounded) for exactly as many bytes as asked for, so tests can assert byte-exact replies and
 * notice both missing and extra bytes.
 */
export class RawClient {
  private received: Buffer = Buffer.alloc(0);
  private closedFlag = false;
  private error: Error | undefined;
  private notify: (() => void) | undefined;
  /** Settles when the socket has closed (never rejects). */
  readonly closed: Promise<void>;

  private constructor(readonly socket: Socket) {
    socket.on('data', (chunk: Buffer) => {
      this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk]);
      this.wake();
    });
    socket.on('error', (error) => {
      this.error = error;
      this.wake();
    });
    // The server's FIN ('end') is its close as far as a client can tell; 'close' covers resets.
    this.closed = new Promise((resolve) => {
      const onClosed = (): void => {
        this.closedFlag = true;
        this.wake();
        resolve();
      };
      socket.once('end', onClosed);
      socket.once('close', onClosed);
    });
  }

  /** Connects (bounded); the socket is destroyed when the test ends. */
  static async connect(t: ExecutionContext, options: ConnectOptions): Promise<RawClient> {
    const socket = connect({
      port: options.port,
      host: options.host ?? '127.0.0.1',
      localAddress: options.localAddress,
    });
    t.teardown(() => {
      socket.destroy();
    });
    await bounded(
      new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('error', reject);
      }),
      CLIENT_WAIT_MS,
      `connecting to ${options.host ?? '127.0.0.1'}:${options.port}`,
    );
    return new RawClient(socket);
  }

  get isClosed(): boolean {
    return this.closedFlag;
  }

  /** Bytes received and not yet read. */
  get buffered(): number {
    return this.received.length;
  }

  private wake(): void {
    const notify = this.notify;
    this.notify = undefined;
    notify?.();
  }

  private async waitForChange(ms: number, what: string): Promise<void> {
    await bounded(new Promise<void>((resolve) => (this.notify = resolve)), ms, what);
  }

  send(bytes: Buffer | readonly number[]): void {
    this.socket.write(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
  }

  /** Writes and half-closes, as `nc -N` does. */
  sendAndEnd(bytes: Buffer | readonly number[]): void {
    this.socket.end(Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes));
  }

  /** Reads one frame as measured by `measure`, waiting for more bytes while it is incomplete. */
  async readFrame(measure: FrameMeasure, ms = CLIENT_WAIT_MS): Promise<Buffer> {
    const deadline = Date.now() + ms;
    for (;;) {
      const length = this.received.length === 0 ? INCOMPLETE : measure(this.received);
      if (length !== INCOMPLETE) {
        const frame = this.received.subarray(0, length);
        this.received = this.received.subarray(length);
        return frame;
      }
      if (this.closedFlag || this.error !== undefined) {
        const why = this.error?.message ?? 'closed';
        throw new Error(`connection ${why} with ${this.received.length} byte(s) of an incomplete reply: ${this.received.toString('hex')}`);
      }
      await this.waitForChange(deadline - Date.now(), `a reply (have ${this.received.length} byte(s))`);
    }
  }

  /** Reads exactly `n` bytes. */
  read(n: number, ms = CLIENT_WAIT_MS): Promise<Buffer> {
    return this.readFrame((buffer) => (buffer.length >= n ? n : INCOMPLETE), ms);
  }

  /** Everything the server sends until it closes the connection. */
  async readUntilClose(ms = CLIENT_WAIT_MS): Promise<Buffer> {
    await this.waitForClose(ms);
    const rest = this.received;
    this.received = Buffer.alloc(0);
    return rest;
  }

  /** Awaits the close of the connection by the server (or a reset), bounded. */
  async waitForClose(ms = CLIENT_WAIT_MS): Promise<void> {
    await bounded(this.closed, ms, 'the server to close the connection');
  }

  /** Half-closes our side. */
  end(): void {
    this.socket.end();
  }

  destroy(): void {
    this.socket.destroy();
  }
}
