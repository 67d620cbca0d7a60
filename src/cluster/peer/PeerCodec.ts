import { CheckedReader, LogFormatError } from '../LogCodec.js';
import { MAX_APPEND_BYTES, type LogPosition } from '../ReplicatedLog.js';
import { NONCE_BYTES, PROOF_BYTES } from './PeerAuth.js';

/**
 * Frames of a link between a forwarding node and the leader's sequencer (issue 20, 36). The link
 * is a connection to the leader's lock port: after the greeting byte, the forwarder sends the
 * byte PEER_LINK_BYTE, which no lock client sends first, and from then on both speak frames,
 * big-endian, each `length(u32) type(u8) …`, where `length` counts what follows it:
 *
 *   hello (1)      forwarder → sequencer, first: version(u8) forwarder(str) fenceKey(str) nonce(16)
 *   challenge (2)  sequencer → forwarder: sequencer(str) nonce(16) proof(32)
 *   proof (3)      forwarder → sequencer: proof(32)
 *   accepted (4)   sequencer → forwarder: nothing; forwards may come
 *   forward (5)    id(u32) leftMs(u32) leaseId(str) batch(the rest)
 *   outcome (6)    id(u32) kind(u8) version(f64) revision(f64)
 *
 *   str = u8 length + bytes
 *
 * The handshake (PeerAuth) proves both ends. A forward hands the sequencer one encoded batch with
 * the writer lease its node lent for it (the fence key is the one the hello named), and the time
 * the lease had left as the node sent it (the sequencer does not send a batch whose lease is about
 * to end: etcd would refuse the whole bundle). An outcome answers forward `id`.
 */

export { PEER_LINK_BYTE } from '../../protocol/constants.js';
/** The handshake's version: a forwarder of another one is refused (it appends directly). */
export const PEER_LINK_VERSION = 3;

export const PeerFrameType = {
  Hello: 1,
  Challenge: 2,
  Proof: 3,
  Accepted: 4,
  Forward: 5,
  Outcome: 6,
} as const;

export const OutcomeKind = {
  Committed: 0,
  /** It can never commit from this forward (never sent, or refused where it cannot take effect later). */
  Refused: 1,
  /** Refused: etcd found a writer lease of its bundle gone. The node does not use its lease again. */
  LeaseGone: 2,
  /** Sent, outcome not known: it may still commit within its node's lateCommitMs. */
  Unknown: 3,
} as const;
export type OutcomeKind = (typeof OutcomeKind)[keyof typeof OutcomeKind];

/** The longest frame either side takes once proven: a whole batch (MAX_APPEND_BYTES) and a header well under 1 KiB. */
export const MAX_PEER_FRAME_BYTES = MAX_APPEND_BYTES + 1_024;
/** The longest handshake frame: a hello with two 255-byte strings (a challenge is shorter). */
export const MAX_HANDSHAKE_FRAME_BYTES = 1 + 1 + (1 + 255) + (1 + 255) + NONCE_BYTES;
const LENGTH_BYTES = 4;
const OUTCOME_FRAME_BYTES = 1 + 4 + 1 + 8 + 8;

export interface HelloFrame {
  readonly version: number;
  readonly forwarder: string;
  readonly fenceKey: Uint8Array;
  readonly nonce: Uint8Array;
}

export interface ChallengeFrame {
  readonly sequencer: string;
  readonly nonce: Uint8Array;
  readonly proof: Uint8Array;
}

export interface ForwardFrame {
  readonly id: number;
  readonly leftMs: number;
  readonly leaseId: string;
  readonly batch: Uint8Array;
}

export interface OutcomeFrame {
  readonly id: number;
  readonly kind: OutcomeKind;
  /** Where the bundle landed (Committed), else version and revision 0. */
  readonly position: LogPosition;
}

/** A peer's bytes that are not a frame we can read: the link is dropped. */
export class PeerFormatError extends Error {
  override name = 'PeerFormatError';
}

/** A frame of `type` whose body `write` fills, `bodyBytes` long. */
function frame(type: number, bodyBytes: number, write: (out: Buffer, at: number) => void): Buffer {
  const out = Buffer.allocUnsafe(LENGTH_BYTES + 1 + bodyBytes);
  out.writeUInt32BE(1 + bodyBytes, 0);
  out.writeUInt8(type, LENGTH_BYTES);
  write(out, LENGTH_BYTES + 1);
  return out;
}

/** Writes a u8-length string (or bytes) at `at`; returns where it ends. */
function writeString(out: Buffer, at: number, bytes: Uint8Array): number {
  if (bytes.length > 255) throw new RangeError('a peer frame string over 255 bytes');
  out.writeUInt8(bytes.length, at);
  out.set(bytes, at + 1);
  return at + 1 + bytes.length;
}

export function encodeHello(h: HelloFrame): Buffer {
  const forwarder = Buffer.from(h.forwarder, 'latin1');
  return frame(PeerFrameType.Hello, 1 + 1 + forwarder.length + 1 + h.fenceKey.length + NONCE_BYTES, (out, at) => {
    at = out.writeUInt8(h.version, at);
    at = writeString(out, at, forwarder);
    at = writeString(out, at, h.fenceKey);
    out.set(h.nonce, at);
  });
}

export function encodeChallenge(c: ChallengeFrame): Buffer {
  const sequencer = Buffer.from(c.sequencer, 'latin1');
  return frame(PeerFrameType.Challenge, 1 + sequencer.length + NONCE_BYTES + PROOF_BYTES, (out, at) => {
    at = writeString(out, at, sequencer);
    out.set(c.nonce, at);
    out.set(c.proof, at + NONCE_BYTES);
  });
}

export function encodeProof(proof: Uint8Array): Buffer {
  return frame(PeerFrameType.Proof, PROOF_BYTES, (out, at) => out.set(proof, at));
}

export const ACCEPTED_FRAME: Buffer = frame(PeerFrameType.Accepted, 0, () => {});

/** A forward as buffers to write in turn (the batch is not copied). */
export function encodeForward(f: ForwardFrame): [Buffer, Buffer] {
  const leaseId = Buffer.from(f.leaseId, 'latin1');
  const head = frame(PeerFrameType.Forward, 4 + 4 + 1 + leaseId.length, (out, at) => {
    at = out.writeUInt32BE(f.id, at);
    at = out.writeUInt32BE(Math.max(0, Math.min(0xffff_ffff, Math.floor(f.leftMs))), at);
    writeString(out, at, leaseId);
  });
  // The length counts the batch that follows the head.
  head.writeUInt32BE(head.length - LENGTH_BYTES + f.batch.length, 0);
  return [head, Buffer.from(f.batch.buffer, f.batch.byteOffset, f.batch.byteLength)];
}

export function encodeOutcome(o: OutcomeFrame): Buffer {
  return frame(PeerFrameType.Outcome, OUTCOME_FRAME_BYTES - 1, (out, at) => {
    at = out.writeUInt32BE(o.id, at);
    at = out.writeUInt8(o.kind, at);
    at = out.writeDoubleBE(o.position.version, at);
    out.writeDoubleBE(o.position.revision, at);
  });
}

/** Reads a frame's type and body with bounds checks, as a PeerFormatError; the whole frame must be read. */
function reading<T>(frameBytes: Uint8Array, type: number, read: (r: CheckedReader) => T, whole = true): T {
  try {
    const r = new CheckedReader(frameBytes);
    const got = r.u8();
    if (got !== type) throw new PeerFormatError(`a frame of type ${got} where ${type} was expected`);
    const value = read(r);
    if (whole && !r.done) throw new PeerFormatError(`bytes after a frame of type ${type}`);
    return value;
  } catch (error) {
    if (error instanceof LogFormatError) throw new PeerFormatError(error.message);
    throw error;
  }
}

/** `n` bytes of the frame, as a view (the caller copies what it keeps). */
function bytes(r: CheckedReader, frameBytes: Uint8Array, n: number): Uint8Array {
  const at = frameBytes.length - r.remaining;
  r.skip(n);
  return frameBytes.subarray(at, at + n);
}

export function decodeHello(frameBytes: Uint8Array): HelloFrame {
  return reading(frameBytes, PeerFrameType.Hello, (r) => {
    const version = r.u8();
    const forwarder = r.string();
    const fenceKey = bytes(r, frameBytes, r.u8());
    return { version, forwarder, fenceKey, nonce: bytes(r, frameBytes, NONCE_BYTES) };
  });
}

export function decodeChallenge(frameBytes: Uint8Array): ChallengeFrame {
  return reading(frameBytes, PeerFrameType.Challenge, (r) => {
    const sequencer = r.string();
    const nonce = bytes(r, frameBytes, NONCE_BYTES);
    return { sequencer, nonce, proof: bytes(r, frameBytes, PROOF_BYTES) };
  });
}

export function decodeProof(frameBytes: Uint8Array): Uint8Array {
  return reading(frameBytes, PeerFrameType.Proof, (r) => bytes(r, frameBytes, PROOF_BYTES));
}

export function decodeAccepted(frameBytes: Uint8Array): void {
  reading(frameBytes, PeerFrameType.Accepted, () => undefined);
}

/** A forward frame's body (as the cutter gives it: the type byte on); the batch is a view, not a copy. */
export function decodeForward(frameBytes: Uint8Array): ForwardFrame {
  return reading(
    frameBytes,
    PeerFrameType.Forward,
    (r) => {
      const id = r.u32();
      const leftMs = r.u32();
      const leaseId = r.string();
      return { id, leftMs, leaseId, batch: frameBytes.subarray(frameBytes.length - r.remaining) };
    },
    false,
  );
}

export function decodeOutcome(frameBytes: Uint8Array): OutcomeFrame {
  return reading(frameBytes, PeerFrameType.Outcome, (r) => {
    const id = r.u32();
    const kind = r.u8();
    if (kind > OutcomeKind.Unknown) throw new PeerFormatError(`an outcome of kind ${kind}`);
    const version = r.f64();
    return { id, kind: kind as OutcomeKind, position: { version, revision: r.f64() } };
  });
}

/**
 * Cuts a peer's byte stream into frames (each without its length prefix, the type byte first).
 * Chunks are kept as they come and joined once per frame, so a batch arriving in many chunks is
 * copied once, not once per chunk. A length of 0 or over maxFrameBytes is a PeerFormatError.
 */
export class PeerFrameCutter {
  /** @param maxFrameBytes the longest frame taken (settable: a link allows whole batches only once proven) */
  constructor(public maxFrameBytes = MAX_PEER_FRAME_BYTES) {}

  private chunks: Buffer[] = [];
  private buffered = 0;
  /** The length of the frame being read, once its prefix is in. */
  private expected: number | undefined;

  feed(chunk: Buffer, onFrame: (frame: Buffer) => void): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.expected === undefined) {
        if (this.buffered < LENGTH_BYTES) return;
        const length = this.joined().readUInt32BE(0);
        if (length < 1 || length > this.maxFrameBytes) throw new PeerFormatError(`a peer frame of ${length} bytes`);
        this.expected = length;
      }
      const end = LENGTH_BYTES + this.expected;
      if (this.buffered < end) return;
      const all = this.joined();
      this.expected = undefined;
      const rest = all.subarray(end);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
      onFrame(all.subarray(LENGTH_BYTES, end));
    }
  }

  /** Every byte buffered, as one buffer (joined at most once per call that needs it). */
  private joined(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
    return this.chunks[0]!;
  }
}
