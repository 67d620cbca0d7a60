import { asciiBytes } from '../../../src/bytes.js';
import { BufferWriter } from '../../../src/protocol/BufferWriter.js';
import { Command } from '../../../src/protocol/constants.js';
import { encodeRequest } from '../../../src/protocol/encodeRequest.js';
import { RespKind, type Protocol } from './framing.js';

/** Seconds a benchmark lock may live or wait; far longer than any run, so nothing expires. */
export const CYCLE_TTL_SECONDS = 30;
/** Distinct keys each connection cycles through; each is released before it comes round again. */
const KEYS_PER_RING = 32;

/**
 * The pre-encoded traffic of one connection: a ring of batches, each `depth` commands long, that
 * together run request+release cycles over the connection's own keys. `kinds[i]` lists the reply
 * expected for each command of batch i, in order.
 */
export interface CycleRing {
  readonly batches: readonly Buffer[];
  readonly kinds: readonly Uint8Array[];
}

interface Step {
  readonly frame: Buffer;
  readonly kind: number;
}

function lockserverSteps(key: string, owner: string): Step[] {
  const writer = new BufferWriter(64);
  encodeRequest(writer, {
    command: Command.Request,
    key: asciiBytes(key),
    index: asciiBytes('0'),
    owner: asciiBytes(owner),
    ttl: CYCLE_TTL_SECONDS,
    ttw: CYCLE_TTL_SECONDS,
    priority: 0,
  });
  const request = writer.flush();
  encodeRequest(writer, { command: Command.Release, key: asciiBytes(key), index: asciiBytes('0'), owner: asciiBytes(owner) });
  return [
    { frame: request, kind: Command.Request },
    { frame: writer.flush(), kind: Command.Release },
  ];
}

/** A RESP2 command as Redis clients send it: an array of bulk strings. */
export function respCommand(...args: string[]): Buffer {
  let text = `*${args.length}\r\n`;
  for (const arg of args) text += `$${Buffer.byteLength(arg, 'latin1')}\r\n${arg}\r\n`;
  return Buffer.from(text, 'latin1');
}

/** The Redis lock idiom: SET key owner NX PX ttl to take it, DEL to give it back. */
function respSteps(key: string, owner: string): Step[] {
  return [
    { frame: respCommand('SET', key, owner, 'NX', 'PX', String(CYCLE_TTL_SECONDS * 1000)), kind: RespKind.SetIfAbsent },
    { frame: respCommand('DEL', key), kind: RespKind.Delete },
  ];
}

/**
 * The ring for one connection. Keys are `<prefix>:<n>`, unique to the connection, so connections
 * never contend. The ring holds a whole number of cycles and of batches.
 */
export function buildCycleRing(protocol: Protocol, prefix: string, owner: string, depth: number): CycleRing {
  if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`pipeline depth must be a positive integer, got ${depth}`);
  const stepsPerCycle = 2;
  const unit = depth % stepsPerCycle === 0 ? depth : depth * stepsPerCycle;
  const ringSteps = unit * Math.max(1, Math.ceil((KEYS_PER_RING * stepsPerCycle) / unit));
  const steps: Step[] = [];
  for (let n = 0; steps.length < ringSteps; n++) {
    const key = `${prefix}:${n}`;
    steps.push(...(protocol === 'lockserver' ? lockserverSteps(key, owner) : respSteps(key, owner)));
  }
  const batches: Buffer[] = [];
  const kinds: Uint8Array[] = [];
  for (let i = 0; i < steps.length; i += depth) {
    const batch = steps.slice(i, i + depth);
    batches.push(Buffer.concat(batch.map((s) => s.frame)));
    kinds.push(Uint8Array.from(batch.map((s) => s.kind)));
  }
  return { batches, kinds };
}
