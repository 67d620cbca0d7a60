import { byteString, printable, type ByteString } from '../../bytes.js';
import type { DetailedQueue, ListedEntry } from '../../client/LockClient.js';
import type { Listing } from './listing.js';

/** Bytes for people: printable ASCII as is, everything else as \xHH (see printable()). */
export function shown(value: Buffer | ByteString): string {
  return printable(typeof value === 'string' ? value : byteString(value));
}

/**
 * A byte field in --json output: `name` holds the escaped form (as lockctl prints and accepts
 * it), `nameHex` the exact bytes in hex, so scripts never have to guess an encoding.
 */
export function jsonBytes(name: string, value: Buffer | ByteString): Record<string, string> {
  const bytes = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
  return { [name]: shown(bytes), [`${name}Hex`]: bytes.toString('hex') };
}

/** A position (request 0x02 / location 0x03) in words. */
export function describePosition(position: number, zeroMeans: string): string {
  if (position === 0) return `0 ${zeroMeans}`;
  if (position === 1) return '1 owner';
  return `${position} waiting (${position - 1} ahead)`;
}

/** A line of output with the fencing token after it, when there is one. */
export function withToken(text: string, token: number | undefined): string {
  return token === undefined ? text : `${text} (token ${token})`;
}

/** The token for --json: absent when the server gave none (LockServer 0.9b). */
export function tokenField(token: number | undefined): { token?: number } {
  return token === undefined ? {} : { token };
}

const COLUMNS = ['INDEX', 'POS', 'ROLE', 'OWNER', 'PRIORITY', 'TTL', 'TTW'] as const;
/** The detailed list (0x0D) adds each entry's time left in its phase, and its token. */
const DETAILED_COLUMNS = [...COLUMNS, 'LEFT', 'TOKEN'] as const;
/** Columns of numbers, aligned right. */
const NUMERIC = new Set<string>(['POS', 'PRIORITY', 'TTL', 'TTW', 'LEFT', 'TOKEN']);
/** A cell with nothing to say: a held-back lock's owner, a waiter's token. */
const NONE = '-';

/** Rows under their titles, each column as wide as its widest cell, numbers aligned right. */
function table(columns: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = columns.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (NUMERIC.has(columns[i]!) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns), ...rows.map(line)].join('\n') + '\n';
}

function entryCells(e: ListedEntry): string[] {
  return [shown(e.index), String(e.position), e.isOwner ? 'owner' : 'waiting', shown(e.owner), String(e.priority), String(e.ttl), String(e.ttw)];
}

/** Milliseconds left, for people: seconds to a tenth, rounded up (a lock with 1 ms left is not "0.0s" gone); null: never. */
export function timeLeft(ms: number | null): string {
  return ms === null ? 'never' : `${(Math.ceil(ms / 100) / 10).toFixed(1)}s`;
}

/** A list (0x07) reply as an aligned table, one row per entry, each index's queue in order. */
export function listTable(entries: readonly ListedEntry[]): string {
  return table(COLUMNS, entries.map(entryCells));
}

/**
 * A detailed list (0x0D) reply as an aligned table: list's columns, and each entry's time left
 * (LEFT: of its TTL while it owns, of its TTW while it waits) and token; a lock held back after
 * its owner's TTL ran out (lock-delay) is a row of its own, ROLE "held back", LEFT the delay left,
 * before its waiters.
 */
export function queuesTable(queues: readonly DetailedQueue[]): string {
  const rows = queues.flatMap((q) => [
    ...(q.heldForMs > 0 ? [[shown(q.index), NONE, 'held back', NONE, NONE, NONE, NONE, timeLeft(q.heldForMs), NONE]] : []),
    ...q.entries.map((e) => [...entryCells(e), timeLeft(e.remainingMs), e.token > 0 ? String(e.token) : NONE]),
  ]);
  return table(DETAILED_COLUMNS, rows);
}

function entryJson(e: ListedEntry): Record<string, unknown> {
  return {
    ...jsonBytes('index', e.index),
    ...jsonBytes('owner', e.owner),
    position: e.position,
    isOwner: e.isOwner,
    priority: e.priority,
    ttl: e.ttl,
    ttw: e.ttw,
  };
}

/** A list reply for --json. */
export function listJson(key: ByteString, entries: readonly ListedEntry[]): Record<string, unknown> {
  return { ...jsonBytes('key', key), entries: entries.map(entryJson) };
}

/**
 * A detailed list reply for --json: list's object, each entry with `remainingMs` (null: never
 * expires) and `token` (0 while waiting) added, and `heldBack`, the locks held back (lock-delay)
 * with the milliseconds left, `[{index, indexHex, heldForMs}]`.
 */
export function queuesJson(key: ByteString, queues: readonly DetailedQueue[]): Record<string, unknown> {
  return {
    ...jsonBytes('key', key),
    entries: queues.flatMap((q) => q.entries.map((e) => ({ ...entryJson(e), remainingMs: e.remainingMs, token: e.token }))),
    heldBack: queues.filter((q) => q.heldForMs > 0).map((q) => ({ ...jsonBytes('index', q.index), heldForMs: q.heldForMs })),
  };
}

/** A listing as a table (nothing at all under the key: the empty string). */
export function listingTable(listing: Listing): string {
  if ('queues' in listing) return listing.queues.length > 0 ? queuesTable(listing.queues) : '';
  return listing.entries.length > 0 ? listTable(listing.entries) : '';
}

/** A listing for --json. */
export function listingJson(key: ByteString, listing: Listing): Record<string, unknown> {
  return 'queues' in listing ? queuesJson(key, listing.queues) : listJson(key, listing.entries);
}

/** A listing in a few words: `1 entry`, `3 entries, 1 lock held back`. */
export function listingSummary(listing: Listing): string {
  const entries = 'queues' in listing ? listing.queues.reduce((n, q) => n + q.entries.length, 0) : listing.entries.length;
  const held = 'queues' in listing ? listing.queues.filter((q) => q.heldForMs > 0).length : 0;
  return `${entries} entr${entries === 1 ? 'y' : 'ies'}` + (held > 0 ? `, ${held} lock${held === 1 ? '' : 's'} held back` : '');
}
