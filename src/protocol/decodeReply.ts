/**
 * The client's side of the wire: reply bytes in, replies out. A reply carries no command byte, so
 * whoever reads it says which command it answers (requests are answered in order). The client is
 * not on the server's hot path, so the variable layouts (owner, list, stats) are declared with
 * binary-parser, which states them plainly; decodeRequest.ts, the server's mirror of this file,
 * reads by hand because it is.
 */
import { Parser } from 'binary-parser';
import type { ByteString } from '../bytes.js';
import {
  Command,
  COUNT_LENGTH,
  MILLISECONDS_LENGTH,
  NEVER_MS,
  OWNER_FLAG_LENGTH,
  POSITION_LENGTH,
  PRIORITY_LENGTH,
  REASON_LENGTH,
  STATS_REPLY_LENGTH,
  SUCCESS_LENGTH,
  TTL_LENGTH,
  TOKEN_LENGTH,
  TTW_LENGTH,
} from './constants.js';
import { INCOMPLETE, stringEnd, wholeFrameLength } from './framing.js';
import { STATS_FIELDS, type Contender, type EntryView, type FencedPosition, type QueueView, type StatsReply } from './messages.js';

/** What each command's reply decodes to. */
export interface ReplyOf {
  [Command.FindOwner]: ByteString;
  [Command.Request]: number;
  [Command.FindLocation]: number;
  [Command.Renew]: boolean;
  [Command.Release]: number;
  [Command.ReleaseAll]: number;
  [Command.List]: Contender[];
  [Command.Stats]: StatsReply;
  [Command.Fence]: number;
  [Command.RequestFenced]: FencedPosition;
  [Command.AcquireWait]: FencedPosition;
  [Command.AwaitLoss]: number;
  [Command.ListDetailed]: QueueView[];
}
export type Reply = ReplyOf[Command];

const CONTENDER_FIXED_HEAD = PRIORITY_LENGTH + TTL_LENGTH + TTW_LENGTH;

/**
 * Length of the reply to `command` that starts at buffer[start], or INCOMPLETE. Replies carry no
 * command byte, so the caller says which reply it expects (requests are answered in order).
 */
export function replyFrameLength(command: Command, buffer: Buffer, start: number, end: number): number {
  switch (command) {
    case Command.FindOwner:
      return wholeFrameLength(start, stringEnd(buffer, start, end), end);
    case Command.Request:
    case Command.FindLocation:
      return wholeFrameLength(start, start + POSITION_LENGTH, end);
    case Command.Renew:
      return wholeFrameLength(start, start + SUCCESS_LENGTH, end);
    case Command.Release:
    case Command.ReleaseAll:
      return wholeFrameLength(start, start + COUNT_LENGTH, end);
    case Command.Stats:
      return wholeFrameLength(start, start + STATS_REPLY_LENGTH, end);
    case Command.Fence:
      return wholeFrameLength(start, start + TOKEN_LENGTH, end);
    case Command.RequestFenced:
    case Command.AcquireWait:
      return wholeFrameLength(start, start + POSITION_LENGTH + TOKEN_LENGTH, end);
    case Command.AwaitLoss:
      return wholeFrameLength(start, start + REASON_LENGTH, end);
    case Command.ListDetailed: {
      if (end - start < COUNT_LENGTH) return INCOMPLETE;
      const queues = buffer.readUInt16BE(start);
      let offset = start + COUNT_LENGTH;
      for (let q = 0; q < queues && offset <= end; q++) {
        const countAt = stringEnd(buffer, offset, end) + MILLISECONDS_LENGTH;
        if (countAt + COUNT_LENGTH > end) return INCOMPLETE;
        const entries = buffer.readUInt16BE(countAt);
        offset = countAt + COUNT_LENGTH;
        for (let i = 0; i < entries && offset <= end; i++) {
          offset = stringEnd(buffer, offset + CONTENDER_FIXED_HEAD, end) + OWNER_FLAG_LENGTH + MILLISECONDS_LENGTH + TOKEN_LENGTH;
        }
      }
      return wholeFrameLength(start, offset, end);
    }
    case Command.List: {
      if (end - start < COUNT_LENGTH) return INCOMPLETE;
      const count = buffer.readUInt16BE(start);
      let offset = start + COUNT_LENGTH;
      // Stop at the first contender that has not all arrived rather than walk the whole count.
      for (let i = 0; i < count && offset <= end; i++) {
        const ownerAt = stringEnd(buffer, offset + CONTENDER_FIXED_HEAD, end);
        offset = stringEnd(buffer, ownerAt, end) + OWNER_FLAG_LENGTH;
      }
      return wholeFrameLength(start, offset, end);
    }
  }
}

/** Returned by {@link ReplyDecoder.next} while the reply's bytes have not all arrived. */
export const NOT_YET: unique symbol = Symbol('not yet');

const MIN_CARRY_CAPACITY = 4 * 1024;

/**
 * Turns the server's byte stream into replies. Replies carry no command byte, so the caller says
 * which reply comes next (requests are answered in order). A reply split across chunks is carried
 * in storage that grows by doubling, so even a 30 MB list reply arriving in 64 KB pieces costs
 * linear copying; when nothing is carried, chunks are read in place.
 */
export class ReplyDecoder {
  private buffer: Buffer = Buffer.alloc(0);
  private start = 0;
  private end = 0;
  /** Whether `buffer` is our own carry storage (and may be written) rather than a received chunk. */
  private ownsBuffer = false;

  push(chunk: Buffer): void {
    const pending = this.end - this.start;
    if (pending === 0) {
      this.buffer = chunk;
      this.start = 0;
      this.end = chunk.length;
      this.ownsBuffer = false;
      return;
    }
    if (this.ownsBuffer && this.end + chunk.length <= this.buffer.length) {
      this.end += chunk.copy(this.buffer, this.end);
      return;
    }
    const needed = pending + chunk.length;
    let capacity = this.ownsBuffer ? this.buffer.length : MIN_CARRY_CAPACITY;
    while (capacity < needed) capacity *= 2;
    // Reuse our storage when it is big enough and only needs compacting (copy handles overlap).
    const storage = this.ownsBuffer && capacity === this.buffer.length ? this.buffer : Buffer.allocUnsafe(capacity);
    this.buffer.copy(storage, 0, this.start, this.end);
    chunk.copy(storage, pending);
    this.buffer = storage;
    this.start = 0;
    this.end = needed;
    this.ownsBuffer = true;
  }

  /** The next reply, decoded as the reply to `command`, or NOT_YET. */
  next<C extends Command>(command: C): ReplyOf[C] | typeof NOT_YET {
    const length = replyFrameLength(command, this.buffer, this.start, this.end);
    if (length === INCOMPLETE) return NOT_YET;
    const frame = this.buffer.subarray(this.start, this.start + length);
    this.start += length;
    return decodeReply(command, frame);
  }

  /** Bytes received that are not yet a whole reply. */
  get pendingBytes(): number {
    return this.end - this.start;
  }
}

// The variable reply layouts, one binary-parser each; the fixed two-byte and one-byte replies
// are read directly in decodeReply.
const toByteString = (raw: Buffer): ByteString => raw.toString('latin1');
const asByteString = toByteString as (raw: unknown) => unknown;

const ownerReplyParser = new Parser().uint8('length').buffer('owner', { length: 'length', formatter: asByteString });
const contenderParser = new Parser()
  .endianness('big')
  .uint8('priority')
  .uint16('ttl')
  .uint16('ttw')
  .uint8('indexLength')
  .buffer('index', { length: 'indexLength', formatter: asByteString })
  .uint8('ownerLength')
  .buffer('owner', { length: 'ownerLength', formatter: asByteString })
  .uint8('isOwner', { formatter: ((flag: number) => flag !== 0) as (raw: unknown) => unknown });
const listReplyParser = new Parser().endianness('big').uint16('count').array('contenders', { type: contenderParser, length: 'count' });
const entryViewParser = new Parser()
  .endianness('big')
  .uint8('priority')
  .uint16('ttl')
  .uint16('ttw')
  .uint8('ownerLength')
  .buffer('owner', { length: 'ownerLength', formatter: asByteString })
  .uint8('isOwner', { formatter: ((flag: number) => flag !== 0) as (raw: unknown) => unknown })
  .uint32('remainingMs', { formatter: ((ms: number) => (ms === NEVER_MS ? null : ms)) as (raw: unknown) => unknown })
  .buffer('token', { length: TOKEN_LENGTH });
const queueViewParser = new Parser()
  .endianness('big')
  .uint8('indexLength')
  .buffer('index', { length: 'indexLength', formatter: asByteString })
  .uint32('heldForMs')
  .uint16('count')
  .array('entries', { type: entryViewParser, length: 'count' });
const queuesReplyParser = new Parser().endianness('big').uint16('count').array('queues', { type: queueViewParser, length: 'count' });
const statsReplyParser = STATS_FIELDS.reduce((p, field) => p.uint32(field), new Parser().endianness('big')).uint16('activeConnections');

/** Largest high word of a token that is still a safe integer (2^53 - 1 has 0x1fffff there). */
const MAX_SAFE_HIGH_WORD = 0x1fffff;

/** An eight-byte fencing token. Our servers issue tokens below 2^53, so a JavaScript number holds every one exactly. */
function readToken(frame: Buffer, at: number): number {
  const high = frame.readUInt32BE(at);
  if (high > MAX_SAFE_HIGH_WORD) throw new RangeError(`fencing token 0x${frame.subarray(at, at + TOKEN_LENGTH).toString('hex')} is beyond 2^53`);
  return high * 0x1_0000_0000 + frame.readUInt32BE(at + 4);
}

/** Decodes one whole reply frame (as measured by replyFrameLength). */
export function decodeReply<C extends Command>(command: C, frame: Buffer): ReplyOf[C] {
  let reply: Reply;
  switch (command) {
    case Command.FindOwner:
      reply = (ownerReplyParser.parse(frame) as { owner: ByteString }).owner;
      break;
    case Command.Request:
    case Command.FindLocation:
    case Command.Release:
    case Command.ReleaseAll:
      reply = frame.readUInt16BE(0);
      break;
    case Command.Renew:
      reply = frame[0] !== 0;
      break;
    case Command.List:
      reply = (listReplyParser.parse(frame) as { contenders: Array<Contender & { indexLength?: number }> }).contenders.map((c) => ({
        priority: c.priority,
        ttl: c.ttl,
        ttw: c.ttw,
        index: c.index,
        owner: c.owner,
        isOwner: c.isOwner,
      }));
      break;
    case Command.Stats:
      reply = statsReplyParser.parse(frame) as StatsReply;
      break;
    case Command.Fence:
      reply = readToken(frame, 0);
      break;
    case Command.RequestFenced:
    case Command.AcquireWait:
      reply = { position: frame.readUInt16BE(0), token: readToken(frame, POSITION_LENGTH) };
      break;
    case Command.AwaitLoss:
      reply = frame[0]!;
      break;
    case Command.ListDetailed: {
      type Parsed = { queues: Array<{ index: ByteString; heldForMs: number; entries: Array<Omit<EntryView, 'index' | 'token'> & { token: Buffer }> }> };
      reply = (queuesReplyParser.parse(frame) as Parsed).queues.map((q) => ({
        index: q.index,
        heldForMs: q.heldForMs,
        entries: q.entries.map((e) => ({
          priority: e.priority,
          ttl: e.ttl,
          ttw: e.ttw,
          index: q.index,
          owner: e.owner,
          isOwner: e.isOwner,
          remainingMs: e.remainingMs,
          token: readToken(e.token, 0),
        })),
      }));
      break;
    }
    default:
      throw new RangeError(`no such command ${String(command)}`);
  }
  return reply as ReplyOf[C];
}
