import test from 'ava';
import {
  ACCEPTED_FRAME,
  decodeAccepted,
  decodeChallenge,
  decodeForward,
  decodeHello,
  decodeOutcome,
  decodeProof,
  encodeChallenge,
  encodeForward,
  encodeHello,
  encodeOutcome,
  encodeProof,
  MAX_PEER_FRAME_BYTES,
  OutcomeKind,
  PEER_LINK_VERSION,
  PeerFormatError,
  PeerFrameCutter,
  PeerFrameType,
  type ForwardFrame,
  type OutcomeFrame,
} from '../../../src/cluster/peer/PeerCodec.js';
import { mulberry32 } from '../../../src/runtime/Random.js';

const forward = (id: number, batchBytes: number): ForwardFrame => ({
  id,
  leftMs: 1_234,
  leaseId: '7587878471628371234',
  batch: Buffer.from(Array.from({ length: batchBytes }, (_, i) => (i * 7 + id) & 0xff)),
});
const outcome = (id: number, kind: OutcomeFrame['kind'] = OutcomeKind.Committed): OutcomeFrame => ({
  id,
  kind,
  position: kind === OutcomeKind.Committed ? { version: 2 ** 40 + id, revision: 2 ** 41 + 3 } : { version: 0, revision: 0 },
});
const hello = { version: PEER_LINK_VERSION, forwarder: 'node-\xff', fenceKey: Buffer.from('/lockserver/fences/0123456789abcdef'), nonce: Buffer.alloc(16, 3) };
const challenge = { sequencer: 'n1', nonce: Buffer.alloc(16, 4), proof: Buffer.alloc(32, 5) };

/** Every frame the cutter gives for `stream` fed in `pieces`. */
function cut(stream: Buffer, pieces: readonly number[]): Buffer[] {
  const cutter = new PeerFrameCutter();
  const frames: Buffer[] = [];
  let at = 0;
  for (const end of [...pieces, stream.length]) {
    cutter.feed(stream.subarray(at, end), (f) => frames.push(Buffer.from(f)));
    at = end;
  }
  return frames;
}

const one = (bytes: Buffer): Buffer => cut(bytes, [])[0]!;
const plain = (f: object) => JSON.parse(JSON.stringify(f, (_, v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v))) as unknown;

test('every frame round-trips; a forward’s batch is a view of the frame (not a copy)', (t) => {
  t.deepEqual(plain(decodeHello(one(encodeHello(hello)))), plain(hello));
  t.deepEqual(plain(decodeChallenge(one(encodeChallenge(challenge)))), plain(challenge));
  t.deepEqual(Buffer.from(decodeProof(one(encodeProof(Buffer.alloc(32, 6))))), Buffer.alloc(32, 6));
  t.notThrows(() => decodeAccepted(one(ACCEPTED_FRAME)));
  for (const f of [forward(1, 0), forward(0xffff_ffff, 300), { ...forward(5, 10), leftMs: 0 }]) {
    const frame = one(Buffer.concat(encodeForward(f)));
    const decoded = decodeForward(frame);
    t.deepEqual(plain(decoded), plain(f));
    t.is(decoded.batch.buffer, frame.buffer);
  }
  for (const kind of Object.values(OutcomeKind)) {
    const o = outcome(9, kind);
    t.deepEqual(decodeOutcome(one(encodeOutcome(o))), o);
  }
});

test('a stream of frames cut at every byte, in two pieces or byte by byte, gives the same frames', (t) => {
  const frames = [
    encodeHello(hello),
    encodeChallenge(challenge),
    Buffer.concat(encodeForward(forward(1, 40))),
    encodeOutcome(outcome(2)),
    ACCEPTED_FRAME,
    Buffer.concat(encodeForward(forward(3, 0))),
  ];
  const stream = Buffer.concat(frames);
  const whole = cut(stream, []);
  t.is(whole.length, frames.length);
  for (let at = 0; at <= stream.length; at++) {
    if (
      cut(stream, [at])
        .map((f) => f.toString('hex'))
        .join() !== whole.map((f) => f.toString('hex')).join()
    )
      return t.fail(`split at ${at}`);
  }
  t.deepEqual(
    cut(
      stream,
      Array.from({ length: stream.length }, (_, i) => i),
    ),
    whole,
  );
  t.deepEqual(plain(decodeForward(whole[2]!)), plain(forward(1, 40)));
  t.deepEqual(decodeOutcome(whole[3]!), outcome(2));
});

test('a whole batch in many chunks comes out as one frame; a length of 0 or over the limit is refused', (t) => {
  const big = Buffer.concat(encodeForward(forward(4, MAX_PEER_FRAME_BYTES - 200)));
  const pieces = Array.from({ length: Math.floor(big.length / 65_536) }, (_, i) => (i + 1) * 65_536);
  const [frame, ...more] = cut(big, pieces);
  t.is(more.length, 0);
  t.is(decodeForward(frame!).batch.length, MAX_PEER_FRAME_BYTES - 200);
  const header = (length: number) => Buffer.from([length >>> 24, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff]);
  t.throws(() => cut(header(0), []), { instanceOf: PeerFormatError });
  t.throws(() => cut(header(MAX_PEER_FRAME_BYTES + 1), []), { instanceOf: PeerFormatError });
  // Before a link proves itself, nothing longer than a handshake frame is taken.
  t.throws(() => new PeerFrameCutter(600).feed(header(601), () => {}), { instanceOf: PeerFormatError });
});

test('a frame cut short, of the wrong type or with bytes after it, and garbage, are PeerFormatErrors only', (t) => {
  const decoders = [decodeHello, decodeChallenge, decodeProof, decodeAccepted, decodeForward, decodeOutcome];
  const samples = [
    one(encodeHello(hello)),
    one(encodeChallenge(challenge)),
    one(encodeProof(Buffer.alloc(32))),
    one(ACCEPTED_FRAME),
    one(Buffer.concat(encodeForward(forward(1, 0)))),
    one(encodeOutcome(outcome(1))),
  ];
  for (const [i, decode] of decoders.entries()) {
    const frame = samples[i]!;
    for (let end = 0; end < frame.length; end++)
      t.throws(() => decode(frame.subarray(0, end)), { instanceOf: PeerFormatError }, `${decode.name} cut at ${end}`);
    // A forward's batch is the rest of its frame; every other frame is whole or refused.
    if (decode !== decodeForward) t.throws(() => decode(Buffer.concat([frame, Buffer.from([0])])), { instanceOf: PeerFormatError });
    const other = samples[(i + 1) % samples.length]!;
    t.throws(() => decode(other), { instanceOf: PeerFormatError, message: new RegExp(`type ${other[0]!}`) });
  }
  t.is(samples[4]![0], PeerFrameType.Forward);
  const random = mulberry32(7);
  for (let i = 0; i < 2_000; i++) {
    const bytes = Buffer.from(Array.from({ length: Math.floor(random() * 80) }, () => Math.floor(random() * 256)));
    if (bytes.length > 0 && random() < 0.8) bytes[0] = 1 + Math.floor(random() * 6);
    for (const decode of decoders) {
      try {
        decode(bytes);
      } catch (error) {
        if (!(error instanceof PeerFormatError)) return t.fail(`${String(error)} for ${bytes.toString('hex')}`);
      }
    }
  }
  t.pass();
});
