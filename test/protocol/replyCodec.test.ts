import test from 'ava';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command, LossReason, STATS_REPLY_LENGTH } from '../../src/protocol/constants.js';
import { decodeReply, replyFrameLength, type Reply } from '../../src/protocol/decodeReply.js';
import {
  encodeCountReply,
  encodeFencedPositionReply,
  encodeListReply,
  encodeLossReply,
  encodeOwnerReply,
  encodePositionReply,
  encodeQueuesReply,
  encodeStatsReply,
  encodeSuccessReply,
  encodeTokenReply,
} from '../../src/protocol/encodeReply.js';
import { INCOMPLETE } from '../../src/protocol/framing.js';
import type { Contender, QueueView, StatsReply } from '../../src/protocol/messages.js';

const STATS: StatsReply = {
  uptimeSeconds: 1,
  lockRequests: 2,
  ownerLookups: 3,
  contenderLookups: 4,
  renewals: 5,
  releases: 6,
  releaseAlls: 7,
  listRequests: 8,
  statsRequests: 9,
  acceptedConnections: 10,
  rejectedNotInHosts: 11,
  rejectedTooBusy: 12,
  owners: 13,
  contenders: 14,
  activeConnections: 15,
};

const CONTENDERS: Contender[] = [
  { priority: 9, ttl: 30, ttw: 60, index: '42', owner: 'alice', isOwner: true },
  { priority: 0, ttl: 0, ttw: 65535, index: '', owner: '\x00\xff', isOwner: false },
];

/** A key with two queues: '42' owned by alice (token 7, 1.5 s left) with bob waiting for ever; '' held back 2 s, empty. */
const QUEUES: QueueView[] = [
  {
    index: '42',
    heldForMs: 0,
    entries: [
      { priority: 9, ttl: 30, ttw: 60, index: '42', owner: 'alice', isOwner: true, remainingMs: 1500, token: 7 },
      { priority: 0, ttl: 5, ttw: 0, index: '42', owner: 'bob', isOwner: false, remainingMs: null, token: 0 },
    ],
  },
  { index: '', heldForMs: 0x01020304, entries: [] },
];

type Case = [string, Command, (w: BufferWriter) => void, number[], Reply];

const CASES: Case[] = [
  ['owner', Command.FindOwner, (w) => encodeOwnerReply(w, 'bob'), [3, 0x62, 0x6f, 0x62], 'bob'],
  ['no owner', Command.FindOwner, (w) => encodeOwnerReply(w, ''), [0], ''],
  ['position', Command.Request, (w) => encodePositionReply(w, 258), [1, 2], 258],
  ['refused', Command.Request, (w) => encodePositionReply(w, 0), [0, 0], 0],
  ['location', Command.FindLocation, (w) => encodePositionReply(w, 1), [0, 1], 1],
  ['renewed', Command.Renew, (w) => encodeSuccessReply(w, true), [1], true],
  ['not renewed', Command.Renew, (w) => encodeSuccessReply(w, false), [0], false],
  ['released', Command.Release, (w) => encodeCountReply(w, 1), [0, 1], 1],
  ['released many (saturated)', Command.ReleaseAll, (w) => encodeCountReply(w, 70_000), [0xff, 0xff], 65535],
  ['empty list', Command.List, (w) => encodeListReply(w, []), [0, 0], []],
  [
    'list',
    Command.List,
    (w) => encodeListReply(w, CONTENDERS),
    [0, 2, 9, 0, 30, 0, 60, 2, 0x34, 0x32, 5, 0x61, 0x6c, 0x69, 0x63, 0x65, 1, 0, 0, 0, 0xff, 0xff, 0, 2, 0, 0xff, 0],
    CONTENDERS,
  ],
  ['stats', Command.Stats, (w) => encodeStatsReply(w, STATS), [...Array.from({ length: 14 }, (_, i) => [0, 0, 0, i + 1]).flat(), 0, 15], STATS],
  ['token', Command.Fence, (w) => encodeTokenReply(w, 0x0102_0304_0506), [0, 0, 1, 2, 3, 4, 5, 6], 0x0102_0304_0506],
  ['no token (not the owner)', Command.Fence, (w) => encodeTokenReply(w, 0), [0, 0, 0, 0, 0, 0, 0, 0], 0],
  ['largest token', Command.Fence, (w) => encodeTokenReply(w, Number.MAX_SAFE_INTEGER), [0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], Number.MAX_SAFE_INTEGER],
  [
    'fenced grant',
    Command.RequestFenced,
    (w) => encodeFencedPositionReply(w, { position: 1, token: 1_790_000_000_000_001 }),
    [0, 1, 0, 0x06, 0x5b, 0xfe, 0xda, 0x25, 0xe0, 0x01],
    { position: 1, token: 1_790_000_000_000_001 },
  ],
  [
    'fenced wait',
    Command.RequestFenced,
    (w) => encodeFencedPositionReply(w, { position: 3, token: 0 }),
    [0, 3, 0, 0, 0, 0, 0, 0, 0, 0],
    { position: 3, token: 0 },
  ],
  [
    'fenced refusal (saturated position as 0x02)',
    Command.RequestFenced,
    (w) => encodeFencedPositionReply(w, { position: 70_000, token: 0 }),
    [0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0],
    { position: 65535, token: 0 },
  ],
  [
    'acquire-and-wait granted (as 0x0A)',
    Command.AcquireWait,
    (w) => encodeFencedPositionReply(w, { position: 1, token: 0x0102 }),
    [0, 1, 0, 0, 0, 0, 0, 0, 1, 2],
    { position: 1, token: 0x0102 },
  ],
  [
    'acquire-and-wait bound passed (still waiting, position 2)',
    Command.AcquireWait,
    (w) => encodeFencedPositionReply(w, { position: 2, token: 0 }),
    [0, 2, 0, 0, 0, 0, 0, 0, 0, 0],
    { position: 2, token: 0 },
  ],
  ['loss: not the owner', Command.AwaitLoss, (w) => encodeLossReply(w, LossReason.NotOwner), [0], LossReason.NotOwner],
  ['loss: released', Command.AwaitLoss, (w) => encodeLossReply(w, LossReason.Released), [1], LossReason.Released],
  ['loss: expired', Command.AwaitLoss, (w) => encodeLossReply(w, LossReason.Expired), [4], LossReason.Expired],
  ['empty detailed list', Command.ListDetailed, (w) => encodeQueuesReply(w, []), [0, 0], []],
  [
    'detailed list',
    Command.ListDetailed,
    (w) => encodeQueuesReply(w, QUEUES),
    [
      ...[0, 2], // two queues
      ...[2, 0x34, 0x32, 0, 0, 0, 0, 0, 2], // index '42', not held back, two entries
      ...[9, 0, 30, 0, 60, 5, 0x61, 0x6c, 0x69, 0x63, 0x65, 1, 0, 0, 0x05, 0xdc, 0, 0, 0, 0, 0, 0, 0, 7], // alice owns, 1500 ms, token 7
      ...[0, 0, 5, 0, 0, 3, 0x62, 0x6f, 0x62, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0], // bob waits for ever
      ...[0, 1, 2, 3, 4, 0, 0], // index '', held back 0x01020304 ms, no entries
    ],
    QUEUES,
  ],
];

function decodeAll(command: Command, chunks: Buffer[]): Reply[] {
  let buffer = Buffer.alloc(0);
  const out: Reply[] = [];
  for (const chunk of chunks) {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const length = replyFrameLength(command, buffer, 0, buffer.length);
      if (length === INCOMPLETE) break;
      out.push(decodeReply(command, buffer.subarray(0, length)));
      buffer = buffer.subarray(length);
    }
  }
  return out;
}

for (const [name, command, encode, bytes, decoded] of CASES) {
  test(`${name}: exact bytes`, (t) => {
    const w = new BufferWriter();
    encode(w);
    t.deepEqual([...w.flush()], bytes);
  });

  test(`${name}: decodes whole, byte by byte, and split at every boundary`, (t) => {
    const buffer = Buffer.from(bytes);
    t.deepEqual(decodeAll(command, [buffer]), [decoded]);
    t.deepEqual(
      decodeAll(
        command,
        [...buffer].map((b) => Buffer.from([b])),
      ),
      [decoded],
    );
    for (let split = 1; split < buffer.length; split++) {
      t.deepEqual(decodeAll(command, [buffer.subarray(0, split), buffer.subarray(split)]), [decoded]);
    }
    for (let end = 0; end < buffer.length; end++) t.is(replyFrameLength(command, buffer, 0, end), INCOMPLETE);
  });
}

test('the stats reply is 58 bytes', (t) => {
  const w = new BufferWriter();
  encodeStatsReply(w, STATS);
  t.is(w.length, 58);
  t.is(STATS_REPLY_LENGTH, 58);
});

test('stats counters wrap at 2^32 like the C counters; active connections saturate at 65535', (t) => {
  const w = new BufferWriter();
  encodeStatsReply(w, { ...STATS, lockRequests: 2 ** 32 + 5, activeConnections: 70_000 });
  const bytes = w.flush();
  t.is(bytes.readUInt32BE(4), 5);
  t.is(bytes.readUInt16BE(56), 65535);
});

test('a list longer than 65535 entries sends exactly 65535 of them', (t) => {
  const many = Array.from({ length: 65_540 }, () => CONTENDERS[0]!);
  const w = new BufferWriter();
  encodeListReply(w, many);
  const bytes = w.flush();
  t.is(bytes.readUInt16BE(0), 65535);
  t.is(replyFrameLength(Command.List, bytes, 0, bytes.length), bytes.length);
});

test('the writer refuses a string the one-byte length cannot carry', (t) => {
  t.throws(() => new BufferWriter().string('x'.repeat(256)), { instanceOf: RangeError });
});

test('a token beyond 2^53 is refused by the reply decoder, not rounded', (t) => {
  for (const high of [0x0020_0000, 0x8000_0000, 0xffff_ffff]) {
    const token = Buffer.alloc(8);
    token.writeUInt32BE(high, 0);
    t.throws(() => decodeReply(Command.Fence, token), { instanceOf: RangeError, message: /beyond 2\^53/ }, high.toString(16));
    t.throws(() => decodeReply(Command.RequestFenced, Buffer.concat([Buffer.from([0, 1]), token])), { instanceOf: RangeError, message: /beyond 2\^53/ });
  }
  t.is(decodeReply(Command.Fence, Buffer.from([0, 0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])), Number.MAX_SAFE_INTEGER);
});

test('the writer refuses a token that is no safe non-negative integer', (t) => {
  for (const token of [-1, 0.5, 2 ** 53, Number.NaN]) t.throws(() => encodeTokenReply(new BufferWriter(), token), { instanceOf: RangeError }, String(token));
});
