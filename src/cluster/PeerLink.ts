import { createServer, connect, type Server, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { LentFence } from './EtcdLog.js';
import type { Sequencer } from './Sequencer.js';
import { AppendRefusedError, type LogPosition } from './ReplicatedLog.js';

/**
 * The link from a node to the sequencer (issue 20). Frames, big-endian, each `length(u32) type(u8) …`:
 *   forward  (1): id(u32) leftMs(u32) leaseId(u8 length + ASCII) fenceKey(u8 length + bytes) value(the rest)
 *   outcome  (2): id(u32) kind(u8: 0 committed, 1 refused, 2 refused for a gone lease, 3 unknown) version(f64) revision(f64)
 * `leftMs` is the time the forwarding node's writer lease had left as it sent: the sequencer does not
 * send a batch whose lease is about to end (it would have the whole bundle refused).
 */
const FORWARD = 1;
const OUTCOME = 2;
const enum Outcome {
  Committed = 0,
  Refused = 1,
  LeaseGone = 2,
  Unknown = 3,
}
/** The longest frame either side accepts: a batch (under 1.5 MiB) and its header. */
const MAX_FRAME_BYTES = 2 * 1024 * 1024;

/** Cuts a byte stream into frames (the length prefix removed), carrying an unfinished one over. */
class FrameCutter {
  private carry: Buffer | undefined;

  feed(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    let input = this.carry === undefined ? chunk : Buffer.concat([this.carry, chunk]);
    this.carry = undefined;
    let at = 0;
    while (at + 4 <= input.length) {
      const length = input.readUInt32BE(at);
      if (length > MAX_FRAME_BYTES || length < 1) throw new Error(`peer frame of ${length} bytes`);
      if (at + 4 + length > input.length) break;
      onFrame(input.subarray(at + 4, at + 4 + length));
      at += 4 + length;
    }
    if (at < input.length) {
      input = input.subarray(at);
      this.carry = Buffer.from(input);
    }
  }
}

function forwardFrame(id: number, value: Uint8Array, fence: LentFence, leftMs: number): Buffer[] {
  const leaseId = Buffer.from(fence.leaseId, 'latin1');
  const head = Buffer.allocUnsafe(4 + 1 + 4 + 4 + 1 + leaseId.length + 1 + fence.fenceKey.length);
  let at = head.writeUInt32BE(head.length - 4 + value.length, 0);
  at = head.writeUInt8(FORWARD, at);
  at = head.writeUInt32BE(id, at);
  at = head.writeUInt32BE(Math.max(0, Math.min(0xffffffff, Math.floor(leftMs))), at);
  at = head.writeUInt8(leaseId.length, at);
  at += leaseId.copy(head, at);
  at = head.writeUInt8(fence.fenceKey.length, at);
  head.set(fence.fenceKey, at);
  return [head, Buffer.from(value.buffer, value.byteOffset, value.byteLength)];
}

function outcomeFrame(id: number, kind: Outcome, position?: LogPosition): Buffer {
  const out = Buffer.allocUnsafe(4 + 1 + 4 + 1 + 8 + 8);
  let at = out.writeUInt32BE(out.length - 4, 0);
  at = out.writeUInt8(OUTCOME, at);
  at = out.writeUInt32BE(id, at);
  at = out.writeUInt8(kind, at);
  at = out.writeDoubleBE(position?.version ?? 0, at);
  out.writeDoubleBE(position?.revision ?? 0, at);
  return out;
}

/** The sequencer's side: accepts forwarding nodes and hands their batches to the sequencer. */
export class SequencerListener {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();

  constructor(private readonly sequencer: Sequencer) {
    this.server = createServer((socket) => this.accept(socket));
  }

  listen(port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
  }

  close(): void {
    this.server.close();
    for (const s of this.sockets) s.destroy();
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.setNoDelay(true);
    const cutter = new FrameCutter();
    socket.on('data', (chunk: Buffer) => {
      try {
        cutter.feed(chunk, (frame) => this.onFrame(socket, frame));
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => this.sockets.delete(socket));
  }

  private onFrame(socket: Socket, frame: Buffer): void {
    if (frame.length < 10 || frame[0] !== FORWARD) throw new Error('not a forward frame');
    const id = frame.readUInt32BE(1);
    const leftMs = frame.readUInt32BE(5);
    let at = 9;
    const leaseLength = frame[at++]!;
    if (at + leaseLength + 1 > frame.length) throw new Error('forward frame cut short');
    const leaseId = frame.toString('latin1', at, at + leaseLength);
    at += leaseLength;
    const keyLength = frame[at++]!;
    if (at + keyLength > frame.length) throw new Error('forward frame cut short');
    const fenceKey = Buffer.from(frame.subarray(at, at + keyLength));
    at += keyLength;
    const value = Buffer.from(frame.subarray(at));
    const fence: LentFence = { leaseId, fenceKey, endsAt: performance.now() + leftMs };
    this.sequencer.submit(value, fence).then(
      (position) => socket.write(outcomeFrame(id, Outcome.Committed, position)),
      (error: unknown) => {
        const kind = error instanceof AppendRefusedError ? (error.leaseGone ? Outcome.LeaseGone : Outcome.Refused) : Outcome.Unknown;
        if (!socket.destroyed) socket.write(outcomeFrame(id, kind));
      },
    );
  }
}

interface Pending {
  readonly resolve: (position: LogPosition) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** Pause before a lost link to the sequencer is dialled again. */
const REDIAL_MS = 500;

/** A forwarding node's side: one connection to the sequencer, redialled when it drops. */
export class SequencerLink {
  private socket: Socket | undefined;
  private connected = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  constructor(
    private readonly port: number,
    private readonly host: string,
  ) {
    this.dial();
  }

  get up(): boolean {
    return this.connected;
  }

  /**
   * Sends `value` to the sequencer, fenced by `fence`. Resolves with its position once committed;
   * rejects with AppendRefusedError when the sequencer says it can never commit from this
   * attempt, with any other error when the outcome is unknown (it may still commit within the
   * fence's bound).
   */
  forward(value: Uint8Array, fence: LentFence, timeoutMs: number): Promise<LogPosition> {
    const socket = this.socket;
    if (!this.connected || socket === undefined) return Promise.reject(new AppendRefusedError('no link to the sequencer: not sent'));
    const id = this.nextId;
    this.nextId = this.nextId === 0xffffffff ? 1 : this.nextId + 1;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`forwarded append: no outcome within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      for (const part of forwardFrame(id, value, fence, fence.endsAt - performance.now())) socket.write(part);
    });
  }

  close(): void {
    this.closed = true;
    this.socket?.destroy();
    this.failAll(new Error('link to the sequencer closed'));
  }

  private dial(): void {
    if (this.closed) return;
    const socket = connect({ port: this.port, host: this.host });
    this.socket = socket;
    socket.setNoDelay(true);
    const cutter = new FrameCutter();
    socket.on('connect', () => (this.connected = true));
    socket.on('data', (chunk: Buffer) => {
      try {
        cutter.feed(chunk, (frame) => this.onFrame(frame));
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      this.connected = false;
      this.failAll(new Error('link to the sequencer lost'));
      if (!this.closed) setTimeout(() => this.dial(), REDIAL_MS).unref();
    });
  }

  private onFrame(frame: Buffer): void {
    if (frame.length < 22 || frame[0] !== OUTCOME) throw new Error('not an outcome frame');
    const id = frame.readUInt32BE(1);
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    clearTimeout(p.timer);
    const kind = frame[5] as Outcome;
    if (kind === Outcome.Committed) p.resolve({ version: frame.readDoubleBE(6), revision: frame.readDoubleBE(14) });
    else if (kind === Outcome.Refused) p.reject(new AppendRefusedError('refused by the sequencer'));
    else if (kind === Outcome.LeaseGone) p.reject(new AppendRefusedError('refused by etcd: a fence lease of the bundle was gone', true));
    else p.reject(new Error('the sequencer does not know whether the bundle committed'));
  }

  private failAll(error: Error): void {
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.reject(error);
    }
  }
}
