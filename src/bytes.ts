/**
 * Keys, indexes and owners are arbitrary byte strings (0–255 bytes). Inside the process we hold
 * them as "byte strings": JavaScript strings whose every code unit is one byte (0–255), produced
 * with the latin1 mapping. That mapping is a lossless identity on bytes — it never interprets
 * UTF-8 — and V8 stores such strings one byte per character, so they are compact, hashable Map
 * keys, and compare byte-wise with `<`.
 */
export type ByteString = string;

/** The bytes of `buffer[start, end)` as a byte string. */
export function byteString(buffer: Uint8Array, start = 0, end = buffer.length): ByteString {
  return end - start <= SHORT_BYTE_STRING ? shortByteString(buffer, start, end) : asBuffer(buffer).toString('latin1', start, end);
}

/**
 * `last` itself when b[from, to) holds its bytes (compared from the end, where generated names
 * differ), else a new byte string. Decoders keep the last key, index and owner they read: a client
 * names the same owner and index request after request and releases the key it just requested,
 * and those then cost no string and no allocation.
 */
export function sameOrNew(last: ByteString, b: Uint8Array, from: number, to: number): ByteString {
  const length = to - from;
  if (last.length === length) {
    let i = length - 1;
    while (i >= 0 && last.charCodeAt(i) === b[from + i]) i--;
    if (i < 0) return last;
  }
  return byteString(b, from, to);
}

/** Longest byte string made by String.fromCharCode rather than by a latin1 decode. */
const SHORT_BYTE_STRING = 32;
const char = String.fromCharCode;

/**
 * A byte string of at most SHORT_BYTE_STRING bytes. String.fromCharCode with the bytes as
 * arguments makes the same one-byte string as a latin1 decode, in ~20 ns against ~75 ns for
 * Buffer#toString, which calls into C++ (measured on this project's VM; most keys, indexes and
 * owners are this short, and the server makes one per request on a new key).
 */
function shortByteString(b: Uint8Array, s: number, end: number): ByteString {
  // One call per length, each with its bytes as arguments: a loop or a concatenation of parts
  // measured twice as slow (it builds intermediate strings). One line per length reads as the table it is.
  // prettier-ignore
  switch (end - s) {
    case 0: return '';
    case 1: return char(b[s]!);
    case 2: return char(b[s]!, b[s + 1]!);
    case 3: return char(b[s]!, b[s + 1]!, b[s + 2]!);
    case 4: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!);
    case 5: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!);
    case 6: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!);
    case 7: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!);
    case 8: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!);
    case 9: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!);
    case 10: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!);
    case 11: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!);
    case 12: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!);
    case 13: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!);
    case 14: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!);
    case 15: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!);
    case 16: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!);
    case 17: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!);
    case 18: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!);
    case 19: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!);
    case 20: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!);
    case 21: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!);
    case 22: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!);
    case 23: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!);
    case 24: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!);
    case 25: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!);
    case 26: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!);
    case 27: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!);
    case 28: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!, b[s + 27]!);
    case 29: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!, b[s + 27]!, b[s + 28]!);
    case 30: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!, b[s + 27]!, b[s + 28]!, b[s + 29]!);
    case 31: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!, b[s + 27]!, b[s + 28]!, b[s + 29]!, b[s + 30]!);
    case 32: return char(b[s]!, b[s + 1]!, b[s + 2]!, b[s + 3]!, b[s + 4]!, b[s + 5]!, b[s + 6]!, b[s + 7]!, b[s + 8]!, b[s + 9]!, b[s + 10]!, b[s + 11]!, b[s + 12]!, b[s + 13]!, b[s + 14]!, b[s + 15]!, b[s + 16]!, b[s + 17]!, b[s + 18]!, b[s + 19]!, b[s + 20]!, b[s + 21]!, b[s + 22]!, b[s + 23]!, b[s + 24]!, b[s + 25]!, b[s + 26]!, b[s + 27]!, b[s + 28]!, b[s + 29]!, b[s + 30]!, b[s + 31]!);
    default: throw new RangeError(`shortByteString takes at most ${SHORT_BYTE_STRING} bytes, got ${end - s}`);
  }
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
    if (code >= 0x20 && code < 0x7f && code !== 0x5c) out += value[i]!;
    else out += '\\x' + code.toString(16).padStart(2, '0');
  }
  return out;
}

/** The same bytes as a Buffer, without copying (a Buffer is returned as it is). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
