import { connect, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { GREETING_ACCEPTED } from '../../protocol/constants.js';
import { AppendRefusedError, type LentLease, type LogPosition } from '../ReplicatedLog.js';
import { forwarderProof, newNonce, proofHolds, sequencerProof, type LinkParties } from './PeerAuth.js';
import { formatPeerAddress, type PeerAddress } from './PeerAddress.js';
import {
  decodeAccepted,
  decodeChallenge,
  decodeOutcome,
  encodeForward,
  encodeHello,
  encodeProof,
  MAX_HANDSHAKE_FRAME_BYTES,
  MAX_PEER_FRAME_BYTES,
  OutcomeKind,
  PEER_LINK_BYTE,
  PEER_LINK_VERSION,
  PeerFrameCutter,
} from './PeerCodec.js';

/** TCP keepalive on both ends of a link, from this much idle time (the system's probe count and interval apply). */
export const KEEPALIVE_MS = 1_000;
/** Pause before a lost link to the sequencer is dialled again; doubled (up to MAX_REDIAL_MS) while the sequencer does not accept it. */
const REDIAL_MS = 500;
const MAX_REDIAL_MS = 30_000;

/** Who this node is on its links: its name (every batch it forwards names it) and its fence key. */
export interface ForwarderIdentity {
  readonly name: string;
  readonly fenceKey: Uint8Array;
}

/**
 * What a forward's outcome says. `committed` is the sequencer's word, not etcd's: the caller takes
 * it as a claim to check against the log it follows (AppendRouter), never as a fact of the store.
 */
interface Pending {
  readonly resolve: (position: LogPosition) => void;
  readonly reject: (error: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * A forwarding node's link to the leader's sequencer (issue 20, 36): a connection to the leader's
 * lock port, turned into a link by PEER_LINK_BYTE after the greeting, then the handshake that
 * proves both ends (PeerAuth): the other end must prove it holds the peer secret and is the node
 * this one takes to lead, or nothing is forwarded to it. Redialled when it drops.
 */
export class SequencerLink {
  private socket: Socket | undefined;
  /** Connected, both ends proven: forwards may go. */
  private connected = false;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private closed = false;
  /** Pause before the next dial: grows while the sequencer refuses this node, back to REDIAL_MS once it accepts. */
  private redialMs = REDIAL_MS;
  private redialTimer: NodeJS.Timeout | undefined;

  /**
   * @param sequencer the name of the node whose sequencer this link is to reach (the leader)
   * @param address where that node declared its lock port
   * @param secret the cluster's peer secret, as last read from etcd (undefined: not yet, the link stays down)
   * @param onRefused told why a dial did not end in a proven link (throttled by the caller)
   */
  constructor(
    readonly sequencer: string,
    private readonly address: PeerAddress,
    private readonly identity: ForwarderIdentity,
    private readonly secret: () => Uint8Array | undefined,
    private readonly onRefused: (reason: string) => void = () => {},
  ) {
    this.dial();
  }

  get up(): boolean {
    return this.connected;
  }

  /**
   * Sends `value` to the sequencer, fenced by `fence`. Resolves with the position the sequencer
   * says it committed at; rejects with AppendRefusedError when it says it can never commit from
   * this attempt, with any other error when the outcome is unknown (it may still commit within the
   * fence's bound).
   */
  forward(value: Uint8Array, lease: LentLease, timeoutMs: number): Promise<LogPosition> {
    const socket = this.socket;
    if (!this.connected || socket === undefined) return Promise.reject(new AppendRefusedError('no link to the sequencer: not sent'));
    // Backpressure: a link that has not drained what it was given takes nothing more (the node appends itself).
    if (socket.writableNeedDrain) return Promise.reject(new AppendRefusedError('link to the sequencer busy: not sent'));
    const id = this.nextId;
    this.nextId = this.nextId === 0xffffffff ? 1 : this.nextId + 1;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`forwarded append: no outcome within ${Math.round(timeoutMs)} ms`));
        // A link that does not answer in time is not trusted with more: what it still queues is dropped with it.
        socket.destroy();
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      for (const part of encodeForward({ id, leftMs: lease.endsAt - performance.now(), leaseId: lease.leaseId, batch: value })) socket.write(part);
    });
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.redialTimer);
    this.socket?.destroy();
    this.failAll(new Error('link to the sequencer closed'));
  }

  private dial(): void {
    if (this.closed) return;
    const socket = connect({ port: this.address.port, host: this.address.host });
    this.socket = socket;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    let step: 'greeting' | 'challenge' | 'accepted' | 'outcomes' = 'greeting';
    let refusal = 'the connection closed during the handshake';
    const nonce = newNonce();
    const cutter = new PeerFrameCutter(MAX_HANDSHAKE_FRAME_BYTES);
    const onFrame = (frame: Buffer): void => {
      if (step === 'outcomes') return this.onOutcome(frame);
      if (step === 'accepted') {
        decodeAccepted(frame);
        step = 'outcomes';
        cutter.maxFrameBytes = MAX_PEER_FRAME_BYTES;
        this.connected = true;
        this.redialMs = REDIAL_MS;
        return;
      }
      const challenge = decodeChallenge(frame);
      const secret = this.secret();
      if (secret === undefined) throw new Error('peer secret not read from etcd yet');
      if (challenge.sequencer !== this.sequencer)
        throw new Error(`${formatPeerAddress(this.address)} is ${challenge.sequencer}'s sequencer, not ${this.sequencer}'s`);
      const parties: LinkParties = { forwarder: this.identity.name, fenceKey: this.identity.fenceKey, sequencer: this.sequencer };
      if (!proofHolds(sequencerProof(secret, parties, nonce, challenge.nonce), challenge.proof)) {
        throw new Error(`${formatPeerAddress(this.address)} does not prove it holds the peer secret`);
      }
      step = 'accepted';
      socket.write(encodeProof(forwarderProof(secret, parties, nonce, challenge.nonce)));
    };
    socket.on('data', (chunk: Buffer) => {
      try {
        if (step === 'greeting') {
          if (chunk[0] !== GREETING_ACCEPTED) throw new Error('refused at the lock port (greeting 00: not in its hosts file, too busy, or stalled)');
          step = 'challenge';
          socket.write(Buffer.of(PEER_LINK_BYTE));
          socket.write(encodeHello({ version: PEER_LINK_VERSION, forwarder: this.identity.name, fenceKey: this.identity.fenceKey, nonce }));
          chunk = chunk.subarray(1);
        }
        cutter.feed(chunk, onFrame);
      } catch (error) {
        refusal = (error as Error).message;
        socket.destroy();
      }
    });
    socket.on('error', (error) => (refusal = error.message));
    socket.on('close', () => {
      const wasAccepted = step === 'outcomes';
      this.connected = false;
      this.failAll(new Error('link to the sequencer lost'));
      if (this.closed) return;
      if (!wasAccepted) this.onRefused(refusal);
      const wait = wasAccepted ? REDIAL_MS : this.redialMs;
      if (!wasAccepted) this.redialMs = Math.min(MAX_REDIAL_MS, this.redialMs * 2);
      this.redialTimer = setTimeout(() => this.dial(), wait);
      this.redialTimer.unref();
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
    else if (o.kind === OutcomeKind.LeaseGone) p.reject(new AppendRefusedError('refused by etcd: a writer lease of the bundle was gone', true));
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
