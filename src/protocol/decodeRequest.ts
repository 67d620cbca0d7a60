import { Parser } from 'binary-parser';
import type { ByteString } from '../bytes.js';
import { Command, COMMAND_BYTE_LENGTH, REQUEST_LAYOUTS, STRING_LENGTH_PREFIX } from './constants.js';
import type { Request } from './messages.js';

/** The client sent a byte that is not one of the eight commands. */
export class UnknownCommandError extends Error {
  constructor(readonly commandByte: number) {
    super(`unknown command byte 0x${commandByte.toString(16).padStart(2, '0')}`);
    this.name = 'UnknownCommandError';
  }
}

/** Returned by {@link requestFrameLength} while a frame is still arriving. */
export const INCOMPLETE = -1;

/**
 * Length of the request frame that starts at `buffer[start]`, or INCOMPLETE when `buffer[start,
 * end)` does not hold all of it yet. Walks the length bytes only, so a partial frame costs nothing;
 * binary-parser silently truncates a short length-prefixed field, so it must only ever see whole
 * frames. Throws UnknownCommandError on a byte that is no command.
 */
export function requestFrameLength(buffer: Buffer, start: number, end: number): number {
  if (start >= end) return INCOMPLETE;
  const commandByte = buffer[start]!;
  const layout = REQUEST_LAYOUTS[commandByte];
  if (layout === undefined) throw new UnknownCommandError(commandByte);
  let offset = start + COMMAND_BYTE_LENGTH;
  for (let i = 0; i < layout.strings; i++) {
    if (offset >= end) return INCOMPLETE;
    offset += STRING_LENGTH_PREFIX + buffer[offset]!;
  }
  offset += layout.fixedTail;
  return offset <= end ? offset - start : INCOMPLETE;
}

// binary-parser's .string() would decode UTF-8; keys are bytes, so read buffers and map them to
// byte strings. Parsers are compiled once, here, never per frame.
const toByteString = (raw: Buffer): ByteString => raw.toString('latin1');

/** A parser for a command byte followed by the named length-prefixed strings (binary-parser
 * builders mutate themselves, so each layout gets a fresh chain). */
function stringsParser(...names: string[]): Parser {
  let parser = new Parser().endianness('big').uint8('command');
  for (const name of names) {
    parser = parser
      .uint8(`${name}Length`)
      .buffer(name, { length: `${name}Length`, formatter: toByteString as (raw: unknown) => unknown });
  }
  return parser;
}

const keyIndexParser = stringsParser('key', 'index');
const keyIndexOwnerParser = stringsParser('key', 'index', 'owner');
const requestParser = stringsParser('key', 'index', 'owner').uint16('ttl').uint16('ttw').uint8('priority');
const ownerParser = stringsParser('owner');
const keyParser = stringsParser('key');
const STATS_REQUEST: Request = { command: Command.Stats };

/** Decodes one whole frame (as measured by requestFrameLength) that starts at buffer[0]. */
export function decodeRequest(frame: Buffer): Request {
  switch (frame[0]) {
    case Command.FindOwner:
      return keyIndexParser.parse(frame) as Request;
    case Command.Request:
      return requestParser.parse(frame) as Request;
    case Command.FindLocation:
    case Command.Renew:
    case Command.Release:
      return keyIndexOwnerParser.parse(frame) as Request;
    case Command.ReleaseAll:
      return ownerParser.parse(frame) as Request;
    case Command.List:
      return keyParser.parse(frame) as Request;
    case Command.Stats:
      return STATS_REQUEST;
    default:
      throw new UnknownCommandError(frame[0] ?? -1);
  }
}

/**
 * Turns a TCP byte stream into requests. Bytes are appended with push(); next() yields each
 * complete request in order, or undefined until more bytes arrive. Only the tail of one
 * incomplete frame (at most MAX_REQUEST_LENGTH bytes) is ever carried between chunks.
 */
export class RequestDecoder {
  private buffer: Buffer = Buffer.alloc(0);
  private offset = 0;

  push(chunk: Buffer): void {
    if (this.offset >= this.buffer.length) {
      this.buffer = chunk;
    } else {
      // The carried remainder is one partial frame, so this copy is bounded by the frame size.
      this.buffer = Buffer.concat([this.buffer.subarray(this.offset), chunk]);
    }
    this.offset = 0;
  }

  /** The next whole request, or undefined. Throws UnknownCommandError on a bad command byte. */
  next(): Request | undefined {
    const length = requestFrameLength(this.buffer, this.offset, this.buffer.length);
    if (length === INCOMPLETE) return undefined;
    const frame = this.buffer.subarray(this.offset, this.offset + length);
    this.offset += length;
    return decodeRequest(frame);
  }

  /** Bytes received that do not yet form a whole frame. */
  get pendingBytes(): number {
    return this.buffer.length - this.offset;
  }
}
