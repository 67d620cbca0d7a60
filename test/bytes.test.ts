import test from 'ava';
import { byteString, sameOrNew } from '../src/bytes.js';
import { mulberry32 } from '../src/runtime/Random.js';

/** Every length a name can have (0–255), each filled with bytes drawn from all 256 values. */
function buffersOfEveryLength(): Buffer[] {
  const random = mulberry32(11);
  return Array.from({ length: 256 }, (_, length) => Buffer.from(Array.from({ length }, () => Math.floor(random() * 256))));
}

test('byteString is the latin1 decode at every length (the short, made-by-hand ones and the long ones) and anywhere in a buffer', (t) => {
  for (const bytes of buffersOfEveryLength()) {
    const padded = Buffer.concat([Buffer.from([1, 2, 3]), bytes, Buffer.from([4])]);
    t.is(byteString(bytes), bytes.toString('latin1'));
    t.is(byteString(padded, 3, 3 + bytes.length), bytes.toString('latin1'));
  }
  t.is(byteString(Buffer.from([0x00, 0x80, 0xff])), '\x00\x80\xff');
});

test('sameOrNew gives the last name back only when every byte matches', (t) => {
  for (const bytes of buffersOfEveryLength()) {
    const name = bytes.toString('latin1');
    t.is(sameOrNew(name, bytes, 0, bytes.length), name);
    t.is(sameOrNew('', bytes, 0, bytes.length), name);
    for (const at of [0, bytes.length >> 1, bytes.length - 1]) {
      if (at < 0) continue;
      const changed = Buffer.from(bytes);
      changed[at] = changed[at]! ^ 0x01;
      t.is(sameOrNew(name, changed, 0, changed.length), changed.toString('latin1'));
    }
  }
});
