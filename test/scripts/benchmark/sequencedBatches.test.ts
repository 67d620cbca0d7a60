import test from 'ava';
import { BatchCutter, holdsBatchTagged, lengthPrefixed } from '../../../scripts/benchmark/targets/sequencedBatches.js';

const TAGS = [
  Buffer.from('\x02x1\x00\x00\x00\x07', 'latin1'),
  Buffer.from('\x02x2\x00\x00\x00\x07', 'latin1'),
  Buffer.from('\x02x3\x00\x00\x01\x00', 'latin1'),
];
/** Three batches, each a tag and some frames (bytes that are not UTF-8 among them). */
const BATCHES = TAGS.map((tag, i) => Buffer.concat([tag, Buffer.from([0x02, 0xff, 0x00, i])]));
const STREAM = Buffer.concat(BATCHES.flatMap(lengthPrefixed));

test('a value of length-prefixed batches holds each of them, and no other', (t) => {
  for (const tag of TAGS) t.true(holdsBatchTagged(STREAM, tag));
  t.false(holdsBatchTagged(STREAM, Buffer.from('\x02x1\x00\x00\x00\x08', 'latin1')), 'another sequence number');
  t.false(holdsBatchTagged(STREAM, Buffer.from([0x02, 0xff])), 'bytes inside a batch are not a batch');
  t.false(holdsBatchTagged(Buffer.alloc(0), TAGS[0]!));
});

test('a value cut short holds only the batches that end in it', (t) => {
  const firstTwo = 2 * 4 + BATCHES[0]!.length + BATCHES[1]!.length;
  const cut = STREAM.subarray(0, firstTwo + 6);
  t.true(holdsBatchTagged(cut, TAGS[1]!));
  t.false(holdsBatchTagged(cut, TAGS[2]!));
});

test('the cutter gives every batch whole and in order, however the stream is split', (t) => {
  for (let first = 0; first <= STREAM.length; first++) {
    for (const second of [first, Math.min(STREAM.length, first + 1), Math.min(STREAM.length, first + 7)]) {
      const cutter = new BatchCutter();
      const out: string[] = [];
      for (const chunk of [STREAM.subarray(0, first), STREAM.subarray(first, second), STREAM.subarray(second)]) {
        cutter.feed(chunk, (batch) => out.push(batch.toString('hex')));
      }
      t.deepEqual(
        out,
        BATCHES.map((b) => b.toString('hex')),
        `split at ${first} and ${second}`,
      );
    }
  }
});

test('the cutter holds an unfinished batch until the rest arrives', (t) => {
  const cutter = new BatchCutter();
  const out: Buffer[] = [];
  cutter.feed(STREAM.subarray(0, 3), (batch) => out.push(batch));
  t.is(out.length, 0);
  cutter.feed(STREAM.subarray(3, 4 + BATCHES[0]!.length - 1), (batch) => out.push(batch));
  t.is(out.length, 0);
  cutter.feed(STREAM.subarray(4 + BATCHES[0]!.length - 1), (batch) => out.push(batch));
  t.is(out.length, 3);
});

test("a node's tag is not found in another's whose name it begins (x1 and x10, same sequence number)", (t) => {
  /** The tag a null node puts in front of its batch: name length, name, sequence number. */
  const tag = (name: string, seq: number): Buffer => {
    const out = Buffer.alloc(1 + name.length + 4);
    out[0] = name.length;
    out.write(name, 1, 'latin1');
    out.writeUInt32BE(seq, 1 + name.length);
    return out;
  };
  const value = Buffer.concat(lengthPrefixed(Buffer.concat([tag('x10', 7), Buffer.from([0x02, 0x01])])));
  t.true(holdsBatchTagged(value, tag('x10', 7)));
  t.false(holdsBatchTagged(value, tag('x1', 7)));
});
