import { createServer, connect, type Server, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { decodeForward, decodeOutcome, encodeForward, encodeOutcome, OutcomeKind, PeerFrameCutter } from './PeerCodec.js';
import type { LocalSequencer } from './RoutedLog.js';
import { AppendRefusedError, type LentFence, type LogPosition } from './ReplicatedLog.js';

/**
 * The link between a node and the sequencer (issue 20): TCP, frames as in PeerCodec. A node keeps
 * one connection to the sequencer and forwards each append attempt's batch with the fence it lent
 * for it; the sequencer answers each forward with its outcome.
 */

/** The sequencer's side: accepts forwarding nodes and hands their batches to the sequencer. */
export class SequencerListener {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private sequencer: LocalSequencer | undefined;

  /**
   * @param admits whether a connecting address may forward (the hosts file: the peer port is no
   *   more open than the lock port); refused connections are closed at once.
   */
  constructor(
    private readonly admits: (address: string | undefined) => boolean,
    private readonly onRefused: (address: string | undefined) => void = () => {},
  ) {
    this.server = createServer((socket) => this.accept(socket));
  }

  listen(port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => resolve());
    });
  }

  /** From here on, forwarded batches go to `sequencer`; until then each is refused (its node appends it itself). */
  serve(sequencer: LocalSequencer): void {
    this.sequencer = sequencer;
  }

  /** The port it listens on (after listen). */
  get port(): number {
    const address = this.server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  }

  close(): void {
    this.server.close();
    for (const s of this.sockets) s.destroy();
  }

  private accept(socket: Socket): void {
    if (!this.admits(socket.remoteAddress)) {
      this.onRefused(socket.remoteAddress);
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.setNoDelay(true);
    const cutter = new PeerFrameCutter();
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
    const f = decodeForward(frame);
    const fence: LentFence = { leaseId: f.leaseId, fenceKey: Buffer.from(f.fenceKey), endsAt: performance.now() + f.leftMs };
    const answer = (kind: OutcomeKind, position = NOWHERE): void => {
      if (!socket.destroyed) socket.write(encodeOutcome({ id: f.id, kind, position }));
    };
    if (this.sequencer === undefined) return answer(OutcomeKind.Refused);
    this.sequencer.submit(f.batch, fence).then(
      (position) => answer(OutcomeKind.Committed, position),
      (error: unknown) => answer(error instanceof AppendRefusedError ? (error.leaseGone ? OutcomeKind.LeaseGone : OutcomeKind.Refused) : OutcomeKind.Unknown),
    );
  }
}

const NOWHERE: LogPosition = { version: 0, revision: 0 };

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
    // Backpressure: a link that has not drained what it was given takes nothing more (the node appends itself).
    if (socket.writableNeedDrain) return Promise.reject(new AppendRefusedError('link to the sequencer busy: not sent'));
    const id = this.nextId;
    this.nextId = this.nextId === 0xffffffff ? 1 : this.nextId + 1;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`forwarded append: no outcome within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      for (const part of encodeForward({ id, leftMs: fence.endsAt - performance.now(), leaseId: fence.leaseId, fenceKey: fence.fenceKey, batch: value }))
        socket.write(part);
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
    const cutter = new PeerFrameCutter();
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
    const o = decodeOutcome(frame);
    const p = this.pending.get(o.id);
    if (p === undefined) return; // answered after its forward timed out
    this.pending.delete(o.id);
    clearTimeout(p.timer);
    if (o.kind === OutcomeKind.Committed) p.resolve(o.position);
    else if (o.kind === OutcomeKind.Refused) p.reject(new AppendRefusedError('refused by the sequencer'));
    else if (o.kind === OutcomeKind.LeaseGone) p.reject(new AppendRefusedError('refused by etcd: a fence lease of the bundle was gone', true));
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
