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

function lockserverSteps(key: string, owner: string, index = '0'): Step[] {
  const writer = new BufferWriter(64);
  encodeRequest(writer, {
    command: Command.Request,
    key: asciiBytes(key),
    index: asciiBytes(index),
    owner: asciiBytes(owner),
    ttl: CYCLE_TTL_SECONDS,
    ttw: CYCLE_TTL_SECONDS,
    priority: 0,
  });
  const request = writer.flush();
  encodeRequest(writer, { command: Command.Release, key: asciiBytes(key), index: asciiBytes(index), owner: asciiBytes(owner) });
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

/** Index of every random-key lock, as a table of rows would name them. */
export const RANDOM_INDEX = 'row';

/**
 * Traffic that a connection makes as it goes: request+release cycles, each on a key drawn
 * uniformly from `keySpace` keys shared by every connection of the run. Frames are templates with
 * a fixed-width decimal key whose digits are overwritten per cycle, so a batch costs a few byte
 * stores, whatever the key space: the generator's cost does not depend on it, and is the same
 * against every target.
 */
export class RandomCycles {
  private readonly buffer: Buffer;
  private readonly request: Buffer;
  private readonly release: Buffer;
  private readonly requestDigits: number;
  private readonly releaseDigits: number;
  private readonly width: number;
  private readonly requestKind: number;
  private readonly releaseKind: number;
  private state: number;
  /** The key of the cycle whose release is still to be sent (odd depths split a cycle over batches). */
  private openKey = -1;
  /** Expected reply kinds of the batch last made. */
  readonly kinds: Uint8Array;

  constructor(
    protocol: Protocol,
    prefix: string,
    owner: string,
    private readonly keySpace: number,
    private readonly depth: number,
    seed: number,
  ) {
    if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`pipeline depth must be a positive integer, got ${depth}`);
    if (!Number.isInteger(keySpace) || keySpace < 1) throw new RangeError(`key space must be a positive integer, got ${keySpace}`);
    this.width = String(keySpace - 1).length;
    const placeholder = '#'.repeat(this.width);
    const key = `${prefix}${placeholder}`;
    const steps = protocol === 'lockserver' ? lockserverSteps(key, owner, RANDOM_INDEX) : respSteps(key, owner);
    this.request = steps[0]!.frame;
    this.release = steps[1]!.frame;
    this.requestKind = steps[0]!.kind;
    this.releaseKind = steps[1]!.kind;
    this.requestDigits = this.request.indexOf(placeholder, 0, 'latin1');
    this.releaseDigits = this.release.indexOf(placeholder, 0, 'latin1');
    this.buffer = Buffer.allocUnsafe(depth * Math.max(this.request.length, this.release.length));
    this.kinds = new Uint8Array(depth);
    this.state = Math.imul((seed | 0) ^ 0x9e3779b9, 0x85ebca6b) >>> 0 || 1;
  }

  private nextKey(): number {
    // xorshift32; modulo bias over 2^32 is negligible for spaces up to 10^7.
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state % this.keySpace;
  }

  private put(template: Buffer, digitsAt: number, key: number, at: number): number {
    template.copy(this.buffer, at);
    let n = key;
    for (let i = digitsAt + this.width - 1 + at; i >= digitsAt + at; i--) {
      this.buffer[i] = 0x30 + (n % 10);
      n = Math.floor(n / 10);
    }
    return at + template.length;
  }

  /**
   * The next batch of `depth` commands. The buffer is reused: call again only once every reply
   * to the previous batch has come (by then the server has read all of it).
   */
  next(): Buffer {
    let at = 0;
    for (let i = 0; i < this.depth; i++) {
      if (this.openKey < 0) {
        this.openKey = this.nextKey();
        at = this.put(this.request, this.requestDigits, this.openKey, at);
        this.kinds[i] = this.requestKind;
      } else {
        at = this.put(this.release, this.releaseDigits, this.openKey, at);
        this.kinds[i] = this.releaseKind;
        this.openKey = -1;
      }
    }
    return this.buffer.subarray(0, at);
  }
}
