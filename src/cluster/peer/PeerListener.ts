import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Clock } from '../../runtime/Clock.js';
import { EventThrottle } from '../../runtime/EventThrottle.js';
import type { Logger } from '../../runtime/Logger.js';
import { leaseOutcomeOf, type LeaseOutcome, type LentLease, type LogPosition } from '../ReplicatedLog.js';
import type { LocalSequencer } from '../AppendRouter.js';
import { BatchRefusedError } from '../Sequencer.js';
import { forwarderProof, newNonce, proofHolds, sequencerProof, type LinkParties } from './PeerAuth.js';
import {
  ACCEPTED_FRAME,
  decodeForward,
  decodeHello,
  decodeProof,
  encodeChallenge,
  encodeOutcome,
  MAX_HANDSHAKE_FRAME_BYTES,
  MAX_PEER_FRAME_BYTES,
  OutcomeKind,
  PEER_LINK_VERSION,
  PeerFrameCutter,
} from './PeerCodec.js';
import { KEEPALIVE_MS } from './SequencerLink.js';

/** How long a link may take to prove itself before it is closed. */
export const PROOF_WAIT_MS = 1_000;
/** Links not proven yet at most; one more is closed at once. A handshake takes a few milliseconds. */
export const MAX_UNPROVEN_LINKS = 64;
/** Forwards one link may have waiting for their outcome; beyond, each is refused (its node appends it itself). */
export const MAX_PENDING_PER_LINK = 64;

/** Why a link was refused, as `peer-refused` names it (one throttled line per kind). */
export type PeerRefusal = 'no-secret-yet' | 'too-many-unproven' | 'no-proof-in-time' | 'bad-proof' | 'bad-frame' | 'bad-forward';

export interface PeerListenerOptions {
  /** This node's name: the sequencer the forwarders take to lead must be it. */
  readonly name: string;
  /** The cluster's peer secret, once read from etcd; until then every link is refused. */
  readonly secret: () => Uint8Array | undefined;
  /** Why a fence key is not a fence key of this cluster (EtcdLog.checkFenceKey), or undefined. */
  readonly checkFenceKey: (fenceKey: Uint8Array) => string | undefined;
  /** Where `peer-refused` lines go: one per kind of refusal a minute, at most (a refused node dials again and again). */
  readonly logger: Logger;
  readonly clock: Clock;
  /** How long a link may take to prove itself (default PROOF_WAIT_MS). */
  readonly proofWaitMs?: number;
}

/** A kind of refusal is logged at most once a minute (the next line says how many were not). */
const REFUSAL_LOG_EVERY_MS = 60_000;

/** A proven link: who forwards on it, and how many of its forwards wait for an outcome. */
interface Link {
  readonly socket: Socket;
  readonly forwarder: string;
  readonly fenceKey: Buffer;
  pending: number;
}

/**
 * The sequencer's side of the links between nodes (issue 20, 36). The lock server hands it every
 * connection that opened with PEER_LINK_BYTE (admitted by the hosts file, like any connection to
 * the lock port); each must complete the handshake (PeerAuth) within PROOF_WAIT_MS, and at most
 * MAX_UNPROVEN_LINKS may be trying at once. Each forward on a proven link is decoded whole and
 * must name the link's node as its proposer; its bundle part puts the link's fence key only. A
 * link that sends anything else is closed.
 *
 * Invariants: nothing reaches the sequencer from a link that has not proven the secret; every
 * batch the sequencer gets decodes with this version's decoder and names the node that proved
 * itself; every fence it puts is that node's fence key.
 */
export class PeerListener {
  private readonly links = new Set<Socket>();
  private unproven = 0;
  private closed = false;
  private readonly refusals: EventThrottle;
  /** Links refused so far, by kind (tests, reports). */
  readonly refused = new Map<PeerRefusal, number>();

  constructor(
    private readonly sequencer: LocalSequencer,
    private readonly options: PeerListenerOptions,
  ) {
    this.refusals = new EventThrottle(options.clock, 1, REFUSAL_LOG_EVERY_MS);
  }

  /** A lock-port connection that asked to be a link; `buffered` is what it sent after PEER_LINK_BYTE. */
  adopt(socket: Socket, buffered: Buffer): void {
    socket.on('error', () => {});
    if (this.closed) return void socket.destroy();
    if (this.unproven >= MAX_UNPROVEN_LINKS) return this.refuse(socket, 'too-many-unproven', `${this.unproven} links are proving themselves already`);
    const secret = this.options.secret();
    if (secret === undefined) return this.refuse(socket, 'no-secret-yet', 'the peer secret is not read from etcd yet');
    this.unproven++;
    this.links.add(socket);
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_MS);
    let proven = false;
    const unprove = (): void => {
      if (proven) return;
      proven = true; // counted once
      this.unproven--;
    };
    const wait = this.options.proofWaitMs ?? PROOF_WAIT_MS;
    const proofTimer = setTimeout(() => this.refuse(socket, 'no-proof-in-time', `no proof within ${wait} ms`), wait);
    proofTimer.unref();
    socket.on('close', () => {
      clearTimeout(proofTimer);
      unprove();
      this.links.delete(socket);
    });
    socket.on('end', () => socket.destroy());
    const cutter = new PeerFrameCutter(MAX_HANDSHAKE_FRAME_BYTES);
    const nonce = newNonce();
    let parties: LinkParties | undefined;
    let forwarderNonce: Uint8Array | undefined;
    let link: Link | undefined;
    const onFrame = (frame: Buffer): void => {
      if (link !== undefined) return this.onForward(link, frame);
      if (parties === undefined) {
        const hello = decodeHello(frame);
        if (hello.version !== PEER_LINK_VERSION) throw new Refusal('bad-frame', `link version ${hello.version}, not ${PEER_LINK_VERSION}`);
        const wrongKey = this.options.checkFenceKey(hello.fenceKey);
        if (wrongKey !== undefined) throw new Refusal('bad-frame', wrongKey);
        parties = { forwarder: hello.forwarder, fenceKey: Buffer.from(hello.fenceKey), sequencer: this.options.name };
        forwarderNonce = Buffer.from(hello.nonce);
        socket.write(encodeChallenge({ sequencer: this.options.name, nonce, proof: sequencerProof(secret, parties, forwarderNonce, nonce) }));
        return;
      }
      if (!proofHolds(forwarderProof(secret, parties, forwarderNonce!, nonce), decodeProof(frame))) {
        throw new Refusal('bad-proof', `${parties.forwarder} does not prove it holds the peer secret`);
      }
      clearTimeout(proofTimer);
      unprove();
      cutter.maxFrameBytes = MAX_PEER_FRAME_BYTES;
      link = { socket, forwarder: parties.forwarder, fenceKey: Buffer.from(parties.fenceKey), pending: 0 };
      socket.write(ACCEPTED_FRAME);
    };
    const feed = (chunk: Buffer): void => {
      try {
        cutter.feed(chunk, onFrame);
      } catch (error) {
        if (error instanceof Refusal) this.refuse(socket, error.kind, error.message);
        else this.refuse(socket, 'bad-frame', (error as Error).message);
      }
    };
    socket.on('data', feed);
    // Backpressure: a node that does not read its outcomes is not read from either.
    socket.on('drain', () => socket.resume());
    if (buffered.length > 0) feed(buffered);
  }

  close(): void {
    this.closed = true;
    for (const socket of this.links) socket.destroy();
  }

  /** Closes the link; logs why, throttled by kind (never by its text, which varies with what was sent). */
  private refuse(socket: Socket, kind: PeerRefusal, detail: string): void {
    socket.destroy();
    this.refused.set(kind, (this.refused.get(kind) ?? 0) + 1);
    const suppressed = this.refusals.admit(kind);
    if (suppressed === undefined) return;
    this.options.logger.event('peer-refused', { address: socket.remoteAddress ?? 'unknown', reason: kind, detail, suppressed: suppressed || undefined });
  }

  private onForward(link: Link, frame: Buffer): void {
    const { socket } = link;
    const f = decodeForward(frame);
    const answer = (kind: OutcomeKind, position = NOWHERE): void => {
      if (socket.destroyed) return;
      if (!socket.write(encodeOutcome({ id: f.id, kind, position }))) socket.pause();
    };
    if (!LEASE_ID.test(f.leaseId)) throw new Refusal('bad-forward', `lease id "${f.leaseId}" is not a writer lease's`);
    if (link.pending >= MAX_PENDING_PER_LINK) return answer(OutcomeKind.Refused);
    const lease: LentLease = { leaseId: f.leaseId, fenceKey: link.fenceKey, endsAt: performance.now() + f.leftMs };
    link.pending++;
    // The sequencer decodes the batch whole and checks it names this link's node (checkBatch).
    this.sequencer.submit(Buffer.from(f.batch), lease, link.forwarder).then(
      (position) => {
        link.pending--;
        answer(OutcomeKind.Committed, position);
      },
      (error: unknown) => {
        link.pending--;
        answer(OUTCOME_OF_LEASE[leaseOutcomeOf(error)]);
        // A node of this version never forwards such a batch: whatever sent it is not trusted with more.
        if (error instanceof BatchRefusedError) this.refuse(socket, 'bad-forward', error.message);
      },
    );
  }
}

/** A writer lease's id as etcd writes it: a positive decimal integer. */
const LEASE_ID = /^[1-9][0-9]{0,19}$/;

/** A link refused for a reason of `kind`. */
class Refusal extends Error {
  constructor(
    readonly kind: PeerRefusal,
    message: string,
  ) {
    super(message);
  }
}

const NOWHERE: LogPosition = { version: 0, revision: 0 };
/** A failed submit's outcome on the wire: the fate of the forwarder's lease (ReplicatedLog.leaseOutcomeOf). */
const OUTCOME_OF_LEASE: Readonly<Record<LeaseOutcome, OutcomeKind>> = {
  settled: OutcomeKind.Refused,
  'lease-gone': OutcomeKind.LeaseGone,
  unsettled: OutcomeKind.Unknown,
};
