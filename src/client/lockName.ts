import { byteString, MAX_STRING_LENGTH, type ByteString } from '../bytes.js';

/**
 * A key, index or owner as callers give it: raw bytes (Buffer / Uint8Array), or a string.
 * How a string becomes bytes is the client's `stringEncoding`:
 * - 'latin1' (default): the string is a byte string, one character per byte (U+0000–U+00FF);
 *   a character above U+00FF is an error rather than being silently truncated.
 * - 'utf8': the string is text and is sent as its UTF-8 bytes.
 */
export type LockName = Uint8Array | string;
export type StringEncoding = 'latin1' | 'utf8';

const ABOVE_LATIN1 = /[^\x00-\xff]/;

/** The byte string of `name`, checked against the one-byte length limit of the wire. */
export function toByteString(name: LockName, what: string, encoding: StringEncoding): ByteString {
  let value: ByteString;
  if (typeof name !== 'string') {
    value = byteString(Buffer.from(name.buffer, name.byteOffset, name.byteLength));
  } else if (encoding === 'utf8') {
    value = byteString(Buffer.from(name, 'utf8'));
  } else {
    if (ABOVE_LATIN1.test(name)) {
      throw new RangeError(`${what} has characters above U+00FF; pass a Buffer or use stringEncoding 'utf8'`);
    }
    value = name;
  }
  if (value.length > MAX_STRING_LENGTH) {
    throw new RangeError(`${what} is ${value.length} bytes; the wire carries at most ${MAX_STRING_LENGTH}`);
  }
  return value;
}
