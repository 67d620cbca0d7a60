import { asBuffer, MAX_STRING_LENGTH, sameOrNew, type ByteString } from '../bytes.js';
import type { LockRequest, SavedLock } from '../locks/LockService.js';
import type { ReplicatedRequest } from '../locks/ReplicaRules.js';
import { BufferWriter } from '../protocol/BufferWriter.js';
import type { BatchBounds } from './EntryBytesRules.js';
import { MAX_APPEND_BYTES } from './ReplicatedLog.js';

/**
 * Batch ⇄ bytes. A batch is what one node appends to the log at a time: its proposer (node name
 * and incarnation), its sequence number (so a retried append applies once), and the mutating
 * commands its clients sent meanwhile. Keys, indexes and owners travel as raw bytes, never text.
 *
 * Layout (big-endian): 'B' format(1, 4 or 5) name(str) incarnation(u32) entryKiB(u32) seq(u32) count(u16) command*
 *   format 4 is format 1 that may also hold the commands for waiting and lock-delays (LogOp 11-13)
 *   format 5 is format 4 that may also hold the waits tied to their node's incarnation (LogOp 14-15)
 *   entryKiB: the proposer's bound on the etcd bytes of the table's entries, in KiB (ETCD_BOUND_FORMAT;
 *   0, and reserved, before it: no bound)
 *   'B' format(7) name(str) incarnation(u32) entryKiB(u32) tableKiB(u32) ownerEntries(u32) seq(u32) count(u16) command*
 *   format 7 is format 5 whose header also carries the proposer's --max-table-bytes (in KiB) and
 *   --max-locks-per-owner (0: no bound), which apply enforces (TABLE_BOUNDS_FORMAT)
 *   str = u8 length + bytes;  versions are float64 (log positions are integers below 2^53)
 *
 * A log value is one batch, or a bundle of several (issue 20's sequencer: one node appends the
 * batches other nodes forwarded to it, each encoded by its own node, in one value):
 *   'B' format(2) count(u16) { length(u32) batch }*      each a whole batch (format 1, 4, 5 or 7)
 * The bundle's batches apply in order at one version, their commands numbered on across them
 * (so a bundle holds at most COMMANDS_PER_VERSION commands in all). Bundles are written only
 * once every live node declares it reads them (LOG_FORMATS_READ), as are references:
 *   'B' format(3)      the log key's value when the batch is stored once, under its retained key
 *                      (EtcdLog resolves it from the same revision; decodeValue never sees one resolved)
 */
export const LogOp = {
  Request: 1,
  Renew: 2,
  Release: 3,
  ReleaseKey: 4,
  ReleaseAll: 5,
  Expire: 6,
  /**
   * `--import-lock-file` as versions before the staged import wrote it (one saved entry; the first
   * of a batch is refused unless the table is empty). Still applied, so an old log replays alike;
   * never written any more: an import spanning several batches was not all-or-nothing.
   */
  Import: 7,
  /**
   * `--import-lock-file` as versions before fencing tokens wrote it: ImportStagedFenced without the
   * entry's token and the file's highest token (both read as 0). Still applied, never written.
   */
  ImportStaged: 8,
  /** `--import-lock-file`: puts every entry staged under the id into the table at once, if it is still empty. */
  ImportCommit: 9,
  /**
   * `--import-lock-file`: one saved entry, staged (not in the table yet) under its import's id,
   * with its fencing token and the file's highest token (the commit raises the token base above both).
   */
  ImportStagedFenced: 10,
  /** A waiter whose client stopped waiting (its acquire-and-wait connection closed): removed if it still waits. Format 4. */
  CancelWait: 11,
  /** Expire (6) that then holds the owner's lock back for `holdMs` (the leader's lock-delay) until a LiftHold names it. Format 4. */
  ExpireAndHold: 12,
  /** Ends the lock-delay of (key, index) begun by the expiry at log position `version`: its first waiter takes the lock. Format 4. */
  LiftHold: 13,
  /**
   * Acquire-and-wait (0x0B): a Request whose entry, if it is left waiting, waits for a client of
   * this batch's proposer incarnation (node name and incarnation), on a connection that ends with
   * that process: the entry is tied to the incarnation until it is granted or ends, and goes with
   * it (CancelWaitsOf). From an incarnation whose waits were cancelled it does nothing (0). Format 5.
   */
  AcquireWait: 14,
  /**
   * The waits of one node incarnation are over (the node died, or restarted as another): every
   * entry still waiting that an AcquireWait of it left (and it was the last to wait on) goes, as a
   * CancelWait would remove it, and later AcquireWaits of that incarnation do nothing. Format 5.
   */
  CancelWaitsOf: 15,
} as const;

/** The first op a format-1 batch may not hold: ops from here on are written in format-4 batches only. */
const FIRST_FORMAT_4_OP = LogOp.CancelWait;
/** The first op a format-4 batch may not hold: ops from here on are written in format-5 batches only. */
const FIRST_FORMAT_5_OP = LogOp.AcquireWait;

/** An imported entry's remaining time when its phase never expires. */
export const NO_REMAINING = 0xffffffff;

/** The entry a command names. */
interface EntryName {
  readonly key: ByteString;
  readonly index: ByteString;
  readonly owner: ByteString;
}

export type LogCommand =
  | ({ readonly op: typeof LogOp.Request } & ReplicatedRequest)
  | ({ readonly op: typeof LogOp.Renew | typeof LogOp.Release } & EntryName)
  | { readonly op: typeof LogOp.ReleaseKey; readonly key: ByteString; readonly owner: ByteString }
  | { readonly op: typeof LogOp.ReleaseAll; readonly owner: ByteString }
  | ({
      readonly op: typeof LogOp.Expire;
      /** The phase the leader saw run out; a newer phase makes the command a no-op. */
      readonly version: number;
    } & EntryName)
  | ({
      readonly op: typeof LogOp.Import;
      /** Milliseconds its phase had left in the lock file, or NO_REMAINING (each node counts them from its apply). */
      readonly remainingMs: number;
      /** Set on the first entry of an import: it (and the batch) only applies to an empty table. */
      readonly first: boolean;
    } & Omit<SavedLock, 'remainingMs'>)
  | ImportStagedCommand
  | { readonly op: typeof LogOp.ImportCommit; readonly importId: number }
  | ({ readonly op: typeof LogOp.CancelWait } & EntryName)
  | ({
      readonly op: typeof LogOp.ExpireAndHold;
      readonly version: number;
      /** Milliseconds the lock is held back (a u32). */
      readonly holdMs: number;
    } & EntryName)
  | {
      readonly op: typeof LogOp.LiftHold;
      readonly key: ByteString;
      readonly index: ByteString;
      /** The log position of the expiry that began the hold. */
      readonly version: number;
    }
  | ({ readonly op: typeof LogOp.AcquireWait } & ReplicatedRequest)
  | {
      readonly op: typeof LogOp.CancelWaitsOf;
      /** The node name of the incarnation whose waits end. */
      readonly node: ByteString;
      readonly incarnation: number;
    };

/** One saved entry of an import, staged until the import's commit (see ReplicaState). */
export type ImportStagedCommand = {
  readonly op: typeof LogOp.ImportStaged | typeof LogOp.ImportStagedFenced;
  /** Drawn by the importing node; the commit names it. */
  readonly importId: number;
  /** At or above every token the file's node ever granted (its lock file's high-water); 0 in the op without tokens. */
  readonly highestToken: number;
  /** Milliseconds its phase had left in the lock file, or NO_REMAINING (counted from the commit's apply). */
  readonly remainingMs: number;
  /** The import's first entry: opens a new staging if the table is empty (refused, 0, if not). */
  readonly first: boolean;
} & Omit<SavedLock, 'remainingMs'>;

export interface BatchHeader {
  /** The proposing node's name: the origin of every entry its requests create. */
  readonly proposer: ByteString;
  /** Chosen at random when the node process starts; with the name it identifies one process. */
  readonly incarnation: number;
  /** 1, 2, 3, … per incarnation; a batch whose seq was already applied is a retried duplicate. */
  readonly seq: number;
}

export interface Batch extends BatchHeader, BatchBounds {
  readonly commands: readonly LogCommand[];
  /**
   * The proposing node's bound on what the table's entries may cost in etcd (bytes, a multiple of
   * 1024; see src/cluster/EtcdSpace.ts): a request of this batch that would create an entry past it
   * gets 0, on every replica alike. 0 or absent: no bound (a batch of a version before
   * ETCD_BOUND_FORMAT, or written before every live node read it).
   */
  readonly entryBytesBound?: number;
  /**
   * The proposing node's --max-table-bytes (a multiple of 1024) and --max-locks-per-owner, enforced
   * by apply on every replica alike (EntryBytesRules); carried in a format-7 batch only (0 or absent: none).
   */
  readonly tableBytesBound?: number;
  readonly ownerEntriesBound?: number;
}

const BATCH_MAGIC = 0x42; // 'B'
const FORMAT = 1;
/**
 * A batch as format 1, that may also hold this version's commands for waiting and lock-delays
 * (CancelWait, ExpireAndHold, LiftHold): a batch holding any of them is written in this format,
 * only once every live node declares it reads it (see LOG_FORMATS_READ).
 */
export const OPS_FORMAT = 4;
/**
 * A batch as format 4, that may also hold the commands of waits tied to their node's incarnation
 * (AcquireWait, CancelWaitsOf): a batch holding any of them is written in this format, only once
 * every live node declares it reads it.
 */
export const INCARNATION_WAITS_FORMAT = 5;
/**
 * Not a value's format but what a node that declares it reads in every batch header: the word older
 * versions wrote as 0 and skipped carries the proposer's bound on the entries' etcd bytes
 * (Batch.entryBytesBound), which apply enforces. Written non-zero only once every live node declares
 * it: a node that skips the word would let an entry in that the others refuse.
 */
export const ETCD_BOUND_FORMAT = 6;
/**
 * A batch as format 5 whose header also carries the proposer's bounds on the table's bytes and on
 * one owner's entries (Batch.tableBytesBound, ownerEntriesBound): written only once every live node
 * reads it, as any batch that carries them.
 */
export const TABLE_BOUNDS_FORMAT = 7;
/** A log value holding several batches (see the file comment). */
export const BUNDLE_FORMAT = 2;
/**
 * Not a value decodeValue reads but how the store may hold one: the log key holds only these two
 * bytes, a reference, and the value is the retained batch put in the same transaction (EtcdLog
 * writes each value once that way and resolves the reference as the watch brings both).
 */
export const REFERENCE_FORMAT = 3;
/** The log key's value under REFERENCE_FORMAT. */
export const REFERENCE_VALUE: Uint8Array = Uint8Array.of(BATCH_MAGIC, REFERENCE_FORMAT);

/** Whether `bytes` is REFERENCE_VALUE. */
export function isReference(bytes: Uint8Array): boolean {
  return bytes.length === 2 && bytes[0] === BATCH_MAGIC && bytes[1] === REFERENCE_FORMAT;
}

/**
 * The log formats this version reads (decodeValue, and EtcdLog's references), as each node
 * declares them in the store with its name: a format is written only once every live node
 * declares it (rolling upgrades).
 */
export const LOG_FORMATS_READ: readonly number[] = [
  FORMAT,
  BUNDLE_FORMAT,
  REFERENCE_FORMAT,
  OPS_FORMAT,
  INCARNATION_WAITS_FORMAT,
  ETCD_BOUND_FORMAT,
  TABLE_BOUNDS_FORMAT,
];
/** The formats of LOG_FORMATS_READ beyond a plain batch: each written only once every live node reads it (EtcdLog.peerView). */
export const GATED_FORMATS: readonly number[] = LOG_FORMATS_READ.filter((format) => format !== FORMAT);
/** Commands in one batch at most (the count is a u16); positions leave room for 2^16 per log value. */
export const MAX_BATCH_COMMANDS = 4_096;
/** A batch header at most: magic, format, the proposer's name (a wire string), incarnation, three bounds, seq, count. */
const MAX_BATCH_HEADER_BYTES = 2 + 1 + MAX_STRING_LENGTH + 4 + 3 * 4 + 4 + 2;
/**
 * Bytes of commands a batch holds at most, so that the whole batch fits one append (which puts it
 * twice in a request etcd caps at 1.5 MiB by default until every node reads references; see MAX_APPEND_BYTES).
 */
export const MAX_BATCH_BYTES = MAX_APPEND_BYTES - MAX_BATCH_HEADER_BYTES;
/** Commands a log value can hold; a position is `version * COMMANDS_PER_VERSION + place in the value`. */
export const COMMANDS_PER_VERSION = 65_536;

/** The log position of the command at place `index` in the log value numbered `version`: its ticket. */
export function commandPosition(version: number, index: number): number {
  return version * COMMANDS_PER_VERSION + index;
}

/** Writes batches; one writer per node is reused so a batch costs one copy. */
export class BatchEncoder {
  private readonly out = new BufferWriter(64 * 1024, 2 * MAX_BATCH_BYTES);

  encode(batch: Batch): Buffer {
    const out = this.out;
    let format = FORMAT;
    for (const c of batch.commands) {
      if (c.op >= FIRST_FORMAT_5_OP) {
        format = INCARNATION_WAITS_FORMAT;
        break;
      }
      if (c.op >= FIRST_FORMAT_4_OP) format = OPS_FORMAT;
    }
    const tableKiB = inKiB(batch.tableBytesBound);
    const ownerEntries = Math.min(batch.ownerEntriesBound ?? 0, 0xffffffff);
    if (tableKiB > 0 || ownerEntries > 0) format = TABLE_BOUNDS_FORMAT;
    try {
      out.u8(BATCH_MAGIC).u8(format).string(batch.proposer).u32(batch.incarnation).u32(inKiB(batch.entryBytesBound));
      if (format === TABLE_BOUNDS_FORMAT) out.u32(tableKiB).u32(ownerEntries);
      out.u32(batch.seq).u16(batch.commands.length);
      for (const c of batch.commands) writeCommand(out, c);
    } catch (error) {
      // The writer is reused: what a failed batch wrote must not lead the next one.
      out.flush();
      throw error;
    }
    return out.flush();
  }
}

/** A header's bound in whole KiB (a u32); 0 for none. */
function inKiB(bytes: number | undefined): number {
  return Math.min(Math.floor((bytes ?? 0) / 1024), 0xffffffff);
}

/** Encoded size of one command, so a node can close a batch before it grows too big. */
export function commandSize(c: LogCommand): number {
  switch (c.op) {
    case LogOp.Request:
    case LogOp.AcquireWait:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length + 2 + 2 + 1 + 1 + 4;
    case LogOp.Renew:
    case LogOp.Release:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length;
    case LogOp.ReleaseKey:
      return 1 + 2 + c.key.length + c.owner.length;
    case LogOp.ReleaseAll:
      return 1 + 1 + c.owner.length;
    case LogOp.Expire:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length + 8;
    case LogOp.Import:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length + 2 + 2 + 1 + 1 + 4 + 1;
    case LogOp.ImportStaged:
      return 1 + 4 + 3 + c.key.length + c.index.length + c.owner.length + 2 + 2 + 1 + 1 + 4 + 1;
    case LogOp.ImportStagedFenced:
      return 1 + 4 + 3 + c.key.length + c.index.length + c.owner.length + 2 + 2 + 1 + 1 + 4 + 1 + 8 + 8;
    case LogOp.ImportCommit:
      return 1 + 4;
    case LogOp.CancelWait:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length;
    case LogOp.ExpireAndHold:
      return 1 + 3 + c.key.length + c.index.length + c.owner.length + 8 + 4;
    case LogOp.LiftHold:
      return 1 + 2 + c.key.length + c.index.length + 8;
    case LogOp.CancelWaitsOf:
      return 1 + 1 + c.node.length + 4;
  }
}

function writeCommand(out: BufferWriter, c: LogCommand): void {
  out.u8(c.op);
  switch (c.op) {
    case LogOp.Request:
    case LogOp.AcquireWait:
      writeLockRequest(out, c);
      out.u8(c.allowCreate ? 1 : 0).u32(c.maxEntries);
      return;
    case LogOp.Renew:
    case LogOp.Release:
      out.string(c.key).string(c.index).string(c.owner);
      return;
    case LogOp.ReleaseKey:
      out.string(c.key).string(c.owner);
      return;
    case LogOp.ReleaseAll:
      out.string(c.owner);
      return;
    case LogOp.Expire:
      out.string(c.key).string(c.index).string(c.owner).f64(c.version);
      return;
    case LogOp.Import:
      writeSavedEntry(out, c);
      out.u8(c.first ? 1 : 0);
      return;
    case LogOp.ImportStaged:
    case LogOp.ImportStagedFenced:
      out.u32(c.importId);
      writeSavedEntry(out, c);
      out.u8(c.first ? 1 : 0);
      if (c.op === LogOp.ImportStagedFenced) out.f64(c.token).f64(c.highestToken);
      return;
    case LogOp.ImportCommit:
      out.u32(c.importId);
      return;
    case LogOp.CancelWait:
      out.string(c.key).string(c.index).string(c.owner);
      return;
    case LogOp.ExpireAndHold:
      out.string(c.key).string(c.index).string(c.owner).f64(c.version).u32(c.holdMs);
      return;
    case LogOp.LiftHold:
      out.string(c.key).string(c.index).f64(c.version);
      return;
    case LogOp.CancelWaitsOf:
      out.string(c.node).u32(c.incarnation);
      return;
  }
}

/** The writer's side of readLockRequest: key, index, owner, TTL, TTW, priority. */
function writeLockRequest(out: BufferWriter, c: LockRequest): void {
  out.string(c.key).string(c.index).string(c.owner).u16(c.ttl).u16(c.ttw).u8(c.priority);
}

/** The writer's side of readSavedEntry: the request's fields, the owner flag, the time left. */
function writeSavedEntry(out: BufferWriter, c: LockRequest & { readonly isOwner: boolean; readonly remainingMs: number }): void {
  writeLockRequest(out, c);
  out.u8(c.isOwner ? 1 : 0).u32(c.remainingMs);
}

/** Bytes that are not a batch (or snapshot) this version reads. */
export class LogFormatError extends Error {
  override name = 'LogFormatError';
}

/** Reads with bounds checks: log values come from the store, and a bad one must not crash us. */
export class CheckedReader {
  private offset = 0;
  private readonly buffer: Buffer;

  constructor(bytes: Uint8Array) {
    this.buffer = asBuffer(bytes);
  }

  get done(): boolean {
    return this.offset === this.buffer.length;
  }

  /** Bytes not read yet. */
  get remaining(): number {
    return this.buffer.length - this.offset;
  }

  skip(n: number): void {
    this.need(n);
    this.offset += n;
  }

  private need(n: number): void {
    if (this.offset + n > this.buffer.length) throw new LogFormatError(`value cut short at byte ${this.offset}`);
  }

  u8(): number {
    this.need(1);
    return this.buffer[this.offset++]!;
  }

  u16(): number {
    this.need(2);
    const v = this.buffer.readUInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  u32(): number {
    this.need(4);
    const v = this.buffer.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  f64(): number {
    this.need(8);
    const v = this.buffer.readDoubleBE(this.offset);
    this.offset += 8;
    return v;
  }

  /** A length-prefixed byte string; `last` itself when it has the same bytes (see sameOrNew). */
  string(last: ByteString = ''): ByteString {
    const length = this.u8();
    this.need(length);
    const s = sameOrNew(last, this.buffer, this.offset, this.offset + length);
    this.offset += length;
    return s;
  }
}

/**
 * Reads a batch's commands. A key, index or owner with the bytes of the last one of its kind is
 * that same string: a batch holds each client's commands in a row, and a client names the same
 * owner and index again and again and releases the key it just requested.
 */
class BatchReader extends CheckedReader {
  private lastKey = '';
  private lastIndex = '';
  private lastOwner = '';

  key(): ByteString {
    return (this.lastKey = this.string(this.lastKey));
  }

  index(): ByteString {
    return (this.lastIndex = this.string(this.lastIndex));
  }

  owner(): ByteString {
    return (this.lastOwner = this.string(this.lastOwner));
  }
}

/** A batch the caller wrote itself: the bytes it encoded, and the commands it encoded them from. */
export interface OwnBatch {
  readonly bytes: Uint8Array;
  readonly commands: readonly LogCommand[];
}

/**
 * The batch the caller wrote itself with this header, or undefined when it wrote none. Its node
 * need not decode those bytes again (see decodeBatch).
 */
export type OwnCommands = (header: BatchHeader) => OwnBatch | undefined;

/**
 * Reads a batch's header and commands; throws LogFormatError on anything malformed. When `own`
 * knows the batch by its header (the node's own proposer, incarnation and seq) and the bytes are
 * exactly those it encoded, its commands are taken from there, not decoded again. Only the bytes
 * say so: a header is readable in etcd, and a batch that copies one must be decoded like any other.
 */
export function decodeBatch(bytes: Uint8Array, own?: OwnCommands): Batch {
  const r = new BatchReader(bytes);
  const { proposer, incarnation, seq, count, format, bounds } = readBatchHeader(r);
  const known = own?.({ proposer, incarnation, seq });
  if (known !== undefined && asBuffer(known.bytes).equals(asBuffer(bytes))) return { proposer, incarnation, seq, ...bounds, commands: known.commands };
  const commands: LogCommand[] = [];
  const lastOp = format === OPS_FORMAT ? FIRST_FORMAT_5_OP - 1 : format === FORMAT ? FIRST_FORMAT_4_OP - 1 : LogOp.CancelWaitsOf;
  for (let i = 0; i < count; i++) commands.push(readCommand(r, lastOp));
  if (!r.done) throw new LogFormatError('bytes after the last command');
  return { proposer, incarnation, seq, ...bounds, commands };
}

/** A batch's header (format 1, 4, 5 or 7), and the number of commands after it; LogFormatError if not a batch. */
function readBatchHeader(r: CheckedReader): BatchHeader & { readonly count: number; readonly format: number; readonly bounds: BatchBounds } {
  if (r.u8() !== BATCH_MAGIC) throw new LogFormatError('not a batch');
  const format = r.u8();
  if (format !== FORMAT && format !== OPS_FORMAT && format !== INCARNATION_WAITS_FORMAT && format !== TABLE_BOUNDS_FORMAT)
    throw new LogFormatError(`batch format ${format} is not known to this version`);
  const proposer = r.string();
  const incarnation = r.u32();
  const bounds = readBounds(r, format);
  const seq = r.u32();
  return { proposer, incarnation, seq, count: r.u16(), format, bounds };
}

/** The bounds a header carries, only those that are set (a batch of an older version, or written before every node read them, has none). */
function readBounds(r: CheckedReader, format: number): BatchBounds {
  const entryBytesBound = r.u32() * 1024;
  const tableBytesBound = format === TABLE_BOUNDS_FORMAT ? r.u32() * 1024 : 0;
  const ownerEntriesBound = format === TABLE_BOUNDS_FORMAT ? r.u32() : 0;
  if (entryBytesBound === 0 && tableBytesBound === 0 && ownerEntriesBound === 0) return NO_BOUNDS;
  return {
    ...(entryBytesBound > 0 && { entryBytesBound }),
    ...(tableBytesBound > 0 && { tableBytesBound }),
    ...(ownerEntriesBound > 0 && { ownerEntriesBound }),
  };
}

const NO_BOUNDS: BatchBounds = {};

/**
 * Writes a bundle of already encoded batches (each a whole batch, format 1, 4, 5 or 7, as its node encoded it).
 * The sequencer (EtcdLog.appendBundle) and tests; the caller keeps the whole within one append (MAX_APPEND_BYTES)
 * and COMMANDS_PER_VERSION commands.
 */
export function encodeBundle(batches: readonly Uint8Array[]): Buffer {
  let length = 4;
  for (const b of batches) length += 4 + b.length;
  const out = Buffer.allocUnsafe(length);
  out[0] = BATCH_MAGIC;
  out[1] = BUNDLE_FORMAT;
  out.writeUInt16BE(batches.length, 2);
  let offset = 4;
  for (const b of batches) {
    out.writeUInt32BE(b.length, offset);
    out.set(b, offset + 4);
    offset += 4 + b.length;
  }
  return out;
}

/** A part of a log value that cannot be read: refused, the same way on every node (see decodeValue). */
export interface RefusedPart {
  readonly refused: string;
}

/** One part of a log value: a batch, or why it is refused. */
export type ValuePart = Batch | RefusedPart;

export function isRefused(part: ValuePart): part is RefusedPart {
  return 'refused' in part;
}

/**
 * Reads a log value: one batch, or each batch of a bundle in order (see the file comment). Total:
 * nothing in the bytes makes it throw. A batch that cannot be read (cut short, an unknown command,
 * bytes after its end, a format this version does not know) is a refused part: every node refuses
 * it alike, applies nothing of it and numbers no command for it; a bundle whose framing cannot be
 * read (cut short, empty, a bundle inside it, more commands than a version numbers) is one
 * refused part. `own` as in decodeBatch.
 */
export function decodeValue(bytes: Uint8Array, own?: OwnCommands): ValuePart[] {
  const buffer = asBuffer(bytes);
  try {
    if (isReference(buffer)) throw new LogFormatError('a reference to a retained batch that did not come with it');
    if (buffer.length < 2 || buffer[0] !== BATCH_MAGIC || buffer[1] !== BUNDLE_FORMAT) return [decodePart(buffer, own)];
    if (buffer.length < 4) throw new LogFormatError('bundle cut short at its count');
    const count = buffer.readUInt16BE(2);
    if (count === 0) throw new LogFormatError('a bundle of no batch');
    const parts: ValuePart[] = [];
    let commands = 0;
    let offset = 4;
    for (let i = 0; i < count; i++) {
      if (offset + 4 > buffer.length) throw new LogFormatError(`bundle cut short at byte ${offset}`);
      const end = offset + 4 + buffer.readUInt32BE(offset);
      if (end > buffer.length) throw new LogFormatError(`bundle cut short in batch ${i + 1} of ${count}`);
      const inner = buffer.subarray(offset + 4, end);
      if (inner.length >= 2 && inner[0] === BATCH_MAGIC && inner[1] === BUNDLE_FORMAT) throw new LogFormatError(`batch ${i + 1} of a bundle is a bundle`);
      const part = decodePart(inner, own);
      if (!isRefused(part)) commands += part.commands.length;
      parts.push(part);
      offset = end;
    }
    if (offset !== buffer.length) throw new LogFormatError('bytes after the last batch of a bundle');
    if (commands > COMMANDS_PER_VERSION) throw new LogFormatError(`a bundle of ${commands} commands (${COMMANDS_PER_VERSION} at most)`);
    return parts;
  } catch (error) {
    if (error instanceof LogFormatError) return [{ refused: error.message }];
    throw error;
  }
}

/** One batch, or why it cannot be read. */
function decodePart(bytes: Uint8Array, own: OwnCommands | undefined): ValuePart {
  try {
    return decodeBatch(bytes, own);
  } catch (error) {
    if (error instanceof LogFormatError) return { refused: error.message };
    throw error;
  }
}

/** One command, of an op no later than `lastOp` (the batch's format says which ops it may hold). */
function readCommand(r: BatchReader, lastOp: number): LogCommand {
  const op = r.u8();
  if (op > lastOp) throw new LogFormatError(`unknown command ${op}`);
  // Each command is one object literal, its fields in the order the node that proposed it built
  // them (ClusterLockService), so apply sees one shape per op on every node.
  switch (op) {
    case LogOp.Request:
    case LogOp.AcquireWait: {
      const key = r.key();
      const index = r.index();
      const owner = r.owner();
      const ttl = r.u16();
      const ttw = r.u16();
      const priority = r.u8();
      const allowCreate = r.u8() !== 0;
      return { op, key, index, owner, ttl, ttw, priority, allowCreate, maxEntries: r.u32() };
    }
    case LogOp.Renew:
    case LogOp.Release: {
      const key = r.key();
      const index = r.index();
      return { op, key, index, owner: r.owner() };
    }
    case LogOp.ReleaseKey: {
      const key = r.key();
      return { op, key, owner: r.owner() };
    }
    case LogOp.ReleaseAll:
      return { op, owner: r.owner() };
    case LogOp.Expire: {
      const key = r.key();
      const index = r.index();
      const owner = r.owner();
      return { op, key, index, owner, version: r.f64() };
    }
    case LogOp.Import: {
      const saved = readSavedEntry(r);
      return { op, ...saved, first: r.u8() !== 0 };
    }
    case LogOp.ImportStaged:
    case LogOp.ImportStagedFenced:
      return readImportStaged(r, op);
    case LogOp.ImportCommit:
      return { op, importId: r.u32() };
    case LogOp.CancelWait: {
      const key = r.key();
      const index = r.index();
      return { op, key, index, owner: r.owner() };
    }
    case LogOp.ExpireAndHold: {
      const key = r.key();
      const index = r.index();
      const owner = r.owner();
      const version = r.f64();
      return { op, key, index, owner, version, holdMs: r.u32() };
    }
    case LogOp.LiftHold: {
      const key = r.key();
      const index = r.index();
      return { op, key, index, version: r.f64() };
    }
    case LogOp.CancelWaitsOf: {
      const node = r.string();
      return { op, node, incarnation: r.u32() };
    }
    default:
      throw new LogFormatError(`unknown command ${op}`);
  }
}

/** A saved entry's fields as an import command carries them (remaining time included). */
function readSavedEntry(r: CheckedReader): Omit<SavedLock, 'remainingMs'> & { remainingMs: number } {
  const request = readLockRequest(r);
  const isOwner = r.u8() !== 0;
  return { ...request, isOwner, token: 0, remainingMs: r.u32() };
}

/** What a request and a saved entry both carry first: key, index, owner, TTL, TTW, priority. */
function readLockRequest(r: CheckedReader): LockRequest {
  const key = r.string();
  const index = r.string();
  const owner = r.string();
  const ttl = r.u16();
  const ttw = r.u16();
  return { key, index, owner, ttl, ttw, priority: r.u8() };
}

/**
 * The fields of an import's staged entry after its op byte (also how a snapshot stores one): with
 * its token and the file's highest token in ImportStagedFenced, both 0 in the older ImportStaged.
 */
export function readImportStaged(r: CheckedReader, op: typeof LogOp.ImportStaged | typeof LogOp.ImportStagedFenced): ImportStagedCommand {
  const importId = r.u32();
  const saved = readSavedEntry(r);
  const first = r.u8() !== 0;
  if (op === LogOp.ImportStaged) return { op, importId, ...saved, first, highestToken: 0 };
  const token = r.f64();
  return { op, importId, ...saved, first, token, highestToken: r.f64() };
}

/** Writes an import's staged entry, op byte included. */
export function writeImportStaged(out: BufferWriter, c: ImportStagedCommand): void {
  writeCommand(out, c);
}
