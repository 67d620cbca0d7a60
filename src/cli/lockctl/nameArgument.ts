import { InvalidArgumentError } from 'commander';
import { byteString, MAX_STRING_LENGTH, type ByteString } from '../../bytes.js';

const ESCAPED_BYTE = /\\x([0-9a-fA-F]{2})/g;

/**
 * A key, index or owner from the command line. Text is sent as its UTF-8 bytes; `\xHH` is the
 * single byte 0xHH, so any byte string can be typed, and what lockctl prints (via printable(),
 * which writes every non-printable byte and the backslash as `\xHH`) can be pasted back.
 */
export function parseName(text: string): ByteString {
  const parts: Buffer[] = [];
  let last = 0;
  for (const match of text.matchAll(ESCAPED_BYTE)) {
    parts.push(Buffer.from(text.slice(last, match.index), 'utf8'), Buffer.from([parseInt(match[1]!, 16)]));
    last = match.index + match[0].length;
  }
  parts.push(Buffer.from(text.slice(last), 'utf8'));
  const bytes = Buffer.concat(parts);
  if (bytes.length > MAX_STRING_LENGTH) {
    throw new InvalidArgumentError(`${bytes.length} bytes; the protocol carries at most ${MAX_STRING_LENGTH}.`);
  }
  return byteString(bytes);
}
