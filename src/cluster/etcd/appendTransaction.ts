import { asBuffer } from '../../bytes.js';
import type { BundlePart } from '../ReplicatedLog.js';

/** One put of an append's transaction; `lease`, if set, must still exist when etcd applies it. */
export interface AppendPut {
  readonly key: Buffer;
  readonly value: Buffer;
  readonly lease?: string;
}

const EMPTY = Buffer.alloc(0);

/**
 * The puts of one append transaction (EtcdLog.appendBundle), in order: the log key's value (the
 * value itself, or a reference to its retained copy), the retained copy under its own key, then
 * one put of each part's fence key on that part's writer lease. etcd applies a transaction whole
 * or not at all, and refuses it if any lease it names is gone ("requested lease not found"), so
 * each part keeps its own node's fence: a batch whose node gave up on it lands no later than
 * that node's lateCommitMs, whoever appended it. The in-memory etcd of the simulation applies the
 * same puts (test/doubles/MemoryLog.ts), so both are fenced by one piece of code.
 *
 * Invariants: every part's lease is named by exactly one put, its part's fence key; the log key's
 * and the retained copy's puts name no lease (the fences do the fencing).
 */
export function appendPuts(logKey: Buffer, logValue: Uint8Array, retainedKey: Buffer, value: Uint8Array, parts: readonly BundlePart[]): AppendPut[] {
  return [
    { key: logKey, value: asBuffer(logValue) },
    { key: retainedKey, value: asBuffer(value) },
    ...parts.map((part) => ({ key: asBuffer(part.lease.fenceKey), value: EMPTY, lease: part.lease.leaseId })),
  ];
}
