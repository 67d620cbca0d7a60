import test from 'ava';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command, MAX_REQUEST_LENGTH, NO_WAIT_BOUND } from '../../src/protocol/constants.js';
import { decodeRequest, RequestDecoder, requestFrameLength, UnknownCommandError } from '../../src/protocol/decodeRequest.js';
import { encodeRequest } from '../../src/protocol/encodeRequest.js';
import { INCOMPLETE } from '../../src/protocol/framing.js';
import type { Request } from '../../src/protocol/messages.js';

const allBytes = String.fromCharCode(...Array.from({ length: 255 }, (_, i) => 255 - i));

/** One request of every kind, with awkward bytes: empty, NUL, high bytes, invalid UTF-8. */
const SAMPLES: Request[] = [
  { command: Command.FindOwner, key: 'users', index: '42' },
  { command: Command.FindOwner, key: '', index: '' },
  { command: Command.Request, key: 'users', index: '42', owner: 'alice', ttl: 30, ttw: 60, priority: 10 },
  { command: Command.Request, key: allBytes, index: '\x00\xff\xc3(', owner: allBytes, ttl: 65535, ttw: 0, priority: 255 },
  { command: Command.FindLocation, key: 'k', index: 'i', owner: 'o' },
  { command: Command.Renew, key: 'k', index: '\x80', owner: '\xfe\xff' },
  { command: Command.Release, key: 'k', index: '*', owner: 'o' },
  { command: Command.ReleaseAll, owner: 'worker-7' },
  { command: Command.List, key: 'users' },
  { command: Command.Stats },
  { command: Command.Fence, key: 'users', index: '42', owner: 'alice' },
  { command: Command.Fence, key: '', index: '\x00', owner: allBytes },
  { command: Command.RequestFenced, key: 'users', index: '42', owner: 'alice', ttl: 30, ttw: 60, priority: 10 },
  { command: Command.RequestFenced, key: allBytes, index: '', owner: '\xc3(', ttl: 0, ttw: 65535, priority: 0 },
  { command: Command.AcquireWait, key: 'users', index: '42', owner: 'alice', ttl: 30, ttw: 60, priority: 10, waitMs: 1500 },
  { command: Command.AcquireWait, key: allBytes, index: '\x00', owner: allBytes, ttl: 65535, ttw: 65535, priority: 255, waitMs: NO_WAIT_BOUND },
  { command: Command.AwaitLoss, key: 'users', index: '42', owner: 'alice' },
  { command: Command.AwaitLoss, key: '', index: '\xff', owner: '\x00\x00' },
  { command: Command.ListDetailed, key: 'users' },
  { command: Command.ListDetailed, key: allBytes },
];

function encode(requests: Request[]): Buffer {
  const writer = new BufferWriter();
  for (const r of requests) encodeRequest(writer, r);
  return writer.flush();
}

/** The fields that matter, without binary-parser's length bookkeeping. */
function essentials(r: Request): Request {
  const { command } = r;
  const picked: Record<string, unknown> = { command };
  for (const f of ['key', 'index', 'owner', 'ttl', 'ttw', 'priority', 'waitMs'] as const) {
    if (f in r) picked[f] = (r as unknown as Record<string, unknown>)[f];
  }
  return picked as unknown as Request;
}

function decodeChunks(chunks: Buffer[]): Request[] {
  const decoder = new RequestDecoder();
  const out: Request[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (let r = decoder.next(); r !== undefined; r = decoder.next()) out.push(essentials(r));
  }
  return out;
}

for (const sample of SAMPLES) {
  const bytes = encode([sample]);
  const title = `0x${sample.command.toString(16).padStart(2, '0')} (${bytes.length} bytes)`;

  test(`${title}: decodes whole`, (t) => {
    t.deepEqual(decodeChunks([bytes]), [sample]);
  });

  test(`${title}: decodes byte by byte`, (t) => {
    const chunks = [...bytes].map((b) => Buffer.from([b]));
    t.deepEqual(decodeChunks(chunks), [sample]);
  });

  test(`${title}: decodes split at every boundary`, (t) => {
    t.deepEqual(decodeChunks([Buffer.alloc(0), bytes, Buffer.alloc(0)]), [sample], 'empty chunks around it');
    for (let split = 1; split < bytes.length; split++) {
      t.deepEqual(decodeChunks([bytes.subarray(0, split), bytes.subarray(split)]), [sample], `split at ${split}`);
    }
  });

  test(`${title}: a truncated frame is incomplete, never a short read`, (t) => {
    for (let end = 0; end < bytes.length; end++) t.is(requestFrameLength(bytes, 0, end), INCOMPLETE);
    t.is(requestFrameLength(bytes, 0, bytes.length), bytes.length);
  });
}

test('a pipelined batch of every request decodes in order, whole and split everywhere', (t) => {
  const bytes = encode(SAMPLES);
  t.deepEqual(decodeChunks([bytes]), SAMPLES);
  for (let split = 1; split < bytes.length; split++) {
    t.deepEqual(decodeChunks([bytes.subarray(0, split), bytes.subarray(split)]), SAMPLES);
  }
  t.deepEqual(decodeChunks([...bytes].map((b) => Buffer.from([b]))), SAMPLES);
});

test('strings stay raw bytes: invalid UTF-8 and NUL survive unchanged', (t) => {
  const [decoded] = decodeChunks([encode([SAMPLES[3]!])]);
  t.is((decoded as { key: string }).key, allBytes);
  t.is((decoded as { index: string }).index, '\x00\xff\xc3(');
});

test('the longest frame is MAX_REQUEST_LENGTH bytes', (t) => {
  const max = 'x'.repeat(255);
  const bytes = encode([{ command: Command.AcquireWait, key: max, index: max, owner: max, ttl: 1, ttw: 1, priority: 1, waitMs: 1 }]);
  t.is(bytes.length, MAX_REQUEST_LENGTH);
});

test('an unknown command byte is an error, after the valid requests before it', (t) => {
  for (const bad of [0x00, 0x0e, 0x7f, 0xff]) {
    const decoder = new RequestDecoder();
    decoder.push(Buffer.concat([encode([{ command: Command.Stats }]), Buffer.from([bad, 1, 2, 3])]));
    t.deepEqual(decoder.next(), { command: Command.Stats });
    const error = t.throws(() => decoder.next(), { instanceOf: UnknownCommandError });
    t.is(error?.commandByte, bad);
  }
});

test('exact byte layout of a request (0x02) as the protocol document gives it', (t) => {
  const bytes = encode([{ command: Command.Request, key: 'ab', index: 'c', owner: 'de', ttl: 0x0102, ttw: 0x0304, priority: 7 }]);
  t.deepEqual([...bytes], [0x02, 2, 0x61, 0x62, 1, 0x63, 2, 0x64, 0x65, 0x01, 0x02, 0x03, 0x04, 7]);
});

test('exact byte layouts of fence (0x09) and request with fence (0x0A): the strings of 0x03, the whole of 0x02', (t) => {
  t.deepEqual([...encode([{ command: Command.Fence, key: 'ab', index: 'c', owner: 'de' }])], [0x09, 2, 0x61, 0x62, 1, 0x63, 2, 0x64, 0x65]);
  const fenced = encode([{ command: Command.RequestFenced, key: 'ab', index: 'c', owner: 'de', ttl: 0x0102, ttw: 0x0304, priority: 7 }]);
  t.deepEqual([...fenced], [0x0a, 2, 0x61, 0x62, 1, 0x63, 2, 0x64, 0x65, 0x01, 0x02, 0x03, 0x04, 7]);
});

test('exact byte layouts of acquire-and-wait (0x0B): 0x0A then the wait bound, milliseconds as u32 big-endian', (t) => {
  const bytes = encode([{ command: Command.AcquireWait, key: 'ab', index: 'c', owner: 'de', ttl: 0x0102, ttw: 0x0304, priority: 7, waitMs: 0x05060708 }]);
  t.deepEqual([...bytes], [0x0b, 2, 0x61, 0x62, 1, 0x63, 2, 0x64, 0x65, 0x01, 0x02, 0x03, 0x04, 7, 0x05, 0x06, 0x07, 0x08]);
  const unbounded = encode([{ command: Command.AcquireWait, key: '', index: '', owner: '', ttl: 0, ttw: 0, priority: 0, waitMs: NO_WAIT_BOUND }]);
  t.deepEqual([...unbounded], [0x0b, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
});

test('exact byte layouts of the loss notice (0x0C, the strings of 0x03) and the detailed list (0x0D, the string of 0x07)', (t) => {
  t.deepEqual([...encode([{ command: Command.AwaitLoss, key: 'ab', index: 'c', owner: 'de' }])], [0x0c, 2, 0x61, 0x62, 1, 0x63, 2, 0x64, 0x65]);
  t.deepEqual([...encode([{ command: Command.ListDetailed, key: 'ab' }])], [0x0d, 2, 0x61, 0x62]);
});

test('decodeRequest takes one whole frame and refuses a truncated one', (t) => {
  for (const sample of SAMPLES) {
    const bytes = encode([sample]);
    t.deepEqual(decodeRequest(bytes), sample);
    if (bytes.length > 1) t.throws(() => decodeRequest(bytes.subarray(0, bytes.length - 1)), { instanceOf: RangeError });
  }
  t.throws(() => decodeRequest(Buffer.from([0x0e])), { instanceOf: UnknownCommandError });
});
