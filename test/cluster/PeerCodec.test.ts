import test from 'ava';
import {
  decodeForward,
  decodeOutcome,
  encodeForward,
  encodeOutcome,
  MAX_PEER_FRAME_BYTES,
  OutcomeKind,
  PeerFormatError,
  PeerFrameCutter,
  type ForwardFrame,
  type OutcomeFrame,
} from '../../src/cluster/PeerCodec.js';
import { mulberry32 } from '../../src/runtime/Random.js';

const forward = (id: number, batchBytes: number, fenceKey = '/lockserver/fences/0123456789abcdef'): ForwardFrame => ({
  id,
  leftMs: 1_234,
  leaseId: '7587878471628371234',
  fenceKey: Buffer.from(fenceKey),
  batch: Buffer.from(Array.from({ length: batchBytes }, (_, i) => (i * 7 + id) & 0xff)),
});
const outcome = (id: number, kind: OutcomeFrame['kind'] = OutcomeKind.Committed): OutcomeFrame => ({
  id,
  kind,
  position: kind === OutcomeKind.Committed ? { version: 2 ** 40 + id, revision: 2 ** 41 + 3 } : { version: 0, revision: 0 },
});

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

const plain = (f: ForwardFrame) => ({ ...f, fenceKey: Buffer.from(f.fenceKey), batch: Buffer.from(f.batch) });

test('forwards and outcomes round-trip, the batch as a view of the frame (not a copy)', (t) => {
  for (const f of [forward(1, 0), forward(0xffff_ffff, 300, ''), { ...forward(5, 10), leftMs: 0 }]) {
    const [frame] = cut(Buffer.concat(encodeForward(f)), []);
    const decoded = decodeForward(frame!);
    t.deepEqual(plain(decoded), plain(f));
    t.is(decoded.batch.buffer, frame!.buffer);
  }
  for (const kind of Object.values(OutcomeKind)) {
    const o = outcome(9, kind);
    t.deepEqual(decodeOutcome(cut(encodeOutcome(o), [])[0]!), o);
  }
});

test('a stream of frames cut at every byte, in two pieces or byte by byte, gives the same frames', (t) => {
  const frames = [Buffer.concat(encodeForward(forward(1, 40))), encodeOutcome(outcome(2)), Buffer.concat(encodeForward(forward(3, 0)))];
  const stream = Buffer.concat(frames);
  const whole = cut(stream, []);
  t.is(whole.length, 3);
  for (let at = 0; at <= stream.length; at++) {
    if (
      cut(stream, [at])
        .map((f) => f.toString('hex'))
        .join() !== whole.map((f) => f.toString('hex')).join()
    )
      return t.fail(`split at ${at}`);
  }
  const byteByByte = cut(
    stream,
    Array.from({ length: stream.length }, (_, i) => i),
  );
  t.deepEqual(byteByByte, whole);
  t.deepEqual(plain(decodeForward(whole[0]!)), plain(forward(1, 40)));
  t.deepEqual(decodeOutcome(whole[1]!), outcome(2));
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
});

test('a frame cut short, of the wrong type or with bytes after an outcome, and garbage, are PeerFormatErrors only', (t) => {
  const f = cut(Buffer.concat(encodeForward(forward(1, 0))), [])[0]!;
  const o = cut(encodeOutcome(outcome(1)), [])[0]!;
  for (let end = 0; end < o.length; end++) t.throws(() => decodeOutcome(o.subarray(0, end)), { instanceOf: PeerFormatError });
  // A forward's batch is the rest of the frame: cut anywhere in the header, it is refused.
  const headerBytes = f.length;
  for (let end = 0; end < headerBytes; end++) t.throws(() => decodeForward(f.subarray(0, end)), { instanceOf: PeerFormatError });
  t.throws(() => decodeOutcome(f), { instanceOf: PeerFormatError, message: /type 1/ });
  t.throws(() => decodeForward(o), { instanceOf: PeerFormatError, message: /type 2/ });
  t.throws(() => decodeOutcome(Buffer.concat([o, Buffer.from([0])])), { instanceOf: PeerFormatError });
  const random = mulberry32(7);
  for (let i = 0; i < 2_000; i++) {
    const bytes = Buffer.from(Array.from({ length: Math.floor(random() * 40) }, () => Math.floor(random() * 256)));
    if (bytes.length > 0 && random() < 0.5) bytes[0] = 1 + Math.floor(random() * 2);
    for (const decode of [decodeForward, decodeOutcome]) {
      try {
        decode(bytes);
      } catch (error) {
        if (!(error instanceof PeerFormatError)) return t.fail(`${String(error)} for ${bytes.toString('hex')}`);
      }
    }
  }
  t.pass();
});
