import test from 'ava';
import { Parser } from 'binary-parser';
import { BufferWriter } from '../../src/protocol/BufferWriter.js';
import { Command, NEVER_MS } from '../../src/protocol/constants.js';
import { NOT_YET, ReplyDecoder, replyFrameLength, type Reply } from '../../src/protocol/decodeReply.js';
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
import { STATS_FIELDS, type Contender, type QueueView, type StatsReply } from '../../src/protocol/messages.js';
import { mulberry32 } from '../helpers/random.js';

// The mirror of decodeRequestReference.test.ts. Replies are decoded with binary-parser already,
// so what is written by hand here is the encoder and the frame scanner (replyFrameLength, which
// the stream decoder trusts to cut the stream). These parsers state each reply layout on their
// own and record where the frame ends; random replies must agree with them in bytes and length.
const asBytes = ((raw: Buffer) => raw.toString('latin1')) as (raw: unknown) => unknown;
const asFlag = ((raw: number) => raw !== 0) as (raw: unknown) => unknown;
/** binary-parser reads a u64 as a bigint; every token a server issues is below 2^53. */
const asNumber = ((raw: bigint) => Number(raw)) as (raw: unknown) => unknown;

const contender = new Parser()
  .endianness('big')
  .uint8('priority')
  .uint16('ttl')
  .uint16('ttw')
  .uint8('indexLength')
  .buffer('index', { length: 'indexLength', formatter: asBytes })
  .uint8('ownerLength')
  .buffer('owner', { length: 'ownerLength', formatter: asBytes })
  .uint8('isOwner', { formatter: asFlag });

const twoBytes = new Parser().uint16be('value').saveOffset('end');
const fencedPosition = new Parser().uint16be('position').uint64be('token', { formatter: asNumber }).saveOffset('end');

/** An entry of the detailed list (0x0D): a contender, then its time left (NEVER_MS: none) and token. */
const entryView = new Parser()
  .endianness('big')
  .uint8('priority')
  .uint16('ttl')
  .uint16('ttw')
  .uint8('ownerLength')
  .buffer('owner', { length: 'ownerLength', formatter: asBytes })
  .uint8('isOwner', { formatter: asFlag })
  .uint32('remainingMs', { formatter: ((raw: number) => (raw === NEVER_MS ? null : raw)) as (raw: unknown) => unknown })
  .uint64('token', { formatter: asNumber });
const queueView = new Parser()
  .endianness('big')
  .uint8('indexLength')
  .buffer('index', { length: 'indexLength', formatter: asBytes })
  .uint32('heldForMs')
  .uint16('count')
  .array('entries', { type: entryView, length: 'count' });

const REFERENCE: Record<Command, Parser> = {
  [Command.FindOwner]: new Parser().uint8('length').buffer('value', { length: 'length', formatter: asBytes }).saveOffset('end'),
  [Command.Request]: twoBytes,
  [Command.FindLocation]: twoBytes,
  [Command.Renew]: new Parser().uint8('value', { formatter: asFlag }).saveOffset('end'),
  [Command.Release]: twoBytes,
  [Command.ReleaseAll]: twoBytes,
  [Command.List]: new Parser().uint16be('count').array('value', { type: contender, length: 'count' }).saveOffset('end'),
  [Command.Stats]: STATS_FIELDS.reduce((p, field) => p.uint32be(field), new Parser())
    .uint16be('activeConnections')
    .saveOffset('end'),
  [Command.Fence]: new Parser().uint64be('value', { formatter: asNumber }).saveOffset('end'),
  [Command.RequestFenced]: fencedPosition,
  [Command.AcquireWait]: fencedPosition,
  [Command.AwaitLoss]: new Parser().uint8('value').saveOffset('end'),
  [Command.ListDetailed]: new Parser().uint16be('count').array('value', { type: queueView, length: 'count' }).saveOffset('end'),
};

/** What the reference reads from the frame at the start of `bytes`, and where that frame ends. */
function reference(command: Command, bytes: Buffer): { value: Reply; end: number } {
  const parsed = REFERENCE[command].parse(bytes) as Record<string, unknown> & { end: number };
  if (command === Command.Stats) {
    const { end, ...stats } = parsed;
    return { value: stats as unknown as StatsReply, end };
  }
  if (command === Command.RequestFenced || command === Command.AcquireWait) {
    const { position, token, end } = parsed as unknown as { position: number; token: number; end: number };
    return { value: { position, token }, end };
  }
  if (command === Command.List) {
    const value = (parsed['value'] as Array<Contender & Record<string, unknown>>).map(({ priority, ttl, ttw, index, owner, isOwner }) => ({
      priority,
      ttl,
      ttw,
      index,
      owner,
      isOwner,
    }));
    return { value, end: parsed.end };
  }
  if (command === Command.ListDetailed) {
    type Parsed = { index: string; heldForMs: number; entries: Array<Record<string, unknown>> };
    const value = (parsed['value'] as Parsed[]).map(({ index, heldForMs, entries }) => ({
      index,
      heldForMs,
      entries: entries.map(({ priority, ttl, ttw, owner, isOwner, remainingMs, token }) => ({ priority, ttl, ttw, index, owner, isOwner, remainingMs, token })),
    }));
    return { value: value as unknown as QueueView[], end: parsed.end };
  }
  return { value: parsed['value'] as Reply, end: parsed.end };
}

interface Sample {
  readonly command: Command;
  readonly reply: Reply;
  readonly frame: Buffer;
}

function randomSamples(count: number, seed: number): Sample[] {
  const random = mulberry32(seed);
  const int = (below: number): number => Math.floor(random() * below);
  const bytes = (): string => {
    const length = random() < 0.2 ? 255 : int(40);
    return String.fromCharCode(...Array.from({ length }, () => int(256)));
  };
  // Tokens of every size below 2^53, and the edges: 0 (not the owner) and 2^53 - 1.
  const token = (): number => {
    const roll = random();
    if (roll < 0.1) return 0;
    if (roll < 0.2) return Number.MAX_SAFE_INTEGER;
    return int(2 ** 21) * 2 ** 32 + int(2 ** 32);
  };
  const commands = Object.values(Command);
  const writer = new BufferWriter();
  const samples: Sample[] = [];
  for (let i = 0; i < count; i++) {
    const command = commands[int(commands.length)]!;
    let reply: Reply;
    switch (command) {
      case Command.FindOwner:
        encodeOwnerReply(writer, (reply = bytes()));
        break;
      case Command.Request:
      case Command.FindLocation:
        encodePositionReply(writer, (reply = int(65536)));
        break;
      case Command.Renew:
        encodeSuccessReply(writer, (reply = random() < 0.5));
        break;
      case Command.Release:
      case Command.ReleaseAll:
        encodeCountReply(writer, (reply = int(65536)));
        break;
      case Command.List:
        reply = Array.from({ length: random() < 0.2 ? 0 : int(6) }, () => ({
          priority: int(256),
          ttl: int(65536),
          ttw: int(65536),
          index: bytes(),
          owner: bytes(),
          isOwner: random() < 0.5,
        }));
        encodeListReply(writer, reply);
        break;
      case Command.Stats: {
        const stats: Record<string, number> = { activeConnections: int(65536) };
        for (const field of STATS_FIELDS) stats[field] = int(2 ** 32);
        encodeStatsReply(writer, (reply = stats as unknown as StatsReply));
        break;
      }
      case Command.Fence:
        encodeTokenReply(writer, (reply = token()));
        break;
      case Command.RequestFenced:
      case Command.AcquireWait: {
        const position = int(65536);
        encodeFencedPositionReply(writer, (reply = { position, token: position === 1 ? token() : 0 }));
        break;
      }
      case Command.AwaitLoss:
        encodeLossReply(writer, (reply = int(5)));
        break;
      case Command.ListDetailed:
        reply = Array.from({ length: random() < 0.2 ? 0 : int(4) }, (): QueueView => {
          const index = bytes();
          return {
            index,
            heldForMs: random() < 0.5 ? 0 : int(2 ** 32),
            entries: Array.from({ length: int(4) }, (_, n) => ({
              priority: int(256),
              ttl: int(65536),
              ttw: int(65536),
              index,
              owner: bytes(),
              isOwner: n === 0 && random() < 0.5,
              remainingMs: random() < 0.2 ? null : int(NEVER_MS),
              token: n === 0 ? token() : 0,
            })),
          };
        });
        encodeQueuesReply(writer, reply);
        break;
    }
    samples.push({ command, reply, frame: writer.flush() });
  }
  return samples;
}

const SAMPLES = randomSamples(2000, 0x5e91);

test('random replies of every command are laid out as the binary-parser reference reads them', (t) => {
  for (const { command, reply, frame } of SAMPLES) {
    const read = reference(command, frame);
    t.deepEqual(read.value, reply);
    t.is(read.end, frame.length);
    t.is(replyFrameLength(command, frame, 0, frame.length), read.end);
  }
});

test('a random pipelined stream of them, cut into random chunks, decodes to the same replies', (t) => {
  const random = mulberry32(0xc0de);
  const stream = Buffer.concat(SAMPLES.map((s) => s.frame));
  const decoder = new ReplyDecoder();
  const decoded: Reply[] = [];
  for (let at = 0; at < stream.length;) {
    const to = Math.min(stream.length, at + 1 + Math.floor(random() * 600));
    decoder.push(stream.subarray(at, to));
    at = to;
    for (let next = SAMPLES[decoded.length]; next !== undefined; next = SAMPLES[decoded.length]) {
      const reply = decoder.next(next.command);
      if (reply === NOT_YET) break;
      decoded.push(reply);
    }
  }
  t.deepEqual(
    decoded,
    SAMPLES.map((s) => s.reply),
  );
  t.is(decoder.pendingBytes, 0);
});
