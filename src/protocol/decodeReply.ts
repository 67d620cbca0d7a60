import { Parser } from 'binary-parser';
import type { ByteString } from '../bytes.js';
import {
  Command,
  COUNT_LENGTH,
  OWNER_FLAG_LENGTH,
  POSITION_LENGTH,
  PRIORITY_LENGTH,
  STATS_REPLY_LENGTH,
  STRING_LENGTH_PREFIX,
  SUCCESS_LENGTH,
  TTL_LENGTH,
  TTW_LENGTH,
} from './constants.js';
import { INCOMPLETE } from './decodeRequest.js';
import { STATS_FIELDS, type Contender, type StatsReply } from './messages.js';

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
}
export type Reply = ReplyOf[Command];

const CONTENDER_FIXED_HEAD = PRIORITY_LENGTH + TTL_LENGTH + TTW_LENGTH;

/**
 * Length of the reply to `command` that starts at buffer[start], or INCOMPLETE. Replies carry no
 * command byte, so the caller says which reply it expects (requests are answered in order).
 */
export function replyFrameLength(command: Command, buffer: Buffer, start: number, end: number): number {
  const available = end - start;
  switch (command) {
    case Command.FindOwner:
      if (available < STRING_LENGTH_PREFIX) return INCOMPLETE;
      return fits(STRING_LENGTH_PREFIX + buffer[start]!, available);
    case Command.Request:
    case Command.FindLocation:
      return fits(POSITION_LENGTH, available);
    case Command.Renew:
      return fits(SUCCESS_LENGTH, available);
    case Command.Release:
    case Command.ReleaseAll:
      return fits(COUNT_LENGTH, available);
    case Command.Stats:
      return fits(STATS_REPLY_LENGTH, available);
    case Command.List: {
      if (available < COUNT_LENGTH) return INCOMPLETE;
      const count = buffer.readUInt16BE(start);
      let offset = start + COUNT_LENGTH;
      for (let i = 0; i < count; i++) {
        offset += CONTENDER_FIXED_HEAD;
        if (offset >= end) return INCOMPLETE;
        offset += STRING_LENGTH_PREFIX + buffer[offset]!;
        if (offset >= end) return INCOMPLETE;
        offset += STRING_LENGTH_PREFIX + buffer[offset]! + OWNER_FLAG_LENGTH;
      }
      return offset <= end ? offset - start : INCOMPLETE;
    }
  }
}

function fits(length: number, available: number): number {
  return length <= available ? length : INCOMPLETE;
}

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
const listReplyParser = new Parser()
  .endianness('big')
  .uint16('count')
  .array('contenders', { type: contenderParser, length: 'count' });
const statsReplyParser = STATS_FIELDS.reduce((p, field) => p.uint32(field), new Parser().endianness('big')).uint16(
  'activeConnections',
);

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
      reply = (listReplyParser.parse(frame) as { contenders: Array<Contender & { indexLength?: number }> }).contenders.map(
        (c) => ({ priority: c.priority, ttl: c.ttl, ttw: c.ttw, index: c.index, owner: c.owner, isOwner: c.isOwner }),
      );
      break;
    case Command.Stats:
      reply = statsReplyParser.parse(frame) as StatsReply;
      break;
    default:
      throw new RangeError(`no such command ${String(command)}`);
  }
  return reply as ReplyOf[C];
}
