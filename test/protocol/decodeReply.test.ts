import test from 'ava';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command } from '../../src/protocol/constants.js';
import { NOT_YET, ReplyDecoder, type Reply } from '../../src/protocol/decodeReply.js';
import {
  encodeCountReply,
  encodeFencedPositionReply,
  encodeListReply,
  encodeOwnerReply,
  encodePositionReply,
  encodeStatsReply,
  encodeSuccessReply,
  encodeTokenReply,
} from '../../src/protocol/encodeReply.js';
import type { StatsReply } from '../../src/protocol/messages.js';
import { STATS_FIELDS } from '../../src/protocol/messages.js';

const stats = Object.fromEntries([...STATS_FIELDS.map((f, i) => [f, i * 1000 + 1]), ['activeConnections', 3]]) as unknown as StatsReply;
const contenders = [
  { priority: 10, ttl: 30, ttw: 60, index: '42', owner: 'alice', isOwner: true },
  { priority: 5, ttl: 0, ttw: 65535, index: '42', owner: '\x00\xff', isOwner: false },
  { priority: 0, ttl: 1, ttw: 1, index: '', owner: '', isOwner: true },
];

/** A pipelined batch: each reply with the command it answers and how the server encodes it. */
const replies: Array<[Command, (out: BufferWriter) => void, Reply]> = [
  [Command.FindOwner, (out) => encodeOwnerReply(out, 'alice'), 'alice'],
  [Command.FindOwner, (out) => encodeOwnerReply(out, ''), ''],
  [Command.Request, (out) => encodePositionReply(out, 1), 1],
  [Command.FindLocation, (out) => encodePositionReply(out, 65535), 65535],
  [Command.Renew, (out) => encodeSuccessReply(out, true), true],
  [Command.Renew, (out) => encodeSuccessReply(out, false), false],
  [Command.Release, (out) => encodeCountReply(out, 0), 0],
  [Command.ReleaseAll, (out) => encodeCountReply(out, 700), 700],
  [Command.List, (out) => encodeListReply(out, contenders), contenders],
  [Command.List, (out) => encodeListReply(out, []), []],
  [Command.Stats, (out) => encodeStatsReply(out, stats), stats],
  [Command.RequestFenced, (out) => encodeFencedPositionReply(out, { position: 1, token: 2 ** 40 + 7 }), { position: 1, token: 2 ** 40 + 7 }],
  [Command.Fence, (out) => encodeTokenReply(out, 2 ** 40 + 7), 2 ** 40 + 7],
  [Command.RequestFenced, (out) => encodeFencedPositionReply(out, { position: 2, token: 0 }), { position: 2, token: 0 }],
  [Command.Fence, (out) => encodeTokenReply(out, 0), 0],
];
const out = new BufferWriter();
for (const [, encode] of replies) encode(out);
const stream = out.flush();

/** Feeds `chunks` in order and collects every reply, asking for each in request order. */
function decodeAll(chunks: Buffer[]): { decoded: Reply[]; pending: number } {
  const decoder = new ReplyDecoder();
  const decoded: Reply[] = [];
  for (const chunk of chunks) {
    decoder.push(chunk);
    for (;;) {
      const next = replies[decoded.length];
      if (next === undefined) break;
      const reply = decoder.next(next[0]);
      if (reply === NOT_YET) break;
      decoded.push(reply);
    }
  }
  return { decoded, pending: decoder.pendingBytes };
}

const expected = replies.map(([, , reply]) => reply);

test('a whole pipelined batch decodes in order', (t) => {
  t.deepEqual(decodeAll([stream]), { decoded: expected, pending: 0 });
});

test('byte by byte', (t) => {
  const bytes = Array.from({ length: stream.length }, (_, i) => stream.subarray(i, i + 1));
  t.deepEqual(decodeAll(bytes), { decoded: expected, pending: 0 });
});

test('split at every boundary', (t) => {
  for (let at = 0; at <= stream.length; at++) {
    const halves = [stream.subarray(0, at), stream.subarray(at)];
    t.deepEqual(decodeAll(halves), { decoded: expected, pending: 0 }, `split at ${at}`);
  }
});

test('decoded byte strings do not alias the carry storage that later chunks overwrite', (t) => {
  const decoder = new ReplyDecoder();
  decoder.push(Buffer.from([5, 0x61, 0x6c]));
  t.is(decoder.next(Command.FindOwner), NOT_YET);
  decoder.push(Buffer.from([0x69, 0x63, 0x65, 3]));
  const first = decoder.next(Command.FindOwner);
  decoder.push(Buffer.from([0x62, 0x6f, 0x62]));
  t.is(first, 'alice');
  t.is(decoder.next(Command.FindOwner), 'bob');
  t.is(decoder.pendingBytes, 0);
});
