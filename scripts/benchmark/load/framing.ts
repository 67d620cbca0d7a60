import { Command, GREETING_ACCEPTED } from '../../../src/protocol/constants.js';
import { replyFrameLength } from '../../../src/protocol/decodeReply.js';
import { INCOMPLETE } from '../../../src/protocol/framing.js';

/** Wire protocols the load generator speaks. */
export type Protocol = 'lockserver' | 'resp';

/**
 * What the generator needs to know about replies: how long the next one is (so replies are counted
 * by length, never decoded), and whether it is the answer a successful lock cycle expects.
 * `kind` says which reply is expected: the command byte for lockserver, a RespKind for Redis.
 */
export interface ReplyFraming {
  /** Bytes the server sends before the first reply (the lockserver greeting). */
  readonly greetingLength: number;
  greetingOk(buffer: Buffer): boolean;
  /** Length of the reply of `kind` that starts at buffer[start], or INCOMPLETE. */
  length(kind: number, buffer: Buffer, start: number, end: number): number;
  /** Whether the whole reply at buffer[start] is what a successful cycle gets. */
  ok(kind: number, buffer: Buffer, start: number): boolean;
}

export const lockserverFraming: ReplyFraming = {
  greetingLength: 1,
  greetingOk: (buffer) => buffer[0] === GREETING_ACCEPTED,
  length: (kind, buffer, start, end) => replyFrameLength(kind as Command, buffer, start, end),
  // A request on a free key makes the requester owner (position 1); its release removes 1 entry.
  ok: (kind, buffer, start) => (kind === Command.Request || kind === Command.Release ? buffer.readUInt16BE(start) === 1 : true),
};

/** The Redis replies a SET-NX/DEL cycle gets. */
export const RespKind = { SetIfAbsent: 1, Delete: 2 } as const;

const CR = 0x0d;
const LF = 0x0a;
const PLUS = 0x2b;
const COLON = 0x3a;
const DOLLAR = 0x24;
const STAR = 0x2a;

/** Index just past the CRLF of the line that starts at `start`, or INCOMPLETE. */
function lineEnd(buffer: Buffer, start: number, end: number): number {
  const lf = buffer.indexOf(LF, start);
  if (lf < 0 || lf >= end) return INCOMPLETE;
  return lf + 1;
}

/**
 * Length of one RESP2 reply at buffer[start]: simple string, error, integer, bulk string or a flat
 * array of those. Enough for SET/DEL and for anything redis-benchmark-like we send.
 */
export function respReplyLength(buffer: Buffer, start: number, end: number): number {
  if (start >= end) return INCOMPLETE;
  const headerEnd = lineEnd(buffer, start, end);
  if (headerEnd === INCOMPLETE) return INCOMPLETE;
  const type = buffer[start];
  if (type !== DOLLAR && type !== STAR) return headerEnd - start;
  const count = Number(buffer.toString('latin1', start + 1, headerEnd - 2));
  if (type === DOLLAR) {
    if (count < 0) return headerEnd - start; // $-1: nil
    const total = headerEnd + count + 2;
    return total <= end ? total - start : INCOMPLETE;
  }
  let offset = headerEnd;
  for (let i = 0; i < count; i++) {
    const length = respReplyLength(buffer, offset, end);
    if (length === INCOMPLETE) return INCOMPLETE;
    offset += length;
  }
  return offset - start;
}

export const respFraming: ReplyFraming = {
  greetingLength: 0,
  greetingOk: () => true,
  length: (_kind, buffer, start, end) => respReplyLength(buffer, start, end),
  // SET NX answers +OK when it took the key; DEL answers :1 when it removed it.
  ok: (kind, buffer, start) =>
    kind === RespKind.SetIfAbsent ? buffer[start] === PLUS : buffer[start] === COLON && buffer[start + 1] === 0x31 && buffer[start + 2] === CR,
};

export function framingOf(protocol: Protocol): ReplyFraming {
  return protocol === 'lockserver' ? lockserverFraming : respFraming;
}
