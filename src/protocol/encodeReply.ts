import type { ByteString } from '../bytes.js';
import type { BufferWriter } from './BufferWriter.js';
import { MAX_U16, MAX_U32, NEVER_MS } from './constants.js';
import { STATS_FIELDS, type Contender, type FencedPosition, type QueueView, type StatsReply } from './messages.js';

/** Two-byte counts saturate instead of wrapping: 70000 released locks reads as 65535, not 4464. */
export function saturateU16(value: number): number {
  return value > MAX_U16 ? MAX_U16 : value;
}

/** Find owner (0x01): length-prefixed owner, zero length when the lock is free. */
export function encodeOwnerReply(out: BufferWriter, owner: ByteString): void {
  out.string(owner);
}

/** Request (0x02) and find location (0x03): two-byte position; 1 = owner, 0 = none/refused. */
export function encodePositionReply(out: BufferWriter, position: number): void {
  out.u16(saturateU16(position));
}

/** Fence (0x09): the eight-byte fencing token, 0 when the owner named does not own the lock. */
export function encodeTokenReply(out: BufferWriter, token: number): void {
  out.u64(token);
}

/** Request with fence (0x0A): the two-byte position as 0x02 answers it, then the eight-byte token (0 unless the position is 1). */
export function encodeFencedPositionReply(out: BufferWriter, answer: FencedPosition): void {
  out.u16(saturateU16(answer.position)).u64(answer.token);
}

/** Renew (0x04): one byte, 1 success, 0 failure. */
export function encodeSuccessReply(out: BufferWriter, success: boolean): void {
  out.u8(success ? 1 : 0);
}

/** Release (0x05) and release all (0x06): two-byte number of entries removed. */
export function encodeCountReply(out: BufferWriter, count: number): void {
  out.u16(saturateU16(count));
}

/**
 * List contenders (0x07). The count is two bytes, so at most 65535 entries are sent and the
 * count always matches what follows.
 */
export function encodeListReply(out: BufferWriter, contenders: readonly Contender[]): void {
  const count = saturateU16(contenders.length);
  out.u16(count);
  for (let i = 0; i < count; i++) {
    const c = contenders[i]!;
    out
      .u8(c.priority)
      .u16(c.ttl)
      .u16(c.ttw)
      .string(c.index)
      .string(c.owner)
      .u8(c.isOwner ? 1 : 0);
  }
}

/** The loss notice (0x0C): one byte, how the lock ended (LossReason). */
export function encodeLossReply(out: BufferWriter, reason: number): void {
  out.u8(reason);
}

/**
 * The detailed list (0x0D): a two-byte queue count, then per queue its index, the lock-delay left
 * (four bytes, ms; 0 when not held back) and a two-byte entry count, then per entry what 0x07
 * gives but the index, the time its phase has left (four bytes, ms; NEVER_MS when it never
 * expires) and its fencing token (eight bytes; 0 while it waits). At most 65535 entries in all:
 * the service stops there, and the counts always match what follows.
 */
export function encodeQueuesReply(out: BufferWriter, queues: readonly QueueView[]): void {
  const count = saturateU16(queues.length);
  out.u16(count);
  for (let q = 0; q < count; q++) {
    const queue = queues[q]!;
    const entries = saturateU16(queue.entries.length);
    out.string(queue.index).u32(Math.min(queue.heldForMs, MAX_U32)).u16(entries);
    for (let i = 0; i < entries; i++) {
      const e = queue.entries[i]!;
      out
        .u8(e.priority)
        .u16(e.ttl)
        .u16(e.ttw)
        .string(e.owner)
        .u8(e.isOwner ? 1 : 0)
        .u32(e.remainingMs === null ? NEVER_MS : Math.min(e.remainingMs, NEVER_MS - 1))
        .u64(e.token);
    }
  }
}

/** Stats (0x08): fourteen four-byte values (wrapping, as C counters do) and a two-byte gauge. */
export function encodeStatsReply(out: BufferWriter, stats: StatsReply): void {
  for (const field of STATS_FIELDS) out.u32(stats[field] % (MAX_U32 + 1));
  out.u16(saturateU16(stats.activeConnections));
}
