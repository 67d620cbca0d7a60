import { byteString, printable, type ByteString } from '../../bytes.js';
import type { ListedEntry } from '../../client/LockClient.js';

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
/** Columns of numbers, aligned right. */
const NUMERIC = new Set<string>(['POS', 'PRIORITY', 'TTL', 'TTW']);

/** A list (0x07) reply as an aligned table, one row per entry, each index's queue in order. */
export function listTable(entries: readonly ListedEntry[]): string {
  const rows: string[][] = entries.map((e) => [
    shown(e.index),
    String(e.position),
    e.isOwner ? 'owner' : 'waiting',
    shown(e.owner),
    String(e.priority),
    String(e.ttl),
    String(e.ttw),
  ]);
  const widths = COLUMNS.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => (NUMERIC.has(COLUMNS[i]!) ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(COLUMNS), ...rows.map(line)].join('\n') + '\n';
}

/** A list reply for --json. */
export function listJson(key: ByteString, entries: readonly ListedEntry[]): Record<string, unknown> {
  return {
    ...jsonBytes('key', key),
    entries: entries.map((e) => ({
      ...jsonBytes('index', e.index),
      ...jsonBytes('owner', e.owner),
      position: e.position,
      isOwner: e.isOwner,
      priority: e.priority,
      ttl: e.ttl,
      ttw: e.ttw,
    })),
  };
}
