import { CheckedReader, LogFormatError } from './LogCodec.js';
import { MAX_APPEND_BYTES, type LogPosition } from './ReplicatedLog.js';

/**
 * Frames between a node and the sequencer (issue 20), big-endian, each `length(u32) type(u8) …`
 * where `length` counts what follows it:
 *
 *   forward (1): id(u32) leftMs(u32) leaseId(u8 length + bytes) fenceKey(u8 length + bytes) batch(the rest)
 *   outcome (2): id(u32) kind(u8) version(f64) revision(f64)
 *   challenge (3): nonce(16 bytes)          sequencer → node, first on every connection
 *   proof (4): hmac(32 bytes)               node → sequencer, first on every connection (PeerAuth)
 *   accepted (5): nothing                   sequencer → node: the proof holds, forwards may come
 *
 * Before anything else, the sequencer challenges the node to prove it knows the cluster's peer
 * secret (kept in etcd: whoever can read the cluster's keys may forward, nobody else).
 * A forward hands the sequencer one encoded batch with the fence its node lent for it: the writer
 * lease's id, the node's fence key, and the time the lease had left as the node sent it (the
 * sequencer does not send a batch whose lease is about to end: etcd would refuse the whole bundle).
 * An outcome answers forward `id`: committed at (version, revision), or why not.
 */
export const PeerFrameType = {
  Forward: 1,
  Outcome: 2,
  Challenge: 3,
  Proof: 4,
  Accepted: 5,
} as const;

/** The frames of the handshake: fixed bytes after the type. */
type HandshakeFrameType = typeof PeerFrameType.Challenge | typeof PeerFrameType.Proof | typeof PeerFrameType.Accepted;

export const NONCE_BYTES = 16;
export const PROOF_BYTES = 32;

export const OutcomeKind = {
  Committed: 0,
  /** It can never commit from this forward (never sent, or refused where it cannot take effect later). */
  Refused: 1,
  /** Refused: etcd found a fence lease of its bundle gone. The node does not use its lease again. */
  LeaseGone: 2,
  /** Sent, outcome not known: it may still commit within its node's lateCommitMs. */
  Unknown: 3,
} as const;
export type OutcomeKind = (typeof OutcomeKind)[keyof typeof OutcomeKind];

/** The longest frame either side takes: a whole batch (MAX_APPEND_BYTES) and a header well under 1 KiB. */
export const MAX_PEER_FRAME_BYTES = MAX_APPEND_BYTES + 1_024;
const LENGTH_BYTES = 4;
const OUTCOME_FRAME_BYTES = 1 + 4 + 1 + 8 + 8;

export interface ForwardFrame {
  readonly id: number;
  readonly leftMs: number;
  readonly leaseId: string;
  readonly fenceKey: Uint8Array;
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

/** A forward as buffers to write in turn (the batch is not copied). */
export function encodeForward(f: ForwardFrame): [Buffer, Buffer] {
  const leaseId = Buffer.from(f.leaseId, 'latin1');
  if (leaseId.length > 255 || f.fenceKey.length > 255) throw new RangeError('lease id or fence key over 255 bytes');
  const head = Buffer.allocUnsafe(LENGTH_BYTES + 1 + 4 + 4 + 1 + leaseId.length + 1 + f.fenceKey.length);
  let at = head.writeUInt32BE(head.length - LENGTH_BYTES + f.batch.length, 0);
  at = head.writeUInt8(PeerFrameType.Forward, at);
  at = head.writeUInt32BE(f.id, at);
  at = head.writeUInt32BE(Math.max(0, Math.min(0xffff_ffff, Math.floor(f.leftMs))), at);
  at = head.writeUInt8(leaseId.length, at);
  at += leaseId.copy(head, at);
  at = head.writeUInt8(f.fenceKey.length, at);
  head.set(f.fenceKey, at);
  return [head, Buffer.from(f.batch.buffer, f.batch.byteOffset, f.batch.byteLength)];
}

export function encodeOutcome(o: OutcomeFrame): Buffer {
  const out = Buffer.allocUnsafe(LENGTH_BYTES + OUTCOME_FRAME_BYTES);
  let at = out.writeUInt32BE(OUTCOME_FRAME_BYTES, 0);
  at = out.writeUInt8(PeerFrameType.Outcome, at);
  at = out.writeUInt32BE(o.id, at);
  at = out.writeUInt8(o.kind, at);
  at = out.writeDoubleBE(o.position.version, at);
  out.writeDoubleBE(o.position.revision, at);
  return out;
}

/** A handshake frame: `bytes` after the type. */
export function encodeBytesFrame(type: HandshakeFrameType, bytes: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(LENGTH_BYTES + 1 + bytes.length);
  out.writeUInt32BE(1 + bytes.length, 0);
  out.writeUInt8(type, LENGTH_BYTES);
  out.set(bytes, LENGTH_BYTES + 1);
  return out;
}

/** The bytes of a handshake frame, which must be exactly `length` long. */
export function decodeBytesFrame(frame: Uint8Array, type: HandshakeFrameType, length: number): Buffer {
  if (frame[0] !== type) throw new PeerFormatError(`a frame of type ${frame[0]} where ${type} was expected`);
  if (frame.length !== 1 + length) throw new PeerFormatError(`a frame of type ${type} of ${frame.length - 1} bytes, not ${length}`);
  return Buffer.from(frame.subarray(1));
}

/** Reads a frame's type and body with bounds checks, as a PeerFormatError. */
function reading<T>(frame: Uint8Array, type: number, read: (r: CheckedReader) => T): T {
  try {
    const r = new CheckedReader(frame);
    const got = r.u8();
    if (got !== type) throw new PeerFormatError(`a frame of type ${got} where ${type} was expected`);
    return read(r);
  } catch (error) {
    if (error instanceof LogFormatError) throw new PeerFormatError(error.message);
    throw error;
  }
}

/** A forward frame's body (as the cutter gives it: the type byte on); the batch is a view, not a copy. */
export function decodeForward(frame: Uint8Array): ForwardFrame {
  return reading(frame, PeerFrameType.Forward, (r) => {
    const id = r.u32();
    const leftMs = r.u32();
    const leaseId = r.string();
    const fenceKeyLength = r.u8();
    const fenceKeyAt = frame.length - r.remaining;
    r.skip(fenceKeyLength);
    const batchAt = frame.length - r.remaining;
    return {
      id,
      leftMs,
      leaseId,
      fenceKey: frame.subarray(fenceKeyAt, fenceKeyAt + fenceKeyLength),
      batch: frame.subarray(batchAt),
    };
  });
}

export function decodeOutcome(frame: Uint8Array): OutcomeFrame {
  return reading(frame, PeerFrameType.Outcome, (r) => {
    const id = r.u32();
    const kind = r.u8();
    if (kind > OutcomeKind.Unknown) throw new PeerFormatError(`an outcome of kind ${kind}`);
    const version = r.f64();
    const revision = r.f64();
    if (!r.done) throw new PeerFormatError('bytes after an outcome');
    return { id, kind: kind as OutcomeKind, position: { version, revision } };
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
