import test from 'ava';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { mulberry32 } from '../../src/runtime/Random.js';

test('a string is its length byte and its latin1 bytes, at every length 0–255 (short ones written by hand, long ones natively) and every byte value', (t) => {
  const random = mulberry32(5);
  const writer = new BufferWriter(16);
  const expected: Buffer[] = [];
  for (let length = 0; length <= 255; length++) {
    const bytes = Buffer.from(Array.from({ length }, (_, i) => (i < 256 && length === 255 ? i : Math.floor(random() * 256))));
    writer.u8(0xaa).string(bytes.toString('latin1'));
    expected.push(Buffer.from([0xaa, length]), bytes);
  }
  t.deepEqual(writer.flush(), Buffer.concat(expected));
});
