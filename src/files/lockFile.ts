import { readFile } from 'node:fs/promises';
import type { ByteString } from '../bytes.js';
import { MAX_STRING_LENGTH } from '../bytes.js';
import type { SavedHold, SavedLock } from '../locks/LockService.js';
import { writeFileAtomic } from './atomicWrite.js';
import { FileFormatError, meaningfulLines } from './FileFormatError.js';

/**
 * The lock file: a text file, one entry per line, queue by queue with the owner first, so a person
 * can read who holds what and the server can restore the exact queue order.
 *
 *   lockserver-locks 3
 *   highest-token 1790000000000042
 *   # key index owner priority ttl ttw role remaining-ms token
 *   users 42 alice 10 30 60 owner 29500 1790000000000041
 *   users 42 bob 0 30 60 waiter never 0
 *   end 2
 *
 * Strings are percent-encoded: printable ASCII except '%' and '#' (which starts a comment) stays
 * as is, every other byte is %HH.
 * An empty string is written '-' (and a string that is exactly '-' as %2D). remaining is the
 * milliseconds the entry's current phase had left when saved, or 'never'.
 *
 * Fencing tokens (version 3): `token` is the decimal fencing token of an owner's grant, 0 for a
 * waiter; the `highest-token` line, required right after the header, is at or above every token
 * the table ever granted (not only those still held), so that a restart goes on above all of them.
 * Versions 1 and 2 have neither: their entries load with token 0 and a high-water of 0 (the
 * server grants their owners fresh tokens).
 *
 * Lock-delays (version 4): a lock held back after its owner's TTL ran out (--lock-delay) is a line
 * `held-back key index remaining-ms`, placed before its queue's entries (a queue held back with
 * nobody waiting has only this line); remaining-ms is what its delay had left, frozen while the
 * server is down like an entry's. Older files hold none.
 *
 * The end line carries the number of entries (held-back lines not counted), so a file cut short
 * (even exactly at a line boundary) is refused rather than loaded with fewer locks. Version 2 on
 * requires it; version 1 files (written before the end line existed) are still read, and the
 * loader is told that their completeness could not be checked.
 */
export const LOCK_FILE_MAGIC = 'lockserver-locks';
export const LOCK_FILE_VERSION = 4;
/** Versions this server reads; the end line is required from version 2 on, tokens from version 3 on, held-back lines come in version 4. */
const READABLE_VERSIONS = [1, 2, 3, 4] as const;
const FIRST_VERSION_WITH_END_LINE = 2;
const FIRST_VERSION_WITH_TOKENS = 3;
const FIRST_VERSION_WITH_HOLDS = 4;
const END_WORD = 'end';
const HELD_BACK_WORD = 'held-back';
/** Fields of a held-back line: the word, key, index, remaining-ms. */
const HELD_BACK_FIELDS = 4;
/** The longest time a held-back line may have left: a u32 of milliseconds, as a cluster carries a lock-delay. */
const MAX_HELD_BACK_MS = 0xffffffff;
const HIGHEST_TOKEN_WORD = 'highest-token';
const EMPTY_FIELD = '-';
/** Fields of an entry line before version 3 added the token. */
const FIELDS_WITHOUT_TOKEN = 8;
const NEVER = 'never';
/** Lines are gathered into chunks of about this size before each write. */
const WRITE_CHUNK_CHARS = 64 * 1024;

export function encodeField(value: ByteString): string {
  if (value === '') return EMPTY_FIELD;
  if (value === EMPTY_FIELD) return '%2D';
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code > 0x20 && code < 0x7f && code !== 0x25 && code !== 0x23) out += value[i]!;
    else out += '%' + code.toString(16).toUpperCase().padStart(2, '0');
  }
  return out;
}

export function decodeField(field: string): ByteString | undefined {
  if (field === EMPTY_FIELD) return '';
  let out = '';
  for (let i = 0; i < field.length; i++) {
    const char = field[i]!;
    if (char !== '%') {
      const code = char.charCodeAt(0);
      if (code <= 0x20 || code >= 0x7f) return undefined;
      out += char;
      continue;
    }
    const hex = field.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return undefined;
    out += String.fromCharCode(parseInt(hex, 16));
    i += 2;
  }
  return out.length <= MAX_STRING_LENGTH ? out : undefined;
}

function formatLine(lock: SavedLock): string {
  return [
    encodeField(lock.key),
    encodeField(lock.index),
    encodeField(lock.owner),
    lock.priority,
    lock.ttl,
    lock.ttw,
    lock.isOwner ? 'owner' : 'waiter',
    lock.remainingMs === null ? NEVER : lock.remainingMs,
    lock.token,
  ].join(' ');
}

function formatHeldBack(hold: SavedHold): string {
  return [HELD_BACK_WORD, encodeField(hold.key), encodeField(hold.index), hold.remainingMs].join(' ');
}

/**
 * The file's text, in chunks of about WRITE_CHUNK_CHARS. `highestToken` is the table's token
 * high-water (LockService.highestToken), at or above every token among `locks`; `holds` the
 * locks held back (LockService.savedHolds), each written before the entry it names as its place.
 */
export function* formatLockFile(
  locks: Iterable<SavedLock>,
  highestToken: number,
  savedAt = new Date(),
  holds: readonly SavedHold[] = [],
): IterableIterator<string> {
  let chunk =
    `${LOCK_FILE_MAGIC} ${LOCK_FILE_VERSION}\n` +
    `${HIGHEST_TOKEN_WORD} ${highestToken}\n` +
    `# saved ${savedAt.toISOString()}; times left are frozen while the server is down\n` +
    `# key index owner priority ttl ttw role remaining-ms token\n` +
    `# ${HELD_BACK_WORD} key index remaining-ms: a lock held back by the lock-delay, before its queue's entries\n`;
  const inOrder = [...holds].sort((a, b) => a.entriesBefore - b.entriesBefore);
  let held = 0;
  let count = 0;
  for (const lock of locks) {
    for (; held < inOrder.length && inOrder[held]!.entriesBefore <= count; held++) chunk += formatHeldBack(inOrder[held]!) + '\n';
    count++;
    chunk += formatLine(lock) + '\n';
    if (chunk.length >= WRITE_CHUNK_CHARS) {
      yield chunk;
      chunk = '';
    }
  }
  for (; held < inOrder.length; held++) chunk += formatHeldBack(inOrder[held]!) + '\n';
  yield chunk + `${END_WORD} ${count}\n`;
}

function parseInteger(text: string, max: number): number | undefined {
  if (!/^\d{1,10}$/.test(text)) return undefined;
  const value = Number(text);
  return value <= max ? value : undefined;
}

/** A fencing token: decimal, below 2^53 (the server never grants one beyond). */
function parseToken(text: string): number | undefined {
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

export interface ParsedLockFile {
  readonly version: number;
  readonly locks: SavedLock[];
  /** The locks held back by a lock-delay (version 4 on; none in an older file), each with its place among `locks`. */
  readonly holds: SavedHold[];
  /**
   * At or above every fencing token the saving table had granted: the file's `highest-token`, or
   * a greater token of an entry; 0 for a file from before version 3.
   */
  readonly highestToken: number;
  /** False for a version 1 file, which has no end line: it may have been cut at a line boundary. */
  readonly verified: boolean;
}

/** Parses a lock file's text; any bad line is a FileFormatError naming `file` and the line. */
export function parseLockFile(text: string, file: string): SavedLock[] {
  return parseLockFileVersioned(text, file).locks;
}

/** parseLockFile, also telling which version the file was, its token high-water, and whether its end line checked it. */
export function parseLockFileVersioned(text: string, file: string): ParsedLockFile {
  const locks: SavedLock[] = [];
  const holds: SavedHold[] = [];
  let version: number | undefined;
  let highestToken: number | undefined;
  let ended = false;
  let lastLine = 0;
  const seen = new Set<string>();
  const owned = new Set<string>();
  const held = new Set<string>();
  // A length-prefixed identity of (key, index) that cannot collide.
  const queueIdOf = (key: ByteString, index: ByteString): string => `${key.length}:${index.length}:${key}${index}`;
  for (const { line, text: content } of meaningfulLines(text)) {
    lastLine = line;
    const fail = (reason: string): never => {
      throw new FileFormatError(file, line, reason);
    };
    if (version === undefined) {
      version = parseHeader(content) ?? fail(`expected the header "${LOCK_FILE_MAGIC} ${LOCK_FILE_VERSION}"; is this a lock file?`);
      if (version < FIRST_VERSION_WITH_TOKENS) highestToken = 0;
      continue;
    }
    const fields = content.split(/[ \t]+/);
    if (highestToken === undefined) {
      if (fields[0] !== HIGHEST_TOKEN_WORD || fields.length !== 2) fail(`expected the "${HIGHEST_TOKEN_WORD} N" line after the header`);
      highestToken = parseToken(fields[1]!) ?? fail(`bad highest token "${fields[1]}": expected a decimal number below 2^53`);
      continue;
    }
    if (ended) fail(`nothing may follow the end line`);
    if (fields[0] === END_WORD && fields.length === 2) {
      const count = parseInteger(fields[1]!, Number.MAX_SAFE_INTEGER) ?? fail(`bad entry count "${fields[1]}" in the end line`);
      if (count !== locks.length) {
        fail(`the end line says ${count} entries, but the file holds ${locks.length}; the file is damaged`);
      }
      ended = true;
      continue;
    }
    if (fields[0] === HELD_BACK_WORD && fields.length === HELD_BACK_FIELDS && version >= FIRST_VERSION_WITH_HOLDS) {
      const [, keyField, indexField, remaining] = fields as [string, string, string, string];
      const key = decodeField(keyField) ?? fail(`bad key field "${keyField}" in a ${HELD_BACK_WORD} line`);
      const index = decodeField(indexField) ?? fail(`bad index field "${indexField}" in a ${HELD_BACK_WORD} line`);
      const remainingMs = parseInteger(remaining, MAX_HELD_BACK_MS) ?? fail(`bad remaining time "${remaining}" in a ${HELD_BACK_WORD} line`);
      const queueId = queueIdOf(key, index);
      if (held.has(queueId)) fail('the same key and index held back twice');
      if (owned.has(queueId)) fail('a lock held back that has an owner');
      held.add(queueId);
      holds.push({ key, index, remainingMs, entriesBefore: locks.length });
      continue;
    }
    const hasToken = version >= FIRST_VERSION_WITH_TOKENS;
    const expectedFields = hasToken ? FIELDS_WITHOUT_TOKEN + 1 : FIELDS_WITHOUT_TOKEN;
    if (fields.length !== expectedFields) fail(`expected ${expectedFields} fields, found ${fields.length}`);
    const [keyField, indexField, ownerField, priorityField, ttlField, ttwField, role, remaining, tokenField] = fields as [
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string,
      string | undefined,
    ];
    const key = decodeField(keyField) ?? fail(`bad key field "${keyField}"`);
    const index = decodeField(indexField) ?? fail(`bad index field "${indexField}"`);
    const owner = decodeField(ownerField) ?? fail(`bad owner field "${ownerField}"`);
    const priority = parseInteger(priorityField, 0xff) ?? fail(`priority must be 0-255, got "${priorityField}"`);
    const ttl = parseInteger(ttlField, 0xffff) ?? fail(`ttl must be 0-65535, got "${ttlField}"`);
    const ttw = parseInteger(ttwField, 0xffff) ?? fail(`ttw must be 0-65535, got "${ttwField}"`);
    if (role !== 'owner' && role !== 'waiter') fail(`role must be "owner" or "waiter", got "${role}"`);
    const remainingMs = remaining === NEVER ? null : (parseInteger(remaining, 0xffff * 1000) ?? fail(`bad remaining time "${remaining}"`));
    const token = tokenField === undefined ? 0 : (parseToken(tokenField) ?? fail(`bad token "${tokenField}": expected a decimal number below 2^53`));
    if (role === 'waiter' && token !== 0) fail(`a waiter holds no token: expected 0, got ${token}`);
    const queueId = queueIdOf(key, index);
    const entryId = `${queueId}${owner}`;
    if (seen.has(entryId)) fail('the same key, index and owner appear twice');
    seen.add(entryId);
    if (role === 'owner') {
      if (owned.has(queueId)) fail('a second owner for the same key and index');
      if (held.has(queueId)) fail('an owner of a lock held back');
      owned.add(queueId);
    }
    if (token > highestToken) highestToken = token;
    locks.push({ key, index, owner, priority, ttl, ttw, isOwner: role === 'owner', token, remainingMs });
  }
  if (version === undefined) {
    throw new FileFormatError(file, 1, `the file is empty or holds only comments: expected the header "${LOCK_FILE_MAGIC} ${LOCK_FILE_VERSION}"`);
  }
  if (highestToken === undefined) {
    throw new FileFormatError(file, lastLine, `the file ends after its header, without the "${HIGHEST_TOKEN_WORD} N" line: it was cut short`);
  }
  if (!ended && version >= FIRST_VERSION_WITH_END_LINE) {
    throw new FileFormatError(file, lastLine, `the file ends without its "${END_WORD} N" line after ${locks.length} entries: it was cut short`);
  }
  return { version, locks, holds, highestToken, verified: ended };
}

/** The version of a header line this server reads, or undefined. */
function parseHeader(content: string): number | undefined {
  const [magic, versionText, ...rest] = content.split(/[ \t]+/);
  if (magic !== LOCK_FILE_MAGIC || rest.length > 0) return undefined;
  const version = READABLE_VERSIONS.find((readable) => String(readable) === versionText);
  return version;
}

/**
 * Reads the lock file; undefined when it does not exist. Other failures throw, naming the file.
 */
export async function loadLockFile(file: string): Promise<SavedLock[] | undefined> {
  return (await loadLockFileVersioned(file))?.locks;
}

export async function loadLockFileVersioned(file: string): Promise<ParsedLockFile | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'latin1');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read lock file ${file}: ${(error as Error).message}`);
  }
  return parseLockFileVersioned(text, file);
}

/** Writes the lock file atomically: the entries, the token high-water and the locks held back (see formatLockFile). */
export async function saveLockFile(file: string, locks: Iterable<SavedLock>, highestToken: number, holds: readonly SavedHold[] = []): Promise<void> {
  await writeFileAtomic(file, formatLockFile(locks, highestToken, new Date(), holds));
}
