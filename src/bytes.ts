/**
 * Keys, indexes and owners are arbitrary byte strings (0–255 bytes). Inside the process we hold
 * them as "byte strings": JavaScript strings whose every code unit is one byte (0–255), produced
 * with the latin1 mapping. That mapping is a lossless identity on bytes — it never interprets
 * UTF-8 — and V8 stores such strings one byte per character, so they are compact, hashable Map
 * keys, and compare byte-wise with `<`.
 */
export type ByteString = string;

/** The bytes of `buffer[start, end)` as a byte string. */
export function byteString(buffer: Buffer, start = 0, end = buffer.length): ByteString {
  return buffer.toString('latin1', start, end);
}

/** A byte string from a text literal; only for names we make up ourselves (tests, tools). */
export function asciiBytes(text: string): ByteString {
  if (!/^[\x00-\x7f]*$/.test(text)) throw new RangeError('asciiBytes takes ASCII text only');
  return text;
}

/** The raw bytes of a byte string. */
export function bytesOf(value: ByteString): Buffer {
  return Buffer.from(value, 'latin1');
}

/** Longest key, index or owner the one-byte length prefix can carry. */
export const MAX_STRING_LENGTH = 255;

/**
 * A byte string written for people: printable ASCII as is, anything else (and the backslash)
 * as \xHH. Used by logs and tools; never for anything that is parsed back.
 */
export function printable(value: ByteString): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 0x20 && code < 0x7f && code !== 0x5c) out += value[i];
    else out += '\\x' + code.toString(16).padStart(2, '0');
  }
  return out;
}

/** The same bytes as a Buffer, without copying (a Buffer is returned as it is). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
