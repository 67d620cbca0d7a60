import { createServer, connect, type Server, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { newNonce, peerProof, proofHolds } from './PeerAuth.js';
import {
  decodeBytesFrame,
  decodeForward,
  decodeOutcome,
  encodeBytesFrame,
  encodeForward,
  encodeOutcome,
  NONCE_BYTES,
  OutcomeKind,
  PeerFrameCutter,
  PeerFrameType,
  MAX_PEER_FRAME_BYTES,
  PROOF_BYTES,
} from './PeerCodec.js';
import { formatPeerAddress, type PeerAddress } from './PeerAddress.js';
import type { LocalSequencer } from './RoutedLog.js';
import { AppendRefusedError, fenceOutcomeOf, type FenceOutcome, type LentFence, type LogPosition } from './ReplicatedLog.js';

/**
 * The link between a node and the sequencer (issue 20): TCP, frames as in PeerCodec. The
 * sequencer challenges each connection first and the node proves it knows the cluster's peer
 * secret (PeerAuth); then the node forwards each append attempt's batch with the fence it lent for
 * it, and the sequencer answers each forward with its outcome.
 */

/** TCP keepalive on both ends of a link, from this much idle time (the system's probe count and interval apply). */
const KEEPALIVE_MS = 1_000;

/** How long a connection to the peer port may take to prove it knows the peer secret. */
export const PROOF_WAIT_MS = 5_000;

/** Forwards one connection may have waiting for their outcome; beyond, each is refused (its node appends it itself). */
export const MAX_PENDING_PER_PEER = 64;

export interface ListenerOptions {
  /** Whether a connecting address may forward (the hosts file: the peer port is no more open than the lock port). */
  readonly admits: (address: string | undefined) => boolean;
  /** The cluster's peer secret, once read from etcd; until then every connection is refused. */
  readonly secret: () => Uint8Array | undefined;
  /** The address this listener is declared at (host:port), given the port it listens on: every proof must name it. */
  readonly address: (port: number) => string;
  /** Why a forwarded fence is not one of the cluster's writer leases on a fence key (EtcdLog.checkLentFence), or undefined. */
  readonly checkFence: (leaseId: string, fenceKey: Uint8Array) => string | undefined;
  /** Told of each refused connection, with the reason. */
  readonly onRefused?: (address: string | undefined, reason: string) => void;
  /** How long a connection may take to prove the secret (default PROOF_WAIT_MS). */
  readonly proofWaitMs?: number;
}

/** The sequencer's side: accepts forwarding nodes and hands their batches to the sequencer. */
export class SequencerListener {
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private sequencer: LocalSequencer | undefined;

  constructor(private readonly options: ListenerOptions) {
    this.server = createServer((socket) => this.accept(socket));
  }

  listen(port: number, host: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        // Accept errors (EMFILE …) after the start drop that connection only.
        this.server.on('error', () => {});
        resolve();
      });
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

  private refuse(socket: Socket, reason: string): void {
    this.options.onRefused?.(socket.remoteAddress, reason);
    socket.destroy();
  }

  private accept(socket: Socket): void {
    socket.on('error', () => {});
    if (!this.options.admits(socket.remoteAddress)) return this.refuse(socket, 'not in the hosts file');
    const secret = this.options.secret();
    if (secret === undefined) return this.refuse(socket, 'peer secret not read from etcd yet');
    this.sockets.add(socket);
    socket.on('close', () => this.sockets.delete(socket));
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    const nonce = newNonce();
    socket.write(encodeBytesFrame(PeerFrameType.Challenge, nonce));
    let proven = false;
    // Until it proves itself, a connection may send nothing longer than a proof frame.
    const cutter = new PeerFrameCutter(1 + PROOF_BYTES);
    // A connection that does not prove itself soon holds nothing of ours for long.
    const wait = this.options.proofWaitMs ?? PROOF_WAIT_MS;
    const proofTimer = setTimeout(() => this.refuse(socket, `no proof of the peer secret within ${wait} ms`), wait);
    proofTimer.unref();
    socket.on('close', () => clearTimeout(proofTimer));
    const peer = { socket, pending: 0 };
    socket.on('data', (chunk: Buffer) => {
      try {
        cutter.feed(chunk, (frame) => {
          if (proven) return this.onForward(peer, frame);
          const proof = decodeBytesFrame(frame, PeerFrameType.Proof, PROOF_BYTES);
          if (!proofHolds(secret, this.options.address(this.port), nonce, proof)) throw new Error('a wrong proof of the peer secret');
          proven = true;
          cutter.maxFrameBytes = MAX_PEER_FRAME_BYTES;
          clearTimeout(proofTimer);
          socket.write(ACCEPTED);
        });
      } catch (error) {
        this.refuse(socket, (error as Error).message);
      }
    });
    // Backpressure: a node that does not read its outcomes is not read from either.
    socket.on('drain', () => socket.resume());
  }

  private onForward(peer: { readonly socket: Socket; pending: number }, frame: Buffer): void {
    const { socket } = peer;
    const f = decodeForward(frame);
    const answer = (kind: OutcomeKind, position = NOWHERE): void => {
      if (socket.destroyed) return;
      if (!socket.write(encodeOutcome({ id: f.id, kind, position }))) socket.pause();
    };
    const sequencer = this.sequencer;
    if (sequencer === undefined || peer.pending >= MAX_PENDING_PER_PEER) return answer(OutcomeKind.Refused);
    // Only a writer lease on a fence key of the cluster goes into the transaction (defence in depth: the peer proved the secret).
    if (this.options.checkFence(f.leaseId, f.fenceKey) !== undefined) return answer(OutcomeKind.Refused);
    const fence: LentFence = { leaseId: f.leaseId, fenceKey: Buffer.from(f.fenceKey), endsAt: performance.now() + f.leftMs };
    peer.pending++;
    sequencer.submit(f.batch, fence).then(
      (position) => {
        peer.pending--;
        answer(OutcomeKind.Committed, position);
      },
      (error: unknown) => {
        peer.pending--;
        answer(OUTCOME_OF_FENCE[fenceOutcomeOf(error)]);
      },
    );
  }
}

const NOWHERE: LogPosition = { version: 0, revision: 0 };
/** A failed submit's outcome on the wire: the fate of the forwarder's fence (ReplicatedLog.fenceOutcomeOf). */
const OUTCOME_OF_FENCE: Readonly<Record<FenceOutcome, OutcomeKind>> = {
  settled: OutcomeKind.Refused,
  'lease-gone': OutcomeKind.LeaseGone,
  unsettled: OutcomeKind.Unknown,
};
const ACCEPTED = encodeBytesFrame(PeerFrameType.Accepted, Buffer.alloc(0));

interface Pending {
  readonly resolve: (position: LogPosition) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** Pause before a lost link to the sequencer is dialled again; doubled (up to MAX_REDIAL_MS) while the sequencer does not accept it. */
const REDIAL_MS = 500;
const MAX_REDIAL_MS = 30_000;

/** A forwarding node's side: one connection to the sequencer, redialled when it drops. */
export class SequencerLink {
  private socket: Socket | undefined;
  /** Connected, and the sequencer accepted the proof: forwards may go. */
  private connected = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;

  /** Pause before the next dial: grows while the sequencer refuses this node, back to REDIAL_MS once it accepts. */
  private redialMs = REDIAL_MS;

  /**
   * @param address the sequencer's declared address, which the proof names
   * @param secret the cluster's peer secret, as last read from etcd (undefined: not yet, the link stays down)
   */
  constructor(
    private readonly address: PeerAddress,
    private readonly secret: () => Uint8Array | undefined,
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
        // A link that does not answer in time is not trusted with more: what it still queues is dropped with it.
        socket.destroy();
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
    const socket = connect({ port: this.address.port, host: this.address.host });
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    let step: 'challenge' | 'accepted' | 'outcomes' = 'challenge';
    const cutter = new PeerFrameCutter();
    socket.on('data', (chunk: Buffer) => {
      try {
        cutter.feed(chunk, (frame) => {
          if (step === 'outcomes') return this.onOutcome(frame);
          if (step === 'accepted') {
            decodeBytesFrame(frame, PeerFrameType.Accepted, 0);
            step = 'outcomes';
            this.connected = true;
            this.redialMs = REDIAL_MS;
            return;
          }
          const nonce = decodeBytesFrame(frame, PeerFrameType.Challenge, NONCE_BYTES);
          const secret = this.secret();
          if (secret === undefined) throw new Error('peer secret not read from etcd yet');
          step = 'accepted';
          socket.write(encodeBytesFrame(PeerFrameType.Proof, peerProof(secret, formatPeerAddress(this.address), nonce)));
        });
      } catch {
        socket.destroy();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      const wasAccepted = step === 'outcomes';
      this.connected = false;
      this.failAll(new Error('link to the sequencer lost'));
      if (this.closed) return;
      const wait = wasAccepted ? REDIAL_MS : this.redialMs;
      if (!wasAccepted) this.redialMs = Math.min(MAX_REDIAL_MS, this.redialMs * 2);
      setTimeout(() => this.dial(), wait).unref();
    });
  }

  private onOutcome(frame: Buffer): void {
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
